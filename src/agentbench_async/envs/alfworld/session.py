"""One ALFWorld episode (AgentBench v0.2's ``alfworld_run``), in text or tools mode.

Per reply: parse the action (text: ``ACTION:`` line; tools: ``take_action``'s ``action`` argument), map
it onto the admissible commands, shorten the answered observation (text mode), step the game, show the
new observation with the new action list, log the turn, then apply the repeat rule (the last three raw
replies identical, once more than three turns are logged) *before* looking at ``done`` — upstream's order,
so a winning third repeat scores 0. ``done`` (only ever a win) ends the episode ``completed``; 35 replies
(tools mode: AgentBench FC's 20) without it end ``task_limit_exceeded``.

Text mode: a reply without a readable ``ACTION:`` line (or with an empty one) ends the episode
``invalid_format`` (upstream: AGENT_INVALID_ACTION). Tools mode follows AgentBench FC (its ``alfworld_run``): a
message without a tool call, or whose first call has no string as its first argument, gets FC's user notice, uses the
turn and the episode goes on; FC's sample status keeps the last such failure (AGENT_VALIDATION_FAILED / AGENT_INVALID_ACTION),
even for an episode that is won later (its result still counts).

The action-list shortening edits the user message the model just answered: the session keeps the
message object it handed to the engine and replaces its ``content`` (the engine's conversation holds the
same object, so later model calls see the short form; the transcript stores what was shown at the time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...environment import EnvError, EpisodeContext, Message, ModelReply, Outcome, Session, Step, Task, statuses as st
from ..reasons import FailureReason
from .engine import Game, GamePool, GameState
from .parsing import Mapped, extract_action, nearest_admissible, normalise, repeats, tool_argument
from .prompts import (
    NOT_RUN,
    OWN_PROMPTS,
    OWN_TOOL_TEXTS,
    Prompts,
    ToolTexts,
    available_actions,
    first_observation,
    step_observation,
    text_prompt,
    tools_prompt,
    without_action_list,
)
from .reasons import EMPTY_ACTION, no_action_reason

MAX_STEPS = 35  # AgentBench v0.2's max_step for alfworld-dev and alfworld-std
FC_MAX_STEPS = 20  # AgentBench FC's max_step (configs/tasks/alfworld.yaml): tools mode's cap
TOOL_NAME = "take_action"
_OUTPUT_LIMIT = 300  # characters of a raw reply (and of the action sent) kept in the episode log


class ALFWorldSession(Session):
    def __init__(self, pool: GamePool, task: Task, ctx: EpisodeContext, game_path: Path, example: list[str],
                 prompts: Prompts = OWN_PROMPTS, texts: ToolTexts = OWN_TOOL_TEXTS) -> None:  # fmt: skip
        self._pool = pool
        self._prompts = prompts
        self._texts = texts
        self._task = task
        self._ctx = ctx
        self._path = game_path
        self._example = example
        self._tools = ctx.action_mode == "tools"
        self._max_steps = FC_MAX_STEPS if self._tools else MAX_STEPS
        self._replies = 0
        self._game: Game | None = None
        self._commands: list[str] = []
        self._last_user: Message | None = None  # the observation the model is answering
        self._outputs: list[str] = []  # raw replies (text) or action arguments (tools), for the repeat rule
        self._log: list[dict[str, Any]] = []
        self._fc_status: str | None = None  # tools mode: FC's sticky status after a reply without a usable call

    async def begin(self) -> list[Message]:
        if not self._path.is_file():
            raise EnvError(f"alfworld: game file {self._path} of task {self._task.task_id} not found; check --alfworld-data")
        self._game, state = await self._pool.open(str(self._path))
        self._commands = state.admissible
        observation = first_observation(state.feedback)
        if self._tools:
            messages = tools_prompt(observation, self._commands, self._texts)
        else:
            messages = text_prompt(self._example, observation, self._commands, self._prompts)
        self._last_user = messages[-1]
        return messages

    def tools(self) -> list[dict[str, Any]] | None:
        return self._prompts.tools if self._tools else None

    async def step(self, reply: ModelReply) -> Step:
        self._replies += 1
        step = await self._step(reply)
        if self._tools and step.outcome is None and self._replies >= self._max_steps:  # FC's 20 (the engine caps at 35)
            step.outcome = await self.on_turn_limit()
        return step

    async def _step(self, reply: ModelReply) -> Step:
        if self._tools:
            parsed = self._parse_tools(reply)
        else:
            parsed = self._parse_text(reply)
        if isinstance(parsed, Step):
            return parsed
        output, mapped, call_id, ignored = parsed
        if not self._tools and self._last_user is not None:
            self._last_user["content"] = without_action_list(self._last_user.get("content") or "")
        assert self._game is not None
        state: GameState = await self._game.step(mapped.command)
        self._commands = state.admissible
        observation = step_observation(state.feedback)
        content = observation + available_actions(self._commands)
        message: Message = {"role": "tool", "tool_call_id": call_id, "content": content} if call_id is not None else {"role": "user", "content": content}
        self._last_user = message
        self._outputs.append(output)
        self._log.append({"round": len(self._log) + 1, "output": output[:_OUTPUT_LIMIT], "action": mapped.command[:_OUTPUT_LIMIT], "how": mapped.how,
                          "observation": observation, "done": state.done})  # fmt: skip
        valid, error = _validity(mapped)
        outcome = None
        if repeats(self._outputs):
            outcome = self._outcome(st.INVALID_ACTION, st.PAPER_AGENT_INVALID_ACTION, error="the same reply three times in a row")
        elif state.done:
            outcome = self._outcome(st.COMPLETED, self._fc_status or st.PAPER_COMPLETED, won=state.won)
        return Step(observation=[message, *ignored], action=mapped.command, valid=valid, error=error, outcome=outcome,
                    info={"mapped_from": mapped.raw} if mapped.how == "nearest" else {})  # fmt: skip

    def _parse_text(self, reply: ModelReply) -> Step | tuple[str, Mapped, None, list[Message]]:
        content = reply.content or ""
        action = extract_action(content)
        if action is None:  # what the reply had instead (reasons.py)
            return self._invalid(st.INVALID_FORMAT, st.PAPER_AGENT_INVALID_ACTION, no_action_reason(content))
        if not action:
            return self._invalid(st.INVALID_FORMAT, st.PAPER_AGENT_INVALID_ACTION, FailureReason(EMPTY_ACTION))
        return content, nearest_admissible(action, self._commands), None, []

    def _parse_tools(self, reply: ModelReply) -> Step | tuple[str, Mapped, str, list[Message]]:
        """AgentBench FC: the first tool call's first argument (its name is not checked: FC defines one tool). A
        message without a usable call gets FC's user notice and uses the turn; the episode goes on, and FC's sample
        status remembers the last such failure. FC leaves the message's other calls (and a call it cannot read)
        unanswered: the engine answers them ``NOT_RUN`` (alfworld.tool_replies)."""
        if not reply.tool_calls:
            self._fc_status = st.PAPER_AGENT_VALIDATION_FAILED
            return Step(observation=[{"role": "user", "content": self._texts.no_call}], valid=False, error="no tool call")
        call, rest = reply.tool_calls[0], reply.tool_calls[1:]
        ignored: list[Message] = [{"role": "tool", "tool_call_id": c.id, "content": NOT_RUN} for c in rest]
        value = tool_argument(call.arguments)
        if value is None:
            self._fc_status = st.PAPER_AGENT_INVALID_ACTION
            notice: list[Message] = [{"role": "tool", "tool_call_id": call.id, "content": NOT_RUN}, *ignored,
                                     {"role": "user", "content": self._texts.unreadable}]  # fmt: skip
            return Step(observation=notice, action=f"{call.name}({call.arguments[:200]})", valid=False,
                        error=f"{TOOL_NAME} needs a string as its first argument")  # fmt: skip
        return value, nearest_admissible(normalise(value), self._commands), call.id, ignored

    def _invalid(self, status: str, paper_status: str, error: str | FailureReason, action: str | None = None) -> Step:
        """A reply that ends the episode; a reason of alfworld's taxonomy is also stored as details.failure_reason."""
        text = error.error if isinstance(error, FailureReason) else error
        outcome = self._outcome(status, paper_status, error=text)
        if isinstance(error, FailureReason):
            error.add_to(outcome.details)
        return Step(action=action, valid=False, error=text, outcome=outcome)

    async def on_turn_limit(self) -> Outcome:
        return self._outcome(st.TASK_LIMIT_EXCEEDED, st.PAPER_TASK_LIMIT_REACHED, error=f"{self._max_steps} turns without finishing the task")

    def _outcome(self, status: str, paper_status: str, *, won: bool = False, error: str | None = None) -> Outcome:
        data = self._task.data
        details = {"type": data.get("type"), "game": data.get("game"), "won": won, "steps": len(self._log), "log": self._log}
        return Outcome(status=status, score=1.0 if won else 0.0, success=won, error=error, details=details, paper_status=paper_status)

    async def close(self) -> None:
        if self._game is not None:
            game, self._game = self._game, None
            await game.close()


def _validity(mapped: Mapped) -> tuple[bool, str | None]:
    """A turn is valid when a listed command was sent (as written or as the nearest one)."""
    if mapped.how in ("exact", "nearest"):
        return True, None
    return False, f"no admissible command resembles {mapped.raw[:80]!r}: the engine answers 'Nothing happens.'"
