"""One KG episode: the turn loop's per-reply handling (spec §3), in text and tools mode.

As in AgentBench, a reply that cannot be executed never ends the episode: the model is told what went
wrong (the turn is recorded with ``valid = false`` and the reason) and may try again until its 15
replies are used up (``task_limit_exceeded``). A valid ``Final Answer: #k`` ends it ``completed`` with
the answer's F1 as the score.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from ...environment import EpisodeContext, Message, ModelReply, Outcome, Session, Step, Task, statuses as st
from .backends import QueryFailed
from .metric import exact_match, executable, f1
from .parsing import (
    FINAL_ANSWER,
    action_line,
    call_arguments,
    call_names,
    clean_reply,
    final_answer_id,
    strip_variable_word,
)
from .programs import Variable
from .prompts import Prompts, first_messages, load_prompts
from .tools import TOOL_NAMES, TOOL_PARAMS, Arg, Toolbox, ToolFailure

NO_ACTION = "No executable function found! Need to recheck the action."
NOT_EXECUTED = "Function is not executed!"
INVALID_ID = "Invalid variable id! Need to recheck the action."
_MAX_STORED_ANSWERS = 1000
_FC_ENTITY = re.compile(r"^([mf])\.[\w_]+$")  # FC's API: what get_relations/get_neighbors accept besides a variable


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
        return await self._run(name, [self._resolve(a) for a in raw_args], ", ".join(raw_args))

    async def _run(self, name: str, args: list[Arg], shown: str) -> str:
        """Run a tool on resolved arguments: its observation, a new variable numbered where it says ``##``."""
        result = await self._toolbox.call(name, args)
        observation = result.observation
        if result.variable is not None:
            observation = observation.replace("##", f"#{len(self.variables)}")
            self.variables.append(result.variable)
        self.actions.append(f"{name}({shown})")
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
        """AgentBench FC's round (``KnowledgeGraph.sync_start_sample``): a reply with calls has every call run in order,
        each answered by a tool message (the observation, or FC's notice: no such function, wrong arguments, the error of
        a failed call); a reply without one ends the sample when it holds ``Final Answer: #k`` (read before any
        ``Observation:``) — ``completed``, or ``invalid_format`` (FC's AGENT_VALIDATION_FAILED) when there is no
        variable ``#k`` or its query fails — else gets FC's user notice. 15 rounds: ``task_limit_exceeded``."""
        texts = self._prompts.texts
        if not reply.tool_calls:
            found = FINAL_ANSWER.findall((reply.content or "").split("Observation:")[0].replace("\\_", "_"))
            if not found:
                return Step(observation=[_user(texts.no_call)], valid=False, error="no tool call and no final answer")
            index = int(found[0])
            outcome = await self._final(index)
            if outcome is None:
                outcome = Outcome(status=st.INVALID_FORMAT, error=f"no variable #{index}", details=self._details([]),
                                  paper_status=st.PAPER_AGENT_VALIDATION_FAILED)
            elif outcome.error:  # the final query failed: FC's handler ends the sample AGENT_VALIDATION_FAILED
                outcome = dataclasses.replace(outcome, paper_status=st.PAPER_AGENT_VALIDATION_FAILED)
            return Step(action=f"Final Answer: #{index}", valid=outcome.status == st.COMPLETED, error=outcome.error, outcome=outcome)
        observation, actions, errors = [], [], []
        for call in reply.tool_calls:
            actions.append(f"{call.name}({call.arguments[:200]})")
            text, error = await self._fc_call(call.name, call.arguments)
            observation.append(_tool(call.id, text))
            if error:
                errors.append(error)
        return Step(observation=observation, action="; ".join(actions), valid=not errors, error="; ".join(errors) or None)

    async def _fc_call(self, name: str, arguments: str) -> tuple[str, str | None]:
        """One call as FC runs it: (what the tool message says, why it failed or None). Arguments are read as FC reads
        them: ``#k`` is variable k (Python's indexing), an entity's name its id, anything else as given."""
        texts = self._prompts.texts
        try:
            args = json.loads(arguments)
            if name not in TOOL_NAMES:  # FC: getattr(api, name) fails, or finds no parameters for what it found
                notice = texts.arguments if name in texts.api_names else texts.no_function
                return notice.format(function_name=name), f"unknown tool {name[:60]!r}"
            try:
                values = [args[p] for p in TOOL_PARAMS[name]]
            except KeyError:
                return texts.arguments.format(function_name=name), f"{name}: wrong arguments"
            resolved = [self.variables[int(v[1:])] if isinstance(v, str) and v.startswith("#") else self._entities.get(v, v)
                        if isinstance(v, str) else v for v in values]  # fmt: skip
            return await self._fc_tool(name, resolved, ", ".join(map(str, values))), None
        except (ValueError, TypeError, IndexError, AttributeError, ToolFailure) as exc:  # FC: 'Error processing tool call: {e}'
            return texts.error.format(e=exc), f"{name}: {exc}"[:300]

    async def _fc_tool(self, name: str, args: list[Any], shown: str) -> str:
        """FC's ``API`` checks before the tool runs: its refusals (ValueError) and what Python says where FC reads a
        variable's ``type``/``program`` off an entity (AttributeError); relations and attributes are looked up first
        when not listed yet, as FC's get_neighbors/argmax do."""
        refusals = self._prompts.texts.refusals
        if any(not isinstance(a, (str, Variable)) for a in args):
            raise TypeError(f"expected string or bytes-like object, got '{type(next(a for a in args if not isinstance(a, (str, Variable)))).__name__}'")
        first = args[0]
        if name in ("get_relations", "get_neighbors") and not isinstance(first, Variable) and not _FC_ENTITY.match(first):
            raise ValueError(refusals[name])
        if name in ("intersection", "get_attributes", "argmax", "argmin", "count"):
            for a in args[: 2 if name == "intersection" else 1]:
                if not isinstance(a, Variable):
                    raise AttributeError(f"'str' object has no attribute '{'type' if name == 'intersection' else 'program'}'")
        if name == "intersection" and args[0].type != args[1].type:
            raise ValueError(refusals["type"])
        listed = {"get_neighbors": ("get_relations", self._toolbox.relations_seen, "relation"),
                  "argmax": ("get_attributes", self._toolbox.attributes_seen, "argmax"),
                  "argmin": ("get_attributes", self._toolbox.attributes_seen, "argmin")}  # fmt: skip
        if name in listed:
            lister, seen, refusal = listed[name]
            key = Toolbox._key(first)
            if key not in seen:
                await self._toolbox.call(lister, [first])
            if args[1] not in seen.get(key, []):
                raise ValueError(refusals[refusal])
        return await self._run(name, args, shown)


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


def _tool(call_id: str, text: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
