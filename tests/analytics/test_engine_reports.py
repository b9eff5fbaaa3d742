"""End to end through the real engine: the echo self-test env played by the loopback mock model
(oracle and weak policies, two repeats), then the report, HTML (rendered in headless Chromium) and compare."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from support import require
from rich.console import Console

from agentbench_async.analytics import commands, load
from agentbench_async.analytics.report import build_report
from agentbench_async.analytics.stats import wilson_interval
from agentbench_async.config import build_config
from agentbench_async.environment import stable_choice
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.scheduler import Evaluation

TASKS = 12
REPEATS = 2
# What the echo env's weak policy does per task (envs/echo/policies.py: one mode per task id).
WEAK_CLASS = {0: "completed_success", 1: "completed_wrong", 2: "invalid_format", 3: "invalid_action",
              4: "context_limit_exceeded", 5: "invalid_format"}


def _expected_weak() -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(TASKS):
        cls = WEAK_CLASS[stable_choice(f"dev-{i:05d}", 6)]
        counts[cls] = counts.get(cls, 0) + REPEATS
    return counts


async def _run_echo(out: Path) -> int:
    server = MockModelServer(MockOptions(policy="oracle", latency_ms=2))
    base_url = await server.start()
    try:
        raw = {
            "out": out, "split": "dev", "envs": ["echo"], "limit": TASKS, "repeats": REPEATS, "max_concurrency": 16,
            "models": [
                {"name": "mock-oracle", "base_url": base_url, "task_header": True, "price_in": 3.0, "price_out": 15.0},
                {"name": "mock-weak", "base_url": base_url, "task_header": True},
            ],
        }  # fmt: skip
        summary = await Evaluation(build_config(raw, where="test"), console=Console(quiet=True), progress=False,
                                   command="run").run()
    finally:
        await server.stop()
    return summary.episodes


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("engine") / "echo.duckdb"
    assert asyncio.run(_run_echo(out)) == 2 * TASKS * REPEATS
    return out


def test_engine_run_classes_scores_and_repeats(engine_run: Path) -> None:
    expected = _expected_weak()
    with load(engine_run) as res:
        rep = build_report(res)
    counts = {r["model"]: r for r in rep.class_counts.iter_rows(named=True)}
    assert {c: counts["mock-weak"][c] for c in expected} == expected
    assert counts["mock-weak"]["total"] == TASKS * REPEATS
    assert counts["mock-oracle"]["completed_success"] == TASKS * REPEATS
    scores = {r["model"]: r for r in rep.scores.iter_rows(named=True)}
    wins = expected.get("completed_success", 0)
    assert scores["mock-weak"]["n"] == TASKS * REPEATS
    assert scores["mock-weak"]["score"] == pytest.approx(wins / (TASKS * REPEATS))
    assert (scores["mock-weak"]["ci_low"], scores["mock-weak"]["ci_high"]) == pytest.approx(wilson_interval(wins, TASKS * REPEATS))
    assert scores["mock-oracle"]["score"] == 1.0
    assert rep.overall.is_empty()  # echo is not one of AgentBench's eight: no OA
    # the weak policy is deterministic per task: pass@2 == pass^2 == pass@1
    weak_k = rep.pass_k.filter(rep.pass_k["model"] == "mock-weak").sort("k")
    assert weak_k["k"].to_list() == [1, 2]
    assert weak_k["pass_at_k"].to_list() == pytest.approx([wins / (2 * TASKS)] * 2)
    assert weak_k["pass_hat_k"].to_list() == pytest.approx([wins / (2 * TASKS)] * 2)
    # operations: real HTTP attempts with tokens; cost from the price in the run config
    usage = {r["model"]: r for r in rep.usage.iter_rows(named=True)}
    oracle = usage["mock-oracle"]
    assert oracle["input_tokens"] > 0
    assert oracle["cost_usd"] == pytest.approx(oracle["input_tokens"] * 3e-6 + oracle["output_tokens"] * 15e-6)
    assert usage["mock-weak"]["cost_usd"] is None
    reasons = rep.reasons.filter(rep.reasons["failure_class"] == "invalid_action").row(0, named=True)
    assert reasons["reason"] == "not an integer: 'seven'"
    assert reasons["examples"][0]["last_output"] == "ANSWER: seven"


def test_engine_run_compare_flips(engine_run: Path) -> None:
    con = Console(width=220, record=True, color_system=None)
    assert commands.compare(engine_run, engine_run, model_a="mock-oracle", model_b="mock-weak", console=con) == 0
    text = con.export_text()
    pairs = TASKS * REPEATS
    a_only = pairs - _expected_weak().get("completed_success", 0)
    assert f"{pairs} pairs: {a_only} tasks only A solved, 0 only B solved" in text
    assert "the success difference is significant at 5%" in text


def test_engine_run_compare_reads_at_80_columns(engine_run: Path) -> None:
    con = Console(width=80, record=True, color_system=None)
    assert commands.compare(engine_run, engine_run, model_a="mock-oracle", model_b="mock-weak", console=con) == 0
    text = con.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    assert "McNemar" in text and "Wilcoxon" in text and "completed_success" in text  # headers and classes whole


def test_engine_run_show_episode(engine_run: Path) -> None:
    task = next(f"dev-{i:05d}" for i in range(TASKS) if stable_choice(f"dev-{i:05d}", 6) == 3)
    con = Console(width=200, record=True, color_system=None)
    assert commands.show(engine_run, f"mock-weak/echo/dev/{task}/0", console=con) == 0
    text = con.export_text()
    assert "invalid_action" in text and "ANSWER: seven" in text and "Repeat this number" in text


def test_html_report_renders_in_headless_chromium(engine_run: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    con = Console(width=200, record=True, color_system=None)
    assert commands.report([engine_run], html=html, json_out=False, console=con) == 0
    source = html.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']https?://""", source), "the report must not load anything from the network"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    require(browser is not None, "Debian's chromium is not installed (apt-get install -y chromium)")
    assert browser is not None
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=90, check=True).stdout
    for kind in ("failure-classes", "scores", "turns-histogram", "latency", "calls-per-second"):
        assert f'data-plot="{kind}"' in dom, kind
    assert dom.count('class="segment"') >= 6  # oracle: 1 class; weak: 5 classes
    assert dom.count('data-plot="turns-histogram"') == 2
    assert 'class="interval"' in dom and 'class="series"' in dom
    shot = tmp_path / "report.png"
    subprocess.run([*base, "--window-size=1200,1600", f"--screenshot={shot}", html.as_uri()], capture_output=True,
                   timeout=90, check=True)
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def test_engine_records_the_upstream_status_of_every_episode(engine_run: Path) -> None:
    from agentbench_async.statuses import paper_status_of

    with duckdb.connect(str(engine_run), read_only=True) as con:
        rows = con.execute("SELECT status, paper_status FROM episodes").fetchall()
    assert rows and all(paper == paper_status_of(status) and paper is not None for status, paper in rows)
    assert {paper for _, paper in rows} >= {"completed", "agent validation failed", "agent invalid action", "agent context limit"}
