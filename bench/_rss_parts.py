"""Where this process's resident memory is, finer than RSS and the allocators' own totals (bench/million.py).

Cheap, every sample: anonymous, file-backed and shared resident memory and the threads (``/proc/self/status``), glibc's
malloc split into what is in use and what it keeps free (``mallinfo2``). Dear, every ``detail`` sample: Python's
pymalloc arenas (``sys._debugmallocstats``: it walks every arena holding the GIL) and what Arrow's allocator has
resident (its mimalloc arena's mapping in ``/proc/self/smaps``); pymalloc's statistics go to C's stderr, so they are
captured through a dup'ed file descriptor into a temporary file. Anonymous memory is DuckDB's allocator + glibc's
malloc + pymalloc's arenas + Arrow's arena + thread stacks and the rest; file-backed memory is the code and data of
Python and the libraries as they are first run (paged in once, not growth)."""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Callable

_MB = 2**20
_STATUS = ("RssAnon", "RssFile", "RssShmem", "Threads")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def status() -> dict[str, float]:
    """RssAnon, RssFile, RssShmem (MB) and Threads from ``/proc/self/status``."""
    out: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in _STATUS:
                n = int(value.split()[0])
                out[key] = n if key == "Threads" else n / 1024  # the others in kB
    return out


def malloc_split() -> Callable[[], tuple[float, float]]:
    """A function returning glibc's malloc as (MB in use: ``uordblks + hblkhd``, MB free but kept: ``fordblks``); their
    sum is what it has taken from the system (``arena + hblkhd``)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2

    def sample() -> tuple[float, float]:
        info = libc.mallinfo2()
        return (info.uordblks + info.hblkhd) / _MB, info.fordblks / _MB

    return sample


# once: a CDLL made at each call is a class of its own each time, garbage only a full collection frees (the engine's GC
# thresholds make those rare): ~1 MB a hundred seconds of samples, counted in the run's own memory
_LIBC = ctypes.CDLL(None)


def _c_stderr(write: Callable[[], None]) -> str:
    """What ``write`` writes to C's stderr (file descriptor 2), captured through a dup'ed descriptor."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), 2)
            write()
            _LIBC.fflush(None)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")


def _number(text: str, key: str) -> int:
    m = re.search(rf"^# {re.escape(key)}\s*=\s*([\d,]+)", text, re.M)
    return int(m.group(1).replace(",", "")) if m else -1


def pymalloc() -> tuple[float, float, float]:
    """Python's small-object allocator: (MB of arenas allocated now, MB in allocated blocks, MB in available blocks of
    pools in use). Arenas are 1 MiB (3.11) and go back to the system only when every block in them is free."""
    text = _c_stderr(sys._debugmallocstats)
    arena_size = re.search(r"arenas \* ([\d,]+) bytes/arena", text)
    size = int(arena_size.group(1).replace(",", "")) if arena_size else 2**20
    return (_number(text, "arenas allocated current") * size / _MB, _number(text, "bytes in allocated blocks") / _MB,
            _number(text, "bytes in available blocks") / _MB)  # fmt: skip


def arrow_resident() -> Callable[[], float]:
    """A function returning the MB Arrow's default pool holds resident. jemalloc (the program's pool): its own statistics
    (``resident`` of the totals line ``MemoryPool.print_stats`` writes to C's stderr: allocated, kept dirty or lazily
    freed, and its metadata; ~0.5 ms). mimalloc reserves a 1 GiB arena and touches what it uses: its resident pages
    are what it holds, allocated or kept for reuse, and what it gives back, ``release_unused``, leaves it; found from a
    64-byte buffer kept for the purpose, read from ``/proc/self/smaps``. -1 for another pool or when not found."""
    import pyarrow as pa

    pool = pa.default_memory_pool()
    if pool.backend_name == "jemalloc":
        def jemalloc_resident() -> float:
            m = re.search(r"^Allocated: .*?resident: (\d+)", _c_stderr(pool.print_stats), re.M)
            return int(m.group(1)) / _MB if m else -1.0

        return jemalloc_resident
    if pool.backend_name != "mimalloc":
        return lambda: -1.0
    keep = pa.allocate_buffer(64, memory_pool=pa.default_memory_pool())
    address = keep.address

    def resident(_keep: object = keep) -> float:  # (the buffer lives as long as the function)
        inside = False
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as f:
            for line in f:
                if inside and line.startswith("Rss:"):
                    return int(line.split()[1]) / 1024
                head = _VMA.match(line)
                if head:
                    inside = int(head.group(1), 16) <= address < int(head.group(2), 16)
        return -1.0

    return resident


_VMA = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) ")
