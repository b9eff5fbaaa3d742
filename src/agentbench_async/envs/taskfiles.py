"""Reading the environments' task and prompt files: the content, or one line naming the file and the fix."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import TaskFileError


def read_text(path: Path, *, missing: str, where: str | None = None) -> str:
    """The text of ``path`` (UTF-8).

    ``missing`` is the whole message when the file does not exist (say where it should come from);
    ``where`` names the file in the other messages (default: the path itself): unreadable, not UTF-8.
    """
    where = where or str(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(missing) from None
    except OSError as exc:
        raise TaskFileError(f"{where}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"{where}: not UTF-8 text (byte {exc.start} cannot be decoded); save it as UTF-8") from None


def read_json(path: Path, *, missing: str, where: str | None = None) -> Any:
    """The parsed content of ``path``; the messages of ``read_text``, and invalid JSON with line and column."""
    text = read_text(path, missing=missing, where=where)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{where or path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def missing_file(paths: Iterable[Path]) -> str | None:
    """``"no <path>"`` for the first of ``paths`` that is not a file, else ``None`` (what an environment misses under
    ``--data-dir``, ``Environment.missing_data``)."""
    for path in paths:
        if not path.is_file():
            return f"no {path}"
    return None
