"""Mock-model policies for ``kg``.

``oracle`` replays the task's gold program (``actions``) one call per reply through the real protocol,
naming topic entities by their surface names (as a model would; names with commas or parentheses
exercise the argument fix), then answers ``Final Answer: #<last variable>``.

``weak`` picks one failure mode per task, so a suite shows every status the environment emits:
a wrong final answer (completed, low F1), never answering (task_limit_exceeded), a full context
window (context_limit_exceeded), a run of unexecutable replies (each kind of error message, then
task_limit_exceeded), and answering with the wrong variable (completed, F1 0).
"""

from __future__ import annotations

import json
import re

from ...environment import Policy, PolicyReply, PolicyRequest, ToolCall, stable_choice
from .tools import TOOL_PARAMS

_CALL = re.compile(r"^(\w+)\((.*)\)$")
_MAKES_VARIABLE = {"get_neighbors", "intersection", "argmax", "argmin", "count"}


def _replies_so_far(req: PolicyRequest) -> int:
    """Assistant replies after the task's question, the last user message naming entities (the one-shot
    example's replies before it do not count; FC's layout has no "A new question:" lead)."""
    start = 0
    for i, msg in enumerate(req.messages):
        if msg.get("role") == "user" and "\nEntities: [" in (msg.get("content") or ""):
            start = i
    return sum(1 for m in req.messages[start:] if m.get("role") == "assistant")


def _split_action(action: str) -> tuple[str, list[str]]:
    match = _CALL.match(action.strip())
    if match is None:
        return action, []
    return match.group(1), [a.strip() for a in match.group(2).split(",")]


def _names_by_id(req: PolicyRequest) -> dict[str, str]:
    by_id: dict[str, list[str]] = {}
    for name, mid in req.task.data["entities"].items():
        by_id.setdefault(mid, []).append(name)
    return {mid: names[0] for mid, names in by_id.items() if len(names) == 1}


def _call(req: PolicyRequest, name: str, args: list[str], thought: str) -> PolicyReply:
    if req.tools is not None:
        params = TOOL_PARAMS.get(name, ("variable",))
        payload = dict(zip(params, args))
        return PolicyReply(content=f"Thought: {thought}", tool_calls=[ToolCall(id=f"call_{req.turn}", name=name, arguments=json.dumps(payload))])
    return PolicyReply(content=f"Thought: {thought}\nAction: {name}({', '.join(args)})")


def _gold_step(req: PolicyRequest, k: int) -> PolicyReply:
    name, args = _split_action(req.task.data["actions"][k])
    names = _names_by_id(req)
    args = [names.get(a, a) for a in args]
    return _call(req, name, args, f"Step {k + 1} of my plan is {name}.")


def _n_variables(actions: list[str]) -> int:
    return sum(1 for a in actions if _split_action(a)[0] in _MAKES_VARIABLE)


def oracle(req: PolicyRequest) -> PolicyReply:
    actions: list[str] = req.task.data["actions"]
    k = _replies_so_far(req)
    if k < len(actions):
        return _gold_step(req, k)
    return PolicyReply(content=f"Thought: the last variable answers the question.\nFinal Answer: #{_n_variables(actions) - 1}")


_BAD_REPLIES = [
    "I think the answer is probably somewhere in the graph.",  # no Action line
    "Action: let me look around first",  # Action line without a call
    "Action: get_relations()",  # unreadable arguments (syntax error message)
    "Action: get_neighbors(#7, people.person.profession)",  # no such variable
    "Action: delete_everything(#0)",  # not a tool
    "Final Answer: #42",  # invalid variable id
    "Action: get_neighbors({entity}, no.such.relation)",  # relation not listed
    "Action: intersection({entity}, {entity})",  # raw ids are not variables
    "Action: os.system(rm -rf /)",
]


def weak(req: PolicyRequest) -> PolicyReply:
    mode = stable_choice(req.task.split + "/" + req.task.task_id, 5)
    actions: list[str] = req.task.data["actions"]
    k = _replies_so_far(req)
    entity = next(iter(req.task.data["entities"]), "Barack Obama")
    if mode == 0:  # stops after the first hop and answers with it
        if k < min(2, len(actions)):
            return _gold_step(req, k)
        return PolicyReply(content="Thought: that must be it.\nFinal Answer: #0")
    if mode == 1:  # explores forever
        return _call(req, "get_relations", [entity], "Let me look at the relations again.")
    if mode == 2:
        return PolicyReply(fail="context_length")
    if mode == 3:  # every kind of unexecutable reply, until the turn cap
        text = _BAD_REPLIES[k % len(_BAD_REPLIES)].format(entity=entity)
        if req.tools is not None and text.startswith("Action: "):
            match = _CALL.match(text[len("Action: "):])
            if match:
                name, args = match.group(1), [a.strip() for a in match.group(2).split(",")]
                params = TOOL_PARAMS.get(name, ("variable",))
                payload = dict(zip(params, args)) if len(args) == len(params) else {"variable": match.group(2)}
                return PolicyReply(tool_calls=[ToolCall(id=f"call_{req.turn}", name=name, arguments=json.dumps(payload))])
        return PolicyReply(content=text)
    # mode 4: follows the plan, then answers with the count of the result (wrong kind of answer)
    if k < len(actions):
        return _gold_step(req, k)
    last = _n_variables(actions) - 1
    if k == len(actions) and _split_action(actions[-1])[0] != "count":
        return _call(req, "count", [f"#{last}"], "Let me count them.")
    return PolicyReply(content=f"Final Answer: #{_n_variables(actions)}" if _split_action(actions[-1])[0] != "count" else "Final Answer: #0")


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak}
