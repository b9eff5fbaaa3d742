"""What a run spends while it runs, and the caps that stop it: tokens and USD per model at the prices of the run
config (``price_in``, ``price_out``, ``price_cached_in``, ``price_cache_write``, ``batch_discount``, priced as the
``call_costs`` view prices the stored calls), the run's caps (``--max-cost``, ``--max-total-tokens``), each model's
(``max_cost``, ``max_total_tokens`` in its config) and the per-episode limits (``episode_limits``: tokens, cost,
wall time; off by default, a recorded deviation when on).

A cap counts what the file already holds for the same configuration (earlier invocations of the run) plus every
call answered since: a resume with the same cap stops at once, one with a higher cap goes on. A call is counted
when its answer is read (``ModelClient.on_usage``); calls still in flight when a cap is reached are abandoned (their
episodes end ``cancelled`` and are played again on resume), so the spend passes a cap by at most the calls answered
in the moment the cap was crossed: one wave of the calls in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .records import CallRow

EPISODE_LIMIT_KINDS = ("tokens", "cost", "seconds")  # episode_limits' keys


@dataclass(frozen=True)
class Prices:
    """A model's prices, USD per 1M tokens (an unset cache price is ``price_in``, as the ``call_costs`` view prices)."""

    price_in: float | None = None
    price_out: float | None = None
    price_cached_in: float | None = None
    price_cache_write: float | None = None
    batch_discount: float = 0.5

    @classmethod
    def of(cls, model: Any) -> Prices:
        """The prices of a ``ModelConfig`` (or anything with its price fields)."""
        return cls(getattr(model, "price_in", None), getattr(model, "price_out", None), getattr(model, "price_cached_in", None),
                   getattr(model, "price_cache_write", None), float(getattr(model, "batch_discount", 0.5)))  # fmt: skip

    @property
    def priced(self) -> bool:
        return self.price_in is not None or self.price_out is not None

    def cost(self, input_tokens: float, output_tokens: float, *, cache_read: float = 0, cache_write: float = 0,
             batched: bool = False) -> float | None:  # fmt: skip
        """USD for these tokens (``input_tokens``: the whole prompt, cached parts included); None when unpriced."""
        if not self.priced:
            return None
        p_in, p_out = self.price_in or 0.0, self.price_out or 0.0
        uncached = max(0.0, input_tokens - cache_read - cache_write)
        usd = (uncached * p_in + cache_read * _or(self.price_cached_in, p_in) + cache_write * _or(self.price_cache_write, p_in)
               + output_tokens * p_out) / 1e6  # fmt: skip
        return usd * (1 - self.batch_discount) if batched else usd

    def call_cost(self, row: CallRow) -> float | None:
        """USD of one answered call as stored (``model_calls`` row)."""
        return self.cost(row.input_tokens or 0, row.output_tokens or 0, cache_read=row.cache_read_tokens or 0,
                         cache_write=row.cache_write_tokens or 0, batched=row.batch_id is not None)  # fmt: skip


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


@dataclass(frozen=True)
class Caps:
    """A spend cap: USD and/or tokens (input + output); None: no cap."""

    cost: float | None = None
    tokens: int | None = None

    def __bool__(self) -> bool:
        return self.cost is not None or self.tokens is not None


@dataclass(frozen=True)
class EpisodeLimits:
    """Per-episode limits (inspect_ai's sample limits): the model's tokens (input + output of the agent's calls), their
    cost in USD, and the episode's wall-clock seconds. None: no limit. AgentBench has only turn caps."""

    tokens: int | None = None
    cost: float | None = None
    seconds: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.tokens, self.cost, self.seconds))

    def public_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in EPISODE_LIMIT_KINDS if getattr(self, k) is not None}

    def reached(self, calls: Iterable[CallRow], prices: Prices | None) -> tuple[str, str] | None:
        """Which limit the agent's calls so far have reached (its kind, a sentence), or None: checked before each new call."""
        agent = [c for c in calls if c.caller == "agent"]
        if self.tokens is not None:
            used = sum((c.input_tokens or 0) + (c.output_tokens or 0) for c in agent)
            if used >= self.tokens:
                return "tokens", f"episode token limit reached: {used:,} tokens used of {self.tokens:,} (episode_limits.tokens)"
        if self.cost is not None and prices is not None:
            usd = sum(prices.call_cost(c) or 0.0 for c in agent)
            if usd >= self.cost:
                return "cost", f"episode cost limit reached: {usd:.4f} USD spent of {self.cost:g} (episode_limits.cost)"
        return None


def episode_limits(raw: Any, where: str) -> EpisodeLimits | None:
    """``episode_limits: {tokens: N, cost: USD, seconds: S}`` read, one line for a bad value; None when none is set."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: episode_limits: expected a mapping with tokens, cost and/or seconds, got {raw!r}")
    unknown = sorted(set(raw) - set(EPISODE_LIMIT_KINDS))
    if unknown:
        raise ConfigError(f"{where}: episode_limits.{unknown[0]}: unknown limit (known: {', '.join(EPISODE_LIMIT_KINDS)})")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        whole = key == "tokens"
        if not _positive(value, whole=whole):
            kind = "a positive integer (tokens)" if whole else "a number > 0" + (" (USD)" if key == "cost" else " (seconds)")
            raise ConfigError(f"{where}: episode_limits.{key}: expected {kind}, got {value!r}")
        values[key] = value
    limits = EpisodeLimits(**values)
    return limits or None


def cap_value(value: Any, where: str, *, whole: bool) -> Any:
    """A cap (``max_cost`` USD, ``max_total_tokens``) checked: a number > 0 or None."""
    if value is not None and not _positive(value, whole=whole):
        raise ConfigError(f"{where}: expected {'a positive integer (tokens)' if whole else 'USD > 0'} or nothing, got {value!r}")
    return value


def _positive(value: Any, *, whole: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return False
    return isinstance(value, int) or not whole


@dataclass
class _Tally:
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class CapReached:
    """Which cap a run reached: ``model`` None for the run's own cap."""

    line: str
    model: str | None = None


class SpendMeter:
    """Tokens and USD per model, so far (earlier invocations' calls in the file included), against the caps."""

    def __init__(self, prices: Mapping[str, Prices], run_caps: Caps, model_caps: Mapping[str, Caps],
                 on_cap: Callable[[CapReached], None] | None = None) -> None:  # fmt: skip
        self.prices = dict(prices)
        self.run_caps = run_caps
        self.model_caps = {m: c for m, c in model_caps.items() if c}
        self.on_cap = on_cap
        self.tallies: dict[str, _Tally] = {}
        self.earlier: dict[str, _Tally] = {}  # what the file held when the run started
        self.reached: list[CapReached] = []
        self._stopped: set[str | None] = set()  # the caps that have fired (None: the run's)

    @property
    def active(self) -> bool:
        return bool(self.run_caps) or bool(self.model_caps)

    def add_earlier(self, model: str, input_tokens: int, output_tokens: int, cost: float | None, calls: int) -> None:
        """What the file already holds for this configuration (a resume): counted against the caps."""
        for tallies in (self.tallies, self.earlier):
            t = tallies.setdefault(model, _Tally())
            t.input_tokens += input_tokens
            t.output_tokens += output_tokens
            t.cost += cost or 0.0
            t.calls += calls

    def record(self, row: CallRow) -> None:
        """An answered call (``ModelClient.on_usage``): counted, and the caps checked."""
        model = row.model or ""
        t = self.tallies.get(model)
        if t is None:
            t = self.tallies[model] = _Tally()
        t.input_tokens += row.input_tokens or 0
        t.output_tokens += row.output_tokens or 0
        t.calls += 1
        prices = self.prices.get(model)
        if prices is not None and prices.priced:
            t.cost += prices.call_cost(row) or 0.0
        if self.active:
            self._check(model)

    def cost(self, model: str | None = None) -> float:
        return sum(t.cost for m, t in self.tallies.items() if model is None or m == model)

    def tokens(self, model: str | None = None) -> int:
        return sum(t.tokens for m, t in self.tallies.items() if model is None or m == model)

    @property
    def priced(self) -> bool:
        """Whether every model of the run has prices (else the USD figures leave some calls out)."""
        return bool(self.prices) and all(p.priced for p in self.prices.values())

    def over(self) -> CapReached | None:
        """A cap the spend so far has reached already (checked before the run starts: a resume with the same cap)."""
        for model in [None, *self.model_caps]:
            line = self._over(model)
            if line is not None:
                return CapReached(line, model)
        return None

    def _check(self, model: str) -> None:
        for which in (None, model):
            if which in self._stopped or (which is not None and which not in self.model_caps):
                continue
            line = self._over(which)
            if line is not None:
                self._stopped.add(which)
                reached = CapReached(line, which)
                self.reached.append(reached)
                if self.on_cap is not None:
                    self.on_cap(reached)

    def _over(self, model: str | None) -> str | None:
        caps = self.run_caps if model is None else self.model_caps.get(model, Caps())
        who, flag = ("the run", "--max-cost") if model is None else (f"model {model}", f"models[{model}].max_cost")
        cost, tokens = self.cost(model), self.tokens(model)
        earlier = self._earlier_words(model)
        if caps.cost is not None and cost >= caps.cost:
            return f"{who} reached its spend cap ({flag} {caps.cost:g} USD): {cost:.4f} USD spent, {tokens:,} tokens{earlier}"
        if caps.tokens is not None and tokens >= caps.tokens:
            flag = "--max-total-tokens" if model is None else f"models[{model}].max_total_tokens"
            return f"{who} reached its token cap ({flag} {caps.tokens:,}): {tokens:,} tokens used, {cost:.4f} USD{earlier}"
        return None

    def _earlier_words(self, model: str | None) -> str:
        before = [t for m, t in self.earlier.items() if model is None or m == model]
        if not before or not any(t.calls for t in before):
            return ""
        return f" (of which {sum(t.cost for t in before):.4f} USD, {sum(t.tokens for t in before):,} tokens in earlier invocations)"

    def snapshot(self) -> dict[str, Any]:
        """The spend as plain data (the progress line and the live view)."""
        return {"cost_usd": self.cost() if self.priced or any(p.priced for p in self.prices.values()) else None,
                "tokens": self.tokens(), "priced": self.priced,
                "cap_usd": self.run_caps.cost, "cap_tokens": self.run_caps.tokens}  # fmt: skip


def stored_spend(con: Any, fingerprint: str) -> list[tuple[str, bool, int, int, int, int, int]]:
    """Per model and whether in a provider batch, the answered calls a file holds for a configuration: (model, batched,
    calls, input, output, cache read, cache write tokens): what earlier invocations of the run spent, the calls of earlier
    attempts of episodes run again included (attempt_calls: they were billed too)."""
    rows = con.execute(
        """SELECT c.model, c.batch_id IS NOT NULL, count(*), sum(coalesce(c.input_tokens, 0)), sum(coalesce(c.output_tokens, 0)),
                  sum(coalesce(c.cache_read_tokens, 0)), sum(coalesce(c.cache_write_tokens, 0))
           FROM (SELECT run_id, model, batch_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens FROM model_calls
                 UNION ALL
                 SELECT run_id, model, batch_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens FROM attempt_calls) AS c
           WHERE c.run_id IN (SELECT run_id FROM runs WHERE fingerprint = ?) AND c.input_tokens IS NOT NULL AND c.model IS NOT NULL
           GROUP BY ALL""",
        [fingerprint],
    ).fetchall()
    return [(str(m), bool(b), int(n), int(i or 0), int(o or 0), int(r or 0), int(w or 0)) for m, b, n, i, o, r, w in rows]


def add_stored(meter: SpendMeter, con: Any, fingerprint: str) -> None:
    """Count what the file holds for this configuration (earlier invocations) against the caps."""
    for model, batched, calls, tin, tout, read, write in stored_spend(con, fingerprint):
        prices = meter.prices.get(model)
        cost = prices.cost(tin, tout, cache_read=read, cache_write=write, batched=batched) if prices is not None else None
        meter.add_earlier(model, tin, tout, cost, calls)


__all__ = ["Caps", "CapReached", "EpisodeLimits", "Prices", "SpendMeter", "add_stored", "episode_limits", "stored_spend"]
