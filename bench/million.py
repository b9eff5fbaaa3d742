"""A million episodes in one run: memory over the run, connections, retries, episodes lost (issue 49).

    python bench/million.py                                   # 1,000,000 two-turn echo episodes, 10,000 in flight
    python bench/million.py --episodes 200000                 # as far as time allows
    python bench/million.py --episodes 20000 --server-connections 1200 --max-in-flight 10000
                                                              # a server that takes ~1,200 connections at once

Starts ``agentbench serve-mock --latency-ms 100`` in its own process (``--server-connections N``: with an open-files
limit of N, soft and hard, as a one-process server at its limit: connections beyond wait in its listen queue, then
time out) and runs, in this process on uvloop, ``agentbench run``'s engine over the ``echo`` environment (2 calls an
episode, every turn and every HTTP attempt written to DuckDB, the live snapshot included) with ``--concurrency``
episodes in flight and the model's requests in flight at ``--max-in-flight`` (default: the concurrency; its
connections at the default ``max_connections``, or ``--max-connections``).

A thread samples this process's resident memory (``/proc/self/statm``) every ``--sample-s`` seconds with the episodes
finished so far. Prints RSS when the first ``concurrency`` episodes are in flight (admitted), at 10k / 100k / 1M
finished (those reached), the peak and where it came (episodes finished then), the peak above the RSS at admission
(the issue's target: within 200 MB), connections opened to the server (counted as aiohttp's connector makes them),
the most requests in flight at once, calls, retries (and how many of them were connection backpressure), the
end-of-run lines about the pace, and episodes lost (planned minus completed); then the load average: the cores may be
shared. Each figure of memory says where it was: resident in DuckDB's own allocator (its jemalloc), taken by glibc's malloc
(``mallinfo2``), allocated by Arrow, and Python's own blocks; and, a line under it (``_rss_parts.py``), RSS split into
anonymous and file-backed (the libraries' code and data, paged in as it first runs), malloc in use and kept free,
Python's pymalloc arenas, what Arrow's allocator holds resident (its mimalloc arena: allocated or kept for reuse) and
the anonymous memory none of these holds; those two dearer parts are sampled every ``--detail-s`` seconds (and at
admission), and a table at the end gives, per window of episodes finished, the split of the lowest and the highest of
those samples. Then the writer's transactions and the most episodes one held. ``--csv FILE`` writes the samples (the
detail columns empty between detail samples); ``--checkpoint-mb`` tries another WAL size for the writer's
checkpoints than the engine's. Arrow's pool is chosen as the ``agentbench`` program chooses it (jemalloc unless
``ARROW_DEFAULT_MEMORY_POOL`` names one) and printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _rss_parts import arrow_resident, malloc_split, pymalloc, status
from _support import duckdb_resident, load_average, rss_mb

TURNS = 2
MILESTONES = (10_000, 100_000, 1_000_000)


def _allocators() -> Callable[[], tuple[float, float]]:
    """A function returning (MB DuckDB's own allocator holds resident, MB glibc's malloc has taken from the system):
    DuckDB's Linux builds carry jemalloc (-1 when absent), Python and the other libraries use glibc's malloc
    (``mallinfo2``: its arenas and its mmapped chunks, in use or kept free)."""
    malloc = malloc_split()
    duckdb_mb = duckdb_resident()

    def sample() -> tuple[float, float]:
        return duckdb_mb(), sum(malloc())

    return sample


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_mock(latency_ms: float, open_files: int | None) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()

    def limit() -> None:  # the server's own open-files limit: soft and hard, so it cannot raise it
        if open_files:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    proc = subprocess.Popen([sys.executable, "-m", "agentbench_async.cli", "serve-mock", "--port", str(port), "--latency-ms", str(latency_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit)  # fmt: skip
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit(f"the mock server did not listen on port {port}")


def _count_connections() -> list[int]:
    """Connections aiohttp's connectors open from now on (one count, bumped as each is made)."""
    import aiohttp

    opened = [0]
    make = aiohttp.TCPConnector._create_connection

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        proto = await make(self, *args, **kwargs)
        opened[0] += 1
        return proto

    aiohttp.TCPConnector._create_connection = counted  # type: ignore[method-assign]
    return opened


async def _run(args: argparse.Namespace, base_url: str, samples: list[tuple[float, int, int, float]],
               parts: list[tuple[float, float, float, int]], fine: list[tuple[float, ...]]) -> dict[str, Any]:
    from agentbench_async.config import build_config
    from agentbench_async.scheduler import Evaluation

    out = Path(args.out or tempfile.mkdtemp()) / "million.duckdb"
    out.unlink(missing_ok=True)
    model: dict[str, Any] = {"name": "mock-oracle", "base_url": base_url, "task_header": True,
                             "max_in_flight": args.max_in_flight or args.concurrency, "timeout": 600}  # fmt: skip
    if args.max_connections:
        model["max_connections"] = args.max_connections
    cfg = build_config({"out": out, "envs": ["echo"], "split": "test", "max_concurrency": args.concurrency,
                        "env_options": {"echo": {"tasks": args.episodes, "turns": TURNS}}, "models": [model]})  # fmt: skip
    if args.checkpoint_mb:  # an experiment with the writer's bound (docs/performance.md)
        from agentbench_async.store import db

        db.CHECKPOINT_MB = args.checkpoint_mb
    opened = _count_connections()
    flushes = _count_flushes()
    evaluation = Evaluation(cfg, progress=False)
    stop = threading.Event()
    t0 = time.monotonic()

    import pyarrow as pa

    allocators = _allocators()
    malloc = malloc_split()
    arrow = arrow_resident()
    arrow_each = arrow if pa.default_memory_pool().backend_name == "jemalloc" else (lambda: -1.0)  # cheap there: every sample
    detail_at = [0.0, 0.0]  # the last detail sample's time, whether one was taken at admission

    def sample() -> None:
        while not stop.wait(args.sample_s):
            rows = list(evaluation.progress.rows.values())
            samples.append((time.monotonic() - t0, sum(r.done for r in rows), sum(r.in_flight for r in rows), rss_mb()))
            # where it is: DuckDB's allocator, glibc's malloc, Python's own blocks (records waiting for the writer show there)
            parts.append((*allocators(), pa.total_allocated_bytes() / 2**20, sys.getallocatedblocks()))
            # finer (_rss_parts.py): anonymous / file-backed / shared RSS, threads, malloc in use / kept free; every
            # --detail-s, pymalloc's arenas and blocks (it walks the arenas holding the GIL: timed) and Arrow's arena
            st = status()
            detail: tuple[float, ...] = (-1.0,) * 5
            admitted = not detail_at[1] and samples[-1][2] >= min(args.concurrency, args.episodes)
            if admitted or samples[-1][0] - detail_at[0] >= args.detail_s:
                detail_at[0], detail_at[1] = samples[-1][0], detail_at[1] or admitted
                c = time.perf_counter()
                detail = (*pymalloc(), arrow(), (time.perf_counter() - c) * 1e3)
            fine.append((st["RssAnon"], st["RssFile"], st["RssShmem"], st["Threads"], *malloc(), *detail, arrow_each()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu = time.process_time()
    try:
        summary = await evaluation.run()
    finally:
        stop.set()
        sampler.join()
    limits = [c.limits for c in evaluation.progress.clients]
    return {
        "summary": summary, "seconds": time.monotonic() - t0, "cpu_s": time.process_time() - cpu, "opened": opened[0],
        "flushes": flushes, "refusals": sum(getattr(lim, "connection_refusals", 0) for lim in limits), "out": out,  # (0 in code before the pool)
        "pace": summary.pace.lines(cfg.models, cfg.judge, cfg.max_concurrency),
        "backpressure": _count(out, "SELECT count(*) FROM model_calls WHERE note LIKE '%backpressure%'"),
        "retried_rows": _count(out, "SELECT count(*) FROM model_calls WHERE attempt > 1"),
        "file_mb": out.stat().st_size / 2**20, "arrow_pool": pa.default_memory_pool().backend_name,
    }  # fmt: skip


def _count_flushes() -> list[int]:
    """[the writer's transactions, the most episodes one of them held] from now on."""
    from agentbench_async.store.writer import EpisodeWriter

    seen = [0, 0]
    write = EpisodeWriter._write

    def counted(self: Any, batch: list[Any], *args: Any) -> None:
        seen[0] += 1
        seen[1] = max(seen[1], len(batch))
        write(self, batch, *args)

    EpisodeWriter._write = counted  # type: ignore[method-assign]
    return seen


def _count(path: Path, sql: str) -> int:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()


_FINE = ("rss_anon_mb", "rss_file_mb", "rss_shmem_mb", "threads", "malloc_in_use_mb", "malloc_free_mb", "pymalloc_arenas_mb",
         "pymalloc_blocks_mb", "pymalloc_free_blocks_mb", "arrow_arena_mb", "detail_ms", "arrow_resident_mb")  # fmt: skip


def _cell(x: float) -> str:
    return "" if x < 0 else f"{x:.1f}"  # -1: not sampled (the detail columns between --detail-s)


def _mb(x: float, unit: str = " MB") -> str:
    return f"{x:.0f}{unit}" if x >= 0 else "n/a"  # -1: not measured (Arrow's arena under jemalloc)


def _rest(i: int, parts: list[tuple[float, float, float, int]], fine: list[tuple[float, ...]]) -> float:
    """Anonymous RSS that no allocator measured holds at detail sample i: RssAnon - DuckDB's allocator - malloc's
    total - pymalloc's arenas - Arrow's arena (thread stacks, other mmaps, what the measures miss)."""
    anon, malloc_total = fine[i][0], fine[i][4] + fine[i][5]
    return anon - max(parts[i][0], 0) - malloc_total - fine[i][6] - max(fine[i][9], 0)


def _finer(i: int, samples: list[tuple[float, int, int, float]], parts: list[tuple[float, float, float, int]],
           fine: list[tuple[float, ...]]) -> str:
    """Sample i's RSS split further, a line under its figure (the detail columns from the detail sample nearest in time)."""
    if i >= len(fine):
        return ""
    anon, file, shmem, threads, used, free = fine[i][:6]
    line = f"    anonymous {anon:.0f} MB, file-backed {file:.0f} MB (libraries' pages), shared {shmem:.0f} MB; {threads:.0f} threads; malloc {used:.0f} MB in use + {free:.0f} MB free kept"
    if fine[i][11] >= 0:  # jemalloc: Arrow's pool's own resident figure, every sample
        line += f"; Arrow's pool {fine[i][11]:.0f} MB resident"
    near = [k for k in range(len(fine)) if fine[k][6] >= 0]
    if near:
        k = min(near, key=lambda k: abs(samples[k][0] - samples[i][0]))
        line += (f"; at {samples[k][0]:.0f} s: pymalloc arenas {fine[k][6]:.0f} MB ({fine[k][7]:.0f} MB in blocks), Arrow's arena "
                 f"{_mb(fine[k][9])} resident, anonymous no allocator holds {_rest(k, parts, fine):.0f} MB")  # fmt: skip
    return line


def _print_windows(episodes: int, samples: list[tuple[float, int, int, float]], parts: list[tuple[float, float, float, int]],
                   fine: list[tuple[float, ...]]) -> None:
    """Per window of episodes finished (50,000, or a tenth of a shorter run): the detail sample of lowest and of
    highest RSS, split: which part carries a creep of the lows or a high."""
    detailed = [i for i in range(min(len(samples), len(fine))) if fine[i][6] >= 0]
    if not detailed:
        return
    width = 50_000 if episodes >= 500_000 else max(episodes // 10, 1)
    costs = sorted(fine[i][10] for i in detailed)
    print(f"detail samples (every {samples[detailed[1]][0] - samples[detailed[0]][0] if len(detailed) > 1 else 0:.0f} s): {len(detailed)}, "
          f"{costs[len(costs) // 2]:.0f} ms median, {costs[-1]:.0f} ms the most (pymalloc's walk holds the GIL)")  # fmt: skip
    print("window (finished)   low/high  RSS   anon  file  DuckDB  malloc used+free  pymalloc arenas (blocks)  Arrow arena  rest of anon  threads")
    for lo in range(0, episodes, width):
        inside = [i for i in detailed if lo <= samples[i][1] < lo + width]
        if not inside:
            continue
        for name, i in (("low", min(inside, key=lambda i: samples[i][3])), ("high", max(inside, key=lambda i: samples[i][3]))):
            f = fine[i]
            print(f"{lo:>9,}-{lo + width:<9,} {name:>4}  {samples[i][3]:5.0f} {f[0]:5.0f} {f[1]:5.0f} {parts[i][0]:6.0f} {f[4]:7.0f}+{f[5]:<4.0f}"
                  f"      {f[6]:6.0f} ({f[7]:4.0f})        {_mb(f[9], ''):>8} {_rest(i, parts, fine):12.0f} {f[3]:8.0f}")  # fmt: skip


def main() -> None:
    from agentbench_async.program import choose_arrow_pool

    choose_arrow_pool()  # as the `agentbench` program does before anything imports pyarrow: Arrow on jemalloc
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=1_000_000)
    p.add_argument("--concurrency", type=int, default=10_000, help="episodes in flight (max_concurrency)")
    p.add_argument("--max-in-flight", type=int, help="the model's requests in flight (default: the concurrency)")
    p.add_argument("--max-connections", type=int, help="the model's connections (default: the engine's, 1,000)")
    p.add_argument("--latency-ms", type=float, default=100)
    p.add_argument("--server-connections", type=int, help="the mock's open-files limit (soft and hard): connections it takes")
    p.add_argument("--checkpoint-mb", type=int, help="the WAL the writer lets grow before it checkpoints (default: the engine's, store/db.py)")
    p.add_argument("--sample-s", type=float, default=1.0)
    p.add_argument("--detail-s", type=float, default=10.0, help="seconds between the samples of pymalloc's arenas and Arrow's arena (dearer)")
    p.add_argument("--out", help="folder for the DuckDB file (default: a temporary one)")
    p.add_argument("--csv", help="write the samples (seconds, finished, in flight, RSS MB) to this file")
    args = p.parse_args()

    import uvloop  # the `fast` extra, as agentbench run uses it

    print(f"{args.episodes:,} echo episodes ({TURNS} calls each), {args.concurrency:,} in flight, mock at {args.latency_ms:.0f} ms"
          + (f" taking ~{args.server_connections:,} connections" if args.server_connections else "")
          + f"; {os.cpu_count()} cores; start: {load_average()}", flush=True)  # fmt: skip
    mock, url = _start_mock(args.latency_ms, args.server_connections)
    samples: list[tuple[float, int, int, float]] = []
    parts: list[tuple[float, float, float, int]] = []
    fine: list[tuple[float, ...]] = []
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            r = runner.run(_run(args, url, samples, parts, fine))
    finally:
        mock.terminate()
        mock.wait()
    s = r["summary"]
    if args.csv:
        Path(args.csv).write_text("seconds,finished,in_flight,rss_mb,duckdb_allocator_mb,malloc_mb,arrow_mb,python_blocks,"
                                  + ",".join(_FINE) + "\n"
                                  + "".join(f"{t:.1f},{d},{f},{m:.1f},{j:.1f},{g:.1f},{a:.1f},{b}," + ",".join(_cell(x) for x in x9) + "\n"
                                            for (t, d, f, m), (j, g, a, b), x9 in zip(samples, parts, fine)))  # fmt: skip

    def held(i: int) -> str:  # where sample i's memory was
        j, g, a, b = parts[i]
        return f" (DuckDB's allocator {j:.0f} MB, malloc {g:.0f} MB, Arrow {a:.0f} MB, {b / 1e6:.2f}M Python blocks)"

    first = next((i for i, (t, d, f, m) in enumerate(samples) if f >= min(args.concurrency, args.episodes)), None)
    admitted = samples[first][:2] + samples[first][3:] if first is not None else None
    top = max(range(len(samples)), key=lambda i: samples[i][3]) if samples else None
    peak = samples[top] if top is not None else None
    print(f"ran {r['seconds']:.0f} s, {r['cpu_s']:.0f} s of CPU in this process ({r['cpu_s'] / max(s.calls, 1) * 1e6:.0f} us a call); "
          f"file {r['file_mb']:.0f} MB; Arrow's pool {r['arrow_pool']}; end: {load_average()}")  # fmt: skip
    if admitted is not None:
        print(f"RSS when {args.concurrency:,} were first in flight ({admitted[0]:.0f} s, {admitted[1]:,} finished): {admitted[2]:.0f} MB"
              + held(first))  # fmt: skip
        print(_finer(first, samples, parts, fine))
    for mark in MILESTONES:
        at = next((i for i, (t, d, f, m) in enumerate(samples) if d >= mark), None)
        if at is not None:
            print(f"RSS at {mark:,} finished ({samples[at][0]:.0f} s): {samples[at][3]:.0f} MB" + held(at))
            print(_finer(at, samples, parts, fine))
    if peak is not None:
        above = f", {peak[3] - admitted[2]:+.0f} MB against the RSS at admission" if admitted is not None else ""
        print(f"peak RSS (sampled) {peak[3]:.0f} MB at {peak[1]:,} finished ({peak[0]:.0f} s){above}{held(top)}; last sample {samples[-1][3]:.0f} MB; "
              f"ru_maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")  # fmt: skip
        print(_finer(top, samples, parts, fine))
    print(f"the writer: {r['flushes'][0]:,} transactions, the largest {r['flushes'][1]:,} episodes")
    completed = s.statuses.get("completed", 0)
    print(f"connections opened {r['opened']:,}; most in flight {max((f for _, _, f, _ in samples), default=0):,} episodes; "
          f"{s.calls:,} calls, {s.retries:,} retries ({r['retried_rows']:,} attempts after a first, {r['backpressure']:,} of them "
          f"refused connections taken as backpressure; {r['refusals']:,} refusals seen); statuses {dict(s.statuses)}; episodes lost "
          f"{args.episodes - completed:,}")  # fmt: skip
    for line in r["pace"]:
        print(line)
    _print_windows(args.episodes, samples, parts, fine)


if __name__ == "__main__":
    main()
