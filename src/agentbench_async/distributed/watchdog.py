"""A watchdog for a call that can hang where Python cannot interrupt it.

``ray.init`` hangs for good when Ray's worker processes die as they come up (seen with ``mmap failed`` on a machine
short of memory): the driver waits inside Ray's C++ code holding the GIL, so no timeout, thread or signal handler of
this process ever runs again. A separate small process watches instead: if the block has not ended after ``seconds``,
it prints the one line saying why and ends the driver (SIGKILL: the only signal that needs nothing of the stuck
process; the Ray processes it started go with it). It does nothing if the driver has already gone (its parent changed),
and it is ended as soon as the block is.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

_WATCH = """
import os, signal, sys, time
seconds, line, driver = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
time.sleep(seconds)
if os.getppid() == driver:
    sys.stderr.write(line + "\\n")
    sys.stderr.flush()
    os.kill(driver, signal.SIGKILL)
"""


@contextlib.contextmanager
def watchdog(seconds: float, line: str) -> Iterator[None]:
    """The block may take ``seconds``; beyond that, ``line`` is printed on stderr and this process ends (exit 137)."""
    proc = subprocess.Popen([sys.executable, "-c", _WATCH, str(seconds), line, str(os.getpid())], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        yield
    finally:
        proc.kill()
        proc.wait()
