"""kg environment cost: graph load time, oracle episodes/s and memory per live episode.

    PYTHONPATH=src python bench/env_kg.py [--concurrency 1 8 64] [--endpoint URL] [--mode text|tools]

Runs the oracle over the built-in dev+test suites (110 questions) through the real episode loop with
the embedded pyoxigraph store (or ``--endpoint``: any SPARQL endpoint holding the built-in graph).
Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time

from _support import play_oracle, traced_growth

from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext
from agentbench_async.types import ModelReply


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _throughput(env, tasks, concurrency: int, mode: str) -> None:  # type: ignore[no-untyped-def]
    queries = sum(1 for t in tasks for a in t.data["actions"] if a.startswith(("get_relations", "get_attributes"))) + len(tasks)
    records, dt = await play_oracle(env, tasks, concurrency, mode)
    scores = [r.score for r in records]
    print(
        f"concurrency {concurrency:4d}: {len(tasks) / dt:7.1f} oracle episodes/s, {queries / dt:7.1f} SPARQL queries/s, "
        f"mean F1 {sum(scores) / len(scores):.3f}"
    )


async def _memory_per_episode(env, tasks, n: int = 500) -> None:  # type: ignore[no-untyped-def]
    """Live sessions after their first two tool calls (a variable and a cached relation list each)."""

    async def open_sessions() -> list:  # type: ignore[type-arg]
        sessions = []
        for i in range(n):
            task = tasks[i % len(tasks)]
            session = await env.open_session(task, EpisodeContext(episode_id=f"m{i}"))
            messages = await session.begin()
            entity = next(iter(task.data["entities"]))
            relation = task.data["actions"][1].split(",", 1)[1].rstrip(")")
            await session.step(ModelReply(content=f"Action: get_relations({entity})"))
            await session.step(ModelReply(content=f"Action: get_neighbors({entity}, {relation})"))
            sessions.append((session, messages))
        return sessions

    total, sessions = await traced_growth(open_sessions)
    print(f"memory per live episode (session state + prompt, {n} episodes): {total / n / 1024:.1f} KiB")
    del sessions


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--endpoint", help="SPARQL endpoint URL holding the built-in graph")
    parser.add_argument("--mode", default="text", choices=["text", "tools"])
    args = parser.parse_args()
    options = {"kg_endpoint": args.endpoint} if args.endpoint else {}
    rss0 = _rss_mb()
    env = make_env("kg", options=options)
    t0 = time.perf_counter()
    await env.start()
    print(f"backend: {env.backend_description}")  # type: ignore[attr-defined]
    print(f"start (load graph + ontology): {(time.perf_counter() - t0) * 1000:.0f} ms, peak RSS +{_rss_mb() - rss0:.1f} MiB")
    tasks = list(env.tasks("dev")) + list(env.tasks("test"))
    try:
        await _throughput(env, tasks, 1, args.mode)  # warm-up pass
        for c in args.concurrency:
            await _throughput(env, tasks, c, args.mode)
        await _memory_per_episode(env, tasks)
        print(f"declared capacity: {env.capacity} episodes at once")
    finally:
        await env.close()


if __name__ == "__main__":
    asyncio.run(main())
