"""card_game's default mode, AgentBench v0.2's game: requests equal to upstream's own client's (replayed from
tests/fixtures/card_game_upstream/), the two conversations with the rules re-inserted, the eel/sunfish
refusal, upstream's display and digit mapping, the time limits, the texts read from --data-dir, and the fixed
game as a recorded deviation."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentbench_async import statuses as st
from agentbench_async.analytics import commands
from agentbench_async.config import build_config
from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.card_game import CardGameEnvironment
from agentbench_async.envs.card_game.agentbench_session import AgentBenchSession, TimeLimits
from agentbench_async.envs.card_game.baselines import Move
from agentbench_async.envs.card_game.protocol import ACK, TARGET_FRIEND
from agentbench_async.envs.card_game.wording import CLIENT_FILE, PROMPT_FILE, Wording, own_wording, upstream_wording
from agentbench_async.envs.upstream_prompts import V02, upstream_path
from agentbench_async.episode import EpisodeSpec, run_episode
from agentbench_async.errors import ConfigError, TaskFileError
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.records import CallRow
from agentbench_async.scheduler import Evaluation
from agentbench_async.settings import deviations
from agentbench_async.testing import policy_agent
from agentbench_async.types import Message, ModelReply

FIXTURE = Path(__file__).parents[1] / "fixtures" / "card_game_upstream" / "games.json"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Scripted:
    """An opponent replaying recorded moves (the baseline's of an upstream game)."""

    def __init__(self, player: int, moves: list[list[Any]]) -> None:
        self.player, self.name = player, "scripted"
        self.guesses = [m[1] for m in moves if m[0] == "guess"]
        self.actions = [Move(m[1], m[2], m[3]) for m in moves if m[0] == "act"]

    def guess(self, game: Any) -> tuple[int, int] | None:
        move = self.guesses.pop(0)
        return None if move is None else (move[0], move[1])

    def act(self, game: Any) -> Move:
        return self.actions.pop(0)


def _task(seat: int = 0, base: str = "baseline1", seed: int = 0) -> Task:
    return Task(env="card_game", split="test", task_id="0", data={"index": 0, "stage": 2, "base": base, "agent": seat, "seed": seed})


def _session(wording: Wording | None = None, *, seat: int = 0, opponent: list[list[Any]] | None = None,
             clock: Any = None, limits: TimeLimits = TimeLimits()) -> AgentBenchSession:  # fmt: skip
    session = AgentBenchSession(_task(seat), EpisodeContext(episode_id="e", model_seconds=clock), wording or own_wording(), limits)
    if opponent is not None:
        session.bot = _Scripted(1 - seat, opponent)  # type: ignore[assignment]
    return session


def _reply(obj: dict[str, Any]) -> ModelReply:
    return ModelReply(content=json.dumps(obj))


def _guess(pos: int, kind: str) -> ModelReply:
    return _reply({"guess_type": kind, "target_position": pos})


def _act(name: str, action: str = "active", target: int = 0) -> ModelReply:
    return _reply({"pick_fish": name, "action": action, "target_position": target})


# -- against upstream's own client ---------------------------------------------------------------------


def _games() -> list[dict[str, Any]]:
    games: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["games"]
    return games


async def test_every_request_equals_upstream_clients_in_40_replayed_games(official_data_dir: Path) -> None:
    """Each game of the fixture was played by AgentBench v0.2's own judger, engine, client and baseline with a
    scripted model; replayed here with the same opponent moves and replies, every request (every message of
    every call: the descriptions, re-inserted pairs, prompts with their stale slots, the model's kept replies)
    and the result (winner, cal_metric damage, the client's error code) must be the same."""
    wording = upstream_wording(official_data_dir)
    checked = 0
    for game in _games():
        session = _session(wording, seat=game["seat"], opponent=game["opponent"])
        sent = await session.begin()
        outcome = None
        for call, reply in zip(game["calls"], game["replies"]):
            expected = [game["contents"][i] for i in call]
            assert _digests(sent, wording, game) == expected, (game["name"], checked)
            assert [m["role"] for m in sent] == ["user", "assistant"] * (len(sent) // 2) + ["user"]
            checked += 1
            step = await session.step(ModelReply(content=reply))
            if step.outcome is not None:
                outcome = step.outcome
                break
            sent = step.observation
        assert outcome is not None, game["name"]
        upstream = game["upstream"]
        assert outcome.success == (upstream["winner"] == game["seat"]), game["name"]
        assert outcome.details["damage"] == upstream["damage"], game["name"]
        status = {"#[ERROR]1": st.INVALID_ACTION, "#[ERROR]2": st.INVALID_FORMAT}.get(upstream["error"] or "", st.COMPLETED)
        assert outcome.status == status, game["name"]
        assert outcome.details["wording"].startswith("upstream")
    assert checked == sum(len(g["calls"]) for g in _games()) == 883


def _digests(messages: list[Message], wording: Wording, game: dict[str, Any]) -> list[str]:
    """Our messages' digests; while the data dir lacks AI/client.py (so the acknowledgement is the project's)
    ours stands for upstream's, whose digest is the second message of the game's first request."""
    ack = _digest(wording.ack) if wording.source == "upstream" else game["contents"][game["calls"][0][1]]
    return [ack if m["content"] == wording.ack else _digest(m["content"]) for m in messages]


def test_the_fixture_covers_the_quirks() -> None:
    games = _games()
    replies = [r for g in games for r in g["replies"]]
    assert len(games) == 40 and {(g["seat"], g["base"]) for g in games} == {(s, b) for s in (0, 1) for b in ("baseline1", "baseline2")}
    assert any("'eel', 'action': 'active'" in r for r in replies) and any("'sunfish', 'action': 'active'" in r for r in replies)
    assert any('"pick_fish": "0"' in r for r in replies) and any('"pick_fish": "3"' in r for r in replies)
    assert {g["upstream"]["error"] for g in games} >= {None, "#[ERROR]1", "#[ERROR]2"}


async def test_first_prompt_through_the_environment_is_upstreams(official_data_dir: Path) -> None:
    """Seat 0 games start before any move: their first request is the same in every game of the fixture."""
    seat0 = [g for g in _games() if g["seat"] == 0]
    first = {tuple(g["contents"][i] for i in g["calls"][0]) for g in seat0}
    assert len(first) == 1
    env = make_env("card_game", data_dir=official_data_dir)
    await env.start()
    tasks = [t for t in env.tasks("test") if t.data["agent"] == 0]
    assert len(tasks) == 10
    for task in tasks:
        session = await env.open_session(task, EpisodeContext(episode_id=task.task_id))
        messages = await session.begin()
        assert tuple(_digests(messages, env.wording, seat0[0])) == next(iter(first)), task.task_id  # type: ignore[attr-defined]


def test_the_acknowledgement_is_read_from_client_py(official_data_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(official_data_dir / "upstream-prompts", tmp_path / "upstream-prompts")
    client = upstream_path(tmp_path, V02, CLIENT_FILE)
    client.unlink(missing_ok=True)  # a data dir without it (AgentBench's data/, or pulled before it was pinned)
    assert upstream_wording(tmp_path).ack == ACK and "own acknowledgement" in upstream_wording(tmp_path).source
    client.write_text("class Client:\n    def llm_call(self, history, prompt, system):\n        if system:\n"
                      "            history.append((system, 'Fine, let us play.'))\n")  # a stand-in, not upstream's
    wording = upstream_wording(tmp_path)
    assert (wording.ack, wording.source) == ("Fine, let us play.", "upstream")
    client.write_text("class Client:\n    def llm_call(self, history, prompt, system):\n        pass\n")
    with pytest.raises(TaskFileError, match="appends no"):
        upstream_wording(tmp_path)


def test_upstreams_acknowledgement_when_the_shared_data_has_client_py(official_data_dir: Path) -> None:
    if not upstream_path(official_data_dir, V02, CLIENT_FILE).is_file():  # shared data, not an install: no CI rule
        pytest.skip(f"{CLIENT_FILE} is not in {official_data_dir}/upstream-prompts/v0.2")
    wording = upstream_wording(official_data_dir)
    ack_hashes = {g["contents"][g["calls"][0][1]] for g in _games()}
    assert wording.source == "upstream" and {_digest(wording.ack)} == ack_hashes


async def test_a_missing_prompt_file_fails_the_run_with_one_line(tmp_path: Path) -> None:
    env = CardGameEnvironment(data_dir=tmp_path)
    with pytest.raises(TaskFileError) as info:
        await env.start()
    message = str(info.value)
    assert "\n" not in message and str(upstream_path(tmp_path, V02, PROMPT_FILE)) in message and "agentbench data pull" in message
    CardGameEnvironment(data_dir=tmp_path, options={"fixes": "true"})  # the fixed game reads no upstream file


def test_target_friend_is_upstreams_within_the_line_up(official_data_dir: Path) -> None:
    tree = ast.parse(upstream_path(official_data_dir, V02, PROMPT_FILE).read_text())
    (upstream,) = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "target_friend"]
    assert list(TARGET_FRIEND) == [name for name in upstream if name in ("spray", "flame", "eel", "sunfish")]


# -- the two conversations --------------------------------------------------------------------------------


async def test_two_conversations_with_the_rules_re_inserted_before_every_call_and_retry() -> None:
    wording = own_wording()
    session = _session(wording)
    first = await session.begin()
    assert [m["content"] for m in first] == [wording.guess_description, wording.ack, first[2]["content"]]
    retry = await session.step(ModelReply(content="no idea"))  # a failed guess try: one more (rules, ack) pair
    assert not retry.valid and retry.restart and "try 1 of 5" in (retry.error or "")
    assert [m["content"] for m in retry.observation] == [wording.guess_description, wording.ack] * 2 + [first[2]["content"]]
    assert retry.injected == frozenset(range(4))  # everything but the prompt is set-up text
    guess_reply = _guess(1, "flame")
    action = await session.step(guess_reply)  # the action conversation starts with its own rules
    assert [m["content"] for m in action.observation][:2] == [wording.action_description, wording.ack]
    assert len(action.observation) == 3 and action.restart
    after = await session.step(_act("spray"))  # the next guess: earlier pairs (only the successful try) kept
    contents = [m["content"] for m in after.observation]
    assert contents[:4] == [wording.guess_description, wording.ack, wording.guess_description, wording.ack]
    assert contents[4:6] == [first[2]["content"], guess_reply.content] and len(contents) == 9
    assert contents[6:8] == [wording.guess_description, wording.ack] and wording.action_description not in contents


async def test_what_is_sent_through_the_episode_loop_and_the_agentbench_history() -> None:
    """Through the real episode loop: each call gets only its conversation (restart), shortened by the
    3,500-segment history rule with the rules kept first, and the transcript marks the re-sent text."""
    env = CardGameEnvironment()
    task = env.get_task("test", "0")
    sent: list[list[Message]] = []
    spec = EpisodeSpec(model="mock-oracle", task=task, history="agentbench")
    oracle = policy_agent("card_game", "oracle", task, spec.episode_id)

    async def agent(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        sent.append(messages)
        return await oracle(messages, tools, turn, calls, caller)

    record = await run_episode(env, spec, agent)
    assert record.status == st.COMPLETED and record.success
    wording = env.wording
    guesses = [m for m in sent if m[0]["content"].startswith(wording.guess_description)]
    actions = [m for m in sent if m[0]["content"].startswith(wording.action_description)]
    assert len(guesses) + len(actions) == len(sent) == record.n_turns
    for messages in sent:
        firsts = [m for m in messages if m["role"] == "user" and m["content"].startswith(("Let's play",))]
        assert all(m["content"].startswith(messages[0]["content"][:200]) for m in firsts)  # never the other conversation's
    assert any("[NOTICE]" in m[0]["content"] for m in actions[3:]), "long conversations are shortened as upstream's"
    replies = [t for t in record.turns if t.role == "assistant" and not t.injected]
    assert len(replies) == record.n_turns
    assert all(t.injected for t in record.turns if t.turn > 0 and t.role == "user" and t.content == wording.action_description)


# -- upstream's client: refusals, digits, display ----------------------------------------------------------


async def test_eel_and_sunfish_skills_are_refused_and_five_refusals_crash_the_client() -> None:
    session = _session()
    await session.begin()
    await session.step(_guess(0, "flame"))
    prompt = session._prompt
    for i, reply in enumerate([_act("eel", target=1), _act("sunfish", target=1)], start=1):
        step = await session.step(reply)
        assert not step.valid and step.outcome is None and "refused when sent" in (step.error or "")
        assert step.observation[-1]["content"] == prompt and len(step.observation) == 2 * (i + 1) + 1  # no feedback
    assert session._codes == []  # upstream records no code for a refused move
    assert session.game.teams[0][3].atk == 200 and session.game.last_action[0] is None  # nothing was played
    for _ in range(3):
        step = await session.step(_act("eel"))
    outcome = step.outcome
    assert outcome is not None and outcome.status == st.COMPLETED and outcome.paper_status == st.PAPER_COMPLETED
    assert outcome.details["forfeit_cause"] == "client_crash" and outcome.details["end_reason"] == "forfeit" and not outcome.success


async def test_a_refusal_among_invalid_tries_reports_the_lowest_code() -> None:
    session = _session()
    await session.begin()
    await session.step(_guess(0, "flame"))
    for reply in [_act("eel"), _act("shark"), _act("sunfish", target=0), ModelReply(content="pass"), _act("eel")]:
        step = await session.step(reply)
    assert step.outcome is not None and step.outcome.status == st.INVALID_ACTION  # codes [1, 2]: min is 1


async def test_the_first_valid_object_is_sent_even_when_a_later_one_would_pass() -> None:
    session = _session()
    await session.begin()
    await session.step(_guess(0, "flame"))
    both = ModelReply(content=json.dumps({"pick_fish": "eel", "action": "active", "target_position": 0})
                      + " or " + json.dumps({"pick_fish": "spray", "action": "active", "target_position": 0}))  # fmt: skip
    step = await session.step(both)
    assert not step.valid and "refused" in (step.error or "")


async def test_pick_fish_digits_name_the_next_fish_as_upstreams_client() -> None:
    session = _session(opponent=[["guess", None], ["act", "normal", 0, 0]] * 5)
    await session.begin()
    await session.step(_guess(0, "flame"))
    assert not (await session.step(_act("3", "normal", 1))).valid  # "3" -> position 4: no such fish
    assert not (await session.step(_act("0", "active", 2))).valid  # a skill needs the name
    step = await session.step(_act("0", "normal", 1))  # "0" -> position 1, the flame
    assert step.valid and session.game.last_action[0] is not None and session.game.last_action[0].actor == 1
    assert step.action == '{"pick_fish": "flame", "action": "normal", "target_position": 1}'


async def test_the_display_keeps_upstreams_stale_slots_and_unknown_fish() -> None:
    # the opponent guesses nothing, acts with a normal attack of its spray on our position 0
    session = _session(opponent=[["guess", None], ["act", "normal", 0, 0]] * 5)
    await session.begin()
    await session.step(_guess(2, "flame"))  # wrong
    step = await session.step(_act("spray"))  # AOE on positions 0-3
    prompt = step.observation[-1]["content"]
    assert "\n['0', '1', '3']\n" in prompt  # position 2 was guessed (wrongly): upstream drops it anyway
    passives = json.loads(prompt.split("\n")[8])
    assert passives == {"Position: 0": "Counter", "Position: 2": "Deflect", "Position: 3": "Deflect"}
    assert "{'ACTION_FISH': '0', 'ATK': '100', 'TARGET': '[]', 'SKILL_TYPE': 'Normal'}" in prompt  # a hit on 0: slot 0 holds 0
    step = await session.step(_guess(1, "flame"))
    assert "{'ACTION_FISH': '0', 'ATK': '70', 'TARGET': '[1, 2, 3]'}" in step.observation[-1]["content"]  # slot indices
    await session.step(_act("spray", "normal", 0))
    step = await session.step(_guess(3, "sunfish"))
    # a normal attack on position 0 after the AOE: slots 1-3 still hold 1-3
    assert "{'ACTION_FISH': '0', 'ATK': '100', 'TARGET': '[1, 2, 3]'}" in step.observation[-1]["content"]


# -- time --------------------------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_decision_of_300_s_model_time_forfeits_and_an_empty_reply_too() -> None:
    clock = _Clock()
    session = _session(clock=clock)
    await session.begin()
    clock.now = 120.0
    await session.step(ModelReply(content="thinking"))  # a failed try: the decision goes on
    clock.now = 299.0
    assert (await session.step(_guess(0, "spray"))).outcome is None  # right: 50 to each enemy fish
    clock.now = 599.0  # the action decision started at 299
    outcome = (await session.step(_act("spray"))).outcome
    assert outcome is not None and outcome.status == st.COMPLETED and outcome.details["forfeit_cause"] == "time_limit"
    assert outcome.details["end_reason"] == "forfeit" and outcome.details["test_times"] == 1 and outcome.details["damage"] == 200
    empty = _session(clock=_Clock())
    await empty.begin()
    outcome = (await empty.step(ModelReply(content=""))).outcome
    assert outcome is not None and outcome.details["forfeit_cause"] == "empty_reply" and outcome.status == st.COMPLETED


async def test_a_game_reaching_600_s_is_killed_without_win_damage_or_test_time() -> None:
    clock = _Clock()
    session = _session(clock=clock)
    await session.begin()
    for t in range(1, 8):
        clock.now = 90.0 * t
        step = await session.step(_guess(0, "spray") if session.decision == "guess" else _act("spray"))
        if step.outcome is not None:
            break
    outcome = step.outcome
    assert outcome is not None and clock.now == 630.0
    assert outcome.status == st.COMPLETED and outcome.score == 0.0 and not outcome.success
    assert (outcome.details["end_reason"], outcome.details["test_times"], outcome.details["damage"]) == ("killed", 0, 0)
    assert outcome.details["damage_dealt"] > 0
    # a decision that would time out after the game's 600 s: the kill comes first
    clock2 = _Clock()
    late = _session(clock=clock2)
    await late.begin()
    for now, reply in ((200.0, _guess(0, "spray")), (350.0, _act("spray"))):
        clock2.now = now
        assert (await late.step(reply)).outcome is None
    clock2.now = 900.0  # the guess asked at 350 times out at 650, after the kill at 600
    outcome = (await late.step(_guess(1, "flame"))).outcome
    assert outcome is not None and outcome.details["end_reason"] == "killed"


async def test_model_seconds_comes_from_the_http_time_of_the_agents_calls() -> None:
    env = CardGameEnvironment()
    task = env.get_task("test", "0")
    spec = EpisodeSpec(model="slow", task=task)

    async def slow(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        calls.append(CallRow(turn=turn, attempt=1, http_status=200, latency_ms=301_000.0, caller=caller))
        return _guess(0, "spray")

    record = await run_episode(env, spec, slow)
    assert record.status == st.COMPLETED and record.details["forfeit_cause"] == "time_limit" and record.n_turns == 1
    unlimited = CardGameEnvironment(options={"decision_seconds": "0", "game_seconds": "0"})
    record = await run_episode(unlimited, spec, slow)
    assert record.details.get("forfeit_cause") != "time_limit" and record.n_turns > 1


# -- options and deviations --------------------------------------------------------------------------------


def test_options_are_checked_with_one_line() -> None:
    with pytest.raises(ConfigError, match=r"card_game: option fixes='maybe' must be true or false"):
        CardGameEnvironment(options={"fixes": "maybe"})
    with pytest.raises(ConfigError, match="fixed game .* has no time limits"):
        CardGameEnvironment(options={"fixes": "true", "decision_seconds": "300"})
    with pytest.raises(ConfigError, match="decision_seconds"):
        CardGameEnvironment(options={"decision_seconds": "-1"})
    assert CardGameEnvironment(options={"fixes": "TRUE"}).fixes and not CardGameEnvironment().fixes


def test_the_fixed_game_and_own_wording_are_deviations(tmp_path: Path) -> None:
    def settings(data_dir: str | None, **options: str) -> dict[str, str]:
        raw = {"out": str(tmp_path / "x.duckdb"), "models": ["m"], "envs": ["card_game"], "data_dir": data_dir,
               "env_options": {"card_game": options}}  # fmt: skip
        found = {d.setting: d.value for d in deviations(build_config(raw, where="test").public_dict())}
        # always: the opponents are the project's seeded Python, upstream's were C++ seeded by the clock
        assert "the project's Python engine" in found.pop("card_game.opponents")
        return found

    assert set(settings(str(tmp_path))) == {"card_game.acknowledgement"}  # no AI/client.py there
    client = upstream_path(tmp_path, V02, CLIENT_FILE)
    client.parent.mkdir(parents=True)
    client.write_text("")
    assert settings(str(tmp_path)) == {}  # AgentBench's game with its texts: no other difference
    assert settings(str(tmp_path), fixes="false") == {}
    assert set(settings(None)) == {"card_game.prompts"}
    fixed = settings(str(tmp_path), fixes="true")
    assert set(fixed) == {"card_game.fixes", "card_game.prompts"} and fixed["card_game.fixes"].startswith("true")
    assert set(settings(str(tmp_path), game_seconds="0")) == {"card_game.game_seconds"}


async def test_report_shows_the_fixed_game_beside_the_score(tmp_path: Path, official_data_dir: Path) -> None:
    server = MockModelServer(MockOptions(policy="oracle"))
    base_url = await server.start()
    try:
        raw = {"out": tmp_path / "fixed.duckdb", "envs": ["card_game"], "limit": 1, "data_dir": official_data_dir,
               "env_options": {"card_game": {"fixes": "true"}}, "models": [{"name": "mock-oracle", "base_url": base_url, "task_header": True}]}  # fmt: skip
        await Evaluation(build_config(raw, where="test"), console=Console(quiet=True), progress=False, command="run").run()
    finally:
        await server.stop()
    con = Console(width=250, record=True, color_system=None)
    assert commands.report([tmp_path / "fixed.duckdb"], html=None, json_out=False, console=con) == 0
    text = con.export_text()
    assert "card_game.fixes: true: one conversation" in text and text.index("card_game.fixes") < text.index("Scores")
    assert "differs: card_game.opponents, card_game.fixes, card_game.prompts" in text[text.index("Scores"):]  # beside the score


def test_a_data_dir_without_client_py_is_a_named_deviation(official_data_dir: Path, tmp_path: Path) -> None:
    """AgentBench's data/ lacks AI/client.py (upstream's acknowledgement): the run stores that and says so beside
    the score instead of claiming v0.2's settings; with the file there, no such entry."""
    settled = CardGameEnvironment.settled_options(official_data_dir, {})
    if upstream_path(official_data_dir, V02, CLIENT_FILE).is_file():
        assert settled == {"acknowledgement": "upstream"}
    else:
        assert settled == {"acknowledgement": "own"}
        names = [d.setting for d in CardGameEnvironment.deviations(official_data_dir, settled, "text")]
        assert names == ["card_game.opponents", "card_game.acknowledgement"]
    shutil.copytree(official_data_dir / "upstream-prompts", tmp_path / "upstream-prompts")
    upstream_path(tmp_path, V02, CLIENT_FILE).write_text("class Client:\n    def llm_call(self, history, prompt, system):\n"
                                                        "        if system:\n            history.append((system, 'Ok.'))\n")  # fmt: skip
    settled = CardGameEnvironment.settled_options(tmp_path, {})
    assert settled == {"acknowledgement": "upstream"}
    assert [d.setting for d in CardGameEnvironment.deviations(tmp_path, settled, "text")] == ["card_game.opponents"]
    assert CardGameEnvironment.settled_options(tmp_path, {"fixes": "true"}) == {"fixes": "true"}  # reads no file
