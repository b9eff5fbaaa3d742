"""Puzzle records: the official ``.xlsx`` files and the project's own JSONL suites.

Every puzzle becomes the same ``Task.data`` record::

    {"index": 0, "story": "...", "truth": "...", "story_keys": "<cell text>", "answer_keys": "<cell text>"}

``story_keys``/``answer_keys`` keep the raw cell text (newline-separated bullet lines) because the host's
primed conversation shows it verbatim; ``key_lines`` turns it into the list of keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...environment import TaskFileError, read_text

# Official folder per language, and file per engine split (AgentBench "standard" = our "test").
OFFICIAL_FOLDERS: dict[str, str] = {"en": "lateralthinkingpuzzle", "zh": "lateralthinkingpuzzle_zh"}
OFFICIAL_FILES: dict[str, str] = {"dev": "dev.xlsx", "test": "standard.xlsx"}
_FIELDS = ("story", "truth", "story_keys", "answer_keys")


def strip_bullet(line: str) -> str:
    """A key line without its bullet (``1. ``, ``12. ``, ``- ``), as AgentBench strips it.

    Upstream drops the first space-separated token when ``line[1]`` or ``line[2]`` is ``.`` or the
    line starts with ``-``. Fix: a bullet glued to the text (``1.text``, in some Chinese story keys)
    upstream turned the whole key into ``""``; here only the bullet is removed.
    """
    line = line.strip()
    if len(line) >= 3 and (line[1] == "." or line[2] == "." or line[0] == "-"):
        rest = " ".join(line.split(" ")[1:])
        if rest.strip():
            return rest
        for i, ch in enumerate(line):  # glued bullet: drop the leading digits/dash and the dot
            if not (ch.isdigit() or ch in ".-"):
                return line[i:].strip()
        return ""
    return line


def key_lines(cell: str) -> list[str]:
    """The non-empty key lines of a keys cell, bullets stripped (fix: upstream counted blank lines)."""
    keys = [strip_bullet(line) for line in cell.split("\n") if line.strip()]
    return [k for k in keys if k]


def official_path(data_dir: Path, language: str, split: str) -> Path:
    """Where the official file of a split is: ``<data_dir>/<folder>/<file>`` or ``<data_dir>/<file>``."""
    name = OFFICIAL_FILES[split]
    nested = data_dir / OFFICIAL_FOLDERS[language] / name
    if nested.is_file() or not (data_dir / name).is_file():
        return nested
    return data_dir / name


def load_official(path: Path) -> list[dict[str, Any]]:
    """Read an official LTP workbook: first sheet, header row, columns by position: story, answer,
    story keys, answer keys. Each cell is stripped; fully empty rows are skipped."""
    if not path.is_file():
        raise TaskFileError(f"ltp: {path} not found; pass --data-dir pointing at the AgentBench data folder (which holds {path.parent.name}/)")
    try:
        import openpyxl
    except ImportError:  # pragma: no cover - openpyxl is a dependency
        raise TaskFileError("ltp: reading the official .xlsx files needs openpyxl (pip install openpyxl)") from None
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable workbook is a task-file problem
        raise TaskFileError(f"ltp: cannot read {path}: {type(exc).__name__}: {exc}; expected the official LTP .xlsx") from None
    try:
        rows = list(workbook.worksheets[0].iter_rows(values_only=True))
    finally:
        workbook.close()
    if not rows or len(rows[0]) < 4:
        raise TaskFileError(f"ltp: {path}: expected a header row with 4 columns (story | answer | Story keys | Answer keys)")
    records: list[dict[str, Any]] = []
    for excel_row, row in enumerate(rows[1:], start=2):
        cells = ["" if c is None else str(c).strip() for c in list(row)[:4]]
        cells += [""] * (4 - len(cells))
        if not any(cells):
            continue
        for field, cell in zip(_FIELDS, cells):
            if not cell:
                raise TaskFileError(f"ltp: {path} row {excel_row}: column {field!r} is empty; every puzzle needs story, answer, story keys and answer keys")
        if not key_lines(cells[3]):
            raise TaskFileError(f"ltp: {path} row {excel_row}: no answer keys; write one key per line")
        records.append({"index": len(records), **dict(zip(_FIELDS, cells))})
    return records


def load_builtin(path: Path) -> list[dict[str, Any]]:
    """Read one of the project's suites: JSONL, one puzzle per line with ``id``, ``story``, ``truth``,
    ``story_keys`` (list) and ``answer_keys`` (list)."""
    text = read_text(path, missing=f"ltp: built-in suite {path} is missing; reinstall agentbench-async", where=f"ltp: {path}")
    records: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"ltp: {path} line {lineno}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{where}: not valid JSON ({exc.msg}); one JSON object per line") from None
        except RecursionError:  # a line of 200,000 nested lists
            raise TaskFileError(f"{where}: nests lists/objects deeper than Python reads; a puzzle needs a few levels") from None
        if not isinstance(raw, dict):
            raise TaskFileError(f"{where}: expected a JSON object")
        for field in ("id", "story", "truth"):
            if not isinstance(raw.get(field), str) or not raw[field].strip():
                raise TaskFileError(f"{where}: field {field!r} must be a non-empty string")
        for field in ("story_keys", "answer_keys"):
            value = raw.get(field)
            if not isinstance(value, list) or not value or not all(isinstance(k, str) and k.strip() for k in value):
                raise TaskFileError(f"{where}: field {field!r} must be a non-empty list of non-empty strings")
        records.append(
            {
                "index": len(records),
                "id": raw["id"],
                "story": raw["story"].strip(),
                "truth": raw["truth"].strip(),
                "story_keys": "\n".join(f"{i}. {k.strip()}" for i, k in enumerate(raw["story_keys"], start=1)),
                "answer_keys": "\n".join(f"{i}. {k.strip()}" for i, k in enumerate(raw["answer_keys"], start=1)),
            }
        )
    return records
