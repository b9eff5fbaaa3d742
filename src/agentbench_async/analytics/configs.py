"""Deciding configurations: one score per setting.

Every score, interval, OA, failure table and comparison is computed per model x environment x *configuration*
(``config_id`` in the SQL views: the run's fingerprint, what decides results). A file holding two configurations
of one model x environment (``--new-run`` with ``--history full``, another ltp round count, ...) gives two rows,
each labelled by what tells it apart from the other (``history: full``); ``pooled`` (``report --pool``) merges
them into one row on purpose, and says so.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

import polars as pl

from ..differences import described, differing, settings_of
from ..settings import DATA_DIR_SKIPPED
from .loading import Results
from .run_settings import run_configs

POOLED = "pooled"  # the config_id of every row when the reader pools configurations (loading.load(pool=True))


def _everything(config: Mapping[str, Any]) -> dict[str, tuple[str | None, str]]:
    """The rest of what the fingerprint holds: the other models, the judge, every environment's options."""
    models = sorted(str(m.get("name", "?")) for m in config.get("models") or [] if isinstance(m, dict))
    out: dict[str, tuple[str | None, str]] = {"models in the run": (None, ", ".join(models)),
                                               "judge": (None, str((config.get("judge") or {}).get("name")))}
    for env, options in sorted((config.get("env_options") or {}).items()):
        out.update({f"{env}.{k}": (None, str(v)) for k, v in sorted((options or {}).items())})
    return out


def labels(configs: Mapping[str, Mapping[str, Any]], runs: Mapping[str, list[str]], model: str,
           played: Mapping[str, Collection[str]], *, cut: bool = True) -> dict[str, str]:
    """config_id -> what tells that configuration of ``model`` apart from the others in ``configs`` ('' when there is
    only one): the fewest of the deciding settings that differ (``differences.differing``: an environment's settings
    only between configurations that played it, ``played``) that tell every configuration apart, else the rest of its
    run's fingerprint (other models in the run, other environments' options), else its run ids. Long values are cut
    (``differences.SHORT``). Not ``cut``: every setting that differs, whole (the settings table, the hover text)."""
    if len(configs) < 2:
        return dict.fromkeys(configs, "")
    for describe in (lambda c, cid: settings_of(c, played[cid], model), lambda c, cid: _everything(c)):
        settings = {cid: describe(c, cid) for cid, c in configs.items()}
        keys = differing(settings, played)
        if not cut:  # the whole story: every setting that differs, no value cut
            found = {cid: described(s, keys, played[cid], cut=False) for cid, s in settings.items()}
            if all(found.values()):
                return found
            continue
        for chosen in _subsets(keys):
            found = {cid: described(s, chosen, played[cid]) for cid, s in settings.items()}
            if all(found.values()) and len(set(found.values())) == len(found):
                return found
    return {cid: "run " + ", ".join(runs.get(cid, [])) for cid in configs}


def _subsets(keys: dict[str, str | None], most: int = 3) -> Iterator[dict[str, str | None]]:
    """``keys``' subsets, fewest first (in the keys' order within a size), up to ``most`` keys; then all of them."""
    names = list(keys)
    for size in range(1, min(most, len(names)) + 1):
        for combo in itertools.combinations(names, size):
            yield {k: keys[k] for k in combo}
    if len(names) > most:
        yield keys


def config_table(res: Results) -> pl.DataFrame:
    """One row per model x env x configuration with episodes: ``config`` is the configuration's label, what tells it
    apart from the model's other configurations over all its environments ('' when the model has one; 'pooled: N
    configurations' when pooled), so a model's rows of one configuration carry one label in every table; ``runs``
    are the run ids behind the row and ``configurations`` how many distinct run configurations they had (more than
    one only in a pooled row); ``settings`` is the label with no value cut (the report's settings table, the view's
    hover text)."""
    config_of, runs_of, configurations = _configurations(res)
    named: dict[tuple[str, str], str] = {}
    whole: dict[tuple[str, str], str] = {}
    for model, by_config, played, configs in configurations:
        if list(by_config) == [POOLED]:
            found = {_fingerprint(config_of.get(run, {})) for run in by_config[POOLED]}
            named[(model, POOLED)] = whole[(model, POOLED)] = f"pooled: {len(found)} configurations" if len(found) > 1 else ""
            continue
        named.update({(model, cid): text for cid, text in labels(configs, by_config, model, played).items()})
        whole.update({(model, cid): text for cid, text in labels(configs, by_config, model, played, cut=False).items()})
    out = [(model, env, cid, named[(model, cid)], whole[(model, cid)], runs, len({_fingerprint(config_of.get(run, {})) for run in runs}))
           for (model, env, cid), runs in runs_of.items()]
    schema = {"model": pl.String, "env": pl.String, "config_id": pl.String, "config": pl.String, "settings": pl.String,
              "runs": pl.List(pl.String), "configurations": pl.Int64}  # fmt: skip
    return pl.DataFrame(out, schema=schema, orient="row").sort("model", "env", "config")


_Configurations = list[tuple[str, dict[str, list[str]], dict[str, set[str]], dict[str, dict[str, Any]]]]


def _configurations(res: Results) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str, str], list[str]], _Configurations]:
    """The stored configs by run, the runs behind each model x env x config_id, and per model: its config_ids' runs, the
    environments each played and its config (``_merged``)."""
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
    played: dict[str, dict[str, set[str]]] = {}  # model -> config_id -> the environments it has episodes of
    for (model, env, cid), runs in runs_of.items():
        known = models.setdefault(model, {}).setdefault(cid, [])
        known += [r for r in runs if r not in known]
        played.setdefault(model, {}).setdefault(cid, set()).add(env)
    out = [(model, by_config, played[model], {cid: _merged([config_of.get(r, {}) for r in runs]) for cid, runs in by_config.items()})
           for model, by_config in models.items()]  # fmt: skip
    return config_of, runs_of, out


def configuration(res: Results, model: str, config_id: str) -> tuple[dict[str, Any], set[str]]:
    """``model``'s configuration ``config_id``: its runs' config (``_merged``) and the environments it played."""
    for name, _, played, configs in _configurations(res)[2]:
        if name == model and config_id in configs:
            return configs[config_id], played[config_id]
    return {}, set()


def _merged(configs: list[dict[str, Any]]) -> dict[str, Any]:
    """One config for the runs of one configuration (oldest first; a resume may name other environments): the latest
    run's, with each environment's options and data as the latest run that named it stored them."""
    merged = dict(configs[-1]) if configs else {}
    options: dict[str, Any] = {}
    skipped: dict[str, Any] = {}
    for config in configs:
        for env in config.get("envs") or []:
            options[env] = (config.get("env_options") or {}).get(env)
            skipped.pop(env, None)
            if env in (config.get(DATA_DIR_SKIPPED) or {}):
                skipped[env] = config[DATA_DIR_SKIPPED][env]
    judged = [c for c in configs if "ltp" in (c.get("envs") or [])]
    if judged:  # the judge judged ltp only: the latest run that played it says which
        merged["judge"] = judged[-1].get("judge")
    merged["env_options"] = {env: o for env, o in options.items() if o}
    merged[DATA_DIR_SKIPPED] = skipped
    merged["envs"] = list(options)
    return merged


def configurations_shown(table: pl.DataFrame) -> list[tuple[str, str, str, str]]:
    """(model, label, every setting that differs uncut, run ids) of each labelled configuration: the report's
    settings table beside the short labels."""
    if table.is_empty() or "settings" not in table.columns:
        return []
    rows: dict[tuple[str, str], tuple[str, str, str, list[str]]] = {}
    for r in table.filter(pl.col("config") != "").iter_rows(named=True):
        runs = rows.setdefault((r["model"], r["config_id"]), (r["model"], r["config"], r["settings"], []))[3]
        runs += [run for run in r["runs"] if run not in runs]
    return sorted((model, label, settings, ", ".join(runs)) for model, label, settings, runs in rows.values())


def overall_labels(table: pl.DataFrame) -> pl.DataFrame:
    """model, config_id, config, settings: the labels of a model's configurations (for OA rows and comparison sides)."""
    return table.select("model", "config_id", "config", "settings").unique(maintain_order=True)


def _fingerprint(config: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in config.items() if k not in ("out", "limit", "repeats", "max_concurrency", "envs", "ray")},
                      sort_keys=True, default=str)  # fmt: skip


def with_labels(frame: pl.DataFrame, table: pl.DataFrame, keys: Iterable[str] = ("model", "env")) -> pl.DataFrame:
    """``frame`` (rows with model, [env,] config_id) with the ``config`` label column of ``table``, and ``config_full``:
    the label with no value cut (what the view shows on hover)."""
    on = [*keys, "config_id"]
    if frame.is_empty() or "config_id" not in frame.columns:
        if "config" in frame.columns:
            return frame
        return frame.with_columns(pl.lit("", pl.String).alias("config"), pl.lit("", pl.String).alias("config_full"))
    full = pl.col("settings") if "settings" in table.columns else pl.col("config")
    columns = table.select(*on, "config", full.alias("config_full")).unique(on, keep="first")
    labelled = frame.join(columns, on=on, how="left", maintain_order="left")
    return labelled.with_columns(pl.col("config").fill_null(""), pl.col("config_full").fill_null(""))


def shown(row: Mapping[str, Any]) -> str:
    """The model's name as a report shows a row: with its configuration's label when it has one."""
    label = row.get("config") or ""
    return f"{row['model']} ({label})" if label else str(row["model"])


def shown_in_full(row: Mapping[str, Any]) -> str:
    """``shown`` with no value of the label cut ('' when nothing was cut): a page's hover text."""
    full = row.get("config_full") or ""
    return f"{row['model']} ({full})" if full and full != row.get("config") else ""


def several(table: pl.DataFrame) -> list[tuple[str, str, list[str]]]:
    """(model, env, labels) of every model x env reported in more than one row (configurations kept apart)."""
    out = []
    for (model, env), group in table.group_by(["model", "env"], maintain_order=True):
        if group.height > 1:
            out.append((model, env, group["config"].to_list()))
    return out
