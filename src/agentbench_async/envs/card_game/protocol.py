"""What the model is told in the fixed game and how replies are read (AgentBench v0.2 ``AI/AI_En.py``).

The texts here are this project's own (the fixed game's one-conversation description and its per-decision
prompts, which the ``agentbench`` mode reuses as its own wording without ``--data-dir``, see ``wording.py``);
the information is upstream's: the rules, the four fish of each side with their skills, the two JSON formats,
and per decision the game state and the last actions.

Parsing, as upstream: every non-greedy ``{...}`` of the reply, with ``'`` replaced by ``"``, is tried as
JSON in order; the first one that is a valid move is used. A reply without any JSON object is a format
failure (upstream code 2), one with JSON but no valid move an invalid move (code 1). With ``upstream=True``
(the ``agentbench`` mode) an action is read as upstream's client reads it: ``pick_fish`` "0"-"3" name the fish
one position further on, and an eel or sunfish skill that passes the check is refused when it is sent
(``Parsed.refused``), as upstream's SDK refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .baselines import Move
from .engine import EEL, FISH_IDS, FISH_NAMES, FLAME, LINEUP, SPRAY, SUNFISH, ActionRecord, Game

MAX_TRIES = 5  # tries per decision, re-sending the same prompt

GUESS_END = "Now output your guess."
ACTION_END = "Now output your next action."

_PASSIVES = {
    "counter": "Counter: when a teammate is left below 30% health by an attack, deal 30 damage to the attacker.",
    "deflect": (
        "Deflect: when attacked while teammates are alive, keep 70% of the damage and split the other 30% "
        "evenly among the living teammates. Gain 40 attack points for every 200 damage taken in total."
    ),
}
_ACTIVES = {
    "aoe": "AOE: hit every enemy for 35% of its attack points.",
    "infight": (
        "Infight: deal 75 damage to one living teammate and gain 140 attack points. "
        "It cannot target itself or a dead teammate."
    ),
}
FISH_TEXT: dict[str, dict[str, str]] = {
    SPRAY: {"passive": _PASSIVES["counter"], "active": _ACTIVES["aoe"]},
    FLAME: {"passive": _PASSIVES["counter"], "active": _ACTIVES["infight"]},
    EEL: {"passive": _PASSIVES["deflect"], "active": _ACTIVES["aoe"]},
    SUNFISH: {"passive": _PASSIVES["deflect"], "active": _ACTIVES["infight"]},
}
ACTION_FORMAT = {
    "pick_fish": "the name of one of your living fish",
    "action": "normal or active",
    "target_position": "the target's position, an integer from 0 to 3",
}
GUESS_FORMAT = {
    "guess_type": "the fish type you think the enemy fish is",
    "target_position": "the position of the enemy fish you guess, an integer from 0 to 3",
}

ACK = "Understood. I will play by these rules and end every reply with my move in the requested JSON format."

# Per-decision prompts, ``%`` with (state JSON, own last action, enemy's last action) and (previous guess right,
# unknown enemy positions, enemy's last action, the enemy's passives).
ACTION_PROMPT = "\nCurrent game state:\n%s\nYour last action:\n%s\nThe enemy's last action:\n%s\n" + ACTION_END + "\n"
GUESS_PROMPT = (
    "\nWas your previous guess right:\n%s\nLiving enemy fish whose type is still unknown (positions):\n%s\n"
    "The enemy's last action:\n%s\nPassive abilities the enemy triggered last round:\n%s\n" + GUESS_END + "\n"
)


def fish_dict(texts: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The line-up's skill texts in position order (shown as a Python dict, as upstream does)."""
    return {name: texts[name] for name in LINEUP}


def description() -> str:
    """The first message: rules, both sides' fish, and the two reply formats."""
    fish = fish_dict(FISH_TEXT)
    return (
        "Let's play a two-player battle game. Each team has four pet fish, and the fish types can differ.\n"
        "Every fish starts with 400 health and 200 attack points and has an active and a passive ability.\n"
        "Each round you pick one of your living fish; it either uses its active ability or makes a normal "
        "attack on one enemy fish, which deals half of its attack points as damage.\n"
        "A passive ability triggers by itself whenever its condition is met, whether or not that fish acted.\n"
        "The identities of all fish start hidden. Each round, before acting, you may guess the type of one "
        "living enemy fish: a right guess reveals it and deals 50 damage to every enemy fish. The enemy guesses "
        "your fish the same way: if it is right, that fish of yours is revealed and each of your fish takes 50 "
        "damage.\n"
        "You win by having more fish alive when the game ends.\n\n"
        f"Your four fish types:\n{fish!r}\n\n"
        f"The enemy's four fish types:\n{fish!r}\n\n"
        "Every round I ask you twice. First for a guess (the message ends with "
        f'"{GUESS_END}"): think it through, then give your guess as JSON in this format:\n{GUESS_FORMAT!r}\n'
        f'Then for an action (the message ends with "{ACTION_END}"): think it through, then give your move as '
        f"JSON in this format:\n{ACTION_FORMAT!r}\n\n"
        "Always include the move. A reply without a valid move counts as giving up, and you lose the game."
    )


# -- per-decision prompts ---------------------------------------------------------------------------


def _action_dict(record: ActionRecord | None, *, skill: bool) -> dict[str, str]:
    if record is None:
        out = {"ACTION_FISH": "None", "ATK": "None", "TARGET": "None"}
        if skill:
            out["SKILL_TYPE"] = "None"
        return out
    out = {"ACTION_FISH": str(record.actor), "ATK": str(record.value), "TARGET": str(list(record.targets))}
    if skill:
        out["SKILL_TYPE"] = record.skill
    return out


def state_json(game: Game, seat: int) -> str:
    """The one-line game state: own fish in full, enemy fish by HP (type only once revealed, ATK never)."""
    you = [
        {"POSITION": str(f.pos), "ID": f.kind, "HP": str(f.shown_hp), "ATK": str(f.atk)} for f in game.teams[seat]
    ]
    enemy = [
        {"POSITION": str(f.pos), "ID": f.kind if f.revealed else "unknown", "HP": str(f.shown_hp), "ATK": "unknown"}
        for f in game.teams[1 - seat]
    ]
    return json.dumps({"You": you, "Enemy": enemy})


def action_prompt(game: Game, seat: int) -> str:
    mine, theirs = (_action_dict(game.last_action[p], skill=False) for p in (seat, 1 - seat))
    return ACTION_PROMPT % (state_json(game, seat), mine, theirs)


def unknown_enemies(game: Game, seat: int) -> list[str]:
    """Living enemy positions not yet revealed (fix: upstream also dropped every position ever guessed)."""
    return [str(f.pos) for f in game.teams[1 - seat] if f.shown_hp > 0 and not f.revealed]


def enemy_passives(game: Game, seat: int) -> dict[str, str]:
    """Passives of the enemy team triggered during the model's last action and the enemy's last action,
    keyed by the position of the fish that was hit (fix: upstream showed stale, never-cleared entries)."""
    out: dict[str, str] = {}
    for record in (game.last_action[seat], game.last_action[1 - seat]):
        for passive in record.passives if record else ():
            if passive.player == 1 - seat:
                out[f"Position: {passive.pos}"] = passive.kind
    return out


def guess_prompt(game: Game, seat: int, previous_correct: bool) -> str:
    enemy_action = _action_dict(game.last_action[1 - seat], skill=True)
    return GUESS_PROMPT % (previous_correct, unknown_enemies(game, seat), enemy_action, json.dumps(enemy_passives(game, seat)))


# -- parsing ------------------------------------------------------------------------------------------

FORMAT_FAILURE, INVALID_MOVE = 2, 1  # upstream per-try codes


@dataclass(frozen=True)
class Parsed:
    """The first valid move of a reply, or why there is none (``code`` 2: no JSON, 1: no valid move)."""

    move: Any = None  # Move (action) or (position, type id) (guess)
    text: str | None = None  # the JSON object used, as it appeared
    code: int = 0
    error: str | None = None
    refused: bool = False  # upstream=True: a valid move upstream's client cannot send (no per-try code)


def brace_spans(reply: str) -> list[str]:
    r"""What upstream's ``re.findall(r"\{[\w\W]*?\}", reply)`` returns, found in linear time: from each
    ``{`` (left to right, not inside an earlier match) up to the first ``}`` after it. The regex itself is
    quadratic on a reply of many ``{`` without ``}``, which hostile output could use to stall the loop."""
    spans = []
    pos = 0
    while True:
        start = reply.find("{", pos)
        if start < 0:
            break
        end = reply.find("}", start + 1)
        if end < 0:
            break
        spans.append(reply[start : end + 1])
        pos = end + 1
    return spans


def _candidates(reply: str) -> list[tuple[str, Any]]:
    found = []
    for match in brace_spans(reply):
        try:
            found.append((match, json.loads(match.replace("'", '"'))))
        except (ValueError, RecursionError):
            continue
    return found


def _int_position(value: Any) -> int | None:
    """Upstream reads ``int(str(target_position))``: 2, "2" and " 2" pass; 2.0, true and null do not."""
    try:
        return int(str(value))
    except ValueError:
        return None


def _first_valid(reply: str, check: Any, what: str) -> Parsed:
    candidates = _candidates(reply)
    if not candidates:
        return Parsed(code=FORMAT_FAILURE, error=f"no JSON object in the reply (expected the {what} format)")
    reasons = []
    for text, obj in candidates:
        move, reason = check(obj)
        if move is not None:
            return Parsed(move=move, text=text)
        reasons.append(reason)
    return Parsed(code=INVALID_MOVE, error=f"no valid {what}: " + "; ".join(reasons))


def parse_guess(reply: str, game: Game, seat: int) -> Parsed:
    """A guess: ``guess_type`` one of the four type names, ``target_position`` a living enemy position."""
    living = [f.pos for f in game.teams[1 - seat] if f.shown_hp > 0]

    def check(obj: Any) -> tuple[tuple[int, int] | None, str]:
        if not isinstance(obj, dict) or "guess_type" not in obj or "target_position" not in obj:
            return None, "needs guess_type and target_position"
        pos = _int_position(obj["target_position"])
        if pos is None:
            return None, f"target_position {obj['target_position']!r} is not an integer"
        kind = obj["guess_type"]
        if not isinstance(kind, str) or kind not in LINEUP:
            return None, f"guess_type {kind!r} is not one of {', '.join(LINEUP)}"
        if pos not in living:
            return None, f"position {pos} is not a living enemy fish"
        return (pos, FISH_IDS[kind]), ""

    return _first_valid(reply, check, "guess")


def own_position(name: Any, *, upstream: bool = False) -> int | None:
    """``pick_fish`` -> own position: a type name, or the position digits "0"-"3": the fish at that position
    (fix), or with ``upstream`` the one after it, as upstream's ``name_to_pos[str(i)] = i + 1`` ("3" names no
    fish)."""
    if not isinstance(name, str):
        return None
    if name in LINEUP:
        return LINEUP.index(name)
    if name in ("0", "1", "2", "3"):
        return int(name) + (1 if upstream else 0)
    return None


# Upstream's client sends an active skill with a teammate target when the fish is in en.py's ``target_friend``
# (flame, eel, mobula, octopus) and with an enemy target otherwise; of the four fish in play the SDK takes a
# teammate target only for flame and sunfish and an enemy target only for spray and eel. So eel's and sunfish's
# skills are always refused (the fixed game sends eel's as an AOE and sunfish's as an infight).
TARGET_FRIEND: tuple[str, ...] = (FLAME, EEL)  # upstream's target_friend, within the line-up
_SDK_TAKES_TEAMMATE, _SDK_TAKES_ENEMY = (FLAME, SUNFISH), (SPRAY, EEL)
_REFUSAL = {
    EEL: "eel's skill is refused when sent: upstream's client gives it a teammate target (eel is in target_friend), "
         "which the SDK does not take for an AOE",
    SUNFISH: "sunfish's skill is refused when sent: upstream's client gives it an enemy target (sunfish is not in "
             "target_friend), which the SDK does not take for an infight",
}  # fmt: skip


def client_sends(kind: str) -> bool:
    """Whether upstream's client gets the active skill of fish ``kind`` through its SDK."""
    return kind in (_SDK_TAKES_TEAMMATE if kind in TARGET_FRIEND else _SDK_TAKES_ENEMY)


def parse_action(reply: str, game: Game, seat: int, *, upstream: bool = False) -> Parsed:
    """An action: ``pick_fish`` a living own fish, ``action`` normal (target: a living enemy) or active
    (spray/eel: target ignored, AOE on every living enemy; flame/sunfish: a living teammate other than
    itself). Fix: upstream's SDK translation made every eel and sunfish skill fail. With ``upstream`` the move
    is read as upstream's client reads it: digits name the next fish (and no skill), and the first valid move,
    if it is an eel or sunfish skill, is ``refused`` (later objects of the reply are not looked at)."""
    own = game.teams[seat]
    mine = [f.pos for f in own if f.shown_hp > 0]
    theirs = [f.pos for f in game.teams[1 - seat] if f.shown_hp > 0]

    def check(obj: Any) -> tuple[Move | None, str]:
        if not isinstance(obj, dict) or not {"pick_fish", "action", "target_position"} <= obj.keys():
            return None, "needs pick_fish, action and target_position"
        kind = obj["action"]
        if kind not in ("normal", "active"):
            return None, f"action {kind!r} is not normal or active"
        target = _int_position(obj["target_position"])
        if target is None:
            return None, f"target_position {obj['target_position']!r} is not an integer"
        actor = own_position(obj["pick_fish"], upstream=upstream)
        if actor is None or actor not in mine:
            return None, f"pick_fish {obj['pick_fish']!r} is not one of your living fish"
        if kind == "normal":
            if target not in theirs:
                return None, f"position {target} is not a living enemy fish"
            return Move("normal", actor, target), ""
        if upstream and obj["pick_fish"] not in LINEUP:  # upstream's skill check knows the fish by name only
            return None, f"pick_fish {obj['pick_fish']!r}: a skill needs the fish's name"
        if own[actor].kind in (SPRAY, EEL):
            return Move("active", actor), ""
        if target not in mine or target == actor:
            return None, f"{own[actor].kind}'s infight needs a living teammate other than itself, not position {target}"
        return Move("active", actor, target), ""

    parsed = _first_valid(reply, check, "action")
    if upstream and parsed.move is not None and parsed.move.kind == "active" and not client_sends(own[parsed.move.actor].kind):
        return Parsed(text=parsed.text, error=_REFUSAL[own[parsed.move.actor].kind], refused=True)
    return parsed


def move_json(move: Move, game: Game, seat: int) -> str:
    """A parsed action in the reply format (stored as the turn's action)."""
    target = 0 if move.target is None else move.target
    return json.dumps({"pick_fish": game.teams[seat][move.actor].kind, "action": move.kind, "target_position": target})


def guess_json(guess: tuple[int, int]) -> str:
    return json.dumps({"guess_type": FISH_NAMES[guess[1]], "target_position": guess[0]})


Decision = Literal["guess", "action"]
