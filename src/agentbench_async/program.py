"""The ``agentbench`` program: what the process is given before the command line's modules load, then the command."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def choose_arrow_pool() -> None:
    """Make this process's Arrow allocate from jemalloc unless the user named a pool: call before pyarrow is imported.

    jemalloc gives freed pages back to the system within about a second, whichever thread freed them; Arrow's Linux
    default, mimalloc, keeps what a thread freed in that thread's heap, and a run's writer and live snapshot free from
    several threads: over a million episodes its arena climbed to 183 MB resident for ~30 MB allocated
    (docs/performance.md). Arrow reads the variable once, when pyarrow is imported. Done for the ``agentbench``
    program only, not when a script imports the engine: pyarrow on jemalloc may abort at exit in a process that used
    Arrow's own thread pool (``pq.read_table`` with threads: apache/arrow#34314), which the program never starts and a
    user's script may. Only where Arrow's wheels are known to carry jemalloc (Linux x86-64): a build without it would
    print Arrow's warning about the variable at every start."""
    if sys.platform == "linux" and os.uname().machine == "x86_64" and "pyarrow" not in sys.modules:
        os.environ.setdefault(ARROW_POOL_VARIABLE, "jemalloc")


def main() -> NoReturn:
    """The ``agentbench`` command (pyproject's script entry)."""
    choose_arrow_pool()
    from .cli import main as command  # after the choice: importing the command line imports pyarrow

    sys.exit(command())
