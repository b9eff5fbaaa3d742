"""The game workers' speed-ups (memoised parses, light derivation copies, sorted facts kept, loaded games' logic and
planner translation kept) change nothing a model sees: the oracle's walkthrough of every built-in game, replayed
through the worker pool, says at every step what plain TextWorld says (``tests/fixtures/alfworld_replay``, made with
plain TextWorld) — with a cold kept folder (every game parsed and translated here), from the kept files (new
workers), and from a worker's memory (the same games again)."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import pickle
import zlib
from pathlib import Path
from typing import Any

from support import require

from agentbench_async.envs.alfworld.engine import GamePool, GameState, kept_folder
from agentbench_async.envs.alfworld.tasks import builtin_root
from agentbench_async.envs.alfworld.worker import _Kept

HAS_ENGINE = all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "alfworld_replay" / "observations.json"


def _digest(state: GameState, *, stepped: bool) -> str:
    values: list[Any] = [state.feedback, state.admissible, state.won] + ([state.done] if stepped else [])
    return hashlib.sha256(json.dumps(values, ensure_ascii=False).encode("utf-8")).hexdigest()


async def _replay(pool: GamePool, games: dict[str, Any]) -> dict[str, list[str]]:
    limit = asyncio.Semaphore(16)

    async def one(path: str, walkthrough: list[str]) -> list[str]:
        async with limit:
            game, state = await pool.open(str(builtin_root() / path))
            try:
                seen = [_digest(state, stepped=False)]
                for command in walkthrough:
                    seen.append(_digest(await game.step(command), stepped=True))
                return seen
            finally:
                await game.close()

    replays = await asyncio.gather(*(one(path, game["walkthrough"]) for path, game in games.items()))
    return dict(zip(games, replays))


def _differences(games: dict[str, Any], replays: dict[str, list[str]]) -> list[str]:
    return [f"{path} step {i}" for path, game in games.items() for i, (want, got) in enumerate(zip(game["steps"], replays[path]))
            if want != got] + [path for path, game in games.items() if len(game["steps"]) != len(replays[path])]  # fmt: skip


async def _kept_counts(pool: GamePool) -> tuple[int, int]:
    stats = await pool.stats()
    return sum(s["kept_hits"] for s in stats), sum(s["kept_misses"] for s in stats)


async def test_every_observation_of_the_oracle_replay_is_plain_textworlds() -> None:
    """Every built-in game, with the workers as a run starts them (the user's kept folder)."""
    require(HAS_ENGINE, "the alfworld extra is not installed (pip install -e '.[alfworld]')")
    games = json.loads(FIXTURE.read_text())["games"]
    assert len(games) == 42  # the built-in dev and test games
    pool = GamePool(2, kept_folder())
    await pool.start()
    try:
        assert _differences(games, await _replay(pool, games)) == []
    finally:
        await pool.close()


async def test_the_same_observations_cold_from_kept_files_and_from_memory(tmp_path: Path) -> None:
    """A game of each type and split parsed and translated in the workers (an empty kept folder), then the same games
    from the workers' memory, then from the kept files (new workers)."""
    require(HAS_ENGINE, "the alfworld extra is not installed (pip install -e '.[alfworld]')")
    every = json.loads(FIXTURE.read_text())["games"]
    games = {path: every[path] for path in {path.split("-")[0]: path for path in every}.values()}
    assert len(games) == 12
    kept = tmp_path / "kept"
    pool = GamePool(2, kept)
    await pool.start()
    try:
        assert _differences(games, await _replay(pool, games)) == []  # cold
        assert await _kept_counts(pool) == (0, 2 * len(games))  # each game's logic and translation made once, kept
        assert _differences(games, await _replay(pool, games)) == []  # from the workers' memory
        assert await _kept_counts(pool) == (2 * len(games), 2 * len(games))
    finally:
        await pool.close()
    assert len(list(kept.iterdir())) == 2 * len(games)
    pool = GamePool(2, kept)  # new workers: from the kept files
    await pool.start()
    try:
        assert _differences(games, await _replay(pool, games)) == []
        assert await _kept_counts(pool) == (2 * len(games), 0)
    finally:
        await pool.close()


def test_kept_work_survives_a_damaged_file_and_an_unwritable_folder(tmp_path: Path) -> None:
    made: list[str] = []

    def make(value: str) -> Any:
        made.append(value)
        return {"value": value}

    kept = _Kept(tmp_path / "kept")
    assert kept.get("sas", ("domain", "problem"), lambda: make("a")) == {"value": "a"}
    (file,) = (tmp_path / "kept").iterdir()
    assert pickle.loads(zlib.decompress(file.read_bytes())) == {"value": "a"}
    assert _Kept(tmp_path / "kept").get("sas", ("domain", "problem"), lambda: make("b")) == {"value": "a"}  # from the file
    assert _Kept(tmp_path / "kept").get("sas", ("domain", "other"), lambda: make("c")) == {"value": "c"}  # other texts
    file.write_bytes(b"not a kept value")
    assert _Kept(tmp_path / "kept").get("sas", ("domain", "problem"), lambda: make("d")) == {"value": "d"}  # made again
    assert made == ["a", "c", "d"]
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    memory_only = _Kept(blocked)
    assert memory_only.get("logic", ("x",), lambda: make("e")) == {"value": "e"}
    assert memory_only.get("logic", ("x",), lambda: make("f")) == {"value": "e"} and made[-1] == "e"  # kept in memory
    first = memory_only.get("logic", ("x",), lambda: make("g"))
    first["value"] = "changed by a game"
    assert memory_only.get("logic", ("x",), lambda: make("h")) == {"value": "e"}  # every use gets its own copy
