"""db's score as AgentBench v0.2's DBBench.metrics computes it: overall_cat_accuracy, the mean of the SELECT, INSERT and
UPDATE accuracies (every type but INSERT/UPDATE counted under SELECT), checked against v0.2's own ``metrics`` code run
from the pulled file (tests/upstream_render.py); where a subset lacks a category the score stays the mean over episodes
and the report says which rule gave it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import pytest
from analytics_support import WriteRun
from rich.console import Console
from upstream_render import load_upstream

from agentbench_async.analytics import load
from agentbench_async.analytics.commands import report as report_command
from agentbench_async.analytics.report import build_report
from agentbench_async.envs.upstream_prompts import V02, upstream_path

# (type, correct) of a subset like std's first tasks: mostly SELECT-like, a few modifications
SUBSET = [("counting", True), ("other", True), ("ranking", False), ("aggregation-SUM", True), ("DELETE", True),
          ("INSERT", False), ("INSERT", False), ("INSERT", True), ("UPDATE", False), ("UPDATE", False)]
_CATEGORY = {"INSERT": "INSERT", "UPDATE": "UPDATE"}


def _write(write_run: WriteRun, name: str, rows: list[tuple[str, bool]]) -> Path:
    path = write_run(name, {("alpha", "db"): [("completed", ok, 1.0 if ok else 0.0, None) for _, ok in rows]})
    con = duckdb.connect(str(path))
    for i, (kind, _) in enumerate(rows):
        details = {"type": kind, "category": _CATEGORY.get(kind, "SELECT")}
        con.execute("UPDATE episodes SET details = ? WHERE task_id = ?", [json.dumps(details), f"t{i:03d}"])
    con.close()
    return path


def _v02_overall(data_dir: Path, rows: list[tuple[str, bool]]) -> float:
    """v0.2's overall_cat_accuracy for these outcomes: its own metrics code, fed results whose answers equal the gold one
    or not (modifications compare the table hash, SELECT-like tasks the answer list)."""
    module = load_upstream(upstream_path(data_dir, V02, "src/server/tasks/dbbench/__init__.py"), "db_v02_metrics")
    task = object.__new__(module.DBBench)
    outputs = [{"answer": ("h" if ok else "x") if kind in ("INSERT", "UPDATE", "DELETE") else repr(["7" if ok else "8"]), "type": kind}
               for kind, ok in rows]
    answers = ["h" if kind in ("INSERT", "UPDATE", "DELETE") else ["7"] for kind, _ in rows]
    return task.metrics["overall_cat_accuracy"](outputs, answers)


def test_a_subset_is_scored_as_v02_computes_it_and_the_report_says_so(write_run: WriteRun, official_data_dir: Path) -> None:
    path = _write(write_run, "subset", SUBSET)
    expected = _v02_overall(official_data_dir, SUBSET)
    episodes_mean = sum(ok for _, ok in SUBSET) / len(SUBSET)
    assert expected == pytest.approx((4 / 5 + 1 / 3 + 0 / 2) / 3) and expected != pytest.approx(episodes_mean)
    with load(path) as res:
        report = build_report(res)
        row = report.scores.filter(env="db").row(0, named=True)
    assert row["score"] == pytest.approx(expected)
    assert row["score_rule"] == "mean of the SELECT, INSERT and UPDATE accuracies (AgentBench v0.2)"
    console = Console(file=io.StringIO(), width=300)
    assert report_command([path], html=None, json_out=False, console=console) == 0
    assert "db: score = mean of the SELECT, INSERT and UPDATE accuracies (AgentBench v0.2)" in console.file.getvalue()


def test_a_subset_without_a_category_keeps_the_mean_over_episodes_and_names_why(write_run: WriteRun) -> None:
    rows = [r for r in SUBSET if r[0] != "UPDATE"]
    path = _write(write_run, "no-update", rows)
    with load(path) as res:
        row = build_report(res).scores.filter(env="db").row(0, named=True)
    assert row["score"] == pytest.approx(sum(ok for _, ok in rows) / len(rows))
    assert row["score_rule"] == "mean over episodes (no UPDATE task: v0.2's mean of the three accuracies would count it as 0)"


def test_equal_categories_give_the_same_score_either_way(write_run: WriteRun) -> None:
    rows = [("other", True), ("counting", False), ("INSERT", True), ("INSERT", False), ("UPDATE", True), ("UPDATE", True)]
    path = _write(write_run, "even", rows)
    with load(path) as res:
        row = build_report(res).scores.filter(env="db").row(0, named=True)
    assert row["score"] == pytest.approx(4 / 6)  # (1/2 + 1/2 + 1) / 3 = the mean over the six episodes
