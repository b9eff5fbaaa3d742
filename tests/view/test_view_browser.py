"""`agentbench view` in a real browser: Debian's headless Chromium, driven over the DevTools protocol
(view_browser.py), loads every page of an `agentbench demo` file, follows a failure cell to its episodes
and one to its transcript, checks what is on each page and keeps screenshots in the test's tmp dir; a
hostile reply renders as text; the live page refreshes itself while `agentbench run` writes the file."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from support import require
from view_browser import Browser, chromium
from view_support import HOSTILE, HOSTILE_ID, get, viewer

from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.store.live import live_dir

DEMO_ENVS = "echo,kg,ltp"  # ltp brings the judge's calls


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view-demo") / "demo.duckdb"
    subprocess.run([sys.executable, "-m", "agentbench_async.cli", "demo", "--out", str(out), "--env", DEMO_ENVS, "--limit", "4",
                    "--no-progress"], check=True, capture_output=True, timeout=300)  # fmt: skip
    return out


def _need_chromium() -> None:
    require(chromium() is not None, "Debian's chromium is not installed (apt-get install -y chromium)")


async def _shot(browser: Browser, folder: Path, name: str) -> None:
    path = await browser.screenshot(folder / f"{name}.png")
    assert path.stat().st_size > 15_000, f"{name}: a blank page?"


async def test_every_page_of_a_demo_file_in_chromium(demo_file: Path, known_file: Path, tmp_path: Path) -> None:
    _need_chromium()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    async with viewer([demo_file]) as base, Browser(tmp_path / "profile") as b:
        await b.goto(base + "/")
        text = await b.text()
        assert "Scores" in text and "Overall AgentBench score (OA)" in text and "mock-oracle · kg" in text
        assert await b.js("document.querySelectorAll('[data-table=scores] tbody tr').length") == 6  # 2 models x 3 envs
        assert await b.js("!!document.querySelector('svg[data-plot=scores] .interval')")
        assert await b.js("getComputedStyle(document.querySelector('header')).display") == "flex"  # the stylesheet loaded
        await _shot(b, shots, "overview")

        await b.goto(base + "/failures")
        cell = await b.js("(() => { const a = [...document.querySelectorAll('a.cell')].find(a => a.dataset.class !== "
                          "'completed_success' && a.href.includes('mock-weak')); return [a.dataset.class, parseInt(a.textContent)]; })()")
        cls, count = cell
        await _shot(b, shots, "failures")
        await b.click(f"a.cell[data-class={cls}][href*='mock-weak']")
        query = parse_qs(urlparse(await b.js("location.href")).query)
        assert query["model"] == ["mock-weak"] and query["status"] == [cls] and "env" in query  # the filters are in the URL
        classes = await b.js("[...document.querySelectorAll('[data-table=episodes] .badge')].map(e => e.dataset.class)")
        assert classes == [cls] * count
        assert f"{count} episode" in await b.text()
        await _shot(b, shots, "episodes")

        await b.click("a.episode")
        assert (await b.js("location.pathname")) == "/episode"
        assert await b.js("document.querySelectorAll('section.turn').length") >= 2
        assert await b.js("document.querySelectorAll('section.role-assistant table.calls').length") >= 1  # HTTP attempts
        shown = await b.js("document.querySelector('.status').dataset.status")
        assert shown == (cls if not cls.startswith("completed_") else "completed")
        await _shot(b, shots, "transcript")

        await b.goto(base + "/episodes?model=mock-weak&env=ltp")
        await b.click("a.episode")
        assert await b.js("!!document.querySelector('[data-section=judge] table.calls')"), "ltp's judge calls"
        await _shot(b, shots, "transcript-judge")

        await b.goto(base + "/live")
        assert await b.js("document.querySelector('.state').dataset.running") == "no"
        first = await b.js("document.querySelector('.note').textContent")
        await b.js("window.__kept = 1")
        for _ in range(40):  # the page refreshes itself in place (no reload: the marker stays)
            await asyncio.sleep(0.25)
            if await b.js("document.querySelector('.note').textContent") != first:
                break
        else:
            raise AssertionError("the live page did not refresh itself")
        assert await b.js("window.__kept") == 1
        await _shot(b, shots, "live")

        await b.goto(base + "/compare")
        text = await b.text()
        assert "A = mock-oracle vs B = mock-weak" in text and "exact McNemar" in text and "Tasks that flipped" in text
        await _shot(b, shots, "compare")
        await b.click("[data-table=flips] tbody a")
        assert (await b.js("location.pathname")) == "/episode"

        await b.goto(base + "/sql?q=" + "SELECT%20model,%20env,%20count(*)%20AS%20n%20FROM%20episodes%20GROUP%20BY%20ALL")
        assert await b.js("document.querySelectorAll('[data-table=sql] tbody tr').length") == 6
        # the download CSV button: a POST of the page's form (its query and the server's token), as the browser sends it
        assert await b.js("document.querySelector('form.csv').method") == "post"
        posted = await b.js("fetch('/sql.csv', {method: 'POST', body: new URLSearchParams(new FormData(document.querySelector('form.csv')))})"
                            ".then(r => r.text())")  # fmt: skip
        assert posted.splitlines()[0] == "model,env,n" and len(posted.splitlines()) == 7
        assert await b.js("fetch('/sql.csv?q=SELECT%201').then(r => r.status)") == 405  # what a link or <img> could do
        await _shot(b, shots, "sql")

    async with viewer([known_file]) as base, Browser(tmp_path / "profile2") as b:
        await b.goto(f"{base}/episode?id={HOSTILE_ID}")
        assert await b.js("typeof window.__pwned") == "undefined"
        assert await b.js("document.querySelectorAll('main script, main img, main b').length") == 0
        assert HOSTILE in await b.text()  # the reply is on the page as text
        await _shot(b, shots, "hostile")
        assert not b.console_errors, b.console_errors
    assert len(list(shots.glob("*.png"))) == 9


async def test_live_page_follows_a_running_evaluation_in_chromium(tmp_path: Path) -> None:
    _need_chromium()
    out = tmp_path / "running.duckdb"
    mock = MockModelServer(MockOptions(policy="oracle", latency_ms=150))
    url = await mock.start()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", url, "--task-header",
        "--env", "echo", "--split", "dev", "--env-option", "echo.tasks=40", "--env-option", "echo.turns=5",
        "--max-concurrency", "4", "--no-progress", "--out", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    try:
        for _ in range(400):
            if live_dir(out).joinpath("manifest.json").exists():
                break
            assert proc.returncode is None
            await asyncio.sleep(0.05)
        async with viewer([out]) as base, Browser(tmp_path / "profile") as b:
            await b.goto(base + "/live")
            assert await b.js("document.querySelector('.state').dataset.running") == "yes"
            done = "document.querySelector('[data-figure=\"episodes done\"] .v').textContent"
            before = await b.js(done)
            assert before.endswith("/40")
            await b.js("window.__kept = 1")
            for _ in range(60):
                await asyncio.sleep(0.25)
                now = await b.js(done)
                if int(now.split("/")[0]) > int(before.split("/")[0]):
                    break
            else:
                raise AssertionError(f"the live page stayed at {before}")
            assert await b.js("window.__kept") == 1
            await b.screenshot(tmp_path / "live-running.png")
            # the SQL box on a running file: the snapshot's folder stays readable with external access off
            status, page, _ = await get(base + "/sql?q=SELECT+count(*)+AS+n+FROM+episodes")
            assert status == 200 and 'class="error"' not in page and 'data-table="sql"' in page
            if await b.js("!!document.querySelector('[data-table=in-progress] a.episode')"):
                await b.click("[data-table=in-progress] a.episode")
                assert "running" in await b.text() or "completed" in await b.text()  # it may have finished meanwhile
            assert await asyncio.wait_for(proc.wait(), 120) == 0
            await b.goto(base + "/live")
            assert await b.js("document.querySelector('.state').dataset.running") == "no"
            assert await b.js(done) == "40/40"
            await b.screenshot(tmp_path / "live-finished.png")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await mock.stop()
