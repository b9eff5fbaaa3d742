"""ltp's host calls overlap with the player's next turn: the same calls, prompts, turns and outcome as the sequential
order (``overlap=False``: each round's restatement, merge and key comparisons done before the next question), on the
official puzzles; the player's next question is really asked while the host restates; a failure of a host call still
ends the episode as a model_error; the judge's own in-flight limit holds."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from engine_support import query, start_mock

from agentbench_async.config import build_config
from agentbench_async.envs.ltp import LTPEnvironment
from agentbench_async.episode import EpisodeSpec, run_episode
from agentbench_async.errors import ModelError
from agentbench_async.records import CallRow, EpisodeRecord
from agentbench_async.scheduler import Evaluation
from agentbench_async.testing import policy_agent
from agentbench_async.types import Message, ModelReply


def _agent(env: LTPEnvironment, policy: str, task: Any, episode_id: str, seen: list[tuple[int, str]], rng: random.Random):  # type: ignore[no-untyped-def]
    """The mock ``policy`` as an AgentFn that records (turn, prompt) and yields to the loop a random number of times, so
    the host's calls and the player's interleave differently from one call to the next."""
    inner = policy_agent(env.name, policy, task, episode_id)

    async def call(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        seen.append((turn, json.dumps(messages, ensure_ascii=False)))
        for _ in range(rng.randrange(4)):
            await asyncio.sleep(0)
        return await inner(messages, tools, turn, calls, caller)

    return call


async def _play(env: LTPEnvironment, task: Any, policy: str, seed: int) -> tuple[EpisodeRecord, list[tuple[int, str]]]:
    spec = EpisodeSpec(model=f"mock-{policy}", task=task, history="agentbench")
    rng = random.Random(seed)
    judged: list[tuple[int, str]] = []
    agent = _agent(env, policy, task, spec.episode_id, [], rng)
    judge = _agent(env, "judge", task, spec.episode_id + "#judge", judged, rng)
    return await run_episode(env, spec, agent, judge), judged


def _turns(record: EpisodeRecord) -> list[tuple[Any, ...]]:
    return [tuple(v for k, v in dataclasses.asdict(row).items() if k != "created_at") for row in record.turns]


@pytest.mark.parametrize(("language", "split", "policies"), [("en", "test", ("oracle", "weak")), ("zh", "dev", ("oracle",))])
async def test_overlapped_host_calls_give_the_sequential_games_on_the_official_puzzles(official_data_dir: Path, language: str,
                                                                                      split: str, policies: tuple[str, ...]) -> None:  # fmt: skip
    sequential = LTPEnvironment(data_dir=official_data_dir, options={"language": language, "overlap": False})
    overlapped = LTPEnvironment(data_dir=official_data_dir, options={"language": language})
    compared = 0
    for policy in policies:
        for index, task in enumerate(sequential.tasks(split)):
            (a, judged_a), (b, judged_b) = await _play(sequential, task, policy, index), await _play(overlapped, task, policy, index)
            where = f"{policy} on puzzle {task.task_id}"
            assert (a.status, a.score, a.success, a.n_turns, a.error, a.paper_status) == \
                   (b.status, b.score, b.success, b.n_turns, b.error, b.paper_status), where  # fmt: skip
            assert json.dumps(a.details) == json.dumps(b.details), where  # the game log too, in the same key order
            assert _turns(a) == _turns(b), where  # every stored turn
            # the same host prompts, each in the turn it belongs to (only their order across the two chains may differ)
            assert Counter(judged_a) == Counter(judged_b), where
            assert sorted((c.turn, c.caller) for c in a.calls) == sorted((c.turn, c.caller) for c in b.calls), where
            compared += 1
    assert compared == {"test": 50, "dev": 20}[split] * len(policies)


_TASK_DATA = {
    "story": "A man pushed his car to a hotel and said he was bankrupt.",
    "truth": "He was playing Monopoly.",
    "story_keys": "1. A man pushed his car to a hotel.\n2. He said he was bankrupt.",
    "answer_keys": "1. They were playing a board game.\n2. The car is a game token.",
    "language": "en",
}


async def test_the_next_question_is_asked_while_the_host_restates() -> None:
    """A host that restates only once the player has asked the next question: the sequential order would wait forever."""
    env = LTPEnvironment(options={"rounds": 3})
    task = next(env.tasks("dev"))
    task = dataclasses.replace(task, data=_TASK_DATA)
    asked: list[int] = []
    next_question = asyncio.Event()

    async def player(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        asked.append(turn)
        if turn == 2:
            next_question.set()
        return ModelReply(content="Is it true that they were playing a board game with tokens?")

    async def host(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        calls.append(CallRow(turn=turn, attempt=1, http_status=200, latency_ms=0.0, caller=caller))
        if len(messages) > 1:
            return ModelReply(content="Yes.")
        if messages[0]["content"].startswith("Rewrite") and turn == 1:
            await asyncio.wait_for(next_question.wait(), 30)
        return ModelReply(content="Yes" if messages[0]["content"].startswith("Compare") else "They played a board game.")

    record = await run_episode(env, EpisodeSpec(model="p", task=task), player, host)
    assert asked == [1, 2, 3] and record.status == "task_limit_exceeded" and record.score == 1.0
    # the restatement waited for turn 2's question, yet it is recorded in turn 1, where the sequential order makes it
    assert [c.turn for c in record.calls].count(1) == 3  # answer, restatement, one comparison (the first key hits)


async def test_a_failed_host_call_beside_the_next_turn_is_still_a_model_error() -> None:
    env = LTPEnvironment(options={"rounds": 5})
    task = dataclasses.replace(next(env.tasks("dev")), data=_TASK_DATA)

    async def player(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        return ModelReply(content="Is it true that they were playing a board game with tokens?")

    async def host(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        if len(messages) > 1:
            return ModelReply(content="Yes.")
        raise ModelError("judge: HTTP 500 after 5 retries")

    record = await run_episode(env, EpisodeSpec(model="p", task=task), player, host)
    assert record.status == "model_error" and "HTTP 500" in (record.error or "")
    assert record.n_turns <= 2  # noticed at the latest one player turn later


async def test_the_judges_in_flight_limit_holds_while_its_calls_overlap_the_players(tmp_path: Path) -> None:
    """Through the engine: a judge allowed one request at a time never has two in flight, though its calls run beside the
    player's (which the player's own calls overlapping the judge's show)."""
    server = await start_mock(policy="oracle", latency_ms=15)
    try:
        out = tmp_path / "ltp.duckdb"
        model = {"base_url": server.base_url, "task_header": True}
        cfg = build_config({"out": out, "envs": ["ltp"], "split": "dev", "limit": 4, "models": [{"name": "mock-oracle", **model}],
                            "judge": {"name": "mock-judge", "max_in_flight": 1, **model}}, where="test")  # fmt: skip
        summary = await Evaluation(cfg, progress=False).run()
    finally:
        await server.stop()
    assert summary.statuses == {"task_limit_exceeded": 4}
    spans = query(out, "SELECT caller, epoch(started_at), epoch(started_at) + latency_ms / 1000 FROM model_calls ORDER BY 2")
    judge = [(s, e) for caller, s, e in spans if caller == "judge"]
    assert all(later_start >= end - 1e-3 for (_, end), (later_start, _) in zip(judge, judge[1:]))  # one at a time
    agent = [(s, e) for caller, s, e in spans if caller == "agent"]
    assert any(s < je and js < e for s, e in agent for js, je in judge)  # the player asked while the host worked


async def test_a_failed_host_call_found_when_the_players_context_overflows_is_a_model_error() -> None:
    from agentbench_async.errors import ContextLimitError

    env = LTPEnvironment(options={"rounds": 5})
    task = dataclasses.replace(next(env.tasks("dev")), data=_TASK_DATA)

    async def player(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        if turn == 2:
            raise ContextLimitError("prompt too long")
        return ModelReply(content="Is it true that they were playing a board game with tokens?")

    async def host(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
        if len(messages) > 1:
            return ModelReply(content="Yes.")
        raise ModelError("judge: HTTP 500 after 5 retries")

    record = await run_episode(env, EpisodeSpec(model="p", task=task), player, host)
    assert record.status == "model_error" and "HTTP 500" in (record.error or "")  # not a context overflow with a half game
