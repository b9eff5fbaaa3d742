"""Running games off the event loop: a pool of worker processes, each hosting many live games.

TextWorld is pure-Python CPU work (parsing the PDDL domain and grammar at load, deriving text at every
step) plus a C planner library, and its parsers keep module-level state, so games run in separate
processes (``worker.py``) rather than threads: loads run in parallel on several cores, and a crash in
the C library ends one worker's games as ``env_error`` instead of the whole run. The pool talks to each
worker over its stdin/stdout with JSON lines (fully asynchronous: no thread per call); a game stays on
the worker that opened it, and new games go to the worker with the fewest live games. A worker that
died is replaced for the next game.

Start-up: a worker's imports (TextWorld parses its knowledge base, imports networkx and prompt_toolkit) cost ~0.55 s
of CPU. The pool's first worker forks the others once its imports and patches are done (the engine hands it their
pipes), so a pool pays for them once; a worker replaced later starts on its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import EnvError, EnvUnavailableError, lower_priority, pid_alive
from .worker import FORK_FDS_VARIABLE, KEPT_FOLDER_VARIABLE

_START_TIMEOUT = 120.0  # importing textworld on a loaded 2-core machine
_CALL_TIMEOUT = 300.0  # one load or step; a healthy one takes well under a second
_STDERR_LINES = 20
_LINE_LIMIT = 64 * 1024 * 1024  # an answer line (observations and command lists are small)
_FORKED_WAIT = 30.0  # the longest wait for a forked worker's end


@dataclass(frozen=True)
class GameState:
    """What the engine says after a reset or a step."""

    feedback: str
    admissible: list[str]
    won: bool
    done: bool = False


def kept_folder() -> Path:
    """Where the workers keep loaded games' work for later loads (``worker._Kept``): the user's cache folder."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentbench-async" / "alfworld"


class _Forked:
    """A worker process forked by another worker (not this process's child): its pipes, its pid once it said it, and
    what ``asyncio.subprocess.Process`` offers that ``_Worker`` uses."""

    def __init__(self, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader) -> None:
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.pid = 0
        self.returncode: int | None = None

    async def wait(self) -> int:
        """Its end: its answers' pipe at its end, then the process gone or a zombie (its parent reaps it); at most
        ``_FORKED_WAIT`` seconds (a process that never started: its pipes close with the worker that would fork it)."""
        deadline = asyncio.get_running_loop().time() + _FORKED_WAIT
        while asyncio.get_running_loop().time() < deadline and (not self.stdout.at_eof() or _running(self.pid)):
            await asyncio.sleep(0.02)
        self.returncode = -1  # not known here
        return self.returncode

    def kill(self) -> None:
        if self.pid:
            os.kill(self.pid, 9)


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has)."""
    if not pid or not pid_alive(pid):
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


async def _pipes_for_fork(limit: int) -> tuple[tuple[int, int, int], _Forked]:
    """Pipes for a worker another worker forks: the child's ends (stdin, answers, stderr) and the engine's side."""
    loop = asyncio.get_running_loop()
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    readers = []
    for fd in (out_r, err_r):
        reader = asyncio.StreamReader(limit=limit)
        await loop.connect_read_pipe(lambda reader=reader: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0))  # type: ignore[misc]
        readers.append(reader)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(stdin_w, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return (stdin_r, out_w, err_w), _Forked(writer, readers[0], readers[1])


class _Worker:
    def __init__(self, index: int, kept: Path | None = None) -> None:
        self.index = index
        self._kept = kept
        self.proc: asyncio.subprocess.Process | _Forked | None = None
        self.live = 0
        self.dead: str | None = None  # why it stopped, once it has
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._tasks: list[asyncio.Task[None]] = []
        self._write_lock = asyncio.Lock()

    async def launch(self, forked: list[_Worker]) -> None:
        """Start this worker's process, which forks one for each of ``forked`` once its imports are done."""
        environ = {k: v for k, v in os.environ.items() if k not in (KEPT_FOLDER_VARIABLE, FORK_FDS_VARIABLE)}
        if self._kept is not None:
            environ[KEPT_FOLDER_VARIABLE] = str(self._kept)
        child_fds: list[tuple[int, int, int]] = []
        try:
            for worker in forked:
                fds, worker.proc = await _pipes_for_fork(_LINE_LIMIT)
                child_fds.append(fds)
            if child_fds:
                environ[FORK_FDS_VARIABLE] = ";".join(",".join(map(str, fds)) for fds in child_fds)
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentbench_async.envs.alfworld.worker",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                limit=_LINE_LIMIT, env=environ, pass_fds=[fd for fds in child_fds for fd in fds],
            )  # fmt: skip
        finally:
            for fd in (fd for fds in child_fds for fd in fds):
                os.close(fd)  # the children's ends live in the process that forks them
        lower_priority(self.proc.pid)  # before its imports: a game's CPU never delays the engine's model calls (forks inherit it)

    async def start(self) -> None:
        """Wait until the process ``launch`` started (this worker's or the one that forks it) says it is ready."""
        if self.proc is None:
            await self.launch([])
        assert self.proc is not None
        ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[0] = ready
        self._tasks = [asyncio.create_task(self._read_answers()), asyncio.create_task(self._read_stderr())]
        try:
            answer = await asyncio.wait_for(ready, _START_TIMEOUT)
        except (asyncio.TimeoutError, EnvError) as exc:
            await self.stop()
            raise EnvUnavailableError(f"alfworld: the game worker did not start ({exc}){self._stderr_tail()}") from None
        if not answer.get("ok"):
            await self.stop()
            raise EnvUnavailableError(
                f"alfworld: the game engine cannot be loaded ({answer.get('error')}); "
                "install it with: pip install 'agentbench-async[alfworld]'"
            )
        if isinstance(self.proc, _Forked):
            self.proc.pid = int((answer.get("result") or {}).get("pid") or 0)

    def _stderr_tail(self) -> str:
        lines = [line for line in self._stderr if line.strip()]
        return f"; worker stderr: {' | '.join(lines[-3:])[:500]}" if lines else ""

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def _read_answers(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while line := await self.proc.stdout.readline():
                answer = json.loads(line)
                future = self._pending.pop(answer.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(answer)
        except (ValueError, asyncio.LimitOverrunError) as exc:
            self.dead = f"unreadable answer from the game worker: {exc}"
        finally:
            code = await self.proc.wait() if self.proc.returncode is None and self.dead is None else self.proc.returncode
            if self.dead is None:
                self.dead = f"the game worker exited (code {code})"
            error = EnvError(f"alfworld: {self.dead}{self._stderr_tail()}")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.dead is not None or self.proc is None or self.proc.stdin is None:
            raise EnvError(f"alfworld: {self.dead or 'the game worker is not running'}")
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        data = json.dumps({"id": request_id, "op": op, **fields}).encode("utf-8") + b"\n"
        try:
            async with self._write_lock:
                self.proc.stdin.write(data)
                await self.proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._pending.pop(request_id, None)
            raise EnvError(f"alfworld: cannot reach the game worker: {exc}") from None
        try:
            answer = await asyncio.wait_for(future, _CALL_TIMEOUT)
        except asyncio.TimeoutError:
            self._pending.pop(request_id, None)
            await self.stop()
            raise EnvError(f"alfworld: the game engine did not answer {op!r} within {_CALL_TIMEOUT:.0f} s") from None
        if not answer.get("ok"):
            raise EnvError(f"alfworld: game engine error in {op}: {answer.get('error')}")
        result: dict[str, Any] = answer.get("result") or {}
        return result

    async def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if self.dead is None:
            self.dead = "the game worker was stopped"
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5)


class Game:
    """One live game on one worker."""

    def __init__(self, pool: GamePool, worker: _Worker, game_id: int) -> None:
        self._pool = pool
        self._worker = worker
        self._id = game_id
        self._open = True

    async def step(self, command: str) -> GameState:
        result = await self._worker.call("step", game=self._id, command=command)
        return GameState(str(result["feedback"]), list(result["admissible"]), bool(result["won"]), bool(result["done"]))

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        self._worker.live -= 1
        if self._worker.dead is None:
            with contextlib.suppress(EnvError):
                await self._worker.call("close", game=self._id)


class GamePool:
    """Worker processes hosting games; ``open`` loads and resets one game. ``kept``: the folder where the workers keep
    loaded games' work for later loads (None: each worker keeps it in memory only)."""

    def __init__(self, workers: int, kept: Path | None = None) -> None:
        self._size = workers
        self._kept = kept
        self._workers: list[_Worker] = []
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._spawned = 0

    @property
    def worker_pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.proc is not None and w.dead is None]

    async def start(self) -> None:
        async with self._lock:
            self._workers = [w for w in self._workers if w.dead is None]
            missing = self._size - len(self._workers)
            fresh = [_Worker(self._spawned + i, self._kept) for i in range(missing)]
            self._spawned += missing
            if fresh:  # the first one's process forks the others' after its imports
                try:
                    await fresh[0].launch(fresh[1:])
                except OSError as exc:
                    raise EnvUnavailableError(f"alfworld: the game worker did not start ({exc})") from None
            results = await asyncio.gather(*(w.start() for w in fresh), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            self._workers += [w for w, r in zip(fresh, results) if not isinstance(r, BaseException)]
            if errors and not self._workers:
                raise errors[0]

    async def open(self, path: str) -> tuple[Game, GameState]:
        if not self._workers or any(w.dead is not None for w in self._workers):
            try:
                await self.start()
            except EnvUnavailableError as exc:
                raise EnvError(str(exc)) from None
        worker = min((w for w in self._workers if w.dead is None), key=lambda w: w.live)
        game_id = next(self._ids)
        worker.live += 1
        game = Game(self, worker, game_id)
        try:
            result = await worker.call("open", game=game_id, path=path)
        except BaseException:
            worker.live -= 1
            game._open = False
            raise
        return game, GameState(str(result["feedback"]), list(result["admissible"]), bool(result["won"]))

    async def stats(self) -> list[dict[str, Any]]:
        """Per live worker: pid, RSS bytes, live games, planner libraries loaded, games opened."""
        out = []
        for worker in self._workers:
            if worker.dead is None and worker.proc is not None:
                out.append({"pid": worker.proc.pid, **await worker.call("stats")})
        return out

    async def close(self) -> None:
        workers, self._workers = self._workers, []
        await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
