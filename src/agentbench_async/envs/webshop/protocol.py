"""What the agent is told and how its replies are read (AgentBench v0.2 WebShop task; FC for tools mode).

Text mode: rules, "Ok.", a one-shot purchase in four exchanges, then every round
``Observation:\\n<page text>\\n\\nAvailable Actions:\\n<str() of the actions dict>``; the reply's action is the
first match of ``[Aa]ction: *\\n* *((search|click)\\[.+?])``. Tools mode (AgentBench FC): a system prompt,
tools ``search_action(keywords)`` and ``click_action(value)``, tool results
``Action: <action>\\n\\nObservation:\\n...``. With ``--data-dir`` text mode's wording is v0.2's, read from its
``webshop/__init__.py``, and tools mode's FC's, read from its ``webshop/task.py`` (``FC_TASK``: the system text, the
first, next-round and tool-result templates, the notices) and ``configs/tasks/webshop.yaml`` (the tools).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import Message
from ..upstream_prompts import FC, V02, fc_tools, upstream_source

MAX_ROUNDS = 10  # AgentBench v0.2 webshop: 10 rounds (text mode)
FC_ROUNDS = 20  # AgentBench FC's round (configs/tasks/webshop.yaml): tools mode
UPSTREAM_TASK = "src/server/tasks/webshop/__init__.py"  # v0.2's WebShop task: the prompt and start_sample's injects
FC_TASK = "src/server/tasks/webshop/task.py"  # FC's WebShop task: prompt_with_max_turn, sync_start_sample's messages
TOOL_NAMES = ("search_action", "click_action")

ACTION_RE = re.compile(r"[Aa]ction: *\n* *((search|click)\[.+?])")

TEXT_RULES = """
You are shopping in an online store, and you must carry out the instruction you are given.
In every round you get an observation of the current page and a list of the actions available on it, and you answer with exactly one action.
You may search only when the page has a search bar, and you may only click buttons listed under "clickables".
An action is written as search[keywords] or click[value].
An action that is not valid does nothing.
The search keywords are yours to choose, but a click value must be one of the listed values exactly. Think carefully about the keywords you search for.
Answer in this format:
Thought:
I think ...

Action:
click[something]
"""

TOOLS_RULES = """
You are shopping in an online store, and you must carry out the instruction you are given.
In every round you get an observation of the current page and a list of the actions available on it, and you answer by calling one of your tools.
Use the search tool only when the page has a search bar; the click tool presses one of the buttons listed under "clickables".
An action that is not valid does nothing.
The search keywords are yours to choose, but the value you click must be one of the listed values. Think carefully about the keywords you search for.
Think about what to do first, then call the matching tool.
Always call a tool, even when you would like to ask something: you may use any of your tools without asking the user.
"""

# A call AgentBench FC leaves unanswered (a message's later calls; a first call it does not run): the conversation
# must answer every call for the providers that check it (OpenAI), so the engine answers it so (webshop.tool_replies)
NOT_RUN = "Not executed: only a message's first call, of search_action or click_action with readable arguments, is run."


@dataclass(frozen=True)
class ToolTexts:
    """Tools mode's wording besides the tools (AgentBench FC's ``WebShop.sync_start_sample``): ``str.format`` templates
    of ``observation``, ``available_actions`` and ``action``, and the notices."""

    system: str
    first: str  # the first page
    page: str  # a page sent as a user message (after a round without an action)
    result: str  # a page sent as the action's tool result
    no_call: str  # the observation after a reply without a call (sent with the page's actions)
    unreadable: str  # a user message after a call whose arguments cannot be read


OWN_TOOL_TEXTS = ToolTexts(
    TOOLS_RULES, "The initial observation:\n{observation}\n\nAvailable Actions:\n{available_actions}",
    "Observation:\n{observation}\n\nAvailable Actions:\n{available_actions}",
    "Action: {action}\n\nObservation:\n{observation}\n\nAvailable Actions:\n{available_actions}",
    "Your message called no tool. Call search_action or click_action.", "The arguments of your tool call could not be read.",
)


def load_tool_texts(data_dir: Path | None) -> ToolTexts:
    """FC's tools-mode wording from its pulled ``webshop/task.py`` (the module's ``prompt_with_max_turn``, the literal and
    f-string ``content=`` of ``sync_start_sample``'s messages, the text it assigns to ``observation``), else ours."""
    if data_dir is None:
        return OWN_TOOL_TEXTS
    task = upstream_source(data_dir, FC, FC_TASK, env="webshop")
    where = "WebShop.sync_start_sample"
    system = task.literal("prompt_with_max_turn")
    users = task.keyword_arguments(where, "ChatCompletionUserMessageParam", "content")
    results = task.keyword_arguments(where, "ChatCompletionToolMessageParam", "content")
    notices = task.assigned_texts(where, "observation")
    if not isinstance(system, str) or len(users) != 3 or not all(isinstance(u, str) for u in users) or not results \
            or not isinstance(results[0], str) or len(notices) != 1:  # fmt: skip
        raise task.error(f"{where} should send the first page, a page and a notice as user messages, the action's result "
                         "as a tool message, and assign the no-call notice to observation")
    return ToolTexts(system, users[0], users[1], results[0], notices[0], users[2])

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_action",
            "description": "Search the store with the given keywords.",
            "parameters": {
                "type": "object",
                "properties": {"keywords": {"type": "string", "description": "The keywords to search for."}},
                "required": ["keywords"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "click_action",
            "description": "Click a button or link of the current page.",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "string", "description": "A value from the page's clickables."}},
                "required": ["value"],
                "additionalProperties": False,
            },
        },
    },
]
TOOL_ACTIONS = {"search_action": ("search", "keywords"), "click_action": ("click", "value")}

# ------------------------------------------------------------------------------------- the one-shot
_EX_INSTRUCTION = "i want a set of 3 unscented soy candles in glass jars, and price lower than 40.00 dollars"
_EX_RESULTS = [
    ("B08KT7Q2WX", "Hearthlight Soy Candle Set of 3, Unscented, Amber Glass Jars, 8 oz Each", "$32.99"),
    ("B07RM4N5ZC", "Lumen & Wick Scented Candle Gift Set, Lavender and Vanilla, Tin Containers", "$18.5"),
    ("B09DW2H6PL", "Unscented Pillar Candles 3 Pack, Paraffin Wax, 6 Inch, Ivory", "$21.99"),
    ("B06XGJ8VQS", "Quiet Flame Soy Wax Jar Candle, Unscented, Clear Glass, 12 oz", "$14.0"),
    ("B0851MFTRN", "Tealight Candles 100 Pack, Unscented, Aluminum Cups, 4 Hour Burn", "$12.99"),
    ("B01N3ZQ8HK", "Beeswax Taper Candles Set of 6, Natural Honey, Dripless", "$27.95"),
    ("B09JX4CW7M", "Cedar Grove 3 Wick Candle, Sandalwood Scent, Large Glass Bowl", "$24.5 to $39.0"),
    ("B07Y6LKS2D", "Soy Candle Making Kit with Glass Jars, Wicks and Wax Flakes", "$35.49"),
    ("B0B2MNP4QV", "Flameless LED Candles Set of 3, Battery Operated, Real Wax, Remote Control", "$29.99"),
    ("B08C9TRW3F", "Coconut Soy Blend Candle Trio, Unscented, Frosted Glass Tumblers, 6 oz", "$41.0"),
]
_EX_ITEM = [
    "Instruction:", _EX_INSTRUCTION, "Back to Search", "< Prev", "size", "single jar", "set of 3",
    _EX_RESULTS[0][1], f"Price: {_EX_RESULTS[0][2]}", "Rating: N.A.", "Description", "Features", "Reviews", "Buy Now",
]


def _example_page(segments: list[str], n_clickables: int, search_bar: bool) -> str:
    actions = json.dumps({"has_search_bar": search_bar, "clickables": ["..."] * n_clickables})
    return f'Observation:\n"{" [SEP] ".join(segments)}"\n\nAvailable Actions:\n{actions}'


def _example_reply(thought: str, action: str) -> str:
    return f"Thought:\nI think {thought}.\n\nAction:\n{action}"


def one_shot() -> list[Message]:
    results = ["Instruction:", _EX_INSTRUCTION, "Back to Search", "Page 1 (Total results: 50)", "Next >"]
    for asin, title, price in _EX_RESULTS:
        results += [asin, title, price]
    turns = [
        (_example_page(["WebShop", "Instruction:", _EX_INSTRUCTION, "Search"], 1, True),
         _example_reply("I should search for unscented soy candles in glass jars, sold as a set of 3", "search[unscented soy candles glass jar set of 3]")),
        (_example_page(results, 2 + len(_EX_RESULTS), False),
         _example_reply("the first product is an unscented soy candle set in glass jars and costs less than 40 dollars, so I will open it", f"click[{_EX_RESULTS[0][0]}]")),
        (_example_page(_EX_ITEM, 8, False),
         _example_reply("the instruction asks for three candles, so I will choose the 'set of 3' size", "click[set of 3]")),
        (_example_page(_EX_ITEM, 8, False),
         _example_reply("the product and its option now match the instruction, so I will buy it", "click[Buy Now]")),
    ]
    messages: list[Message] = []
    for page, reply in turns:
        messages += [{"role": "user", "content": page}, {"role": "assistant", "content": reply}]
    return messages


@dataclass(frozen=True)
class Prompts:
    """The wording of a run: text mode's rules, acknowledgement and one-shot conversation; tools mode's tools."""

    rules: str
    acknowledgement: str
    example: list[Message]
    tools: list[dict[str, Any]]
    upstream: bool  # read from AgentBench's files (--data-dir), not the project's own


OWN_PROMPTS = Prompts(TEXT_RULES, "Ok.", one_shot(), TOOLS, upstream=False)


def load_prompts(data_dir: Path | None) -> Prompts:
    """AgentBench's wording from the pulled upstream files under ``data_dir``, else the project's own."""
    if data_dir is None:
        return OWN_PROMPTS
    task = upstream_source(data_dir, V02, UPSTREAM_TASK, env="webshop")
    rules = task.literal("prompt")
    shown = [m for m in task.call_arguments("WebShop.start_sample", "inject") if isinstance(m, dict) and isinstance(m.get("content"), str)]
    roles = [m.get("role") for m in shown]
    if not isinstance(rules, str) or len(shown) < 3 or len(shown) % 2 == 0 or roles != ["agent", *["user", "agent"] * (len(shown) // 2)]:
        raise task.error("expected a string 'prompt' and start_sample injecting 'Ok.' then user/agent example turns")
    messages: list[Message] = [{"role": "assistant" if m["role"] == "agent" else "user", "content": m["content"]} for m in shown]
    tools = fc_tools(data_dir, "webshop", TOOL_NAMES, env="webshop")
    return Prompts(rules, messages[0]["content"] or "", messages[1:], tools, upstream=True)


# ------------------------------------------------------------------------------------- messages


def round_message(observation: str, available: dict[str, Any]) -> str:
    """One round's observation, the available actions as Python's str() of the dict (as upstream)."""
    return f"Observation:\n{observation}\n\nAvailable Actions:\n{available}"


def first_messages(action_mode: str, observation: str, available: dict[str, Any], prompts: Prompts = OWN_PROMPTS,
                   texts: ToolTexts = OWN_TOOL_TEXTS) -> list[Message]:  # fmt: skip
    """Text mode: v0.2's rules, acknowledgement, one-shot conversation and first round; tools mode: FC's system text
    and first page."""
    if action_mode == "tools":
        return [
            {"role": "system", "content": texts.system},
            {"role": "user", "content": texts.first.format(observation=observation, available_actions=available)},
        ]
    return [
        {"role": "user", "content": prompts.rules},
        {"role": "assistant", "content": prompts.acknowledgement},
        *(dict(m) for m in prompts.example),
        {"role": "user", "content": round_message(observation, available)},
    ]


def parse_action(content: str) -> str | None:
    """The reply's action (``search[...]`` / ``click[...]``), or None when the format is not followed."""
    match = ACTION_RE.search(content)
    return match.group(1) if match else None
