"""Deciding configurations: one score per setting.

Every score, interval, OA, failure table and comparison is computed per model x environment x *configuration*
(``config_id`` in the SQL views: the run's fingerprint, what decides results). A file holding two configurations
of one model x environment (``--new-run`` with ``--history full``, another ltp round count, ...) gives two rows,
each labelled by what tells it apart from the other (``history: full``); ``pooled`` (``report --pool``) merges
them into one row on purpose, and says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from ..config import deciding_model_fields
from ..settings import result_settings
from .loading import Results
from .run_settings import run_configs

POOLED = "pooled"  # the config_id of every row when the reader pools configurations (loading.load(pool=True))


def _model_entry(config: Mapping[str, Any], model: str) -> dict[str, Any]:
    for entry in config.get("models") or []:
        if isinstance(entry, dict) and entry.get("name") == model:
            return entry
    return {}


def _printed(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def deciding_settings(config: Mapping[str, Any], model: str, envs: list[str]) -> dict[str, str]:
    """What decides ``model``'s results on ``envs`` in a run with this stored config: the run-wide settings and
    the environments' result options (``settings.result_settings``), the seed, and the model's own fields."""
    settings = dict(result_settings(dict(config), envs))
    settings["seed"] = _printed(config.get("seed", 0))
    entry = _model_entry(config, model)
    for key, value in deciding_model_fields(entry).items() if entry else ():
        if key != "name" and value not in (None, {}):
            settings[key] = _printed(value)
    return settings


def _everything(config: Mapping[str, Any]) -> dict[str, str]:
    """The rest of what the fingerprint holds: the other models, every environment's options, the judge."""
    models = sorted(m.get("name", "?") for m in config.get("models") or [] if isinstance(m, dict))
    return {"models in the run": ", ".join(models), "judge": _printed((config.get("judge") or {}).get("name")),
            "environment options": _printed(config.get("env_options") or {})}  # fmt: skip


def _differences(settings: dict[str, dict[str, str]]) -> dict[str, str]:
    """config_id -> 'key: value, ...' for the keys whose values are not the same in all of ``settings``."""
    keys = sorted({k for s in settings.values() for k in s})
    differing = [k for k in keys if len({s.get(k) for s in settings.values()}) > 1]
    return {cid: ", ".join(f"{k}: {s.get(k, 'default')}" for k in differing) for cid, s in settings.items()}


def labels(configs: Mapping[str, Mapping[str, Any]], runs: Mapping[str, list[str]], model: str, envs: list[str]) -> dict[str, str]:
    """config_id -> what tells that configuration of ``model`` on ``envs`` apart from the others in ``configs``
    ('' when there is only one): its deciding settings that differ, else the rest of its run's fingerprint
    (other models in the run, other environments' options), else its run ids."""
    if len(configs) < 2:
        return dict.fromkeys(configs, "")
    for describe in (lambda c: deciding_settings(c, model, envs), _everything):
        found = _differences({cid: describe(c) for cid, c in configs.items()})
        if all(found.values()) and len(set(found.values())) == len(found):
            return found
    return {cid: "run " + ", ".join(runs.get(cid, [])) for cid in configs}


def config_table(res: Results) -> pl.DataFrame:
    """One row per model x env x configuration with episodes: ``config`` is the configuration's label, what tells it
    apart from the model's other configurations over all its environments ('' when the model has one; 'pooled: N
    configurations' when pooled), so a model's rows of one configuration carry one label in every table; ``runs``
    are the run ids behind the row and ``configurations`` how many distinct run configurations they had (more than
    one only in a pooled row)."""
    rows = res.sql(
        "SELECT model, env, config_id, run_id, min(r.created_at) AS created_at FROM episode_outcomes "
        "LEFT JOIN (SELECT run_id, min(created_at) AS created_at FROM runs GROUP BY run_id) AS r USING (run_id) "
        "GROUP BY ALL ORDER BY created_at NULLS FIRST, run_id"
    )
    config_of = run_configs(res)
    runs_of: dict[tuple[str, str, str], list[str]] = {}
    for r in rows.iter_rows(named=True):
        runs_of.setdefault((r["model"], r["env"], r["config_id"]), []).append(r["run_id"])
    models: dict[str, dict[str, list[str]]] = {}  # model -> config_id -> its runs, over all environments
    for (model, _, cid), runs in runs_of.items():
        known = models.setdefault(model, {}).setdefault(cid, [])
        known += [r for r in runs if r not in known]
    named: dict[tuple[str, str], str] = {}
    for model, by_config in models.items():
        if list(by_config) == [POOLED]:
            found = {_fingerprint(config_of.get(run, {})) for run in by_config[POOLED]}
            named[(model, POOLED)] = f"pooled: {len(found)} configurations" if len(found) > 1 else ""
            continue
        envs = sorted({env for (m, env, _) in runs_of if m == model})
        configs = {cid: config_of.get(runs[-1], {}) for cid, runs in by_config.items()}
        named.update({(model, cid): text for cid, text in labels(configs, by_config, model, envs).items()})
    out = [(model, env, cid, named[(model, cid)], runs, len({_fingerprint(config_of.get(run, {})) for run in runs}))
           for (model, env, cid), runs in runs_of.items()]
    schema = {"model": pl.String, "env": pl.String, "config_id": pl.String, "config": pl.String, "runs": pl.List(pl.String),
              "configurations": pl.Int64}  # fmt: skip
    return pl.DataFrame(out, schema=schema, orient="row").sort("model", "env", "config")


def overall_labels(table: pl.DataFrame) -> pl.DataFrame:
    """model, config_id, config: the labels of a model's configurations (for OA rows and comparison sides)."""
    return table.select("model", "config_id", "config").unique(maintain_order=True)


def _fingerprint(config: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in config.items() if k not in ("out", "limit", "repeats", "max_concurrency", "envs", "ray")},
                      sort_keys=True, default=str)  # fmt: skip


def with_labels(frame: pl.DataFrame, table: pl.DataFrame, keys: Iterable[str] = ("model", "env")) -> pl.DataFrame:
    """``frame`` (rows with model, [env,] config_id) with the ``config`` label column of ``table``."""
    on = [*keys, "config_id"]
    if frame.is_empty() or "config_id" not in frame.columns:
        return frame.with_columns(pl.lit("", pl.String).alias("config")) if "config" not in frame.columns else frame
    labelled = frame.join(table.select(*on, "config").unique(on, keep="first"), on=on, how="left", maintain_order="left")
    return labelled.with_columns(pl.col("config").fill_null(""))


def shown(row: Mapping[str, Any]) -> str:
    """The model's name as a report shows a row: with its configuration's label when it has one."""
    label = row.get("config") or ""
    return f"{row['model']} ({label})" if label else str(row["model"])


def several(table: pl.DataFrame) -> list[tuple[str, str, list[str]]]:
    """(model, env, labels) of every model x env reported in more than one row (configurations kept apart)."""
    out = []
    for (model, env), group in table.group_by(["model", "env"], maintain_order=True):
        if group.height > 1:
            out.append((model, env, group["config"].to_list()))
    return out
