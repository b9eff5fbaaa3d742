"""webshop: the reply format, the prompt, the round loop and its statuses (text and tools mode), the mock
policies through the real episode loop, and hostile replies."""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from agentbench_async import statuses as st
from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext, Session, Task
from agentbench_async.envs.webshop import WebShopEnvironment
from agentbench_async.envs.webshop.protocol import TEXT_RULES, parse_action
from agentbench_async.envs.webshop.site import Browser
from agentbench_async.envs.webshop.tasks import builtin_dir
from agentbench_async.testing import play
from agentbench_async.types import ModelReply, ToolCall


@pytest.fixture(scope="module")
def env() -> WebShopEnvironment:
    environment = make_env("webshop")
    assert isinstance(environment, WebShopEnvironment)
    environment.shop()  # load the built-in catalog once for the module
    return environment


def _task(env: WebShopEnvironment, index: int = 200) -> Task:
    return env.get_task("dev", str(index))


async def _session(env: WebShopEnvironment, mode: str = "text", index: int = 200) -> Session:
    session = await env.open_session(_task(env, index), EpisodeContext(episode_id=f"e{index}", action_mode=mode))  # type: ignore[arg-type]
    await session.begin()
    return session


def _text(action: str) -> ModelReply:
    return ModelReply(content=f"Thought:\nI think so.\n\nAction:\n{action}")


# -- reply format --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ("Thought:\nI think I should search.\n\nAction:\nsearch[red shoes]", "search[red shoes]"),
        ("action: click[Buy Now]", "click[Buy Now]"),
        ("Action:   \n\n   click[< Prev]", "click[< Prev]"),
        ("Action: search[a] and then b]", "search[a]"),  # lazy: up to the first ']'
        ("First Action: click[x]\nAction: click[y]", "click[x]"),  # the first match anywhere
        ("Action: click [Buy Now]", None),  # a space before '['
        ("Action click[Buy Now]", None),  # no colon
        ("Action: Click[Buy Now]", None),  # verbs are case-sensitive
        ("Action: click[]", None),
        ("click[Buy Now]", None),  # no Action: label
    ],
)
def test_the_action_is_read_with_upstreams_pattern(reply: str, action: str | None) -> None:
    assert parse_action(reply) == action


# -- prompts -------------------------------------------------------------------------------------------


async def test_text_prompt_rules_one_shot_then_the_search_page(env: WebShopEnvironment) -> None:
    session = await env.open_session(_task(env), EpisodeContext(episode_id="p"))
    messages = await session.begin()
    assert session.tools() is None
    assert [m["role"] for m in messages] == ["user", "assistant"] + ["user", "assistant"] * 4 + ["user"]
    assert messages[0]["content"] == TEXT_RULES and TEXT_RULES.startswith("\n") and TEXT_RULES.endswith("\n")
    assert "search[keywords]" in TEXT_RULES and "click[value]" in TEXT_RULES
    assert messages[1]["content"] == "Ok."
    # the one-shot: quoted page text, JSON-style actions with every clickable elided
    example = messages[2]["content"]
    assert example.startswith('Observation:\n"WebShop [SEP] Instruction: [SEP] ') and example.endswith(
        '"\n\nAvailable Actions:\n{"has_search_bar": true, "clickables": ["..."]}'
    )
    assert [parse_action(m["content"])[:6] for m in messages[3:10:2]] == ["search", "click[", "click[", "click["]
    assert parse_action(messages[9]["content"]) == "click[Buy Now]"
    instruction = _task(env).data["goal"]["instruction_text"]
    assert messages[-1]["content"] == (
        f"Observation:\nWebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search\n\n"
        "Available Actions:\n{'has_search_bar': True, 'clickables': ['search']}"
    )


def _upstream_text_start(data_dir: Path) -> list[dict[str, str]]:
    """v0.2's ``WebShop.start_sample`` injections before the first round, rebuilt from its source file's strings (taken
    out with regexes and literal_eval, independently of the environment's reader); "agent" is sent as "assistant"."""
    source = (data_dir / "upstream-prompts/v0.2/src/server/tasks/webshop/__init__.py").read_text()
    rules = ast.literal_eval(re.search(r'prompt: str = (""".*?""")', source, re.S).group(1))  # type: ignore[union-attr]
    injected = []
    for literal in re.findall(r"session\.inject\((\{[\"']role[\"'].*?\})\)\n", source):
        with contextlib.suppress(ValueError):  # {"role": "user", "content": prompt}: a name, not a literal
            injected.append(ast.literal_eval(literal))
    return [{"role": "user", "content": rules}] + [{"role": {"agent": "assistant"}.get(m["role"], m["role"]), "content": m["content"]}
                                                  for m in injected]  # fmt: skip


async def test_with_data_dir_the_first_prompt_is_upstreams_character_for_character(official_data_dir: Path) -> None:
    env = make_env("webshop", data_dir=official_data_dir, options={"webshop_data": str(builtin_dir())})  # WebShop-format goals
    expected_start = _upstream_text_start(official_data_dir)
    assert len(expected_start) == 10 and expected_start[1] == {"role": "assistant", "content": "Ok."}
    for index in (0, 7, 42, 123, 199):  # a sample of the test split
        task = env.get_task("test", str(index))
        messages = await (await env.open_session(task, EpisodeContext(episode_id="u"))).begin()
        instruction = task.data["goal"]["instruction_text"]
        first_round = (f"Observation:\nWebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search\n\n"
                       "Available Actions:\n{'has_search_bar': True, 'clickables': ['search']}")  # f"...{env.get_available_actions()}"
        assert messages == [*expected_start, {"role": "user", "content": first_round}]
    fc = yaml.safe_load((official_data_dir / "upstream-prompts/fc/configs/tasks/webshop.yaml").read_text())["default"]["parameters"]
    tools = await env.open_session(env.get_task("test", "0"), EpisodeContext(episode_id="t", action_mode="tools"))
    assert tools.tools() == fc["tools"] and fc["round"] == 20  # AgentBench FC's definitions, read at run time
    assert [d.setting for d in WebShopEnvironment.deviations(str(official_data_dir), {}, "text")] == []
    assert [d.setting for d in WebShopEnvironment.deviations(None, {"webshop_data": "x"}, "text")] == ["webshop.prompts"]
    # tools mode reads FC's system text and messages from its webshop/task.py (test_fc_tools_mode.py); what FC leaves
    # unanswered is answered (the providers require it), named
    assert [d.setting for d in WebShopEnvironment.deviations(str(official_data_dir), {}, "tools")] == ["webshop.tool_replies"]
    assert [d.setting for d in WebShopEnvironment.deviations(None, {}, "tools")] == ["webshop.tools_prompt", "webshop.tools", "webshop.tool_replies"]


async def test_tools_prompt_and_tool_definitions(env: WebShopEnvironment) -> None:
    session = await env.open_session(_task(env), EpisodeContext(episode_id="p", action_mode="tools"))
    messages = await session.begin()
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"].startswith("The initial observation:\nWebShop [SEP] Instruction: [SEP] ")
    tools = session.tools()
    assert tools is not None and [t["function"]["name"] for t in tools] == ["search_action", "click_action"]
    assert tools[0]["function"]["parameters"]["required"] == ["keywords"] and tools[1]["function"]["parameters"]["required"] == ["value"]


# -- the round loop --------------------------------------------------------------------------------------


async def test_a_reply_without_an_action_ends_the_episode_as_validation_failed(env: WebShopEnvironment) -> None:
    session = await _session(env)
    step = await session.step(ModelReply(content="Action: click [Buy Now]"))
    assert step.outcome is not None and not step.valid
    assert (step.outcome.status, step.outcome.score, step.outcome.paper_status) == (st.INVALID_FORMAT, 0.0, st.PAPER_AGENT_VALIDATION_FAILED)
    # the reason of webshop's taxonomy (reasons.py), with what the reply had nearest
    assert step.outcome.details["failure_reason"] == "action not written as search[...] or click[...]"
    assert step.outcome.error == step.error == 'action not written as search[...] or click[...]; nearest: "Action: click [Buy Now]"'
    for reply, reason in [("**Action**: search[red shoes]", 'action line not written as "Action: search[...]" or "Action: click[...]"'),
                          ("I would buy the red ones.", "no action line: prose"), ("", "empty reply")]:
        ended = await (await _session(env)).step(ModelReply(content=reply))
        assert ended.outcome is not None and ended.outcome.details["failure_reason"] == reason


async def test_an_action_that_does_not_apply_uses_the_round_and_shows_the_same_page(env: WebShopEnvironment) -> None:
    session = await _session(env)
    step = await session.step(_text("click[Add to Cart]"))
    assert step.outcome is None and not step.valid and "not a clickable" in (step.error or "")
    assert step.action == "click[Add to Cart]"
    assert step.observation[0]["content"].startswith("Observation:\nWebShop [SEP] Instruction:")
    step = await session.step(_text("search[soy candle]"))
    assert step.valid and step.observation[0]["content"].startswith("Observation:\nInstruction: [SEP] ")


@pytest.mark.parametrize(("mode", "rounds"), [("text", 10), ("tools", 20)])  # v0.2's 10 rounds; AgentBench FC's 20
async def test_the_round_limit_of_each_mode(env: WebShopEnvironment, mode: str, rounds: int) -> None:
    session = await _session(env, mode)
    reply = _text("search[candle]") if mode == "text" else ModelReply(content="", tool_calls=[ToolCall("c", "search_action", '{"keywords": "candle"}')])
    steps = [await session.step(reply) for _ in range(rounds)]
    assert [s.outcome is None for s in steps] == [True] * (rounds - 1) + [False]
    assert steps[-1].outcome is not None and steps[-1].outcome.status == st.TASK_LIMIT_EXCEEDED
    assert env.max_turns >= rounds


async def test_turn_limit_and_context_limit_statuses(env: WebShopEnvironment) -> None:
    session = await _session(env)
    outcome = await session.on_turn_limit()
    assert (outcome.status, outcome.score, outcome.paper_status) == (st.TASK_LIMIT_EXCEEDED, 0.0, st.PAPER_TASK_LIMIT_REACHED)
    outcome = await session.on_context_limit("prompt too long")
    # our status says what happened; paper_status keeps what v0.2 records (test_v02_records_an_overflow_as_validation_failed)
    assert (outcome.status, outcome.paper_status) == (st.CONTEXT_LIMIT_EXCEEDED, st.PAPER_AGENT_VALIDATION_FAILED)


def test_v02_records_an_overflow_as_validation_failed(official_data_dir: Path) -> None:
    """v0.2's start_sample compares the reply's status with "AGENT_CONTEXT_LIMIT", the status value is "agent context
    limit" (the paper word stored for it), so the overflow falls through to the action regex on None, whose failure
    sets AGENT_VALIDATION_FAILED: read out of v0.2's own file."""
    source = (official_data_dir / "upstream-prompts/v0.2/src/server/tasks/webshop/__init__.py").read_text(encoding="utf-8")
    start = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.AsyncFunctionDef) and n.name == "start_sample")
    compared = [c.comparators[0].value for c in ast.walk(start) if isinstance(c, ast.Compare)
                and ast.unparse(c.left) == "response.status" and isinstance(c.comparators[0], ast.Constant)]  # fmt: skip
    assert compared == ["AGENT_CONTEXT_LIMIT"] and compared[0] != st.PAPER_AGENT_CONTEXT_LIMIT
    handlers = [h for t in ast.walk(start) if isinstance(t, ast.Try) for h in t.handlers]
    assert any("finish_reason = SampleStatus.AGENT_VALIDATION_FAILED" in ast.unparse(h) for h in handlers)


async def test_a_failure_inside_the_site_is_an_env_error_recorded_as_task_error(env: WebShopEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    session = await _session(env)

    def broken(self: Browser, action: str) -> None:
        raise RuntimeError("index file vanished")

    monkeypatch.setattr(Browser, "step", broken)
    step = await session.step(_text("search[candle]"))
    assert step.outcome is not None
    assert (step.outcome.status, step.outcome.paper_status) == (st.ENV_ERROR, st.PAPER_TASK_ERROR)
    assert "index file vanished" in (step.outcome.error or "")


async def test_buy_now_completes_with_the_purchase_reward(env: WebShopEnvironment) -> None:
    task = _task(env)
    session = await _session(env)
    ref = task.data["reference"]
    await session.step(_text(f"search[{ref['search']}]"))
    for action in [f"click[{ref['asin']}]", *[f"click[{o}]" for o in ref["options"]]]:
        step = await session.step(_text(action))
        assert step.valid, step.error
    step = await session.step(_text("click[Buy Now]"))
    assert step.outcome is not None and step.observation == []
    outcome = step.outcome
    assert (outcome.status, outcome.score, outcome.success, outcome.paper_status) == (st.COMPLETED, 1.0, True, st.PAPER_COMPLETED)
    assert outcome.details["bought"] == ref["asin"] and outcome.details["reward_info"]["r_type"] == 1.0


async def test_tools_mode_answers_every_call_and_keeps_going_without_one(env: WebShopEnvironment) -> None:
    session = await _session(env, "tools")
    step = await session.step(ModelReply(content="Let me think."))
    assert step.outcome is None and not step.valid and step.observation[0]["role"] == "user"
    assert step.observation[0]["content"].startswith("Observation:\nYour message called no tool.")
    calls = [ToolCall("c1", "search_action", json.dumps({"keywords": "soy candle"})), ToolCall("c2", "click_action", '{"value": "buy now"}')]
    step = await session.step(ModelReply(content="", tool_calls=calls))
    assert step.valid and [m.get("tool_call_id") for m in step.observation] == ["c1", "c2"]
    assert step.observation[0]["content"].startswith("Action: search[soy candle]\n\nObservation:\nInstruction: [SEP] ")
    assert step.observation[1]["content"].startswith("Not executed")
    # as FC: another function does nothing and the page comes back as a user message; unreadable arguments get FC's
    # notice first; the call is answered (webshop.tool_replies); a number is clicked as its text
    texts = session._texts  # type: ignore[attr-defined]
    for bad, notices in ((ToolCall("c3", "checkout", "{}"), []), (ToolCall("c4", "click_action", "{not json"), [texts.unreadable])):
        step = await session.step(ModelReply(content="", tool_calls=[bad]))
        assert step.outcome is None and not step.valid and step.observation[0]["tool_call_id"] == bad.id
        assert [m["content"] for m in step.observation[1:-1]] == notices and step.observation[-1]["role"] == "user"
        assert step.observation[-1]["content"].startswith("Observation:\nInstruction: [SEP] ")
    step = await session.step(ModelReply(content="", tool_calls=[ToolCall("c5", "click_action", '{"value": 3}')]))
    assert step.observation[0]["content"].startswith("Action: click[3]\n\nObservation:\n")


# -- hostile replies -------------------------------------------------------------------------------------


async def test_hostile_actions_stay_inside_the_episode(env: WebShopEnvironment) -> None:
    a, b = await _session(env, index=200), await _session(env, index=201)
    page_b = b._browser.observation()  # type: ignore[attr-defined]
    for action in ["search[" + "<a> " * 3000 + "]", "search[<r>]", "search[<c> beauty]", "click[search]",
                   "search[{{7*7}} ${HOME} ../../etc/passwd \x00]", "click[" + "x" * 10000 + "]"]:
        step = await a.step(_text(action))
        assert step.outcome is None
    # an ASIN of the catalog that is not on the current page cannot be opened
    other = env.catalog().products[-1].asin
    step = await a.step(_text(f"click[{other}]"))
    assert not step.valid and a._browser.page == "results"  # type: ignore[attr-defined]
    assert b._browser.observation() == page_b  # type: ignore[attr-defined]


# -- mock policies through the episode loop -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_oracle_earns_full_reward_on_every_builtin_goal(env: WebShopEnvironment, mode: str) -> None:
    for split in ("dev", "test"):
        for task in env.tasks(split):
            record = await play(env, task, "oracle", action_mode=mode)
            assert (record.status, record.score) == ("completed", 1.0), (split, task.task_id, record.error, record.details)
            assert record.paper_status == st.PAPER_COMPLETED


async def test_weak_reaches_every_failure_status_in_text_mode(env: WebShopEnvironment) -> None:
    records = [await play(env, task, "weak") for task in env.tasks("dev")]
    seen = Counter((r.status, r.paper_status) for r in records)
    assert set(seen) == {
        (st.COMPLETED, st.PAPER_COMPLETED),
        (st.INVALID_FORMAT, st.PAPER_AGENT_VALIDATION_FAILED),
        (st.TASK_LIMIT_EXCEEDED, st.PAPER_TASK_LIMIT_REACHED),
        (st.CONTEXT_LIMIT_EXCEEDED, st.PAPER_AGENT_VALIDATION_FAILED),  # v0.2's string-compare quirk, recorded as v0.2 did
    }
    completed = [r.score for r in records if r.status == st.COMPLETED]
    # buying the first hit without options: partial rewards (a lucky full match is possible, not typical)
    assert any(0 < s < 1 for s in completed) and sum(completed) / len(completed) < 0.9
    assert all(r.score == 0.0 for r in records if r.status != st.COMPLETED)
    assert all(r.n_turns == 10 for r in records if r.status == st.TASK_LIMIT_EXCEEDED)


async def test_weak_in_tools_mode_uses_up_the_rounds_instead_of_failing_the_format(env: WebShopEnvironment) -> None:
    records = [await play(env, task, "weak", action_mode="tools") for task in env.tasks("dev")]
    assert {r.status for r in records} == {st.COMPLETED, st.TASK_LIMIT_EXCEEDED, st.CONTEXT_LIMIT_EXCEEDED}
    limited = [r for r in records if r.status == st.TASK_LIMIT_EXCEEDED]
    assert any(not t.valid for r in limited for t in r.turns if t.role == "assistant")
