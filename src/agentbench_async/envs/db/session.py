"""One DBBench episode: set up the table, run the agent's SQL turn by turn, grade at the end."""

from __future__ import annotations

import contextlib
from typing import Any

from ...environment import EpisodeContext, Message, ModelReply, Outcome, Session, Step, Task, statuses as st
from .backend import Backend, EpisodeDatabase
from ..reasons import FailureReason
from .grading import answer_items, answers_match, is_modify, metric_category
from .protocol import (
    MAX_OPERATIONS,
    Prompts,
    ToolArgumentError,
    answers_argument,
    first_messages,
    load_prompts,
    parse_text,
    tool_arguments,
)
from .reasons import invalid_format_reason
from .sqltext import split_statements, truncate

MULTI_STATEMENT_MESSAGE = "Error: only one SQL statement can be run per round; nothing was executed."
_ANSWER_DETAIL_LIMIT = 500


class DBSession(Session):
    def __init__(self, backend: Backend, task: Task, ctx: EpisodeContext, prompts: Prompts | None = None) -> None:
        self._backend = backend
        self._prompts = prompts or load_prompts(None, ctx.action_mode)  # None: the project's own wording
        self._task = task
        self._record: dict[str, Any] = task.data
        self._type: str = self._record["type"][0]
        self._ctx = ctx
        self._tools_mode = ctx.action_mode == "tools"
        self._operations = 0
        self._replies = 0  # model replies handled so far
        self._db: EpisodeDatabase | None = None

    # ----- protocol ----------------------------------------------------------------------------

    async def begin(self) -> list[Message]:
        table = self._record["table"]
        info = table["table_info"]
        self._db = EpisodeDatabase(self._backend, table["table_name"], [c["name"] for c in info["columns"]], info["rows"])
        await self._db.create()
        return first_messages(self._record, self._ctx.action_mode, self._prompts)

    def tools(self) -> list[dict[str, Any]] | None:
        return self._prompts.tools if self._tools_mode else None

    async def step(self, reply: ModelReply) -> Step:
        self._replies += 1
        if self._tools_mode:
            return await self._step_tools(reply)
        return await self._step_text(reply)

    async def on_turn_limit(self) -> Outcome:
        if self._tools_mode:  # FC: TASK_LIMIT_REACHED with reward 0, the tables not graded
            return Outcome(status=st.TASK_LIMIT_EXCEEDED, score=0.0, success=False, paper_status=st.PAPER_TASK_LIMIT_REACHED,
                           error=f"{MAX_OPERATIONS} rounds without commit_final_answer",
                           details={"type": self._type, "category": metric_category(self._type), "operations": self._operations})
        return await self._outcome(st.TASK_LIMIT_EXCEEDED, error="turn limit reached")

    async def on_context_limit(self, error: str) -> Outcome:
        # Upstream does not check the first reply for a context overflow: it finds no "Final Answer" in it and
        # records AGENT_VALIDATION_FAILED; later it records AGENT_CONTEXT_LIMIT. Tables are graded either way.
        paper = st.PAPER_AGENT_VALIDATION_FAILED if self._replies == 0 else st.PAPER_AGENT_CONTEXT_LIMIT
        return await self._outcome(st.CONTEXT_LIMIT_EXCEEDED, error=error, paper_status=paper)

    async def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(Exception):
                await self._db.drop()

    # ----- text mode ---------------------------------------------------------------------------

    async def _step_text(self, reply: ModelReply) -> Step:
        parsed = parse_text(reply.content or "")
        if parsed.wants_operation and self._operations < MAX_OPERATIONS:
            if parsed.sql is None:
                return await self._end(st.INVALID_FORMAT, invalid_format_reason(reply.content or "", parsed), action="Operation")
            observation = await self._run_sql(parsed.sql)
            return Step(action=parsed.sql, observation=[{"role": "user", "content": observation}])
        if parsed.final_answer is None:
            if self._operations >= MAX_OPERATIONS:
                return await self._end(st.TASK_LIMIT_EXCEEDED, f"{MAX_OPERATIONS} operations and no final answer", action=parsed.action)
            # upstream: the loop ends, no final answer is found -> AGENT_VALIDATION_FAILED (never invalid action); the reason
            # says what the reply had instead (reasons.py)
            return await self._end(st.INVALID_FORMAT, invalid_format_reason(reply.content or "", parsed), action=parsed.action)
        answer = parsed.final_answer
        if self._operations >= MAX_OPERATIONS and answer == "":
            return await self._end(st.TASK_LIMIT_EXCEEDED, f"{MAX_OPERATIONS} operations and an empty final answer", action="Answer")
        step = await self._finish(answer_items(answer), answer)
        step.action = "Answer:" + answer
        return step

    # ----- tools mode --------------------------------------------------------------------------

    async def _step_tools(self, reply: ModelReply) -> Step:
        """AgentBench FC's round (``DBBenchTask.start_sample``): every call of the message in order, each answered by a
        tool message (SQL results; FC's notices for unreadable arguments and other functions); ``commit_final_answer``
        ends the episode there, graded (later calls are not run). A message without a call gets FC's notice as a user
        message and the round counts. After 15 rounds the episode ends ``task_limit_exceeded``, scored 0, as FC."""
        texts = self._prompts.texts
        observation: list[Message] = []
        actions: list[str] = []
        errors: list[str] = []
        if not reply.tool_calls:
            observation.append({"role": "user", "content": texts.no_call})
            errors.append("no tool call")
        for call in reply.tool_calls:
            actions.append(f"{call.name}({call.arguments[:200]})")
            try:
                args = tool_arguments(call.arguments)
            except ToolArgumentError as exc:
                observation.append(_tool(call.id, texts.unreadable))
                errors.append(f"{call.name}: {exc}")
                continue
            if call.name == "execute_sql":
                values = list(args.values())  # FC runs the first argument's value, whatever its name
                if not values or not isinstance(values[0], str):
                    observation.append(_tool(call.id, texts.unreadable))
                    errors.append("execute_sql without a SQL string")
                    continue
                observation.append(_tool(call.id, await self._run_sql(values[0])))
            elif call.name == "commit_final_answer":
                try:
                    items = answers_argument(args)
                except ToolArgumentError as exc:
                    observation.append(_tool(call.id, texts.unreadable))
                    errors.append(str(exc))
                    continue
                step = await self._finish(items, repr(items))
                step.action = "; ".join(actions)
                return step
            else:
                observation.append(_tool(call.id, texts.unknown))
                errors.append(f"unknown tool {call.name[:60]!r}")
        step = Step(observation=observation, action="; ".join(actions) or None, valid=not errors, error="; ".join(errors) or None)
        if self._replies >= MAX_OPERATIONS:  # FC's max_round: the last round's calls ran, then the sample ends
            step.outcome = await self.on_turn_limit()
        return step

    # ----- shared ------------------------------------------------------------------------------

    async def _run_sql(self, sql: str) -> str:
        assert self._db is not None
        self._operations += 1
        statements = split_statements(sql)
        if not statements:
            return "[]"  # empty or comment-only: no result set
        if len(statements) > 1:
            return MULTI_STATEMENT_MESSAGE
        return truncate(await self._db.execute(sql))

    async def _finish(self, items: list[Any], raw: str) -> Step:
        outcome = await self._outcome(st.COMPLETED, answer=raw, items=items)
        return Step(outcome=outcome)

    async def _end(self, status: str, error: str | FailureReason, action: str | None = None) -> Step:
        reason = error if isinstance(error, FailureReason) else None
        error = reason.error if reason is not None else str(error)
        outcome = await self._outcome(status, error=error)
        if reason is not None:
            reason.add_to(outcome.details)
        return Step(action=action, valid=False, error=error, outcome=outcome)

    async def _outcome(self, status: str, *, error: str | None = None, answer: str | None = None, items: list[Any] | None = None,
                       paper_status: str | None = None) -> Outcome:
        """Grade: modification tasks by table hash under every status (as upstream), others by answer.

        ``paper_status``: what upstream records (spec §8); by default the one of our status (completed,
        invalid_format = AGENT_VALIDATION_FAILED, task_limit_exceeded = TASK_LIMIT_REACHED; in tools mode, which
        v0.2 does not have, an unknown function is AGENT_INVALID_ACTION)."""
        details: dict[str, Any] = {
            "type": self._type,
            "category": metric_category(self._type),
            "operations": self._operations,
        }
        if answer is not None:
            details["answer"] = answer[:_ANSWER_DETAIL_LIMIT]
        if self._db is not None and self._db.setup_errors:
            details["setup_errors"] = self._db.setup_errors
        correct = False
        if is_modify(self._type):
            assert self._db is not None
            table_hash = await self._db.table_hash()
            details["table_hash"] = table_hash[:_ANSWER_DETAIL_LIMIT]
            correct = table_hash == self._record["answer_md5"]
        elif status == st.COMPLETED and items is not None:
            correct = answers_match(items, self._record["label"])
        return Outcome(status=status, score=1.0 if correct else 0.0, success=correct, error=error, details=details,
                       paper_status=paper_status or st.paper_status_of(status))


def _tool(call_id: str, text: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
