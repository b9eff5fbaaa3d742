"""Per-episode resource limits of the os sandbox.

Where AgentBench's tasks relied on Docker's defaults, the limit is Docker's: open files
(``RLIMIT_NOFILE``) 1,048,576 soft and hard, as a container got it from dockerd/containerd (their
``LimitNOFILE=infinity`` = the kernel's ``nr_open``) when AgentBench ran; std-004-Q09's init writes to
file descriptor 123321. What many open files cost in memory (file structures, descriptor tables) is
charged to the episode's memory cgroup, so the episode's ``memory_mb`` still bounds it. Raising the hard
limit needs ``CAP_SYS_RESOURCE`` on the host: without it the sandbox gets the engine's hard limit and
:func:`nofile_shortfall` says so in one line.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

DOCKER_NOFILE = 1_048_576  # RLIMIT_NOFILE (soft = hard) of a Docker container by default, as AgentBench ran
NOFILE_TASK = 123_321  # the file descriptor std-004-Q09-00000's init writes to (`echo 123321>file`)
_CAP_SYS_RESOURCE = 24


@dataclass(frozen=True)
class Limits:
    """Per-episode resource limits."""

    memory_mb: int = 512  # processes; the episode's files in memory (disk, /dev/shm) are counted on top
    pids: int = 256
    disk_mb: int = 512  # the writable layer (tmpfs): full means ENOSPC
    cpu_seconds: int = 600  # RLIMIT_CPU of every sandbox process
    nofile: int = DOCKER_NOFILE  # std-004-Q09 needs more than 123321
    shm_mb: int = 64  # /dev/shm (Docker's default size)

    @property
    def sandbox_mb(self) -> int:
        """What one live sandbox may hold of the host's memory: its processes' limit and its in-memory files (the
        disk and /dev/shm are tmpfs, which no out-of-memory kill frees while the sandbox lives)."""
        return self.memory_mb + self.disk_mb + self.shm_mb


def _can_raise_hard_limits(status: Path = Path("/proc/self/status")) -> bool:
    """Whether this process holds CAP_SYS_RESOURCE (needed to raise a hard rlimit)."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> _CAP_SYS_RESOURCE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def reachable_nofile(wanted: int, *, status: Path = Path("/proc/self/status")) -> int:
    """The open-files limit the sandbox gets for ``wanted``: all of it where the hard limit allows or may
    be raised, else the engine's hard limit (what ``_raise_nofile`` in the warden does)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard >= wanted or _can_raise_hard_limits(status):
        return wanted
    return hard


def nofile_shortfall(wanted: int = DOCKER_NOFILE, *, status: Path = Path("/proc/self/status")) -> str | None:
    """One line when the sandbox cannot get ``wanted`` open files (Docker's default) on this machine."""
    got = reachable_nofile(wanted, status=status)
    if got >= wanted:
        return None
    task = f"; std-004-Q09 (writes file descriptor {NOFILE_TASK}) cannot pass here" if got <= NOFILE_TASK else ""
    return (
        f"os: sandboxes get {got:,} open files, not Docker's {wanted:,} (this process's hard limit, which only "
        f"CAP_SYS_RESOURCE may raise){task}: raise it where the engine starts (ulimit -Hn {wanted}, systemd "
        f"LimitNOFILE={wanted}, docker run --ulimit nofile={wanted}:{wanted})"
    )


_warned_nofile: set[int] = set()


def warn_nofile_shortfall(wanted: int = DOCKER_NOFILE) -> None:
    """:func:`nofile_shortfall`'s line on stderr, once per process (as the cgroup fallback's warning)."""
    note = nofile_shortfall(wanted)
    if note is not None and wanted not in _warned_nofile:
        _warned_nofile.add(wanted)
        print(f"warning: {note}", file=sys.stderr, flush=True)


# the share of the host's memory the live sandboxes may hold together (the engine, its writer and the other
# environments' servers keep the rest)
HOST_MEMORY_SHARE = 0.75


def host_memory_mb(meminfo: Path = Path("/proc/meminfo"), self_cgroup: Path = Path("/proc/self/cgroup"),
                   cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:  # fmt: skip
    """The memory this process's sandboxes live in: the host's (``MemTotal``), or less where the engine's own memory
    cgroup (v1 ``memory.limit_in_bytes`` or v2 ``memory.max``) is limited to less."""
    total = 1 << 62
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) << 10
    with contextlib.suppress(OSError, ValueError):
        for line in self_cgroup.read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for folder, name in ((cgroup_root / "memory" / path.lstrip("/"), "memory.limit_in_bytes"),
                                 (cgroup_root / path.lstrip("/"), "memory.max")):  # fmt: skip
                if ("memory" in ctrls.split(",") or ctrls == "") and (folder / name).is_file():
                    text = (folder / name).read_text().strip()
                    if text.isdigit():
                        total = min(total, int(text))
    return total >> 20


def sandboxes_within_host(limits: Limits, wanted: int, ahead: int = 0, host_mb: int | None = None) -> tuple[int, str | None]:
    """How many sandboxes may live at once (of ``wanted``, beside ``ahead`` made in advance) so that together they
    hold at most :data:`HOST_MEMORY_SHARE` of the host's memory, and one line saying so when that is fewer."""
    host = host_memory_mb() if host_mb is None else host_mb
    fits = int(host * HOST_MEMORY_SHARE) // max(1, limits.sandbox_mb) - ahead
    if fits >= wanted:
        return wanted, None
    allowed = max(1, fits)
    return allowed, (
        f"os: {allowed} sandboxes at once, not {wanted}: each may hold {limits.sandbox_mb:,} MiB (memory_mb + disk_mb + "
        f"shm_mb), and together they are kept under {HOST_MEMORY_SHARE:.0%} of this host's {host:,} MiB; lower "
        f"os.memory_mb or os.disk_mb to run more at once"
    )
