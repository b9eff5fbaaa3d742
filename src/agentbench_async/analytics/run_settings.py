"""The runs' settings as the analytics need them: which differ from AgentBench v0.2 (printed above the
scores by ``report``) and which decide results (``compare`` refuses to pair runs where they differ)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from ..deviation import Deviation
from ..envs import ENV_NAMES
from ..settings import recorded_deviations
from .loading import Results

# models: the models a row concerns ("," between them), empty: every model of the run
DEVIATION_COLUMNS = ("run_id", "source_file", "setting", "value", "agentbench", "note", "envs", "line", "models")
AGENTBENCH_SETTINGS = "AgentBench v0.2 settings"  # what a score or run with no deviation is labelled
OWN_ENVIRONMENT = "not an AgentBench environment"  # what the score of a plugin's or a --env FILE.py's is labelled


def plays_agentbench(envs: list[str]) -> bool:
    """Whether any of ``envs`` is one of AgentBench's eight (a plugin's or a file's scores have no paper to differ from)."""
    return any(env in ENV_NAMES for env in envs)
THINKING = "reasoning_handling"  # the deviation a run shows when thinking was cut out of replies' content


def _config(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def run_configs(res: Results) -> dict[str, dict[str, Any]]:
    """run_id -> the run's stored config."""
    return {r["run_id"]: _config(r["config"]) for r in res.runs.select("run_id", "config").iter_rows(named=True)}


def thinking_deviations(res: Results) -> dict[str, list[tuple[Deviation, tuple[str, ...]]]]:
    """run_id -> the ``reasoning_handling`` deviation of each of its models whose replies had a ``<think>`` block cut out
    of the content before the environment read it (the ``thinking_removed`` view; ``reasoning_handling: separate``),
    with how many replies it touched and the environments where it did, and that model: AgentBench v0.2 parsed the whole
    content and kept it in the history (``reasoning_handling: raw`` does). Decided from the stored turns, not the config:
    a run whose model never wrote thinking into its content differs in nothing."""
    frame = res.view("thinking_removed") if "thinking_removed" in res.views else pl.DataFrame()
    out: dict[str, list[tuple[Deviation, tuple[str, ...]]]] = {}
    if frame.is_empty():
        return out
    several = frame.group_by("run_id").agg(pl.col("model").n_unique().alias("n"))
    many = {r for r, n in several.iter_rows() if n > 1}
    for (run_id, model), group in frame.sort("env").group_by("run_id", "model", maintain_order=True):
        touched, replies = int(group["replies_touched"].sum()), int(group["replies"].sum())
        whose = f" of {model}" if run_id in many else ""
        value = f"separate (thinking removed from {touched:,} of {replies:,} replies{whose})"
        out.setdefault(str(run_id), []).append((Deviation(
            THINKING, value, "reasoning_handling: raw, the whole content parsed and kept in the history",
            "AgentBench v0.2 parsed the whole content", envs=tuple(group["env"].to_list())), (str(model),)))
    return out


def deviation_table(res: Results) -> pl.DataFrame:
    """One row per run x setting that is not AgentBench v0.2's (runs in creation order), leaving out those that concern
    only environments the run has no episode of; after a run's stored ones, what its replies showed (thinking cut out
    of the content: ``thinking_deviations``), naming the model it concerns."""
    rows = []
    played: dict[str, set[str]] = {}
    for run_id, env in res.episodes.select("run_id", "env").unique().iter_rows():
        played.setdefault(run_id, set()).add(env)
    observed = thinking_deviations(res)
    for run in res.runs.sort("created_at").select("run_id", "source_file", "config").iter_rows(named=True):
        envs = played.get(run["run_id"])
        found = [(d, ()) for d in recorded_deviations(_config(run["config"]))] + observed.get(run["run_id"], [])
        for d, models in found:
            if envs and d.envs and not envs & set(d.envs):
                continue  # it concerns only environments the run did not play (one that could not start here)
            rows.append({"run_id": run["run_id"], "source_file": run["source_file"], "setting": d.setting, "value": d.value,
                         "agentbench": d.agentbench, "note": d.note, "envs": ",".join(d.envs), "line": d.line(),
                         "models": ",".join(models)})
    return pl.DataFrame(rows, schema={c: pl.String for c in DEVIATION_COLUMNS})


def score_settings(res: Results, table: pl.DataFrame) -> pl.DataFrame:
    """model, env, config_id, settings: for each score (one per model x env x configuration), ``AGENTBENCH_SETTINGS``
    when no run behind it differs from v0.2 in a way that concerns that environment, else "differs: " + the
    settings that do (named as in the list above the scores), so a score is never shown without its footnote."""
    schema = {"model": pl.String, "env": pl.String, "config_id": pl.String, "settings": pl.String}
    if res.episodes.is_empty():
        return pl.DataFrame(schema=schema)
    pairs = res.episodes.select("model", "env", "config_id", "run_id").unique()
    rows = []
    for (model, env, config_id), group in pairs.group_by("model", "env", "config_id", maintain_order=True):
        runs = set(group["run_id"].to_list())
        names: list[str] = []
        for r in table.iter_rows(named=True):
            if r["run_id"] in runs and (not r["envs"] or env in r["envs"].split(",")) and r["setting"] not in names \
                    and (not r["models"] or model in r["models"].split(",")):  # fmt: skip
                names.append(r["setting"])
        rows.append({"model": model, "env": env, "config_id": config_id,
                     "settings": "differs: " + ", ".join(names) if names
                     else AGENTBENCH_SETTINGS if plays_agentbench([env]) else OWN_ENVIRONMENT})  # fmt: skip
    return pl.DataFrame(rows, schema=schema)


def episode_differences(res: Results, run_id: str, env: str) -> list[str]:
    """The settings of run ``run_id`` that differ from AgentBench v0.2 and concern ``env``: an episode's footnote (thinking
    cut out of the content where the run's replies in ``env`` had it)."""
    found = [d for d in recorded_deviations(run_configs(res).get(run_id, {})) if d.concerns(env)]
    found += [d for d, _ in thinking_deviations(res).get(run_id, []) if d.concerns(env)]
    return list(dict.fromkeys(d.setting for d in found))


def deviation_groups(table: pl.DataFrame, runs: list[str]) -> list[tuple[list[str], list[str]]]:
    """(run ids, lines) for each distinct list of deviations among ``runs``: one group when all agree."""
    by_run: dict[str, tuple[str, ...]] = {run: () for run in runs}
    for r in table.iter_rows(named=True):
        by_run[r["run_id"]] = (*by_run.get(r["run_id"], ()), r["line"])
    groups: dict[tuple[str, ...], list[str]] = {}
    for run, lines in by_run.items():
        groups.setdefault(lines, []).append(run)
    return [(ids, list(lines)) for lines, ids in groups.items()]
