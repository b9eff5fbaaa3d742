"""Spend control (issue 45): a run stops at its cost cap (no new call, episodes in flight cancelled, one line, exit
code 3) and a resume with a higher cap finishes it with every episode stored once; a per-episode token limit ends an
episode with its own status, counted in the report; a model's own cap stops only that model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentbench_async import cli
from agentbench_async.analytics.loading import load
from agentbench_async.config import build_config
from agentbench_async.errors import ConfigError
from agentbench_async.scheduler import RunSummary
from agentbench_async.settings import deviations

from agentbench_async.mock.server import MockModelServer, MockOptions

from engine_support import app_in_thread, echo_config, query, run, start_mock

PRICES = {"price_in": 1000.0, "price_out": 1000.0}  # USD per 1M tokens: a token costs 0.001 USD


def _spent(path: Path) -> tuple[float, int]:
    """USD and tokens of every answered call in the file, at PRICES."""
    (tokens,) = query(path, "SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM model_calls WHERE input_tokens IS NOT NULL")[0]
    return tokens * 0.001, int(tokens)


def _mock_cli(base_url: str, out: Path, *extra: str) -> list[str]:
    return ["run", "--model", "mock-oracle", "--base-url", base_url, "--task-header", "--env", "echo", "--split", "test",
            "--env-option", "echo.tasks=60", "--env-option", "echo.turns=3", "--max-concurrency", "8", "--no-progress",
            "--price", "mock-oracle=1000,1000", "--out", str(out), *extra]  # fmt: skip


def test_max_cost_stops_the_run_and_a_higher_cap_finishes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "capped.duckdb"
    with app_in_thread(MockModelServer(MockOptions(latency_ms=5)).app) as port:
        base_url = f"http://127.0.0.1:{port}/v1"
        code = cli.main(_mock_cli(base_url, out, "--max-cost", "2"))
        err = capsys.readouterr().err
        assert code == 3
        stop_lines = [line for line in err.splitlines() if line.startswith("stopped:")]
        assert len(stop_lines) == 1 and "--max-cost 2 USD" in stop_lines[0], err
        spent, _ = _spent(out)
        # at most one wave of the calls in flight over the cap: 8 episodes at once, one call each
        (biggest,) = query(out, "SELECT max(input_tokens + output_tokens) FROM model_calls")[0]
        assert 2.0 <= spent <= 2.0 + 8 * biggest * 0.001
        (finished,) = query(out, "SELECT count(*) FROM episodes WHERE status <> 'cancelled'")[0]
        assert 0 < finished < 60
        # the same cap again: nothing runs, the same one line and exit code
        assert cli.main(_mock_cli(base_url, out, "--max-cost", "2")) == 3
        assert "nothing run" in capsys.readouterr().err
        assert _spent(out)[0] == spent
        # a higher cap finishes it: every episode once, none cancelled
        assert cli.main(_mock_cli(base_url, out, "--max-cost", "1000")) == 0
    with load(out) as res:
        kept = res.sql("SELECT count(*), count(DISTINCT episode_id), count(*) FILTER (WHERE status = 'cancelled') FROM episode_outcomes").rows()
    assert kept == [(60, 60, 0)]


async def _echo_run(out: Path, echo: dict[str, int], mock: dict[str, Any] | None = None, **settings: Any) -> RunSummary:
    """A run of the echo environment with these options against a fresh mock model."""
    server = await start_mock(**(mock or {}))
    try:
        return await run(echo_config(out, server.base_url, env_options={"echo": echo}, **settings))
    finally:
        await server.stop()


def _report_text(path: Path) -> str:
    """agentbench report's tables for ``path``, wide enough that no column is cut."""
    from rich.console import Console

    from agentbench_async.analytics import commands

    console = Console(record=True, width=250)
    commands.report([path], html=None, json_out=False, console=console)
    return console.export_text()


async def test_episode_token_limit_ends_with_its_own_status_counted_in_the_report(tmp_path: Path) -> None:
    out = tmp_path / "limited.duckdb"
    # three numbers a task, one call each: a limit below two calls' tokens ends every episode after its second reply
    summary = await _echo_run(out, {"turns": 3, "tasks": 6}, episode_limits={"tokens": 40})
    assert summary.statuses == {"episode_limit_exceeded": 6}
    rows = query(out, "SELECT n_turns, error, details->>'limit', paper_status FROM episodes")
    assert all(r[0] < 3 and "episode token limit reached" in r[1] and r[2] == "tokens" for r in rows)
    (limit_tokens,) = query(out, "SELECT min(input_tokens + output_tokens) FROM episodes")[0]
    assert limit_tokens >= 40
    with load(out) as res:
        classes = res.failure_classes.to_dicts()
        assert [(c["failure_class"], c["episodes"], c["infra"]) for c in classes] == [("episode_limit_exceeded", 6, False)]
        (config,) = res.sql("SELECT config FROM runs").rows()[0]
    stored = json.loads(config)
    assert stored["episode_limits"] == {"tokens": 40}
    # on an AgentBench environment the limit is a recorded deviation (echo, the engine's own, has no paper to differ from)
    assert [d.value for d in deviations({**stored, "envs": ["os"], "env_options": {}}) if d.setting == "episode_limits"] == ["tokens 40"]
    # the report counts them in their own column (shown only where such episodes are)
    assert "episode limit exceeded" in _report_text(out)
    plain = tmp_path / "plain.duckdb"
    await _echo_run(plain, {"tasks": 2})
    assert "episode limit exceeded" not in _report_text(plain)
    # a resume does not re-run them: an agent outcome
    again = await _echo_run(out, {"turns": 3, "tasks": 6}, episode_limits={"tokens": 40})
    assert again.episodes == 0 and again.skipped == 6


async def test_episode_wall_time_limit(tmp_path: Path) -> None:
    out = tmp_path / "slow.duckdb"
    summary = await _echo_run(out, {"turns": 3, "tasks": 2}, {"latency_ms": 400}, episode_limits={"seconds": 0.6})
    assert summary.statuses == {"episode_limit_exceeded": 2}
    assert all("wall-time" in e for (e,) in query(out, "SELECT error FROM episodes"))


async def test_a_model_cap_stops_that_model_only(tmp_path: Path) -> None:
    out = tmp_path / "two.duckdb"
    models = [{"name": "mock-oracle", "max_total_tokens": 200}, {"name": "mock-weak"}]
    summary = await _echo_run(out, {"turns": 2, "tasks": 40}, {"latency_ms": 2}, models=models, max_concurrency=4)
    per = dict(query(out, "SELECT model, count(*) FILTER (WHERE status <> 'cancelled') FROM episodes GROUP BY model"))
    assert per["mock-weak"] == 40
    assert 0 < per["mock-oracle"] < 40
    assert not summary.cap_reached  # the run itself was not capped


def test_caps_and_limits_checked_in_one_line(tmp_path: Path) -> None:
    base = {"out": tmp_path / "x.duckdb", "envs": ["echo"], "models": [{"name": "m"}]}
    with pytest.raises(ConfigError, match="max_cost needs the prices of model 'm'"):
        build_config({**base, "max_cost": 5}, where="test")
    with pytest.raises(ConfigError, match="episode_limits.tokens: expected a positive integer"):
        build_config({**base, "episode_limits": {"tokens": 1.5}}, where="test")
    with pytest.raises(ConfigError, match="episode_limits.turns: unknown limit"):
        build_config({**base, "episode_limits": {"turns": 3}}, where="test")
    cfg = build_config({**base, "max_total_tokens": 1000}, where="test")
    plain = build_config(base, where="test")
    assert cfg.fingerprint() == plain.fingerprint()  # a cap is operational: a resume with another cap continues
    limited = build_config({**base, "episode_limits": {"tokens": 1000}}, where="test")
    assert limited.fingerprint() != plain.fingerprint()  # a limit decides results: another configuration


def test_progress_line_and_live_page_show_the_spend_and_its_projection() -> None:
    from rich.console import Console

    from agentbench_async.progress import Progress
    from agentbench_async.records import CallRow
    from agentbench_async.spend import Caps, Prices, SpendMeter
    from agentbench_async.store.live import LiveStatus
    from agentbench_async.view.pages import _spend_figures

    meter = SpendMeter({"m": Prices(1000.0, 1000.0)}, Caps(cost=50.0), {})
    meter.add_earlier("m", 4000, 1000, 5.0, 10)  # an earlier invocation: 5 USD
    progress = Progress(Console(file=None, force_terminal=False), enabled=False)
    progress.spend = meter
    progress.add_stream("m", "echo", 10)
    for _ in range(2):
        progress.started("m", "echo")
        meter.record(CallRow(turn=1, attempt=1, http_status=200, latency_ms=1.0, model="m", input_tokens=900, output_tokens=100))
        progress.finished("m", "echo", "completed")
    # 2 of 10 episodes ended for 2 USD this time: 5 + 2 spent, 5 + 2 x 10 / 2 = 15 projected
    assert "spent 7.00 USD of 50 (projected 15.00)" in progress.line()
    status = LiveStatus.from_manifest({"run_id": "r", "pid": 1, "updated_at": 0, "progress": progress.snapshot()})
    assert dict(_spend_figures(status.spend)) == {"spent (all calls)": "$7.0000 of $50", "projected": "$15.0000"}


async def test_episode_cost_limit_counts_the_model_calls_at_its_prices(tmp_path: Path) -> None:
    out = tmp_path / "costly.duckdb"
    models = [{"name": "mock-oracle", **PRICES}]  # 0.001 USD a token: 0.04 USD is 40 tokens
    summary = await _echo_run(out, {"turns": 3, "tasks": 4}, models=models, episode_limits={"cost": 0.04})
    assert summary.statuses == {"episode_limit_exceeded": 4}
    rows = query(out, "SELECT details->>'limit', error, input_tokens + output_tokens FROM episodes")
    assert all(limit == "cost" and "episode cost limit reached" in error and tokens >= 40 for limit, error, tokens in rows)
