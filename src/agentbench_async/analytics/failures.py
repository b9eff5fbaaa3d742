"""Failure classes per model x environment, AgentBench's five-column table, and the drill-down."""

from __future__ import annotations

import polars as pl

from ..envs import ENV_NAMES
from .loading import Results

FAILURE_CLASSES: tuple[str, ...] = (
    "completed_success",
    "completed_wrong",
    "context_limit_exceeded",
    "invalid_format",
    "invalid_action",
    "task_limit_exceeded",
    "episode_limit_exceeded",
    "env_error",
    "model_error",
    "cancelled",
)
INFRA_CLASSES: tuple[str, ...] = ("env_error", "model_error", "cancelled")
# Classes of opt-in settings (episode_limits): a table shows their column only when some row has such episodes
OPT_IN_CLASSES: tuple[str, ...] = ("episode_limit_exceeded",)
# What each class holds (the documentation's failure-class reference is generated from this).
CLASS_MEANINGS: dict[str, str] = {
    "completed_success": "solved: every episode the environment counts as a success, whatever its status (an ltp game "
    "solved at the round limit ends `task_limit_exceeded`; `outcome_note` says how it ended)",
    "completed_wrong": "ended normally (`completed`) without solving the task",
    "context_limit_exceeded": "status `context_limit_exceeded`, not solved",
    "invalid_format": "status `invalid_format`: a reply the protocol cannot parse",
    "invalid_action": "status `invalid_action`: a parsed action the environment cannot execute",
    "task_limit_exceeded": "status `task_limit_exceeded`, not solved: the turn cap was reached",
    "episode_limit_exceeded": "status `episode_limit_exceeded`, not solved: a per-episode limit of the run (tokens, cost, "
    "wall time: `episode_limits`) ended it",
    "env_error": "status `env_error`: the environment failed; run again on resume",
    "model_error": "status `model_error`: the API failed; run again on resume",
    "cancelled": "status `cancelled`: the run was interrupted; run again on resume",
}
PAPER_COLUMNS: tuple[str, ...] = (
    "completed",
    "context_limit_exceeded",
    "invalid_format",
    "invalid_action",
    "task_limit_exceeded",
)
PAPER_TITLES: dict[str, str] = {
    "completed": "Completed",
    "context_limit_exceeded": "Context Limit Exceeded",
    "invalid_format": "Invalid Format",
    "invalid_action": "Invalid Action",
    "task_limit_exceeded": "Task Limit Exceeded",
}


def shown_classes(counts: pl.DataFrame) -> tuple[str, ...]:
    """The classes a table of ``counts`` (``class_counts``) shows: every one, an opt-in setting's only where it occurs."""
    return tuple(c for c in FAILURE_CLASSES if c not in OPT_IN_CLASSES or (c in counts.columns and counts[c].sum()))


KEYS = ["model", "env", "config_id"]  # one row per model x env x deciding configuration (analytics/configs.py)


def class_counts(res: Results) -> pl.DataFrame:
    """One row per model x env x configuration, a count column per failure class (all nine, zeros included) and
    ``total``."""
    long = res.failure_classes
    out = res.episodes.select(KEYS).unique().sort(KEYS)
    for cls in FAILURE_CLASSES:
        part = long.filter(pl.col("failure_class") == cls).select(*KEYS, pl.col("episodes").alias(cls))
        out = out.join(part, on=KEYS, how="left")
    out = out.with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in FAILURE_CLASSES)
    return out.with_columns(pl.sum_horizontal(*FAILURE_CLASSES).alias("total"))


def class_shares(counts: pl.DataFrame) -> pl.DataFrame:
    """The same frame with shares (0..1 of each model x env's episodes) instead of counts."""
    return counts.with_columns((pl.col(c) / pl.col("total")).alias(c) for c in FAILURE_CLASSES)


def paper_table(res: Results) -> pl.DataFrame:
    """AgentBench's outcome table (paper convention): shares of the five columns per model x env x configuration, for
    AgentBench's own environments on its tasks (the paper has no column for a plugin's, nor for a task file of your own)."""
    table = res.paper_failure_table.filter(pl.col("env").is_in(ENV_NAMES))
    own = res.sql("SELECT DISTINCT model, env, config_id FROM episode_outcomes WHERE source = 'custom'")  # --tasks ENV=PATH
    if not own.is_empty() and not table.is_empty():
        table = table.join(own, on=KEYS, how="anti")
    return table.sort(KEYS)


def top_reasons(res: Results, per_class: int = 3) -> pl.DataFrame:
    """The ``per_class`` most frequent reasons of every non-success class per model x env x configuration."""
    reasons = res.failure_reasons
    if reasons.is_empty():
        return reasons
    return (
        reasons.sort([*KEYS, "failure_class", "episodes", "reason"], descending=[False, False, False, False, True, False])
        .with_columns(pl.int_range(pl.len()).over(*KEYS, "failure_class").alias("rank"))
        .filter(pl.col("rank") < per_class)
        .drop("rank")
    )


def solved_notes(res: Results) -> pl.DataFrame:
    """Solved episodes whose status is not 'completed' (the ``solved_notes`` view): how they ended, upstream's way."""
    return res.solved_notes.sort(*KEYS, "status")
