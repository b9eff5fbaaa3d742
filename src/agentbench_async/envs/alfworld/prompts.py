"""What the model is shown: instructions, the one-shot example, observations and the action list.

With ``--data-dir`` the instruction and the acknowledgement are AgentBench v0.2's own, read out of
``upstream-prompts/v0.2/src/server/tasks/alfworld/task.py`` (``agentbench data pull``), and tools mode's
``take_action`` definition is AgentBench FC's (``upstream-prompts/fc/configs/tasks/alfworld.yaml``), its system
instruction, task lead and notices FC's ``ALFWorld`` task code (``upstream-prompts/fc/src/server/tasks/alfworld/
task.py``: ``get_task_instruction``, ``alfworld_run``); the built-in suites use this project's wording with the same
information (``OWN_PROMPTS``, ``OWN_TOOL_TEXTS``).
Observations are processed exactly as upstream:

* first observation: the reset text split on blank lines, the welcome banner dropped, the rest joined
  with single newlines;
* step observations: a leading ``You arrive at loc N. `` is cut (2.1.1 grammar);
* every observation is followed directly by `` AVAILABLE ACTIONS: `` + the engine's commands, one per
  line, + a newline.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import Message
from ..upstream_prompts import FC, V02, fc_tools, upstream_source

TEXT_INSTRUCTION = (
    "You are an agent in a household, and your job is to carry out a task there. At the start you get a "
    "description of the room around you and the goal you must reach. On every turn you are given the "
    "actions you can take right now, and you pick one of them. You may answer in one of two forms. To "
    "think before acting, write exactly \"THOUGHT: your thoughts.\n ACTION: your next action\n\"; to act "
    "straight away, write exactly \"ACTION: your next action\n\". After each turn the environment tells you "
    "what happened, which you can use to plan what to do next. If it answers \"Nothing happened\", your "
    "previous action was not valid and you should try something else.\n"
    " Reminder: \n"
    "1. Your action must be one of the available actions you were given; anything else counts as an illegal action. \n"
    "2. Think only when you need to, and prefer acting directly.\n\n"
)
ACKNOWLEDGEMENT = "Understood. I will follow these instructions and do my best to complete the task."
EXAMPLE_LEAD = "Here is one example.\n"
TASK_LEAD = "Here is your task. "

TOOLS_INSTRUCTION = (
    "You are an agent in a household, and your job is to carry out a task there. At the start you get a "
    "description of the room around you and the goal you must reach. You act only through the tool "
    "take_action: put the action you choose in its \"action\" argument, and call the tool on every turn. "
    "On every turn you are given the actions you can take right now; choose one of them. After each action "
    "the environment tells you what happened, which you can use to plan what to do next. If it answers "
    "\"Nothing happened\", your previous action was not valid and you should try something else.\n"
    "Reminder:\n"
    "1. Your action must be one of the available actions you were given; anything else counts as an illegal action.\n"
    "2. Always hand in your next action through the tool, and think only when you need to."
)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "take_action",
            "description": "Perform one action in the household.",
            "parameters": {
                "type": "object",
                "properties": {"action": {"type": "string", "description": "The action to perform: one of the available actions."}},
                "required": ["action"],
                "additionalProperties": False,
            },
        },
    }
]
UPSTREAM_TASK = "src/server/tasks/alfworld/task.py"  # v0.2's ALFWorld task: get_task_instruction, alfworld_run
TOOL_NAMES = ("take_action",)
LIST_MARKER = "AVAILABLE ACTIONS"
FC_TASK = "src/server/tasks/alfworld/task.py"  # FC's ALFWorld task: get_task_instruction, alfworld_run's messages
# A call AgentBench FC leaves unanswered (a message's later calls; a first call it cannot read): the conversation must
# answer every call for the providers that check it (OpenAI), so the engine answers it so (alfworld.tool_replies)
NOT_RUN = "Not executed: only a message's first call, with a readable action, is run."


@dataclass(frozen=True)
class ToolTexts:
    """Tools mode's wording besides the tool (AgentBench FC's ``ALFWorld``): the system instruction, what leads the task,
    the user notices after a reply without a call and after a call that cannot be read."""

    system: str
    lead: str
    no_call: str
    unreadable: str


OWN_TOOL_TEXTS = ToolTexts(TOOLS_INSTRUCTION, TASK_LEAD, "Your message called no tool, so nothing was done. Call take_action with your next action.",
                           "Your tool call could not be read, so nothing was done: take_action needs a string argument \"action\".")


def load_tool_texts(data_dir: Path | None) -> ToolTexts:
    """FC's from its pulled task.py (``get_task_instruction``'s text, ``init_prompt = "…" + …``, the literal ``content=``
    of ``alfworld_run``'s user messages), else the project's."""
    if data_dir is None:
        return OWN_TOOL_TEXTS
    task = upstream_source(data_dir, FC, FC_TASK, env="alfworld")
    system = task.returned("ALFWorld.get_task_instruction")
    lead = task.added_prefixes("ALFWorld.alfworld_run", "init_prompt")
    notices = [t for t in task.keyword_arguments("ALFWorld.alfworld_run", "ChatCompletionUserMessageParam", "content") if isinstance(t, str)]
    if not isinstance(system, str) or len(lead) != 1 or len(notices) != 2:
        raise task.error("ALFWorld should return its instruction, build init_prompt from a lead text and send two notices")
    return ToolTexts(system, lead[0], notices[0], notices[1])


@dataclass(frozen=True)
class Prompts:
    """The wording of a run: text mode's instruction and acknowledgement, tools mode's tool definitions."""

    instruction: str
    acknowledgement: str
    tools: list[dict[str, Any]]
    upstream: bool  # read from AgentBench's files (--data-dir), not the project's own


OWN_PROMPTS = Prompts(TEXT_INSTRUCTION, ACKNOWLEDGEMENT, TOOLS, upstream=False)


def load_prompts(data_dir: Path | None) -> Prompts:
    """AgentBench's wording from the pulled upstream files under ``data_dir``, else the project's own."""
    if data_dir is None:
        return OWN_PROMPTS
    task = upstream_source(data_dir, V02, UPSTREAM_TASK, env="alfworld")
    instruction = task.returned("ALFWorld.get_task_instruction")
    replies = [m["content"] for m in task.call_arguments("ALFWorld.alfworld_run", "inject")
               if isinstance(m, dict) and m.get("role") == "agent" and isinstance(m.get("content"), str)]  # fmt: skip
    if not isinstance(instruction, str) or not replies:
        raise task.error("ALFWorld.get_task_instruction must return a string and alfworld_run inject the agent's acknowledgement")
    return Prompts(instruction, replies[0], fc_tools(data_dir, "alfworld", TOOL_NAMES, env="alfworld"), upstream=True)


def first_observation(feedback: str) -> str:
    """The reset text without TextWorld's welcome banner."""
    return "\n".join(feedback.split("\n\n")[1:])


def step_observation(feedback: str) -> str:
    """A step's text without the 2.1.1 grammar's ``You arrive at loc N. `` prefix."""
    if feedback.startswith("You arrive at loc "):
        return feedback[feedback.find(". ") + 2 :]
    return feedback


def available_actions(commands: list[str]) -> str:
    return f" {LIST_MARKER}: " + "\n".join(commands) + "\n"


def without_action_list(content: str) -> str:
    """Upstream's prompt shortening: an answered observation keeps only the text before its action list."""
    return content.split(LIST_MARKER)[0]


def example_messages(turns: list[str]) -> list[Message]:
    """The one-shot example as alternating user/assistant messages (a copy; the loaded turns stay as they are)."""
    texts = copy.deepcopy(turns)
    texts[0] = EXAMPLE_LEAD + texts[0]
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)]


def text_prompt(example: list[str], observation: str, commands: list[str], prompts: Prompts = OWN_PROMPTS) -> list[Message]:
    """v0.2's first prompt: instruction, acknowledgement, the one-shot example, the task start."""
    return [
        {"role": "user", "content": prompts.instruction},
        {"role": "assistant", "content": prompts.acknowledgement},
        *example_messages(example),
        {"role": "user", "content": TASK_LEAD + observation + available_actions(commands)},
    ]


def tools_prompt(observation: str, commands: list[str], texts: ToolTexts = OWN_TOOL_TEXTS) -> list[Message]:
    """FC's first request: its system instruction, then the task (no one-shot example: FC's alfworld_run sends none)."""
    return [
        {"role": "system", "content": texts.system},
        {"role": "user", "content": texts.lead + observation + available_actions(commands)},
    ]
