"""The engine's side of an episode's warden (:mod:`._warden`): the zygote that forks wardens (one Python
start-up per engine, not per episode), wardens forked ahead of need, and the socket the engine and a warden
talk over (dicts as ``marshal`` packets, file descriptors alongside, on the event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import functools
import marshal
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

from ...errors import EnvError
from ...processes import lower_priority
from .process import off_loop

WARDEN = Path(__file__).with_name("_warden.py")
WARDEN_PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PID1_EXITED = "the sandbox's pid 1 exited"  # why a channel closed when the sandbox, not its warden, ended


class WardenChannel:
    """The engine's end of the warden's socket: JSON packets, descriptors alongside, on the event loop."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        sock.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._waiters: dict[tuple[str, Any], asyncio.Future[tuple[dict[str, Any], list[int]]]] = {}
        self._early: dict[tuple[str, Any], tuple[dict[str, Any], list[int]]] = {}
        self.closed: asyncio.Future[str] = self._loop.create_future()
        self._loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self._sock, 1 << 22, 8)  # type: ignore[attr-defined]
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            data, fds = b"", []
            self._finish(f"the warden's socket failed ({exc})")
            return
        if not data:
            self._finish("the warden exited")
            return
        msg = marshal.loads(data)
        for kind in ("spawned", "exited", "killed", "ready", "map", "error", "sandbox_exited"):
            if kind in msg:
                key = (kind, msg.get("id") if kind == "killed" else (msg[kind] if kind in ("spawned", "exited") else None))
                waiter = self._waiters.pop(key, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result((msg, fds))
                else:
                    self._early[key] = (msg, fds)
                if kind in ("error", "sandbox_exited"):
                    self._finish(msg.get("error") or PID1_EXITED)
                return

    def _finish(self, why: str) -> None:
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        if not self.closed.done():
            self.closed.set_result(why)
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(EnvError(f"os: {why}"))
        self._waiters.clear()

    def expect(self, kind: str, key: Any = None) -> asyncio.Future[tuple[dict[str, Any], list[int]]]:
        fut: asyncio.Future[tuple[dict[str, Any], list[int]]] = self._loop.create_future()
        if (kind, key) in self._early:
            fut.set_result(self._early.pop((kind, key)))
        elif self.closed.done():
            fut.set_exception(EnvError(f"os: {self.closed.result()}"))
        else:
            self._waiters[(kind, key)] = fut
        return fut

    async def send(self, msg: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
        if self.closed.done():
            raise EnvError(f"os: {self.closed.result()}")
        data = marshal.dumps(msg)
        while True:
            try:
                if fds:
                    socket.send_fds(self._sock, [data], list(fds))
                else:
                    self._sock.send(data)
                return
            except BlockingIOError:
                writable: asyncio.Future[None] = self._loop.create_future()
                self._loop.add_writer(self._sock.fileno(), lambda: writable.done() or writable.set_result(None))
                try:
                    await writable
                finally:
                    self._loop.remove_writer(self._sock.fileno())
            except OSError as exc:
                self._finish(f"the warden's socket failed ({exc})")
                raise EnvError(f"os: {self.closed.result()}") from None

    def close(self) -> None:
        self._finish("the sandbox was closed")
        self._sock.close()


_WARDENS_AHEAD = 2


class _Ahead:
    """Wardens started ahead on one event loop. Those that are up wait in ``ready``, which holds no
    reference to the loop: when the loop is gone so is this, their sockets close and they exit."""

    def __init__(self) -> None:
        self.ready: list[tuple[RemoteProcess, socket.socket, Any]] = []
        self.pending = 0


_ahead: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ahead] = weakref.WeakKeyDictionary()
_starting: set[asyncio.Task[tuple[RemoteProcess, socket.socket, Any]]] = set()


class RemoteProcess:
    """A process that is not our child (a warden forked by the zygote): its pid, and its end through a pidfd."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._done = False

    @property
    def returncode(self) -> int | None:
        return -9 if self._done else None

    async def wait(self) -> int:
        """-9 once the process has ended (its exit status is its parent's to read)."""
        if self._done:
            return -9
        try:
            fd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            self._done = True
            return -9
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, lambda: ended.done() or ended.set_result(None))
        try:
            await ended
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        self._done = True
        return -9


class _Zygote:
    """One Python process per engine that forks a warden per sandbox (see ``_warden.zygote``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(WARDEN), "--zygote", str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                env={"PATH": WARDEN_PATH_ENV, "LC_ALL": "C.UTF-8"}, start_new_session=True,
            )  # fmt: skip
            # wardens, bubblewrap and every process of every sandbox inherit it (a sandbox cannot raise it: that
            # needs CAP_SYS_NICE on the host): a model's CPU never delays the engine's model calls
            lower_priority(self._proc.pid)
        finally:
            theirs.close()
        self._sock = ours

    def fork(self, warden_fd: int, stderr_fd: int) -> int:
        """A new warden's host pid (blocking: called off the event loop)."""
        with self._lock:
            for attempt in (1, 2):
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                assert self._sock is not None
                try:
                    socket.send_fds(self._sock, [marshal.dumps({"op": "fork"})], [warden_fd, stderr_fd])
                    data = self._sock.recv(4096)
                    pid = int(marshal.loads(data)["forked"]) if data else 0
                except (OSError, ValueError, EOFError, KeyError):
                    pid = 0
                if pid > 0:
                    return pid
                self._stop()
            raise EnvError("os: the warden zygote does not answer")

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None


_zygote = _Zygote()


async def _spawn_warden() -> tuple[RemoteProcess, socket.socket, Any]:
    """A warden forked by the zygote, waiting for its sandbox's config."""
    stderr = tempfile.TemporaryFile()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = await off_loop(_zygote.fork, theirs.fileno(), stderr.fileno())
    except BaseException:
        ours.close()
        stderr.close()
        raise
    finally:
        theirs.close()
    return RemoteProcess(pid), ours, stderr


async def take_warden() -> tuple[RemoteProcess, socket.socket, Any]:
    """A warden started ahead on this event loop (more are started to replace it), else a new one."""
    loop = asyncio.get_running_loop()
    ahead = _ahead.setdefault(loop, _Ahead())
    item = ahead.ready.pop(0) if ahead.ready else None
    _refill(loop, ahead)
    return item if item is not None else await _spawn_warden()


def _refill(loop: asyncio.AbstractEventLoop, ahead: _Ahead) -> None:
    while len(ahead.ready) + ahead.pending < _WARDENS_AHEAD:
        ahead.pending += 1
        task = loop.create_task(_spawn_warden())
        _starting.add(task)
        task.add_done_callback(functools.partial(_arrived, ahead))


def _arrived(ahead: _Ahead, task: asyncio.Task[tuple[RemoteProcess, socket.socket, Any]]) -> None:
    _starting.discard(task)
    ahead.pending -= 1
    if not task.cancelled() and task.exception() is None:
        ahead.ready.append(task.result())


async def close_idle_wardens() -> None:
    """End the wardens started ahead on this event loop (an environment's close)."""
    ahead = _ahead.pop(asyncio.get_running_loop(), None)
    for child, sock, stderr in ahead.ready if ahead else []:
        sock.close()  # the warden reads end of file and exits
        stderr.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(child.wait(), timeout=5)
