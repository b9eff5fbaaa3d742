"""Live progress: episodes done/total per model x environment, in flight with each one's turns so far, calls/s
(calls that ended, per second), retries, errors, tokens and ETA (a rich Live display on a terminal; when output is
not a terminal, one line every ``every`` seconds: done/total, calls/s, retries, 429s, ETA). After Ctrl-C there is no
ETA, and cancelled episodes are counted as cancelled, never done."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table


@dataclass
class _Row:
    total: int = 0
    done: int = 0  # ended episodes, cancelled ones left out
    in_flight: int = 0
    cancelled: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    turns: dict[str, int] = field(default_factory=dict)  # episode in flight -> its turns so far


TURNS_SHOWN = 8  # episodes in flight whose turn counts a row of the display lists
PROGRESS_EVERY_S = 30.0  # output that is not a terminal: a progress line this often (--progress-every)


def _ended(client: Any) -> int:
    """Calls of ``client`` that ended (its limits count them; a batch client's calls end when their batch does)."""
    limits = getattr(client, "limits", None)
    if "batches_submitted" in client.stats or not isinstance(getattr(limits, "ended", None), int):
        return int(client.stats.get("calls", 0))
    return int(limits.ended)


class Progress:
    def __init__(self, console: Console, *, enabled: bool | None = None, every: float | None = PROGRESS_EVERY_S) -> None:
        self.console = console
        self.enabled = console.is_terminal if enabled is None else enabled
        # not a terminal (`run ... > log`, CI, nohup) and not switched off: a line every ``every`` seconds instead
        self.every = every if enabled is None and not console.is_terminal and every else None
        self._lines: asyncio.Task[None] | None = None
        self.rows: dict[tuple[str, str], _Row] = {}
        self.clients: list[Any] = []  # ModelClient objects (their .stats are read)
        self._start = time.monotonic()
        self._live: Live | None = None
        self.stopped = False  # Ctrl-C: nothing more is admitted, there is no ETA
        self.why = "Ctrl-C"  # what stopped it (Ctrl-C, a spend cap)
        self.spend: Any = None  # the run's SpendMeter (spend.py): spend so far and the projection to the end

    def add_stream(self, model: str, env: str, total: int) -> None:
        self.rows.setdefault((model, env), _Row()).total += total

    def started(self, model: str, env: str) -> None:
        self.rows[(model, env)].in_flight += 1

    def turn(self, model: str, env: str, episode_id: str, turns: int) -> None:
        """Episode ``episode_id`` in flight has played ``turns`` turns."""
        row = self.rows.get((model, env))
        if row is not None:
            row.turns[episode_id] = max(turns, row.turns.get(episode_id, 0))

    def finished(self, model: str, env: str, status: str, episode_id: str | None = None) -> None:
        row = self.rows[(model, env)]
        row.in_flight -= 1
        if status == "cancelled":
            row.cancelled += 1
        else:
            row.done += 1
        row.statuses[status] += 1
        row.turns.pop(episode_id or "", None)

    def counting(self, model: str, env: str, episode_id: str, sink: Callable[[list[Any]], None]) -> Callable[[list[Any]], None]:
        """``sink`` (where a running episode hands each turn's rows) that also counts the episode's turns here. The rows come in
        the transcript's order, whose turn numbers never go down: the last one holds the latest turn."""

        def counted(rows: list[Any]) -> None:
            if rows:
                self.turn(model, env, episode_id, getattr(rows[-1], "turn", 0))
            sink(rows)

        return counted

    def stop(self, why: str = "Ctrl-C") -> None:
        """Ctrl-C (or a spend cap, ``why``): the run admits nothing more (no ETA from now on)."""
        self.stopped, self.why = True, why

    def __enter__(self) -> Progress:
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=2, transient=False, get_renderable=self._render)
            self._live.__enter__()
        elif self.every:
            with contextlib.suppress(RuntimeError):  # (no running loop: no lines)
                self._lines = asyncio.get_running_loop().create_task(self._print_lines(self.every), name="progress lines")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None
        if self._lines is not None:
            self._lines.cancel()
            self._lines = None

    async def _print_lines(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)  # one line, for tail and grep

    def line(self) -> str:
        """The progress as one line: ``progress: 120/400 episodes (30%), 12.3 calls/s, 4 retries, 2 429s, ETA 3:20``."""
        snap = self.snapshot()
        done = sum(s["done"] for s in snap["streams"])
        total = sum(s["total"] for s in snap["streams"])
        share = f" ({100 * done / total:.0f}%)" if total else ""
        when = f"stopped ({self.why})" if snap["stopped"] else f"ETA {_fmt_eta(snap['eta_s'] if snap['eta_s'] is not None else float('nan'))}"
        return (f"progress: {done:,}/{total:,} episodes{share}, {snap['calls_per_s']:.1f} calls/s, {snap['retries']:,} retries, "
                f"{snap['http_429']:,} 429s, {snap['errors']:,} errors{_spent(snap.get('spend'))}, {when} "
                f"({_fmt_eta(snap['elapsed_s'])} elapsed)")  # fmt: skip

    def snapshot(self) -> dict[str, Any]:
        """The figures of the display as plain data (the writer publishes them for live readers)."""
        elapsed = max(time.monotonic() - self._start, 1e-6)
        stat = {key: sum(c.stats.get(key, 0) for c in self.clients)
                for key in ("calls", "retries", "errors", "http_429", "input_tokens", "output_tokens",
                            "batches_submitted", "batches_in_progress", "batches_done")}  # fmt: skip
        done = sum(r.done for r in self.rows.values())
        total = sum(r.total for r in self.rows.values())
        rate = done / elapsed
        ended = sum(_ended(c) for c in self.clients)
        streams = [{"model": model, "env": env, "total": row.total, "done": row.done, "in_flight": row.in_flight, "statuses": dict(row.statuses),
                    "cancelled": row.cancelled, "turns": sorted(row.turns.values(), reverse=True)}
                   for (model, env), row in sorted(self.rows.items())]  # fmt: skip
        # calls/s counts calls that ended: the ones started but not answered yet are no throughput
        if self.spend is not None and (self.spend.active or any(p.priced for p in self.spend.prices.values())):
            stat["spend"] = _spend(self.spend, done, total)  # priced models, or a cap: the spend and its projection
        return {**stat, "elapsed_s": elapsed, "calls_ended": ended, "calls_per_s": ended / elapsed, "episodes_per_s": rate,
                "eta_s": (total - done) / rate if rate > 0 and not self.stopped else None, "stopped": self.stopped,
                "streams": streams}  # fmt: skip

    def _render(self) -> Table:
        snap = self.snapshot()
        eta = snap["eta_s"] if snap["eta_s"] is not None else float("nan")
        done = sum(s["done"] for s in snap["streams"])
        total = sum(s["total"] for s in snap["streams"])
        cancelled = sum(s["cancelled"] for s in snap["streams"])
        when = f"stopped ({self.why}): cancelling the episodes in flight" if snap["stopped"] else f"ETA {_fmt_eta(eta)}"
        title = (
            f"{done}/{total} episodes{f' ({cancelled} cancelled)' if cancelled else ''} · {snap['calls_per_s']:.1f} calls/s "
            f"· retries {snap['retries']} · errors {snap['errors']} · tokens {snap['input_tokens']:,} in / "
            f"{snap['output_tokens']:,} out{_spent(snap.get('spend'), ' ·')} · {when}"
        )
        if any("batches_submitted" in c.stats for c in self.clients):  # batch mode (models/batches.py)
            title += (f" · batches {snap['batches_submitted']} submitted / {snap['batches_in_progress']} in progress / "
                      f"{snap['batches_done']} done")  # fmt: skip
        table = Table(title=title, title_justify="left")
        for col in ("model", "env", "done/total", "in flight (turns so far)", "statuses"):
            table.add_column(col)
        for (model, env), row in sorted(self.rows.items()):
            statuses = ", ".join(f"{k} {v}" for k, v in row.statuses.most_common())
            table.add_row(model, env, f"{row.done}/{row.total}", _in_flight(row), statuses)
        return table


def _spend(meter: Any, done: int, total: int) -> dict[str, Any]:
    """Spend so far (earlier invocations of the run included) and, once episodes have ended, the projection to the end:
    this invocation's spend an episode times the episodes of this invocation (``None`` before)."""
    spend = meter.snapshot()
    earlier_cost = sum(t.cost for t in meter.earlier.values())
    earlier_tokens = sum(t.tokens for t in meter.earlier.values())
    share = total / done if done else None
    cost = spend["cost_usd"]
    spend["projected_usd"] = None if cost is None or share is None else earlier_cost + (cost - earlier_cost) * share
    spend["projected_tokens"] = None if share is None else int(earlier_tokens + (spend["tokens"] - earlier_tokens) * share)
    return spend


def _spent(spend: dict[str, Any] | None, sep: str = ",") -> str:
    """`` spent 1.23 USD of 5 (projected 4.10)`` for the progress line and the live view's title; tokens when unpriced."""
    if not spend:
        return ""
    if spend["cost_usd"] is not None:
        text = f"{sep} spent {spend['cost_usd']:,.2f} USD" + (f" of {spend['cap_usd']:,g}" if spend["cap_usd"] is not None else "")
        projected = spend["projected_usd"]
        return text + (f" (projected {projected:,.2f})" if projected is not None else "")
    text = f"{sep} {spend['tokens']:,} tokens" + (f" of {spend['cap_tokens']:,}" if spend["cap_tokens"] is not None else "")
    return text + (f" (projected {spend['projected_tokens']:,})" if spend["projected_tokens"] is not None else "")


def _in_flight(row: _Row) -> str:
    """``3 (turns 7, 2, 0)``: the episodes in flight and how far each has got (the most advanced first)."""
    if not row.in_flight:
        return "0"
    turns = sorted(row.turns.values(), reverse=True)
    turns += [0] * max(0, row.in_flight - len(turns))  # started, no turn finished yet
    more = f" +{len(turns) - TURNS_SHOWN}" if len(turns) > TURNS_SHOWN else ""
    return f"{row.in_flight} (turns {', '.join(map(str, turns[:TURNS_SHOWN]))}{more})"


def _fmt_eta(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
