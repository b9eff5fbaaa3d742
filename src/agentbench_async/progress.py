"""Live progress: episodes done/total per model x environment, in flight, calls/s, retries, errors,
tokens and ETA (a rich Live display on a terminal; nothing when output is not a TTY)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table


@dataclass
class _Row:
    total: int = 0
    done: int = 0
    in_flight: int = 0
    statuses: Counter[str] = field(default_factory=Counter)


class Progress:
    def __init__(self, console: Console, *, enabled: bool | None = None) -> None:
        self.console = console
        self.enabled = console.is_terminal if enabled is None else enabled
        self.rows: dict[tuple[str, str], _Row] = {}
        self.clients: list[Any] = []  # ModelClient objects (their .stats are read)
        self._start = time.monotonic()
        self._live: Live | None = None

    def add_stream(self, model: str, env: str, total: int) -> None:
        self.rows.setdefault((model, env), _Row()).total += total

    def started(self, model: str, env: str) -> None:
        self.rows[(model, env)].in_flight += 1

    def finished(self, model: str, env: str, status: str) -> None:
        row = self.rows[(model, env)]
        row.in_flight -= 1
        row.done += 1
        row.statuses[status] += 1

    def __enter__(self) -> Progress:
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=2, transient=False, get_renderable=self._render)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def snapshot(self) -> dict[str, Any]:
        """The figures of the display as plain data (the writer publishes them for live readers)."""
        elapsed = max(time.monotonic() - self._start, 1e-6)
        stat = {key: sum(c.stats.get(key, 0) for c in self.clients)
                for key in ("calls", "retries", "errors", "http_429", "input_tokens", "output_tokens",
                            "batches_submitted", "batches_in_progress", "batches_done")}  # fmt: skip
        done = sum(r.done for r in self.rows.values())
        total = sum(r.total for r in self.rows.values())
        rate = done / elapsed
        streams = [{"model": model, "env": env, "total": row.total, "done": row.done, "in_flight": row.in_flight, "statuses": dict(row.statuses)}
                   for (model, env), row in sorted(self.rows.items())]  # fmt: skip
        return {**stat, "elapsed_s": elapsed, "calls_per_s": stat["calls"] / elapsed, "episodes_per_s": rate,
                "eta_s": (total - done) / rate if rate > 0 else None, "streams": streams}  # fmt: skip

    def _render(self) -> Table:
        snap = self.snapshot()
        eta = snap["eta_s"] if snap["eta_s"] is not None else float("nan")
        done = sum(s["done"] for s in snap["streams"])
        total = sum(s["total"] for s in snap["streams"])
        title = (
            f"{done}/{total} episodes · {snap['calls_per_s']:.1f} calls/s · retries {snap['retries']} · errors {snap['errors']} · "
            f"tokens {snap['input_tokens']:,} in / {snap['output_tokens']:,} out · ETA {_fmt_eta(eta)}"
        )
        if any("batches_submitted" in c.stats for c in self.clients):  # batch mode (models/batches.py)
            title += (f" · batches {snap['batches_submitted']} submitted / {snap['batches_in_progress']} in progress / "
                      f"{snap['batches_done']} done")  # fmt: skip
        table = Table(title=title, title_justify="left")
        for col in ("model", "env", "done/total", "in flight", "statuses"):
            table.add_column(col)
        for (model, env), row in sorted(self.rows.items()):
            statuses = ", ".join(f"{k} {v}" for k, v in row.statuses.most_common())
            table.add_row(model, env, f"{row.done}/{row.total}", str(row.in_flight), statuses)
        return table


def _fmt_eta(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
