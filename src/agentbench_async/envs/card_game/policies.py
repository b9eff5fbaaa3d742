"""Mock-model policies for ``card_game``.

Both play either mode and either wording: a prompt showing the game state (``{"You": ...}``) asks for an
action, any other for a guess; a first message holding both reply formats is the fixed game's single
conversation, otherwise it is AgentBench's game (two conversations, eel's skill refused).

``oracle`` is a strong scripted player. It reads the game from the prompt like a model would, plus one
piece of hidden state through a test hook: the enemy line-up (``engine.LINEUP``), so every guess is right.
Each action is chosen by simulating every legal move (AOE or a normal attack by any living fish; infight
never pays off in games this short; in AgentBench's game only the spray's AOE, as upstream's client cannot
send the eel's) on the engine and scoring the result: a winning move first, then damage dealt and kills (the
enemy's counter fish, spray and flame, weigh more) against the damage its counters deal back. It wins every
built-in sample, so it scores 1.0 (a win with all 1600 HP dealt). In AgentBench's game the guess prompt does
not show which enemies live; once every living one is revealed the oracle names position 3, 2, 1, 0 on
successive tries until one is living (a guess on a revealed fish is "no guess").

``weak`` picks a failure mode per sample (by index, so every split shows all of them):
``format`` (prose without JSON: every guess fails, then the action forfeits -> ``invalid_format``),
``illegal`` (JSON naming a fish it does not have -> ``invalid_action``), ``context_length`` (the
provider's context error after a few decisions -> ``context_limit_exceeded`` with the damage so far),
``self_harm`` (legal but hopeless: wrong guesses and infight on its own team -> ``completed``, a loss),
``sloppy`` (two broken tries before each legal move of the self-harm kind -> ``completed`` with retries).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...environment import Policy, PolicyReply, PolicyRequest
from .baselines import Move
from .baselines import play_move
from .engine import EEL, FLAME, LINEUP, SPRAY, SUNFISH, Game

_STATE_LINE = re.compile(r'^\{"You": .*\}$', re.M)
_UNKNOWN_LINE = re.compile(r"^\[(?:'\d'(?:, )?)*\]$", re.M)


def _last_prompt(req: PolicyRequest) -> str:
    for message in reversed(req.messages):
        if message.get("role") == "user":
            return message.get("content") or ""
    return ""


def _asks_guess(prompt: str) -> bool:
    return _STATE_LINE.search(prompt) is None


def _fixed_game(req: PolicyRequest) -> bool:
    """The fixed game's single conversation opens with both reply formats; AgentBench's each with its own."""
    first = req.messages[0].get("content") or "" if req.messages else ""
    return "'guess_type'" in first and "'pick_fish'" in first


def _unknown(prompt: str) -> list[int]:
    match = _UNKNOWN_LINE.search(prompt)
    return [int(p) for p in json.loads(match.group(0).replace("'", '"'))] if match else []


def _latest_state(req: PolicyRequest) -> dict[str, Any] | None:
    """The most recent game state shown to the player (in the current or an earlier action prompt)."""
    for message in reversed(req.messages):
        if message.get("role") == "user":
            found = _STATE_LINE.findall(message.get("content") or "")
            if found:
                state: dict[str, Any] = json.loads(found[-1])
                return state
    return None


def _game_from_state(state: dict[str, Any]) -> Game:
    """An engine position matching the shown state (the model is player 0; enemy ATK is unknown: 200)."""
    game = Game()
    for team, rows in zip(game.teams, (state["You"], state["Enemy"])):
        for fish, row in zip(team, rows):
            fish.hp = int(row["HP"])
            fish.dead = fish.hp <= 0
            if row["ATK"] != "unknown":
                fish.atk = int(row["ATK"])
    game.phase = "action"
    return game


def _reply(thought: str, move: dict[str, Any]) -> PolicyReply:
    return PolicyReply(content=f"{thought}\n{json.dumps(move)}")


# -- oracle -------------------------------------------------------------------------------------------


def _oracle_guess(req: PolicyRequest, prompt: str) -> PolicyReply:
    unknown = _unknown(prompt)
    if unknown:
        pos = unknown[0]
        return _reply(f"Position {pos} should be the {LINEUP[pos]}.", {"guess_type": LINEUP[pos], "target_position": pos})
    if not _fixed_game(req):  # no state in this conversation: try the positions in turn (a dead one is refused)
        pos = max(len(LINEUP) - 1 - _tries_so_far(req), 0)  # the oracle kills the counter fish (0, 1) first
        return _reply("All living enemy fish are known.", {"guess_type": LINEUP[pos], "target_position": pos})
    # Every living enemy is revealed: name the healthiest one (a guess on a revealed fish is no guess).
    state = _latest_state(req)
    rows = state["Enemy"] if state else [{"POSITION": "0", "HP": "1"}]
    best = max(rows, key=lambda r: (int(r["HP"]), -int(r["POSITION"])))
    pos = int(best["POSITION"])
    return _reply("All living enemy fish are known.", {"guess_type": LINEUP[pos], "target_position": pos})


def _candidates(game: Game, aoe: tuple[str, ...]) -> list[Move]:
    own, enemy = game.teams
    moves = [Move("active", f.pos) for f in own if not f.dead and f.kind in aoe]
    for f in own:
        if not f.dead:
            moves += [Move("normal", f.pos, e.pos) for e in enemy if not e.dead]
    return moves


def _value(before: Game, after: Game) -> float:
    """How good a position after our move is (higher is better)."""
    own_b, enemy_b = before.teams
    own_a, enemy_a = after.teams
    if all(f.hp <= 0 for f in enemy_a):
        return 1e9
    value = 0.0
    for fb, fa in zip(enemy_b, enemy_a):
        value += max(fb.hp, 0) - max(fa.hp, 0)
        if fb.hp > 0 >= fa.hp:
            value += 250 if fa.kind in (SPRAY, FLAME) else 150
    for fb, fa in zip(own_b, own_a):
        value -= 0.8 * (max(fb.hp, 0) - max(fa.hp, 0))
        if fb.hp > 0 >= fa.hp:
            value -= 200
    return value


def best_move(game: Game, aoe: tuple[str, ...] = (SPRAY, EEL)) -> Move:
    """The oracle's action in ``game`` (the player is 0, in its action phase), using the AOE of the fish
    ``aoe`` (AgentBench's game: the spray's only)."""
    best: tuple[float, int, Move] | None = None
    for order, move in enumerate(_candidates(game, aoe)):
        trial = game.copy()
        play_move(trial, 0, move)
        key = (_value(game, trial), -order, move)
        if best is None or key[:2] > best[:2]:
            best = key
    assert best is not None
    return best[2]


def _oracle_action(req: PolicyRequest, prompt: str) -> PolicyReply:
    state = _latest_state(req)
    if state is None:
        return PolicyReply(content="I cannot see the game state.")
    game = _game_from_state(state)
    move = best_move(game, (SPRAY, EEL) if _fixed_game(req) else (SPRAY,))
    target = 0 if move.target is None else move.target
    name = game.teams[0][move.actor].kind
    return _reply(f"{name} {move.kind} looks strongest.", {"pick_fish": name, "action": move.kind, "target_position": target})


def oracle(req: PolicyRequest) -> PolicyReply:
    prompt = _last_prompt(req)
    if _asks_guess(prompt):
        return _oracle_guess(req, prompt)
    return _oracle_action(req, prompt)


# -- weak ---------------------------------------------------------------------------------------------

WEAK_MODES = ("format", "illegal", "context_length", "self_harm", "sloppy")
_CONTEXT_AFTER = 6  # decisions answered before the context "overflows"


def _weak_mode(req: PolicyRequest) -> str:
    try:
        index = int(req.task.task_id)
    except ValueError:
        index = sum(map(ord, req.task.task_id))
    return WEAK_MODES[index % len(WEAK_MODES)]


def _self_harm(req: PolicyRequest, prompt: str) -> PolicyReply:
    """Legal but losing: guess a wrong type; hurt its own team with infight, else attack feebly."""
    if _asks_guess(prompt):
        unknown = _unknown(prompt)
        state = _latest_state(req)
        living = [int(r["POSITION"]) for r in state["Enemy"] if int(r["HP"]) > 0] if state else [0]
        pos = unknown[0] if unknown else living[0]
        wrong = LINEUP[(pos + 1) % len(LINEUP)]
        return _reply("A guess.", {"guess_type": wrong, "target_position": pos})
    state = _latest_state(req)
    assert state is not None
    mine = {r["ID"]: int(r["POSITION"]) for r in state["You"] if int(r["HP"]) > 0}
    theirs = [int(r["POSITION"]) for r in state["Enemy"] if int(r["HP"]) > 0]
    for actor in (FLAME, SUNFISH):
        mates = [p for name, p in mine.items() if name != actor]
        if actor in mine and mates:
            return _reply("Power up.", {"pick_fish": actor, "action": "active", "target_position": mates[-1]})
    name = next(iter(mine))
    return _reply("Attack.", {"pick_fish": name, "action": "normal", "target_position": theirs[0]})


def _tries_so_far(req: PolicyRequest) -> int:
    """How many replies the current prompt has already had. The fixed game re-sends the prompt after a failed
    try; AgentBench's game sends (rules, acknowledgement) once more before it, so the tries are the pairs
    right before the prompt, less one (the first message may carry the history's omission notice)."""
    messages = req.messages
    if _fixed_game(req):
        users = [m.get("content") for m in messages if m.get("role") == "user"]
        count = 0
        while count + 1 < len(users) and users[-2 - count] == users[-1]:
            count += 1
        return count
    if len(messages) < 3:
        return 0
    rules, ack = messages[-3].get("content") or "", messages[-2].get("content")
    pairs, i = 0, len(messages) - 2
    while i >= 1 and messages[i].get("content") == ack and (messages[i - 1].get("content") or "").startswith(rules):
        pairs, i = pairs + 1, i - 2
    return max(pairs - 1, 0)


def weak(req: PolicyRequest) -> PolicyReply:
    mode = _weak_mode(req)
    prompt = _last_prompt(req)
    if mode == "format":
        return PolicyReply(content="I think the spray should attack the enemy eel now.")
    if mode == "illegal":
        if _asks_guess(prompt):
            return _reply("Guessing a shark.", {"guess_type": "shark", "target_position": 0})
        return _reply("Send the shark.", {"pick_fish": "shark", "action": "normal", "target_position": 0})
    if mode == "context_length" and req.turn > _CONTEXT_AFTER:
        return PolicyReply(fail="context_length")
    if mode == "sloppy" and _tries_so_far(req) < 2:
        return PolicyReply(content=["I pass.", "{not json}", "{'pick_fish': 'spray'}"][req.turn % 3])
    return _self_harm(req, prompt)


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak}

__all__ = ["POLICIES", "WEAK_MODES", "best_move", "oracle", "weak"]
