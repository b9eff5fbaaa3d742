"""An environment's own CPU per episode: its calls in this process and its own processes, with the mock oracle.

    PYTHONPATH=src python bench/env_cpu.py ENV [--data-dir ../shared/agentbench-data] [--split test]
                                               [--limit N] [--plays P] [--concurrency C] [--option KEY=VALUE ...]
                                               [--profile FILE]

Plays the oracle over the split's tasks one episode at a time (in-process, ``testing.play``: the real episode loop
without the HTTP hop) with the data a run with that ``--data-dir`` plays (official where all it needs is there, the
built-in suite otherwise, as ``--env all`` chooses; the line printed says which). One at a time, so the CPU this process's main thread spends while a
session's ``begin``/``step``/``on_turn_limit``/``close`` or the environment's ``open_session`` is awaited is that
environment's own work, apart from the mock policy and the engine's episode loop, which are not counted; the CPU of
this process's other threads (the environments' thread pools; ``play`` starts none) is the environment's too. Its processes (game workers, MariaDB, ...: every process under this one) are counted from /proc
(their own time plus what they reaped), from after ``start`` to before ``close``; the environment's ``start``
and ``close`` (this process and its processes) are printed apart, and everything from start to close per episode. ``--profile FILE`` writes a
cProfile of the episodes (``python -m pstats FILE``); the CPU figures printed then include the profiler's overhead.
Prints numbers, asserts nothing; the load average is printed with them (the cores may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import os
import time
from pathlib import Path
from typing import Any

from _support import load_average
from whole_benchmark import _children

from agentbench_async.envs import env_class, make_env
from agentbench_async.testing import play

_TICK = os.sysconf("SC_CLK_TCK")
_SESSION_CALLS = ("begin", "step", "on_turn_limit", "on_context_limit", "close")


def _tree_cpu(pid: int) -> float:
    """CPU seconds of every process under ``pid`` (each one's own time and the time of the children it reaped)."""
    total, todo = 0.0, _children(pid)
    while todo:
        child = todo.pop()
        try:
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += sum(int(f) for f in fields[11:15]) / _TICK
        todo += _children(child)
    reaped = os.times()
    return total + reaped.children_user + reaped.children_system


def _other_threads_cpu() -> float:
    """CPU seconds of this process's threads other than the main one (the environments' thread pools), live ones."""
    total = 0.0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == os.getpid():
            continue
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


class _Timed:
    """CPU seconds of this process's main thread spent inside the awaited calls wrapped by ``wrap``."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, method: Any) -> Any:
        @functools.wraps(method)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return await method(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - t0

        return timed


def _instrument(env: Any, timed: _Timed) -> None:
    opened = env.open_session

    async def open_session(*args: Any, **kwargs: Any) -> Any:
        session = await timed.wrap(opened)(*args, **kwargs)
        for name in _SESSION_CALLS:
            setattr(session, name, timed.wrap(getattr(session, name)))
        return session

    env.open_session = open_session


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("env")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--option", action="append", default=[], help="an environment option, KEY=VALUE")
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--plays", type=int, default=1, help="each task played this many times (as by that many models)")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="episodes at once; above 1 the calls' CPU in this process counts the others' work too")
    args = parser.parse_args()
    options = dict(o.split("=", 1) for o in args.option)
    data_dir = args.data_dir if args.data_dir and args.data_dir.is_dir() else None
    if data_dir and env_class(args.env).missing_data(data_dir, options, args.split, "text"):
        data_dir = None  # as `--env all` does: the built-in suite where the official data is not all there
    env = make_env(args.env, data_dir=data_dir, options=options)
    official = type(env).plays_official_tasks(data_dir, env.options) if data_dir else False
    t0, tree_start = time.process_time(), _tree_cpu(os.getpid())
    await env.start()
    start_cpu, start_tree = time.process_time() - t0, _tree_cpu(os.getpid()) - tree_start
    tasks = list(env.tasks(args.split))[: args.limit]
    timed = _Timed()
    _instrument(env, timed)
    profiler = cProfile.Profile() if args.profile else None
    tree0, threads0, wall0 = _tree_cpu(os.getpid()), _other_threads_cpu(), time.perf_counter()
    if profiler:
        profiler.enable()
    places = asyncio.Semaphore(args.concurrency)

    async def one(task: Any, repeat: int) -> Any:
        async with places:
            return await play(env, task, "oracle", repeat=repeat)

    records = await asyncio.gather(*(one(task, r) for r in range(args.plays) for task in tasks))
    solved, turns = sum(bool(r.success) for r in records), sum(r.n_turns for r in records)
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    wall, tree = time.perf_counter() - wall0, _tree_cpu(os.getpid()) - tree0
    timed.seconds += _other_threads_cpu() - threads0
    t0, tree_close = time.process_time(), _tree_cpu(os.getpid())
    await env.close()
    close_cpu, close_tree = time.process_time() - t0, _tree_cpu(os.getpid()) - tree_close
    n = len(records)
    processes = (tree + start_tree + close_tree) / n
    if args.concurrency == 1:
        calls = f"{1000 * timed.seconds / n:.2f} ms"
        whole = f"{1000 * (processes + (timed.seconds + start_cpu + close_cpu) / n):.2f} ms an episode"
    else:  # other episodes' work ran while a call was awaited: only the processes' figure is the environment's
        calls = "(one episode at a time only)"
        whole = f"{1000 * processes:.2f} ms an episode in its processes"
    print(f"{args.env} {args.split}: {n} episodes ({'official' if official else 'built-in'} data), {turns} turns, "
          f"{solved} solved, {wall:.1f} s ({load_average()})\n"
          f"  CPU an episode: {calls} in this process's environment calls + {1000 * tree / n:.2f} ms in its processes\n"
          f"  start {1000 * start_cpu:.0f} + {1000 * start_tree:.0f} ms, close {1000 * close_cpu:.0f} + "
          f"{1000 * close_tree:.0f} ms (this process + its processes); start to close {whole}")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
