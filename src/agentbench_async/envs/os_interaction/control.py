"""The engine's side of an episode's warden (:mod:`._warden`): its process, started ahead, and the socket
the two talk over (dicts as ``marshal`` packets, file descriptors alongside, on the event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import marshal
import socket
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path
from typing import Any

from ...errors import EnvError
from .process import Child, spawn

WARDEN = Path(__file__).with_name("_warden.py")
WARDEN_PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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
        for kind in ("spawned", "exited", "killed", "tampered", "ready", "error", "sandbox_exited"):
            if kind in msg:
                key = (kind, msg.get("id") if kind in ("killed", "tampered") else (msg[kind] if kind in ("spawned", "exited") else None))
                waiter = self._waiters.pop(key, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result((msg, fds))
                else:
                    self._early[key] = (msg, fds)
                if kind in ("error", "sandbox_exited"):
                    self._finish(msg.get("error") or "the sandbox's pid 1 exited")
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
        self.ready: list[tuple[Child, socket.socket, Any]] = []
        self.pending = 0


_ahead: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ahead] = weakref.WeakKeyDictionary()
_starting: set[asyncio.Task[tuple[Child, socket.socket, Any]]] = set()


async def _spawn_warden() -> tuple[Child, socket.socket, Any]:
    """A warden process, started and waiting for its sandbox's config (Python's start-up done)."""
    stderr = tempfile.TemporaryFile()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        child = await spawn(
            [sys.executable, "-I", "-S", str(WARDEN), str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            pass_fds=(theirs.fileno(),), env={"PATH": WARDEN_PATH_ENV, "LC_ALL": "C.UTF-8"},
        )  # fmt: skip
    except BaseException:
        ours.close()
        stderr.close()
        raise
    finally:
        theirs.close()
    return child, ours, stderr


async def take_warden() -> tuple[Child, socket.socket, Any]:
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


def _arrived(ahead: _Ahead, task: asyncio.Task[tuple[Child, socket.socket, Any]]) -> None:
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
