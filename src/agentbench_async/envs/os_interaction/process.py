"""Host processes of the os environment (sandbox, agent shell, scripts), started off the event loop.

``fork``/``vfork`` + ``exec`` of a child blocks the calling thread until the child has exec'd; on a
busy machine that is milliseconds per process, and an os episode starts several. ``spawn`` runs
``subprocess.Popen`` on a small thread pool and ``Child.wait`` waits on a pidfd registered with the
event loop, so neither starting nor reaping a process (no per-child watcher thread) holds up the loop.
Every child gets its own session (``start_new_session``), so ``kill_process_group`` reaches all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="agentbench-os-spawn")


class Child:
    """A started host process: its pid and an awaitable exit status."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        """The exit status (negative: killed by that signal), once the process has ended; reaps it."""
        code = self._popen.poll()
        if code is not None:
            return code
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            return self._popen.wait()
        done: asyncio.Future[int] = loop.create_future()

        def exited() -> None:
            code = self._popen.poll()
            if code is not None and not done.done():
                done.set_result(code)

        loop.add_reader(fd, exited)
        try:
            exited()  # it may have ended before the reader was registered
            return await done
        finally:
            loop.remove_reader(fd)
            os.close(fd)


async def spawn(argv: list[str], **popen_kwargs: Any) -> Child:
    """Start ``argv`` in its own session on the spawn pool; a cancelled caller never leaks the child."""
    popen_kwargs["start_new_session"] = True
    loop = asyncio.get_running_loop()
    started: asyncio.Future[subprocess.Popen[bytes]] = loop.run_in_executor(
        _POOL, functools.partial(subprocess.Popen, argv, **popen_kwargs)
    )
    try:
        popen = await asyncio.shield(started)
    except asyncio.CancelledError:
        started.add_done_callback(_kill_orphan)
        raise
    return Child(popen)


def _kill_orphan(started: Future[subprocess.Popen[bytes]] | asyncio.Future[subprocess.Popen[bytes]]) -> None:
    if started.cancelled() or started.exception() is not None:
        return
    popen = started.result()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGKILL)
    _POOL.submit(popen.wait)


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run a short blocking call (cgroup mkdir/rmdir, ...) on the spawn pool."""
    return await asyncio.get_running_loop().run_in_executor(_POOL, functools.partial(fn, *args))


class Process(Protocol):
    """A host process: a child we started (:class:`Child`) or one the warden zygote forked."""

    pid: int

    async def wait(self) -> int: ...


async def kill_process_group(proc: Process, *, timeout: float) -> None:
    """SIGKILL a process and everything in its session's process group, then wait for it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(proc.wait(), timeout=timeout)
