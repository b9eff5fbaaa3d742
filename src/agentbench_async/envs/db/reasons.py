"""Why a db reply in text mode could not be used: the reasons of db's taxonomy (docs/envs/db.md).

Upstream's loop (and ``session.py``) runs the SQL of a reply whose ``Action: <word>`` line says ``Operation``
and otherwise takes the rest of the first line starting with ``\\nFinal Answer:``; a reply with neither ends
the episode ``invalid_format``. ``invalid_format_reason`` says which part was missing or wrong, with the
nearest match of what was expected where the reply has one.
"""

from __future__ import annotations

import re

from ..reasons import EMPTY, PROSE, FailureReason, line_of
from .protocol import TextReply

# the labels (stable: runs compare by them)
OPERATION_WITHOUT_SQL = '"Action: Operation" without a ```sql block'
SQL_WITHOUT_OPERATION = 'SQL block without "Action: Operation"'
BOLD_ANSWER_TAG = "answer tag written as **Final Answer**"
ANSWER_TAG_FIRST = "answer tag at the very start of the reply (read only after a line break)"
ANSWER_TAG_SPELLING = 'answer tag not spelled "Final Answer:"'
ANSWER_WITHOUT_TAG = '"Action: Answer" without a "Final Answer:" line'
UNKNOWN_ACTION = "unknown action word"

LABELS = (EMPTY, OPERATION_WITHOUT_SQL, SQL_WITHOUT_OPERATION, BOLD_ANSWER_TAG, ANSWER_TAG_FIRST, ANSWER_TAG_SPELLING,
          ANSWER_WITHOUT_TAG, UNKNOWN_ACTION, PROSE)  # fmt: skip

_ANY_BLOCK = re.compile(r"```[ \t]*([A-Za-z]*)[ \t]*\n?([\s\S]*?)```")
_SQL_WORDS = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|SHOW|DESCRIBE|CREATE|ALTER|DROP)\b", re.IGNORECASE | re.MULTILINE)
_ACTION_LIKE = re.compile(r"^[ \t*#>-]*action\s*[:：]?.*$", re.IGNORECASE | re.MULTILINE)
_ANSWER_LIKE = re.compile(r"^.*final[ \t_*]*answer.*$", re.IGNORECASE | re.MULTILINE)


def invalid_format_reason(content: str, parsed: TextReply) -> FailureReason:
    """The reason a reply with no usable ``Action: Operation`` + SQL and no ``\\nFinal Answer:`` line ended the episode."""
    if not content.strip():
        return FailureReason(EMPTY)
    if parsed.wants_operation and parsed.sql is None:
        block = _ANY_BLOCK.search(content)
        return FailureReason(OPERATION_WITHOUT_SQL, block.group(0) if block else line_of(_SQL_WORDS, content))
    answer_line = line_of(_ANSWER_LIKE, content)
    if answer_line is not None:
        if "**" in answer_line or "__" in answer_line:
            return FailureReason(BOLD_ANSWER_TAG, answer_line)
        if content.lstrip().startswith("Final Answer:") and "\nFinal Answer:" not in content:
            return FailureReason(ANSWER_TAG_FIRST, answer_line)
        return FailureReason(ANSWER_TAG_SPELLING, answer_line)
    if parsed.sql is not None or _sql_block(content) or (parsed.action is None and _SQL_WORDS.search(content)):
        return FailureReason(SQL_WITHOUT_OPERATION, line_of(_ACTION_LIKE, content) or _sql_block(content)
                             or line_of(_SQL_WORDS, content))  # fmt: skip
    if parsed.action == "Answer":
        return FailureReason(ANSWER_WITHOUT_TAG, line_of(re.compile(r"^.*answer.*$", re.IGNORECASE | re.MULTILINE), content))
    if parsed.action is not None and parsed.action != "Operation":
        return FailureReason(UNKNOWN_ACTION, f"Action: {parsed.action}")
    return FailureReason(PROSE, line_of(_ACTION_LIKE, content) or content.strip())


def _sql_block(content: str) -> str | None:
    """A fenced block holding SQL (```mysql, ``` without a language, ...), as written."""
    for block in _ANY_BLOCK.finditer(content):
        if block.group(1).lower() in ("sql", "mysql", "") and _SQL_WORDS.search(block.group(2)):
            return block.group(0)
    return None
