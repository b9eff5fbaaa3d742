"""``alfworld``: AgentBench v0.2's House-Holding task on the real ALFWorld/TextWorld engine.

The model is an agent in a text household (TextWorld games over ALFWorld's PDDL domain): each turn it
gets an observation and the list of admissible commands and answers with one action; six task types
(put, clean, heat, cool, examine under a lamp, put two). Success rate; at most 35 replies. See
docs/envs/alfworld.md.

Options (``Environment(options=...)``, from ``--alfworld-data`` / ``--env-option alfworld.KEY=VALUE``):

- ``alfworld_data``: ALFWorld's data folder holding the official games (``json_2.1.1/valid_unseen/...``),
  needed with ``--data-dir``, whose split files name them (default: ``$ALFWORLD_DATA``);
- ``official_variant``: ``v0.2`` (default) or ``fc``: with ``--data-dir`` the test split is AgentBench FC's
  ``new_std`` (109 games; run it in tools mode for FC's setting);
- ``workers``: game-engine processes (default: the cores this process may use, at most 8);
- ``cache``: keep loaded games' parsed logic and planner translation in ``~/.cache/agentbench-async/alfworld`` for
  later loads of the same game (default true; false: each worker keeps them in memory only);
- ``capacity``: episodes at once (default 128; a live game costs ~4 MB in a worker, bench/env_alfworld.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...environment import Deviation, EnvUnavailableError, Environment, EpisodeContext, Option, Session, Task, missing_file
from ..upstream_prompts import FC, V02, tool_replies_deviation, upstream_path, wording_deviations
from .engine import GamePool, kept_folder
from .prompts import FC_TASK, UPSTREAM_TASK, Prompts, ToolTexts, load_prompts, load_tool_texts
from .session import FC_MAX_STEPS, MAX_STEPS, ALFWorldSession
from .tasks import (OFFICIAL_PROMPTS, VARIANTS, alfworld_data_root, builtin_root, check_game_folders, load_examples, load_tasks,
                    official_folder, require_official_root, split_path)

_DEFAULT_CAPACITY = 128
_MAX_WORKERS = 8  # a worker holds ~70 MB before its games
INSTALL_HINT = "pip install 'agentbench-async[alfworld]' (the alfworld and textworld packages)"


class ALFWorldEnvironment(Environment):
    name: ClassVar[str] = "alfworld"
    description: ClassVar[str] = "House-Holding (ALFWorld): reach a goal in a text household by picking admissible actions"
    max_turns: ClassVar[int] = MAX_STEPS
    turn_caps: ClassVar[Mapping[str, int]] = {"text": MAX_STEPS, "tools": FC_MAX_STEPS}
    metric: ClassVar[str] = "success rate"
    supports_tools: ClassVar[bool] = True  # AgentBench FC: one function, take_action(action)
    requires: ClassVar[str] = "the alfworld extra (alfworld, textworld); official games: ALFWorld's json_2.1.1 data via --alfworld-data DIR"
    result_options: ClassVar[dict[str, Any]] = {"official_variant": "v0.2"}  # fc: AgentBench FC's new_std test split
    option_specs: ClassVar[dict[str, Option]] = {
        "alfworld_data": Option("text", "ALFWorld's data folder"),
        "workers": Option("int", "game-engine processes"),
        "cache": Option("bool", "keep loaded games' logic and planner translation for later loads"),
        "capacity": Option("int", "episodes at once"),
        "official_variant": Option("choice", "v0.2's test split, or AgentBench FC's new_std", choices=VARIANTS),
    }

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=options)
        self._workers: int = self.option("workers", min(_MAX_WORKERS, len(os.sched_getaffinity(0)) or 1))
        self._capacity: int = self.option("capacity", _DEFAULT_CAPACITY)
        self._variant: str = self.option("official_variant", "v0.2")
        self._pool: GamePool | None = None
        self._examples: dict[str, list[str]] | None = None
        self._prompts: Prompts | None = None
        self._tool_texts: ToolTexts | None = None
        self._start_lock = asyncio.Lock()

    @classmethod
    def plays_official_tasks(cls, data_dir: object, options: dict[str, Any]) -> bool:
        # the split files come from --data-dir, the games from --alfworld-data ($ALFWORLD_DATA); start()
        # refuses --data-dir without the games
        return bool(data_dir) and alfworld_data_root(options) is not None

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        files = [split_path(data_dir, split, str(options.get("official_variant") or "v0.2")), official_folder(data_dir) / OFFICIAL_PROMPTS,
                 upstream_path(data_dir, V02, UPSTREAM_TASK)]  # fmt: skip
        if action_mode == "tools":
            files += [upstream_path(data_dir, FC, "configs/tasks/alfworld.yaml"), upstream_path(data_dir, FC, FC_TASK)]
        missing = missing_file(files)
        root = alfworld_data_root(dict(options))
        if missing is None and root is None:
            return "ALFWorld's games are a separate download: no --alfworld-data DIR (or $ALFWORLD_DATA)"
        if missing is None and root is not None and not root.is_dir():
            return f"no ALFWorld data folder {root}"
        return missing

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        out = wording_deviations("alfworld", data_dir, action_mode, upstream="upstream's instruction, acknowledgement and examples",
                                  text="the project's own instruction, acknowledgement and one-shot examples",
                                  tools="the project's own take_action description", fc_text=True)  # fmt: skip
        if action_mode == "tools":
            out.append(tool_replies_deviation("alfworld", "calls AgentBench FC does not run get a 'Not executed' tool message"))
        return out

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def pool(self) -> GamePool | None:
        """The game-engine worker pool (None before ``start``)."""
        return self._pool

    def tasks(self, split: str) -> Iterator[Task]:
        return load_tasks(self.name, split, self.data_dir, self.options)

    def game_root(self, task: Task) -> Path:
        """The ALFWorld data root a task's game path is relative to."""
        if task.source == "builtin":
            return builtin_root()
        return require_official_root(self.options)

    async def start(self) -> None:
        async with self._start_lock:
            if self._pool is not None:
                return
            for module in ("textworld", "alfworld", "fast_downward"):
                if importlib.util.find_spec(module) is None:
                    raise EnvUnavailableError(f"alfworld: the game engine is not installed ({module} missing); {INSTALL_HINT}")
            if self.data_dir is not None:
                check_game_folders(self.data_dir, require_official_root(self.options), self._variant)
            self._examples = load_examples(self.data_dir)
            self._prompts = load_prompts(self.data_dir)
            pool = GamePool(self._workers, kept_folder() if self.option("cache", True) else None)
            await pool.start()
            self._pool = pool

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        if self._pool is None:
            await self.start()
        assert self._pool is not None and self._examples is not None and self._prompts is not None
        example = self._examples[str(task.data["prompt"])]
        if ctx.action_mode == "tools" and self._tool_texts is None:
            self._tool_texts = load_tool_texts(self.data_dir)  # FC's, read once (a text-mode run never needs the file)
        texts = [self._tool_texts] if ctx.action_mode == "tools" and self._tool_texts is not None else []
        return ALFWorldSession(self._pool, task, ctx, self.game_root(task) / str(task.data["game"]), example, self._prompts, *texts)


__all__ = ["ALFWorldEnvironment"]
