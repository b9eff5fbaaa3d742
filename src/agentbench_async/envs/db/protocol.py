"""What the agent is told and how its replies are read (AgentBench v0.2 DBBench protocol).

Text mode: a reply whose first ``Action: <word>\\n`` line says ``Operation`` must carry a fenced
```` ```sql ```` block (only the first is executed); otherwise the episode ends and the answer is the rest
of the first line starting with ``\\nFinal Answer:``. Tools mode (AgentBench FC): ``execute_sql`` and
``commit_final_answer`` function calls. With ``--data-dir`` text mode's instruction and acknowledgement are
v0.2's own, read from ``upstream-prompts/v0.2/src/server/tasks/dbbench/__init__.py`` (``big_prompt``, the
``"Ok."`` ``DBBench.start_sample`` injects), and tools mode's definitions FC's (``configs/tasks/dbbench.yaml``);
without it the project's own wording runs (named deviations ``db.prompts``/``db.tools``). Tools mode's instruction
is always the project's: FC's is in its ``dbbench/task.py``, which ``data pull`` does not fetch (``db.tools_prompt``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import Message
from ..upstream_prompts import V02, fc_tools, upstream_source

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


UPSTREAM_TASK = "src/server/tasks/dbbench/__init__.py"  # v0.2's DBBench: big_prompt, start_sample
TOOL_NAMES = ("execute_sql", "commit_final_answer")


@dataclass(frozen=True)
class Prompts:
    """The wording of a run in one action mode: the instruction, the acknowledgement after it, the tool definitions."""

    instruction: str
    acknowledgement: str
    tools: list[dict[str, Any]]
    upstream: bool = False  # read from AgentBench's files (--data-dir)


OWN_TEXT = Prompts(TEXT_INSTRUCTION, "Ok.", TOOLS)
OWN_TOOLS = Prompts(TOOLS_INSTRUCTION, "Ok.", TOOLS)


def load_prompts(data_dir: Path | None, action_mode: str = "text") -> Prompts:
    """AgentBench's wording from the pulled files under ``data_dir`` (v0.2's text, FC's tool definitions), else
    the project's own. A missing or changed file is a one-line TaskFileError naming it."""
    if data_dir is None:
        return OWN_TOOLS if action_mode == "tools" else OWN_TEXT
    if action_mode == "tools":
        return Prompts(TOOLS_INSTRUCTION, "Ok.", fc_tools(data_dir, "dbbench", TOOL_NAMES, env="db"), True)
    source = upstream_source(data_dir, V02, UPSTREAM_TASK, env="db")
    instruction = source.literal("big_prompt")
    replies = [m.get("content") for m in source.call_arguments("DBBench.start_sample", "inject") if isinstance(m, dict) and m.get("role") == "agent"]
    if not isinstance(instruction, str) or not replies or not isinstance(replies[0], str):
        raise source.error("big_prompt must be a string and DBBench.start_sample inject the agent's acknowledgement")
    return Prompts(instruction, replies[0], TOOLS, True)


def first_messages(record: dict[str, Any], action_mode: str, prompts: Prompts | None = None) -> list[Message]:
    """The opening of v0.2's ``start_sample``: instruction, acknowledgement, ``description + "\\n" + add_description``."""
    prompts = prompts or load_prompts(None, action_mode)
    question = record["description"] + "\n" + str(record.get("add_description", ""))
    return [
        {"role": "user", "content": prompts.instruction},
        {"role": "assistant", "content": prompts.acknowledgement},
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
