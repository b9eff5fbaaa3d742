"""card_game environment: samples, the JSON protocol with retries, statuses, metric and mock policies.

The session tests here drive the fixed game (``FixedSession``); AgentBench's game, the default mode, is tested
in test_card_game_agentbench.py. The mock policies are played through the real episode loop in both modes."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agentbench_async import statuses as st
from agentbench_async.config import build_config
from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext, Outcome, Task
from agentbench_async.envs.card_game import MAX_REPLIES, CardGameEnvironment
from agentbench_async.envs.card_game.engine import FISH_IDS, Game
from agentbench_async.envs.card_game.policies import WEAK_MODES
from agentbench_async.envs.card_game.protocol import (
    ACTION_END,
    FORMAT_FAILURE,
    GUESS_END,
    brace_spans,
    INVALID_MOVE,
    description,
    parse_action,
    parse_guess,
)
from agentbench_async.envs.card_game.session import FixedSession, game_score
from agentbench_async.envs.card_game.tasks import generate
from agentbench_async.errors import ConfigError, TaskFileError
from agentbench_async.resources import environments_dir
from agentbench_async.testing import play
from agentbench_async.types import ModelReply
from support import load_generator

# -- samples -----------------------------------------------------------------------------------------


def test_builtin_splits_are_upstreams_generation_12_dev_20_test() -> None:
    env = CardGameEnvironment()
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert (len(dev), len(test)) == (12, 20)
    for tasks, repeats in ((dev, 3), (test, 5)):
        for i, task in enumerate(tasks):
            assert task.task_id == str(i) and task.source == "builtin"
            assert task.data["stage"] == 2
            assert task.data["base"] == ["baseline1", "baseline2"][i // (2 * repeats)]
            assert task.data["agent"] == (i // repeats) % 2
    assert len({t.data["seed"] for t in dev + test}) == 32  # no game repeats


def test_data_dir_uses_the_generation_itself_with_the_data_readme_counts(official_data_dir: Path) -> None:
    # AgentBench ships no card_game data: the samples are generated in code (12 dev / 20 std).
    env = make_env("card_game", data_dir=official_data_dir)
    dev, test = list(env.tasks("dev")), list(env.tasks("test"))
    assert (len(dev), len(test)) == (12, 20)
    assert all(t.source == "official" for t in dev + test)
    assert [t.data for t in test] == [t.data for t in CardGameEnvironment().tasks("test")]


def test_test_time_option_generates_more_games_in_the_same_order() -> None:
    env = CardGameEnvironment(options={"test_time": "25"})
    tasks = list(env.tasks("test"))
    assert len(tasks) == 100
    assert [(t.data["base"], t.data["agent"]) for t in tasks[::25]] == [("baseline1", 0), ("baseline1", 1), ("baseline2", 0), ("baseline2", 1)]
    with pytest.raises(ConfigError, match="test_time"):
        CardGameEnvironment(options={"test_time": "many"})
    with pytest.raises(TaskFileError, match="unknown split"):
        list(env.tasks("train"))


def test_committed_suites_match_the_generator(tmp_path: Path) -> None:
    load_generator("card_game").write(tmp_path)
    for name in ("dev.json", "test.json"):
        fresh = (tmp_path / name).read_bytes()
        assert fresh == (environments_dir() / "card_game" / name).read_bytes(), f"run environments/card_game/generate.py ({name})"
    assert json.loads((tmp_path / "dev.json").read_text()) == generate("dev")


def test_a_broken_builtin_record_is_a_one_line_task_file_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentbench_async.envs.card_game import tasks as tasks_module

    bad = tmp_path / "dev.json"
    bad.write_text(json.dumps([{"index": 0, "stage": 2, "base": "baseline3", "agent": 0, "seed": 0}]))
    monkeypatch.setattr(tasks_module, "builtin_path", lambda split: bad)
    with pytest.raises(TaskFileError, match=r"record 0: 'base' must be one of baseline1, baseline2"):
        list(CardGameEnvironment().tasks("dev"))


# -- tools mode, limits --------------------------------------------------------------------------------


async def test_tools_mode_is_refused_with_one_line() -> None:
    env = CardGameEnvironment()
    task = next(iter(env.tasks("dev")))
    with pytest.raises(ConfigError, match="no tools mode"):
        await env.open_session(task, EpisodeContext(episode_id="e", action_mode="tools"))
    assert env.supports_tools is False


def test_config_refuses_tools_mode_for_card_game(tmp_path: Path) -> None:
    raw = {"out": str(tmp_path / "x.duckdb"), "envs": "card_game", "action_mode": "tools", "models": [{"name": "m"}]}
    with pytest.raises(ConfigError, match="card_game.*no tools mode"):
        build_config(raw)


def test_turn_cap_is_upstreams_ceiling_of_replies() -> None:
    # 32 turns as player 0, a guess and an action each, 5 tries per decision
    assert CardGameEnvironment.max_turns == MAX_REPLIES == 320


# -- parsing -------------------------------------------------------------------------------------------


def test_guess_parsing_follows_upstream() -> None:
    game = Game()
    game.teams[1][3].hp, game.teams[1][3].dead = 0, True
    assert parse_guess('I think {"guess_type": "eel", "target_position": 2}', game, 0).move == (2, FISH_IDS["eel"])
    assert parse_guess("{'guess_type': 'flame', 'target_position': '1'}", game, 0).move == (1, 2)  # quotes, "1"
    assert parse_guess('{"a": 1} then {"guess_type": "spray", "target_position": 0}', game, 0).move == (0, 1)
    for reply in (
        '{"guess_type": "Eel", "target_position": 2}',  # exact lower-case names
        '{"guess_type": "shark", "target_position": 2}',
        '{"guess_type": "eel", "target_position": 3}',  # dead
        '{"guess_type": "eel", "target_position": 2.0}',
        '{"guess_type": "eel"}',
    ):
        parsed = parse_guess(reply, game, 0)
        assert parsed.move is None and parsed.code == INVALID_MOVE, reply
    assert parse_guess("eel at 2", game, 0).code == FORMAT_FAILURE
    # non-greedy braces: a nested object is cut at its first "}" and never parses
    assert parse_guess('{"guess_type": "eel", "extra": {"x": 1}, "target_position": 2}', game, 0).code == FORMAT_FAILURE


def test_action_parsing_and_translation() -> None:
    game = Game()
    game.teams[0][1].hp, game.teams[0][1].dead = 0, True  # own flame dead
    game.teams[1][0].hp, game.teams[1][0].dead = 0, True  # enemy spray dead

    def move(reply: str) -> Any:
        parsed = parse_action(reply, game, 0).move
        return None if parsed is None else (parsed.kind, parsed.actor, parsed.target)

    assert move('{"pick_fish": "spray", "action": "normal", "target_position": 2}') == ("normal", 0, 2)
    assert move('{"pick_fish": "spray", "action": "active", "target_position": 9}') == ("active", 0, None)  # AOE: target ignored
    assert move('{"pick_fish": "eel", "action": "active", "target_position": 0}') == ("active", 2, None)  # fix: eel AOE works
    assert move('{"pick_fish": "sunfish", "action": "active", "target_position": 2}') == ("active", 3, 2)  # fix: sunfish infight
    assert move('{"pick_fish": "3", "action": "normal", "target_position": "1"}') == ("normal", 3, 1)  # fix: digits = positions
    for reply in (
        '{"pick_fish": "flame", "action": "normal", "target_position": 1}',  # dead actor
        '{"pick_fish": "spray", "action": "normal", "target_position": 0}',  # dead target
        '{"pick_fish": "sunfish", "action": "active", "target_position": 3}',  # infight on itself
        '{"pick_fish": "sunfish", "action": "active", "target_position": 1}',  # infight on a dead teammate
        '{"pick_fish": "spray", "action": "skill", "target_position": 1}',
        '{"pick_fish": "spray", "action": "active", "target_position": "all"}',  # must still be an integer
        '{"pick_fish": 0, "action": "normal", "target_position": 1}',
        "[1, 2]",
    ):
        parsed = parse_action(reply, game, 0)
        assert parsed.move is None, reply
        assert parsed.code == (FORMAT_FAILURE if reply.startswith("[") else INVALID_MOVE), reply
    assert parse_action("", game, 0).code == FORMAT_FAILURE


def test_candidate_scan_equals_upstreams_regex_and_is_linear() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        text = "".join(rng.choice("{}ab'\" :,") for _ in range(rng.randint(0, 30)))
        assert brace_spans(text) == re.findall(r"\{[\w\W]*?\}", text), text
    hostile = "{" * 200_000 + "x"
    start = time.perf_counter()
    assert parse_action(hostile, Game(), 0).code == FORMAT_FAILURE
    assert time.perf_counter() - start < 1.0  # the regex would take minutes on this


def test_description_gives_the_rules_the_fish_and_both_formats() -> None:
    text = description()
    for needle in ("400 health", "200 attack points", "half of its attack points", "50 damage", "more fish alive",
                   "Counter", "Deflect", "Infight", "AOE", "35%", "75 damage", "140 attack points", "'pick_fish'",
                   "'guess_type'", "'target_position'", GUESS_END, ACTION_END):  # fmt: skip
        assert needle in text, needle
    assert "keep 70% of the damage" in text  # fix: upstream's text had the split the wrong way round


# -- the session -----------------------------------------------------------------------------------------


def _task(base: str = "baseline1", agent: int = 0, seed: int = 0) -> Task:
    return Task(env="card_game", split="dev", task_id="0", data={"index": 0, "stage": 2, "base": base, "agent": agent, "seed": seed})


async def _session(task: Task | None = None) -> tuple[FixedSession, list[dict[str, Any]]]:
    session = FixedSession(task or _task(), EpisodeContext(episode_id="e"))
    return session, list(await session.begin())


def _guess(pos: int, kind: str) -> ModelReply:
    return ModelReply(content=json.dumps({"guess_type": kind, "target_position": pos}))


def _act(name: str, action: str = "active", target: int = 0) -> ModelReply:
    return ModelReply(content=json.dumps({"pick_fish": name, "action": action, "target_position": target}))


async def test_first_prompt_is_rules_then_acknowledgement_then_the_guess_prompt() -> None:
    _, messages = await _session()
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    prompt = messages[2]["content"]
    assert prompt.startswith("\n") and prompt.endswith(GUESS_END + "\n")
    assert "['0', '1', '2', '3']" in prompt
    assert "{'ACTION_FISH': 'None', 'ATK': 'None', 'TARGET': 'None', 'SKILL_TYPE': 'None'}" in prompt


async def test_as_second_mover_the_opponent_has_already_played() -> None:
    session, messages = await _session(_task(agent=1))
    assert session.game.turns[0] == 1 and session.game.current == 1
    assert "'ACTION_FISH': 'None'" not in messages[2]["content"]


async def test_a_turn_is_a_guess_then_an_action_then_the_opponent_plays() -> None:
    session, _ = await _session()
    step = await session.step(_guess(2, "eel"))
    assert step.valid and step.outcome is None and step.action == '{"guess_type": "eel", "target_position": 2}'
    prompt = step.observation[0]["content"]
    assert prompt.endswith(ACTION_END + "\n")
    state = json.loads(prompt.split("\n")[2])
    assert [f["HP"] for f in state["Enemy"]] == ["350"] * 4
    assert [f["ID"] for f in state["Enemy"]] == ["unknown", "unknown", "eel", "unknown"]
    assert {f["ATK"] for f in state["Enemy"]} == {"unknown"}
    assert [f["ID"] for f in state["You"]] == ["spray", "flame", "eel", "sunfish"]
    step = await session.step(_act("spray"))
    assert step.valid and step.outcome is None
    assert session.game.turns == [1, 1]  # the opponent answered inside the step
    guess_prompt = step.observation[0]["content"]
    assert guess_prompt.endswith(GUESS_END + "\n")
    assert "\nTrue\n" in guess_prompt  # the previous guess was right
    assert "['0', '1', '3']" in guess_prompt  # fix: only revealed positions leave the list


async def test_failed_tries_resend_the_same_prompt_and_the_fifth_forfeits() -> None:
    session, messages = await _session()
    await session.step(_guess(0, "spray"))
    prompt = session._prompt
    steps = [await session.step(ModelReply(content=text)) for text in ("no json", "", "{'pick_fish': 'shark', 'action': 'normal', 'target_position': 1}", "{bad}")]
    for i, step in enumerate(steps, start=1):
        assert not step.valid and step.outcome is None
        assert step.observation == [{"role": "user", "content": prompt}]  # same prompt, no feedback
        assert f"try {i} of 5" in (step.error or "")
    last = await session.step(ModelReply(content="still nothing"))
    assert last.outcome is not None
    outcome = last.outcome
    assert outcome.status == st.INVALID_ACTION  # one try had parseable JSON: upstream code 1
    assert outcome.paper_status == st.PAPER_AGENT_INVALID_ACTION
    assert outcome.details["end_reason"] == "forfeit" and outcome.details["win_round"] == 0
    assert outcome.details["damage"] == 200  # the right guess hurt every enemy fish
    assert outcome.score == pytest.approx(0.3 * 200 / 1600)
    assert not outcome.success


async def test_five_replies_without_json_are_invalid_format() -> None:
    session, _ = await _session()
    await session.step(_guess(0, "flame"))
    for _ in range(4):
        assert (await session.step(ModelReply(content="attack!"))).outcome is None
    outcome = (await session.step(ModelReply(content=""))).outcome
    assert outcome is not None and outcome.status == st.INVALID_FORMAT
    assert outcome.paper_status == st.PAPER_AGENT_VALIDATION_FAILED
    assert outcome.score == 0.0


async def test_a_retry_that_succeeds_continues_the_game() -> None:
    session, _ = await _session()
    await session.step(_guess(0, "flame"))
    for _ in range(4):
        await session.step(ModelReply(content="hmm"))
    step = await session.step(_act("flame", "active", 3))
    assert step.valid and step.outcome is None and session.game.teams[0][1].atk == 340


async def test_five_failed_guesses_mean_no_guess_without_penalty() -> None:
    session, _ = await _session()
    for _ in range(4):
        step = await session.step(ModelReply(content='{"guess_type": "whale", "target_position": 0}'))
        assert step.outcome is None and step.observation[0]["content"].endswith(GUESS_END + "\n")
    step = await session.step(ModelReply(content="pass"))
    assert step.outcome is None and not step.valid
    assert step.observation[0]["content"].endswith(ACTION_END + "\n")
    assert session.game.last_guess[0] is not None and session.game.last_guess[0].pos is None
    assert [f.hp for f in session.game.teams[1]] == [400] * 4


async def test_guessing_a_revealed_fish_silently_becomes_no_guess() -> None:
    session, _ = await _session()
    await session.step(_guess(1, "flame"))
    await session.step(_act("spray"))
    hp = [f.hp for f in session.game.teams[1]]
    step = await session.step(_guess(1, "flame"))
    assert step.valid and [f.hp for f in session.game.teams[1]] == hp
    await session.step(_act("spray"))
    assert "\nFalse\n" in session._prompt  # no guess counts as not right


async def test_eel_and_sunfish_skills_work_through_the_protocol() -> None:
    session, _ = await _session()
    await session.step(_guess(0, "flame"))
    await session.step(_act("sunfish", "active", 0))
    assert session.game.teams[0][3].atk == 340
    await session.step(_guess(0, "flame"))
    await session.step(_act("eel", "active", 0))
    assert session.game.last_action[0] is not None and session.game.last_action[0].skill == "AOE"
    assert session.game.last_action[0].actor == 2


async def test_enemy_passives_shows_only_the_last_two_actions() -> None:
    session, _ = await _session(_task(base="baseline2"))
    await session.step(_guess(0, "flame"))
    step = await session.step(_act("spray"))  # our AOE makes the enemy eel and sunfish deflect
    prompt = step.observation[0]["content"]
    passives = json.loads(prompt.split("\n")[8])
    assert passives == {"Position: 2": "Deflect", "Position: 3": "Deflect"}


async def test_context_overflow_forfeits_but_keeps_the_damage_done() -> None:
    session, _ = await _session()
    await session.step(_guess(0, "spray"))
    outcome = await session.on_context_limit("prompt too long")
    assert outcome.status == st.CONTEXT_LIMIT_EXCEEDED
    assert outcome.paper_status == st.PAPER_AGENT_CONTEXT_LIMIT
    assert outcome.details["damage"] == 200 and outcome.score == pytest.approx(0.3 * 200 / 1600)
    turn_limit = await session.on_turn_limit()
    assert turn_limit.status == st.TASK_LIMIT_EXCEEDED and turn_limit.paper_status == st.PAPER_TASK_LIMIT_REACHED


async def test_a_won_game_is_completed_with_upstreams_meta() -> None:
    session, _ = await _session()
    session.game.teams[1][0].hp = 40  # the enemy is nearly dead
    for fish in session.game.teams[1][1:]:
        fish.hp, fish.dead = 0, True
    step = await session.step(_guess(0, "spray"))  # the right guess finishes it
    outcome = step.outcome
    assert outcome is not None and outcome.status == st.COMPLETED and outcome.paper_status == st.PAPER_COMPLETED
    assert outcome.success and outcome.score == 1.0
    details = outcome.details
    assert (details["win_round"], details["damage"], details["takedown"], details["test_times"]) == (1, 1600, 4, 1)
    assert details["winner"] == "model" and details["end_reason"] == "all_dead" and details["full_play"] == 1


def test_game_score_is_the_weighted_sum() -> None:
    assert game_score(True, 1600) == 1.0
    assert game_score(False, 800) == pytest.approx(0.15)
    assert game_score(True, 0) == pytest.approx(0.7)


# -- mock policies through the real episode loop ---------------------------------------------------------


def _upstream_score(outcomes: list[Outcome]) -> float:
    """calculate_overall of AgentBench v0.2 over a list of games."""
    wins = sum(o.details["win_round"] for o in outcomes)
    tests = sum(o.details["test_times"] for o in outcomes)
    damage = sum(o.details["damage"] for o in outcomes)
    return 0.7 * wins / tests + min(0.3, 0.3 * damage / (1600 * len(outcomes)))


FIXED = {"fixes": "true"}


@pytest.mark.parametrize("history", ["full", "agentbench"])
@pytest.mark.parametrize("options", [{}, FIXED], ids=["agentbench", "fixed"])
@pytest.mark.parametrize("split", ["dev", "test"])
async def test_oracle_wins_every_builtin_sample_with_the_top_score(split: str, options: dict[str, str], history: str) -> None:
    env = CardGameEnvironment(options=options)
    for task in env.tasks(split):
        record = await play(env, task, "oracle", history=history)
        assert record.status == st.COMPLETED, (task.task_id, record.error)
        assert record.score == 1.0 and record.success, (task.task_id, record.details)
        assert record.details["mode"] == ("fixed" if options else "agentbench")
        failed = [t for t in record.turns if t.role == "assistant" and t.valid is False]
        if options:
            assert not failed
        else:  # AgentBench's guess prompt hides which enemies live: once all living ones are known, a try may name a dead one
            assert all("is not a living enemy fish" in (t.error or "") for t in failed), [t.error for t in failed]


@pytest.mark.parametrize("options", [{}, FIXED], ids=["agentbench", "fixed"])
async def test_oracle_wins_many_more_seeds(options: dict[str, str]) -> None:
    env = CardGameEnvironment(options={"test_time": "15", **options})
    records = [await play(env, task, "oracle") for task in env.tasks("test")]
    assert [r.score for r in records] == [1.0] * 60


@pytest.mark.parametrize("options", [{}, FIXED], ids=["agentbench", "fixed"])
async def test_weak_reaches_every_failure_status_and_the_mean_score_is_upstreams_metric(options: dict[str, str]) -> None:
    env = CardGameEnvironment(options=options)
    records = [await play(env, task, "weak") for task in list(env.tasks("dev")) + list(env.tasks("test"))]
    statuses = {r.status for r in records}
    assert statuses == {st.COMPLETED, st.INVALID_FORMAT, st.INVALID_ACTION, st.CONTEXT_LIMIT_EXCEEDED}
    assert not any(r.success for r in records)
    assert any(not t.valid for r in records if r.status == st.COMPLETED for t in r.turns if t.role == "assistant")
    assert len(WEAK_MODES) == 5
    # the mean of per-game scores is AgentBench's overall metric over the same games
    games = [Outcome(status=r.status, score=r.score, details=r.details) for r in records if r.details]
    assert len(games) == len(records)
    mean = sum(r.score for r in records) / len(records)
    assert mean == pytest.approx(_upstream_score(games))
    assert 0 < mean < 0.3


@pytest.mark.parametrize("options", [{}, FIXED], ids=["agentbench", "fixed"])
async def test_oracle_records_one_turn_per_decision(options: dict[str, str]) -> None:
    env = CardGameEnvironment(options=options)
    task = env.get_task("dev", "0")
    record = await play(env, task, "oracle")
    turns = record.details["model_turns"]
    assert record.n_turns == 2 * turns  # a guess and an action per turn, no retries
    replies = [t for t in record.turns if t.role == "assistant" and not t.injected]  # not the acknowledgements
    assert len(replies) == record.n_turns
    assert all(isinstance(t.action, str) and t.action.startswith("{") for t in replies)



def _random_reply(rng: random.Random, session: FixedSession) -> str:
    """Mostly legal moves, sometimes broken ones: what a careless model sends."""
    game, seat = session.game, session.seat
    roll = rng.random()
    if roll < 0.08:
        return rng.choice(["", "pass", "{oops}", '{"pick_fish": "shark", "action": "normal", "target_position": 1}'])
    if session.decision == "guess":
        living = [f.pos for f in game.teams[1 - seat] if not f.dead]
        pos = rng.choice(living) if roll < 0.95 else 7
        return json.dumps({"guess_type": rng.choice(["spray", "flame", "eel", "sunfish"]), "target_position": pos})
    mine = [f for f in game.teams[seat] if not f.dead]
    actor = rng.choice(mine)
    if rng.random() < 0.5:
        target = rng.choice([f.pos for f in game.teams[1 - seat] if not f.dead])
        return f"Attack! {json.dumps({'pick_fish': actor.kind, 'action': 'normal', 'target_position': target})}"
    mates = [f.pos for f in mine if f.pos != actor.pos] or [actor.pos]
    return str({"pick_fish": actor.kind, "action": "active", "target_position": rng.choice(mates)})  # single quotes


async def test_random_play_through_the_session_always_ends_with_a_valid_outcome() -> None:
    allowed = {st.COMPLETED, st.INVALID_FORMAT, st.INVALID_ACTION}
    for seed in range(120):
        rng = random.Random(seed)
        session, _ = await _session(_task(base=("baseline1", "baseline2")[seed % 2], agent=(seed // 2) % 2, seed=seed))
        outcome = None
        for _ in range(MAX_REPLIES):
            step = await session.step(ModelReply(content=_random_reply(rng, session)))
            if step.outcome is not None:
                outcome = step.outcome
                break
            assert step.observation and step.observation[0]["content"].endswith(("guess.\n", "action.\n"))
        assert outcome is not None, seed
        assert outcome.status in allowed and 0.0 <= outcome.score <= 1.0
        assert outcome.success == (outcome.details["winner"] == "model")
        assert outcome.details["end_reason"] in ("all_dead", "state_limit", "forfeit")
        assert outcome.score == pytest.approx(game_score(outcome.success, outcome.details["damage"]))


async def test_the_same_replies_replay_the_same_game_and_the_run_seed_changes_the_opponent() -> None:
    async def run(run_seed: int) -> list[str]:
        session = FixedSession(_task(), EpisodeContext(episode_id="e", seed=run_seed))
        await session.begin()
        rng = random.Random(1)
        while True:
            step = await session.step(ModelReply(content=_random_reply(rng, session)))
            if step.outcome is not None:
                return step.outcome.details["log"]

    assert await run(0) == await run(0)
    assert await run(0) != await run(3)
