"""pass@k, pass^k and the run-to-run spread follow the scores' denominator: the paper's (every try, an infrastructure
failure counted as a failed try) by default, the model's own outcomes with ``--denominator outcomes``; the
infrastructure failures are shown apart either way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from analytics_support import WriteRun
from rich.console import Console

from agentbench_async.analytics import load
from agentbench_async.analytics.report import build_report
from agentbench_async.analytics.terminal import repeats_tables


def _repeats_with_an_env_error(write_run: WriteRun) -> Path:
    """alpha on os, three tasks twice: t000 solved, then an env_error; t001 solved twice; t002 wrong twice."""
    ok, wrong = ("completed", True, 1.0, None), ("completed", False, 0.0, None)
    path = write_run("repeats", {("alpha", "os"): [ok, ok, wrong]}, repeats=2)
    con = duckdb.connect(str(path))
    con.execute("UPDATE episodes SET status = 'env_error', success = false, score = 0.0, error = 'container failed to start' "
                "WHERE task_id = 't000' AND repeat = 1")
    con.close()
    return path


def _pass_k(rep: object) -> dict[int, tuple[float, float, int]]:
    return {r["k"]: (r["pass_at_k"], r["pass_hat_k"], r["infra"]) for r in rep.pass_k.iter_rows(named=True)}  # type: ignore[attr-defined]


def test_pass_k_and_spread_count_an_env_error_as_a_failed_try_by_default(write_run: WriteRun) -> None:
    path = _repeats_with_an_env_error(write_run)
    with load(path) as res:
        paper = build_report(res)
        outcomes = build_report(res, denominator="outcomes")
    # the paper's denominator: t000 has 2 tries, 1 success -> pass@1 (0.5 + 1 + 0) / 3, pass@2 (1 + 1 + 0) / 3
    assert _pass_k(paper) == {1: (pytest.approx(0.5), pytest.approx(0.5), 1), 2: (pytest.approx(2 / 3), pytest.approx(1 / 3), 1)}
    # the model's own outcomes: t000 has 1 try (the env_error left out), so k stops at 1 and pass@1 = (1 + 1 + 0) / 3
    assert _pass_k(outcomes) == {1: (pytest.approx(2 / 3), pytest.approx(2 / 3), 1)}
    assert paper.scores["score"].to_list() == [pytest.approx(3 / 6)] and outcomes.scores["score"].to_list() == [pytest.approx(3 / 5)]
    spread = paper.spread.row(0, named=True)  # repeat 0: 2/3, repeat 1: 1/3 (the env_error scores 0)
    assert (spread["repeats"], spread["min_score"], spread["max_score"], spread["infra"]) == (2, pytest.approx(1 / 3), pytest.approx(2 / 3), 1)
    spread = outcomes.spread.row(0, named=True)  # repeat 1 over its two own outcomes: 1/2
    assert (spread["min_score"], spread["max_score"], spread["infra"]) == (pytest.approx(1 / 2), pytest.approx(2 / 3), 1)


def test_repeats_tables_show_the_infrastructure_failures_apart(write_run: WriteRun) -> None:
    path = _repeats_with_an_env_error(write_run)
    for denominator, column, words in (("paper", "infra (in n)", "infrastructure failures as failed tries"),
                                       ("outcomes", "infra excluded", "infrastructure failures not counted")):
        with load(path) as res:
            rep = build_report(res, denominator=denominator)
        con = Console(width=250, record=True, color_system=None)
        for table in repeats_tables(rep):
            con.print(table)
        text = con.export_text()
        assert column in text and words in " ".join(text.split())


def test_repeats_follow_the_report_option_through_the_cli(write_run: WriteRun) -> None:
    path = _repeats_with_an_env_error(write_run)
    out = {}
    for extra in ([], ["--denominator", "outcomes"]):
        proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(path), "--json", *extra],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        out[tuple(extra)] = json.loads(proc.stdout)["repeats"]
    assert [r["pass_at_k"] for r in out[()]["pass_k"]] == [pytest.approx(0.5), pytest.approx(2 / 3)]
    assert [r["pass_at_k"] for r in out[("--denominator", "outcomes")]["pass_k"]] == [pytest.approx(2 / 3)]


def test_the_views_of_both_denominators(write_run: WriteRun) -> None:
    """task_repeats (the paper's) and task_repeats_outcomes, as a SQL user reads them."""
    path = _repeats_with_an_env_error(write_run)
    with load(path) as res:
        paper = {r["task_id"]: (r["n"], r["c"], r["infra"]) for r in res.task_repeats.iter_rows(named=True)}
        own = {r["task_id"]: (r["n"], r["c"], r["infra"]) for r in res.task_repeats_outcomes.iter_rows(named=True)}
    assert paper == {"t000": (2, 1, 1), "t001": (2, 2, 0), "t002": (2, 0, 0)}
    assert own == {"t000": (1, 1, 1), "t001": (2, 2, 0), "t002": (2, 0, 0)}
