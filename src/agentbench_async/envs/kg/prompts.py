"""Prompt text and the native tool definitions.

With ``--data-dir`` the wording is AgentBench's own, read from the files ``agentbench data pull`` fetches: text
mode's instructions, acknowledgement and one-shot example from v0.2's ``knowledgegraph/task.py`` (``INSTRUCTIONS``,
``ONE_SHOT``, ``KnowledgeGraph.start_sample``), tools mode's system text, one-shot conversation and tools from FC's
``knowledgegraph/const.py`` (``INSTRUCTIONS`` formatted with ``max_rounds`` of FC's ``configs/tasks/kg.yaml``,
``ONE_SHOT`` as kg-std sends it, ``TOOLS``). Without it the project's own wording of the same facts runs (named
deviations ``kg.prompts``, ``kg.tools_prompt``, ``kg.tools``).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import Message
from ..upstream_prompts import FC, V02, upstream_config, upstream_source

MAX_ROUNDS = 15

_TOOL_GUIDE = """\
1. get_relations(variable: var) -> list of relations
   A variable is either an entity or a set of entities (the result of an earlier call). This lists the relations
   (outgoing edges) of the variable in the KB, so you can pick the one that leads towards the answer. Example:
   get_relations(Barack Obama) lists the relations starting at the entity Barack Obama. Its argument must be an
   entity or a variable such as #0, nothing else.

2. get_neighbors(variable: var, relation: str) -> variable
   Returns the entities linked to the variable through the relation. Use it only with a relation that
   get_relations() has just listed for that same variable. Example: get_neighbors(Barack Obama,
   people.person.profession) gives Obama's professions.

3. intersection(variable1: var, variable2: var) -> variable
   Returns the entities that are in both variables. Both variables MUST have the same type.

4. get_attributes(variable: var) -> list of attributes
   Lists the numerical attributes of the variable. Only use it when the question asks for a superlative
   (the largest, the earliest, ...), i.e. before argmax or argmin.

5. argmax(variable: var, attribute: str) -> variable
   Returns the member(s) of the variable with the largest value of the attribute. Use it only with an attribute
   that get_attributes() listed for that variable. Example: argmax(variable, age) gives the oldest member.

6. argmin(variable: var, attribute: str) -> variable
   Returns the member(s) with the smallest value of the attribute; same rules as argmax. Example:
   argmin(variable, age) gives the youngest member.

7. count(variable: var) -> int
   Returns how many entities the variable holds.
"""

_RULES = f"""\
Every call that produces a variable gives it an id, counting from 0 in order of creation: #0 is the first
variable, #1 the second, and so on. Whenever a variable holds the answer to the question, reply with
'Final Answer: #id' using that variable's id; for example, if #3 is the answer, you MUST reply 'Final Answer: #3'.

Take exactly ONE action per reply and wait for its observation before the next one. You have at most
{MAX_ROUNDS} actions to find the answer.
"""

# As upstream, the instructions do not spell out the reply format: the "Thought: ... / Action: <call>" lines
# are shown only by the one-shot example below.
TEXT_INSTRUCTIONS = (
    "Your job is to answer questions using a knowledge base (KB). You query the KB with these tools:\n\n"
    + _TOOL_GUIDE
    + "\n"
    + _RULES
)

TOOLS_INSTRUCTIONS = (
    "Your job is to answer questions using a knowledge base (KB), which you query through the functions you are "
    "given (get_relations, get_neighbors, intersection, get_attributes, argmax, argmin, count). Pass entities by "
    "the names listed with the question and earlier results as variables such as #0. Fetch relations before "
    "neighbours, and attributes before argmax/argmin; intersection needs two variables of the same type.\n\n"
    + _RULES
    + "Do not call a function to submit the answer: write 'Final Answer: #id' as plain text instead.\n"
)

ACKNOWLEDGEMENT = "Understood. I am ready for the first question."

# The worked example (AgentBench's one-shot: the same question, relations and variables; our wording).
_EXAMPLE_QUESTION = (
    "Question: the bipropellant rocket engine with kerosene and gas-generator cycle is designed by who? "
    "\nEntities: [Gas-generator cycle, Kerosene]"
)
_EXAMPLE: list[tuple[str, str, dict[str, str], str]] = [
    # (thought, tool, arguments, observation)
    (
        "First I need the engines that use the gas-generator cycle, so I look at the relations of 'Gas-generator cycle'.",
        "get_relations",
        {"variable": "Gas-generator cycle"},
        "Observation: [spaceflight.rocket_engine_cycle.rocket_engines, spaceflight.satellite.orbiting, "
        "spaceflight.rocket_stage.fuel, spaceflight.satellite_manufacturer.spacecraft_manufactured, automotive.fuel.engines]",
    ),
    (
        "spaceflight.rocket_engine_cycle.rocket_engines should lead to the engines with this cycle.",
        "get_neighbors",
        {"variable": "Gas-generator cycle", "relation": "spaceflight.rocket_engine_cycle.rocket_engines"},
        "Observation: variable #0, which are instances of spaceflight.bipropellant_rocket_engine",
    ),
    (
        "Next I need the engines that burn kerosene, so I look at the relations of 'Kerosene'.",
        "get_relations",
        {"variable": "Kerosene"},
        "Observation: [spaceflight.satellite_manufacturer.spacecraft_manufactured, automotive.fuel.engines, "
        "spaceflight.rocket_engine_cycle.rocket_engines]",
    ),
    (
        "spaceflight.rocket_engine_cycle.rocket_engines again gives the engines linked to kerosene.",
        "get_neighbors",
        {"variable": "Kerosene", "relation": "spaceflight.rocket_engine_cycle.rocket_engines"},
        "Observation: variable #1, which are instances of spaceflight.bipropellant_rocket_engine",
    ),
    (
        "The engines with both the gas-generator cycle and kerosene are the intersection of #0 and #1.",
        "intersection",
        {"variable1": "#0", "variable2": "#1"},
        "Observation: variable #2, which are instances of spaceflight.bipropellant_rocket_engine",
    ),
    (
        "Now I need the designers of these engines, so I look at the relations of #2.",
        "get_relations",
        {"variable": "#2"},
        "Observation: [spaceflight.rocket_engine.manufactured_by, spaceflight.rocket_engine.designed_by, "
        "spaceflight.rocket_engine.design_period, spaceflight.rocket_engine.status]",
    ),
    (
        "spaceflight.rocket_engine.designed_by gives the designers.",
        "get_neighbors",
        {"variable": "#2", "relation": "spaceflight.rocket_engine.designed_by"},
        # Upstream's one-shot has this typo ("pspaceflight"); kept for parity with AgentBench's prompt.
        "Observation: variable #3, which are instances of pspaceflight.rocket_engine_designer",
    ),
]
_EXAMPLE_FINAL = "Thought: #3 holds the designers of the engines, which is what the question asks for.\nFinal Answer: #3"


def _call_text(tool: str, args: dict[str, str]) -> str:
    return f"{tool}({', '.join(args.values())})"


def text_prompt(question: str, entity_names: list[str]) -> list[Message]:
    messages: list[Message] = [
        {"role": "user", "content": TEXT_INSTRUCTIONS},
        {"role": "assistant", "content": ACKNOWLEDGEMENT},
        {"role": "user", "content": _EXAMPLE_QUESTION},
    ]
    for thought, tool, args, observation in _EXAMPLE:
        messages.append({"role": "assistant", "content": f"Thought: {thought}\nAction: {_call_text(tool, args)}"})
        messages.append({"role": "user", "content": observation})
    messages.append({"role": "assistant", "content": _EXAMPLE_FINAL})
    messages.append({"role": "user", "content": new_question(question, entity_names)})
    return messages


def tools_prompt(question: str, entity_names: list[str]) -> list[Message]:
    import json

    messages: list[Message] = [
        {"role": "user", "content": TOOLS_INSTRUCTIONS},
        {"role": "assistant", "content": ACKNOWLEDGEMENT},
        {"role": "user", "content": _EXAMPLE_QUESTION},
    ]
    for i, (thought, tool, args, observation) in enumerate(_EXAMPLE):
        call_id = f"example_call_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Thought: {thought}",
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": observation})
    messages.append({"role": "assistant", "content": _EXAMPLE_FINAL})
    messages.append({"role": "user", "content": new_question(question, entity_names)})
    return messages


def new_question(question: str, entity_names: list[str]) -> str:
    return "A new question: " + question + "\nEntities: [" + ", ".join(entity_names) + "]"


def _tool(name: str, description: str, params: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
                "required": list(params),
                "additionalProperties": False,
            },
        },
    }


_VAR = "An entity name from the question, an entity id, or a variable such as #0."
TOOLS: list[dict[str, Any]] = [
    _tool("get_relations", "List the relations going out of an entity or a variable; call it before get_neighbors.", {"variable": _VAR}),
    _tool(
        "get_neighbors",
        "Entities linked to the variable through the relation (one listed by get_relations for it); makes a new variable.",
        {"variable": _VAR, "relation": "A relation listed by get_relations for this variable."},
    ),
    _tool(
        "intersection",
        "Entities in both variables (which must have the same type); makes a new variable.",
        {"variable1": "A variable such as #0.", "variable2": "A variable such as #1."},
    ),
    _tool("get_attributes", "List the numerical attributes of a variable; call it before argmax/argmin.", {"variable": "A variable such as #0."}),
    _tool(
        "argmax",
        "Members of the variable with the largest value of the attribute (one listed by get_attributes); makes a new variable.",
        {"variable": "A variable such as #0.", "attribute": "An attribute listed by get_attributes for this variable."},
    ),
    _tool(
        "argmin",
        "Members of the variable with the smallest value of the attribute (one listed by get_attributes); makes a new variable.",
        {"variable": "A variable such as #0.", "attribute": "An attribute listed by get_attributes for this variable."},
    ),
    _tool("count", "How many entities the variable holds; makes a new variable (a number).", {"variable": "A variable such as #0."}),
]


V02_TASK = "src/server/tasks/knowledgegraph/task.py"  # INSTRUCTIONS, ONE_SHOT, KnowledgeGraph.start_sample
FC_CONST = "src/server/tasks/knowledgegraph/const.py"  # INSTRUCTIONS, ONE_SHOT, TOOLS
FC_TASK = "src/server/tasks/knowledgegraph/task.py"  # KnowledgeGraph.sync_start_sample: the notices of a round
FC_API = "src/server/tasks/knowledgegraph/api.py"  # API: the tools' refusals (ValueError texts)


@dataclass(frozen=True)
class ToolTexts:
    """What tools mode answers besides observations (AgentBench FC's ``KnowledgeGraph.sync_start_sample`` and ``API``):
    templates filled with ``str.format`` (``function_name``, ``e``: the error's text)."""

    no_call: str  # a user message after a reply with neither a call nor a final answer
    no_function: str  # a call of a function the API does not have ({function_name})
    arguments: str  # a call missing one of its parameters ({function_name})
    error: str  # any other failure of a call ({e})
    refusals: dict[str, str]  # the API's refusals: "get_relations" (not a variable or entity), "get_neighbors",
    # "relation" (not a relation of the variable), "type" (intersection of two types), "attribute" (argmax/argmin)
    api_names: frozenset[str] = frozenset()  # what else the API object has (FC: such a name gets the arguments notice)


OWN_TOOL_TEXTS = ToolTexts(
    "No tool call and no 'Final Answer: #id': call one of the tools, or give the final answer.",
    "There is no function {function_name}.", "Wrong arguments for {function_name}.", "The call failed: {e}",
    {"get_relations": "get_relations needs a variable or an entity", "get_neighbors": "get_neighbors needs a variable or an entity",
     "relation": "the relation is not one of the variable's relations", "type": "the two variables are not of the same type",
     "argmax": "the attribute is not one of the variable's attributes", "argmin": "the attribute is not one of the variable's attributes"},
)


@dataclass(frozen=True)
class Prompts:
    """The wording of a run in one action mode: the messages before the question, what leads the question
    (v0.2: ``A new question: ``; FC: nothing), the tool definitions, tools mode's notices."""

    opening: list[Message]
    question_lead: str
    tools: list[dict[str, Any]]
    upstream: bool = False
    texts: ToolTexts = OWN_TOOL_TEXTS


def _fc_texts(data_dir: Path) -> ToolTexts:
    """FC's notices (the literal and f-string ``content=`` of ``sync_start_sample``'s messages) and its API's refusals
    (the ``ValueError`` texts of ``api.py``)."""
    task = upstream_source(data_dir, FC, FC_TASK, env="kg")
    where = "KnowledgeGraph.sync_start_sample"
    users = [t for t in task.keyword_arguments(where, "ChatCompletionUserMessageParam", "content") if isinstance(t, str)]
    tools = [t for t in task.keyword_arguments(where, "ChatCompletionToolMessageParam", "content") if isinstance(t, str)]
    if len(users) != 2 or len(tools) != 3 or "{function_name}" not in tools[0] or "{e}" not in tools[2]:
        raise task.error(f"{where} should send a no-call notice and three tool notices (no such function, arguments, error)")
    api = upstream_source(data_dir, FC, FC_API, env="kg")
    raised = {name: api.call_arguments(f"API.{name}", "ValueError") for name in ("get_relations", "get_neighbors", "intersection", "argmax", "argmin")}
    if not all(isinstance(t, str) for texts in raised.values() for t in texts) or len(raised["get_neighbors"]) != 2:
        raise api.error("API's tools should raise ValueError with literal texts")
    refusals = {"get_relations": raised["get_relations"][0], "get_neighbors": raised["get_neighbors"][0], "relation": raised["get_neighbors"][1],
                "type": raised["intersection"][0], "argmax": raised["argmax"][0], "argmin": raised["argmin"][0]}
    methods = next(n for n in api.tree.body if isinstance(n, ast.ClassDef) and n.name == "API").body
    names = {m.name for m in methods if isinstance(m, ast.FunctionDef)}
    names |= {t.attr for n in ast.walk(api.function("API.__init__")) if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}  # fmt: skip
    return ToolTexts(users[0], tools[0], tools[1], tools[2], refusals, frozenset(names | set(dir(object))))


def load_prompts(data_dir: Path | None, action_mode: str = "text") -> Prompts:
    """AgentBench's wording from the pulled files under ``data_dir`` (v0.2's for text mode, FC's for tools mode),
    else the project's own. A missing or changed file is a one-line TaskFileError naming it."""
    if data_dir is None:
        opening = (tools_prompt if action_mode == "tools" else text_prompt)("", [])[:-1]
        return Prompts(opening, "A new question: ", TOOLS)
    if action_mode == "tools":
        const = upstream_source(data_dir, FC, FC_CONST, env="kg")
        instructions, shots, tools = const.literal("INSTRUCTIONS"), const.literal("ONE_SHOT"), const.literal("TOOLS")
        rounds = ((upstream_config(data_dir, FC, "kg", env="kg").get("default") or {}).get("parameters") or {}).get("max_rounds")
        if not (isinstance(instructions, str) and isinstance(shots, list) and isinstance(tools, list) and isinstance(rounds, int)):
            raise const.error("INSTRUCTIONS, ONE_SHOT and TOOLS must be literals (and kg.yaml give default.parameters.max_rounds)")
        return Prompts([{"role": "system", "content": instructions.format(max_round=rounds)}, *shots], "", tools, True, _fc_texts(data_dir))
    task = upstream_source(data_dir, V02, V02_TASK, env="kg")
    instructions, shots = task.literal("INSTRUCTIONS"), task.literal("ONE_SHOT")
    replies = [m.get("content") for m in task.call_arguments("KnowledgeGraph.start_sample", "inject") if isinstance(m, dict) and m.get("role") == "agent"]
    if not (isinstance(instructions, str) and isinstance(shots, list) and replies and isinstance(replies[0], str)):
        raise task.error("INSTRUCTIONS, ONE_SHOT and the acknowledgement KnowledgeGraph.start_sample injects must be literals")
    opening: list[Message] = [{"role": "user", "content": instructions}, {"role": "assistant", "content": replies[0]}]
    opening += [{"role": "user" if i % 2 == 0 else "assistant", "content": shot} for i, shot in enumerate(shots)]
    return Prompts(opening, "A new question: ", TOOLS, True)


def first_messages(prompts: Prompts, question: str, entity_names: list[str]) -> list[Message]:
    """The opening, then the question with its entities (``<lead><question>\\nEntities: [a, b]``)."""
    return [*copy.deepcopy(prompts.opening), {"role": "user", "content": prompts.question_lead + question + "\nEntities: [" + ", ".join(entity_names) + "]"}]
