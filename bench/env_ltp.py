"""ltp cost: oracle episodes/s (mock player + mock judge, in-process) and memory per live episode.

    PYTHONPATH=src python bench/env_ltp.py [--episodes 700] [--concurrency 100] [--live 1000]

Episodes go through the real episode loop (``testing.play``): 25 rounds each, every round a judge
answer plus restatement and key comparisons. The judge is the deterministic mock, so the numbers are the
environment's own cost; with a real judge model the API latency dominates. Memory: ``--live`` sessions
are opened and played for 10 rounds, then tracemalloc's growth is divided by their number.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
import tracemalloc

from agentbench_async.envs.base import EpisodeContext
from agentbench_async.envs.ltp import LTPEnvironment
from agentbench_async.envs.base import run_policy
from agentbench_async.envs.ltp.policies import POLICIES
from agentbench_async.testing import play
from agentbench_async.types import Message, ModelReply


async def _throughput(env: LTPEnvironment, episodes: int, concurrency: int) -> None:
    tasks = list(itertools.islice(itertools.cycle(list(env.tasks("dev")) + list(env.tasks("test"))), episodes))
    sem = asyncio.Semaphore(concurrency)
    judge_calls = 0

    async def one(i: int) -> float:
        nonlocal judge_calls
        async with sem:
            record = await play(env, tasks[i], "oracle", repeat=i)
            judge_calls += sum(1 for c in record.calls if c.caller == "judge")
            return record.score

    start = time.perf_counter()
    scores = await asyncio.gather(*(one(i) for i in range(episodes)))
    elapsed = time.perf_counter() - start
    print(f"oracle episodes: {episodes} at concurrency {concurrency} in {elapsed:.2f}s")
    print(f"  episodes/s: {episodes / elapsed:.1f}   rounds/s: {episodes * env.rounds / elapsed:.0f}   judge calls/s: {judge_calls / elapsed:.0f}")
    print(f"  mean game progress: {sum(scores) / len(scores):.3f}")


async def _memory(env: LTPEnvironment, live: int, rounds: int = 10) -> None:
    tasks = list(env.tasks("test"))
    judge_policy = POLICIES["judge"]

    def judge_for(i: int):  # type: ignore[no-untyped-def]
        async def judge(messages: list[Message]) -> ModelReply:
            reply = run_policy(judge_policy, tasks[i % len(tasks)], messages, None, f"mem-{i}#judge")
            return ModelReply(content=reply.content)

        return judge

    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    sessions = []
    histories: list[list[Message]] = []
    for i in range(live):
        ctx = EpisodeContext(episode_id=f"mem-{i}", judge=judge_for(i))
        session = await env.open_session(tasks[i % len(tasks)], ctx)
        histories.append(list(await session.begin()))
        sessions.append(session)
    for _ in range(rounds):
        for i, session in enumerate(sessions):
            reply = run_policy(POLICIES["oracle"], tasks[i % len(tasks)], histories[i], None, f"mem-{i}")
            step = await session.step(ModelReply(content=reply.content))
            histories[i] += [{"role": "assistant", "content": reply.content}, *step.observation]
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    print(f"memory: {live} live episodes after {rounds} rounds (session + player history): {used / live / 1024:.1f} KiB per episode")
    for session in sessions:
        await session.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=700)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--live", type=int, default=1000)
    args = parser.parse_args()
    env = LTPEnvironment()
    print(f"ltp capacity (episodes at once): {env.capacity}")
    await _throughput(env, args.episodes, args.concurrency)
    await _memory(env, args.live)


if __name__ == "__main__":
    asyncio.run(main())
