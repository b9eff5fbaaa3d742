"""card_game cost and sanity: baseline-vs-baseline win rates, oracle episodes/s, memory per live episode.

    PYTHONPATH=src python bench/env_card_game.py [--games 2000] [--episodes 400] [--concurrency 100] [--live 1000]

1. Baseline vs baseline over ``--games`` seeds per pairing and seat order (engine only): first-mover win
   rate with a 95 % Wilson interval, mean final state (game length) and how games ended. Upstream's shipped
   engine gave (19-28 games each): baseline2 beat baseline1 27/27 first, 24/27 second; baseline2 mirror:
   first mover 19/19, ending around state 32; baseline1 mirror: first mover 17/28, around state 39.
2. Oracle episodes through the real episode loop (``testing.play``: mock policy -> parser -> engine ->
   opponent -> metric, AgentBench's history rule) over ``--episodes`` generated samples, ``--concurrency``
   at once; its win rate. For each mode: AgentBench's game (default) and the fixed game (``fixes=true``).
3. Memory: ``--live`` sessions opened and played for 10 decisions each, tracemalloc growth per session
   (session state plus the conversation the engine keeps), for each mode. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agentbench_async.envs.base import EpisodeContext  # noqa: E402
from agentbench_async.envs.card_game import CardGameEnvironment  # noqa: E402
from agentbench_async.envs.card_game.baselines import baseline_game  # noqa: E402
from agentbench_async.envs.card_game.policies import POLICIES  # noqa: E402
from agentbench_async.envs.base import run_policy  # noqa: E402
from agentbench_async.testing import play  # noqa: E402
from agentbench_async.types import Message, ModelReply  # noqa: E402


def _wilson(wins: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _baselines(games: int) -> None:
    print(f"baseline vs baseline, {games} seeds per pairing (player 0 moves first):")
    for first, second in (("baseline2", "baseline1"), ("baseline1", "baseline2"), ("baseline2", "baseline2"), ("baseline1", "baseline1")):
        wins = 0
        states = 0
        endings: Counter[str] = Counter()
        start = time.perf_counter()
        for seed in range(games):
            game = baseline_game(first, second, seed)
            wins += game.winner == 0
            states += game.state
            endings[game.end_reason or "?"] += 1
        elapsed = time.perf_counter() - start
        low, high = _wilson(wins, games)
        print(
            f"  {first} (first) vs {second}: first mover wins {wins / games:6.1%} [{low:.1%}, {high:.1%}], "
            f"mean final state {states / games:5.1f}, endings {dict(endings)}, {games / elapsed:,.0f} games/s"
        )


MODES = {"agentbench": {}, "fixed": {"fixes": "true"}}


async def _oracle(episodes: int, concurrency: int, mode: str) -> None:
    env = CardGameEnvironment(options={"test_time": str(max(1, episodes // 4)), **MODES[mode]})
    tasks = list(env.tasks("test"))[:episodes]
    sem = asyncio.Semaphore(concurrency)
    replies = 0

    async def one(task):  # type: ignore[no-untyped-def]
        nonlocal replies
        async with sem:
            record = await play(env, task, "oracle", history="agentbench")
            replies += record.n_turns
            return record

    start = time.perf_counter()
    records = await asyncio.gather(*(one(t) for t in tasks))
    elapsed = time.perf_counter() - start
    wins = sum(r.success for r in records)
    rows = sum(len(r.turns) for r in records) / len(records)
    chars = sum(len(t.content or "") for r in records for t in r.turns) / len(records)
    print(f"oracle, {mode} mode: {len(records)} episodes at concurrency {concurrency} in {elapsed:.2f}s")
    print(f"  episodes/s: {len(records) / elapsed:.1f}   model replies/s: {replies / elapsed:.0f}   wins: {wins}/{len(records)}   "
          f"mean score: {sum(r.score for r in records) / len(records):.3f}")
    print(f"  transcript per episode (turns rows, what DuckDB stores): {rows:.0f} messages, {chars / 1024:.0f} KiB of text")


async def _memory(live: int, mode: str, decisions: int = 10) -> None:
    env = CardGameEnvironment(options={"test_time": "25", **MODES[mode]})
    tasks = list(env.tasks("test"))
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    sessions = []
    histories: list[list[Message]] = []
    done: set[int] = set()
    for i in range(live):
        session = await env.open_session(tasks[i % len(tasks)], EpisodeContext(episode_id=f"mem-{i}"))
        histories.append(list(await session.begin()))
        sessions.append(session)
    for _ in range(decisions):
        for i, session in enumerate(sessions):
            if i in done:
                continue
            reply = run_policy(POLICIES["oracle"], tasks[i % len(tasks)], histories[i], None, f"mem-{i}")
            step = await session.step(ModelReply(content=reply.content))
            if step.outcome is None and step.restart:  # AgentBench's game: each call is its own conversation
                histories[i] = list(step.observation)
            elif step.outcome is None:
                histories[i] += [{"role": "assistant", "content": reply.content}, *step.observation]
            else:
                done.add(i)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    print(f"memory, {mode} mode: {live} live episodes after {decisions} decisions (session + conversation): "
          f"{used / live / 1024:.1f} KiB per episode")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--live", type=int, default=1000)
    args = parser.parse_args()
    print(f"card_game capacity (episodes at once): {CardGameEnvironment().capacity}")
    _baselines(args.games)
    for mode in MODES:
        await _oracle(args.episodes, args.concurrency, mode)
        await _memory(args.live, mode)


if __name__ == "__main__":
    asyncio.run(main())
