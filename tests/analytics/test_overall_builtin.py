"""The overall_score SQL view and the reports agree on an OA to which built-in suites contributed: the same label and
a builtin_suites column naming the environments that did not play AgentBench's tasks."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from analytics_support import WriteRun
from rich.console import Console

from agentbench_async.analytics import load
from agentbench_async.analytics.report import build_report
from agentbench_async.analytics.terminal import overall_table, render_summary

PAPER = {"os": 42.4, "db": 32.0, "kg": 58.8, "card_game": 74.5, "ltp": 16.6, "alfworld": 78.0, "webshop": 61.1, "mind2web": 29.0}


def _run(write_run: WriteRun, name: str, envs: list[str], official: list[str]) -> Path:
    """gpt-4 on ``envs`` (the paper's gpt-4 scores); ``official`` played AgentBench's tasks, the rest built-in suites."""
    cells = {("gpt-4", env): [("completed", False, 2 * PAPER[env] / 100, None), ("completed", False, 0.0, None)] for env in envs}
    path = write_run(name, cells)
    con = duckdb.connect(str(path))
    con.execute("UPDATE episodes SET source = 'official' WHERE list_contains(?, env)", [official])
    con.close()
    return path


def _both(path: Path) -> tuple[dict[str, object], dict[str, object]]:
    with load(path) as res:
        sql = res.overall_score.row(0, named=True)
        report = build_report(res).overall.row(0, named=True)
    return sql, report


@pytest.mark.parametrize(
    ("envs", "official", "label", "builtin"),
    [
        (list(PAPER), ["os", "db", "card_game", "ltp", "mind2web"], "OA (not the paper's: built-in suites for KG, HH, WS)", "KG, HH, WS"),
        (["os", "kg"], ["os"], "OA (partial: 2 of 8 environments: OS, KG; built-in suites, not the paper's tasks: KG)", "KG"),
        (list(PAPER), list(PAPER), "OA", None),
        (["os", "kg"], [], "OA (partial: 2 of 8 environments: OS, KG)", None),  # no official task: the data deviation says so
    ],
    ids=["all-eight-mixed", "partial-mixed", "all-official", "all-built-in"],
)
def test_sql_view_and_report_give_the_same_oa_label(write_run: WriteRun, envs: list[str], official: list[str], label: str,
                                                     builtin: str | None) -> None:
    sql, report = _both(_run(write_run, "oa", envs, official))
    for row in (sql, report):
        assert (row["label"], row["builtin_suites"]) == (label, builtin)
    assert sql["oa"] == pytest.approx(report["oa"]) and sql["complete"] == report["complete"]
    if envs == list(PAPER):
        assert round(float(sql["oa"]), 2) == 4.01  # type: ignore[arg-type]


def test_terminal_names_the_built_in_environments(write_run: WriteRun) -> None:
    path = _run(write_run, "oa", list(PAPER), ["os", "db", "card_game", "ltp", "mind2web"])
    con = Console(width=200, record=True, color_system=None)
    with load(path) as res:
        rep = build_report(res)
        con.print(overall_table(rep))
        render_summary(rep, con, str(path))
    text = " ".join(con.export_text().split())
    assert "OA (not the paper's: built-in suites for KG, HH, WS)" in text
    assert "4.01, built-in KG, HH, WS" in text and "not the paper's OA" in text


@pytest.mark.parametrize("denominator", ["paper", "outcomes"])
def test_sql_oa_follows_the_report_denominator(known_run: Path, denominator: str) -> None:
    """overall_score (every episode) and overall_score_outcomes (the model's own outcomes) equal the report's OA."""
    with load(known_run) as res:
        view = res.overall_score if denominator == "paper" else res.overall_score_outcomes
        sql = {r["model"]: (round(r["oa"], 9), r["label"]) for r in view.iter_rows(named=True)}
        report = {r["model"]: (round(r["oa"], 9), r["label"]) for r in build_report(res, denominator=denominator).overall.iter_rows(named=True)}
    assert sql == report and sql["alpha"][1] == "OA (partial: 2 of 8 environments: OS, KG)"
    assert sql["alpha"][0] == pytest.approx((100 * 4 / 10 / 10.8 + 100 * 1.75 / 6 / 13.9) / 2 if denominator == "paper"
                                            else (100 * 4 / 9 / 10.8 + 35.0 / 13.9) / 2)
