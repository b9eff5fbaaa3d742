"""The sentences a report prints beside its tables (terminal, HTML and the viewer say the same): runs that have not
finished and what a resume re-runs, configurations kept apart or pooled, solved episodes whose status word is not
'completed'."""

from __future__ import annotations

import polars as pl

from ..wording import counted, moment
from .configs import several, shown


def run_state_lines(states: pl.DataFrame | None, resume: pl.DataFrame | None) -> list[str]:
    """Lines for runs that have not finished (one writing the file now, one interrupted, one stopped without an end)
    and what a resume would re-run (``operations.run_states``, the ``resume_work`` view); none when every run
    finished and nothing is left to re-run."""
    lines = []
    for r in (states if states is not None else pl.DataFrame()).iter_rows(named=True):
        done = counted(r["episodes"], "episode")
        if r.get("live"):
            lines.append(f"run {r['run_id']} is writing this file now: this is a snapshot of the {done} it finished so far, "
                         "not a final result")
        elif r["state"] == "interrupted":
            lines.append(f"run {r['run_id']} was interrupted (Ctrl-C) at {moment(r['finished_at'])} after {done}")
        elif r["state"] == "not finished":
            lines.append(f"run {r['run_id']} did not finish: no end was recorded (its process was stopped or killed; last "
                         f"activity {moment(r['last_activity'])}) after {done}")
    rerun = resume if resume is not None else pl.DataFrame()
    if not rerun.is_empty():
        per_status = rerun.group_by("status").agg(pl.col("episodes").sum()).sort("status")
        what = ", ".join(f"{n:,} {s}" for s, n in per_status.iter_rows())
        lines.append(f"running the same command again resumes: it re-runs {counted(int(per_status['episodes'].sum()), 'episode')} "
                     f"({what}) and any task not started yet")
    return lines


def config_lines(table: pl.DataFrame | None, pooled: bool, *, whole: bool = True) -> list[str]:
    """What the report did with several configurations of one model x environment (rows kept apart, or pooled), and
    every differing setting, whole, of each configuration whose label names fewer or cuts a value (not ``whole``: the
    caller shows those in a table, ``configs.configurations_shown``)."""
    if table is None or table.is_empty():
        return []
    if pooled:
        merged = [f"{r['model']} · {r['env']}" for r in table.iter_rows(named=True) if r["configurations"] > 1]
        if not merged:
            return ["--pool: every model × environment has one configuration; nothing was merged"]
        return [f"--pool: rows merge several configurations ({', '.join(merged)}); their n counts the episodes of every "
                "configuration, a task run in two counts twice"]
    lines = [f"{model} · {env}: {len(labels)} configurations, one row each ({' | '.join(labels)})" for model, env, labels in several(table)]
    if lines:
        lines.append("scores are never pooled across configurations; agentbench report --pool merges them anyway")
    if whole and "settings" in table.columns:  # a label names the fewest settings, values cut: every differing one, whole, once
        cut = table.filter(pl.col("config") != pl.col("settings")).unique(["model", "config_id"], maintain_order=True)
        lines += [f"{shown(r)}: every setting that differs: {r['settings']}" for r in cut.iter_rows(named=True)]
    return lines


def solved_lines(solved: pl.DataFrame | None) -> list[str]:
    """Solved episodes whose status word (upstream's) is not 'completed' (``failures.solved_notes``): how they ended."""
    return [f"{shown(r)} · {r['env']}: {counted(r['episodes'], 'solved episode')} {r['outcome_note']} (status {r['status']})"
            for r in (solved if solved is not None else pl.DataFrame()).iter_rows(named=True)]


def attempt_lines(attempts: pl.DataFrame | None) -> list[str]:
    """Episodes run again after an infrastructure failure (the ``attempt_summary`` view, labelled): how many needed more
    than one attempt and why; the earlier attempts are kept (``earlier_attempts``), the scores count the final one."""
    lines = []
    for r in (attempts if attempts is not None else pl.DataFrame()).iter_rows(named=True):
        still = f"{r['still_failing']:,} still failing (shown apart, not scored)" if r["still_failing"] else "none still failing"
        lines.append(f"{shown(r)} · {r['env']}: {counted(r['retried'], 'episode')} needed more than one attempt "
                     f"({counted(r['earlier_attempts'], 'earlier attempt')} kept, {counted(r['failed_calls'], 'failed call')}; most "
                     f"common: {r['top_reason']}); {r['recovered']:,} scored on a later attempt, {still}")  # fmt: skip
    return lines


def unsolvable_lines(unsolvable: pl.DataFrame | None) -> list[str]:
    """Tasks that cannot be solved as AgentBench ships them (the ``unsolvable_tasks`` view), one line per environment and
    reason: which tasks, how many of their episodes were solved anyway (by a guess), and why."""
    frame = unsolvable if unsolvable is not None else pl.DataFrame()
    if frame.is_empty():
        return []
    lines = []
    for (env, reason), group in frame.group_by("env", "reason", maintain_order=True):
        tasks = sorted(set(group["task_id"].to_list()))
        episodes, solved = int(group["episodes"].sum()), int(group["solved"].sum())
        lines.append(f"{env}: {counted(len(tasks), 'task')} cannot be solved as AgentBench ships them ({', '.join(tasks)}): "
                     f"{reason}; {counted(episodes, 'episode')} of them scored as AgentBench scores them ({solved:,} solved "
                     "anyway, by a guess)")  # fmt: skip
    return sorted(lines)



def score_rule_lines(scores: pl.DataFrame | None) -> list[str]:
    """How each db score was computed (``env_scores.score_rule``): AgentBench v0.2's mean of the SELECT, INSERT and UPDATE
    accuracies, or the mean over episodes where a subset lacks a category (and why)."""
    frame = scores if scores is not None and "score_rule" in scores.columns else pl.DataFrame()
    return [f"{shown(r)} · {r['env']}: score = {r['score_rule']}" for r in frame.iter_rows(named=True) if r["score_rule"]]
