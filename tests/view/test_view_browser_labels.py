"""Several configurations stay readable at 1280 px in Chromium (issue 36): a long model name in three configurations
that differ in four settings (one a long extra_body) is labelled by the one setting that tells them apart; the HTML
report's and the viewer's tables fit the window with every column in view, chart labels start inside their chart,
the report lists every differing setting whole in its Configurations table and the viewer shows it on hover."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from support import require
from view_browser import Browser, chromium
from view_support import viewer, writer

from agentbench_async.analytics import commands
from analytics_support import ALPHA_KG, ALPHA_OS, KG_FULL, run_config  # noqa: E402 (on the path through view_support)

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
FITS = "[document.documentElement.scrollWidth, window.innerWidth]"
# for each table: does its last column end inside the window (no column pushed out of view)?
COLUMNS_IN_VIEW = ("[...document.querySelectorAll('table')].filter(t => t.offsetParent !== null).map(t => { "
                   "const cells = t.querySelectorAll('tr:first-child > *'); const last = cells[cells.length - 1]; "
                   "return last.getBoundingClientRect().right <= window.innerWidth + 1; })")
LABELS_INSIDE = "[...document.querySelectorAll('svg text[text-anchor=end]')].map(t => t.getBBox().x >= 0)"


def _three_configurations(folder: Path) -> Path:
    write = writer(folder)
    base = {"name": MODEL, "temperature": 0.0}
    a, b, c = run_config("agentbench"), run_config("full"), run_config("agentbench")
    a["models"] = [{**base, "max_tokens": 256}]
    b["models"] = [{**base, "max_tokens": 128, "temperature": 0.7,
                    "extra_body": {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "repetition_penalty": 1.05}}]
    c["models"] = [{**base, "max_tokens": 512, "temperature": 0.2}]
    path = write("three", {(MODEL, "kg"): ALPHA_KG, (MODEL, "os"): ALPHA_OS}, config=a, fingerprint="aaaa1111", run_id="run-a")
    write("three", {(MODEL, "kg"): KG_FULL, (MODEL, "os"): ALPHA_OS}, config=b, fingerprint="bbbb2222", run_id="run-b", path=path)
    return write("three", {(MODEL, "kg"): KG_FULL}, config=c, fingerprint="cccc3333", run_id="run-c", path=path)


async def test_several_configurations_are_readable_at_1280_px(tmp_path: Path) -> None:
    require(chromium() is not None, "Debian's chromium is not installed (apt-get install -y chromium)")
    path = _three_configurations(tmp_path)
    report = tmp_path / "report.html"
    commands.report([path], html=report, json_out=False, console=Console(file=io.StringIO()))
    async with Browser(tmp_path / "profile") as b:
        await b.goto(report.as_uri())
        assert await b.js(FITS) == [1280, 1280]  # nothing wider than the window
        assert all(await b.js(COLUMNS_IN_VIEW))
        assert all(await b.js(LABELS_INSIDE))
        rows = await b.js("[...document.querySelectorAll('h2 ~ table tbody tr td:first-child')].map(td => td.innerText)")
        assert f"{MODEL} (max_tokens: 128)" in rows and not any("extra_body" in r or "history" in r for r in rows)
        configured = await b.js("[...document.querySelectorAll('table.wrap tbody tr')].map(tr => tr.innerText)")
        assert any("history: full" in r and '"repetition_penalty": 1.05' in r and "temperature: 0.7" in r for r in configured)
        await b.screenshot(tmp_path / "report-configurations.png")
        async with viewer([path]) as base:
            for page in ("/", "/failures"):
                await b.goto(base + page)
                assert await b.js(FITS) == [1280, 1280], page
                assert all(await b.js(COLUMNS_IN_VIEW)), page
                assert all(await b.js(LABELS_INSIDE)), page
            await b.goto(base + "/")
            hover = await b.js("[...document.querySelectorAll('[data-table=scores] span[title]')].map(s => [s.innerText, s.title])")
            assert (f"{MODEL} (max_tokens: 128)", f"{MODEL} (history: full, extra_body: "
                    '{"chat_template_kwargs": {"enable_thinking": false}, "repetition_penalty": 1.05, "top_k": 20}, '
                    "max_tokens: 128, temperature: 0.7)") in [tuple(h) for h in hover], hover
            await b.screenshot(tmp_path / "view-configurations.png")
        assert not b.console_errors, b.console_errors
