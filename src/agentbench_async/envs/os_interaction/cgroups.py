"""The episode's cgroup (memory, pids) when the host delegates those controllers, and what it counts."""

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


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


class Cgroups:
    """The episode's cgroup (the v2 unified tree or v1 hierarchies) when the host delegates the controllers.

    v2: a child of the process's own cgroup gets the memory and pids controllers only if they are enabled
    in that cgroup's ``cgroup.subtree_control`` (what ``cgroup.controllers`` at the root lists is not enough).
    When they are not, or creating/configuring the child fails, nothing is left behind and the sandbox falls
    back to rlimits (``ulimit -v`` per process for memory; the process count is then enforced by scanning
    the sandbox's pid namespace), with one warning line per run.
    """

    def __init__(self, name: str, limits: Limits, root: Path = Path("/sys/fs/cgroup"), self_cgroup: Path = Path("/proc/self/cgroup")) -> None:
        self.dirs: list[Path] = []
        self.memory: Path | None = None
        self.pids: Path | None = None
        try:
            if (root / "cgroup.controllers").exists():
                self._v2(root, own_cgroup("", self_cgroup), name, limits)
            else:
                self._v1(root, self_cgroup, name, limits)
        except OSError as exc:
            self.remove()
            self.memory = self.pids = None
            _warn_once(f"os: cannot set up the episode cgroup ({exc}); using rlimits instead (memory per process, no cgroup pid limit)")

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
        path = base / name
        path.mkdir()
        self.dirs.append(path)
        _write(path / "memory.max", str(memory_budget(limits)))
        with contextlib.suppress(OSError):  # absent without swap accounting
            _write(path / "memory.swap.max", "0")
        _write(path / "pids.max", str(limits.pids + _OWN_PROCESSES))
        self.memory = self.pids = path

    def _v1(self, root: Path, self_cgroup: Path, name: str, limits: Limits) -> None:
        for ctrl in _CONTROLLERS:
            hier = root / ctrl
            if not hier.is_dir():
                continue
            path = hier / own_cgroup(ctrl, self_cgroup).lstrip("/") / name
            try:
                path.mkdir()
            except OSError:
                continue
            self.dirs.append(path)
            if ctrl == "memory":
                _write(path / "memory.limit_in_bytes", str(memory_budget(limits)))
                with contextlib.suppress(OSError):
                    _write(path / "memory.memsw.limit_in_bytes", str(memory_budget(limits)))
                self.memory = path
            else:
                _write(path / "pids.max", str(limits.pids + _OWN_PROCESSES))
                self.pids = path
        if self.memory is None or self.pids is None:
            _warn_once("os: cgroup v1 memory/pids hierarchies are not writable here; using rlimits for what is missing")

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids_in(self) -> list[int]:
        return read_pids(self.pids) if self.pids is not None else []

    def remove(self) -> None:
        """Remove the episode's cgroup directories (killing stragglers first); never raises.

        Called once the sandbox's pid 1 is dead: the kernel is ending every process inside, and a directory goes
        once they have left. Retries back off (1, 2, 4, then 8 ms), and ``cgroup.procs`` is read to kill stragglers
        only on the first and every fourth attempt: on v1 each read builds and sorts a pid list in the kernel, and
        reading it every millisecond cost ~3 ms of CPU an episode."""
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
                for pid in read_pids(d) if kill else ():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        self.dirs = left
        return not left


_OWN_PROCESSES = 3  # the warden, bubblewrap's monitor and the keeper
_WARDEN_MB = 32  # the warden's own memory, in the episode's cgroup (it is never the one killed: oom_score_adj)


def memory_budget(limits: Limits) -> int:
    """memory.max in bytes: the processes' limit plus the episode's in-memory files (its disk and /dev/shm
    are tmpfs, charged to the same cgroup): a full disk is ENOSPC, never an out-of-memory kill."""
    return (limits.memory_mb + limits.disk_mb + limits.shm_mb + _WARDEN_MB) << 20


def own_cgroup(controller: str, self_cgroup: Path = Path("/proc/self/cgroup")) -> str:
    for line in self_cgroup.read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if (controller == "" and ctrls == "") or controller in ctrls.split(","):
            return path
    return "/"


def _write(path: Path, value: str) -> None:
    path.write_text(value)


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
