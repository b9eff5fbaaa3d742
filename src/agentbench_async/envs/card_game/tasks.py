"""Samples: one game each, ``(stage, opponent, seat)`` as AgentBench v0.2's ``get_data()`` builds them.

There are no data files upstream: samples are generated in code, in this order::

    for stage in [2]: for base in ["baseline1", "baseline2"]: for agent in [0, 1]: repeat test_time times

``test_time`` is 3 for ``cg-dev`` (12 samples) and 5 for ``cg-std`` (20, our ``test``). Sample ``i`` has
``base = BASELINES[i // (2 * T)]`` and ``agent = (i // T) % 2`` (the model's seat: 0 moves first).
Each record adds ``seed``, the seed of the opponent's random choices (upstream's were time-seeded):
``i`` for dev and ``1000 + i`` for test, so no game repeats across splits.

The built-in suites (``environments/card_game/{dev,test}.json``) hold exactly this generation; with
``--data-dir`` the same generation is the "official" data (there is nothing to read). The option
``test_time`` generates a larger variant (``4 * test_time`` samples, same order) for more variety.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...environment import Task, TaskFileError, read_json
from ...resources import environments_dir
from .baselines import BASELINES

STAGE = 2  # the guess phase is on (stage 1, without guessing, is never used by v0.2)
TEST_TIMES: dict[str, int] = {"dev": 3, "test": 5}  # cg-dev, cg-std
SEED_BASE: dict[str, int] = {"dev": 0, "test": 1000}
BUILTIN_FILES: dict[str, str] = {"dev": "dev.json", "test": "test.json"}


def generate(split: str, test_time: int | None = None) -> list[dict[str, Any]]:
    """The split's samples in upstream order (``test_time`` repeats of every opponent x seat)."""
    if split not in TEST_TIMES:
        raise TaskFileError(f"card_game: unknown split {split!r} (use dev or test)")
    repeats = TEST_TIMES[split] if test_time is None else test_time
    records = []
    for base in BASELINES:
        for agent in (0, 1):
            for _ in range(repeats):
                index = len(records)
                records.append({"index": index, "stage": STAGE, "base": base, "agent": agent, "seed": SEED_BASE[split] + index})
    return records


def builtin_path(split: str) -> Path:
    return environments_dir() / "card_game" / BUILTIN_FILES[split]


def _check(record: Any, path: Path, index: int) -> dict[str, Any]:
    where = f"card_game: {path}: record {index}"
    if not isinstance(record, dict):
        raise TaskFileError(f"{where}: not a JSON object (needs index, stage, base, agent, seed)")
    if record.get("stage") != STAGE:
        raise TaskFileError(f"{where}: 'stage' must be {STAGE} (the only stage AgentBench v0.2 plays)")
    if record.get("base") not in BASELINES:
        raise TaskFileError(f"{where}: 'base' must be one of {', '.join(BASELINES)}")
    if record.get("agent") not in (0, 1):
        raise TaskFileError(f"{where}: 'agent' (the model's seat) must be 0 or 1")
    for key in ("index", "seed"):
        if not isinstance(record.get(key), int) or isinstance(record.get(key), bool):
            raise TaskFileError(f"{where}: {key!r} must be an integer")
    return {k: record[k] for k in ("index", "stage", "base", "agent", "seed")}


def load_builtin(split: str) -> list[dict[str, Any]]:
    if split not in BUILTIN_FILES:
        raise TaskFileError(f"card_game: unknown split {split!r} (use dev or test)")
    path = builtin_path(split)
    records = read_json(path, missing=f"card_game: built-in suite {path} is missing; reinstall agentbench-async", where=f"card_game: {path}")
    if not isinstance(records, list):
        raise TaskFileError(f"card_game: {path}: must be a JSON list of samples")
    return [_check(r, path, i) for i, r in enumerate(records)]


def load_tasks(env_name: str, split: str, data_dir: Path | None, test_time: int | None = None) -> Iterator[Task]:
    """Built-in samples, or with ``data_dir`` (or ``test_time``) the generation itself."""
    if test_time is not None or data_dir is not None:
        records = generate(split, test_time)
    else:
        records = load_builtin(split)
    source = "official" if data_dir is not None else "builtin"
    for record in records:
        yield Task(env=env_name, split=split, task_id=str(record["index"]), data=record, source=source)
