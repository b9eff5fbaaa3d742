"""ALFWorld tasks: AgentBench's split files, where their games are, and the one-shot examples.

A split file (official ``alfworld/dev.json`` / ``standard.json``, built-in ``environments/alfworld/dev.json``
/ ``test.json``) is a JSON object with the six task-type keys in a fixed order, each a list of game paths
relative to an ALFWorld data root. The sample index is the position in the concatenation of the lists
in key order; the task type comes from the key (upstream derived it from the game's folder name with the
same prefixes; equivalent for the official data, and robust to other layouts).

Game roots: built-in games live under ``environments/alfworld/``; official games under ALFWorld's data
folder (``alfworld-download``, release json_2.1.1), given by the option ``alfworld_data``
(``--alfworld-data``) or the ``ALFWORLD_DATA`` environment variable, as upstream.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...environment import EnvUnavailableError, Task, TaskFileError, read_json
from ...resources import environments_dir

# split-file key -> prompt key, in the order of AgentBench's split files
TASK_TYPES: dict[str, str] = {
    "pick_and_place": "put",
    "pick_clean_then_place": "clean",
    "pick_heat_then_place": "heat",
    "pick_cool_then_place": "cool",
    "look_at_obj": "examine",
    "pick_two_obj": "puttwo",
}
PROMPT_KEYS = ("put", "clean", "heat", "cool", "puttwo", "examine")
OFFICIAL_FILES = {"dev": "dev.json", "test": "standard.json"}
FC_TEST_FILE = "agentbench-fc/new_std.json"  # AgentBench FC's alfworld-std split (option official_variant=fc)
VARIANTS = ("v0.2", "fc")
BUILTIN_FILES = {"dev": "dev.json", "test": "test.json"}
OFFICIAL_PROMPTS = "prompts/alfworld_multiturn_plan_first.json"
BUILTIN_PROMPTS = "prompts.json"
DATA_HINT = (
    "ALFWorld's data folder holding json_2.1.1/ (ALFWorld release 0.2.2's json_2.1.1_tw-pddl.zip, unpacked) "
    "via --alfworld-data DIR or $ALFWORLD_DATA"
)


def builtin_root() -> Path:
    return environments_dir() / "alfworld"


def official_folder(data_dir: Path) -> Path:
    """AgentBench's ``data/alfworld`` folder: ``data_dir/alfworld`` or ``data_dir`` itself."""
    return data_dir / "alfworld" if (data_dir / "alfworld").is_dir() else data_dir


def split_path(data_dir: Path | None, split: str, variant: str = "v0.2") -> Path:
    """The split file: built-in, v0.2's, or with ``variant`` ``fc`` AgentBench FC's test split (``new_std``)."""
    if split not in OFFICIAL_FILES:
        raise TaskFileError(f"alfworld: unknown split {split!r} (use dev or test)")
    if data_dir is None:
        return builtin_root() / BUILTIN_FILES[split]
    if variant == "fc" and split == "test":
        return official_folder(data_dir) / FC_TEST_FILE
    return official_folder(data_dir) / OFFICIAL_FILES[split]


def read_split(path: Path) -> list[tuple[str, str]]:
    """(task-type key, relative game path) in sample order; one-line TaskFileError for a bad file."""
    content = read_json(path, missing=f"alfworld: {path} not found; --data-dir must hold alfworld/{path.name} (AgentBench's data/ layout)",
                        where=f"alfworld: {path}")  # fmt: skip
    if not isinstance(content, dict):
        raise TaskFileError(f"alfworld: {path}: expected an object of task-type keys -> lists of game paths")
    out: list[tuple[str, str]] = []
    for key, games in content.items():
        if key not in TASK_TYPES:
            raise TaskFileError(f"alfworld: {path}: unknown task type {key!r} (known: {', '.join(TASK_TYPES)})")
        if not isinstance(games, list) or not all(isinstance(g, str) and g for g in games):
            raise TaskFileError(f"alfworld: {path}: {key!r} must be a list of game paths")
        for game in games:
            if Path(game).is_absolute() or ".." in Path(game).parts:
                raise TaskFileError(f"alfworld: {path}: game path {game!r} must be relative to the ALFWorld data root")
            out.append((key, game))
    return out


def alfworld_data_root(options: dict[str, Any]) -> Path | None:
    """The official games' root: option ``alfworld_data`` (``--alfworld-data``), else ``$ALFWORLD_DATA``."""
    value = options.get("alfworld_data") or os.environ.get("ALFWORLD_DATA")
    return Path(str(value)).expanduser() if value else None


def require_official_root(options: dict[str, Any]) -> Path:
    """The official games' root, or a one-line EnvUnavailableError saying how to provide it."""
    root = alfworld_data_root(options)
    if root is None:
        raise EnvUnavailableError(f"alfworld: the official games are not part of AgentBench's data; give {DATA_HINT}")
    if not root.is_dir():
        raise EnvUnavailableError(f"alfworld: ALFWorld data folder {root} does not exist; give {DATA_HINT}")
    return root


def check_game_folders(data_dir: Path, root: Path, variant: str = "v0.2") -> None:
    """Refuse (one line) an ALFWorld data folder that lacks the top folder of the split files' games, e.g.
    ``json_2.1.1`` — alfworld >= 0.4's ``alfworld-download`` fetches ``json_2.1.2``, whose grammar differs."""
    tops: set[str] = set()
    for split in OFFICIAL_FILES:
        path = split_path(data_dir, split, variant)
        if path.is_file():
            tops |= {Path(game).parts[0] for _, game in read_split(path)}
    missing = sorted(top for top in tops if not (root / top).is_dir())
    if not missing:
        return
    note = ""
    if "json_2.1.1" in missing and (root / "json_2.1.2").is_dir():
        note = (
            " (it has json_2.1.2, which alfworld >= 0.4's alfworld-download fetches: its grammar differs from the"
            " 2.1.1 games AgentBench used, so its games cannot stand in for them)"
        )
    raise EnvUnavailableError(f"alfworld: ALFWorld data folder {root} has no {', '.join(m + '/' for m in missing)}{note}; give {DATA_HINT}")


def read_walkthrough(path: Path) -> list[str] | None:
    """A game file's ``walkthrough`` (the oracle's reference), if the file is here and has one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    walkthrough = data.get("walkthrough") if isinstance(data, dict) else None
    if isinstance(walkthrough, list) and all(isinstance(c, str) for c in walkthrough):
        return walkthrough
    return None


def load_tasks(env_name: str, split: str, data_dir: Path | None, options: dict[str, Any]) -> Iterator[Task]:
    path = split_path(data_dir, split, str(options.get("official_variant", "v0.2")))
    source = "builtin" if data_dir is None else "official"
    root = builtin_root() if data_dir is None else alfworld_data_root(options)
    for index, (key, game) in enumerate(read_split(path)):
        data: dict[str, Any] = {"index": index, "type": key, "prompt": TASK_TYPES[key], "game": game}
        walkthrough = read_walkthrough(root / game) if root is not None else None
        if walkthrough is not None:
            data["walkthrough"] = walkthrough
        yield Task(env=env_name, split=split, task_id=f"{split}-{index:03d}", data=data, source=source)


def load_examples(data_dir: Path | None) -> dict[str, list[str]]:
    """The one-shot examples: AgentBench's ``alfworld_multiturn_plan_first.json`` with ``--data-dir``,
    else the project's own (same format: prompt key -> alternating environment/agent texts)."""
    path = official_folder(data_dir) / OFFICIAL_PROMPTS if data_dir is not None else builtin_root() / BUILTIN_PROMPTS
    content = read_json(path, missing=f"alfworld: {path} not found; --data-dir must hold alfworld/{OFFICIAL_PROMPTS}",
                        where=f"alfworld: the one-shot examples {path}")  # fmt: skip
    if not isinstance(content, dict):
        raise TaskFileError(f"alfworld: {path}: expected an object of prompt keys -> example turns")
    for key in PROMPT_KEYS:
        turns = content.get(key)
        if not isinstance(turns, list) or not turns or len(turns) % 2 or not all(isinstance(t, str) for t in turns):
            raise TaskFileError(f"alfworld: {path}: {key!r} must be a non-empty list of an even number of strings")
    return {key: list(content[key]) for key in PROMPT_KEYS}
