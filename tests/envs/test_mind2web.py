"""mind2web protocol: page pruning/rendering, reply parsing, metrics, the knockout rounds (each a fresh
conversation) and the status each ending gets, ours and upstream's."""

from __future__ import annotations

from typing import Any

import pytest

from agentbench_async import statuses as st
from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.mind2web.dom import PageError, render_round
from agentbench_async.envs.mind2web.protocol import Reply, action_f1, gold_action, initial_pool, parse_reply, step_metrics
from agentbench_async.episode import EpisodeSpec, run_episode
from agentbench_async.errors import ConfigError, ContextLimitError
from agentbench_async.records import EpisodeRecord
from agentbench_async.types import Message, ModelReply

SHOP = (
    '<html backend_node_id="1"><body backend_node_id="2"><header backend_node_id="3">'
    '<a backend_node_id="4" title="home"><text backend_node_id="5">Demo Shop</text></a>'
    '<input backend_node_id="6" type="search" name="q" placeholder="Search products"/>'
    '<button backend_node_id="7" type="submit" class="btn-primary verylongclassname-x"><text backend_node_id="8">Search</text></button></header>'
    '<div backend_node_id="9"><div backend_node_id="10"><p backend_node_id="11"><text backend_node_id="12">Free returns &amp; "fast" shipping</text></p></div></div>'
    '<select backend_node_id="13" aria_label="Sort by"><option backend_node_id="14" value="low" option_selected="true">'
    '<text backend_node_id="15">Price: low to high</text></option></select></body></html>'
)


# -- rendering ------------------------------------------------------------------------------------------


def test_a_round_shows_only_its_candidates_with_fresh_ids_in_document_order() -> None:
    rnd = render_round(SHOP, ["13", "6", "4"])
    assert rnd.page == (
        '<html><body><header><a id=0 home>Demo Shop</a><input id=1 search q search products />'
        '<button submit btn-primary>Search</button></header>'
        '<select id=2 sort by><option low true>Price: low to high</option></select></body></html>'
    )
    # choices follow the page, not the order the candidates were given in
    assert [c[0] for c in rnd.choices] == ["4", "6", "13"]
    assert rnd.choices[0][1] == "<a id=0 home>Demo Shop</a>"
    assert rnd.choices[2][1] == "<select id=2 sort by><option low true>Price: low to high</option></select>"


def test_pruning_drops_far_elements_and_unwraps_empty_wrappers() -> None:
    rnd = render_round(SHOP, ["7"])
    assert "Free returns" not in rnd.page  # not near the candidate
    rnd = render_round(SHOP, ["11"])
    # the two id-less <div> wrappers around the candidate's paragraph are unwrapped; entities decoded
    assert '<body><a home>Demo Shop</a>' not in rnd.page
    assert '<p id=0>Free returns & fast shipping</p>' in rnd.page


@pytest.mark.parametrize(
    ("html", "ids", "message"),
    [
        (SHOP, ["99"], "candidate '99' is not on the page"),
        ("<html backend_node_id='1'><body>", ["1"], "not well-formed XML"),
        ('<html backend_node_id="1"><a backend_node_id="2"><text backend_node_id="3"/></a></html>', ["2"], "empty <text/>"),
        (SHOP, ["5"], "is a <text> node"),
    ],
)
def test_unrenderable_pages_are_page_errors(html: str, ids: list[str], message: str) -> None:
    with pytest.raises(PageError, match=message):
        render_round(html, ids)


# -- parsing and metrics ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "letter", "action", "readable"),
    [
        ("Thought: pick it.\nAnswer: C.\nAction: TYPE\nValue: red shoes", "C", "TYPE red shoes", True),
        ("Answer: B.\nAction: CLICK", "B", "CLICK ", True),
        ("Answer: B.\nAction: CLICK\nValue: None", "B", "CLICK None", True),
        ("answer: b\nAction: CLICK", "A", "CLICK ", False),  # case-sensitive: read as A
        ("Answer:  B", "A", " ", False),  # exactly one space
        ("Answer: G.", "A", " ", False),  # only A-F
        ("Answer: D. or maybe Answer: B.", "D", " ", True),  # the first one counts
        ("Answer: E\nAction: SELECT\nValue: Price: low to high\nValue: other", "E", "SELECT Price: low to high", True),
        ("Answer: C\nAction: CLICKED", "C", "CLICK ", True),
    ],
)
def test_reply_parsing_is_upstreams(reply: str, letter: str, action: str, readable: bool) -> None:
    assert parse_reply(reply) == Reply(letter, action, readable)


def test_action_f1_is_over_token_sets_and_case_sensitive() -> None:
    assert action_f1("CLICK None", "CLICK ") == pytest.approx(2 / 3)
    assert action_f1("TYPE red shoes", "TYPE red shoes") == 1.0
    assert action_f1("TYPE shoes red red", "TYPE red shoes") == 1.0
    assert action_f1("TYPE Red shoes", "TYPE red shoes") == pytest.approx(2 / 3)
    assert action_f1(" ", " ") == 1.0 and action_f1("", "CLICK ") == 0.0 and action_f1("TYPE x", "CLICK ") == 0.0
    target = {"element": ["7", "8"], "action": "CLICK "}
    assert step_metrics(("8", "CLICK "), target) == {"element_correct": True, "action_f1": 1.0, "step_success": True}
    assert step_metrics(("8", "CLICK None"), target)["step_success"] is False
    assert step_metrics(("", ""), None) == {"element_correct": False, "action_f1": 0.0, "step_success": False}


def test_the_gold_action_is_rendered_and_read_back_as_upstream() -> None:
    # upstream: format_input_multichoice(sample, [first positive], first positive)'s target, then postprocess_action
    assert gold_action(SHOP, "7", "CLICK", "") == "CLICK "
    assert gold_action(SHOP, "13", "SELECT", " Pickup ") == "SELECT Pickup"
    assert gold_action(SHOP, "6", "TYPE", "line one\nline two") == "TYPE line one"  # Value: (.*)$ takes one line
    assert gold_action(SHOP, "6", "TYPE", "") == "TYPE "  # 'Value: ' stripped to 'Value:' no longer matches
    assert gold_action(SHOP, "6", "TYPE", "Action: CLICK") == "TYPE Action: CLICK"  # the first Action: line wins
    for bad in ("5", "99"):  # a <text> node or an id not on the page: upstream's loader crashed
        with pytest.raises(PageError):
            gold_action(SHOP, bad, "CLICK", "")


def test_the_pool_is_the_top_10_shuffled_per_sample() -> None:
    data = {
        "index": 7,
        "pos_candidates": [{"backend_node_id": "p", "rank": 3}],
        "neg_candidates": [{"backend_node_id": f"n{i}", "rank": r} for i, r in enumerate([0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11])],
    }
    pool = initial_pool(data)
    assert sorted(pool) == sorted(["p"] + [f"n{i}" for i in range(9)])  # ranks 10 and 11 never shown
    assert initial_pool(data) == pool  # no global random state: the same whatever ran before
    assert initial_pool({**data, "index": 8}) != pool


# -- episodes -------------------------------------------------------------------------------------------------


def _task() -> Task:
    env = make_env("mind2web")
    return next(t for t in env.tasks("dev") if len(initial_pool(t.data)) == 10)


async def _scripted(task: Task, replies: list[str | None]) -> tuple[EpisodeRecord, list[list[Message]]]:
    """Run one episode where the model answers from ``replies`` (``None``: the context window overflows)."""
    env = make_env("mind2web")
    seen: list[list[Message]] = []

    async def agent(messages: list[Message], tools: Any, turn: int, calls: Any, caller: str) -> ModelReply:
        seen.append(list(messages))
        reply = replies[len(seen) - 1]
        if reply is None:
            raise ContextLimitError("prompt too long")
        return ModelReply(content=reply)

    record = await run_episode(env, EpisodeSpec(model="scripted", task=task), agent)
    return record, seen


def _gold_letter(messages: list[Message], task: Task) -> str:
    """The letter of the gold element in a round, found from the round's page like a reader would."""
    page = (messages[-1].get("content") or "").split("'''\n", 1)[1].split("\n'''", 1)[0]
    pool = initial_pool(task.data)
    while pool:
        ids, pool = pool[:5], pool[5:]
        rnd = render_round(task.data["cleaned_html"], ids)
        if rnd.page == page:
            hits = [i for i, (node_id, _) in enumerate(rnd.choices) if node_id in task.data["target"]["element"]]
            return chr(ord("B") + hits[0]) if hits else "A"
    raise AssertionError("round not found")


async def test_every_round_is_a_fresh_conversation_of_the_seven_prompt_messages() -> None:
    task = _task()
    record, seen = await _scripted(task, ["Answer: B.\nAction: CLICK", "Answer: B.\nAction: CLICK", "Answer: A."])
    assert len(seen) == 3
    for messages in seen:
        assert [m["role"] for m in messages] == ["user", "assistant"] * 3 + ["user"]
        assert messages[-1]["content"].startswith("'''\n<html>")
        assert task.data["confirmed_task"] in messages[-1]["content"]
    assert seen[0][:6] == seen[1][:6] and seen[0][-1] != seen[1][-1]
    # the transcript keeps everything: 7 prompt messages per round plus the replies
    assert len(record.turns) == 3 * 7 + 3
    rounds = record.details["rounds"]
    assert [len(r["candidates"]) for r in rounds] == [5, 5, 2]  # pool 10 -> 6 -> 2 -> 0
    assert all(r["segments"] > 0 for r in rounds)


async def test_statuses_ours_and_upstreams() -> None:
    task = _task()
    gold = task.data["target"]

    # "None of the above" every round
    record, _ = await _scripted(task, ["Answer: A."] * 3)
    assert (record.status, record.paper_status, record.score) == (st.INVALID_ACTION, st.PAPER_AGENT_INVALID_ACTION, 0.0)
    assert record.details["prediction"] == ["", ""] and "no round picked" in (record.error or "")

    async def solve() -> EpisodeRecord:
        env = make_env("mind2web")
        op = task.data["operation"]

        async def agent(messages: list[Message], *_: Any) -> ModelReply:
            letter = _gold_letter(messages, task)
            value = f"\nValue: {op['value']}" if op["op"] != "CLICK" else ""
            return ModelReply(content=f"Answer: {letter}.\nAction: {op['op']}{value}")

        return await run_episode(env, EpisodeSpec(model="m", task=task), agent)

    record = await solve()  # the right element and action in its round, A elsewhere
    assert (record.status, record.paper_status, record.score, record.success) == (st.COMPLETED, st.PAPER_COMPLETED, 1.0, True)
    assert record.details["element_correct"] and record.details["action_f1"] == 1.0
    assert record.details["prediction"][0] in gold["element"]

    # no Answer line at all: read as A every time -> invalid_format here, an invalid action upstream
    record, _ = await _scripted(task, ["I'd click the big button."] * 3)
    assert (record.status, record.paper_status) == (st.INVALID_FORMAT, st.PAPER_AGENT_INVALID_ACTION)
    assert record.turns[7].error and "read as A" in record.turns[7].error

    # picks in rounds 1 and 2, then A in the last round: the pool empties and the earlier pick is discarded
    record, _ = await _scripted(task, ["Answer: B.\nAction: CLICK", "Answer: C.\nAction: CLICK", "Answer: A."])
    assert (record.status, record.paper_status, record.score) == (st.INVALID_ACTION, st.PAPER_AGENT_INVALID_ACTION, 0.0)
    assert "earlier pick is discarded" in (record.error or "")

    # a letter with no choice behind it (the last round has two choices, B and C)
    record, _ = await _scripted(task, ["Answer: B.\nAction: CLICK", "Answer: B.\nAction: CLICK", "Answer: F.\nAction: CLICK"])
    assert record.status == st.INVALID_ACTION
    assert record.turns[-1].error == "answer F names no choice (this round has B-C)"

    # context overflow before any pick: ours says so, upstream recorded an invalid action
    record, _ = await _scripted(task, [None])
    assert (record.status, record.paper_status, record.score) == (st.CONTEXT_LIMIT_EXCEEDED, st.PAPER_AGENT_INVALID_ACTION, 0.0)

    # overflow after a pick: upstream keeps the pick and scores it
    early = next(t for t in make_env("mind2web").tasks("dev") if set(initial_pool(t.data)[:5]) & set(t.data["target"]["element"]))
    _, seen = await _scripted(early, [None])
    letter = _gold_letter(seen[0], early)
    op = early.data["operation"]
    value = f"\nValue: {op['value']}" if op["op"] != "CLICK" else ""
    record, _ = await _scripted(early, [f"Answer: {letter}.\nAction: {op['op']}{value}", None])
    assert (record.status, record.paper_status, record.score) == (st.CONTEXT_LIMIT_EXCEEDED, st.PAPER_AGENT_CONTEXT_LIMIT, 1.0)
    assert record.details["step_success"] and record.error == "prompt too long"


async def test_hostile_replies_are_just_answers() -> None:
    task = _task()
    junk = ["\x00\xff" * 5000 + "Answer: Z", "'''\n</html><script>alert(1)</script>\n'''Answer: A.", "Value: ; rm -rf /\nAnswer: B.\nAction: TYPE"]
    record, _ = await _scripted(task, junk)
    assert record.status in (st.COMPLETED, st.INVALID_ACTION, st.INVALID_FORMAT)
    assert record.error is None or "Traceback" not in record.error


async def test_tools_mode_is_refused_in_one_line() -> None:
    env = make_env("mind2web")
    with pytest.raises(ConfigError, match="mind2web has no tools mode"):
        await env.open_session(_task(), EpisodeContext(episode_id="x", action_mode="tools"))
    assert env.supports_tools is False
