"""Per-episode resource limits of the os sandbox."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Per-episode resource limits."""

    memory_mb: int = 512  # processes; the episode's files in memory (disk, /dev/shm) are counted on top
    pids: int = 256
    disk_mb: int = 512  # the writable layer (tmpfs): full means ENOSPC
    cpu_seconds: int = 600  # RLIMIT_CPU of every sandbox process
    nofile: int = 1_048_576  # std-004-Q09 needs more than 123321
    shm_mb: int = 64  # /dev/shm (Docker's default size)
