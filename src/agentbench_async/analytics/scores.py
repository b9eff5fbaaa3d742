"""Scores per model x environment with 95% intervals, and the overall AgentBench score (OA)."""

from __future__ import annotations

import polars as pl

from .loading import Results
from .stats import ABBREV, WEIGHT_INV, bootstrap_interval, overall_score


DENOMINATORS = ("paper", "outcomes")


def denominator_view(res: Results, name: str, denominator: str) -> pl.DataFrame:
    """The view ``name`` under ``denominator``: ``paper``'s is ``name`` itself, ``outcomes``' is ``<name>_outcomes``
    (``env_scores``, ``task_repeats``, ``repeat_spread``); anything else is a ValueError naming the choices."""
    if denominator not in DENOMINATORS:
        raise ValueError(f"denominator {denominator!r}: use one of {', '.join(DENOMINATORS)}")
    return res.view(name if denominator == "paper" else f"{name}_outcomes")


def env_scores(res: Results, denominator: str = "paper") -> pl.DataFrame:
    """The ``env_scores`` view (one row per model x env x configuration) plus ``ci_low``/``ci_high``/``ci_method``
    (Wilson for 0/1 scores, from the view; a fixed-seed bootstrap of the mean otherwise). ``denominator``: ``paper``
    (every episode; an infrastructure failure scores 0, as the paper counts every sample) or ``outcomes`` (the
    model's own outcomes only: the ``env_scores_outcomes`` view)."""
    base = denominator_view(res, "env_scores", denominator).sort("model", "env", "config_id")
    if base.is_empty():
        return base.with_columns(
            pl.lit(None, pl.Float64).alias("ci_low"), pl.lit(None, pl.Float64).alias("ci_high"), pl.lit(None, pl.Utf8).alias("ci_method")
        )
    counted = res.episodes.with_columns(pl.col("counted_score").fill_null(0.0)) if denominator == "paper" else res.episodes.filter(~pl.col("infra"))
    values = counted.group_by("model", "env", "config_id").agg(pl.col("counted_score").sort().alias("values"))
    lookup = {(r["model"], r["env"], r["config_id"]): r["values"] for r in values.iter_rows(named=True)}
    lows: list[float | None] = []
    highs: list[float | None] = []
    methods: list[str | None] = []
    for row in base.iter_rows(named=True):
        if row["n"] == 0:
            lows.append(None)
            highs.append(None)
            methods.append(None)
        elif row["is_binary"]:
            lows.append(row["wilson_low"])
            highs.append(row["wilson_high"])
            methods.append("wilson")
        else:
            lo, hi = bootstrap_interval(lookup[(row["model"], row["env"], row["config_id"])])
            lows.append(lo)
            highs.append(hi)
            methods.append("bootstrap")
    return base.with_columns(
        pl.Series("ci_low", lows, pl.Float64), pl.Series("ci_high", highs, pl.Float64), pl.Series("ci_method", methods, pl.Utf8)
    )


def builtin_envs(res: Results) -> dict[tuple[str, str], set[str]]:
    """(model, config_id) -> the environments that played built-in suites in a configuration whose other environments
    played AgentBench's tasks (``--env all --data-dir`` with built-in fallbacks): the ``builtin_fallbacks`` view. A run
    without any official task is named as such above the scores (the ``data`` deviation)."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in res.builtin_fallbacks.iter_rows(named=True):
        out.setdefault((r["model"], r["config_id"]), set()).add(r["env"])
    return out


def own_task_envs(res: Results) -> dict[tuple[str, str], set[str]]:
    """(model, config_id) -> the environments that played a task file of the user's own (``--tasks ENV=PATH``, source
    ``custom``): not AgentBench's tasks, so in no OA (as the ``overall_score`` view)."""
    out: dict[tuple[str, str], set[str]] = {}
    for model, config_id, env in res.sql("SELECT DISTINCT model, config_id, env FROM episode_outcomes WHERE source = 'custom'").rows():
        out.setdefault((model, config_id), set()).add(env)
    return out


def overall(scores: pl.DataFrame, builtin: dict[tuple[str, str], set[str]] | None = None,
            own: dict[tuple[str, str], set[str]] | None = None) -> pl.DataFrame:
    """OA per model and configuration from an ``env_scores`` frame (scores 0..1): complete (all eight environments)
    or partial. ``builtin`` (``builtin_envs``): environments that played built-in suites; ``builtin_suites`` and the
    label name them (such an OA is not the paper's, even with all eight run), as the ``overall_score`` view does.

    Environments outside AgentBench's eight (e.g. the ``echo`` self-test) are not in OA, nor those that played a task
    file of the user's own (``own``: ``own_task_envs``).
    """
    rows = []
    for model, config_id in sorted(set(zip(scores["model"].to_list(), scores["config_id"].to_list()))):
        sub = scores.filter((pl.col("model") == model) & (pl.col("config_id") == config_id) & (pl.col("n") > 0)
                            & pl.col("env").is_in(list(WEIGHT_INV)) & ~pl.col("env").is_in(list((own or {}).get((model, config_id), ()))))
        per_env = {r["env"]: 100 * r["score"] for r in sub.iter_rows(named=True)}
        if not per_env:
            continue
        oa, complete = overall_score(per_env)
        envs = [ABBREV[e] for e in WEIGHT_INV if e in per_env]
        label = "OA" if complete else f"OA (partial: {len(envs)} of 8 environments: {', '.join(envs)})"
        fallbacks = [ABBREV[e] for e in WEIGHT_INV if e in per_env and e in (builtin or {}).get((model, config_id), set())]
        names = ", ".join(fallbacks) or None
        if names:
            label = (f"OA (not the paper's: built-in suites for {names})" if complete
                     else f"{label[:-1]}; built-in suites, not the paper's tasks: {names})")
        rows.append({"model": model, "oa": oa, "complete": complete, "envs_run": len(envs), "label": label, "builtin_suites": names,
                     "config_id": config_id})
    schema = {"model": pl.Utf8, "oa": pl.Float64, "complete": pl.Boolean, "envs_run": pl.Int64, "label": pl.Utf8,
              "builtin_suites": pl.Utf8, "config_id": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)
