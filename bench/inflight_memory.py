"""What an episode in flight holds: bytes per episode and where they were allocated (issue 49).

    python bench/inflight_memory.py                           # 30,000 two-turn echo episodes, 10,000 in flight
    python bench/inflight_memory.py --no-trace                # RSS only (no tracemalloc: the run at its own speed)
    python bench/inflight_memory.py --frames 6 --top 30       # deeper tracebacks, more of them

Starts ``agentbench serve-mock --latency-ms 100`` in its own process (as ``bench/million.py`` does) and runs, in this
process on uvloop, ``agentbench run``'s engine over the ``echo`` environment (2 calls an episode, every turn stored,
``--concurrency`` episodes in flight, the model's requests in flight at the concurrency: its 1,000 connections at the
default ``max_connections``, so most of the requests in flight wait for one). Python's allocations are traced from
the moment the run starts (``tracemalloc``, ``--frames`` frames a traceback): once ``--at`` episodes have finished
(every episode in flight then began after the trace started) and the concurrency is in flight (90% of it), the event loop is held
for the measurement: the memory traced (allocated during the run and still held) per episode in flight, the top
holders grouped by traceback (bytes an episode in flight, blocks, where), the live objects by type
(``gc.get_objects``: count and ``sys.getsizeof`` bytes an episode in flight) and how many requests were on a connection
and how many waited for one. Then the cyclic garbage a collection would free. RSS at admission (the first
``--concurrency`` in flight, before a turn) and at the measurement, both per episode in flight; with tracemalloc on,
RSS includes the trace's own memory: take RSS figures from ``--no-trace``. Tracemalloc slows the run several times:
a diagnosis, not a speed figure. Prints the load average: the cores may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from _support import load_average, rss_mb
from million import TURNS, _allocators, _start_mock

_SITE = ("site-packages/", "/src/agentbench_async/", "/lib/python3")


def _where(frame: tracemalloc.Frame) -> str:
    """A frame as ``path:line``, shortened to the package's own path."""
    name = frame.filename
    for mark in _SITE:
        if mark in name:
            name = name.split(mark, 1)[1]
            break
    return f"{name}:{frame.lineno}"


def _measure(evaluation: Any, args: argparse.Namespace, at_admission: float) -> None:
    """Everything measured while the event loop is held (called from the loop: nothing moves meanwhile)."""
    rows = list(evaluation.progress.rows.values())
    in_flight, finished = sum(r.in_flight for r in rows), sum(r.done for r in rows)
    rss = rss_mb()
    duckdb_mb, malloc_mb = _allocators()()
    print(f"\nmeasured at {finished:,} finished, {in_flight:,} in flight; RSS {rss:.0f} MB (at admission {at_admission:.0f} MB: "
          f"{(rss - at_admission) * 2**20 / max(in_flight, 1):,.0f} bytes an episode in flight above it"
          + (", tracemalloc's own memory included" if args.trace else "") + f"); DuckDB's allocator {duckdb_mb:.0f} MB, "
          f"malloc {malloc_mb:.0f} MB, {sys.getallocatedblocks() / 1e6:.2f}M Python blocks", flush=True)  # fmt: skip
    for client in evaluation.progress.clients:
        limits = getattr(client, "limits", None)
        if limits is not None:
            print(f"requests of {client.config.name}: {limits.in_flight:,} on a connection (limit {limits.in_flight_limit:,}), "
                  f"{len(limits._in_flight._waiters):,} waiting for one")  # fmt: skip
    per = max(in_flight, 1)
    if args.trace:
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        stats = snapshot.statistics("traceback")
        total = sum(s.size for s in stats)
        print(f"\ntraced (allocated since the run started, still held): {total / 2**20:.1f} MB in {sum(s.count for s in stats):,} "
              f"blocks = {total / per:,.0f} bytes an episode in flight; the top {args.top} by traceback "
              f"(innermost frame first, {args.frames} frames):")  # fmt: skip
        print(f"{'bytes/ep':>9} {'blocks/ep':>9}  where")
        for s in stats[: args.top]:
            print(f"{s.size / per:9,.0f} {s.count / per:9.2f}  " + " < ".join(_where(f) for f in reversed(s.traceback)))
        by_line = snapshot.statistics("lineno")
        print(f"\nthe top {args.top} by line (innermost frame):")
        for s in by_line[: args.top]:
            print(f"{s.size / per:9,.0f} {s.count / per:9.2f}  {_where(s.traceback[0])}")
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    waits: Counter[str] = Counter()  # coroutines, functions and tasks by their code's name
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
        code = getattr(obj, "cr_code", None) or getattr(obj, "__code__", None)
        if isinstance(obj, asyncio.Task):
            code = getattr(obj.get_coro(), "cr_code", None)
            name = "task of"
        if code is not None:
            waits[f"{name} {code.co_qualname} ({Path(code.co_filename).name})"] += 1
    print(f"\nlive objects the GC tracks, by type (sys.getsizeof, not what they refer to), the top {args.top} by bytes:")
    print(f"{'bytes/ep':>9} {'count/ep':>9}  type")
    for name, size in sizes.most_common(args.top):
        print(f"{size / per:9,.0f} {counts[name] / per:9.2f}  {name}")
    print(f"\ncoroutines, functions and tasks by their code, the top {args.top}:")
    for name, count in waits.most_common(args.top):
        print(f"{count / per:9.2f}  {name}")
    if args.trace:
        before = tracemalloc.get_traced_memory()[0]
        freed = gc.collect()
        print(f"\na collection now: {freed:,} objects of cyclic garbage, {(before - tracemalloc.get_traced_memory()[0]) / per:,.0f} "
              "bytes an episode in flight")  # fmt: skip


async def _run(args: argparse.Namespace, base_url: str) -> None:
    from agentbench_async.config import build_config
    from agentbench_async.scheduler import Evaluation

    out = Path(tempfile.mkdtemp()) / "inflight.duckdb"
    model = {"name": "mock-oracle", "base_url": base_url, "task_header": True, "max_in_flight": args.concurrency, "timeout": 600}
    cfg = build_config({"out": out, "envs": ["echo"], "split": "test", "max_concurrency": args.concurrency,
                        "env_options": {"echo": {"tasks": args.episodes, "turns": TURNS}}, "models": [model]})  # fmt: skip
    evaluation = Evaluation(cfg, progress=False)
    if args.trace:
        tracemalloc.start(args.frames)

    async def watch() -> None:
        admitted = None
        while True:
            await asyncio.sleep(0.2)
            rows = list(evaluation.progress.rows.values())
            in_flight, finished = sum(r.in_flight for r in rows), sum(r.done for r in rows)
            if admitted is None and in_flight >= args.concurrency:
                admitted = rss_mb()
                print(f"admission: {in_flight:,} in flight, {finished:,} finished: RSS {admitted:.0f} MB", flush=True)
            if admitted is not None and finished >= args.at and in_flight >= 0.9 * args.concurrency:  # (refilled as they finish)
                _measure(evaluation, args, admitted)
                if args.trace:
                    tracemalloc.stop()  # the rest of the run at its own speed
                return

    t0 = time.monotonic()
    watcher = asyncio.create_task(watch())
    try:
        summary = await evaluation.run()
    finally:
        if watcher.done() and not watcher.cancelled() and watcher.exception() is not None:
            raise watcher.exception()  # type: ignore[misc]
        if not watcher.done():
            print(f"not measured: {args.at:,} finished with {args.concurrency:,} in flight was never seen", flush=True)
        watcher.cancel()
    print(f"\nran {time.monotonic() - t0:.0f} s, {summary.calls:,} calls, {summary.retries:,} retries, statuses {dict(summary.statuses)}; {load_average()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=30_000)
    p.add_argument("--concurrency", type=int, default=10_000, help="episodes in flight (max_concurrency)")
    p.add_argument("--at", type=int, default=12_000, help="measure once this many episodes have finished")
    p.add_argument("--frames", type=int, default=4, help="frames of each traceback")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--latency-ms", type=float, default=100)
    p.add_argument("--no-trace", dest="trace", action="store_false", help="no tracemalloc (RSS at the run's own speed)")
    args = p.parse_args()
    if args.at >= args.episodes - args.concurrency:
        p.error(f"--at {args.at} leaves fewer than --concurrency episodes to run: use --episodes above {args.at + args.concurrency}")

    import uvloop

    print(f"{args.episodes:,} echo episodes ({TURNS} calls each), {args.concurrency:,} in flight, mock at {args.latency_ms:.0f} ms, "
          f"measured at {args.at:,} finished" + (f", tracemalloc {args.frames} frames" if args.trace else ", no tracemalloc")
          + f"; start: {load_average()}", flush=True)  # fmt: skip
    mock, url = _start_mock(args.latency_ms, None)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(_run(args, url))
    finally:
        mock.terminate()
        mock.wait()


if __name__ == "__main__":
    main()
