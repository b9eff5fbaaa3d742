"""The episode's cgroups when the host delegates them, what they count, and how the episode is frozen and killed.

Each episode has two sibling cgroups: the **episode's** (``<name>``: the sandbox's pid 1, the agent's shell, the
task's init scripts and everything the model starts; memory and pids limits) and its **checks'** (``<name>-checks``:
the task's example and check scripts, with a budget of their own). The warden that forks them stays in the engine's
cgroup: a child moves itself into one of the two before it execs (through descriptors the warden opened as the
engine's user, see ``_warden``), so a full pids or memory cgroup of the episode cannot keep a check from starting.

At the end of the model's turns the episode's cgroup is frozen as a group (v1 ``freezer.state``, v2
``cgroup.freeze``): every thread of it stops, zombie leaders' threads included, and nothing inside can thaw it
(the cgroup file system is not in the sandbox). Killing is by the group too: freeze, v2 ``cgroup.kill`` and SIGKILL
to every process listed, thaw.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from .limits import Limits

_CONTROLLERS = ("memory", "pids")
_warned: set[str] = set()
CHECKS_SUFFIX = "-checks"  # the checks' cgroup: the episode's name and this


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


class Group:
    """One cgroup, in every hierarchy that holds it: its folders, the memory and pids ones, and the folder of its
    freezer (``freezer.state`` of v1, or ``cgroup.freeze`` of v2), where there is one."""

    def __init__(self) -> None:
        self.dirs: list[Path] = []
        self.memory: Path | None = None
        self.pids: Path | None = None
        self.freezer: Path | None = None

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids_in(self) -> list[int]:
        """Its processes (thread-group ids), from whichever of its folders lists them."""
        for d in (self.pids, self.freezer, self.memory):
            if d is not None:
                return read_pids(d)
        return []

    def freeze(self, timeout: float = 5.0) -> bool:
        """Freeze every thread of the group; True once the kernel says it is frozen, False after ``timeout`` (a
        task that stays in an uninterruptible wait) or without a freezer."""
        return self.freezer is not None and _set_frozen(self.freezer, True, timeout)

    def thaw(self) -> None:
        if self.freezer is not None:
            _set_frozen(self.freezer, False, 0)

    def occupied(self) -> bool:
        """Whether any of its folders lists a process (a few small reads: no need to leave the event loop)."""
        return _occupied(self.dirs)

    def kill(self, timeout: float = 2.0) -> bool:
        """SIGKILL every process of the group (by the group where the kernel can) and wait until it is empty."""
        return kill_dirs(self.dirs, self.freezer, timeout)

    def remove(self) -> None:
        """Remove its folders (killing stragglers first); never raises. Retries back off (1, 2, 4, then 8 ms), and
        stragglers are killed only on the first and every fourth attempt: on v1 each read of ``cgroup.procs`` builds
        and sorts a pid list in the kernel, and reading it every millisecond cost ~3 ms of CPU an episode."""
        deadline = time.monotonic() + 2.0
        delay, attempt = 0.001, 0
        while self.dirs and not self._try_remove(kill=attempt % 4 == 0) and time.monotonic() < deadline:
            time.sleep(delay)
            delay, attempt = min(delay * 2, 0.008), attempt + 1
        self.dirs = []

    def _try_remove(self, kill: bool = True) -> bool:
        left = []
        for d in self.dirs:
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append(d)
        if left and kill:
            kill_dirs(left, self.freezer if self.freezer in left else None, 0)
        self.dirs = left
        return not left


class Cgroups(Group):
    """The episode's cgroup (the v2 unified tree or v1 hierarchies) when the host delegates the controllers, and
    :attr:`checks`, its checks' sibling.

    v2: a child of the process's own cgroup gets the memory and pids controllers only if they are enabled
    in that cgroup's ``cgroup.subtree_control`` (what ``cgroup.controllers`` at the root lists is not enough).
    When they are not, or creating/configuring the child fails, nothing is left behind and the sandbox falls
    back to rlimits (``ulimit -v`` per process for memory; the process count is then enforced by scanning
    the sandbox's pid namespace), with one warning line per run. The freezer is v1's ``freezer`` hierarchy, else
    v2's ``cgroup.freeze`` (the unified tree, at the root or at ``unified/`` beside v1's): without either the
    episode's processes are killed, not frozen, before its checks (see :func:`freezer_note`).
    """

    def __init__(self, name: str, limits: Limits, root: Path = Path("/sys/fs/cgroup"), self_cgroup: Path = Path("/proc/self/cgroup")) -> None:
        super().__init__()
        self.checks = Group()
        try:
            if (root / "cgroup.controllers").exists():
                self._v2(root, own_cgroup("", self_cgroup), name, limits)
            else:
                self._v1(root, self_cgroup, name, limits)
        except OSError as exc:
            self.remove()
            self.memory = self.pids = self.freezer = None
            self.checks = Group()
            _warn_once(f"os: cannot set up the episode cgroup ({exc}); using rlimits instead (memory per process, no cgroup pid limit)")

    def remove(self) -> None:
        super().remove()
        self.checks.remove()

    def _v2(self, root: Path, own: str, name: str, limits: Limits) -> None:
        base = root / own.lstrip("/")
        try:
            delegated = set((base / "cgroup.subtree_control").read_text().split())
        except OSError:
            delegated = set()
        missing = [c for c in _CONTROLLERS if c not in delegated]
        if missing:
            _warn_once(
                f"os: cgroup v2 controller(s) {', '.join(missing)} not delegated to {base} (its cgroup.subtree_control: "
                f"{' '.join(sorted(delegated)) or 'empty'}); using rlimits instead (memory per process, pid count by scanning)"
            )
            return
        for group, path, memory, pids in (
            (self, base / name, memory_budget(limits), limits.pids + _OWN_PROCESSES),
            (self.checks, base / (name + CHECKS_SUFFIX), check_memory_budget(limits), limits.pids),
        ):
            path.mkdir()
            group.dirs.append(path)
            _write(path / "memory.max", str(memory))
            with contextlib.suppress(OSError):  # absent without swap accounting
                _write(path / "memory.swap.max", "0")
            _write(path / "pids.max", str(pids))
            group.memory = group.pids = path
            if (path / "cgroup.freeze").exists():
                group.freezer = path

    def _v1(self, root: Path, self_cgroup: Path, name: str, limits: Limits) -> None:
        for ctrl in (*_CONTROLLERS, "freezer"):
            hier = root / ctrl
            if not hier.is_dir():
                continue
            for group, path in ((self, name), (self.checks, name + CHECKS_SUFFIX)):
                folder = hier / own_cgroup(ctrl, self_cgroup).lstrip("/") / path
                try:
                    folder.mkdir()
                except OSError:
                    continue
                group.dirs.append(folder)
                if ctrl == "memory":
                    budget = memory_budget(limits) if group is self else check_memory_budget(limits)
                    _write(folder / "memory.limit_in_bytes", str(budget))
                    with contextlib.suppress(OSError):
                        _write(folder / "memory.memsw.limit_in_bytes", str(budget))
                    group.memory = folder
                elif ctrl == "pids":
                    _write(folder / "pids.max", str(limits.pids + (_OWN_PROCESSES if group is self else 0)))
                    group.pids = folder
                else:
                    group.freezer = folder
        unified = root / "unified"
        if self.freezer is None and (unified / "cgroup.controllers").exists():  # hybrid, no v1 freezer: v2's
            base = unified / own_cgroup("", self_cgroup).lstrip("/")
            for group, path in ((self, base / name), (self.checks, base / (name + CHECKS_SUFFIX))):
                with contextlib.suppress(OSError):
                    path.mkdir()
                    group.dirs.append(path)
                    group.freezer = path
        if self.memory is None or self.pids is None:
            _warn_once("os: cgroup v1 memory/pids hierarchies are not writable here; using rlimits for what is missing")


_OWN_PROCESSES = 2  # bubblewrap's monitor and the keeper (the warden stays in the engine's cgroup)


def memory_budget(limits: Limits) -> int:
    """memory.max in bytes: the processes' limit plus the episode's in-memory files (its disk and /dev/shm
    are tmpfs, charged to the same cgroup): a full disk is ENOSPC, never an out-of-memory kill."""
    return limits.sandbox_mb << 20


def check_memory_budget(limits: Limits) -> int:
    """The checks' cgroup's memory.max: a check's processes get what the model's had (``memory_mb``)."""
    return limits.memory_mb << 20


def _set_frozen(folder: Path, frozen: bool, timeout: float) -> bool:
    """Write the freezer of ``folder`` (v1 ``freezer.state`` or v2 ``cgroup.freeze``); with ``timeout``, wait until
    the kernel reports the state reached. Never raises: False if it could not be written or was not reached."""
    v1 = folder / "freezer.state"
    try:
        if v1.exists():
            _write(v1, "FROZEN" if frozen else "THAWED")
        else:
            _write(folder / "cgroup.freeze", "1" if frozen else "0")
    except OSError:
        return False
    if not frozen or timeout <= 0:
        return True
    deadline, delay = time.monotonic() + timeout, 0.0005
    while True:
        try:
            if v1.exists():
                done = v1.read_text().strip() == "FROZEN"
            else:
                done = counter(folder / "cgroup.events", "frozen") == 1
        except OSError:
            return False
        if done:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.008)


def kill_dirs(dirs: list[Path], freezer: Path | None, timeout: float) -> bool:
    """SIGKILL every process of a cgroup given by its folders: frozen first (none forks meanwhile), v2 ``cgroup.kill``
    where there is one and every listed process killed as well (on Linux 6.18 ``cgroup.kill`` passed over the live
    threads of a process whose main thread had ended), then thawed (v1: a frozen process dies only once thawed).
    With ``timeout``, waits until no folder lists a process; True if none does. Never raises."""
    if not _occupied(dirs):  # the usual case after a check: nothing left, nothing to freeze
        return True
    v2_kill = [d / "cgroup.kill" for d in dirs if (d / "cgroup.kill").exists()]
    deadline, delay = time.monotonic() + timeout, 0.0005
    while True:
        if freezer is not None:
            _set_frozen(freezer, True, min(timeout, 1.0))
        for path in v2_kill:
            with contextlib.suppress(OSError):
                _write(path, "1")
        for pid in {p for d in dirs for p in read_pids(d)}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if freezer is not None:
            _set_frozen(freezer, False, 0)
        if not _occupied(dirs):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.008)


def own_cgroup(controller: str, self_cgroup: Path = Path("/proc/self/cgroup")) -> str:
    for line in self_cgroup.read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if (controller == "" and ctrls == "") or controller in ctrls.split(","):
            return path
    return "/"


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _occupied(dirs: list[Path]) -> bool:
    """Whether any of a cgroup's folders lists a process (a few small reads)."""
    return any(read_pids(d) for d in dirs)


def read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, val = line.partition(" ")
            if name == key:
                return int(val)
    except (OSError, ValueError):
        return 0
    return 0
