"""alfworld on the real engine (alfworld + textworld): every built-in game won by the oracle through the
protocol in both action modes, the weak policy's statuses, real observations, engine failures as
env_error, memory of closed games released."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import os
import re
import signal
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentbench_async import statuses as st
from agentbench_async.environment import EnvError
from agentbench_async.envs.alfworld import ALFWorldEnvironment
from agentbench_async.envs.alfworld.engine import GamePool
from agentbench_async.envs.alfworld.tasks import builtin_root
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.testing import play
from agentbench_async.types import ModelReply
from support import require

pytestmark = pytest.mark.asyncio(loop_scope="module")

HAS_ENGINE = all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))
NEED = "the alfworld extra is not installed (pip install -e '.[alfworld]')"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env() -> AsyncIterator[ALFWorldEnvironment]:
    require(HAS_ENGINE, NEED)
    environment = ALFWorldEnvironment(options={"workers": "2"})
    await environment.start()
    yield environment
    await environment.close()


def _tasks(env: ALFWorldEnvironment) -> list[Task]:
    return list(env.tasks("dev")) + list(env.tasks("test"))


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_oracle_wins_every_builtin_game(env: ALFWorldEnvironment, mode: str) -> None:
    tasks = _tasks(env)
    records = await asyncio.gather(*(play(env, t, "oracle", action_mode=mode) for t in tasks))
    for task, record in zip(tasks, records):
        assert (record.status, record.score, record.paper_status) == (st.COMPLETED, 1.0, st.PAPER_COMPLETED), (task.task_id, record.error)
        assert record.n_turns == len(task.data["walkthrough"])
        assert record.details["won"] and record.details["log"][-1]["done"]
    assert sum(s["live"] for s in await env.pool.stats()) == 0  # type: ignore[union-attr]


async def test_weak_policy_reaches_every_failure_status(env: ALFWorldEnvironment) -> None:
    tasks = list(env.tasks("dev"))
    text = await asyncio.gather(*(play(env, t, "weak") for t in tasks))
    statuses = Counter(r.status for r in text)
    assert set(statuses) == {st.INVALID_FORMAT, st.INVALID_ACTION, st.TASK_LIMIT_EXCEEDED, st.CONTEXT_LIMIT_EXCEEDED}
    paper = {r.status: r.paper_status for r in text}
    assert paper == {
        st.INVALID_FORMAT: st.PAPER_AGENT_INVALID_ACTION,  # upstream: a reply process_action cannot read
        st.INVALID_ACTION: st.PAPER_AGENT_INVALID_ACTION,  # the repeat rule
        st.TASK_LIMIT_EXCEEDED: st.PAPER_TASK_LIMIT_REACHED,
        st.CONTEXT_LIMIT_EXCEEDED: st.PAPER_AGENT_CONTEXT_LIMIT,
    }
    for record in text:
        assert record.score == 0.0 and not record.success
        if record.status == st.INVALID_ACTION:
            assert record.n_turns == 4  # the repeat rule first fires at the fourth identical reply
        if record.status == st.TASK_LIMIT_EXCEEDED:
            assert record.n_turns == 35
    # tools mode (FC): unusable messages never end the episode, they use turns
    tools = await asyncio.gather(*(play(env, t, "weak", action_mode="tools") for t in tasks[:5]))
    assert {r.status for r in tools} == {st.TASK_LIMIT_EXCEEDED, st.INVALID_ACTION, st.CONTEXT_LIMIT_EXCEEDED}


async def test_real_observations_and_action_lists(env: ALFWorldEnvironment) -> None:
    task = next(t for t in env.tasks("dev") if t.data["game"].startswith("games/dev/pick_and_place_simple-Pencil"))
    session = await env.open_session(task, EpisodeContext(episode_id="obs", action_mode="text"))
    try:
        messages = await session.begin()
        start = messages[-1]["content"]
        assert start.startswith("Here is your task. You are in the middle of a room. Looking quickly around you, you see ")
        observation, _, actions = start.partition(" AVAILABLE ACTIONS: ")
        assert observation.endswith("\nYour task is to: put a pencil in shelf.")
        commands = actions.rstrip("\n").split("\n")
        assert commands == sorted(set(commands)) and "look" in commands and "go to desk 1" in commands and "help" not in commands
        step = await session.step(ModelReply(content="ACTION: go to desk 1"))
        text = step.observation[0]["content"]
        assert text.startswith("On the desk 1, you see ") and "pencil 1" in text  # "You arrive at loc N. " cut
        assert "take pencil 1 from desk 1" in text
        step = await session.step(ModelReply(content="ACTION: juggle the furniture"))
        assert step.observation[0]["content"].startswith("Nothing happens. AVAILABLE ACTIONS: ") and not step.valid
        await session.step(ModelReply(content="ACTION: take pencil 1 from desk 1"))
        await session.step(ModelReply(content="ACTION: go to shelf 1"))
        step = await session.step(ModelReply(content="ACTION: put pencil 1 in shelf 1"))  # BLEU -> "in/on"
        assert step.action == "put pencil 1 in/on shelf 1"
        assert step.outcome is not None and step.outcome.status == st.COMPLETED and step.outcome.score == 1.0
    finally:
        await session.close()
    # a basin's arrival line is cut like any other ("You arrive at locbasin 1." was shown before the generator fix)
    task = next(t for t in env.tasks("dev") if t.data["type"] == "pick_clean_then_place")
    session = await env.open_session(task, EpisodeContext(episode_id="basin", action_mode="text"))
    try:
        await session.begin()
        step = await session.step(ModelReply(content="ACTION: go to sinkbasin 1"))
        assert step.observation[0]["content"].startswith("On the sinkbasin 1, you see ")
    finally:
        await session.close()
    assert "You arrive at" not in (builtin_root() / "prompts.json").read_text()


async def test_workers_say_what_plain_textworld_says(env: ALFWorldEnvironment) -> None:
    """The worker's speed-ups (memoised template parses, the first reset reusing the loaded state, pooled
    planner libraries) change no text: every feedback and action list equals a plain TextWorld game's."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    assert env.pool is not None
    for task in [t for t in env.tasks("test") if t.task_id in ("test-000", "test-012", "test-019", "test-027")]:
        path = builtin_root() / task.data["game"]
        plain = textworld.envs.pddl.PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"]))
        plain = AlfredInfos(AlfredDemangler(plain, shuffle=False))
        plain.load(str(path))
        state = plain.reset()
        game, ours = await env.pool.open(str(path))
        try:
            for command in [*task.data["walkthrough"][:-1], "look", "inventory", task.data["walkthrough"][-1]]:
                assert (ours.feedback, ours.admissible, ours.won) == (state["feedback"], list(state["admissible_commands"]), state["won"])
                state, _, done = plain.step(command)
                ours = await game.step(command)
            assert (ours.feedback, ours.admissible, ours.won, ours.done) == (state["feedback"], list(state["admissible_commands"]), True, done)
        finally:
            await game.close()
            plain.close()


async def test_engine_failures_are_env_error_and_the_run_goes_on(env: ALFWorldEnvironment, tmp_path: Path) -> None:
    bad = tmp_path / "broken.tw-pddl"
    bad.write_text(json.dumps({"pddl_domain": "(define", "grammar": "", "pddl_problem": "", "solvable": True}))
    task = Task(env="alfworld", split="dev", task_id="broken", data={"type": "pick_and_place", "prompt": "put", "game": "g"})
    from agentbench_async.envs.alfworld.session import ALFWorldSession

    examples = env._examples  # noqa: SLF001 - the loaded one-shot examples
    assert env.pool is not None and examples is not None
    session = ALFWorldSession(env.pool, task, EpisodeContext(episode_id="b", action_mode="text"), bad, examples["put"])
    with pytest.raises(Exception) as info:
        await session.begin()
    assert type(info.value).__name__ == "EnvError" and "game engine error in open" in str(info.value)
    # a missing game file (official games without their data) is env_error with the path
    gone = Task(env="alfworld", split="dev", task_id="gone", data={"type": "pick_and_place", "prompt": "put", "game": "nope/game.tw-pddl"})
    record = await play(env, gone, "oracle")
    assert record.status == st.ENV_ERROR and "not found" in (record.error or "") and record.paper_status == st.PAPER_UNKNOWN
    # a worker that dies mid-game ends that game's episode env_error; the next game gets a new worker
    task = next(iter(env.tasks("dev")))
    session = await env.open_session(task, EpisodeContext(episode_id="k", action_mode="text"))
    await session.begin()
    pids = env.pool.worker_pids
    game_worker = session._game._worker  # type: ignore[attr-defined]  # noqa: SLF001
    os.kill(game_worker.proc.pid, signal.SIGKILL)
    with pytest.raises(Exception, match="game worker exited") as info:
        await session.step(ModelReply(content="ACTION: look"))
    assert type(info.value).__name__ == "EnvError"
    await session.close()
    record = await play(env, task, "oracle")
    assert record.status == st.COMPLETED and env.pool.worker_pids != pids


async def test_closed_games_release_their_memory() -> None:
    require(HAS_ENGINE, NEED)
    pool = GamePool(1)
    await pool.start()
    try:
        path = str(next(builtin_root().joinpath("games", "dev").rglob("game.tw-pddl")))
        rounds = []
        for _ in range(3):
            games = [await pool.open(path) for _ in range(8)]
            live = (await pool.stats())[0]
            assert live["live"] == 8
            await asyncio.gather(*(game.close() for game, _ in games))
            rounds.append((await pool.stats())[0])
        assert [r["live"] for r in rounds] == [0, 0, 0] and rounds[-1]["opened"] == 24
        # planner libraries are reused: as many as were live at once, not one per game ever played
        assert rounds[-1]["libraries"] == 8
        growth = rounds[-1]["rss_bytes"] - rounds[0]["rss_bytes"]
        assert growth < 8 * 1024 * 1024, f"the worker grew by {growth / 2**20:.1f} MB over two rounds of 8 games"
    finally:
        await pool.close()


async def test_a_pool_imports_the_game_engine_once_and_survives_either_worker_dying() -> None:
    """The second worker is forked from the first after its imports: it plays the same; if it dies, its game ends with
    an error and the next game gets a new worker; if the first dies, the second plays on."""
    require(HAS_ENGINE, NEED)
    pool = GamePool(2)
    await pool.start()
    try:
        first, second = pool.worker_pids
        assert _parent(second) == first  # forked by the first worker, not started with its own imports
        path = str(next(builtin_root().joinpath("games", "dev").rglob("game.tw-pddl")))
        (game_a, state_a), (game_b, state_b) = [await pool.open(path) for _ in range(2)]
        assert game_a._worker is not game_b._worker and state_a == state_b  # noqa: SLF001
        assert (await game_a.step("look")) == (await game_b.step("look"))
        forked = game_a if game_a._worker.proc.pid == second else game_b  # noqa: SLF001
        other = game_b if forked is game_a else game_a
        os.kill(second, signal.SIGKILL)
        with pytest.raises(EnvError, match="game worker exited"):
            await forked.step("look")
        await forked.close()
        game_c, _ = await pool.open(path)  # a new worker, started on its own
        assert second not in pool.worker_pids and len(pool.worker_pids) == 2
        await game_c.close()
        os.kill(first, signal.SIGKILL)
        with pytest.raises(EnvError, match="game worker exited"):
            await other.step("look")
        await other.close()
        game_d, _ = await pool.open(path)
        assert first not in pool.worker_pids and len(pool.worker_pids) == 2
        await game_d.close()
    finally:
        await pool.close()


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def test_game_workers_run_below_the_engines_cpu_priority(env: ALFWorldEnvironment) -> None:
    # on busy cores the engine's event loop (which times every model call) runs before a game's CPU work
    assert env.pool is not None and env.pool.worker_pids
    engine = os.getpriority(os.PRIO_PROCESS, 0)
    assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in env.pool.worker_pids] == [min(engine + 10, 19)] * len(env.pool.worker_pids)


def _upstream_first_prompt(data_dir: Path, game: str, reset: str, commands: list[str]) -> list[dict[str, str]]:
    """v0.2's ``ALFWorld.alfworld_run`` before the first model call, rebuilt from its source file's strings (taken
    out with a regex and literal_eval, independently of the environment's reader); "agent" is sent as "assistant"."""
    source = (data_dir / "upstream-prompts/v0.2/src/server/tasks/alfworld/task.py").read_text()
    instruction = ast.literal_eval(re.search(r"def get_task_instruction\(\):\n(?:\s*#.*\n)*\s*return (\".*\")\n", source).group(1))  # type: ignore[union-attr]
    ack = ast.literal_eval(re.search(r'\{"role": "agent", "content": ("[^"]*")\}', source).group(1))  # type: ignore[union-attr]
    prompts = json.loads((data_dir / "alfworld/prompts/alfworld_multiturn_plan_first.json").read_text())
    prefixes = {"pick_and_place": "put", "pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
                "pick_cool_then_place": "cool", "look_at_obj": "examine", "pick_two_obj": "puttwo"}  # upstream's self.prefixes
    name = "/".join(game.split("/")[-3:-1])
    history = list(next(prompts[v] for k, v in prefixes.items() if name.startswith(k)))
    history[0] = "Here is one example.\n" + history[0]
    ob = "\n".join(reset.split("\n\n")[1:])
    return [{"role": "user", "content": instruction}, {"role": "assistant", "content": ack},
            *({"role": "user" if i % 2 == 0 else "assistant", "content": h} for i, h in enumerate(history)),
            {"role": "user", "content": "Here is your task. " + ob + " AVAILABLE ACTIONS: " + "\n".join(commands) + "\n"}]  # fmt: skip


async def test_official_split_and_prompts_play_games_under_alfworld_data(official_data_dir: Path, tmp_path: Path) -> None:
    """--data-dir (AgentBench's split files and prompt file) + --alfworld-data (the games): the official
    dev split's game paths are resolved under the ALFWorld data folder. The official games are not here, so
    a built-in game of the same type is placed at each path; the oracle plays them from there."""
    require(HAS_ENGINE, NEED)
    builtin = ALFWorldEnvironment()
    by_type = {t.data["type"]: builtin_root() / t.data["game"] for t in builtin.tasks("dev")}
    official = ALFWorldEnvironment(data_dir=official_data_dir, options={"alfworld_data": str(tmp_path), "workers": "1"})
    tasks = list(official.tasks("dev"))
    chosen = [next(t for t in tasks if t.data["type"] == key) for key in by_type]
    for task in chosen:
        target = tmp_path / task.data["game"]
        target.parent.mkdir(parents=True)
        target.write_bytes(by_type[task.data["type"]].read_bytes())
    assert ALFWorldEnvironment.plays_official_tasks(official_data_dir, {"alfworld_data": str(tmp_path)})
    assert not ALFWorldEnvironment.plays_official_tasks(None, {"alfworld_data": str(tmp_path)})
    await official.start()
    try:
        tasks = [t for t in official.tasks("dev") if (tmp_path / t.data["game"]).is_file()]
        assert len(tasks) == 6 and all(t.source == "official" and t.data["walkthrough"] for t in tasks)
        records = await asyncio.gather(*(play(official, t, "oracle") for t in tasks))
        assert [r.status for r in records] == [st.COMPLETED] * 6 and all(r.source == "official" for r in records)
        # the first prompt is what AgentBench v0.2 sends, character for character, for each task type
        for task in tasks:
            session = await official.open_session(task, EpisodeContext(episode_id="p", action_mode="text"))
            messages = await session.begin()
            await session.close()
            game, state = await official.pool.open(str(tmp_path / task.data["game"]))  # type: ignore[union-attr]
            await game.close()
            assert messages == _upstream_first_prompt(official_data_dir, task.data["game"], state.feedback, state.admissible)
        # a game of the split that is not under the data folder: env_error naming the file
        missing = next(t for t in official.tasks("dev") if not (tmp_path / t.data["game"]).is_file())
        record = await play(official, missing, "oracle")
        assert record.status == st.ENV_ERROR and missing.data["game"] in (record.error or "") and "--alfworld-data" in (record.error or "")
    finally:
        await official.close()
