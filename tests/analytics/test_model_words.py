"""The model's own words, and outcomes as users read them.

Environment text (mind2web's few-shot examples asked again every round, acknowledgements, rules re-inserted) is
never taken for the model's reply: not in ``last_replies``, the failure reasons' examples, ``show`` or the viewer,
in files with ``turns.injected`` and in files written before it. A solved game whose upstream status word is not
'completed' (ltp plays every round) is solved in the failure classes, the summary and ``compare`` alike, with how it
ended beside it; a reason comes from the episode's own ``end_reason`` when it has no error."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import duckdb
import pytest
from analytics_support import MIND2WEB_REPLY, WriteRun, mind2web_rounds
from rich.console import Console

from agentbench_async.analytics import commands, load
from agentbench_async.analytics.report import build_report

REPLY = MIND2WEB_REPLY


def _printed(command, *args: object, width: int = 80, **kwargs: object) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=width, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    assert command(*args, console=console, **kwargs) == 0
    return console.export_text()


@pytest.mark.parametrize("marked", [True, False], ids=["injected-column", "file-before-the-column"])
def test_examples_asked_again_each_round_are_never_the_model_s_reply(write_run: WriteRun, marked: bool) -> None:
    path, ep = mind2web_rounds(write_run, marked=marked)
    with load(path) as res:
        assert res.sql("SELECT last_output FROM last_replies").item() == REPLY + " (round 2)"  # not the example after it
        own = res.sql("SELECT turn, content FROM transcript_turns WHERE by_model ORDER BY seq").rows()
        assert own == [(1, REPLY), (2, REPLY + " (round 2)")]
        reasons = build_report(res).reasons
    assert [e["last_output"] for e in reasons["examples"][0]] == [REPLY + " (round 2)"]
    shown = _printed(commands.show, path, ep)
    titles = re.findall(r"─ (turn \d · [^─]+?) ─", shown)
    assert titles.count("turn 1 · assistant") == 1 and titles.count("turn 2 · assistant") == 1
    assert titles.count("turn 0 · written by the environment, not the model (assistant role)") == 1
    assert titles.count("turn 1 · written by the environment, not the model (assistant role)") == 1
    assert max(len(line) for line in shown.splitlines()) <= 80


def _ltp_file(write_run: WriteRun) -> Path:
    """ltp as upstream records it: a solved game played to the round limit is 'task_limit_exceeded' with score 1."""
    solved = ("task_limit_exceeded", True, 1.0, None)
    unsolved = ("task_limit_exceeded", False, 0.5, None)
    path = write_run("ltp", {("alpha", "ltp"): [solved, solved, unsolved]}, config={"models": [{"name": "alpha"}]})
    con = duckdb.connect(str(path))
    con.execute("UPDATE episodes SET details = ?", [json.dumps({"end_reason": "round limit reached", "progress": 1.0})])
    con.close()
    return path


def test_a_solved_game_at_the_round_limit_is_solved_everywhere(write_run: WriteRun) -> None:
    path = _ltp_file(write_run)
    with load(path) as res:
        rep = build_report(res)
        status = res.sql("SELECT DISTINCT status FROM episodes").item()
    assert status == "task_limit_exceeded"  # the status word keeps upstream's meaning
    counts = rep.class_counts.row(0, named=True)
    assert (counts["completed_success"], counts["task_limit_exceeded"]) == (2, 1)
    assert rep.solved.select("episodes", "outcome_note").rows() == [(2, "ended at the round limit, as AgentBench")]
    # the unsolved game's reason is its own end_reason, not '(no message)'
    assert rep.reasons.select("failure_class", "reason").rows() == [("task_limit_exceeded", "round limit reached")]
    summary = " ".join(_printed(commands.summary, path).split())
    assert "alpha: task limit exceeded 1 (33%)" in summary
    assert "alpha · ltp: 2 solved episodes ended at the round limit, as AgentBench (status task_limit_exceeded)" in summary
    report = " ".join(_printed(commands.report, [path], html=None, json_out=False).split())
    assert "2 solved episodes ended at the round limit, as AgentBench" in report and "(no message)" not in report
    # compare counts the same solved games as the failure matrix's ok column
    write_run("ltp", {("beta", "ltp"): [("task_limit_exceeded", False, 0.0, None)] * 3}, config={"models": [{"name": "beta"}]},
              run_id="run-beta", fingerprint="fp2", path=path)
    compared = " ".join(_printed(commands.compare, path, path, model_a="alpha", model_b="beta", allow_different_settings=True).split())
    assert re.search(r"ltp\W+3\W+2\W+0\W+2\W+0\W", compared), compared  # pairs, A ok, B ok, A only, B only


def test_show_and_the_report_never_print_python_none_or_cut_headers(write_run: WriteRun) -> None:
    path, ep = mind2web_rounds(write_run, marked=True)
    con = duckdb.connect(str(path))
    con.execute("UPDATE episodes SET details = ?", [json.dumps({"rounds": ["x" * 50] * 40})])
    con.close()
    shown = _printed(commands.show, path, ep)
    assert "None" not in shown
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", shown).split())
    assert re.search(r"… \(2,\d{3} characters; all of it: agentbench view", flat), "the cut details say so"
    for header in ("turn", "caller", "model", "attempt", "HTTP", "latency", "finish"):
        assert re.search(rf"(^|\s|│|┃){header}(\s|│|┃|$)", shown, re.M), header
    assert not re.search(r"\b\w{1,4}…", shown.split("details")[0])
