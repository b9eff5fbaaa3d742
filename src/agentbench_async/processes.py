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


# How much lower than the engine's the CPU priority of its CPU-bound helper processes is (alfworld's game workers): when
# the cores are busy the engine's event loop, which times every model call, runs first; on idle cores it changes nothing.
HELPER_NICENESS = 10


def lower_priority(pid: int, by: int = HELPER_NICENESS) -> None:
    """Give process ``pid`` a CPU priority ``by`` steps below this process's (nice value, at most 19); a process that
    has already ended, or a system that refuses, keeps the priority it has."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(os.getpriority(os.PRIO_PROCESS, 0) + by, 19))
    except OSError:
        pass
