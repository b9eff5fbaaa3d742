"""WebShop tasks: goal indices of a data folder, per split, with each goal's reference purchase.

A task is AgentBench's sample: a goal index (std = ``test`` 0..199, dev 200..279 by default, as v0.2's
configs), used as the session id and the goal. The data folder is, in order: the ``webshop_data`` option
(``--webshop-data DIR``, WebShop's download), ``<data-dir>/webshop`` if it holds the files, else the
built-in catalog ``environments/webshop/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import Task, TaskFileError, range_option
from ...resources import environments_dir
from .catalog import PRODUCTS_FILE, Catalog, Goal, Product
from .reward import normalize_color, token_set_ratio

DEFAULT_RANGES = {"test": (0, 200), "dev": (200, 280)}  # configs/tasks/webshop.yaml: std 0..199, dev 200..279
RANGE_OPTIONS = {"test": "test_range", "dev": "dev_range"}
_NOT_IN_QUERY = re.compile(r"[\[\]\n]")  # a ']' would end the search[...] action early


def builtin_dir() -> Path:
    return environments_dir() / "webshop"


@dataclass(frozen=True)
class DataSource:
    folder: Path
    source: str  # "builtin" or "official"


def data_source(options: dict[str, Any], data_dir: Path | None) -> DataSource:
    if options.get("webshop_data"):
        return DataSource(Path(str(options["webshop_data"])).expanduser(), "official")
    if data_dir is not None:
        folder = data_dir / "webshop"
        if (folder / PRODUCTS_FILE).is_file() or (folder / "items_shuffle_1000.json").is_file():
            return DataSource(folder, "official")
        raise TaskFileError(
            f"webshop: AgentBench's data folder has no WebShop data ({folder} is missing; WebShop's product and goal "
            "files are a separate download): pass --webshop-data DIR with items_shuffle.json, items_ins_v2.json and "
            "items_human_ins.json"
        )
    return DataSource(builtin_dir(), "builtin")


def split_range(split: str, options: dict[str, Any]) -> tuple[int, int]:
    if split not in DEFAULT_RANGES:
        raise TaskFileError(f"webshop: unknown split {split!r} (use dev or test)")
    key = RANGE_OPTIONS[split]
    raw = options.get(key)
    if raw is None:
        return DEFAULT_RANGES[split]
    return range_option("webshop", key, raw, meaning=f"goal indices, e.g. {':'.join(map(str, DEFAULT_RANGES[split]))}")


def reference_options(product: Product, goal: Goal) -> list[str]:
    """The option values to click so that every goal option is matched (as the reward compares them)."""
    chosen: dict[str, str] = {}
    for wanted in goal.goal_options:
        target = normalize_color(wanted)
        if any(token_set_ratio(normalize_color(v), target) > 85 for v in chosen.values()):
            continue
        best: tuple[int, str, str] | None = None
        for group, values in product.options.items():
            if group in chosen:
                continue
            for value in values:
                score = 101 if value == wanted else token_set_ratio(normalize_color(value), target)
                if best is None or score > best[0]:
                    best = (score, group, value)
        if best is not None and best[0] > 85:
            chosen[best[1]] = best[2]
    return list(chosen.values())


def reference_purchase(catalog: Catalog, goal: Goal) -> dict[str, Any]:
    """The purchase that earns the goal's full reward: search the target's title, open it, options, Buy Now."""
    product = catalog.product(goal.asin)
    query = " ".join(_NOT_IN_QUERY.sub(" ", product.title).split())
    return {"search": query, "asin": product.asin, "options": reference_options(product, goal)}


def make_tasks(env: str, split: str, catalog: Catalog, source: DataSource, options: dict[str, Any]) -> Iterator[Task]:
    lo, hi = split_range(split, options)
    if hi > len(catalog.goals):
        raise TaskFileError(
            f"webshop: {source.folder} gives {len(catalog.goals)} goals but split {split!r} uses goal indices {lo}..{hi - 1}; "
            f"pass --env-option webshop.{RANGE_OPTIONS[split]}=START:END within 0:{len(catalog.goals)}"
        )
    for index in range(lo, hi):
        goal = catalog.goals[index]
        data = {"goal_index": index, "goal": goal.as_dict(), "reference": reference_purchase(catalog, goal)}
        yield Task(env=env, split=split, task_id=str(index), data=data, source=source.source)
