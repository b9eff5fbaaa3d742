"""What the agent is told and how its replies are read (AgentBench v0.2 DBBench protocol).

Text mode: a reply whose first ``Action: <word>\\n`` line says ``Operation`` must carry a fenced
```` ```sql ```` block (only the first is executed); otherwise the episode ends and the answer is the rest
of the first line starting with ``\\nFinal Answer:``. Tools mode (AgentBench FC): ``execute_sql`` and
``commit_final_answer`` function calls. With ``--data-dir`` text mode's instruction and acknowledgement are
v0.2's own, read from ``upstream-prompts/v0.2/src/server/tasks/dbbench/__init__.py`` (``big_prompt``, the
``"Ok."`` ``DBBench.start_sample`` injects), and tools mode's are FC's: the definitions from ``configs/tasks/dbbench.yaml``,
the system text, the question's lines and the notices from ``DBBenchTask.start_sample`` (``fc/src/server/tasks/dbbench/
task.py``, ``FC_TASK``); without it the project's own wording runs (named deviations ``db.prompts``/``db.tools``/
``db.tools_prompt``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import Message
from ..upstream_prompts import FC, V02, fc_tools, upstream_source

MAX_OPERATIONS = 15  # configs/tasks/dbbench.yaml max_round (v0.2: SQL executions; FC: replies)

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

TOOLS_INSTRUCTION = """You will be given a question, and you must use SQL on a MySQL database to answer it. Explain your reasoning and what you are doing as you go.
In every round call the tools you have: `execute_sql` runs one SQL statement (written on one line) and returns what the database answered; `commit_final_answer` submits your answer as a list of strings and ends the task.
Only commit when you are sure: the answer is checked for an exact match with the correct answer. If the question asks you to change the database, make the change first; after that the content of your answer does not matter.
Always answer with a tool call, never in the message text. What the tool returns is the raw response of the MySQL server; read it yourself."""


@dataclass(frozen=True)
class ToolTexts:
    """What tools mode sends besides the instruction (AgentBench FC's ``DBBenchTask.start_sample``): the question's
    lines and the notices."""

    evidence: str  # before the task's evidence (a line of its own, when the task has one)
    table: str  # before its add_description (likewise)
    question: str  # before its description
    no_call: str  # a user message after a reply without a tool call (the round counts)
    unreadable: str  # the tool message of a call whose arguments are not JSON
    unknown: str  # the tool message of a call of another function


OWN_TOOL_TEXTS = ToolTexts("Evidence: ", "About the table: ", "Question: ", "No tool call found: call execute_sql or commit_final_answer.",
                           "Error: the arguments of this call are not a JSON object.", "Unknown function: call execute_sql or commit_final_answer.")

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
FC_TASK = "src/server/tasks/dbbench/task.py"  # FC's DBBenchTask: SYSTEM_PROMPT, start_sample
TOOL_NAMES = ("execute_sql", "commit_final_answer")


@dataclass(frozen=True)
class Prompts:
    """The wording of a run in one action mode: the instruction, the acknowledgement after it, the tool definitions."""

    instruction: str
    acknowledgement: str
    tools: list[dict[str, Any]]
    upstream: bool = False  # read from AgentBench's files (--data-dir)
    texts: ToolTexts = OWN_TOOL_TEXTS  # tools mode's question lines and notices


OWN_TEXT = Prompts(TEXT_INSTRUCTION, "Ok.", TOOLS)
OWN_TOOLS = Prompts(TOOLS_INSTRUCTION, "", TOOLS)


def load_prompts(data_dir: Path | None, action_mode: str = "text") -> Prompts:
    """AgentBench's wording from the pulled files under ``data_dir`` (v0.2's text, FC's tool definitions), else
    the project's own. A missing or changed file is a one-line TaskFileError naming it."""
    if data_dir is None:
        return OWN_TOOLS if action_mode == "tools" else OWN_TEXT
    if action_mode == "tools":
        return _fc_prompts(data_dir)
    source = upstream_source(data_dir, V02, UPSTREAM_TASK, env="db")
    instruction = source.literal("big_prompt")
    replies = [m.get("content") for m in source.call_arguments("DBBench.start_sample", "inject") if isinstance(m, dict) and m.get("role") == "agent"]
    if not isinstance(instruction, str) or not replies or not isinstance(replies[0], str):
        raise source.error("big_prompt must be a string and DBBench.start_sample inject the agent's acknowledgement")
    return Prompts(instruction, replies[0], TOOLS, True)


def _fc_prompts(data_dir: Path) -> Prompts:
    """FC's tools-mode wording: its definitions, ``SYSTEM_PROMPT``, and what ``DBBenchTask.start_sample`` adds to the
    question (``user_prompt += "…" + …``) and sends as notices (the literal ``content=`` of its user and tool messages)."""
    source = upstream_source(data_dir, FC, FC_TASK, env="db")
    where = "DBBenchTask.start_sample"
    system = source.literal("SYSTEM_PROMPT")
    prefixes = source.added_prefixes(where, "user_prompt")
    users = [t for t in source.keyword_arguments(where, "ChatCompletionUserMessageParam", "content") if isinstance(t, str)]
    tools = source.keyword_arguments(where, "ChatCompletionToolMessageParam", "content")
    if not isinstance(system, str) or len(prefixes) != 3 or len(users) != 1 or len(tools) != 3 \
            or not isinstance(tools[0], str) or not isinstance(tools[2], str):  # fmt: skip
        raise source.error(f"{where} should add evidence, table information and question lines and send one user notice "
                           "and two tool notices")
    texts = ToolTexts(prefixes[0], prefixes[1], prefixes[2], users[0], tools[0], tools[2])
    return Prompts(system, "", fc_tools(data_dir, "dbbench", TOOL_NAMES, env="db"), True, texts)


def first_messages(record: dict[str, Any], action_mode: str, prompts: Prompts | None = None) -> list[Message]:
    """The opening of v0.2's ``start_sample``: instruction, acknowledgement, ``description + "\\n" + add_description``;
    in tools mode FC's: the system text, then the question (evidence and table information lines when given)."""
    prompts = prompts or load_prompts(None, action_mode)
    if action_mode == "tools":
        t = prompts.texts
        question = "".join(f"{prefix}{record[key]}\n" for prefix, key in ((t.evidence, "evidence"), (t.table, "add_description"))
                           if record.get(key) not in (None, ""))  # fmt: skip
        return [{"role": "system", "content": prompts.instruction},
                {"role": "user", "content": f"{question}{t.question}{record['description']}\n"}]
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
