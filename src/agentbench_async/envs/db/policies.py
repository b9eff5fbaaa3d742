"""Mock-model policies for ``db``.

``oracle`` plays the task's reference through the real protocol: for INSERT/UPDATE/DELETE it runs the
gold SQL (``label``) and then answers; for SELECT-like tasks it runs the record's query (built-in
suites) or a look at the table (official records, whose ``sql`` field is not MySQL), then answers
with the gold ``label``. If the gold SQL fails with MySQL error 1292 (a text column compared with a
bare number under strict mode: official std 278 and 295), it retries once with those numbers quoted.

``format_misses`` writes one of three invalid formats per task (failure reasons, ``reasons.py``).

``weak`` picks one failure mode per task: a wrong answer, no action, an operation without SQL, an
unknown action, endless operations, a full context window, hostile SQL.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...environment import Policy, PolicyReply, PolicyRequest, ToolCall, stable_choice
from .grading import is_modify, quote_ident

_NUMBER_AFTER_EQUALS = re.compile(r"(=\s*)(-?\d+(?:\.\d+)?)(?=\s|;|$|\))")


def _record(req: PolicyRequest) -> dict[str, Any]:
    return req.task.data


def _observations(req: PolicyRequest) -> list[str]:
    """Environment replies after the task prompt (user messages after the third, or tool messages)."""
    out: list[str] = []
    for i, msg in enumerate(req.messages):
        if msg.get("role") == "tool" or (msg.get("role") == "user" and i >= 3):
            out.append(msg.get("content") or "")
    return out


def _sql_reply(req: PolicyRequest, sql: str) -> PolicyReply:
    if req.tools:
        args = json.dumps({"query": sql})
        return PolicyReply(content="", tool_calls=[ToolCall(id=f"call_{req.turn}", name="execute_sql", arguments=args)])
    return PolicyReply(content=f"I will query the database.\nAction: Operation\n```sql\n{sql}\n```")


def _answer_reply(req: PolicyRequest, answers: list[Any]) -> PolicyReply:
    if req.tools:
        args = json.dumps({"answers": answers}, ensure_ascii=False)
        return PolicyReply(content="", tool_calls=[ToolCall(id=f"call_{req.turn}", name="commit_final_answer", arguments=args)])
    return PolicyReply(content="That settles it.\nAction: Answer\nFinal Answer: " + json.dumps(answers, ensure_ascii=False))


def _quote_numbers(sql: str) -> str:
    head, sep, where = sql.partition(" WHERE ")
    if not sep:
        return sql
    return head + sep + _NUMBER_AFTER_EQUALS.sub(lambda m: f"{m.group(1)}'{m.group(2)}'", where)


def _first_query(record: dict[str, Any], builtin: bool) -> str:
    if is_modify(record["type"][0]):
        return " ".join(str(record["label"][0]).split("\n"))
    query = (record.get("sql") or {}).get("query") if isinstance(record.get("sql"), dict) else None
    if builtin and query:
        return str(query)
    return f"SELECT * FROM {quote_ident(record['table']['table_name'])} LIMIT 3"


def oracle(req: PolicyRequest) -> PolicyReply:
    record = _record(req)
    seen = _observations(req)
    if not seen:
        return _sql_reply(req, _first_query(record, req.task.source == "builtin"))
    if is_modify(record["type"][0]):
        if len(seen) == 1 and seen[0].startswith("1292 ("):
            retry = _quote_numbers(_first_query(record, req.task.source == "builtin"))
            if retry != _first_query(record, req.task.source == "builtin"):
                return _sql_reply(req, retry)
        return _answer_reply(req, ["done"])
    return _answer_reply(req, list(record["label"]))


def _wrong_answers(record: dict[str, Any]) -> list[str]:
    label = list(record.get("label") or [])
    return [x + " (not really)" for x in label] or ["no idea"]


def weak(req: PolicyRequest) -> PolicyReply:
    """One failure mode per task (chosen from the task id), so a suite shows every status."""
    record = _record(req)
    mode = stable_choice(req.task.task_id, 7)
    seen = _observations(req)
    if mode == 0:  # wrong answer without touching the table -> completed, score 0
        if not seen:
            return _sql_reply(req, f"SELECT COUNT(*) FROM {quote_ident(record['table']['table_name'])}")
        return _answer_reply(req, _wrong_answers(record))
    if mode == 1:  # rambling without any action -> invalid_format
        return PolicyReply(content="I am not sure how to approach this table.")
    if mode == 2:  # an operation without its SQL block -> invalid_format
        if req.tools:
            return PolicyReply(content="", tool_calls=[ToolCall(id=f"call_{req.turn}", name="execute_sql", arguments="{not json")])
        return PolicyReply(content="Action: Operation\nSELECT * FROM the table;")
    if mode == 3:  # an action the environment does not know -> invalid_format (text; upstream AGENT_VALIDATION_FAILED),
        # invalid_action (tools: an unknown function)
        if req.tools:
            return PolicyReply(content="", tool_calls=[ToolCall(id=f"call_{req.turn}", name="drop_everything", arguments="{}")])
        return PolicyReply(content="Action: Guess\nI guess the table is fine.")
    if mode == 4:  # operations forever -> task_limit_exceeded
        return _sql_reply(req, f"SELECT {req.turn}")
    if mode == 5:  # -> context_limit_exceeded (the mock server answers with a context-length error)
        return PolicyReply(fail="context_length")
    # mode 6: hostile SQL (files, system tables, a long sleep), then a wrong answer
    hostile = [
        "SELECT LOAD_FILE('/etc/passwd')",
        "SELECT * FROM mysql.user",
        "SELECT 1 INTO OUTFILE '/tmp/agentbench-db-pwned'",
        "SET STATEMENT max_statement_time=0 FOR SELECT SLEEP(1)",
    ]
    if len(seen) < len(hostile):
        return _sql_reply(req, hostile[len(seen)])
    return _answer_reply(req, _wrong_answers(record))


def format_misses(req: PolicyRequest) -> PolicyReply:
    """The three invalid formats a small model was seen to write (text mode), one per task (chosen from the task id): SQL in
    a block without ``Action: Operation``, the answer tag written in bold (``**Final Answer**:``), an answer in prose. Each
    ends the episode invalid_format with its own reason (reasons.py)."""
    record = _record(req)
    label = json.dumps(list(record.get("label") or ["?"]), ensure_ascii=False)
    mode = stable_choice(req.task.task_id, 3)
    if mode == 0:
        table = quote_ident(record["table"]["table_name"])
        return PolicyReply(content=f"Let me look at the table first.\n```sql\nSELECT * FROM {table} LIMIT 3;\n```")
    if mode == 1:
        return PolicyReply(content=f"I have checked the table.\n**Final Answer**: {label}")
    return PolicyReply(content=f"Looking at the question, the answer should be {label[1:-1] or 'unknown'}.")


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak, "format_misses": format_misses}
