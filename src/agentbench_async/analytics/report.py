"""Everything a report shows, computed once from opened results (terminal, HTML and JSON render it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import polars as pl

from . import behaviour, configs, failures, operations, repeats, run_settings, scores
from .compared import ComparedOn, compared_on, on_common_tasks
from .failures import KEYS
from .loading import Results
from .operations import Prices


@dataclass
class Report:
    files: list[str]
    runs: pl.DataFrame  # run_id, created_at, command, version, interrupted, episodes
    deviations: pl.DataFrame  # run x setting not AgentBench v0.2's (run_settings.DEVIATION_COLUMNS)
    scores: pl.DataFrame  # env_scores + ci_low/ci_high/ci_method + settings (run_settings.score_settings)
    overall: pl.DataFrame  # model, oa, complete, envs_run, label
    class_counts: pl.DataFrame  # model, env, <nine classes>, total
    paper: pl.DataFrame  # model, env, episodes, five paper columns (shares)
    reasons: pl.DataFrame  # top failure reasons with examples
    turns_used: pl.DataFrame  # model, env, failure_class, n_turns, episodes
    pass_k: pl.DataFrame
    spread: pl.DataFrame
    usage: pl.DataFrame
    statuses: pl.DataFrame
    throughput: pl.DataFrame
    reasoning: pl.DataFrame | None = None  # reasoning_usage rows of models that thought (empty if none)
    cost: pl.DataFrame | None = None  # cost_by_model_env rows of models with a price (empty if none)
    # Deciding configurations (configs.py): the frames above have config_id and config (its label, '' when a
    # model x env has one configuration); configs lists them, pooled says the reader merged them (--pool).
    configs: pl.DataFrame | None = None
    pooled: bool = False
    solved: pl.DataFrame | None = None  # solved episodes whose status is not 'completed' (failures.solved_notes)
    run_states: pl.DataFrame | None = None  # run_states + live (a run writing the file now)
    resume: pl.DataFrame | None = None  # resume_work: what running the same command again would re-run
    rates: pl.DataFrame | None = None  # call_rates: calls per wall-clock second of the runs
    tool_hints: list[str] | None = None  # operations.tool_call_hints
    denominator: str = "paper"  # paper: every episode in n (infrastructure failures score 0); outcomes: the model's own
    limit_lines: list[str] | None = None  # operations.limit_lines: what each model's request limits paced to
    behaviour: pl.DataFrame | None = None  # behaviour.behaviour_table: loops among task-limit episodes, recovery after errors
    # Models unevenly done (a run still going or interrupted): scores and overall above are over the tasks every compared
    # model has finished (compared.py); these are each model's over every episode it finished. None when even.
    compared: ComparedOn | None = None
    attempts: pl.DataFrame | None = None  # attempt_summary: episodes that needed more than one attempt, and why
    unsolvable: pl.DataFrame | None = None  # unsolvable_tasks: tasks that cannot be solved as AgentBench ships them, and why
    scores_all: pl.DataFrame | None = None
    overall_all: pl.DataFrame | None = None

    @property
    def plays_agentbench(self) -> bool:
        """Whether any score is of an AgentBench environment (else no line about AgentBench's settings is shown)."""
        return run_settings.plays_agentbench(self.scores["env"].to_list() if "env" in self.scores.columns else [])

    def deviation_groups(self) -> list[tuple[list[str], list[str]]]:
        """(run ids, "setting: value — not comparable ..." lines) per distinct set of deviations."""
        return run_settings.deviation_groups(self.deviations, self.runs["run_id"].to_list())

    @property
    def class_shares(self) -> pl.DataFrame:
        return failures.class_shares(self.class_counts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN -> null, timestamps -> ISO 8601)."""
        return {
            "files": self.files,
            "runs": _rows(self.runs),
            "pooled": self.pooled,
            "denominator": self.denominator,
            "configurations": _rows(self.configs) if self.configs is not None else [],
            "settings_differing_from_agentbench": _rows(self.deviations.drop("line")),
            "scores": _rows(self.scores.drop("wilson_low", "wilson_high")),
            "overall": _rows(self.overall),
            "compared_on": self.compared.to_dict() if self.compared is not None else {"uneven": False, "line": None, "envs": []},
            "every_finished_episode": {
                "scores": _rows(self.scores_all.drop("wilson_low", "wilson_high")) if self.scores_all is not None else None,
                "overall": _rows(self.overall_all) if self.overall_all is not None else None,
            },
            "failure_classes": _rows(self.class_counts),
            "solved_not_completed": _rows(self.solved) if self.solved is not None else [],
            "paper_failure_table": {
                "convention": "AgentBench paper: Task Limit Exceeded includes environment and API errors; cancelled left out",
                "rows": _rows(self.paper),
            },
            "failure_reasons": _rows(self.reasons),
            "behaviour": _rows(self.behaviour) if self.behaviour is not None else [],
            "repeats": {"pass_k": _rows(self.pass_k), "spread": _rows(self.spread)},
            "resume": _rows(self.resume) if self.resume is not None else [],
            "attempts": _rows(self.attempts) if self.attempts is not None else [],
            "unsolvable_tasks": _rows(self.unsolvable) if self.unsolvable is not None else [],
            "operations": {
                "usage": _rows(self.usage),
                "http_statuses": _rows(self.statuses),
                "calls_per_second": _rows(self.throughput),
                "call_rates": _rows(self.rates) if self.rates is not None else [],
                "hints": self.tool_hints or [],
                "limits": self.limit_lines or [],
                "reasoning": _rows(self.reasoning) if self.reasoning is not None else [],
                "cost": _rows(self.cost) if self.cost is not None else [],
            },
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _jsonable(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def build_report(res: Results, prices: Prices | None = None, denominator: str = "paper") -> Report:
    """Every table of the report; ``denominator`` (``paper``: every episode, infrastructure failures scored 0;
    ``outcomes``: the model's own outcomes only) decides the scores, OA, pass@k/pass^k and the run-to-run spread."""
    runs = res.sql(
        """
        SELECT r.run_id, r.created_at, r.command, r.version, r.finished_at, r.interrupted, r.source_file,
               (SELECT count(*) FROM episodes e WHERE e.run_id = r.run_id) AS episodes
        FROM runs r ORDER BY r.created_at
        """
    )
    deviations = run_settings.deviation_table(res)
    table = configs.config_table(res)
    settings = run_settings.score_settings(res, deviations)
    builtin = scores.builtin_envs(res)
    own = scores.own_task_envs(res)  # --tasks ENV=PATH: in no OA

    def scored(env_scores: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        labelled = env_scores.join(settings, on=["model", "env", "config_id"], how="left", maintain_order="left")
        return (configs.with_labels(labelled, table),
                configs.with_labels(scores.overall(env_scores, builtin, own), configs.overall_labels(table), keys=("model",)))

    all_scores, all_overall = scored(scores.env_scores(res, denominator))
    on = compared_on(res)
    compared_scores, compared_overall, full = all_scores, all_overall, (None, None)
    if on.uneven:  # the models are compared on the tasks every one of them has finished; their full numbers kept apart
        with on_common_tasks(res, on):
            compared_scores, compared_overall = scored(scores.env_scores(res, denominator))
        full = (all_scores, all_overall)
    return Report(
        files=[str(p) for p in res.paths],
        runs=runs,
        deviations=deviations,
        scores=compared_scores,
        overall=compared_overall,
        compared=on if on.uneven else None,
        scores_all=full[0],
        overall_all=full[1],
        class_counts=configs.with_labels(failures.class_counts(res), table),
        paper=configs.with_labels(failures.paper_table(res), table),
        reasons=configs.with_labels(failures.top_reasons(res), table),
        turns_used=res.turns_used.sort("model", "env", "config_id", "n_turns"),
        pass_k=configs.with_labels(repeats.pass_k_table(res, denominator), table),
        spread=configs.with_labels(repeats.spread_table(res, denominator), table),
        usage=configs.with_labels(operations.usage_table(res, prices), configs.overall_labels(table), keys=("model",)),
        statuses=operations.status_table(res),
        throughput=operations.throughput_table(res),
        reasoning=operations.reasoning_table(res),
        cost=operations.cost_table(res),
        configs=table,
        pooled=res.pooled,
        solved=configs.with_labels(failures.solved_notes(res), table),
        run_states=operations.run_states(res),
        resume=res.resume_work.sort("config_id", "status"),
        attempts=configs.with_labels(res.attempt_summary.sort(KEYS), table),
        unsolvable=res.unsolvable_tasks.sort("env", "task_id", "model", "config_id"),
        rates=res.call_rates.sort("model", nulls_last=True),
        tool_hints=[*operations.tool_call_hints(res), *operations.waiting_hints(res)],
        limit_lines=operations.limit_lines(res),
        behaviour=configs.with_labels(behaviour.behaviour_table(res), table),
        denominator=denominator,
    )
