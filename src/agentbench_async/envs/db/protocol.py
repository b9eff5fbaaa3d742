"""What the agent is told and how its replies are read (AgentBench v0.2 DBBench protocol).

Text mode: a reply whose first ``Action: <word>\\n`` line says ``Operation`` must carry a fenced
```` ```sql ```` block (only the first is executed); otherwise the episode ends and the answer is the rest
of the first line starting with ``\\nFinal Answer:``. Tools mode (AgentBench FC): ``execute_sql`` and
``commit_final_answer`` function calls. The prompt wording is the project's own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ...environment import Message

MAX_OPERATIONS = 15  # configs/tasks/dbbench.yaml max_round

ACTION_RE = re.compile(r"Action: (.*?)\n")
SQL_BLOCK_RE = re.compile(r"```sql\n([\s\S]*?)\n```")
FINAL_ANSWER_RE = re.compile(r"\nFinal Answer:(.*)")

TEXT_INSTRUCTION = """
You will be given a question, and you must use SQL on a MySQL database to answer it. Explain your reasoning and what you are doing as you go.
In every round you do exactly one of two things: operate on the database, or give your answer.

To operate, write a line "Action: Operation" and then the SQL in a markdown block, like this:
Action: Operation
```sql
SELECT * FROM table WHERE condition;
```
Write the SQL on a single line inside the ```sql block, with no comments. Send one statement per round: only the first SQL block of your message is executed. I will run it and show you what the database returned.

To answer, write:
Action: Answer
Final Answer: ["ANSWER1", "ANSWER2", ...]
Only answer when you are sure. The answer is checked for an exact match with the correct answer, so give it exactly. If the question asks you to change the database, make the change first; after that the content of your final answer does not matter.
A message that follows neither format is judged a failure at once.
What I send back is the raw response of the MySQL server; read it yourself.
"""

TOOLS_INSTRUCTION = """
You will be given a question, and you must use SQL on a MySQL database to answer it. Explain your reasoning and what you are doing as you go.
In every round call exactly one of the two tools you have: `execute_sql` runs one SQL statement (written on one line) and returns what the database answered; `commit_final_answer` submits your answer as a list of strings and ends the task.
Only commit when you are sure: the answer is checked for an exact match with the correct answer. If the question asks you to change the database, make the change first; after that the content of your answer does not matter.
A message without a tool call is judged a failure at once. What the tool returns is the raw response of the MySQL server; read it yourself.
"""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "execute_sql",
            "description": "Run one SQL statement on the database and return its result.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "The SQL statement to run."}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "commit_final_answer",
            "description": "Submit the final answer once you are done.",
            "parameters": {
                "type": "object",
                "properties": {
                    "answers": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The final answer, as a list of strings.",
                    }
                },
                "required": ["answers"],
                "additionalProperties": False,
            },
        },
    },
]


def first_messages(record: dict[str, Any], action_mode: str) -> list[Message]:
    instruction = TOOLS_INSTRUCTION if action_mode == "tools" else TEXT_INSTRUCTION
    question = record["description"] + "\n" + str(record.get("add_description", ""))
    return [
        {"role": "user", "content": instruction},
        {"role": "assistant", "content": "Ok."},
        {"role": "user", "content": question},
    ]


@dataclass
class TextReply:
    """A text-mode reply as the upstream loop sees it."""

    action: str | None  # the word after "Action: " (None: no action line)
    sql: str | None  # the first ```sql block, stripped, newlines turned into spaces
    final_answer: str | None  # rest of the "\nFinal Answer:" line (None: not found)

    @property
    def wants_operation(self) -> bool:
        return self.action == "Operation"


def parse_text(content: str) -> TextReply:
    action_match = ACTION_RE.search(content)
    sql_match = SQL_BLOCK_RE.search(content)
    final_match = FINAL_ANSWER_RE.search(content)
    return TextReply(
        action=action_match.group(1) if action_match else None,
        sql=sql_match.group(1).strip().replace("\n", " ") if sql_match else None,
        final_answer=final_match.group(1) if final_match else None,
    )


class ToolArgumentError(ValueError):
    """A tool call whose arguments cannot be read."""


def tool_arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(f"arguments are not JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    return value


def sql_argument(args: dict[str, Any]) -> str:
    """``execute_sql``: the ``query`` string (AgentBench FC took the first argument value)."""
    value = args.get("query")
    if value is None and len(args) == 1:
        value = next(iter(args.values()))
    if not isinstance(value, str):
        raise ToolArgumentError("execute_sql needs a string argument 'query'")
    return value.strip().replace("\n", " ")


def answers_argument(args: dict[str, Any]) -> list[Any]:
    """``commit_final_answer``: the ``answers`` list (a lone string counts as one answer)."""
    value = args.get("answers")
    if value is None and len(args) == 1:
        value = next(iter(args.values()))
    if isinstance(value, list):
        return value
    if isinstance(value, (str, int, float)):
        return [value]
    raise ToolArgumentError("commit_final_answer needs a list argument 'answers'")
