"""The agent's persistent interactive bash on a PTY inside the sandbox.

Each command is typed into the shell followed by a sentinel line that prints a random marker; the
output is everything before the marker (spec §6 Fix: the whole block runs and all its output is
captured, the echo is switched off, prompts are emptied, 80 columns). A command that read the terminal
may have taken the sentinel: when the shell is found back at its prompt with nothing to read, it is typed
again. A command that does not finish
within the timeout gets Ctrl-C, then its foreground process group is killed, then (if the shell itself
is stuck) the shell is replaced; a flood of output is cut at ``max_bytes`` and interrupted the same
way. Either way the command ends and the episode goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
from dataclasses import dataclass

from ...errors import EnvError
from ...processes import lower_priority
from .sandbox import Sandbox, SandboxProcess

_CSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
_OSC = re.compile(r"\x1b\][0-9]*;[^\x07\x1b]*(?:\x07|\x1b\\)")
_OTHER_ESC = re.compile(r"\x1b[()][A-Za-z0-9]|\x1b[=>]")
# a bash prompt left by a login shell the command started (e.g. ``su - jack``) before our sentinel ran
_PROMPT = re.compile(r"(?:^|(?<=\n))(?:[\w.-]+@[\w.-]+:[^\n]*?|[^\n]{0,40}?)[#$] $")
# seconds without the marker after which the shell is checked for having lost the typed-ahead sentinel
_RETYPE_AFTER = 0.5
# the terminal comes without echo and at 80 columns, 24 rows (the warden sets both, as `stty -echo cols 80 rows 24` would)
_SETUP = "PS1=''; PS2=''; unset PROMPT_COMMAND; bind 'set enable-bracketed-paste off' 2>/dev/null"


@dataclass
class ShellResult:
    output: str
    timed_out: bool = False
    truncated: bool = False
    restarted: bool = False  # the shell ended (``exit``, killed) and a new login shell serves what follows
    oom_killed: bool = False  # the memory limit killed a process (maybe the shell) during the command


class AgentShell:
    """``bash --login`` on a PTY in the sandbox; state persists between ``run`` calls."""

    def __init__(self, sandbox: Sandbox, *, max_bytes: int = 1 << 20) -> None:
        self._sandbox = sandbox
        self._max_bytes = max_bytes
        self._master: int = -1
        self._proc: SandboxProcess | None = None
        self._buf = bytearray()
        self._event = asyncio.Event()
        self._eof = False
        self._shell_pid = 0
        self._pid_events = 0

    async def start(self) -> None:
        # a terminal of the sandbox's own devpts (the warden opens it): no host device reaches the shell
        self._proc, master = await self._sandbox.spawn(["/bin/bash", "--login"], env={"TERM": "xterm"}, tty=True)
        lower_priority(self._proc.pid)  # its session: what the agent runs shares the CPU below the engine
        os.set_blocking(master, False)
        self._master = master
        self._buf.clear()
        self._eof = False
        asyncio.get_running_loop().add_reader(master, self._on_readable)
        result = await self._exchange(_SETUP, timeout=20.0)
        if result.timed_out:
            raise EnvError("os: the agent shell did not start in the sandbox")
        with contextlib.suppress(OSError):
            self._shell_pid = os.tcgetpgrp(master)  # idle: the shell leads the foreground group

    def running(self) -> bool:
        """Whether the login shell is up and its terminal open."""
        return self._proc is not None and self._master >= 0 and not self._eof and self._proc.returncode is None

    def _on_readable(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the shell and everything on the PTY exited
            data = b""
        if not data:
            self._eof = True
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._master)
        else:
            self._buf += data
        self._event.set()

    async def _write(self, text: str, deadline: float) -> bool:
        """Type ``text`` into the terminal without ever blocking the event loop; False if the shell did
        not take it all by ``deadline`` (its input queue stayed full) or the terminal is gone."""
        data = memoryview(text.encode())
        loop = asyncio.get_running_loop()
        while data:
            try:
                data = data[os.write(self._master, data) :]
                continue
            except BlockingIOError:
                pass
            except OSError:
                return False
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            writable: asyncio.Future[None] = loop.create_future()
            loop.add_writer(self._master, lambda: writable.done() or writable.set_result(None))
            try:
                await asyncio.wait_for(writable, timeout=remaining)
            except asyncio.TimeoutError:
                return False
            finally:
                loop.remove_writer(self._master)
        return True

    async def _wait_marker(self, marker: bytes, deadline: float, collected: bytearray) -> tuple[bool, bool]:
        """Move output into ``collected`` until ``marker`` shows up. Returns (found, overflowed)."""
        loop = asyncio.get_running_loop()
        while True:
            if self._buf:
                collected += self._buf
                self._buf.clear()
            if marker in collected:
                return True, False
            if len(collected) > self._max_bytes + len(marker) * 2:
                # keep the head; only look for the marker in the tail from now on
                del collected[self._max_bytes :]
                return False, True
            if self._eof:
                return False, False
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False, False
            self._event.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout=remaining)

    async def _drain_until(self, marker: bytes, deadline: float) -> bool:
        """Discard output until ``marker`` (after an interrupted command)."""
        tail = bytearray()
        while True:
            found, _ = await self._wait_marker(marker, deadline, tail)
            if found:
                self._buf = bytearray(tail[tail.index(marker) + len(marker) :])
                return True
            if self._eof or asyncio.get_running_loop().time() >= deadline:
                return False
            del tail[: max(0, len(tail) - len(marker))]

    async def _exchange(self, command: str, timeout: float) -> ShellResult:
        if self._master < 0 or self._eof:
            await self.restart()
        nonce = secrets.token_hex(8)
        marker = f"\x1f{nonce}\x1f".encode()
        sentinel = f"printf '\\037%s\\037' {nonce}; PS1=''; PS2=''\n"
        self._buf.clear()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if not await self._write(command + "\n" + sentinel, deadline):
            # the shell stopped reading (a command at the head of a long block still runs): what was typed
            # ahead is half a line now, so a fresh shell serves what follows
            await self.restart()
            return ShellResult(output="", timed_out=True, restarted=True)
        collected = bytearray()
        found, overflow = await self._wait_marker(marker, min(deadline, loop.time() + _RETYPE_AFTER), collected)
        while not (found or overflow or self._eof) and loop.time() < deadline:
            # a command that read the terminal (sudo relaying it, apt, a flush) took the typed-ahead sentinel: the
            # shell waits at its prompt with nothing to read and no marker will come; type the sentinel again
            if await self._idle_at_prompt() and not await self._write(sentinel, deadline):
                break
            found, overflow = await self._wait_marker(marker, min(deadline, loop.time() + _RETYPE_AFTER), collected)
        result = ShellResult(output="")
        if found:
            idx = collected.index(marker)
            self._buf = bytearray(collected[idx + len(marker) :])
            del collected[idx:]
        elif self._eof:
            result.restarted = True  # the shell exited (e.g. `exit`); a fresh one serves the next command
        else:
            result.timed_out = not overflow
            result.truncated = overflow
            await self._interrupt(nonce)
        result.output = _clean(bytes(collected[: self._max_bytes])).replace(sentinel, "")
        return result

    async def _idle_at_prompt(self) -> bool:
        """Whether the login shell leads the terminal and waits in its prompt's select on an empty input queue (read
        twice, 30 ms apart, from /proc/<pid>/syscall and wchan; False where they cannot be read: an ordinary
        user's engine cannot read its sandboxes' processes)."""
        for attempt in (0, 1):
            if attempt:
                await asyncio.sleep(0.03)
            try:
                if os.tcgetpgrp(self._master) != self._shell_pid:
                    return False
                with open(f"/proc/{self._shell_pid}/wchan") as f:
                    if f.read().split(".")[0] != "poll_schedule_timeout":
                        return False
                with open(f"/proc/{self._shell_pid}/syscall") as f:
                    fields = f.read().split()
            except (OSError, ValueError):
                return False
            if len(fields) < 3 or fields[1] != "0x1":  # select/poll on one descriptor: the terminal, fd 0
                return False
        return True

    async def _interrupt(self, nonce: str) -> None:
        """End the running command: Ctrl-C, then SIGKILL its process group, then a new shell."""
        marker = f"\x1f{nonce}\x1f".encode()
        sentinel = f"printf '\\037%s\\037' {nonce}; PS1=''; PS2=''\n"
        loop = asyncio.get_running_loop()
        if await self._write("\x03", loop.time() + 1.0):
            await asyncio.sleep(0.2)
            # Ctrl-C flushed the typed-ahead sentinel
            if await self._write(sentinel, loop.time() + 1.0) and await self._drain_until(marker, loop.time() + 3.0):
                return
        pgid = 0
        with contextlib.suppress(OSError):
            pgid = os.tcgetpgrp(self._master)
        if pgid > 0 and pgid != self._shell_pid:
            await self._sandbox.kill_group(pgid)
            if await self._write(sentinel, loop.time() + 1.0) and await self._drain_until(marker, loop.time() + 3.0):
                return
        await self.restart()

    async def restart(self) -> None:
        await self.close()
        await self.start()

    async def run(self, command: str, timeout: float) -> ShellResult:
        await self._stop_runaway_forks()
        ooms = self._sandbox.oom_kills()
        stopped = False

        async def watch() -> None:
            nonlocal stopped
            while True:
                await asyncio.sleep(0.25)
                stopped = await self._stop_runaway_forks() or stopped

        watcher = asyncio.create_task(watch())
        try:
            result = await self._exchange(command, timeout)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if await self._stop_runaway_forks() or stopped:
            result.output += "\n[the sandbox reached its process limit; its other processes were stopped]"
        result.oom_killed = self._sandbox.oom_kills() > ooms
        return result

    async def _stop_runaway_forks(self) -> bool:
        """After the pid limit refused a fork (a fork bomb), kill every sandbox process but the shell."""
        events = self._sandbox.pids_limit_hit()
        if events == self._pid_events:
            return False
        await asyncio.sleep(0.05)
        keep = {p for p in (self._proc.pid if self._proc else 0, self._shell_pid) if p > 0}
        await self._sandbox.kill_all_but(keep)
        self._pid_events = self._sandbox.pids_limit_hit()
        return True

    def pids(self) -> set[int]:
        """Host pids of the login shell (the process started, and the group leader it reported)."""
        return {p for p in (self._proc.pid if self._proc else 0, self._shell_pid) if p > 0}

    def close_terminal(self) -> None:
        """Close the terminal and forget the shell, leaving its processes to whoever closes the sandbox next
        (which kills every process in it)."""
        if self._master >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._master)
            with contextlib.suppress(OSError):
                os.close(self._master)
            self._master = -1
        self._proc, self._shell_pid, self._eof = None, 0, False

    async def close(self) -> None:
        """Close the terminal and kill the shell's session (the sandbox stays up)."""
        proc, shell_pid = self._proc, self._shell_pid
        self.close_terminal()
        for pgid in {shell_pid, proc.pid if proc else 0} - {0}:
            await self._sandbox.kill_group(pgid)  # the shell's session (it is its own group leader)
        if proc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), timeout=5)


def _clean(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    text = _OSC.sub("", text)
    text = _CSI.sub("", text)
    text = _OTHER_ESC.sub("", text).replace("\x07", "")
    text = text.replace("\r\n", "\n")
    text = _PROMPT.sub("", text)
    return text
