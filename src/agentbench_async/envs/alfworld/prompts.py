"""What the model is shown: instructions, the one-shot example, observations and the action list.

Wording is this project's; the information is AgentBench v0.2's (text mode) and AgentBench FC's (tools
mode, one ``take_action`` function). Observations are processed exactly as upstream:

* first observation: the reset text split on blank lines, the welcome banner dropped, the rest joined
  with single newlines;
* step observations: a leading ``You arrive at loc N. `` is cut (2.1.1 grammar);
* every observation is followed directly by `` AVAILABLE ACTIONS: `` + the engine's commands, one per
  line, + a newline.
"""

from __future__ import annotations

import copy
from typing import Any

from ...types import Message

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
LIST_MARKER = "AVAILABLE ACTIONS"
NO_TOOL_CALL = "Your message called no tool, so nothing was done. Call take_action with your next action."
BAD_TOOL_CALL = "This call could not be read, so nothing was done: take_action needs a string argument \"action\"."
EXTRA_TOOL_CALL = "Not executed: only the first tool call of a message is run."


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


def text_prompt(example: list[str], observation: str, commands: list[str]) -> list[Message]:
    return [
        {"role": "user", "content": TEXT_INSTRUCTION},
        {"role": "assistant", "content": ACKNOWLEDGEMENT},
        *example_messages(example),
        {"role": "user", "content": TASK_LEAD + observation + available_actions(commands)},
    ]


def tools_prompt(observation: str, commands: list[str]) -> list[Message]:
    return [
        {"role": "system", "content": TOOLS_INSTRUCTION},
        {"role": "user", "content": TASK_LEAD + observation + available_actions(commands)},
    ]
