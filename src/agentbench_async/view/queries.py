"""What each page of the viewer shows, read from opened results (``analytics.load``) in a worker thread.

Scores, failure classes, the paper table, operations and comparisons come from the analytics modules and
their SQL views; this module adds only what a browser needs on top: filters and pagination done in SQL
(a page of a 100,000-episode file reads 50 rows), one episode's rows, the live figures, and the read-only
SQL box.
"""

from __future__ import annotations

import csv
import io
import json
import threading
from contextlib import contextmanager, nullcontext
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import polars as pl

from ..analytics import behaviour as behaviour_mod
from ..analytics import compare as compare_mod
from ..analytics import configs, failures, notes, operations, scores
from ..analytics.compared import compared_env_scores, compared_on, on_common_tasks
from ..analytics.loading import ReportError, Results, load
from ..analytics.commands import settings_difference
from ..analytics.run_settings import deviation_groups, deviation_table, episode_differences, score_settings
from ..analytics.transcript import EPISODE_ROWS, find_episode
from .. import statuses as st
from ..errors import AgentBenchError
from ..store.live import live_dir
from .source import Source

T = TypeVar("T")
PAGE_SIZE = 50
SQL_ROWS = 1000  # rows of a SQL answer shown on the page (the CSV download has them all)
SQL_TIMEOUT_S = 20.0
CSV_ROWS = 1_000_000  # rows of the CSV download at most (view --csv-max-rows)
CSV_BYTES = 64 << 20  # bytes of the CSV download at most (view --csv-max-mib)
_CSV_BATCH = 10_000  # rows fetched at a time for the CSV
SORTS: dict[str, str] = {
    "episode": "episode_id, source_file, run_id",
    "score": "counted_score DESC NULLS LAST, episode_id",
    "turns": "n_turns DESC NULLS LAST, episode_id",
    "finished": "finished_at DESC NULLS LAST, episode_id",
}


class ViewError(AgentBenchError):
    """A request the viewer cannot answer (bad filter value, unknown episode, a write in the SQL box)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _file_index(value: str, paths: Sequence[Path], what: str = "file") -> int | None:
    if value == "":
        return None
    if not value.isdigit() or not 1 <= int(value) <= len(paths):
        raise ViewError(f"{what}={value!r}: expected a file number from 1 to {len(paths)}")
    return int(value) - 1


# -- overview -------------------------------------------------------------------------------------
@dataclass
class Overview:
    runs: pl.DataFrame  # one row per run with its file, dates, models, envs, episodes
    scores: pl.DataFrame  # analytics.scores.env_scores: env_scores + ci_low/ci_high/ci_method
    overall: pl.DataFrame  # model, oa, complete, envs_run, label
    live_files: list[str]
    pending: bool = False  # bootstrap intervals still being computed (ci_method PENDING)
    deviations: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (run ids, lines) per distinct list
    notes: list[str] = field(default_factory=list)  # analytics.notes: unfinished runs, configurations, solved episodes
    hints: list[str] = field(default_factory=list)  # operations.tool_call_hints
    limits: list[str] = field(default_factory=list)  # operations.limit_lines: what each model's request limits paced to
    # models unevenly done: scores/overall above are on the tasks every one finished (analytics.compared); the line says
    # so, and these are each model's over all its episodes (None when the models are even)
    compared: str | None = None
    scores_all: pl.DataFrame | None = None
    overall_all: pl.DataFrame | None = None


PENDING = "bootstrap: computing"


def overview(res: Results, source: Source) -> Overview:
    runs = res.sql(
        """
        SELECT r.source_file, r.run_id, r.created_at, r.command, r.version, r.finished_at, r.interrupted,
               count(e.episode_id) AS episodes,
               string_agg(DISTINCT e.model, ', ' ORDER BY e.model) AS models,
               string_agg(DISTINCT e.env, ', ' ORDER BY e.env) AS envs
        FROM runs AS r LEFT JOIN episodes AS e ON e.run_id = r.run_id AND e.source_file = r.source_file
        GROUP BY ALL ORDER BY r.created_at
        """
    )
    env_scores, pending = _scores_now(res, source, "scores", scores.env_scores)
    on = compared_on(res)
    every: pl.DataFrame | None = None
    if on.uneven:  # compared on the tasks every model has finished; each model's over all its episodes kept apart
        every = env_scores
        with on_common_tasks(res, on):
            env_scores, pending_compared = _scores_now(res, source, "compared scores", compared_env_scores)
        pending = pending or pending_compared
    table = deviation_table(res)
    env_scores = env_scores.join(score_settings(res, table), on=["model", "env", "config_id"], how="left", maintain_order="left")
    groups = deviation_groups(table, runs["run_id"].to_list())
    found = source.memo(res, "configs", configs.config_table)
    states = operations.run_states(res)
    runs = runs.join(states.select("run_id", "state", "live", "last_activity"), on="run_id", how="left", maintain_order="left")
    lines = [*notes.run_state_lines(states, res.resume_work), *notes.attempt_lines(configs.with_labels(res.attempt_summary, found)),
             *notes.unsolvable_lines(res.unsolvable_tasks.sort("env", "task_id")), *notes.config_lines(found, res.pooled),
             *notes.solved_lines(configs.with_labels(failures.solved_notes(res), found))]
    lines += notes.score_rule_lines(configs.with_labels(env_scores, found))  # how each db score was computed
    builtin = scores.builtin_envs(res)

    def labelled(env_scores: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        overall = configs.with_labels(scores.overall(env_scores, builtin, scores.own_task_envs(res)), configs.overall_labels(found), keys=("model",))
        return configs.with_labels(env_scores, found), overall

    shown_scores, overall = labelled(env_scores)
    scores_all, overall_all = labelled(every.join(score_settings(res, table), on=["model", "env", "config_id"], how="left",
                                                  maintain_order="left")) if every is not None else (None, None)
    return Overview(runs, shown_scores, overall, [str(p) for p in res.live_files], pending, groups, lines,
                    [*operations.tool_call_hints(res), *operations.waiting_hints(res)], operations.limit_lines(res),
                    on.line(), scores_all, overall_all)


def _scores_now(res: Results, source: Source, name: str, compute: Callable[[Results], pl.DataFrame]) -> tuple[pl.DataFrame, bool]:
    """``compute(res)`` (scores with intervals) if memoised, else the view's scores with their Wilson intervals and the
    bootstrap ones pending (computed meanwhile); and whether they are pending."""
    env_scores = source.memo_ready(res, name, compute)
    if env_scores is not None:
        return env_scores, False
    # bootstrap intervals of big non-0/1 cells take seconds: shown when ready
    return res.env_scores.sort("model", "env", "config_id").with_columns(
        pl.when(pl.col("is_binary") & (pl.col("n") > 0)).then(pl.col("wilson_low")).alias("ci_low"),
        pl.when(pl.col("is_binary") & (pl.col("n") > 0)).then(pl.col("wilson_high")).alias("ci_high"),
        pl.when(pl.col("n") == 0).then(None).when(pl.col("is_binary")).then(pl.lit("wilson")).otherwise(pl.lit(PENDING))
        .alias("ci_method")), True


# -- failures -------------------------------------------------------------------------------------
@dataclass
class FailureMatrix:
    counts: pl.DataFrame  # analytics.failures.class_counts: model, env, <nine classes>, total
    paper: pl.DataFrame  # model, env, episodes, the paper's five shares
    solved: list[str] = field(default_factory=list)  # solved episodes whose status word is not 'completed'
    behaviour: pl.DataFrame = field(default_factory=pl.DataFrame)  # analytics.behaviour.behaviour_table: loops, recovery
    reasons: pl.DataFrame = field(default_factory=pl.DataFrame)  # analytics.failures.top_reasons: each class's reasons, examples


def failure_matrix(res: Results, source: Source) -> FailureMatrix:
    found = source.memo(res, "configs", configs.config_table)
    counts = configs.with_labels(source.memo(res, "classes", failures.class_counts), found)
    return FailureMatrix(counts, configs.with_labels(source.memo(res, "paper", failures.paper_table), found),
                         notes.solved_lines(configs.with_labels(failures.solved_notes(res), found)),
                         configs.with_labels(source.memo(res, "behaviour", behaviour_mod.behaviour_table), found),
                         configs.with_labels(source.memo(res, "reasons", failures.top_reasons), found))


# -- episodes -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeFilters:
    """The episode list's filters, as held in the URL (so a filtered list is a link to share)."""

    model: str = ""
    env: str = ""
    status: str = ""  # a status (``invalid_format``) or a failure class (``completed_wrong``)
    config: str = ""  # a deciding configuration (config_id): one row of the scores or of the failure matrix
    task: str = ""  # part of the task id
    repeat: str = ""
    q: str = ""  # free text: episode id, error, or any message of the transcript
    file: str = ""  # 1-based file number when several files are shown
    sort: str = "episode"
    page: int = 1

    @classmethod
    def from_query(cls, query: Mapping[str, str], paths: Sequence[Path]) -> EpisodeFilters:
        f = cls(**{k: query.get(k, "").strip() for k in ("model", "env", "status", "config", "task", "repeat", "q", "file")},
                sort=query.get("sort", "episode") or "episode")
        if f.repeat and not f.repeat.lstrip("-").isdigit():
            raise ViewError(f"repeat={f.repeat!r}: expected a whole number (the repeat index, 0 for the first try)")
        if f.sort not in SORTS:
            raise ViewError(f"sort={f.sort!r}: expected one of {', '.join(SORTS)}")
        _file_index(f.file, paths)
        page = query.get("page", "1") or "1"
        if not page.isdigit() or int(page) < 1:
            raise ViewError(f"page={page!r}: expected a page number from 1")
        return replace(f, page=int(page))

    def params(self, **changes: Any) -> dict[str, Any]:
        """The query parameters of this filter set (``changes`` applied; page 1 is left out)."""
        values = {k: getattr(self, k) for k in ("model", "env", "status", "config", "task", "repeat", "q", "file", "sort", "page")}
        values.update(changes)
        if values["page"] == 1:
            values["page"] = ""
        if values["sort"] == "episode":
            values["sort"] = ""
        return values

    def where(self, paths: Sequence[Path]) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("model", self.model), ("env", self.env), ("config_id", self.config)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if self.status:
            clauses.append("(status = ? OR failure_class = ?)")
            params += [self.status, self.status]
        if self.task:
            clauses.append("contains(lower(task_id), ?)")
            params.append(self.task.lower())
        if self.repeat:
            clauses.append("repeat = ?")
            params.append(int(self.repeat))
        index = _file_index(self.file, paths)
        if index is not None:
            clauses.append("source_file = ?")
            params.append(str(paths[index]))
        if self.q:
            needle = self.q.lower()
            clauses.append(
                "(contains(lower(episode_id), ?) OR contains(lower(coalesce(error, '')), ?) OR (run_id, episode_id, source_file) "
                "IN (SELECT run_id, episode_id, source_file FROM turns WHERE contains(lower(content), ?)))"
            )
            params += [needle, needle, needle]
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


@dataclass
class EpisodePage:
    filters: EpisodeFilters
    rows: pl.DataFrame
    total: int
    models: list[str]
    envs: list[str]
    statuses: list[str]
    files: list[str]
    configs: list[tuple[str, str]] = field(default_factory=list)  # (config_id, label) when there are several

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def episode_rows(res: Results, filters: EpisodeFilters, limit: int | None = PAGE_SIZE, offset: int = 0) -> pl.DataFrame:
    """The filtered episode list's rows in its order (``limit`` None: all of them), with the match count ``total``."""
    where, params = filters.where(res.paths)
    window = "" if limit is None else f" LIMIT {limit} OFFSET {offset}"
    return res.sql(
        f"""
        SELECT source_file, run_id, episode_id, model, env, split, task_id, repeat, status, failure_class, infra,
               score, n_turns, left(error, 160) AS error, finished_at, count(*) OVER () AS total
        FROM episode_outcomes AS o{where}
        ORDER BY {SORTS[filters.sort]}{window}
        """,
        params,
    )


def episode_page(res: Results, filters: EpisodeFilters, source: Source | None = None) -> EpisodePage:
    """A page of the filtered episode list; a page past the last one shows the last one."""
    where, params = filters.where(res.paths)

    def page_rows(page: int) -> pl.DataFrame:
        return episode_rows(res, filters, PAGE_SIZE, PAGE_SIZE * (page - 1))

    rows = page_rows(filters.page)
    if rows.height:
        total = int(rows["total"][0])
    else:  # past the last page (or nothing matches): count on its own, and show the last page
        total = int(res.sql(f"SELECT count(*) AS n FROM episode_outcomes AS o{where}", params)["n"][0])
        last = max(1, -(-total // PAGE_SIZE))
        if filters.page > last:
            filters = replace(filters, page=last)
            rows = page_rows(last) if total else rows
    rows = rows.drop("total")
    keys = res.sql("SELECT DISTINCT model, env FROM episodes")
    present = set(res.sql("SELECT DISTINCT status FROM episodes")["status"].to_list())
    statuses = [c for c in failures.FAILURE_CLASSES if c in present or c.startswith("completed_") and "completed" in present]
    found = source.memo(res, "configs", configs.config_table) if source is not None else configs.config_table(res)
    return EpisodePage(filters, rows, total, sorted(set(keys["model"].to_list())), sorted(set(keys["env"].to_list())),
                       statuses, [str(p) for p in res.paths], _config_choices(found))


def _config_choices(found: pl.DataFrame) -> list[tuple[str, str]]:
    """(config_id, what it is) for the episode list's configuration filter; empty when there is one configuration."""
    choices: dict[str, list[str]] = {}
    for r in found.iter_rows(named=True):
        labels = choices.setdefault(r["config_id"], [])
        if r["config"] and r["config"] not in labels:
            labels.append(r["config"])
    if len(choices) < 2:
        return []
    return [(cid, f"{cid[:8]}: {'; '.join(labels)}" if labels else cid[:8]) for cid, labels in choices.items()]


# -- one episode ------------------------------------------------------------------------------------
@dataclass
class Transcript:
    episode: dict[str, Any]
    turns: list[dict[str, Any]]  # transcript_turns rows: by_model marks the model's own replies
    calls: list[dict[str, Any]]  # every HTTP attempt of the episode (agent and judge)
    others: list[dict[str, Any]] = field(default_factory=list)  # other stored attempts of the same episode id
    state: str = ""  # running | unfinished: an episode not finished yet (its turns so far, from live_turns)
    differs: list[str] = field(default_factory=list)  # its run's settings that differ from AgentBench v0.2 for its env


_EPISODE_FIELDS = ("source_file", "run_id", "episode_id", "model", "env", "split", "task_id", "repeat", "status", "success",
                   "paper_status", "score", "n_turns", "input_tokens", "output_tokens", "action_mode", "source", "started_at",
                   "finished_at", "error", "details")


def transcript(res: Results, episode_id: str, run_id: str = "", file: str = "") -> Transcript:
    """The stored episode (latest attempt, or the one of ``run_id``/``file``), or, while it runs, its turns so far."""
    if not episode_id:
        raise ViewError("no episode given: open one from the episode list (/episodes)")
    index = _file_index(file, res.paths)

    def pick(frame: pl.DataFrame) -> pl.DataFrame:
        if index is not None:
            frame = frame.filter(pl.col("source_file") == str(res.paths[index]))
        return frame.filter(pl.col("run_id") == run_id) if run_id else frame

    rows = pick(res.sql(EPISODE_ROWS, [episode_id]))
    live = pick(res.sql("SELECT * FROM live_transcript_turns WHERE episode_id = ? ORDER BY run_id, seq", [episode_id]))
    if not live.is_empty() and (run_id or rows.is_empty() or live["run_id"][0] not in rows["run_id"].to_list()):
        return _unfinished(res, live, rows)
    if rows.is_empty():
        try:
            find_episode(res, episode_id)  # its message names close ids
        except ReportError as exc:
            raise ViewError(str(exc), status=404) from None
        raise ViewError(f"episode {episode_id!r} has no attempt in run {run_id or '?'} of the file(s) asked for", status=404)
    ep = rows.row(0, named=True)
    key = [ep["run_id"], ep["episode_id"], ep["source_file"]]
    turns = res.sql("SELECT * FROM transcript_turns WHERE run_id = ? AND episode_id = ? AND source_file = ? ORDER BY seq", key)
    calls = res.sql("SELECT * FROM model_calls WHERE run_id = ? AND episode_id = ? AND source_file = ? "
                    "ORDER BY turn, started_at, attempt", key)
    others = [r for r in rows.iter_rows(named=True) if (r["run_id"], r["source_file"]) != (ep["run_id"], ep["source_file"])]
    return Transcript(ep, list(turns.iter_rows(named=True)), list(calls.iter_rows(named=True)), others,
                      differs=episode_differences(res, ep["run_id"], ep["env"]))


def _unfinished(res: Results, live: pl.DataFrame, finished: pl.DataFrame) -> Transcript:
    first = live.row(0, named=True)
    live = live.filter((pl.col("run_id") == first["run_id"]) & (pl.col("source_file") == first["source_file"]))
    status = res.live_status(first["source_file"]) if Path(first["source_file"]) in res.live_files else None
    state = "running" if status is not None and status.run_id == first["run_id"] else "unfinished"
    ep: dict[str, Any] = dict.fromkeys(_EPISODE_FIELDS)
    rest = first["episode_id"].removeprefix(f"{first['model']}/{first['env']}/")
    split, _, task_repeat = rest.partition("/")
    task, _, repeat = task_repeat.rpartition("/")
    ep.update({k: first[k] for k in ("source_file", "run_id", "episode_id", "model", "env")},
              split=split, task_id=task, repeat=repeat, status=state, n_turns=int(live["turn"].max() or 0),
              started_at=live["created_at"].min())
    return Transcript(ep, list(live.iter_rows(named=True)), [], list(finished.iter_rows(named=True)), state)


# -- live -----------------------------------------------------------------------------------------
@dataclass
class Stream:
    model: str
    env: str
    done: int
    total: int | None  # the episodes planned (a stopped file: its runs' recorded plan, else what it stores)
    in_flight: int
    statuses: dict[str, int]


@dataclass
class FileLive:
    path: str
    running: bool
    streams: list[Stream]
    figures: dict[str, Any]  # calls, calls_per_s, retries, http_429, input_tokens, output_tokens, cost_usd, eta_s, ...
    usage: pl.DataFrame  # analytics.operations.usage_table (finished episodes' calls) with cost_usd
    in_progress: pl.DataFrame  # episodes with turns but no end yet (live_turns): the latest IN_PROGRESS_SHOWN
    in_progress_total: int
    stopped: list[str] = field(default_factory=list)  # a file no run writes: runs that did not finish, what a resume re-runs


IN_PROGRESS_SHOWN = 30


def live(res: Results, source: Source) -> list[FileLive]:
    out = []
    for path in res.paths:
        name = str(path)
        status = res.live_status(path)
        summary = res.sql("SELECT model, env, status, count(*) AS n FROM episode_outcomes WHERE source_file = ? GROUP BY ALL", [name])
        counts: dict[tuple[str, str], dict[str, int]] = {}
        for r in summary.iter_rows(named=True):
            counts.setdefault((r["model"], r["env"]), {})[r["status"]] = r["n"]
        facts = _file_memo(res, path, source, "live-facts", _live_facts)
        usage = facts.usage
        cost = usage["cost_usd"].drop_nulls().sum() if usage["cost_usd"].drop_nulls().len() else None
        if status is not None:
            streams = [Stream(s.model, s.env, s.done, s.total, s.in_flight, dict(s.statuses)) for s in status.streams]
            figures = {
                "calls": status.calls, "calls_per_s": status.calls_per_s, "retries": status.retries, "errors": status.errors,
                "http_429": status.http_429, "input_tokens": status.input_tokens, "output_tokens": status.output_tokens,
                "episodes_per_s": status.episodes_per_s, "eta_s": status.eta_s, "elapsed_s": status.elapsed_s,
                "age_s": status.age_s, "run_id": status.run_id, "cost_usd": cost, "spend": status.spend,
            }  # fmt: skip
        else:
            streams = _stopped_streams(counts, _planned(res, name))
            ops = res.sql(
                """
                SELECT count(*) AS calls, count(*) FILTER (WHERE attempt > 1) AS retries,
                       count(*) FILTER (WHERE error IS NOT NULL) AS errors,
                       count(*) FILTER (WHERE http_status = 429) AS http_429,
                       coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens
                FROM model_calls WHERE source_file = ?
                """,
                [name],
            ).row(0, named=True)
            seconds = facts.states["wall_s"].sum() if facts.states.height else 0.0
            figures = {**ops, "calls_per_s": ops["calls"] / seconds if seconds else None, "eta_s": None, "cost_usd": cost}
        figures["rerun"] = int(facts.resume["episodes"].sum()) if facts.resume.height else 0
        figures["stopped"] = status is None and (figures["rerun"] > 0 or facts.states.filter(pl.col("state") != "finished").height > 0)
        in_progress = res.sql(
            "SELECT run_id, episode_id, model, env, max(turn) AS turns, max(created_at) AS last_at, count(*) OVER () AS total "
            f"FROM live_turns WHERE source_file = ? GROUP BY ALL ORDER BY last_at DESC NULLS LAST LIMIT {IN_PROGRESS_SHOWN}",
            [name],
        )
        total = int(in_progress["total"][0]) if in_progress.height else 0
        lines = notes.run_state_lines(facts.states.with_columns(pl.lit(False).alias("live")), facts.resume) if status is None else []
        out.append(FileLive(name, status is not None, streams, figures, usage, in_progress.drop("total"), total, lines))
    return out


def _planned(res: Results, name: str) -> dict[tuple[str, str], int]:
    """(model, env) -> the episodes the latest run of file ``name`` that recorded it was to hold (``runs.config.planned``)."""
    rows = res.sql("SELECT config FROM runs WHERE source_file = ? AND json_exists(config, '$.planned') ORDER BY created_at", [name])
    planned: dict[tuple[str, str], int] = {}
    for (config,) in rows.iter_rows():
        found = json.loads(config).get("planned") if isinstance(config, str) else (config or {}).get("planned")
        for model, envs in (found or {}).items():
            planned.update({(model, env): int(n) for env, n in envs.items()})
    return planned


def _stopped_streams(counts: Mapping[tuple[str, str], dict[str, int]], planned: Mapping[tuple[str, str], int]) -> list[Stream]:
    """A file no run writes: per model x env, the episodes done (a status a resume keeps) out of those planned (the stored
    ones when no run recorded a plan): an interrupted run shows 8/16, never 12/12 with its cancelled episodes counted."""
    streams = []
    for key in sorted({*counts, *planned}):
        statuses = dict(counts.get(key, {}))
        done = sum(n for status, n in statuses.items() if status not in st.RETRY_ON_RESUME)
        streams.append(Stream(key[0], key[1], done, max(planned.get(key, 0), sum(statuses.values())), 0, statuses))
    return streams


@dataclass
class _LiveFacts:
    usage: pl.DataFrame  # operations.usage_table (finished episodes' calls) with cost_usd
    states: pl.DataFrame  # the run_states view
    resume: pl.DataFrame  # the resume_work view


def _live_facts(res: Results) -> _LiveFacts:
    usage = configs.with_labels(operations.usage_table(res), configs.overall_labels(configs.config_table(res)), keys=("model",))
    return _LiveFacts(usage, res.run_states, res.resume_work)  # usage: a row per model x caller x configuration, labelled


def _file_memo(res: Results, path: Path, source: Source, name: str, compute: Callable[[Results], T]) -> T:
    """``compute`` of one file (memoised): with several files open, that file opened on its own."""
    if len(res.paths) == 1:
        return source.memo(res, name, compute)
    with load(path) as own:
        return source.memo(own, name, compute)


# -- compare --------------------------------------------------------------------------------------
@dataclass
class CompareView:
    files: list[str]
    sides: list[list[compare_mod.Side]]  # per file: its models, each in each of its configurations
    fa: int
    fb: int
    a: compare_mod.Side | None
    b: compare_mod.Side | None
    result: compare_mod.Comparison | None = None
    conflicts: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def ma(self) -> str:
        return self.a.model if self.a else ""

    @property
    def mb(self) -> str:
        return self.b.model if self.b else ""


def _choose(sides: list[compare_mod.Side], model: str, config: str, other: compare_mod.Side | None) -> compare_mod.Side | None:
    """The side of ``model`` in ``config`` (a config id; else the model's first configuration that is not ``other``)."""
    mine = [s for s in sides if s.model == model] if model else [s for s in sides if s != other]
    exact = [s for s in mine if s.config_id == config]
    if exact:
        return exact[0]
    return next((s for s in mine if s != other), mine[0] if mine else None)


def comparison(res: Results, query: Mapping[str, str], source: Source) -> CompareView:
    paths = res.paths
    fa = _file_index(query.get("fa", ""), paths, "fa") or 0
    fb_index = _file_index(query.get("fb", ""), paths, "fb")
    fb = fb_index if fb_index is not None else (1 if len(paths) > 1 and not query.get("mb") else fa)
    per_file = [source.memo(res, "sides", lambda _, p=p: _file_sides(res, p), str(p)) for p in paths]
    ma, mb = query.get("ma", ""), query.get("mb", "")
    for model, index, side in ((ma, fa, "A"), (mb, fb, "B")):
        models = sorted({s.model for s in per_file[index]})
        if model and model not in models:
            raise ViewError(f"model {model!r} ({side}) is not in {paths[index]}; it has: {', '.join(models) or 'no episodes'}")
    a = _choose(per_file[fa], ma, query.get("ca", ""), None)
    b = _choose(per_file[fb], mb, query.get("cb", ""), a if fa == fb else None)
    view = CompareView([str(p) for p in paths], per_file, fa, fb, a, b)
    if a is None or b is None:
        view.message = "Pick two models (of one file or of two files), or one model in two configurations, to compare."
        return view
    if fa == fb and a == b:
        view.message = "A and B are the same model of the same file: pick another model, configuration or file for one side."
        return view
    view.result, view.conflicts = source.memo(res, "compare", lambda _: _compare(paths[fa], paths[fb], a, b), fa, fb, a, b)
    return view


def _file_sides(res: Results, path: Path) -> list[compare_mod.Side]:
    """The sides of one file (with several files open, that file opened on its own: its configurations, never pooled:
    a comparison pairs one configuration with another)."""
    if len(res.paths) == 1 and not res.pooled:
        return compare_mod.sides(res)
    with load(path) as own:
        return compare_mod.sides(own)


def _compare(path_a: Path, path_b: Path, a: compare_mod.Side, b: compare_mod.Side) -> tuple[compare_mod.Comparison, list[str]]:
    """Compare with analytics.compare on each side's own file (so one model in two files pairs up)."""
    with load(path_a) as res_a:
        same = path_a == path_b
        with load(path_b) if not same else nullcontext(res_a) as res_b:
            conflicts = settings_difference(res_a, res_b, a, b)
            label_a, label_b = a.name, b.name
            if label_a == label_b:
                label_a, label_b = f"{label_a} ({path_a.name})", f"{label_b} ({path_b.name})"
            return compare_mod.compare_results(res_a, res_b, a, b, label_a, label_b), conflicts


# -- SQL ------------------------------------------------------------------------------------------
@dataclass
class SqlAnswer:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool  # more rows than shown


def read_only_statement(query: str) -> str:
    """The one SELECT in ``query`` (also DESCRIBE, SHOW, SUMMARIZE, FROM-first); anything else is refused."""
    if not query.strip():
        raise ViewError("write a query, e.g. SELECT * FROM env_scores")
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise ViewError(f"SQL error: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        raise ViewError(f"one statement at a time, please ({len(statements)} given)")
    statement = statements[0]
    if statement.type != duckdb.StatementType.SELECT:
        kind = statement.type.name.replace("_", " ")
        raise ViewError(f"the viewer is read-only: {kind} statements are refused (only SELECT queries run here)", status=403)
    return str(statement.query).strip()


def run_sql(res: Results, query: str, limit: int = SQL_ROWS) -> SqlAnswer:
    """Run one read-only query; ``limit`` rows are kept.

    The connection is locked down first: no file or network access (``read_csv('/etc/...')``, ``COPY TO``,
    ``ATTACH``, ``INSTALL`` fail; only the snapshot folder of a file a run is writing stays readable) and no
    setting can be changed back. The query runs on that connection itself, not through ``Results.sql`` (which
    may reopen the files on another connection when a live snapshot moved on): an error there is shown and
    the user runs it again. A query running longer than ``SQL_TIMEOUT_S`` is interrupted.
    """
    with _locked_down(res, query, limit) as cursor:
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchall()
    truncated = len(rows) > limit
    return SqlAnswer(columns, rows[:limit] if truncated else rows, truncated)


@contextmanager
def _locked_down(res: Results, query: str, limit: int) -> Iterator[duckdb.DuckDBPyConnection]:
    """The cursor of one read-only query (at most ``limit + 1`` rows) on ``res``'s connection, locked down as
    ``run_sql`` says; reading it inside the block is under the same time limit and turns errors into ``ViewError``."""
    statement = read_only_statement(query)
    con = res.con
    allowed = ", ".join(_sql_str(str(live_dir(p.resolve())) + "/") for p in res.live_files)
    if allowed:
        con.execute(f"SET allowed_directories = [{allowed}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    timer = threading.Timer(SQL_TIMEOUT_S, con.interrupt)
    timer.start()
    try:
        yield con.execute(f"SELECT * FROM (\n{statement}\n) LIMIT {limit + 1}")
    except duckdb.Error as exc:
        if isinstance(exc, duckdb.InterruptException):
            raise ViewError(f"the query ran longer than {SQL_TIMEOUT_S:g} s and was stopped") from None
        raise ViewError(f"SQL error: {str(exc).splitlines()[0]}") from None
    finally:
        timer.cancel()


@dataclass(frozen=True)
class CsvExport:
    """A SQL answer as CSV, cut at a bound: ``cut`` says which (None: every row is in it)."""

    body: bytes
    rows: int
    cut: str | None


def csv_export(res: Results, query: str, max_rows: int = CSV_ROWS, max_bytes: int = CSV_BYTES) -> CsvExport:
    """The answer of one read-only query (locked down as ``run_sql``) as CSV (header row, ``\\n`` line ends, NULL an empty
    field), at most ``max_rows`` rows and ``max_bytes`` bytes, cut at a row's end: rows are fetched a batch at a time
    and the text stops at the bound, so nothing past it is held (the issue's 169 MB export held 2.27 GB)."""
    line = _LastLine()
    writer = csv.writer(line, lineterminator="\n")
    out: list[bytes] = []
    size, cut = 0, None
    with _locked_down(res, query, max_rows) as cursor:
        for row in _batches(cursor, [d[0] for d in cursor.description or []]):
            if len(out) > max_rows:
                cut = f"{max_rows:,} rows"
                break
            writer.writerow(["" if v is None else v for v in row])
            data = line.text.encode("utf-8")
            if size + len(data) > max_bytes:
                cut = f"{max_bytes:,} bytes"
                break
            out.append(data)
            size += len(data)
    return CsvExport(b"".join(out), max(len(out) - 1, 0), cut)


def _batches(cursor: duckdb.DuckDBPyConnection, header: list[str]) -> Iterator[Sequence[Any]]:
    """``header``, then the cursor's rows, fetched ``_CSV_BATCH`` at a time."""
    yield header
    while batch := cursor.fetchmany(_CSV_BATCH):
        yield from batch


class _LastLine:
    """A file for ``csv.writer`` keeping only the line written last (one ``write`` per row)."""

    text = ""

    def write(self, text: str) -> None:
        self.text = text


def schema(res: Results) -> list[tuple[str, str]]:
    """(table or view, its columns) for the SQL page's reference list."""
    rows = res.sql(
        "SELECT v.view_name AS name, string_agg(c.column_name, ', ' ORDER BY c.column_index) AS columns "
        "FROM duckdb_views() AS v JOIN duckdb_columns() AS c ON c.database_name = v.database_name "
        "AND c.schema_name = v.schema_name AND c.table_name = v.view_name "
        "WHERE NOT v.internal AND v.database_name = 'memory' AND v.schema_name = 'main' GROUP BY v.view_name ORDER BY v.view_name"
    )
    return list(zip(rows["name"].to_list(), rows["columns"].to_list()))
