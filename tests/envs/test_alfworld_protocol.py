"""alfworld: reading replies (ACTION line, nearest admissible command, repeat rule), prompts, observation
processing, statuses and paper statuses — driven through the session with a scripted game (no engine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentbench_async import statuses as st
from agentbench_async.envs.alfworld import ALFWorldEnvironment
from agentbench_async.envs.alfworld.engine import GameState
from agentbench_async.envs.alfworld.parsing import extract_action, nearest_admissible, repeats, sentence_bleu
from agentbench_async.envs.alfworld.prompts import OWN_PROMPTS, Prompts, available_actions, first_observation, load_prompts, step_observation
from agentbench_async.envs.alfworld.session import FC_MAX_STEPS, MAX_STEPS, ALFWorldSession
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.errors import ConfigError
from agentbench_async.types import ModelReply, ToolCall

CHOICES = [
    "go to cabinet 1", "go to countertop 1", "go to fridge 1", "inventory", "look", "examine countertop 1",
    "take apple 1 from countertop 1", "put apple 1 in/on fridge 1", "open fridge 1",
]  # fmt: skip


@pytest.mark.parametrize(
    ("action", "command", "score"),
    [
        ("go to the fridge", "go to fridge 1", 0.186165),
        ("take apple from countertop 1", "take apple 1 from countertop 1", 0.308345),
        ("put apple 1 in fridge 1", "put apple 1 in/on fridge 1", 0.293946),
        ("fridge", "open fridge 1", 0.135335),
        ("look around", "look", 0.067544),
        ("go", "go to cabinet 1", 0.049787),
        ("go to cabinet 7", "go to cabinet 1", 0.431468),
    ],
)
def test_nearest_admissible_matches_upstream_bleu(action: str, command: str, score: float) -> None:
    mapped = nearest_admissible(action, CHOICES)
    assert (mapped.command, mapped.how) == (command, "nearest")
    assert mapped.score == pytest.approx(score, abs=1e-6)


def test_unlike_actions_go_to_the_engine_as_written_and_exact_ones_pass() -> None:
    assert nearest_admissible("xyz abc", CHOICES).command == "xyz abc"
    assert nearest_admissible("xyz abc", CHOICES).how == "unmatched"
    assert nearest_admissible("look", CHOICES).how == "exact"
    assert nearest_admissible("anything", []).command == "anything"  # no list: used as is
    assert sentence_bleu("open fridge 1", "") == 0.0


def test_action_extraction_is_upstreams_regex() -> None:
    assert extract_action("THOUGHT: plan.\n ACTION: Go To Desk 1  \nmore") == "go to desk 1"
    assert extract_action("ACTION:take pen 1 from desk 1") == "take pen 1 from desk 1"
    assert extract_action("Action: look") is None  # case-sensitive
    assert extract_action("ACTION:\nlook") == ""  # '.' does not cross the newline: empty
    assert extract_action("no action here") is None


def test_repeat_rule_fires_only_with_more_than_three_entries() -> None:
    assert not repeats(["a", "a", "a"])  # three identical in turns 1-3 are not caught
    assert repeats(["a", "a", "a", "a"])
    assert repeats(["b", "a", "a", "a"])
    assert not repeats(["a", "a", "b", "a"])


def test_observation_processing() -> None:
    reset = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. You see a desk 1.\n\nYour task is to: put a pencil in shelf."
    assert first_observation(reset) == "You are in the middle of a room. You see a desk 1.\nYour task is to: put a pencil in shelf."
    assert step_observation("You arrive at loc 3. On the desk 1, you see a pencil 1.") == "On the desk 1, you see a pencil 1."
    assert step_observation("The fridge 1 is closed.") == "The fridge 1 is closed."
    assert available_actions(["look", "inventory"]) == " AVAILABLE ACTIONS: look\ninventory\n"


# -- the session, with a scripted game ------------------------------------------------------------------


class _Game:
    """Answers like the engine: ``script`` maps a command to (feedback, won); anything else: Nothing happens."""

    def __init__(self, script: dict[str, tuple[str, bool]]) -> None:
        self.script = script
        self.sent: list[str] = []
        self.closed = False

    async def step(self, command: str) -> GameState:
        self.sent.append(command)
        feedback, won = self.script.get(command, ("Nothing happens.", False))
        return GameState(feedback, ["go to desk 1", "inventory", "look", "take pencil 1 from desk 1"], won, won)

    async def close(self) -> None:
        self.closed = True


class _Pool:
    def __init__(self, game: _Game) -> None:
        self.game = game

    async def open(self, path: str) -> tuple[_Game, GameState]:
        feedback = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. You see a desk 1.\n\nYour task is to: put a pencil in shelf."
        return self.game, GameState(feedback, ["go to desk 1", "inventory", "look"], False)


EXAMPLE = ["Room text.\nYour task is to: x.\n", "THOUGHT: plan\n ACTION: look\n", "Nothing.\n", "ACTION: Task complete.\n"]


async def _session(tmp_path: Path, script: dict[str, tuple[str, bool]] | None = None, mode: str = "text",
                   prompts: Prompts = OWN_PROMPTS) -> tuple[ALFWorldSession, _Game, list[Any]]:  # fmt: skip
    game_file = tmp_path / "game.tw-pddl"
    game_file.write_text("{}")
    game = _Game(script or {"go to desk 1": ("You arrive at loc 2. On the desk 1, you see a pencil 1.", False)})
    task = Task(env="alfworld", split="dev", task_id="dev-000", data={"type": "pick_and_place", "prompt": "put", "game": "g"})
    session = ALFWorldSession(_Pool(game), task, EpisodeContext(episode_id="e", action_mode=mode), game_file, EXAMPLE, prompts)  # type: ignore[arg-type]
    messages = await session.begin()
    return session, game, messages


async def test_text_prompt_shape_and_action_list_shortening(tmp_path: Path) -> None:
    session, game, messages = await _session(tmp_path)
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert messages[2]["content"] == "Here is one example.\n" + EXAMPLE[0]
    assert EXAMPLE[0] == "Room text.\nYour task is to: x.\n"  # the loaded example is not changed
    task_start = messages[-1]
    assert task_start["content"] == (
        "Here is your task. You are in the middle of a room. You see a desk 1.\nYour task is to: put a pencil in shelf."
        " AVAILABLE ACTIONS: go to desk 1\ninventory\nlook\n"
    )
    step = await session.step(ModelReply(content="THOUGHT: the pencil is on the desk.\n ACTION: go to the desk\n"))
    assert game.sent == ["go to desk 1"] and step.action == "go to desk 1" and step.valid
    assert step.info == {"mapped_from": "go to the desk"}
    # the answered message lost its list (the engine's conversation holds this very object) ...
    assert task_start["content"].endswith("Your task is to: put a pencil in shelf. ")
    # ... and the new observation carries the new one, arrive prefix cut
    assert step.observation[0]["content"].startswith("On the desk 1, you see a pencil 1. AVAILABLE ACTIONS: go to desk 1\n")
    await session.step(ModelReply(content="ACTION: look"))
    assert "AVAILABLE ACTIONS" not in step.observation[0]["content"]
    await session.close()
    assert game.closed


@pytest.mark.parametrize(
    ("reply", "status", "error"),
    [
        # the reason of alfworld's taxonomy (reasons.py): what the reply had instead, with the nearest match
        ("I will look around.", st.INVALID_FORMAT, 'no action line: prose; nearest: "I will look around."'),
        ("Action: look", st.INVALID_FORMAT, 'action line not written as "ACTION: <command>"; nearest: "Action: look"'),
        ("THOUGHT: hmm\n ACTION:\n", st.INVALID_FORMAT, "empty action after 'ACTION:'"),
    ],
)
async def test_unreadable_replies_end_the_episode_as_upstreams_invalid_action(tmp_path: Path, reply: str, status: str, error: str) -> None:
    session, game, _ = await _session(tmp_path)
    step = await session.step(ModelReply(content=reply))
    assert step.outcome is not None and not step.valid
    assert step.outcome.status == status and step.outcome.error == error == step.error
    assert step.outcome.details["failure_reason"] == error.split("; nearest:")[0]
    assert step.outcome.paper_status == st.PAPER_AGENT_INVALID_ACTION and step.outcome.score == 0.0
    assert game.sent == []


async def test_unmatched_action_is_sent_as_written_and_the_episode_goes_on(tmp_path: Path) -> None:
    session, game, _ = await _session(tmp_path)
    step = await session.step(ModelReply(content="ACTION: xyzzy plugh"))
    assert game.sent == ["xyzzy plugh"] and step.outcome is None and not step.valid
    assert step.observation[0]["content"].startswith("Nothing happens. AVAILABLE ACTIONS:")


async def test_repeat_rule_fires_at_turn_four_and_before_done(tmp_path: Path) -> None:
    session, game, _ = await _session(tmp_path)
    for _ in range(3):
        assert (await session.step(ModelReply(content="ACTION: look"))).outcome is None
    step = await session.step(ModelReply(content="ACTION: look"))
    assert step.outcome is not None and step.outcome.status == st.INVALID_ACTION
    assert step.outcome.paper_status == st.PAPER_AGENT_INVALID_ACTION and "three times" in (step.outcome.error or "")
    # a winning step that is the third identical reply still scores 0 (upstream checks repeats before done)
    session, game, _ = await _session(tmp_path, {"take pencil 1 from desk 1": ("You pick up the pencil 1.", False)})
    win = "ACTION: take pencil 1 from desk 1"
    game.script = {}
    await session.step(ModelReply(content="ACTION: look"))
    await session.step(ModelReply(content=win))
    await session.step(ModelReply(content=win))
    game.script = {"take pencil 1 from desk 1": ("You pick up the pencil 1.", True)}
    step = await session.step(ModelReply(content=win))
    assert step.outcome is not None and step.outcome.status == st.INVALID_ACTION and step.outcome.score == 0.0


async def test_done_is_completed_and_the_turn_cap_is_task_limit(tmp_path: Path) -> None:
    session, _, _ = await _session(tmp_path, {"go to desk 1": ("You put the pencil 1 in/on the shelf 1.", True)})
    step = await session.step(ModelReply(content="ACTION: go to desk 1"))
    assert step.outcome is not None and step.outcome.status == st.COMPLETED and step.outcome.success
    assert step.outcome.score == 1.0 and step.outcome.paper_status == st.PAPER_COMPLETED
    assert step.outcome.details["log"][0]["action"] == "go to desk 1"
    limit = await session.on_turn_limit()
    assert limit.status == st.TASK_LIMIT_EXCEEDED and limit.paper_status == st.PAPER_TASK_LIMIT_REACHED
    assert ALFWorldEnvironment.max_turns == MAX_STEPS == 35


async def test_tools_mode(tmp_path: Path) -> None:
    session, game, messages = await _session(tmp_path, mode="tools")
    assert [m["role"] for m in messages] == ["system", "user"] and "take_action" in messages[0]["content"]
    tools = session.tools()
    assert tools is not None and tools[0]["function"]["name"] == "take_action"
    call = ToolCall(id="c1", name="take_action", arguments=json.dumps({"action": "Go to desk 1"}))
    extra = ToolCall(id="c2", name="take_action", arguments=json.dumps({"action": "look"}))
    step = await session.step(ModelReply(content="", tool_calls=[call, extra]))
    assert game.sent == ["go to desk 1"]
    assert [(m["role"], m.get("tool_call_id")) for m in step.observation] == [("tool", "c1"), ("tool", "c2")]
    assert "AVAILABLE ACTIONS" in messages[1]["content"]  # FC keeps the lists
    # FC: a message without a usable call gets a notice, uses the turn, and the episode goes on
    none = await session.step(ModelReply(content="I would go to the desk."))
    assert none.outcome is None and not none.valid and none.error == "no tool call"
    assert none.observation[0]["role"] == "user" and "take_action" in none.observation[0]["content"]
    for bad in ("{not json", '{"action": 3}', "{}", "[1]"):
        step = await session.step(ModelReply(content="", tool_calls=[ToolCall(id="c3", name="take_action", arguments=bad)]))
        assert step.outcome is None and not step.valid and step.observation[0]["tool_call_id"] == "c3"
    assert game.sent == ["go to desk 1"]
    # FC reads the first argument whatever the tool's or the argument's name
    other = ToolCall(id="c5", name="act", arguments=json.dumps({"command": "take pencil 1 from desk 1"}))
    game.script = {"take pencil 1 from desk 1": ("You pick up the pencil 1.", True)}
    won = await session.step(ModelReply(content="", tool_calls=[other]))
    assert game.sent[-1] == "take pencil 1 from desk 1"
    # won, so it counts, but FC's status keeps the last unusable call (an unreadable argument)
    assert won.outcome is not None and won.outcome.status == st.COMPLETED and won.outcome.score == 1.0
    assert won.outcome.paper_status == st.PAPER_AGENT_INVALID_ACTION


async def test_tools_mode_statuses_without_bad_calls(tmp_path: Path) -> None:
    session, game, _ = await _session(tmp_path, {"go to desk 1": ("You put the pencil 1 in/on the shelf 1.", True)}, mode="tools")
    none = await session.step(ModelReply(content="thinking"))
    assert none.outcome is None
    won = await session.step(ModelReply(content="", tool_calls=[ToolCall(id="c1", name="take_action", arguments='{"action": "go to desk 1"}')]))
    assert won.outcome is not None and won.outcome.paper_status == st.PAPER_AGENT_VALIDATION_FAILED
    session, game, _ = await _session(tmp_path, mode="tools")
    look = ToolCall(id="c1", name="take_action", arguments='{"action": "look"}')
    steps = [await session.step(ModelReply(content="", tool_calls=[look])) for _ in range(4)]
    assert [s.outcome is None for s in steps] == [True, True, True, False]
    assert steps[-1].outcome is not None and steps[-1].outcome.status == st.INVALID_ACTION
    assert steps[-1].outcome.paper_status == st.PAPER_AGENT_INVALID_ACTION
    limit = await session.on_turn_limit()
    assert limit.paper_status == st.PAPER_TASK_LIMIT_REACHED


async def test_tools_mode_has_agentbench_fc_tool_and_step_limit(tmp_path: Path, official_data_dir: Path) -> None:
    fc = yaml.safe_load((official_data_dir / "upstream-prompts/fc/configs/tasks/alfworld.yaml").read_text())["default"]["parameters"]
    assert FC_MAX_STEPS == fc["max_step"] and fc["split"] == "new_std"
    session, game, _ = await _session(tmp_path, mode="tools", prompts=load_prompts(official_data_dir))
    assert session.tools() == fc["tools"]  # FC's take_action, as its config defines it (read at run time)
    assert (await _session(tmp_path, mode="tools"))[0].tools() == OWN_PROMPTS.tools  # built-in: our wording, same shape
    assert [t["function"]["name"] for t in OWN_PROMPTS.tools] == ["take_action"]
    actions = ["look", "inventory", "go to desk 1"]  # never three alike: only the step limit ends it
    steps = [await session.step(ModelReply(content="", tool_calls=[ToolCall(id=f"c{i}", name="take_action",
                                                                               arguments=json.dumps({"action": actions[i % 3]}))]))
             for i in range(FC_MAX_STEPS)]  # fmt: skip
    assert [s.outcome is None for s in steps] == [True] * (FC_MAX_STEPS - 1) + [False]
    outcome = steps[-1].outcome
    assert outcome is not None and outcome.status == st.TASK_LIMIT_EXCEEDED and outcome.error == "20 turns without finishing the task"
    assert len(game.sent) == FC_MAX_STEPS


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"^alfworld: option workers='many' must be a positive integer"):
        ALFWorldEnvironment(options={"workers": "many"})
    with pytest.raises(ConfigError, match=r"^alfworld: option capacity='0' must be a positive integer"):
        ALFWorldEnvironment(options={"capacity": "0"})
    assert ALFWorldEnvironment(options={"capacity": "7"}).capacity == 7


def _fc_alfworld(data_dir: Path, script: dict[str, tuple[str, bool]], session: Any) -> tuple[list[Any], Any]:
    """FC's ALFWorld.alfworld_run (its task.py and utils.py) with an environment wrapper answering as ``_Game``/``_Pool``."""
    from upstream_render import fc_requests, load_upstream

    from agentbench_async.envs.upstream_prompts import FC, upstream_path

    module = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/alfworld/task.py"), "alfworld_fc")
    utils = load_upstream(upstream_path(data_dir, FC, "src/server/tasks/alfworld/utils.py"), "alfworld_fc_utils")
    module.json, module.process_action, module.process_ob = json, utils.process_action, utils.process_ob  # its `from .utils import *`
    module.AgentCancelledException = type("AgentCancelledException", (Exception,), {})
    game = _Game(script)

    class Wrapper:
        def reset_env(self, env: Any) -> tuple[list[str], dict[str, Any]]:
            pool = _Pool(game)
            import asyncio

            _, state = asyncio.run(pool.open(""))
            return [state.feedback], {"admissible_commands": [state.admissible]}

        def step_env(self, env: Any, action: str) -> tuple[list[str], Any, list[bool], dict[str, Any]]:
            import asyncio

            state = asyncio.run(game.step(action))
            return [state.feedback], None, [state.done], {"won": [state.won], "admissible_commands": [state.admissible]}

    fc = object.__new__(module.ALFWorld)
    fc.logger, fc.max_step, fc.env = __import__("logging").getLogger("fc"), 20, Wrapper()
    return fc_requests(fc.alfworld_run, session, session, None)


async def test_tools_mode_is_fcs_rendering_of_a_whole_episode(tmp_path: Path, official_data_dir: Path) -> None:
    """The same replies through our session and FC's own alfworld_run (tests/upstream_render.py), with games answering
    alike: every request equal (system text, task, notices, tool results), the ending and FC's sticky status equal.
    Our answers to the calls FC leaves unanswered (alfworld.tool_replies) are left out of the comparison."""
    import asyncio

    from upstream_render import ScriptedSession

    from agentbench_async.envs.alfworld.prompts import NOT_RUN, load_tool_texts

    script = {"go to desk 1": ("You arrive at loc 2. On the desk 1, you see a pencil 1.", False),
              "take pencil 1 from desk 1": ("You pick up the pencil 1 from the desk 1.", True)}  # fmt: skip
    replies = [
        ModelReply(content="Let me look around first."),
        ModelReply(content="", tool_calls=[ToolCall("a", "take_action", json.dumps({"action": "go to desk 1"})),
                                           ToolCall("b", "take_action", json.dumps({"action": "look"}))]),
        ModelReply(content="", tool_calls=[ToolCall("c", "take_action", "{not json")]),
        ModelReply(content="", tool_calls=[ToolCall("d", "take_action", json.dumps({"action": "take pencil 1 from desk 1"}))]),
    ]
    game = _Game(script)
    task = Task(env="alfworld", split="dev", task_id="dev-000", data={"type": "pick_and_place", "prompt": "put", "game": "g"})
    (tmp_path / "game.tw-pddl").write_text("{}")
    session = ALFWorldSession(_Pool(game), task, EpisodeContext(episode_id="e", action_mode="tools"), tmp_path / "game.tw-pddl",  # type: ignore[arg-type]
                              EXAMPLE, load_prompts(official_data_dir), load_tool_texts(official_data_dir))
    messages, ours, outcome = list(await session.begin()), [], None
    for reply in replies:
        ours.append([{k: v for k, v in m.items() if v is not None} for m in messages if m.get("content") != NOT_RUN])
        step = await session.step(reply)
        messages += [reply.as_message(), *step.observation]
        outcome = step.outcome
        if outcome is not None:
            break
    assistant = [{k: v for k, v in r.as_message().items() if v is not None} for r in replies]
    theirs, result = await asyncio.to_thread(_fc_alfworld, official_data_dir, script, ScriptedSession(assistant))
    assert ours == theirs
    reward, _, finish = result
    # won (its result counts), FC's status the last unusable call's: AGENT_INVALID_ACTION
    assert outcome is not None and (outcome.status, outcome.score, outcome.paper_status) == (st.COMPLETED, 1.0, st.PAPER_AGENT_INVALID_ACTION)
    assert reward is True and finish.__name__ == "AGENT_INVALID_ACTION"
