"""``agentbench plan``: what a run will cost and take before it runs, with no model call.

For every model x environment of the run config: the episodes (the scheduler's own work items: split, limit, task
ids, repeats), the first request of every task as the run sends it (the environment's own session opens the episode
and ``begin()`` returns its messages, shaped by the run's history policy and written into the provider's request body
by the model's own client), its input tokens, the expected and the worst-case calls and tokens of an episode, the cost
at the configured prices and the time at the configured rpm/tpm/concurrency.

Tokens are counted with tiktoken where it is installed and its encoding is at hand, else with a characters-a-token
ratio calibrated from earlier result files of the same model (``--from``: their first requests' characters against
the input tokens their servers reported), else with a stated characters-a-token estimate (default 4). The plan says
which. Expected calls, history growth and output per episode come from those earlier files where given (the same
model and environment, else any model's episodes of the environment); without them they are an assumption the plan
states (half the turn cap). The worst case is the turn cap, every reply at ``max_tokens`` and every observation as
large as the largest seen (without earlier files: as large as the first request), never cut by the history policy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .config import RunConfig
from .envs import make_env
from .envs.base import Environment, EpisodeContext, Task
from .episode import episode_id
from .errors import AgentBenchError, ConfigError, StoreError
from .history import history_policy
from .limits import ModelLimits
from .models import ModelConfig, make_client
from .spend import Prices
from .types import Message
from .wording import counted

DEFAULT_CHARS_PER_TOKEN = 4.0  # without a tokenizer or earlier files: English prose and code run 3.5-4.5 characters a token
_ASSUMED_SHARE_OF_CAP = 0.5  # without earlier files: an episode is assumed to use half its turn cap


@dataclass
class TokenCounter:
    """How tokens are counted: ``how`` says it in words (tiktoken, calibrated, estimate)."""

    how: str
    count: Callable[[str], int]


def token_counter(model: ModelConfig, calibration: dict[str, float], chars_per_token: float | None,
                  source: str = "--from") -> TokenCounter:  # fmt: skip
    """tiktoken (when installed, for OpenAI-style models), else the calibrated ratio of ``model``, else the estimate."""
    if chars_per_token is None and model.provider != "anthropic":
        encoding = _tiktoken(model.model_id)
        if encoding is not None:
            return TokenCounter(f"tiktoken {encoding.name}", lambda text: len(encoding.encode(text, disallowed_special=())))
    if chars_per_token is None and model.name in calibration:
        ratio = calibration[model.name]
        return TokenCounter(f"calibrated from {source}: {ratio:.2f} characters a token", lambda text: math.ceil(len(text) / ratio))
    ratio = chars_per_token or DEFAULT_CHARS_PER_TOKEN
    given = "--chars-per-token" if chars_per_token else "no tokenizer installed, no --from file of this model"
    return TokenCounter(f"estimate: {ratio:g} characters a token ({given})", lambda text: math.ceil(len(text) / ratio))


def _tiktoken(model_id: str) -> Any:
    try:
        import tiktoken  # optional: not a dependency
    except ImportError:
        return None
    try:
        return tiktoken.encoding_for_model(model_id)
    except KeyError:
        try:
            return tiktoken.get_encoding("o200k_base")
        except Exception:  # noqa: BLE001 - its files cannot be fetched (offline): the next way counts
            return None
    except Exception:  # noqa: BLE001
        return None


# -- earlier runs (--from) ---------------------------------------------------------------------------------------
@dataclass
class Shape:
    """An environment's episodes as earlier runs played them: per episode, the mean agent calls, the history growth
    (input tokens beyond calls x first request), output tokens a call, judge calls and tokens; the largest growth a
    turn and the largest call count (the worst case)."""

    episodes: int
    calls: float
    growth: float
    output_per_call: float
    judge_calls: float
    judge_input_per_call: float
    judge_output_per_call: float
    max_turn_growth: float
    cache_share: float
    latency_s: float | None
    source: str  # which model's episodes: "same model" or "other models"


def read_earlier(paths: Iterable[Path], label: str = "") -> tuple[dict[str, float], dict[tuple[str, str], Shape], dict[str, Shape]]:
    """From earlier result files: characters a token per model; the shape of (model, env)'s episodes; env's shape
    over every model (used when the model itself is not in the files)."""
    from .store.db import connect

    chars: dict[str, list[float]] = {}
    per_model: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path in paths:
        if not Path(path).exists():
            raise ConfigError(f"plan --from {path}: no such file (give earlier result files, PATH.duckdb)")
        con = connect(Path(path), read_only=True)
        try:
            cur = con.execute(_EPISODE_SHAPES)
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
        finally:
            con.close()
        for r in rows:
            per_model.setdefault((r["model"], r["env"]), []).append(r)
            if r["first_chars"] and r["first_input"]:
                chars.setdefault(r["model"], []).append((r["first_chars"], r["first_input"]))  # type: ignore[arg-type]
    calibration = {m: sum(c for c, _ in v) / max(1, sum(t for _, t in v)) for m, v in chars.items()}  # type: ignore[misc]
    shapes = {key: _shape(rows, "same model" + label) for key, rows in per_model.items()}
    by_env: dict[str, list[dict[str, Any]]] = {}
    for (_, env), rows in per_model.items():
        by_env.setdefault(env, []).extend(rows)
    return calibration, shapes, {env: _shape(rows, "other models" + label) for env, rows in by_env.items()}


def _shape(rows: list[dict[str, Any]], source: str) -> Shape:
    n = max(1, len(rows))
    calls = sum(r["calls"] for r in rows) / n
    growth = sum(max(0, r["input_tokens"] - r["calls"] * (r["first_input"] or 0)) for r in rows) / n
    all_calls = max(1, sum(r["calls"] for r in rows))
    judge_calls = sum(r["judge_calls"] for r in rows)
    latencies = [r["latency_s"] for r in rows if r["latency_s"] is not None]
    return Shape(
        episodes=len(rows), calls=calls, growth=growth, output_per_call=sum(r["output_tokens"] for r in rows) / all_calls,
        judge_calls=judge_calls / n, judge_input_per_call=sum(r["judge_input"] for r in rows) / max(1, judge_calls),
        judge_output_per_call=sum(r["judge_output"] for r in rows) / max(1, judge_calls),
        max_turn_growth=max((r["max_turn_growth"] or 0) for r in rows), cache_share=sum(r["cache_read"] for r in rows) /
        max(1, sum(r["input_tokens"] for r in rows)), latency_s=sum(latencies) / len(latencies) if latencies else None, source=source,
    )  # fmt: skip


# one row per finished episode with answered agent calls: its calls, tokens, first request's characters and tokens
_EPISODE_SHAPES = """
WITH c AS (
    SELECT run_id, episode_id, coalesce(caller, 'agent') AS caller, turn, attempt, input_tokens, output_tokens,
           cache_read_tokens, latency_ms,
           input_tokens - lag(input_tokens) OVER (PARTITION BY run_id, episode_id, coalesce(caller, 'agent') ORDER BY turn, attempt)
               AS turn_growth
    FROM model_calls WHERE input_tokens IS NOT NULL
), per AS (
    SELECT run_id, episode_id,
        count(*) FILTER (WHERE caller = 'agent') AS calls,
        coalesce(sum(input_tokens) FILTER (WHERE caller = 'agent'), 0)::DOUBLE AS input_tokens,
        coalesce(sum(output_tokens) FILTER (WHERE caller = 'agent'), 0)::DOUBLE AS output_tokens,
        coalesce(sum(cache_read_tokens) FILTER (WHERE caller = 'agent'), 0)::DOUBLE AS cache_read,
        arg_min(input_tokens, turn * 1000 + attempt) FILTER (WHERE caller = 'agent')::DOUBLE AS first_input,
        max(turn_growth) FILTER (WHERE caller = 'agent')::DOUBLE AS max_turn_growth,
        count(*) FILTER (WHERE caller = 'judge') AS judge_calls,
        coalesce(sum(input_tokens) FILTER (WHERE caller = 'judge'), 0)::DOUBLE AS judge_input,
        coalesce(sum(output_tokens) FILTER (WHERE caller = 'judge'), 0)::DOUBLE AS judge_output,
        avg(latency_ms) FILTER (WHERE caller = 'agent') / 1000 AS latency_s
    FROM c GROUP BY ALL
), first AS (
    SELECT run_id, episode_id, sum(length(coalesce(content, '')))::BIGINT AS first_chars FROM turns WHERE turn = 0 GROUP BY ALL
)
SELECT e.model, e.env, p.*, f.first_chars
FROM episodes AS e
JOIN per AS p USING (run_id, episode_id)
LEFT JOIN first AS f USING (run_id, episode_id)
WHERE e.status NOT IN ('env_error', 'model_error', 'cancelled') AND p.calls > 0
"""


# -- the plan ----------------------------------------------------------------------------------------------------
@dataclass
class Row:
    """One model x environment of the plan."""

    model: str
    env: str
    episodes: int
    first_tokens_mean: float
    first_tokens_max: int
    first_request_bytes_max: int
    turn_cap: int
    expected_calls: float
    expected_input: float
    expected_output: float
    worst_calls: int
    worst_input: float
    worst_output: float
    judge_expected_tokens: float
    judge_worst_tokens: float
    already_done: int  # episodes the run's file holds already (a resume plays the others; they are not planned)
    expected_usd: float | None
    worst_usd: float | None
    basis: str  # where the expected figures come from

    @property
    def expected_tokens(self) -> float:
        return self.expected_input + self.expected_output

    @property
    def worst_tokens(self) -> float:
        return self.worst_input + self.worst_output


@dataclass
class Plan:
    rows: list[Row]
    counting: dict[str, str]  # model -> how its tokens were counted
    minutes: dict[str, tuple[float, str]]  # model -> (expected minutes, what bounds it)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0  # how long the plan took

    def totals(self) -> dict[str, float | None]:
        usd = [r.expected_usd for r in self.rows]
        worst = [r.worst_usd for r in self.rows]
        return {
            "episodes": sum(r.episodes for r in self.rows),
            "expected_calls": sum(r.expected_calls * r.episodes for r in self.rows),
            "expected_tokens": sum(r.expected_tokens + r.judge_expected_tokens for r in self.rows),
            "worst_tokens": sum(r.worst_tokens + r.judge_worst_tokens for r in self.rows),
            "expected_usd": None if any(u is None for u in usd) else sum(u for u in usd if u is not None),
            "worst_usd": None if any(u is None for u in worst) else sum(u for u in worst if u is not None),
        }

    fingerprint: str = ""  # the run configuration's (report compares the plan with the run of the same one)

    def as_dict(self) -> dict[str, Any]:
        rows = [{**dataclasses.asdict(r), "expected_tokens": r.expected_tokens, "worst_tokens": r.worst_tokens} for r in self.rows]
        return {"fingerprint": self.fingerprint, "rows": rows, "totals": self.totals(), "token_counting": self.counting,
                "minutes": {m: {"expected": t, "bound_by": why} for m, (t, why) in self.minutes.items()},
                "notes": self.notes, "seconds": self.seconds}  # fmt: skip


async def make_plan(cfg: RunConfig, *, calibrate_from: list[Path], chars_per_token: float | None = None) -> Plan:
    """The plan of ``cfg``'s run (see the module's doc)."""
    if chars_per_token is not None and chars_per_token <= 0:
        raise ConfigError(f"--chars-per-token: expected characters a token > 0, got {chars_per_token:g}")
    loop = asyncio.get_running_loop()
    began = loop.time()
    rows: list[Row] = []
    notes: list[str] = []
    # without --from, the run's own file (a resume: its earlier invocations) is the earlier run
    own = not calibrate_from and cfg.out.is_file()
    try:
        calibration, shapes, env_shapes = read_earlier(calibrate_from or [cfg.out], ", this run's file" if own else "") \
            if calibrate_from or own else ({}, {}, {})
    except StoreError as exc:  # a run is writing it
        if not own:
            raise
        notes.append(f"{exc}: not read for calibration")
        calibration, shapes, env_shapes = {}, {}, {}
    source = "this run's file" if own else "--from"
    counters = {m.name: token_counter(m, calibration, chars_per_token, source) for m in cfg.models}
    done = _done(cfg, notes)
    envs = {name: make_env(name, data_dir=cfg.env_data_dir(name), options=cfg.env_options.get(name)) for name in cfg.envs}
    rendered = await asyncio.gather(*(_first_requests(cfg, env) for env in envs.values()), return_exceptions=True)
    for (name, env), firsts in zip(envs.items(), rendered):
        if isinstance(firsts, AgentBenchError):  # an environment that cannot start here: the others are planned
            notes.append(f"{name}: not planned ({firsts})")
            continue
        if isinstance(firsts, BaseException):
            raise firsts
        for model in cfg.models:
            shape = shapes.get((model.name, name)) or env_shapes.get(name)
            rows.append(_row(cfg, model, env, firsts, counters[model.name], shape, done))
    minutes = {m.name: _minutes(cfg, m, [r for r in rows if r.model == m.name], shapes) for m in cfg.models}
    plan = Plan(rows, {m: c.how for m, c in counters.items()}, minutes, notes, fingerprint=cfg.fingerprint())
    plan.seconds = loop.time() - began
    return plan


@dataclass
class _First:
    """A task's first request: its messages as sent (history policy applied) and tools."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None
    task: Task
    repeats: list[int]  # the task's repeats the run plays


async def _first_requests(cfg: RunConfig, env: Environment) -> list[_First]:
    """Every task's first request, opened by the environment's own sessions as a run opens them (its run-wide start
    included: a database server, a sandbox's root, game workers)."""
    from .scheduler import Evaluation  # the scheduler's own work items (split, limit, task ids, repeats)

    specs = list(Evaluation(cfg, progress=False)._specs(env, cfg.models[0].name))
    firsts: dict[str, _First] = {}
    shape = history_policy(cfg.history)
    ctxs = [EpisodeContext(episode_id=f"plan/{s.episode_id}", action_mode=s.action_mode, seed=s.seed,  # type: ignore[arg-type]
                           judge=_no_judge, options=s.options) for s in specs]  # fmt: skip
    openings = [env.opening(spec.task, ctx) for spec, ctx in zip(specs, ctxs)] if specs else []
    if specs and all(o is not None for o in openings):  # told without the episodes' resources (os, db): no start
        for spec, (messages, tools) in zip(specs, openings):  # type: ignore[misc]
            if spec.task.task_id in firsts:
                firsts[spec.task.task_id].repeats.append(spec.repeat)
            else:
                keep = len(messages) if spec.action_mode == "tools" else 1
                firsts[spec.task.task_id] = _First(shape(list(messages), keep=keep), tools, spec.task, [spec.repeat])
        return list(firsts.values())
    await env.start()
    try:
        sem = asyncio.Semaphore(max(1, min(env.capacity, cfg.max_concurrency, 64)))

        async def first(spec: Any, ctx: EpisodeContext) -> None:
            if spec.task.task_id in firsts:
                firsts[spec.task.task_id].repeats.append(spec.repeat)
                return
            firsts[spec.task.task_id] = placeholder = _First([], None, spec.task, [spec.repeat])
            async with sem:
                session = await env.open_session(spec.task, ctx)
                try:
                    messages = list(await session.begin())
                    keep = len(messages) if spec.action_mode == "tools" else 1
                    placeholder.messages, placeholder.tools = shape(messages, keep=keep), session.tools()
                finally:
                    await session.close()

        await asyncio.gather(*(first(s, c) for s, c in zip(specs, ctxs)))
    finally:
        await env.close()
    return list(firsts.values())


def _done(cfg: RunConfig, notes: list[str]) -> set[str]:
    """The episodes the run's file already holds for this configuration (agent outcomes: a resume skips them)."""
    from .statuses import AGENT_OUTCOMES
    from .store.db import connect

    if not cfg.out.is_file():
        return set()
    try:
        con = connect(cfg.out, read_only=True)
    except AgentBenchError as exc:  # a run is writing it: planned as if nothing were done
        notes.append(f"{exc}: planned every episode")
        return set()
    try:
        statuses = sorted(AGENT_OUTCOMES)
        rows = con.execute(f"SELECT episode_id FROM episodes WHERE fingerprint = ? AND status IN ({', '.join('?' * len(statuses))})",
                           [cfg.fingerprint(), *statuses]).fetchall()  # fmt: skip
    finally:
        con.close()
    return {r[0] for r in rows}


async def _no_judge(messages: list[Message]) -> Any:
    """The judge a session is given while plan opens it: no session asks it before its first reply (ltp's host)."""
    raise AgentBenchError("plan calls no model")


def _request_body(model: ModelConfig, first: _First) -> bytes:
    """The request body the model's own client writes for this first request (no key needed, nothing sent)."""
    from .models.wire import dumps_body

    config = dataclasses.replace(model, api_key_env=None)
    client = make_client(config, None, ModelLimits())  # type: ignore[arg-type]  # no session: nothing is sent
    _, _, body = client._request(first.messages, first.tools)
    return dumps_body(body)


def _text(first: _First) -> str:
    """What is counted as the prompt: every message's content (and tool calls), the tool definitions."""
    parts = [m.get("content") or "" for m in first.messages]
    parts += [json.dumps(m["tool_calls"]) for m in first.messages if m.get("tool_calls")]
    if first.tools:
        parts.append(json.dumps(first.tools))
    return "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def _row(cfg: RunConfig, model: ModelConfig, env: Environment, firsts: list[_First], counter: TokenCounter, shape: Shape | None,
         done: set[str]) -> Row:  # fmt: skip
    cap = type(env).turn_cap(cfg.action_mode)
    cap = min(cap, env.max_turns)
    # the episodes to play: a resume skips those the run's file holds already (done)
    tokens = [(counter.count(_text(f)), sum(episode_id(model.name, f.task, r) not in done for r in f.repeats)) for f in firsts]
    skipped = sum(len(f.repeats) for f in firsts) - sum(n for _, n in tokens)
    episodes = sum(n for _, n in tokens)
    mean_first = sum(t * n for t, n in tokens) / max(1, episodes)
    first_max = max((t for t, _ in tokens), default=0)
    bytes_max = max((len(_request_body(model, f)) for f in firsts[:50]), default=0)
    if shape is not None:
        calls, growth, out_call = shape.calls, shape.growth, shape.output_per_call
        basis = f"{shape.episodes} earlier episodes ({shape.source})"
        obs = max(shape.max_turn_growth, 1.0)
        judge_in, judge_out = shape.judge_calls * shape.judge_input_per_call, shape.judge_calls * shape.judge_output_per_call
        # the worst case: the judge calls of a turn at the turn cap, each twice the largest seen on average
        judge_cap = shape.judge_calls / max(shape.calls, 1.0) * cap * (shape.judge_input_per_call + shape.judge_output_per_call) * 2
    else:
        calls = max(1.0, cap * _ASSUMED_SHARE_OF_CAP)
        out_call = model.max_tokens / 2
        growth = (out_call + mean_first / 4) * calls * (calls - 1) / 2  # each turn adds a reply and an observation
        basis = f"assumed: {_ASSUMED_SHARE_OF_CAP:.0%} of the turn cap, replies of max_tokens/2 (no --from file)"
        obs = None
        judge_in = judge_out = judge_cap = 0.0
    judge_exp = judge_in + judge_out
    exp_in = calls * mean_first + growth
    exp_out = calls * out_call
    worst_in = 0.0
    for t, n in tokens:  # every call: the first request, plus each earlier turn's reply (max_tokens) and observation
        per_turn = model.max_tokens + (obs if obs is not None else t)
        prompts = [t + k * per_turn for k in range(cap)]
        if model.context_window:
            prompts = [min(p, model.context_window) for p in prompts]
        worst_in += sum(prompts) * n
    worst_out = cap * model.max_tokens * episodes
    prices = Prices.of(model)
    batched = bool(model.batch)
    cache = shape.cache_share if shape is not None else 0.0

    def usd(tin: float, tout: float) -> float | None:
        return prices.cost(tin, tout, cache_read=tin * cache, batched=batched)

    exp_usd = usd(exp_in * episodes, exp_out * episodes)
    worst_usd = prices.cost(worst_in, worst_out, batched=batched)  # no cache discount in the worst case
    if cfg.judge is not None and judge_exp:  # the judge's calls at its own prices
        judge_usd = Prices.of(cfg.judge).cost(judge_in * episodes, judge_out * episodes)
        judge_prices = Prices.of(cfg.judge)
        worst_judge = max(judge_prices.cost(judge_cap * episodes, 0) or 0, judge_prices.cost(0, judge_cap * episodes) or 0)
        exp_usd = None if exp_usd is None or judge_usd is None else exp_usd + judge_usd
        worst_usd = None if worst_usd is None or worst_judge is None else worst_usd + worst_judge
    return Row(
        model=model.name, env=env.name, episodes=episodes, first_tokens_mean=mean_first, first_tokens_max=first_max,
        first_request_bytes_max=bytes_max, turn_cap=cap, expected_calls=calls, expected_input=exp_in * episodes,
        expected_output=exp_out * episodes, worst_calls=cap * episodes, worst_input=worst_in, worst_output=worst_out,
        judge_expected_tokens=judge_exp * episodes, judge_worst_tokens=judge_cap * episodes, already_done=skipped, expected_usd=exp_usd,
        worst_usd=worst_usd, basis=basis,
    )  # fmt: skip


def _minutes(cfg: RunConfig, model: ModelConfig, rows: list[Row], shapes: dict[tuple[str, str], Shape]) -> tuple[float, str]:
    """Expected minutes of ``model``'s part of the run at its limits: its calls at rpm, tokens at tpm, and (where earlier
    files give a call's latency) its calls at the concurrency; the largest bounds the run."""
    calls = sum(r.expected_calls * r.episodes for r in rows)
    tokens = sum(r.expected_tokens for r in rows)
    bounds: list[tuple[float, str]] = []
    if isinstance(model.rpm, int):
        bounds.append((calls / model.rpm, f"rpm {model.rpm:,}"))
    if isinstance(model.tpm, int):
        bounds.append((tokens / model.tpm, f"tpm {model.tpm:,}"))
    latencies = [s.latency_s for (m, _), s in shapes.items() if m == model.name and s.latency_s is not None]
    if latencies:
        in_flight = model.max_in_flight if isinstance(model.max_in_flight, int) else 64
        width = max(1, min(in_flight, cfg.max_concurrency))
        bounds.append((calls * (sum(latencies) / len(latencies)) / width / 60, f"{width} calls at once x earlier latency"))
    if not bounds:
        return math.nan, "no rpm/tpm set and no --from latency: not bounded by the model's limits"
    return max(bounds)


def print_plan(plan: Plan, console: Console) -> None:
    """The plan as a table, its totals and how it was counted (one line each)."""
    from .analytics.terminal import print_table

    table = Table(title="Plan: per model x environment, no model call made (expected / worst case)", title_justify="left")
    for col in ("model", "env", "episodes", "first request tokens (mean/max)", "calls/episode", "tokens", "worst tokens", "USD",
                "worst USD"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("model", "env") else "right")
    for r in plan.rows:
        table.add_row(r.model, r.env, f"{r.episodes:,}", f"{r.first_tokens_mean:,.0f} / {r.first_tokens_max:,}",
                      f"{r.expected_calls:.1f} / {r.turn_cap}", f"{r.expected_tokens + r.judge_expected_tokens:,.0f}",
                      f"{r.worst_tokens + r.judge_worst_tokens:,.0f}", _usd(r.expected_usd), _usd(r.worst_usd))  # fmt: skip
    print_table(console, table, keys=2)
    t = plan.totals()
    console.print(f"total: {counted(int(t['episodes'] or 0), 'episode')}, ~{t['expected_calls']:,.0f} calls, ~{t['expected_tokens']:,.0f} "
                  f"tokens (worst {t['worst_tokens']:,.0f}), {_usd(t['expected_usd'])} USD (worst {_usd(t['worst_usd'])})",
                  markup=False, highlight=False, soft_wrap=True)  # fmt: skip
    for model, how in plan.counting.items():
        minutes, bound = plan.minutes[model]
        when = "-" if math.isnan(minutes) else f"~{minutes:,.1f} min"
        console.print(f"{model}: token counting: {how}; time {when} ({bound})", markup=False, highlight=False, soft_wrap=True)
    for basis in sorted({f"{r.env}: expected from {r.basis}" for r in plan.rows}):
        console.print(basis, markup=False, highlight=False, soft_wrap=True)
    done = sum(r.already_done for r in plan.rows)
    if done:
        console.print(f"{counted(done, 'episode')} already done in the run's file (a resume skips them): not planned", markup=False,
                      highlight=False)  # fmt: skip
    for note in plan.notes:
        console.print(f"warning: {note}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"planned in {plan.seconds:.1f} s", markup=False, highlight=False)


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"
