"""The viewer's honesty in a real browser (Debian's headless Chromium over DevTools, view_browser.py): two
configurations are two rows whose chart labels are whole, environment text in a transcript looks like the
environment's, and after Ctrl-C the live page says what a resume re-runs instead of 'ETA done'."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from support import require
from view_browser import Browser, chromium
from view_support import viewer, writer

from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.store.live import live_dir
from analytics_support import mind2web_rounds, two_configurations  # noqa: E402 (on the path through view_support)

# every label of the score chart starts inside the chart (an SVG text cut at its left edge starts below 0)
LABELS_INSIDE = ("[...document.querySelectorAll('svg[data-plot=scores] text[text-anchor=end]')]"
                 ".map(t => [t.textContent, t.getBBox().x >= 0])")


def _need_chromium() -> None:
    require(chromium() is not None, "Debian's chromium is not installed (apt-get install -y chromium)")


async def test_configurations_and_environment_text_in_chromium(tmp_path: Path) -> None:
    _need_chromium()
    write = writer(tmp_path)
    configured = two_configurations(write)
    rounds, episode = mind2web_rounds(write, marked=True)
    async with viewer([configured]) as base, Browser(tmp_path / "profile") as b:
        await b.goto(base + "/")
        rows = await b.js("[...document.querySelectorAll('[data-table=scores] tbody tr td:first-child')].map(td => td.innerText)")
        assert rows == ["alpha (history: agentbench) · kg", "alpha (history: full) · kg", "alpha (history: agentbench) · os"]
        labels = await b.js(LABELS_INSIDE)
        assert [name for name, _ in labels] == rows and all(inside for _, inside in labels), labels
        await b.screenshot(tmp_path / "overview-configurations.png")
        await b.goto(base + "/failures")
        labels = await b.js("[...document.querySelectorAll('svg[data-plot=failure-classes] text[text-anchor=end]')]"
                            ".map(t => t.getBBox().x >= 0)")
        assert len(labels) == 3 and all(labels)
    async with viewer([rounds]) as base, Browser(tmp_path / "profile2") as b:
        await b.goto(f"{base}/episode?id={episode}")
        injected = await b.js("[...document.querySelectorAll('section.turn.injected')].map(s => "
                              "[s.dataset.turn, getComputedStyle(s).borderLeftStyle, s.querySelector('.turn-head').innerText])")
        assert [turn for turn, _, _ in injected] == ["0", "1", "2"]
        assert all(style == "dashed" and "written by the environment, not the model" in head for _, style, head in injected)
        replies = await b.js("[...document.querySelectorAll('section.turn[data-by-model=yes]')].map(s => s.querySelector('pre').innerText)")
        assert replies == ["Thought: none of these.\nAnswer: A.", "Thought: none of these.\nAnswer: A. (round 2)"]
        await b.screenshot(tmp_path / "transcript-examples.png")
        assert not b.console_errors, b.console_errors


async def test_the_live_page_after_ctrl_c_says_what_a_resume_re_runs(tmp_path: Path) -> None:
    """Before: '6/6 … ETA done' with a cancelled episode in the file. Now: the finished episodes of the total, the
    interruption and what the same command would re-run; `report` says the same."""
    _need_chromium()
    out = tmp_path / "stopped.duckdb"
    mock = MockModelServer(MockOptions(policy="oracle", latency_ms=400))
    url = await mock.start()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", url, "--task-header",
        "--env", "echo", "--split", "dev", "--env-option", "echo.tasks=30", "--env-option", "echo.turns=4",
        "--max-concurrency", "3", "--no-progress", "--out", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    try:
        for _ in range(600):  # until a few episodes are stored and others are under way
            manifest = live_dir(out) / "manifest.json"
            if manifest.exists() and '"done": 0' not in manifest.read_text() and '"done"' in manifest.read_text():
                break
            assert proc.returncode is None
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 130, err.decode()
        assert "cancelled): run the same command again to resume" in err.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await mock.stop()
    report = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(out)], capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "80"}, timeout=120)  # fmt: skip
    flat = " ".join(report.stdout.split())
    assert report.returncode == 0 and "was interrupted (Ctrl-C) at" in flat, report.stderr
    assert "running the same command again resumes: it re-runs" in flat and "cancelled" in flat
    async with viewer([out]) as base, Browser(tmp_path / "profile") as b:
        await b.goto(base + "/live")
        figure = "document.querySelector('[data-figure=\"{}\"] .v').textContent"
        done, total = map(int, (await b.js(figure.format("episodes done"))).replace(",", "").split("/"))
        eta = await b.js(figure.format("ETA"))
        assert done < total and eta.startswith("stopped: ") and eta.endswith(" to re-run"), (done, total, eta)
        notes = await b.js("[...document.querySelectorAll('[data-note=stopped]')].map(p => p.innerText)")
        assert any("was interrupted (Ctrl-C)" in n for n in notes) and any("it re-runs" in n for n in notes), notes
        assert (await b.js("document.querySelector('.state').textContent")).startswith("not running, and not finished")
        await b.screenshot(tmp_path / "live-interrupted.png")
