"""Repeats: pass@k and pass^k per model x environment x configuration, and the run-to-run spread.

Both follow the scores' denominator (``scores.DENOMINATORS``): ``paper`` (the default) counts every try, an
infrastructure failure (env_error, model_error, cancelled) as a failed one; ``outcomes`` leaves those out. Either
way ``infra`` says how many tries were infrastructure failures (in n, or left out of it)."""

from __future__ import annotations

import polars as pl

from .loading import Results
from .scores import denominator_view
from .stats import pass_at_k, pass_hat_k


def pass_k_table(res: Results, denominator: str = "paper") -> pl.DataFrame:
    """pass@k and pass^k (k = 1 .. the smallest number of tries of a task in the denominator) averaged over tasks;
    ``infra``: the infrastructure failures among the tasks' tries (counted as failed tries under ``paper``, left
    out under ``outcomes``). Empty when no task was repeated."""
    tasks = denominator_view(res, "task_repeats", denominator)
    rows = []
    for (model, env, config_id), group in tasks.group_by(["model", "env", "config_id"], maintain_order=True):
        k_max = int(group["n"].min())
        if int(group["n"].max()) < 2:
            continue
        pairs = list(zip(group["n"].to_list(), group["c"].to_list()))
        infra = int(group["infra"].sum())
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
                    "infra": infra,
                }
            )
    schema = {"model": pl.Utf8, "env": pl.Utf8, "config_id": pl.Utf8, "k": pl.Int64, "tasks": pl.Int64, "pass_at_k": pl.Float64,
              "pass_hat_k": pl.Float64, "infra": pl.Int64}  # fmt: skip
    return pl.DataFrame(rows, schema=schema).sort("model", "env", "config_id", "k")


def spread_table(res: Results, denominator: str = "paper") -> pl.DataFrame:
    """The ``repeat_spread`` view (``repeat_spread_outcomes`` for ``outcomes``), only for model x env with more than
    one repeat."""
    return denominator_view(res, "repeat_spread", denominator).filter(pl.col("repeats") > 1).sort("model", "env", "config_id")
