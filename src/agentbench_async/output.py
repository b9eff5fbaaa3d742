"""The consoles the command line prints on.

A terminal gets its own width, as rich measures it. Output that is not a terminal (a pipe, a log file, CI) has no
width of its own: rich would hard-wrap it at 80 columns, breaking one summary line into three and a table cell into ten.
There a line of text is never broken (soft wrap) and tables are laid out for ``COLUMNS`` when it is set, else for
``PLAIN_WIDTH`` columns.
"""

from __future__ import annotations

import os
from typing import Any, TextIO

from rich.console import Console

PLAIN_WIDTH = 200  # tables' width in output that is not a terminal, unless COLUMNS says otherwise


def console(file: TextIO | Any | None = None) -> Console:
    """A console on ``file`` (None: stdout, looked up at each write), laid out as the module docstring says."""
    stream = file if file is not None else _Stdout()
    try:
        terminal = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        terminal = False
    if terminal:
        return Console(file=file)
    width = _columns() or PLAIN_WIDTH
    return Console(file=file, width=width, soft_wrap=True)


def _columns() -> int | None:
    try:
        value = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return value if value > 0 else None


class _Stdout:
    def isatty(self) -> bool:
        import sys

        return sys.stdout.isatty()
