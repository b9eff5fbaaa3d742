"""How episodes failed (analytics/45_behaviour.sql): the same action again and again, cycles of 2 or 3, turns without
anything new from the environment, recovery after a refused action, and each episode's behaviour label with its
evidence; environment text (few-shot examples in the assistant role) is never taken for the model's action, in
files with ``turns.injected`` and in files written before it."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

import pytest
from analytics_support import WriteRun, scripted
from rich.console import Console

from agentbench_async.analytics import commands, load
from agentbench_async.analytics.report import build_report

def _behaviour(path: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    with load(path) as res:
        return {r["episode_id"]: r for r in res.episode_behaviour.iter_rows(named=True)}


TLE = ("task_limit_exceeded", False)


def test_the_same_action_again_and_again_is_a_loop_with_its_turns(write_run: WriteRun) -> None:
    script = [("search[red shoes]", "results", True)] + [(a, "cart page", True) for a in
                                                        ("click[Add to Cart]", "click[add to cart] ", "CLICK[Add  to cart]", "click[add to cart]")]
    path, (ep,) = scripted(write_run, [(*TLE, script)])
    row = _behaviour(path)[ep]
    assert row["behaviour"] == "looping"
    assert (row["loop_period"], row["loop_from_turn"], row["loop_to_turn"]) == (1, 2, 5)
    assert row["evidence"] == 'turns 2-5: "click[add to cart]" 4 times in a row'


def test_twice_in_a_row_is_not_a_loop_but_a_cycle_of_two_done_twice_is(write_run: WriteRun) -> None:
    twice = [("look", "a room", True), ("look", "a room", True), ("go north", "a hall", True), ("open door", "a garden", True)]
    cycle = [("go north", "a hall", True), ("look", "a hall, again", True), ("go north", "a hall", True), ("look", "a hall, again", True),
             ("take key", "you have a key", True)]
    path, (a, b) = scripted(write_run, [(*TLE, twice), (*TLE, cycle)])
    rows = _behaviour(path)
    assert rows[a]["loop_period"] is None and rows[a]["behaviour"] == "none"
    assert (rows[b]["behaviour"], rows[b]["loop_period"], rows[b]["loop_from_turn"], rows[b]["loop_to_turn"]) == ("looping", 2, 1, 4)
    assert rows[b]["evidence"] == 'turns 1-4: "go north", "look" over and over (a cycle of 2)'


def test_a_longer_cycle_is_stalled_not_looping(write_run: WriteRun) -> None:
    """Four different questions asked round after round (mock-weak's ltp): no repeat of period <= 3, but after the first
    four answers the environment has nothing new to say."""
    script = [(q, f"answer to {q}", True) for q in ("a?", "b?", "c?", "d?") * 3]
    path, (ep,) = scripted(write_run, [(*TLE, script)], env="ltp")
    row = _behaviour(path)[ep]
    assert row["loop_period"] is None
    assert (row["behaviour"], row["last_new_observation_turn"], row["turns_after_last_new"]) == ("stalled", 4, 8)
    assert row["evidence"] == "nothing new from the environment after turn 4 (8 more replies)"


def test_recovery_after_a_refused_action(write_run: WriteRun) -> None:
    recovered = [("search[shoes]", "results", True), ("click[nothing]", "Invalid action!", False), ("click[item 1]", "item page", True),
                 ("click[buy now]", "bought", True)]
    stuck = [("click[x]", "Invalid action!", False), ("click[y]", "Invalid action!", False)]
    path, (a, b) = scripted(write_run, [("completed", True, recovered), ("invalid_action", False, stuck)])
    rows = _behaviour(path)
    assert (rows[a]["first_invalid_turn"], rows[a]["recovered"], rows[a]["recovery_turn"], rows[a]["behaviour"]) == (2, True, 3, "recovered")
    assert rows[a]["evidence"] == "first refused action at turn 2, a valid one at turn 3"
    assert (rows[b]["first_invalid_turn"], rows[b]["invalid_actions"], rows[b]["recovered"]) == (1, 2, False)
    with load(path) as res:
        summary = res.behaviour_summary.row(0, named=True)
    assert (summary["episodes_with_errors"], summary["recovered"], summary["recovery_rate"]) == (2, 1, 0.5)
    assert [e["episode_id"] for e in summary["recovered_examples"]] == [a]
    assert summary["unrecovered_examples"] == [{"episode_id": b, "run_id": "run-b",
                                                "evidence": "first refused action at turn 1, no valid one after it"}]


def test_a_wrong_answer_before_the_work_a_solved_episode_needs_is_giving_up_early(write_run: WriteRun) -> None:
    solved = [(f"step {i}", f"state {i}", True) for i in range(1, 6)]
    early = [("step 1", "state 1", True), ("answer 42", "done", True)]
    path, (s1, s2, e) = scripted(write_run, [("completed", True, solved), ("completed", True, solved), ("completed", False, early)])
    row = _behaviour(path)[e]
    assert row["behaviour"] == "gave_up_early"
    assert row["evidence"] == "answered after 2 replies; solved webshop episodes took 5 (median)"


def test_share_of_task_limit_episodes_that_loop(write_run: WriteRun) -> None:
    loop = [("click[buy]", "cart", True)] * 4
    varied = [(f"search[{i}]", f"results {i}", True) for i in range(4)]
    path, ids = scripted(write_run, [(*TLE, loop), (*TLE, loop), (*TLE, varied), ("completed", True, varied[:2])])
    with load(path) as res:
        s = res.behaviour_summary.row(0, named=True)
    assert (s["tle_episodes"], s["tle_looping"], s["loop_share"], s["looping"]) == (3, 2, 2 / 3, 2)
    assert [e["episode_id"] for e in s["looping_examples"]] == ids[:2]


@pytest.mark.parametrize("marked", [True, None], ids=["injected-column", "file-before-the-column"])
def test_environment_examples_in_the_assistant_role_are_not_actions(write_run: WriteRun, marked: bool | None) -> None:
    """An example the environment repeats after every reply (mind2web asks each round anew after its examples) would
    read as 'the same action every turn' if it were taken for the model's."""
    script = [(f"click[{c}]", f"page {c}", True) for c in "abcd"]
    path, (ep,) = scripted(write_run, [(*TLE, script)], injected=False if marked else None, example="click[the example]")
    row = _behaviour(path)[ep]
    assert (row["replies"], row["loop_period"], row["behaviour"]) == (4, None, "none")
    with load(path) as res:
        assert res.sql("SELECT list(action_key ORDER BY turn) AS a FROM reply_actions").rows()[0][0] == [f"click[{c}]" for c in "abcd"]


def test_report_shows_loops_and_recovery_per_model_and_env(write_run: WriteRun, tmp_path: Path) -> None:
    """Terminal (80 columns, nothing cut), JSON and HTML: the share of task-limit episodes that looped, the recovery rate
    after a refused action, and an example episode with its evidence."""
    loop = [("click[buy]", "Invalid action!", False)] * 4
    stalled = [(q, f"answer {q}", True) for q in ("a", "b", "c", "d") * 2]
    recovered = [("click[x]", "Invalid action!", False), ("search[shoes]", "results", True)]
    path, ids = scripted(write_run, [(*TLE, loop), (*TLE, stalled), (*TLE, loop), ("completed", True, recovered)])
    with load(path) as res:
        report = build_report(res)
    row = report.to_dict()["behaviour"][0]
    assert (row["tle_episodes"], row["tle_looping"], row["tle_stalled"], row["episodes_with_errors"], row["recovered"]) == (3, 2, 1, 3, 1)
    assert row["looping_examples"][0] == {"episode_id": ids[0], "run_id": "run-b", "evidence": 'turns 1-4: "click[buy]" 4 times in a row'}
    console = Console(width=80, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    assert commands.report([path], html=tmp_path / "r.html", json_out=False, console=console) == 0
    text = console.export_text()
    assert "2 of 3 (67%)" in text and "1 of 3 (33%)" in text  # looping and stalled of the task-limit episodes, recovered of those refused
    assert f'looping: {ids[0]} — turns 1-4: "click[buy]" 4 times in a row' in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 80
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h2>How episodes failed</h2>" in page and "2 of 3 (67%)" in page and html.escape(ids[0]) in page


def test_models_without_loops_or_refused_actions_have_no_row(write_run: WriteRun) -> None:
    path, _ = scripted(write_run, [("completed", True, [("search[a]", "results", True), ("click[a]", "bought", True)])])
    with load(path) as res:
        report = build_report(res)
    assert report.to_dict()["behaviour"] == []
    console = Console(width=80, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    assert commands.report([path], html=None, json_out=False, console=console) == 0
    assert "How episodes failed" not in console.export_text()


def test_the_demo_s_weak_model_loops_and_stalls_and_the_oracle_does_neither(tmp_path: Path) -> None:
    """Through the engine: `agentbench demo` on kg and webshop (mock-weak repeats itself by design)."""
    out = tmp_path / "demo.duckdb"
    proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "demo", "--out", str(out), "--env", "kg,webshop",
                           "--limit", "8", "--no-progress"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with load(out) as res:
        rows = res.episode_behaviour.rows(named=True)
        summary = {(r["model"], r["env"]): r for r in res.behaviour_summary.iter_rows(named=True)}
    evidence = {r["episode_id"]: (r["behaviour"], r["evidence"]) for r in rows}
    assert evidence["mock-weak/webshop/dev/206/0"] == ("looping", 'turns 1-10: "click[add to cart]" 10 times in a row')
    assert evidence["mock-weak/kg/dev/2/0"] == ("looping", 'turns 1-15: "get_relations(merchants of the gull coast)" 15 times in a row')
    weak_tle = [r["behaviour"] for r in rows if r["model"] == "mock-weak" and r["failure_class"] == "task_limit_exceeded"]
    assert weak_tle and set(weak_tle) <= {"looping", "stalled"}
    assert {r["behaviour"] for r in rows if r["model"] == "mock-oracle"} == {"none"}
    kg = summary[("mock-weak", "kg")]
    assert kg["tle_looping"] + kg["tle_stalled"] == kg["tle_episodes"] > 0 and kg["loop_share"] == kg["tle_looping"] / kg["tle_episodes"]
