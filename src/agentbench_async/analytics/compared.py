"""Models compared on the same tasks: a report of a run still going, or interrupted, with its models unevenly done.

The scheduler interleaves the models, but at any moment one may have finished tasks another has not (a slower server,
a model added later, another ``--limit``). Comparing each model's scores over whatever it finished would compare
different tasks, so the model comparison (the scores table and OA) is made over the tasks every compared model has
finished (a cancelled episode is not finished: a resume re-runs it), and the report says so in one line; the scores
over every finished episode of each model stay available beside it.

The models compared are those of one deciding configuration (``episode_outcomes.config_id``: one run config with all
its models, its resumes included; every model when the reader pools) that have an episode of the environment (a model
that never played an environment has no score there, as before, and a partial OA). Different configurations are not
narrowed against each other: their rows are labelled apart already. A task is an environment's task of one split,
repeat and source (official or built-in).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import polars as pl

from ..wording import counted
from . import scores
from .loading import Results

# a task of a configuration (config_id: the run config, with all its models); the columns that tell two tasks apart,
# joined with a separator no id holds
_GROUP = "concat_ws(chr(31), config_id, env)"
_KEY = "concat_ws(chr(31), config_id, env, split, task_id, CAST(\"repeat\" AS VARCHAR), coalesce(source, ''))"
_KEYS_TABLE = "_compared_keys"
# each model's finished tasks; each configuration's compared models of an environment: those with an episode in it
_FINISHED = f"SELECT DISTINCT model, config_id, env, {_KEY} AS task FROM episode_outcomes WHERE status <> 'cancelled'"
_SIDES_CTE = "sides AS (SELECT config_id, env, count(DISTINCT model) AS models FROM episode_outcomes GROUP BY config_id, env)"


@dataclass
class ComparedOn:
    """Which tasks the models are compared on: per environment, the tasks finished by every compared model and those
    finished by any; ``uneven`` when the two differ somewhere (then the comparison is made on the common ones)."""

    models: int  # compared models of the configuration and environment that has the most
    common: dict[str, int]  # env -> tasks finished by every compared model (summed over the configurations)
    finished: dict[str, int]  # env -> tasks finished by at least one
    uneven_groups: set[tuple[str, str]] = field(default_factory=set)  # (config_id, env) whose models finished different tasks

    @property
    def uneven(self) -> bool:
        return bool(self.uneven_groups)

    def line(self) -> str | None:
        """'N of M tasks finished by every model; compared on those (db 40 of 52, ...)', or None when every model has
        finished the same tasks."""
        if not self.uneven:
            return None
        common, finished = sum(self.common.values()), sum(self.finished.values())
        envs = ", ".join(f"{env} {self.common[env]} of {n}" for env, n in sorted(self.finished.items()) if self.common[env] != n)
        return (f"{common:,} of {counted(finished, 'task')} finished by every model; compared on those "
                f"(scores and OA; {envs}); each model's scores over all it finished are listed apart")

    def to_dict(self) -> dict[str, object]:
        return {"uneven": self.uneven, "models": self.models, "line": self.line(),
                "envs": [{"env": env, "tasks_finished_by_every_model": self.common[env], "tasks_finished_by_any_model": n}
                         for env, n in sorted(self.finished.items())]}  # fmt: skip


def compared_on(res: Results) -> ComparedOn:
    """The tasks each environment's compared models have finished (any and all of them), summed over the configurations."""
    frame = res.sql(
        f"""
        WITH per_task AS (
            SELECT config_id, env, task, count(*) AS models FROM ({_FINISHED}) GROUP BY config_id, env, task
        ), {_SIDES_CTE}
        SELECT s.config_id, s.env, s.models AS sides, count(p.task) AS finished,
               count(p.task) FILTER (WHERE p.models = s.models) AS common
        FROM sides AS s LEFT JOIN per_task AS p USING (config_id, env) GROUP BY s.config_id, s.env, s.models
        """
    )
    on = ComparedOn(models=0, common={}, finished={})
    for r in frame.iter_rows(named=True):
        on.models = max(on.models, r["sides"])
        on.common[r["env"]] = on.common.get(r["env"], 0) + r["common"]
        on.finished[r["env"]] = on.finished.get(r["env"], 0) + r["finished"]
        if r["common"] != r["finished"]:
            on.uneven_groups.add((r["config_id"], r["env"]))
    return on


@contextmanager
def on_common_tasks(res: Results, on: ComparedOn) -> Iterator[Results]:
    """Within the block, ``res``'s episodes (``episode_outcomes`` and every view on it) of each configuration and
    environment whose models are uneven (``on``) are those of the tasks every one of them has finished; the others'
    episodes are all there (their cancelled ones too: the denominator's rule for them is unchanged)."""
    res.con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {_KEYS_TABLE} AS
        WITH {_SIDES_CTE}
        SELECT f.task FROM ({_FINISHED}) AS f JOIN sides AS s USING (config_id, env)
        GROUP BY f.task, s.models HAVING count(*) = s.models
        """
    )
    try:
        uneven = ", ".join(_sql_str(f"{config_id}\x1f{env}") for config_id, env in sorted(on.uneven_groups))
        with res.narrowed("episode_outcomes", f"{_GROUP} NOT IN ({uneven}) OR {_KEY} IN (SELECT task FROM temp.main.{_KEYS_TABLE})"):
            yield res
    finally:
        res.con.execute(f"DROP TABLE temp.main.{_KEYS_TABLE}")


def compared_env_scores(res: Results, denominator: str = "paper") -> pl.DataFrame:
    """``scores.env_scores`` over the tasks every compared model has finished (all of them when the models are even)."""
    on = compared_on(res)
    if not on.uneven:
        return scores.env_scores(res, denominator)
    with on_common_tasks(res, on):
        return scores.env_scores(res, denominator)


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
