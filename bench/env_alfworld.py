"""alfworld environment cost: oracle episodes/s, memory per live game, memory after the games end.

    PYTHONPATH=src python bench/env_alfworld.py [--workers N] [--concurrency 1 8 32] [--live 32] [--rounds 3]
                                                [--data-dir DIR --alfworld-data DIR] [--kept cold|user|off]

Throughput runs the oracle through the real episode loop (text mode) over the built-in dev+test games (or
the official games with --data-dir and --alfworld-data). Memory (measured first, on fresh workers) is the game workers' resident memory
(/proc/<pid>/statm, what the kernel has to hold; games live in the workers, not in this process): with no
game open, with --live games begun at once, and after they ended — repeated --rounds times to show that
ended games give their memory back (upstream's ALFWorld workers grew with every game played). Prints
numbers, asserts nothing; the machine's load average is printed with them (the cores may be shared), and the CPU
each episode took in the workers and in this process, which the load does not change much: the rate those allow on
idle cores is printed beside the measured one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from _support import load_average, play_oracle

from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext


async def _cpu(env) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """CPU seconds used so far by the game workers and by this process (the engine, the oracle, the sessions)."""
    return sum(s["cpu_seconds"] for s in await env.pool.stats()), time.process_time()


async def _throughput(env, tasks, concurrency: int) -> None:  # type: ignore[no-untyped-def]
    (workers0, engine0), kept0 = await _cpu(env), await _kept(env)
    records, dt = await play_oracle(env, tasks, concurrency)
    (workers1, engine1), kept1 = await _cpu(env), await _kept(env)
    solved, steps, n = sum(r.success for r in records), sum(r.n_turns for r in records), len(tasks)
    per_workers, per_engine = (workers1 - workers0) / n, (engine1 - engine0) / n
    cores = len(os.sched_getaffinity(0))
    print(f"concurrency {concurrency:4d}: {n / dt:6.2f} oracle episodes/s, {steps / dt:6.1f} steps/s, {solved}/{n} won, {dt:.1f} s; "
          f"CPU per episode {1000 * per_workers:.0f} ms in the workers + {1000 * per_engine:.0f} ms in the engine "
          f"(on {cores} idle cores at most {cores / (per_workers + per_engine):.1f} episodes/s); games loaded from kept work "
          f"{kept1[0] - kept0[0]}, made {kept1[1] - kept0[1]} ({load_average()})")  # fmt: skip


async def _kept(env) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    stats = await env.pool.stats()
    return sum(s["kept_hits"] for s in stats) // 2, sum(s["kept_misses"] for s in stats) // 2  # logic + translation per game


async def _rss(env) -> tuple[float, int, int]:  # type: ignore[no-untyped-def]
    stats = await env.pool.stats()
    return sum(s["rss_bytes"] for s in stats) / 2**20, sum(s["live"] for s in stats), max(s["libraries"] for s in stats)


async def _memory(env, tasks, live: int, rounds: int) -> None:  # type: ignore[no-untyped-def]
    idle, _, _ = await _rss(env)
    print(f"workers: {len(env.pool.worker_pids)}, resident {idle:.1f} MiB with no game open yet")
    for r in range(1, rounds + 1):
        sessions = []
        for i in range(live):
            session = await env.open_session(tasks[i % len(tasks)], EpisodeContext(episode_id=f"m{r}-{i}"))
            await session.begin()
            sessions.append(session)
        busy, n, libraries = await _rss(env)
        for session in sessions:
            await session.close()
        after, _, _ = await _rss(env)
        print(f"round {r}: {n} live games {busy:.1f} MiB = {(busy - idle) / n:.2f} MiB per live game; "
              f"after they ended {after:.1f} MiB ({after - idle:+.1f}); planner libraries held: {libraries}")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--live", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--alfworld-data", type=Path)
    parser.add_argument("--kept", choices=["cold", "user", "off"], default="cold",
                        help="loaded games' kept work: cold (an empty folder: the first pass makes it, later passes reuse "
                        "it), user (the user's cache folder as a run uses it) or off (each worker's memory only)")
    args = parser.parse_args()
    if args.kept == "cold":
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="alfworld-bench-")
    options = {"workers": str(args.workers), "cache": str(args.kept != "off").lower()}
    if args.alfworld_data:
        options["alfworld_data"] = str(args.alfworld_data)
    env = make_env("alfworld", data_dir=args.data_dir, options=options)
    t0 = time.perf_counter()
    await env.start()
    tasks = [*env.tasks("dev"), *env.tasks("test")]
    print(f"{len(tasks)} games; {args.workers} workers started in {time.perf_counter() - t0:.1f} s ({load_average()})")
    try:
        await _memory(env, tasks, args.live, args.rounds)
        for c in args.concurrency:
            await _throughput(env, tasks, c)
        after, _, libraries = await _rss(env)
        print(f"after all runs: resident {after:.1f} MiB with no game open; planner libraries held: {libraries}")
    finally:
        await env.close()


if __name__ == "__main__":
    asyncio.run(main())
