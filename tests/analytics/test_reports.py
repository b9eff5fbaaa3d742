"""Reports over result files with known outcomes: classes, scores, intervals, OA, drill-down, operations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from analytics_support import ALPHA_OS, BETA_OS, WriteRun
from rich.console import Console

from agentbench_async.analytics import ReportError, commands, load
from agentbench_async.analytics.report import build_report
from agentbench_async.analytics.stats import bootstrap_interval, wilson_interval
from agentbench_async.errors import AgentBenchError, StoreError


def _console() -> Console:
    return Console(width=250, record=True, color_system=None)


def test_failure_classes_counts_and_shares(known_run: Path) -> None:
    with load(known_run) as res:
        rep = build_report(res)
    rows = {(r["model"], r["env"]): r for r in rep.class_counts.iter_rows(named=True)}
    alpha_os = rows[("alpha", "os")]
    assert {k: alpha_os[k] for k in ("completed_success", "completed_wrong", "invalid_format", "invalid_action",
                                     "task_limit_exceeded", "context_limit_exceeded", "env_error", "model_error",
                                     "cancelled", "total")} == {
        "completed_success": 4, "completed_wrong": 2, "invalid_format": 1, "invalid_action": 1, "task_limit_exceeded": 1,
        "context_limit_exceeded": 0, "env_error": 1, "model_error": 0, "cancelled": 0, "total": 10,
    }
    beta = rows[("beta", "os")]
    assert (beta["completed_success"], beta["completed_wrong"], beta["invalid_format"], beta["context_limit_exceeded"],
            beta["model_error"]) == (1, 4, 2, 1, 1)
    shares = {(r["model"], r["env"]): r for r in rep.class_shares.iter_rows(named=True)}
    assert shares[("alpha", "kg")]["cancelled"] == pytest.approx(1 / 6)
    # the required engine view keeps its columns
    fs = load(known_run).failure_summary
    assert fs.columns[:5] == ["model", "env", "status", "episodes", "share"]
    assert fs.filter((fs["model"] == "alpha") & (fs["env"] == "os") & (fs["status"] == "completed"))["episodes"].item() == 6


def test_paper_table_lumps_env_and_api_errors_into_task_limit(known_run: Path) -> None:
    with load(known_run) as res:
        paper = {(r["model"], r["env"]): r for r in build_report(res).paper.iter_rows(named=True)}
    # alpha/os: 1 task limit + 1 env_error of 10 episodes
    assert paper[("alpha", "os")]["task_limit_exceeded"] == pytest.approx(0.2)
    assert paper[("alpha", "os")]["completed"] == pytest.approx(0.6)
    # beta/os: 1 task limit + 1 model_error
    assert paper[("beta", "os")]["task_limit_exceeded"] == pytest.approx(0.2)
    # alpha/kg: the cancelled episode is left out of the five columns
    assert paper[("alpha", "kg")]["episodes"] == 5
    assert paper[("alpha", "kg")]["completed"] == pytest.approx(0.8)


def test_scores_count_every_episode_as_the_paper_and_show_infrastructure_failures_apart(known_run: Path) -> None:
    """The paper's denominator (the default): every sample counts, an env_error/model_error/cancelled episode as a
    failure (score 0), and the infrastructure counts stay beside the score."""
    with load(known_run) as res:
        rep = build_report(res)
    s = {(r["model"], r["env"]): r for r in rep.scores.iter_rows(named=True)}
    alpha_os = s[("alpha", "os")]
    assert (alpha_os["n"], alpha_os["env_errors"], alpha_os["episodes"]) == (10, 1, 10)
    assert alpha_os["score"] == pytest.approx(4 / 10)
    assert alpha_os["ci_method"] == "wilson"
    assert (alpha_os["ci_low"], alpha_os["ci_high"]) == pytest.approx(wilson_interval(4, 10))
    beta_os = s[("beta", "os")]
    assert (beta_os["n"], beta_os["model_errors"], beta_os["score"]) == (10, 1, pytest.approx(1 / 10))
    kg = s[("alpha", "kg")]
    assert kg["metric"] == "F1" and kg["n"] == 6 and kg["cancelled"] == 1
    assert kg["score"] == pytest.approx((1.0 + 0.5 + 0.25) / 6)
    assert kg["ci_method"] == "bootstrap"
    assert (kg["ci_low"], kg["ci_high"]) == bootstrap_interval([0.0, 0.0, 0.0, 0.25, 0.5, 1.0])
    assert kg["ci_low"] < kg["score"] < kg["ci_high"]


def test_outcomes_denominator_leaves_infrastructure_failures_out(known_run: Path) -> None:
    """``--denominator outcomes``: the model's own outcomes only (env_error/model_error/cancelled not in n)."""
    with load(known_run) as res:
        rep = build_report(res, denominator="outcomes")
    s = {(r["model"], r["env"]): r for r in rep.scores.iter_rows(named=True)}
    alpha_os = s[("alpha", "os")]
    assert (alpha_os["n"], alpha_os["env_errors"], alpha_os["episodes"]) == (9, 1, 10)
    assert alpha_os["score"] == pytest.approx(4 / 9)
    assert (alpha_os["ci_low"], alpha_os["ci_high"]) == pytest.approx(wilson_interval(4, 9))
    assert (round(alpha_os["ci_low"], 4), round(alpha_os["ci_high"], 4)) == (0.1888, 0.7333)
    beta_os = s[("beta", "os")]
    assert (beta_os["n"], beta_os["model_errors"], beta_os["score"]) == (9, 1, pytest.approx(1 / 9))
    kg = s[("alpha", "kg")]
    assert kg["n"] == 5 and kg["score"] == pytest.approx((1.0 + 0.5 + 0.25) / 5)
    assert (kg["ci_low"], kg["ci_high"]) == bootstrap_interval([0.0, 0.0, 0.25, 0.5, 1.0])
    oa = {r["model"]: r for r in rep.overall.iter_rows(named=True)}
    assert oa["alpha"]["oa"] == pytest.approx((100 * 4 / 9 / 10.8 + 35.0 / 13.9) / 2)


def test_overall_score_is_labelled_partial(known_run: Path) -> None:
    with load(known_run) as res:
        oa = {r["model"]: r for r in build_report(res).overall.iter_rows(named=True)}
    assert oa["alpha"]["oa"] == pytest.approx((100 * 4 / 10 / 10.8 + 100 * 1.75 / 6 / 13.9) / 2)
    assert not oa["alpha"]["complete"]
    assert oa["alpha"]["label"] == "OA (partial: 2 of 8 environments: OS, KG)"
    assert oa["beta"]["label"] == "OA (partial: 1 of 8 environments: OS)"


def test_full_oa_from_a_run_over_all_eight_environments(write_run: WriteRun) -> None:
    # gpt-4's per-environment scores from the paper (Table 3), as the mean of two episodes per environment
    paper = {"os": 42.4, "db": 32.0, "kg": 58.8, "card_game": 74.5, "ltp": 16.6, "alfworld": 78.0, "webshop": 61.1, "mind2web": 29.0}
    cells = {("gpt-4", env): [("completed", False, 2 * pct / 100, None), ("completed", False, 0.0, None)]
             for env, pct in paper.items()}
    path = write_run("eight", cells)
    with load(path) as res:
        overall = build_report(res).overall.row(0, named=True)
        sql_oa = res.overall_score.row(0, named=True)
    assert overall["complete"] and overall["label"] == "OA"
    assert round(overall["oa"], 2) == 4.01
    assert sql_oa["oa"] == pytest.approx(overall["oa"]) and sql_oa["label"] == "OA"


def test_drilldown_groups_reasons_with_examples(known_run: Path) -> None:
    with load(known_run) as res:
        reasons = build_report(res).reasons
    fmt = reasons.filter((reasons["model"] == "beta") & (reasons["failure_class"] == "invalid_format")).row(0, named=True)
    assert fmt["reason"] == "no action found in reply N" and fmt["episodes"] == 2
    assert [e["episode_id"] for e in fmt["examples"]] == ["beta/os/test/t004/0", "beta/os/test/t005/0"]
    assert fmt["examples"][0]["last_output"] == "bad reply 4"
    action = reasons.filter(reasons["failure_class"] == "invalid_action").row(0, named=True)
    assert action["reason"] == "unknown command 'rm -rf /'"  # short quoted actions stay visible
    assert action["examples"][0]["error"] == "unknown command 'rm -rf /'"
    ctx = reasons.filter((reasons["model"] == "beta") & (reasons["failure_class"] == "context_limit_exceeded")).row(0, named=True)
    assert ctx["turns_max"] == 3  # the turn the context overflowed at


def test_last_output_is_the_model_s_own_never_the_prompt_s_example(known_run: Path, tmp_path: Path) -> None:
    """An episode whose context overflowed at its first call shows no last output, not the one-shot example's
    assistant message from its prompt (turn 0)."""
    path = tmp_path / "example.duckdb"
    path.write_bytes(known_run.read_bytes())
    con = duckdb.connect(str(path))
    run_id, ep = con.execute("SELECT run_id, episode_id FROM episodes WHERE model = 'beta' AND status = 'context_limit_exceeded'").fetchone()
    con.execute("DELETE FROM turns WHERE episode_id = ? AND turn > 0", [ep])
    con.execute("INSERT INTO turns (run_id, episode_id, turn, seq, role, content) VALUES (?, ?, 0, 1, 'assistant', ?)",
                [run_id, ep, "Act: example answer from the prompt"])  # fmt: skip
    con.close()
    with load(path) as res:
        reasons = build_report(res).reasons
        assert res.sql("SELECT count(*) FROM last_replies WHERE episode_id = ?", [ep]).item() == 0
    ctx = reasons.filter((reasons["model"] == "beta") & (reasons["failure_class"] == "context_limit_exceeded")).row(0, named=True)
    assert [e["last_output"] for e in ctx["examples"] if e["episode_id"] == ep] == [None]


def test_operations_tokens_cost_retries(known_run: Path) -> None:
    with load(known_run) as res:
        rep = build_report(res)
        overridden = build_report(res, prices={"beta": (1.0, 1.0)})
    usage = {r["model"]: r for r in rep.usage.iter_rows(named=True)}
    # alpha: 36 first-attempt + 6 retried turns; 3600 tokens in, 360 out at $2 / $8 per 1M (from the run config)
    assert (usage["alpha"]["input_tokens"], usage["alpha"]["output_tokens"]) == (3600, 360)
    assert usage["alpha"]["cost_usd"] == pytest.approx(3600 / 1e6 * 2 + 360 / 1e6 * 8)
    assert usage["beta"]["cost_usd"] is None
    assert {r["model"]: r for r in overridden.usage.iter_rows(named=True)}["beta"]["cost_usd"] == pytest.approx(2530 / 1e6)
    statuses = {(r["model"], r["http_status"]): r for r in rep.statuses.iter_rows(named=True)}
    assert statuses[("alpha", 429)]["attempts"] == 4 + 2  # tasks 0, 3, 6, 9 of os and 0, 3 of kg
    assert statuses[("alpha", 429)]["mean_retry_after_s"] == pytest.approx(1.5)
    assert statuses[("alpha", 200)]["retries"] == 6
    assert rep.throughput["calls"].sum() == 42 + 27


def test_several_files_reported_together(write_run: WriteRun) -> None:
    day1 = write_run("day1", {("alpha", "os"): ALPHA_OS}, fingerprint="fpA")
    day2 = write_run("day2", {("beta", "os"): BETA_OS}, fingerprint="fpB")
    with load([day1, day2]) as res:
        rep = build_report(res)
        sources = res.episodes.group_by("source_file").len().sort("source_file")
    assert sources["len"].to_list() == [10, 10]
    assert sorted(rep.class_counts["model"].to_list()) == ["alpha", "beta"]
    assert rep.runs.height == 2


def test_resumed_episode_replaces_its_infrastructure_failure(write_run: WriteRun, tmp_path: Path) -> None:
    path = write_run("resume", {("alpha", "os"): [("env_error", False, 0.0, "container died")]}, run_id="r1")
    write_run("resume", {("alpha", "os"): [("completed", True, 1.0, None)]}, run_id="r2", path=path)
    with load(path) as res:
        assert res.raw_episodes.height == 2
        assert res.episodes["failure_class"].to_list() == ["completed_success"]
        assert res.env_scores.row(0, named=True)["env_errors"] == 0


def test_report_opens_files_read_only(known_run: Path) -> None:
    before = known_run.stat().st_mtime_ns
    with load(known_run) as res:
        with pytest.raises(StoreError):
            res.sql("CREATE TABLE src0.main.x (a INT)")
    assert known_run.stat().st_mtime_ns == before


def test_file_locked_by_a_running_evaluation_is_a_clear_error(known_run: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(known_run)!r})
            print("locked", flush=True)
            time.sleep(30)
        """)],
        stdout=subprocess.PIPE, text=True, env={**os.environ},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreError, match="locked by another process that publishes no live snapshot"):
            load(known_run)
    finally:
        holder.kill()
        holder.wait()


def test_user_mistakes_are_one_line_errors(tmp_path: Path, known_run: Path) -> None:
    with pytest.raises(ReportError, match="no such file"):
        load(tmp_path / "missing.duckdb")
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    with pytest.raises(ReportError, match="not an agentbench results file"):
        load(other)
    with pytest.raises(ReportError, match="did you mean alpha/os/test/t007/0"):
        commands.show(known_run, "alpha/os/test/t007/1", console=_console())
    with pytest.raises(AgentBenchError, match="choose one with --model-a"):
        commands.compare(known_run, known_run, model_a=None, model_b="gamma", console=_console())


def test_report_command_terminal_and_json(known_run: Path) -> None:
    con = _console()
    assert commands.report([known_run], html=None, json_out=False, console=con) == 0
    text = con.export_text()
    for title in ("Scores", "Overall AgentBench score", "Failure classes", "AgentBench paper convention",
                  "Top failure reasons", "Model calls", "HTTP attempts per status", "Calls per second"):
        assert title in text
    assert "OA (partial: 2 of 8 environments: OS, KG)" in text
    con = _console()
    assert commands.report([known_run], html=None, json_out=True, console=con) == 0
    data = json.loads(con.export_text())
    scores = {(r["model"], r["env"]): r for r in data["scores"]}
    assert scores[("alpha", "os")]["n"] == 10 and scores[("alpha", "os")]["env_errors"] == 1  # the paper's denominator
    assert data["paper_failure_table"]["convention"].startswith("AgentBench paper")
    assert {r["model"] for r in data["overall"]} == {"alpha", "beta"}
    # the model's own outcomes only, through the CLI
    proc = subprocess.run([sys.executable, "-m", "agentbench_async.cli", "report", str(known_run), "--json", "--denominator", "outcomes"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    scores = {(r["model"], r["env"]): r for r in json.loads(proc.stdout)["scores"]}
    assert scores[("alpha", "os")]["n"] == 9 and scores[("alpha", "os")]["score"] == pytest.approx(4 / 9)
    assert json.loads(proc.stdout)["denominator"] == "outcomes" and data["denominator"] == "paper"
    assert "infrastructure failures as failures (the paper's denominator)" in " ".join(text.split())


def test_show_prints_transcript_events_and_calls(known_run: Path) -> None:
    con = _console()
    assert commands.show(known_run, "alpha/os/test/t006/0", console=con) == 0
    text = con.export_text()
    assert "invalid_format" in text and "no action found in reply 1" in text
    assert "Task t006: do the thing" in text  # the prompt
    assert "bad reply 6" in text  # the offending output
    assert "observation" in text and "model calls" in text and "429" in text


def test_compare_two_models_of_one_file(known_run: Path) -> None:
    con = _console()
    assert commands.compare(known_run, known_run, model_a=None, model_b=None, console=con) == 0
    text = con.export_text()
    # os pairs without infra failures: tasks 0-8 minus none for alpha (9 is env_error) and beta (9 is model_error)
    assert "9 pairs: 3 tasks only A solved, 0 only B solved" in text
    assert "McNemar p = 0.2500" in text
    assert "Flipped tasks (3" in text
    assert "1 pairs left out" in text


def test_oa_of_all_eight_with_built_in_fallbacks_names_them(write_run: WriteRun) -> None:
    """--env all with --data-dir where kg, alfworld and webshop fell back to their built-in suites: all eight ran, but
    the OA is not the paper's and says which environments played their own tasks (before: a plain "OA")."""
    paper = {"os": 42.4, "db": 32.0, "kg": 58.8, "card_game": 74.5, "ltp": 16.6, "alfworld": 78.0, "webshop": 61.1, "mind2web": 29.0}
    cells = {("gpt-4", env): [("completed", False, 2 * pct / 100, None), ("completed", False, 0.0, None)] for env, pct in paper.items()}
    path = write_run("mixed", cells)
    con = duckdb.connect(str(path))
    con.execute("UPDATE episodes SET source = 'official' WHERE env NOT IN ('kg', 'alfworld', 'webshop')")
    con.close()
    with load(path) as res:
        overall = build_report(res).overall.row(0, named=True)
    assert overall["complete"] and round(overall["oa"], 2) == 4.01
    assert overall["label"] == "OA (not the paper's: built-in suites for KG, HH, WS)"
