"""Repeats: pass@k and pass^k per model x environment x configuration, and the run-to-run spread."""

from __future__ import annotations

import polars as pl

from .loading import Results
from .stats import pass_at_k, pass_hat_k


def pass_k_table(res: Results) -> pl.DataFrame:
    """pass@k and pass^k (k = 1 .. the smallest number of counted repeats of a task) averaged over tasks.

    Empty when no task was repeated. Infrastructure failures are not tries (they are re-run on resume).
    """
    tasks = res.task_repeats
    rows = []
    for (model, env, config_id), group in tasks.group_by(["model", "env", "config_id"], maintain_order=True):
        k_max = int(group["n"].min())
        if int(group["n"].max()) < 2:
            continue
        pairs = list(zip(group["n"].to_list(), group["c"].to_list()))
        for k in range(1, k_max + 1):
            rows.append(
                {
                    "model": model,
                    "env": env,
                    "config_id": config_id,
                    "k": k,
                    "tasks": len(pairs),
                    "pass_at_k": sum(pass_at_k(n, c, k) for n, c in pairs) / len(pairs),
                    "pass_hat_k": sum(pass_hat_k(n, c, k) for n, c in pairs) / len(pairs),
                }
            )
    schema = {"model": pl.Utf8, "env": pl.Utf8, "config_id": pl.Utf8, "k": pl.Int64, "tasks": pl.Int64, "pass_at_k": pl.Float64,
              "pass_hat_k": pl.Float64}  # fmt: skip
    return pl.DataFrame(rows, schema=schema).sort("model", "env", "config_id", "k")


def spread_table(res: Results) -> pl.DataFrame:
    """The ``repeat_spread`` view, only for model x env with more than one repeat."""
    return res.repeat_spread.filter(pl.col("repeats") > 1).sort("model", "env", "config_id")
