"""Facts about other processes on this machine, and the priority of the ones the engine starts."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user counts: it exists)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# How much lower than the engine's the CPU priority of the processes it starts to do work beside it is (alfworld's game
# workers, MariaDB, the os sandboxes): when the cores are busy the engine's event loop, which times every model call,
# runs first; on idle cores it changes nothing.
HELPER_NICENESS = 10


def lower_priority(pid: int, by: int = HELPER_NICENESS) -> None:
    """Give process ``pid`` (and what it starts later) a CPU priority ``by`` steps below this process's (nice value, at
    most 19). A process that leads its own session also gets its session's scheduling group lowered: with the kernel's
    autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, on by default in many distributions) every
    session shares the CPU as one unit whatever its processes' nice values. A process that has already ended, or a
    system that refuses (an ordinary user cannot change another user's process), keeps the priority it has."""
    nice = min(os.getpriority(os.PRIO_PROCESS, 0) + by, 19)
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:
        pass
    try:
        if os.getsid(pid) == pid != os.getsid(0):
            with open(f"/proc/{pid}/autogroup", "w", encoding="ascii") as group:
                group.write(str(nice))
    except OSError:  # no autogroup support, or not ours to change
        pass
