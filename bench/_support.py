"""What the bench scripts share: the oracle played over a task list, Python memory held by live sessions, the
machine's load, this process's resident memory and DuckDB's allocator's, the built-in suites' generators. (bench/ is
on the path when a script in it runs.)"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import importlib.util
import os
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

if TYPE_CHECKING:
    from agentbench_async.records import EpisodeRecord


def load_generator(env: str) -> ModuleType:
    """``environments/<env>/generate.py`` (the built-in suite's generator) imported as a module."""
    path = Path(__file__).resolve().parents[1] / "environments" / env / "generate.py"
    spec = importlib.util.spec_from_file_location(f"{env}_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: the cores may be shared, so figures come with them."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    """This process's resident memory now (``/proc/self/statm``), MB."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def duckdb_resident() -> Callable[[], float]:
    """A function returning the MB DuckDB's own allocator holds resident: its Linux builds carry jemalloc
    (``duckdb_je_mallctl``); -1 where it is absent."""
    try:
        import _duckdb

        ctl = ctypes.CDLL(_duckdb.__file__).duckdb_je_mallctl
        ctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_size_t]
    except (ImportError, OSError, AttributeError):
        return lambda: -1.0

    def resident() -> float:
        epoch, value, size = ctypes.c_uint64(1), ctypes.c_size_t(0), ctypes.c_size_t(8)
        ctl(b"epoch", ctypes.byref(epoch), ctypes.byref(size), ctypes.byref(epoch), 8)  # refresh the statistics
        return value.value / 2**20 if ctl(b"stats.resident", ctypes.byref(value), ctypes.byref(size), None, 0) == 0 else -1.0

    return resident


async def play_oracle(env: Any, tasks: list[Any], concurrency: int, mode: str = "text") -> tuple[list[EpisodeRecord], float]:
    """The mock oracle on every task, at most ``concurrency`` at once; the records (in task order) and the seconds."""
    from agentbench_async.testing import play  # here, not at import: throughput.py's ceiling imports this module

    limit = asyncio.Semaphore(concurrency)

    async def one(task: Any) -> EpisodeRecord:
        async with limit:
            return await play(env, task, "oracle", action_mode=mode)  # type: ignore[arg-type]

    t0 = time.perf_counter()
    records = await asyncio.gather(*(one(t) for t in tasks))
    return list(records), time.perf_counter() - t0


async def traced_growth(open_sessions: Callable[[], Awaitable[list[Any]]]) -> tuple[int, list[Any]]:
    """Bytes of Python memory that the sessions ``open_sessions`` leaves open hold (tracemalloc, after a
    collection on both sides), and those sessions, for the caller to close."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    sessions = await open_sessions()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename")), sessions


async def begin_sessions(env: Any, tasks: list[Any], n: int) -> list[Any]:
    """``n`` sessions opened and begun (tasks taken in turn): live episodes before their first reply."""
    from agentbench_async.envs.base import EpisodeContext

    sessions = []
    for i in range(n):
        session = await env.open_session(tasks[i % len(tasks)], EpisodeContext(episode_id=f"m{i}"))
        await session.begin()
        sessions.append(session)
    return sessions
