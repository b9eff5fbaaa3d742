"""What the turns table stores is what the model was sent: every environment, text and tools mode, with the default
history (AgentBench's truncation). Each request's messages are stored rows of earlier turns, in order (the first may
carry the omission notice); every row stored before the model's last reply reached the model; in tools mode the task
(the first user message) is in every request (issue 38: FC's [system, user] layout lost it to v0.2's tail rule)."""

from __future__ import annotations

from typing import Any

import pytest
from support import require

from agentbench_async.envs import available_envs, make_env
from agentbench_async.episode import EpisodeSpec, run_episode
from agentbench_async.errors import EnvUnavailableError
from agentbench_async.history import AGENTBENCH_SEGMENT_BUDGET, history_policy
from agentbench_async.records import CallRow, TurnRow
from agentbench_async.testing import policy_agent
from agentbench_async.types import Message, ModelReply

CASES = [(name, mode) for name in available_envs() for mode in ("text", "tools")
         if mode == "text" or make_env(name).supports_tools]  # fmt: skip


def _sent_as(sent: Message, row: TurnRow) -> bool:
    """``sent`` is ``row`` as sent: the same role and text, or the text cut short. Later requests may shorten an
    earlier message as upstream does (alfworld drops the action list of old observations, kg shows the model its
    reply cut after the first action); each row must still reach the model whole once (see ``_whole``)."""
    return sent.get("role") == row.role and (row.content or "").startswith(sent.get("content") or "")


def _whole(sent: Message, row: TurnRow) -> bool:
    # the model's own replies count as sent when shown back in any form (kg's cut reply)
    return (sent.get("content") or "") == (row.content or "") or (row.role == "assistant" and not row.injected)


def _match(messages: list[Message], earlier: list[TurnRow]) -> list[TurnRow] | None:
    """The stored rows ``messages`` are, in order, starting at the latest row the first message can be (a fresh
    conversation, card_game's and mind2web's, starts again from rows stored again); None if there are none."""
    first, *rest = messages
    head = {**first, "content": (first.get("content") or "").split("\n\n[NOTICE] ")[0]}
    for start in reversed(range(len(earlier))):
        if not (_sent_as(head, earlier[start]) and _whole(head, earlier[start])):
            continue
        found, at = [earlier[start]], start + 1
        for message in rest:
            while at < len(earlier) and not _sent_as(message, earlier[at]):
                at += 1
            if at == len(earlier):
                break
            found.append(earlier[at])
            at += 1
        if len(found) == len(messages):
            return found
    return None


async def _play(name: str, mode: str, policy: str) -> tuple[list[tuple[int, list[Message]]], list[TurnRow]]:
    env = make_env(name)
    try:
        await env.start()
    except EnvUnavailableError as exc:  # os needs bubblewrap, db MariaDB: skipped locally, a failure in CI
        require(False, str(exc))
    try:
        task = next(iter(env.tasks("dev")))
        spec = EpisodeSpec(model=f"mock-{policy}", task=task, repeat=0, action_mode=mode, history="agentbench")
        inner = policy_agent(name, policy, task, spec.episode_id)
        sent: list[tuple[int, list[Message]]] = []

        async def agent(messages: list[Message], tools: Any, turn: int, calls: list[CallRow], caller: str) -> ModelReply:
            sent.append((turn, [dict(m) for m in messages]))
            return await inner(messages, tools, turn, calls, caller)

        judge = policy_agent(name, "judge", task, spec.episode_id + "#judge") if name == "ltp" else None
        record = await run_episode(env, spec, agent, judge)
    finally:
        await env.close()
    return sent, record.turns


@pytest.mark.parametrize(("name", "mode"), CASES)
@pytest.mark.parametrize("policy", ["oracle", "weak"])
async def test_every_request_is_stored_rows_and_every_stored_row_was_sent(name: str, mode: str, policy: str) -> None:
    sent, rows = await _play(name, mode, policy)
    assert sent, "the model was never called"
    reached: set[int] = set()
    for turn, messages in sent:
        earlier = [r for r in rows if r.turn < turn]
        found = _match(messages, earlier)
        assert found is not None, f"turn {turn}: the request is not stored rows in order: {[str(m)[:120] for m in messages]}"
        reached.update(r.seq for m, r in zip(messages, found) if _whole(m, r) or m is messages[0])
        if mode == "tools":  # the task: the opening's last user message (after FC's one-shot, if any)
            task = [r for r in rows if r.role == "user" and r.turn == 0][-1]
            assert any(m.get("content") == task.content for m in messages), f"turn {turn}: the task was not sent"
    last_turn = sent[-1][0]
    replies = {min(r.seq for r in rows if r.turn == t) for t in {r.turn for r in rows} - {0}}  # the model's own rows
    cut = {turn for turn, messages in sent if "\n\n[NOTICE] " in (messages[0].get("content") or "")}
    # a row may go unsent only when the request after it was cut to the budget (a long fresh conversation: card_game)
    never = [r for r in rows if r.turn < last_turn and r.seq not in reached | replies and r.turn + 1 not in cut]
    assert not never, f"stored but never sent: {[(r.turn, r.role, (r.content or '')[:80]) for r in never]}"


def test_tools_layout_keeps_system_and_task_when_the_tail_is_cut() -> None:
    shape = history_policy("agentbench")
    big = "word " * (AGENTBENCH_SEGMENT_BUDGET // 2)
    messages: list[Message] = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Here is your task."}]
    for i in range(4):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "take_action", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "tool_call_id": f"c{i}", "content": big}]
    shaped = shape(messages)
    assert shaped[0] == {"role": "system", "content": "rules\n\n[NOTICE] 6 messages are omitted."}
    assert shaped[1] == {"role": "user", "content": "Here is your task."}
    assert [m["role"] for m in shaped[2:]] == ["assistant", "tool"] and shaped[2]["tool_calls"][0]["id"] == "c3"
    short = messages[:2]
    assert shape(short) == short  # the first request: system and task, nothing omitted


def test_tools_mode_keeps_the_whole_opening_when_a_one_shot_precedes_the_task() -> None:
    """FC's kg layout: system text, a one-shot tool-call conversation, then the task. The engine passes the opening's
    length as ``keep``: a long episode cuts its own turns, never the task (v0.2's head alone would lose it)."""
    shape = history_policy("agentbench")
    opening: list[Message] = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Question: example?"}]
    for i in range(3):
        call = {"id": f"ex{i}", "type": "function", "function": {"name": "get_relations", "arguments": "{}"}}
        opening += [{"role": "assistant", "content": "Thought: example", "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"ex{i}", "content": "Observation: [a, b]"}]  # fmt: skip
    opening += [{"role": "assistant", "content": "Final Answer: #0"}, {"role": "user", "content": "the task?\nEntities: [X]"}]
    messages = list(opening)
    big = "word " * (AGENTBENCH_SEGMENT_BUDGET // 3)
    for i in range(5):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "get_relations", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "tool_call_id": f"c{i}", "content": big}]
    kept = shape(messages, keep=len(opening))
    assert kept[1:len(opening)] == opening[1:] and kept[0]["content"].startswith("rules\n\n[NOTICE] ")
    assert kept[len(opening)]["role"] == "assistant" and kept[-1]["tool_call_id"] == "c4"  # the newest turns that fit
    assert not any(m.get("content") == "the task?\nEntities: [X]" for m in shape(messages))  # the head alone loses it
