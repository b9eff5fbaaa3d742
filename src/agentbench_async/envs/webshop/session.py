"""One WebShop episode: the AgentBench v0.2 round loop (text mode) or AgentBench FC's (tools mode).

Text mode: a reply without a readable ``Action: search[...]``/``click[...]`` ends the episode
(``invalid_format``; upstream AGENT_VALIDATION_FAILED, reward 0). A readable action that does not apply to
the page (a click on something not listed) changes nothing and the round is used. Buy Now ends the episode
(``completed``, score = the purchase's reward). After 10 rounds: ``task_limit_exceeded``, reward 0.
Tools mode (AgentBench FC's ``WebShop.sync_start_sample``): a message's first call of ``search_action``/
``click_action`` acts (its first argument's value), the page comes back as its tool result; a message without a call,
or whose first call is of another function or unreadable, does nothing and the page comes back as a user message
(with FC's notices). FC's 20 rounds (text mode's 10), counted here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from ...environment import EpisodeContext, Message, ModelReply, Outcome, Session, Step, Task, ToolCall, statuses as st
from .catalog import Goal
from .protocol import (
    FC_ROUNDS,
    MAX_ROUNDS,
    NOT_RUN,
    OWN_PROMPTS,
    OWN_TOOL_TEXTS,
    TOOL_ACTIONS,
    Prompts,
    ToolTexts,
    first_messages,
    parse_action,
    round_message,
)
from .reasons import no_action_reason
from .site import Browser, Shop

class WebShopSession(Session):
    def __init__(self, shop: Shop, task: Task, ctx: EpisodeContext, prompts: Prompts = OWN_PROMPTS,
                 texts: ToolTexts = OWN_TOOL_TEXTS) -> None:  # fmt: skip
        self._shop = shop
        self._prompts = prompts
        self._texts = texts
        self._task = task
        self._tools_mode = ctx.action_mode == "tools"
        self._browser = Browser(shop, Goal.from_dict(task.data["goal"]))
        self._rounds = 0
        self._searches = 0

    async def begin(self) -> list[Message]:
        b = self._browser
        return first_messages("tools" if self._tools_mode else "text", b.observation(), b.available_actions(), self._prompts, self._texts)

    def tools(self) -> list[dict[str, Any]] | None:
        return self._prompts.tools if self._tools_mode else None

    async def step(self, reply: ModelReply) -> Step:
        self._rounds += 1
        step = await self._step(reply)
        if step.outcome is None and self._rounds >= (FC_ROUNDS if self._tools_mode else MAX_ROUNDS):
            step.outcome = await self.on_turn_limit()
        return step

    async def _step(self, reply: ModelReply) -> Step:
        if self._tools_mode:
            return await self._step_tools(reply)
        action = parse_action(reply.content or "")
        if action is None:  # what the reply had instead (reasons.py)
            reason = no_action_reason(reply.content or "")
            outcome = self._outcome(st.INVALID_FORMAT, 0.0, error=reason.error)
            reason.add_to(outcome.details)
            return Step(valid=False, error=reason.error, outcome=outcome)
        return await self._act(action)

    async def on_turn_limit(self) -> Outcome:
        return self._outcome(st.TASK_LIMIT_EXCEEDED, 0.0, error=f"{self._rounds} rounds without Buy Now")

    async def on_context_limit(self, error: str) -> Outcome:
        # Our status says what happened; paper_status keeps what v0.2 records: its loop compares the reply's status
        # with the string "AGENT_CONTEXT_LIMIT" while the value is "agent context limit", so an overflow falls
        # through to the action regex on None and ends AGENT_VALIDATION_FAILED (reward 0 either way).
        outcome = self._outcome(st.CONTEXT_LIMIT_EXCEEDED, 0.0, error=error)
        if not self._tools_mode:
            outcome = dataclasses.replace(outcome, paper_status=st.PAPER_AGENT_VALIDATION_FAILED)
        return outcome

    # ------------------------------------------------------------------------------------------ shared

    async def _act(self, action: str, call: ToolCall | None = None, ignored: list[Message] | None = None) -> Step:
        """Run one action (a search in a worker thread: it scores the whole catalog; a click here, a worker thread's hop
        cost twice the click's own CPU) and build the step.

        ``call``: the tool call it came from (tools mode: the page goes back as its tool result, followed by
        the ``ignored`` notices for further calls of the same message).
        """
        try:
            if self._browser.searches(action):
                score, done, info = await asyncio.to_thread(self._browser.step, action)
            else:
                score, done, info = self._browser.step(action)
        except Exception as exc:  # noqa: BLE001 - upstream's task records any exception as TASK_ERROR
            error = f"webshop: {type(exc).__name__}: {exc}"[:500]
            return Step(action=action, valid=False, error=error, outcome=self._outcome(st.ENV_ERROR, 0.0, error=error))
        if info["effect"] == "search":
            self._searches += 1
        b = self._browser
        if done:
            outcome = self._outcome(st.COMPLETED, score, purchase=info)
            text = "Thank you for shopping with us!"
        elif call is None:
            text = round_message(b.observation(), b.available_actions())
        else:
            text = self._texts.result.format(action=action, observation=b.observation(), available_actions=b.available_actions())
        if call is None:
            observation: list[Message] = [] if done else [{"role": "user", "content": text}]
        else:
            observation = [_tool(call.id, text), *(ignored or [])]
        if done:
            return Step(action=action, observation=observation, outcome=outcome)
        error = info.get("error")
        return Step(action=action, observation=observation, valid=error is None, error=error)

    def _outcome(self, status: str, score: float, *, error: str | None = None, purchase: dict[str, Any] | None = None) -> Outcome:
        details: dict[str, Any] = {
            "goal_index": self._task.data["goal_index"],
            "target": self._task.data["goal"]["asin"],
            "rounds": self._rounds,
            "searches": self._searches,
            "reward": score,
        }
        if purchase is not None:
            details.update(
                bought=purchase["bought"],
                options=purchase["options"],
                price=round(purchase["price"], 2),
                reward_info=purchase["reward_info"],
                title_nouns=self._shop.nouns_source,
            )
        return Outcome(
            status=status,
            score=score,
            success=score == 1.0,
            error=error,
            details=details,
            paper_status=_PAPER_STATUS[status],
        )

    # ------------------------------------------------------------------------------------------ tools

    async def _step_tools(self, reply: ModelReply) -> Step:
        """FC's round: the first call acts when it is ``search_action``/``click_action`` with readable arguments (its
        first value, whatever its name); FC leaves the message's other calls unanswered, the engine answers them
        ``NOT_RUN`` (webshop.tool_replies). Otherwise nothing is done and the page comes back as a user message: after a
        reply without a call with FC's no-call notice in the page's place, after unreadable arguments FC's notice first."""
        b, texts = self._browser, self._texts
        calls = reply.tool_calls
        page = {"observation": b.observation(), "available_actions": b.available_actions()}
        if not calls:
            text = texts.page.format(observation=texts.no_call, available_actions=page["available_actions"])
            return Step(observation=[{"role": "user", "content": text}], valid=False, error="no tool call")
        call, unanswered = calls[0], [_tool(c.id, NOT_RUN) for c in calls[1:]]
        try:  # FC reads the arguments, then (only for its two functions) the first value
            values = list(json.loads(call.arguments).values())
            value = values[0] if call.name in TOOL_ACTIONS else None
        except (ValueError, AttributeError, IndexError):  # FC: "No valid tool call found from agent.", no step
            notice: list[Message] = [_tool(call.id, NOT_RUN), *unanswered, {"role": "user", "content": texts.unreadable},
                                     {"role": "user", "content": texts.page.format(**page)}]  # fmt: skip
            return Step(observation=notice, action=f"{call.name}({call.arguments[:200]})", valid=False, error="unreadable tool arguments")
        if call.name not in TOOL_ACTIONS:  # FC: no action; the same page again
            again: list[Message] = [_tool(call.id, NOT_RUN), *unanswered, {"role": "user", "content": texts.page.format(**page)}]
            return Step(observation=again, action=f"{call.name}({call.arguments[:200]})", valid=False, error=f"unknown tool {call.name[:60]!r}")
        return await self._act(f"{TOOL_ACTIONS[call.name][0]}[{value}]", call, unanswered)


_PAPER_STATUS = {
    st.COMPLETED: st.PAPER_COMPLETED,
    st.INVALID_FORMAT: st.PAPER_AGENT_VALIDATION_FAILED,
    st.TASK_LIMIT_EXCEEDED: st.PAPER_TASK_LIMIT_REACHED,
    st.CONTEXT_LIMIT_EXCEEDED: st.PAPER_AGENT_CONTEXT_LIMIT,
    st.ENV_ERROR: st.PAPER_TASK_ERROR,
}


def _tool(call_id: str, text: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
