"""The texts the model reads in the ``agentbench`` mode: AgentBench v0.2's own, or the project's.

With ``--data-dir`` the texts are upstream's, read at run time out of the files ``agentbench data pull``
fetches (``envs/upstream_prompts.py``: parsed with ``ast``, nothing executed):

* ``AI/prompt/en.py``: ``fish_description``, ``your_fish``/``enemy_fish``, ``action_format``/``guess_format``,
  ``ACTION_PROMPT``, ``GUESS_RULE``, ``GUESS_PROMPT`` (the two first messages, assembled as en.py assembles
  ``ACTION_DESCRIPTION[2]`` and ``GUESS_DESCRIPTION[2]``) and ``action_prompt``/``guess_prompt`` (the
  per-decision templates);
* ``AI/AI_En.py``: ``self.skill_type`` and ``self.passive_type`` of ``Agent.__init__`` (the names shown for
  the skill and the passives of the last actions);
* ``AI/client.py``: the acknowledgement ``Client.llm_call`` puts after each first message (``agentbench data
  pull`` fetches it; a data dir without it, e.g. AgentBench's own ``data/``, gets the project's
  acknowledgement and every episode says so in ``details.wording``).

Without ``--data-dir`` the texts are the project's own (same structure, same information, own words). The
fixed game (``card_game.fixes=true``) keeps its one-conversation description in ``protocol.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import TaskFileError
from ..upstream_prompts import V02, upstream_path, upstream_source
from .engine import LINEUP
from .protocol import ACK, ACTION_FORMAT, ACTION_PROMPT, FISH_TEXT, GUESS_FORMAT, GUESS_PROMPT, fish_dict

CARD_GAME = "src/server/tasks/card_game"
PROMPT_FILE = f"{CARD_GAME}/AI/prompt/en.py"
AGENT_FILE = f"{CARD_GAME}/AI/AI_En.py"
CLIENT_FILE = f"{CARD_GAME}/AI/client.py"

# The engine's skill and passive kinds as upstream's SDK enums name them (``str(enum)`` is "skill_type.aoe").
SKILL_ENUM = {"AOE": "aoe", "Infight": "infight", "Normal": "normalattack"}
PASSIVE_ENUM = {"Counter": "counter", "Deflect": "deflect"}


@dataclass(frozen=True)
class Wording:
    """Everything the ``agentbench`` mode writes to the model, and where it came from."""

    action_description: str  # first message of the action conversation
    guess_description: str  # first message of the guess conversation
    ack: str  # the assistant's scripted answer to each first message
    action_prompt: str  # per decision, ``%`` with (state JSON, own last action, enemy's last action)
    guess_prompt: str  # per decision, ``%`` with (previous guess right, unknown positions, enemy's action, passives)
    skill_names: dict[str, str]  # SDK enum name (aoe, infight, normalattack) -> shown name
    passive_names: dict[str, str]  # SDK enum name (counter, deflect) -> shown name
    source: str  # "upstream", "upstream (own acknowledgement: ...)" or "own"


# -- the project's own words ------------------------------------------------------------------------

_OWN_ACTION_DESCRIPTION = (
    "Let's play a two-player battle game. Each team has four pet fish, and the fish types can differ.\n"
    "Every fish starts with 400 health and 200 attack points and has an active and a passive ability.\n"
    "Each round you pick one of your living fish; it either uses its active ability or makes a normal attack on "
    "one enemy fish, which deals half of its attack points as damage.\n"
    "A passive ability triggers by itself whenever its condition is met, whether or not that fish acted.\n"
    "The identities of your fish start hidden. Each round the enemy may guess the type of one of your fish: if it "
    "is right, that fish is revealed and each of your fish takes 50 damage.\n"
    "You win by having more fish alive when the game ends.\n\n"
    "Your four fish types:\n%s\n\n"
    "The enemy's four fish types:\n%s\n\n"
    "Every round, think it through, then give your move as JSON in this format:\n%s\n\n"
    "Always include the move. A reply without a valid move counts as giving up, and you lose the game."
)
_OWN_GUESS_DESCRIPTION = (
    "Let's play a two-player battle game. Each team has four pet fish, and the fish types can differ.\n"
    "Every fish has its health, attack points, an active and a passive ability.\n"
    "The identities of all fish start hidden. Every round you guess the type of one living enemy fish: a right "
    "guess reveals it and deals 50 damage to every enemy fish.\n"
    "You win by having more fish alive when the game ends.\n\n"
    "Your four fish types:\n%s\n\n"
    "The enemy's four fish types:\n%s\n\n"
    "Every round, think it through, then give your guess as JSON in this format:\n%s\n\n"
    "Always include the guess. A reply without a valid guess counts as giving up."
)


def own_wording() -> Wording:
    fish = fish_dict(FISH_TEXT)
    return Wording(
        action_description=_OWN_ACTION_DESCRIPTION % (fish, fish, ACTION_FORMAT),
        guess_description=_OWN_GUESS_DESCRIPTION % (fish, fish, GUESS_FORMAT),
        ack=ACK,
        action_prompt=ACTION_PROMPT,
        guess_prompt=GUESS_PROMPT,
        skill_names={"aoe": "AOE", "infight": "Infight", "normalattack": "Normal"},
        passive_names={"counter": "Counter", "deflect": "Deflect"},
        source="own",
    )


# -- AgentBench v0.2's words, read from the pulled files ----------------------------------------------


def upstream_wording(data_dir: Path) -> Wording:
    """AgentBench v0.2's texts from ``data_dir``; a missing or changed file is one line naming it."""
    prompts = upstream_source(data_dir, V02, PROMPT_FILE, env="card_game")
    agent = upstream_source(data_dir, V02, AGENT_FILE, env="card_game")
    descriptions: dict[str, dict[str, str]] = prompts.literal("fish_description")
    sides = [prompts.literal(name) for name in ("your_fish", "enemy_fish")]
    for side in sides:
        if tuple(side) != LINEUP or any(name not in descriptions for name in side):
            raise TaskFileError(f"{prompts.path}: your_fish/enemy_fish are not {list(LINEUP)} (not the pinned commit?)")
    yours, enemy = ({name: descriptions[name] for name in side} for side in sides)
    skill_type: dict[str, str] = agent.literal("self.skill_type", within="Agent.__init__")
    passive_type: dict[str, str] = agent.literal("self.passive_type", within="Agent.__init__")
    ack, source = _acknowledgement(data_dir)
    return Wording(
        # en.py: ACTION_DESCRIPTION[2] and GUESS_DESCRIPTION[2] (stage 2: the guess rule is on)
        action_description=prompts.literal("ACTION_PROMPT") % (prompts.literal("GUESS_RULE"), yours, enemy, prompts.literal("action_format")),
        guess_description=prompts.literal("GUESS_PROMPT") % (yours, enemy, prompts.literal("guess_format")),
        ack=ack,
        action_prompt=prompts.literal("action_prompt"),
        guess_prompt=prompts.literal("guess_prompt"),
        skill_names={key.removeprefix("skill_type."): value for key, value in skill_type.items()},
        passive_names={key.removeprefix("passive_type."): value for key, value in passive_type.items()},
        source=source,
    )


def _acknowledgement(data_dir: Path) -> tuple[str, str]:
    """The literal of ``history.append((system, "<ack>"))`` in ``Client.llm_call`` (AI/client.py), or the
    project's acknowledgement while the data dir lacks that file."""
    if not upstream_path(data_dir, V02, CLIENT_FILE).is_file():
        return ACK, f"upstream (own acknowledgement: {CLIENT_FILE} is not in the data dir)"
    client = upstream_source(data_dir, V02, CLIENT_FILE, env="card_game")
    for node in ast.walk(client.function("Client.llm_call")):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append" and node.args:
            pair = node.args[0]
            if isinstance(pair, ast.Tuple) and len(pair.elts) == 2:
                ack = _string(pair.elts[1])
                if ack is not None:
                    return ack, "upstream"
    raise TaskFileError(f"{client.path}: Client.llm_call appends no (system, acknowledgement) pair "
                        "(not the file of the pinned commit? run `agentbench data pull` again)")


def _string(node: ast.AST) -> str | None:
    try:
        value: Any = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def load_wording(data_dir: Path | None) -> Wording:
    return own_wording() if data_dir is None else upstream_wording(data_dir)


__all__ = ["PASSIVE_ENUM", "SKILL_ENUM", "Wording", "load_wording", "own_wording", "upstream_wording"]
