"""The result files a viewer shows, read in worker threads (never on the event loop).

Every request opens the files through ``analytics.load`` (read-only, a few tens of milliseconds even for a
100,000-episode file: only views are created) and closes them when its page is built: a long-lived reader
would hold DuckDB's shared lock and keep ``agentbench run`` from resuming a finished file, and a short-lived
one sees what a running evaluation has committed since the last request. The slow analytics (bootstrap
intervals, the failure-class pivot, a comparison) are memoised per *data version* — the files and their
episode count and last finish time — so a page reuses them until an episode is added or replaced.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..analytics.loading import Results, load

T = TypeVar("T")
_MEMO_SIZE = 64


class _Memo:
    """Results of slow computations by key; concurrent callers of the same key wait for one computation."""

    def __init__(self, size: int = _MEMO_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Future[Any]] = OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            fut = self._entries.get(key)
            mine = fut is None
            if fut is None:
                fut = Future()
                self._entries[key] = fut
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
        if mine:
            try:
                fut.set_result(compute())
            except BaseException as exc:
                with self._lock:
                    self._entries.pop(key, None)
                fut.set_exception(exc)
        return fut.result()  # type: ignore[no-any-return]

    def ready(self, key: tuple[Hashable, ...], compute: Callable[[], T], pool: ThreadPoolExecutor) -> T | None:
        """The value of ``key`` if it is computed; else None, and its computation is started in ``pool`` unless
        one of the same name (``key[0]``, e.g. for an older data version of a running file) is still going: at
        most one runs per name, so a file that changes every second never queues up computations."""
        with self._lock:
            fut = self._entries.get(key)
            if fut is None:
                busy = any(k[0] == key[0] and not f.done() for k, f in self._entries.items() if isinstance(k, tuple))
                if not busy:
                    pool.submit(self.get, key, compute)
                return None
        if fut.done() and fut.exception() is None:
            return fut.result()  # type: ignore[no-any-return]
        return None


def data_version(res: Results) -> tuple[Any, ...]:
    """What the memoised analytics depend on: the files, their runs, episode count and last finish time."""
    row = res.sql("SELECT (SELECT count(*) FROM runs) AS runs, count(*) AS episodes, max(finished_at) AS last FROM episodes").row(0)
    return (tuple(str(p) for p in res.paths), *row)


_HELPER: ProcessPoolExecutor | None = None
_HELPER_LOCK = threading.Lock()


def _helper() -> ProcessPoolExecutor:
    """The one helper process of this program (spawned, not forked: the server has threads); it exits by
    itself when this process is gone, however it ended."""
    global _HELPER
    with _HELPER_LOCK:
        if _HELPER is None:
            _HELPER = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_follow_parent,
                                          initargs=(os.getpid(),))
        return _HELPER


def _follow_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="agentbench-view-parent", daemon=True).start()


def _compute(compute: Callable[[Results], T], paths: list[Path], pool: bool = False) -> T:
    with load(paths, pool=pool) as res:
        return compute(res)


class Source:
    """The files given to ``agentbench view``; ``await source.run(fn)`` calls ``fn(results)`` in a worker."""

    def __init__(self, paths: Sequence[Path], workers: int = 4, *, pool: bool = False) -> None:
        self.paths = [Path(p) for p in paths]
        self.pooled = pool  # configurations of a model x env merged into one row (``agentbench view --pool``)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="agentbench-view")
        self._memo = _Memo()

    def check(self) -> None:
        """Open the files once, so a wrong path or a file that is not a result file fails at start."""
        with load(self.paths, pool=self.pooled):
            pass

    async def run(self, fn: Callable[[Results], T], paths: Sequence[Path] | None = None) -> T:
        """``fn(results)`` in a worker thread, with the files (or ``paths``) opened for this call only."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._call, fn, list(paths or self.paths))

    def _call(self, fn: Callable[[Results], T], paths: list[Path]) -> T:
        with load(paths, pool=self.pooled) as res:
            return fn(res)

    def memo(self, res: Results, name: str, compute: Callable[[Results], T], *args: Hashable) -> T:
        """``compute(res)``, computed once per data version of ``res`` (call it from inside ``run``)."""
        return self._memo.get((name, args, data_version(res)), lambda: compute(res))

    def memo_ready(self, res: Results, name: str, compute: Callable[[Results], T]) -> T | None:
        """``compute``'s memoised value for the data version of ``res`` if it is ready; otherwise None, and it is
        computed in the background (for analytics that take seconds, e.g. bootstrap intervals: the page says
        they are coming instead of waiting). It runs in a helper process that opens the files itself, so its
        pure-Python work does not hold this process's GIL while pages are served; ``compute`` must be a
        module-level function (it is pickled by name)."""
        paths = list(res.paths)
        return self._memo.ready((name, (), data_version(res)),
                                lambda: _helper().submit(_compute, compute, paths, self.pooled).result(), self._pool)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
