"""Reading the environments' task and prompt files: the content, or one line naming the file and the fix."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..bounds import MAX_DATA_FILE_BYTES, mib, read_at_most
from ..errors import TaskFileError


def read_text(path: Path, *, missing: str, where: str | None = None, limit: int = MAX_DATA_FILE_BYTES) -> str:
    """The text of ``path`` (UTF-8), at most ``limit`` bytes read (a task file of ``/dev/zero`` ends at once).

    ``missing`` is the whole message when the file does not exist (say where it should come from);
    ``where`` names the file in the other messages (default: the path itself): unreadable, too big, not UTF-8.
    """
    where = where or str(path)
    try:
        data = read_at_most(path, limit)
    except FileNotFoundError:
        raise TaskFileError(missing) from None
    except OSError as exc:
        raise TaskFileError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise TaskFileError(f"{where}: larger than {mib(limit)}, too big for a task file; give a file of tasks (or split it)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"{where}: not UTF-8 text (byte {exc.start} cannot be decoded); save it as UTF-8") from None


def read_json(path: Path, *, missing: str, where: str | None = None) -> Any:
    """The parsed content of ``path``; the messages of ``read_text``, and invalid JSON with line and column."""
    return parse_json(read_text(path, missing=missing, where=where), where or str(path))


def parse_json(text: str, where: str) -> Any:
    """``text`` parsed as JSON; invalid JSON (with line and column) or JSON nested deeper than Python reads (a 200,000-deep
    list) is one line naming ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise TaskFileError(f"{where}: nests lists/objects deeper than {sys.getrecursionlimit():,} levels; a task record needs a "
                            "few, flatten it") from None  # fmt: skip


def missing_file(paths: Iterable[Path]) -> str | None:
    """``"no <path>"`` for the first of ``paths`` that is not a file, else ``None`` (what an environment misses under
    ``--data-dir``, ``Environment.missing_data``)."""
    for path in paths:
        if not path.is_file():
            return f"no {path}"
    return None
