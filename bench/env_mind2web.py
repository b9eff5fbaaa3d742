"""mind2web environment cost: oracle episodes/s (one episode = one step, 2-3 rounds, each round prunes and
renders the page) and memory per live episode.

    PYTHONPATH=src python bench/env_mind2web.py [--concurrency 1 16 128] [--mind2web-data DIR] [--data-dir DIR]

Throughput runs the oracle through the real episode loop over the built-in dev+test steps (or the Mind2Web
download with --mind2web-data). The oracle itself re-renders the rounds to read the page, so the numbers
include about twice the environment's own rendering work. Memory per live episode counts this process
(tracemalloc) with N sessions begun at once. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from _support import begin_sessions, play_oracle, traced_growth

from agentbench_async.envs import make_env


async def _throughput(env, tasks, concurrency: int) -> None:  # type: ignore[no-untyped-def]
    records, dt = await play_oracle(env, tasks, concurrency)
    solved, rounds = sum(r.success for r in records), sum(r.n_turns for r in records)
    print(f"concurrency {concurrency:4d}: {len(tasks) / dt:7.1f} oracle episodes/s, {rounds / dt:7.1f} rounds/s, {solved}/{len(tasks)} solved, {dt:.2f} s")


async def _memory_per_episode(env, tasks, n: int) -> None:  # type: ignore[no-untyped-def]
    grown, sessions = await traced_growth(lambda: begin_sessions(env, tasks, n))
    print(f"memory: {grown / n / 1024:.1f} KiB per live episode ({n} sessions begun; task data is shared, not counted)")
    for session in sessions:
        await session.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--mind2web-data", type=Path)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--sessions", type=int, default=500)
    args = parser.parse_args()
    options = {"mind2web_data": str(args.mind2web_data)} if args.mind2web_data else {}
    env = make_env("mind2web", data_dir=args.data_dir, options=options)
    t0 = time.perf_counter()
    tasks = [*env.tasks("dev"), *env.tasks("test")]
    print(f"loaded {len(tasks)} steps in {time.perf_counter() - t0:.2f} s; prompt file {env.few_shot.path}")  # type: ignore[attr-defined]
    for c in args.concurrency:
        await _throughput(env, tasks, c)
    await _memory_per_episode(env, tasks, args.sessions)


if __name__ == "__main__":
    asyncio.run(main())
