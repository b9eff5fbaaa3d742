"""One KG episode: the turn loop's per-reply handling (spec §3), in text and tools mode.

As in AgentBench, a reply that cannot be executed never ends the episode: the model is told what went
wrong (the turn is recorded with ``valid = false`` and the reason) and may try again until its 15
replies are used up (``task_limit_exceeded``). A valid ``Final Answer: #k`` ends it ``completed`` with
the answer's F1 as the score.
"""

from __future__ import annotations

from typing import Any

from ...environment import EpisodeContext, Message, ModelReply, Outcome, Session, Step, Task, statuses as st
from .backends import QueryFailed
from .metric import exact_match, executable, f1
from .parsing import (
    action_line,
    call_arguments,
    call_names,
    clean_reply,
    final_answer_id,
    strip_variable_word,
    tool_call_arguments,
)
from .programs import Variable
from .prompts import Prompts, first_messages, load_prompts
from .tools import TOOL_NAMES, Arg, Toolbox, ToolFailure

NO_ACTION = "No executable function found! Need to recheck the action."
NOT_EXECUTED = "Function is not executed!"
INVALID_ID = "Invalid variable id! Need to recheck the action."
ONE_PER_TURN = "Only one action per turn: this call was not executed."
_MAX_STORED_ANSWERS = 1000


def _cannot(name: str, shown_args: str) -> str:
    if name == "intersection":
        return (
            f"{name}({shown_args}) cannot be executed. The two variables are not of the same type. "
            "You may further explore them by call get_relations"
        )
    return f"{name}({shown_args}) cannot be executed. You may make a mistake and need to fix it."


def _syntax(name: str) -> str:
    return f"I may make a syntax error when calling {name} (e.g., unmatched parenthesis). I need to fix it and reuse the tool"


class KGSession(Session):
    def __init__(self, task: Task, ctx: EpisodeContext, toolbox: Toolbox, prompts: Prompts | None = None) -> None:
        self._prompts = prompts or load_prompts(None, ctx.action_mode)  # None: the project's own wording
        self._task = task
        self._ctx = ctx
        self._toolbox = toolbox
        self._entities: dict[str, str] = dict(task.data["entities"])
        self._gold: list[str] = list(task.data["gold"])
        self.variables: list[Variable] = []
        self.actions: list[str] = []

    def tools(self) -> list[dict[str, Any]] | None:
        return self._prompts.tools if self._ctx.action_mode == "tools" else None

    async def begin(self) -> list[Message]:
        return first_messages(self._prompts, self._task.data["question"], list(self._entities))

    async def step(self, reply: ModelReply) -> Step:
        if self._ctx.action_mode == "tools":
            return await self._step_tools(reply)
        return await self._step_text(reply)

    async def on_turn_limit(self) -> Outcome:
        return Outcome(
            status=st.TASK_LIMIT_EXCEEDED,
            score=0.0,
            error="15 replies without a final answer",
            details=self._details([]),
            paper_status=st.PAPER_TASK_LIMIT_REACHED,
        )

    # --------------------------------------------------------------------------------- shared
    def _resolve(self, argument: str) -> Arg:
        if argument in self._entities:  # before the "variable " removal, which breaks e.g. "variable stars"
            return self._entities[argument]
        arg = strip_variable_word(argument)
        if arg.startswith("#"):
            index = arg[1:]
            if not index.isdigit() or int(index) >= len(self.variables):
                raise ToolFailure(f"no variable {arg}")
            return self.variables[int(index)]
        return self._entities.get(arg, arg)

    async def _execute(self, name: str, raw_args: list[str]) -> str:
        """Run one tool call; returns the observation or raises ToolFailure."""
        if name not in TOOL_NAMES:
            raise ToolFailure(f"{name} is not one of the tools")
        result = await self._toolbox.call(name, [self._resolve(a) for a in raw_args])
        observation = result.observation
        if result.variable is not None:
            observation = observation.replace("##", f"#{len(self.variables)}")
            self.variables.append(result.variable)
        self.actions.append(f"{name}({', '.join(raw_args)})")
        return observation

    def _details(self, predicted: list[str], query_error: str | None = None) -> dict[str, Any]:
        details: dict[str, Any] = {
            "f1": f1(predicted, self._gold),
            "em": exact_match(predicted, self._gold),
            "executable": executable(predicted),
            "predicted": predicted[:_MAX_STORED_ANSWERS],
            "n_predicted": len(predicted),
            "gold": self._gold,
            "actions": self.actions,
            "qid": self._task.data.get("qid"),
        }
        if query_error:
            details["query_error"] = query_error
        return details

    async def _final(self, index: int) -> Outcome | None:
        if index >= len(self.variables):
            return None
        variable = self.variables[index]
        query_error = None
        try:
            predicted = await self._toolbox.final_answer(variable)
        except QueryFailed as exc:  # the endpoint refused this query: no answer, scored 0
            predicted, query_error = [], str(exc)
        details = self._details(predicted, query_error)
        details["answer_variable"] = f"#{index}"
        details["program"] = variable.program.sexpr()
        # Upstream's final query raising ends the sample as TASK_ERROR (set by its framework), with no result.
        paper = st.PAPER_TASK_ERROR if query_error else st.PAPER_COMPLETED
        return Outcome(status=st.COMPLETED, score=details["f1"], success=details["em"], error=query_error, details=details,
                       paper_status=paper)

    # --------------------------------------------------------------------------------- text mode
    async def _step_text(self, reply: ModelReply) -> Step:
        text = clean_reply(reply.content or "")
        info = {"cleaned_reply": text} if text != (reply.content or "") else {}
        index = final_answer_id(text)
        if index is not None:
            outcome = await self._final(index)
            if outcome is None:
                return Step(observation=[_user(INVALID_ID)], action=f"Final Answer: #{index}", valid=False, error=f"no variable #{index}", info=info, history_reply=info.get("cleaned_reply"))
            return Step(action=f"Final Answer: #{index}", outcome=outcome, info=info, history_reply=info.get("cleaned_reply"))
        line = action_line(text)
        if line is None:
            return Step(observation=[_user(NO_ACTION)], valid=False, error="no Action line and no final answer", info=info, history_reply=info.get("cleaned_reply"))
        message, error = NOT_EXECUTED, "no tool call on the Action line"
        for name in call_names(line):
            raw_args = call_arguments(line, name, list(self._entities))
            if raw_args is None:
                message, error = _syntax(name), f"cannot read the arguments of {name}"
                continue
            try:
                observation = await self._execute(name, raw_args)
            except ToolFailure as exc:
                message, error = _cannot(name, ", ".join(raw_args)), str(exc)
                continue
            return Step(observation=[_user(observation)], action=self.actions[-1], info=info, history_reply=info.get("cleaned_reply"))
        return Step(observation=[_user(message)], action=line.strip()[:300], valid=False, error=error, info=info, history_reply=info.get("cleaned_reply"))

    # --------------------------------------------------------------------------------- tools mode
    async def _step_tools(self, reply: ModelReply) -> Step:
        text = clean_reply(reply.content or "")
        calls = reply.tool_calls
        index = final_answer_id(text)
        if index is not None:
            outcome = await self._final(index)
            if outcome is not None:
                return Step(action=f"Final Answer: #{index}", outcome=outcome)
            skipped = [_tool(c.id, ONE_PER_TURN) for c in calls]
            return Step(observation=skipped + [_user(INVALID_ID)], action=f"Final Answer: #{index}", valid=False, error=f"no variable #{index}")
        if not calls:
            return Step(observation=[_user(NO_ACTION)], valid=False, error="no tool call and no final answer")
        first, rest = calls[0], calls[1:]
        tail = [_tool(c.id, ONE_PER_TURN) for c in rest]
        parsed = tool_call_arguments(first.name, first.arguments)
        if parsed.args is None:
            message = _cannot(first.name, first.arguments[:200])
            return Step(observation=[_tool(first.id, message)] + tail, action=parsed.shown, valid=False, error="unreadable tool arguments")
        try:
            observation = await self._execute(parsed.name, parsed.args)
        except ToolFailure as exc:
            message = _cannot(parsed.name, ", ".join(parsed.args))
            return Step(observation=[_tool(first.id, message)] + tail, action=parsed.shown, valid=False, error=str(exc))
        return Step(observation=[_tool(first.id, observation)] + tail, action=self.actions[-1])


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


def _tool(call_id: str, text: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
