"""Loading KG questions: the built-in suite (``environments/kg/{dev,test}.json``) and the official files
(``<data-dir>/knowledgegraph/{dev,std}.json``). Both use AgentBench's record format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...environment import Task, TaskFileError, read_json
from ...resources import environments_dir

OFFICIAL_FILES = {"dev": "dev.json", "test": "std.json"}
BUILTIN_FILES = {"dev": "dev.json", "test": "test.json"}


def builtin_dir() -> Path:
    return environments_dir() / "kg"


def official_dir(data_dir: Path) -> Path:
    """Accept the data root (``…/agentbench-data``) or its ``knowledgegraph`` folder."""
    if (data_dir / "knowledgegraph").is_dir():
        return data_dir / "knowledgegraph"
    return data_dir


def task_file(split: str, data_dir: Path | None) -> Path:
    files = OFFICIAL_FILES if data_dir is not None else BUILTIN_FILES
    if split not in files:
        raise TaskFileError(f"kg: unknown split {split!r} (use dev or test)")
    folder = official_dir(data_dir) if data_dir is not None else builtin_dir()
    return folder / files[split]


def _check(record: Any, path: Path, index: int) -> dict[str, Any]:
    where = f"{path}: record {index}"
    if not isinstance(record, dict):
        raise TaskFileError(f"{where}: not a JSON object; each record needs question, entities and answer")
    if not isinstance(record.get("question"), str):
        raise TaskFileError(f"{where}: 'question' must be a string")
    entities = record.get("entities")
    if not isinstance(entities, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in entities.items()):
        raise TaskFileError(f"{where}: 'entities' must map surface names to Freebase ids")
    answer = record.get("answer")
    if not isinstance(answer, list) or not all(isinstance(a, dict) and "answer_argument" in a for a in answer):
        raise TaskFileError(f"{where}: 'answer' must be a list of objects with 'answer_argument'")
    actions = record.get("actions", [])
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise TaskFileError(f"{where}: 'actions' must be a list of strings")
    return {
        "question": record["question"],
        "qid": str(record.get("qid", index)),
        "source": str(record.get("source", "")),
        "entities": dict(entities),
        "actions": list(actions),
        "gold": sorted({str(a["answer_argument"]) for a in answer}),
    }


def _file_tasks(path: Path, split: str, source: str, *, missing: str, prefix: str = "") -> Iterator[Task]:
    records = read_json(path, missing=missing)
    if not isinstance(records, list):
        raise TaskFileError(f"{path}: must be a JSON list of questions")
    for index, record in enumerate(records):
        yield Task(env="kg", split=split, task_id=f"{prefix}{index}", data=_check(record, path, index), source=source)


def load_tasks(split: str, data_dir: Path | None) -> Iterator[Task]:
    path = task_file(split, data_dir)
    missing = f"{path}: not found; --data-dir must hold knowledgegraph/{path.name} (AgentBench's data layout)"
    yield from _file_tasks(path, split, "official" if data_dir is not None else "builtin", missing=missing)


def own_file_tasks(path: Path, split: str) -> Iterator[Task]:
    """A task file of the user's own (``--tasks kg=PATH``): AgentBench's knowledgegraph records, played in either split."""
    yield from _file_tasks(path, split, "custom", missing=f"{path}: not found", prefix="custom-")
