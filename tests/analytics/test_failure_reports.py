"""What reports say about failures: compare names failure-class changes (a matrix A class x B class) beside success
flips; an environment whose every episode was cancelled has no score and no place in OA; tasks that cannot be solved as
AgentBench ships them are named in every report with the reason."""

from __future__ import annotations

import os

import duckdb
from analytics_support import WriteRun
from rich.console import Console

from agentbench_async.analytics import commands, html_report, notes
from agentbench_async.analytics.compare import class_change_lines, compare_results, pick_sides
from agentbench_async.analytics.loading import load
from agentbench_async.analytics.report import build_report
from agentbench_async.analytics.terminal import render, render_summary
from agentbench_async.envs.os_interaction import UNSOLVABLE_START

ALPHA = [("invalid_format", False, 0.0, "no action line: prose"), ("invalid_format", False, 0.0, "no action line: prose"),
         ("task_limit_exceeded", False, 0.0, "turn limit reached"), ("completed", False, 0.0, None), ("completed", True, 1.0, None)]
BETA = [("completed", False, 0.0, None), ("completed", False, 0.0, None),
        ("task_limit_exceeded", False, 0.0, "turn limit reached"), ("completed", True, 1.0, None), ("completed", True, 1.0, None)]


def test_compare_names_the_failure_class_changes(write_run: WriteRun) -> None:
    path = write_run("c", {("alpha", "db"): ALPHA, ("beta", "db"): BETA}, config={"models": [{"name": "alpha"}, {"name": "beta"}]})
    with load(path) as res:
        a, b = pick_sides(res, res, True, "alpha", "beta", None, None)
        cmp = compare_results(res, res, a, b, "alpha", "beta")
    changes = cmp.class_changes.select("class_a", "class_b", "episodes").rows()
    assert changes == [("invalid_format", "completed_wrong", 2), ("completed_wrong", "completed_success", 1)]
    assert class_change_lines(cmp)[0].startswith("2 pairs: invalid_format (A) -> completed_wrong (B) in db, e.g. db/")
    console = Console(width=100, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    assert commands.compare(path, path, model_a="alpha", model_b="beta", console=console) == 0
    text = " ".join(console.export_text().split())
    assert "Failure-class changes (3 pairs): A class (rows) x B class (columns)" in text
    assert "2 pairs: invalid_format (A) -> completed_wrong (B)" in text
    assert "1 pair: completed_wrong (A) -> completed_success (B)" in text


def test_an_environment_with_only_cancelled_episodes_has_no_score_and_is_not_in_oa(write_run: WriteRun) -> None:
    cancelled = [("cancelled", False, 0.0, "interrupted")]
    path = write_run("x", {("alpha", "os"): [("completed", True, 1.0, None), ("completed", False, 0.0, None)], ("alpha", "db"): cancelled},
                     config={"models": [{"name": "alpha"}]})  # fmt: skip
    with load(path) as res:
        rows = {r["env"]: r for r in res.env_scores.iter_rows(named=True)}
        assert rows["db"]["score"] is None and rows["db"]["n"] == 0 and rows["db"]["cancelled"] == 1
        assert rows["os"]["score"] == 0.5 and rows["os"]["n"] == 2
        overall = res.overall_score.row(0, named=True)
        assert overall["envs_run"] == 1


def test_tasks_unsolvable_as_shipped_are_named_in_every_report_with_the_reason(write_run: WriteRun) -> None:
    outcomes = [("task_limit_exceeded", False, 0.0, "round limit"), ("completed", True, 1.0, None), ("completed", False, 0.0, None)]
    path = write_run("u", {("alpha", "os"): outcomes}, config={"models": [{"name": "alpha"}]})
    con = duckdb.connect(str(path))
    ids = [r[0] for r in con.execute("SELECT episode_id FROM episodes ORDER BY task_id").fetchall()]
    for episode_id in ids[:2]:  # as the os environment marks official dev 0-2 and 4
        con.execute("UPDATE episodes SET details = json_object('unsolvable_as_shipped', ?) WHERE episode_id = ?", [UNSOLVABLE_START, episode_id])
    con.close()
    with load(path) as res:
        rows = res.unsolvable_tasks.sort("task_id")
        assert rows.select("episodes", "solved", "classes").rows() == [(1, 0, "task_limit_exceeded"), (1, 1, "completed_success")]
        report = build_report(res)
    line = "os: 2 tasks cannot be solved as AgentBench ships them"
    assert notes.unsolvable_lines(report.unsolvable)[0].startswith(line)
    for full in (True, False):  # the whole report and its summary
        console = Console(width=80, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
        if full:
            render(report, console)
        else:
            render_summary(report, console, str(path))
        text = " ".join(console.export_text().split())
        assert line in text and "its start command's tab indentation is eaten by the login shell" in text
    assert line in html_report.render_html(report)
    assert report.to_dict()["unsolvable_tasks"][0]["reason"] == UNSOLVABLE_START
