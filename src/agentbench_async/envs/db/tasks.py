"""Loading DBBench task records: the official JSONL files and the project's built-in suites.

Both use AgentBench's record format (one JSON object per line; see docs/envs/db.md). Official files
live under ``<data-dir>/dbbench/`` (``dev.jsonl``, ``standard.jsonl``); built-in ones under
``environments/db/`` (``dev.jsonl``, ``test.jsonl``). The task id is ``<split>-<line index>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...environment import Task, TaskFileError, read_text
from ...resources import environments_dir
from .grading import MODIFY_TYPES, SELECT_TYPES

OFFICIAL_FILES = {"dev": "dev.jsonl", "test": "standard.jsonl"}
BUILTIN_FILES = {"dev": "dev.jsonl", "test": "test.jsonl"}
KNOWN_TYPES = frozenset(SELECT_TYPES) | MODIFY_TYPES


FC_TEST_FILE = "agentbench-fc/standard.jsonl"  # AgentBench FC's copy of std (11 records fixed)


def official_path(data_dir: Path, split: str, variant: str = "v0.2") -> Path:
    base = data_dir / "dbbench" if (data_dir / "dbbench").is_dir() else data_dir
    if variant == "fc" and split == "test":
        return base / FC_TEST_FILE
    return base / OFFICIAL_FILES[split]


def builtin_path(split: str) -> Path:
    return environments_dir() / "db" / BUILTIN_FILES[split]


def _bad(path: Path, line: int, what: str) -> TaskFileError:
    return TaskFileError(f"db: {path}:{line + 1}: {what}")


def validate_record(record: Any, path: Path, line: int) -> dict[str, Any]:
    """Check the fields the environment uses; raise a one-line TaskFileError naming file and line."""
    if not isinstance(record, dict):
        raise _bad(path, line, "a record must be a JSON object")
    for key in ("description", "type", "table"):
        if key not in record:
            raise _bad(path, line, f"missing field {key!r} (see docs/envs/db.md for the record format)")
    if not isinstance(record["description"], str):
        raise _bad(path, line, "'description' must be a string")
    types = record["type"]
    if not (isinstance(types, list) and types and isinstance(types[0], str)):
        raise _bad(path, line, "'type' must be a one-element list such as [\"counting\"]")
    task_type = types[0]
    table = record["table"]
    if not isinstance(table, dict) or not isinstance(table.get("table_name"), str) or not table["table_name"]:
        raise _bad(path, line, "'table.table_name' must be a non-empty string")
    info = table.get("table_info")
    if not isinstance(info, dict) or not isinstance(info.get("columns"), list) or not isinstance(info.get("rows"), list):
        raise _bad(path, line, "'table.table_info' must hold 'columns' and 'rows' lists")
    for col in info["columns"]:
        if not isinstance(col, dict) or not isinstance(col.get("name"), str):
            raise _bad(path, line, "each column must be an object with a string 'name'")
    for row in info["rows"]:
        if not isinstance(row, list):
            raise _bad(path, line, "each row must be a list of values")
    if task_type in MODIFY_TYPES:
        if not isinstance(record.get("answer_md5"), str):
            raise _bad(path, line, f"a {task_type} record needs 'answer_md5' (the gold table hash)")
    else:
        label = record.get("label")
        if not isinstance(label, list) or not all(isinstance(x, str) for x in label):
            raise _bad(path, line, "a SELECT-like record needs 'label': a list of answer strings")
    if "add_description" in record and not isinstance(record["add_description"], str):
        raise _bad(path, line, "'add_description' must be a string")
    return record


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line index, record) from a JSONL file, validating each record."""
    text = read_text(path, missing=f"db: task file {path} not found", where=f"db: task file {path}")
    index = 0
    for raw in text.split("\n"):  # (not splitlines: a U+2028 inside a JSON string is no line break)
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _bad(path, index, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:  # a line of 200,000 nested lists
            raise _bad(path, index, "nests lists/objects deeper than Python reads; a task record needs a few levels") from None
        yield index, validate_record(record, path, index)
        index += 1


def load_tasks(env_name: str, split: str, data_dir: Path | None, variant: str = "v0.2") -> Iterator[Task]:
    """The split's tasks: official ones from ``data_dir`` (``variant`` "fc": AgentBench FC's std file
    for the test split), else the built-in suite."""
    if split not in OFFICIAL_FILES:
        raise TaskFileError(f"db: unknown split {split!r} (use dev or test)")
    if variant not in ("v0.2", "fc"):
        raise TaskFileError(f"db: unknown official_variant {variant!r} (use v0.2 or fc)")
    if data_dir is not None:
        path, source = official_path(data_dir, split, variant), "official"
        if not path.is_file():
            raise TaskFileError(
                f"db: {path} not found; --data-dir must hold dbbench/{OFFICIAL_FILES[split]} (AgentBench's data/ layout)"
            )
    else:
        path, source = builtin_path(split), "builtin"
    for index, record in read_records(path):
        yield Task(env=env_name, split=split, task_id=f"{split}-{index:04d}", data=record, source=source)


def own_file_tasks(env_name: str, path: Path, split: str) -> Iterator[Task]:
    """A task file of the user's own (``--tasks db=PATH``): AgentBench's dbbench JSONL records, played in either split."""
    for index, record in read_records(path):
        yield Task(env=env_name, split=split, task_id=f"custom-{index:04d}", data=record, source="custom")
