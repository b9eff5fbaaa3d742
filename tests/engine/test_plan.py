"""agentbench plan (issue 45): the first request of every task rendered as the run sends it, with no model call; the
expected tokens within 20% of what the run then uses (calibrated from an earlier run), the worst case never below; the
plan saved beside the run's file and put beside the spend by report; tokens counted by tiktoken, calibration or a
stated estimate, and the plan says which."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from agentbench_async import cli
from agentbench_async.config import build_config
from agentbench_async.envs.db import DBEnvironment
from agentbench_async.envs.os_interaction import OSEnvironment
from agentbench_async.models import ModelConfig
from agentbench_async.planning import make_plan, token_counter

from agentbench_async.mock.server import MockModelServer, MockOptions

from engine_support import app_in_thread, query

ECHO = {"turns": 3, "tasks": 12, "preamble_tokens": 200}


def _args(out: Path, split: str) -> list[str]:
    """run's and plan's flags for the echo environment with ECHO's options."""
    return ["--model", "mock-oracle", "--env", "echo", "--split", split, "--out", str(out),
            *[a for k, v in ECHO.items() for a in ("--env-option", f"echo.{k}={v}")]]  # fmt: skip


def _plan(capsys: pytest.CaptureFixture[str], out: Path, split: str, *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert cli.main(["plan", *_args(out, split), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_is_within_20_percent_of_the_run_and_the_worst_case_never_below(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    earlier, out = tmp_path / "dev.duckdb", tmp_path / "test.duckdb"
    with app_in_thread(MockModelServer(MockOptions()).app) as port:
        served = ["--base-url", f"http://127.0.0.1:{port}/v1", "--task-header", "--no-progress"]
        assert cli.main(["run", *_args(earlier, "dev"), *served]) == 0
        plan = _plan(capsys, out, "test", "--from", str(earlier))
        (row,) = plan["rows"]
        assert row["episodes"] == 12 and "earlier episodes (same model)" in row["basis"]
        assert plan["token_counting"]["mock-oracle"].startswith("calibrated from --from")
        assert cli.main(["run", *_args(out, "test"), *served]) == 0
    (used,) = query(out, "SELECT sum(input_tokens + output_tokens) FROM model_calls")[0]
    assert abs(row["expected_tokens"] / used - 1) <= 0.2
    assert row["worst_tokens"] >= used
    # the first request as the run sent it: the plan's count of it is the mock's (4 characters a token) within a token
    (first_sent,) = query(out, "SELECT avg(input_tokens) FROM model_calls WHERE turn = 1")[0]
    assert abs(row["first_tokens_mean"] - first_sent) <= 2
    # report puts the saved plan beside the spend of the same configuration
    assert cli.main(["report", str(out), "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)["plan_vs_spend"][str(out)]
    assert [(r["env"], r["tokens"]) for r in compared] == [("echo", used)]
    assert cli.main(["report", str(out), "--html", str(tmp_path / "r.html")]) == 0
    assert "<h2>Plan vs spend</h2>" in (tmp_path / "r.html").read_text() and f"{used:,}" in (tmp_path / "r.html").read_text()
    # planned again after the run: every episode already done, nothing left to plan; the saved plan stays
    again = _plan(capsys, out, "test", "--from", str(earlier))
    assert [(r["episodes"], r["already_done"]) for r in again["rows"]] == [(0, 12)]
    assert json.loads((tmp_path / "test.plan.json").read_text())["rows"][0]["episodes"] == 12


def test_plan_says_how_it_counted_and_costs_at_the_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = _plan(capsys, tmp_path / "x.duckdb", "dev", "--price", "mock-oracle=2,8")
    (row,) = plan["rows"]
    assert plan["token_counting"]["mock-oracle"].startswith("estimate: 4 characters a token")
    assert "assumed" in row["basis"]
    assert row["expected_usd"] == pytest.approx((row["expected_input"] * 2 + row["expected_output"] * 8) / 1e6)
    assert row["worst_tokens"] >= row["expected_tokens"] and row["worst_usd"] >= row["expected_usd"]
    assert (tmp_path / "x.plan.json").is_file()
    per = _plan(capsys, tmp_path / "x.duckdb", "dev", "--chars-per-token", "2")
    assert per["rows"][0]["first_tokens_mean"] == pytest.approx(2 * row["first_tokens_mean"], rel=0.05)
    calibrated = token_counter(ModelConfig(name="m", provider="anthropic"), {"m": 3.0}, None)
    assert calibrated.how.startswith("calibrated") and calibrated.count("x" * 30) == 10


async def test_plan_tells_os_and_db_first_requests_without_a_sandbox_or_database(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(self: object) -> None:
        raise AssertionError("plan started the environment")

    monkeypatch.setattr(OSEnvironment, "start", refuse)
    monkeypatch.setattr(DBEnvironment, "start", refuse)
    cfg = build_config({"out": tmp_path / "x.duckdb", "models": [{"name": "m"}], "envs": ["os", "db"], "split": "test"}, where="test")
    plan = await make_plan(cfg, calibrate_from=[])
    assert [(r.env, r.episodes) for r in plan.rows] == [("os", OSEnvironment().count("test")), ("db", DBEnvironment().count("test"))]
    assert all(r.first_tokens_max > 100 and r.first_request_bytes_max > 0 and not math.isnan(r.expected_tokens) for r in plan.rows)


def test_a_local_tokenizer_counts_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    class _Encoding:  # tiktoken's Encoding as plan uses it: a name, encode()
        name = "o200k_base"

        def encode(self, text: str, disallowed_special: tuple[()] = ()) -> list[int]:
            return list(range(len(text.split())))  # a token a word

    fake = types.ModuleType("tiktoken")
    fake.encoding_for_model = lambda model: _Encoding()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    counter = token_counter(ModelConfig(name="gpt-4o"), {"gpt-4o": 3.0}, None)
    assert counter.how == "tiktoken o200k_base" and counter.count("three words here") == 3  # before calibration
    # Anthropic's tokenizer is not tiktoken's: calibration (or the estimate) counts its models
    assert token_counter(ModelConfig(name="claude", provider="anthropic"), {}, None).how.startswith("estimate")
