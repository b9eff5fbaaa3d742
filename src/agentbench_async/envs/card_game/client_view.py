"""The game as upstream's LLM client shows it (``AI/AI_En.py`` over the C++ client SDK ``AI/sdk/ai_client.hpp``).

The ``agentbench`` mode shows the model what AgentBench v0.2 showed, quirks included. At the start of each of
its turns (its ASSERT message) the client parses the engine's report of the last action of each side into one
of two ``ActionInfo`` records, ``my_action`` and ``enemy_action``. Their fixed-size arrays (12 target slots,
24 passive slots, zero-filled at start) are written from slot 0 on and never cleared, so slots past the
current action keep what earlier actions wrote. The prompts read them as follows:

* ``ACTION_FISH``: the acting position, or ``None`` before that side's first action.
* ``ATK``: ``enemy_expected_injury[0]``, the damage announced for the first target on the side opposite the
  actor; an infight (its target is on the actor's side) leaves it, so an infight shows the previous value.
* ``TARGET``: the *slot indices* whose stored position is not 0 (``_non_zero_indexes(enemy_targets)``): an AOE on
  positions 0-3 shows ``[1, 2, 3]``, a normal attack on position 0 shows the slots earlier actions left.
* ``SKILL_TYPE`` (guess prompt): the enemy's last skill, by upstream's names.
* passives (guess prompt): every one of the 24 slots of ``my_action``'s enemy-side passives, then of
  ``enemy_action``'s own-side passives (both: the enemy team's), as ``{"Position: <pos>": <name>}``; the
  zero-filled slots make ``"Position: 0": "Counter"`` always present. The position is the fish that was hit.
* ``Live Unknown Enemy Fish``: living enemy positions minus every position the model ever guessed (right or
  wrong).

The engine reports (``logic/src/fish.cpp``) list an action's targets with the damage announced for them
(normal ``ATK // 2``, spray 70, eel ``int(ATK * 0.35)``, infight 75) and its passives in the order they
triggered (a deflect, then the counters of each hit), which is ``engine.ActionRecord``.
"""

from __future__ import annotations

import json

from .engine import ActionRecord, Game
from .protocol import state_json
from .wording import PASSIVE_ENUM, SKILL_ENUM, Wording

TARGET_SLOTS, PASSIVE_SLOTS = 12, 24
_ZERO_PASSIVE = (0, "counter")  # a zero-filled slot: position 0, passive enum 0 (counter)


class ActionInfo:
    """The SDK's record of one side's last action, as the client keeps it (only what the prompts read)."""

    __slots__ = ("action_fish", "skill", "enemy_targets", "enemy_expected_injury", "enemy_passives", "friend_passives")

    def __init__(self) -> None:
        self.action_fish = -1
        self.skill = "aoe"  # enum 0; read only once an action was parsed
        self.enemy_targets = [0] * TARGET_SLOTS
        self.enemy_expected_injury = [0] * TARGET_SLOTS
        self.enemy_passives = [_ZERO_PASSIVE] * PASSIVE_SLOTS  # (position, enum name) on the side opposite the actor
        self.friend_passives = [_ZERO_PASSIVE] * PASSIVE_SLOTS  # on the actor's side

    def parse(self, record: ActionRecord | None) -> None:
        """``parseMyActionInfo``/``parseEnemyActionInfo``: both file targets and passives on the side opposite
        the actor under ``enemy_*`` and the others under ``friend_*``."""
        if record is None:  # no action yet: the counts are reset, the arrays kept
            self.action_fish = -1
            return
        self.action_fish = record.actor
        self.skill = SKILL_ENUM[record.skill]
        if record.skill != "Infight":  # normal and AOE hit the other side; an infight's target is a teammate
            for slot, pos in enumerate(record.targets):
                self.enemy_targets[slot] = pos
                self.enemy_expected_injury[slot] = record.value
        enemy = friend = 0
        for passive in record.passives:
            entry = (passive.pos, PASSIVE_ENUM[passive.kind])
            if passive.player != record.player:
                self.enemy_passives[enemy] = entry
                enemy += 1
            else:
                self.friend_passives[friend] = entry
                friend += 1


class ClientView:
    """What upstream's client of seat ``seat`` knows and shows."""

    def __init__(self, seat: int, wording: Wording) -> None:
        self.seat = seat
        self.wording = wording
        self.my_action = ActionInfo()
        self.enemy_action = ActionInfo()
        self.guessed: set[int] = set()  # AI_En's known_enemy: every position a valid guess named

    def start_turn(self, game: Game) -> None:
        """The ASSERT message of the model's turn: both last actions are parsed again (the ACTION message that
        follows parses neither)."""
        self.enemy_action.parse(game.last_action[1 - self.seat])
        self.my_action.parse(game.last_action[self.seat])

    def _action(self, info: ActionInfo, *, skill: bool) -> dict[str, str]:
        if info.action_fish == -1:
            shown = {"ACTION_FISH": "None", "ATK": "None", "TARGET": "None"}
            return {**shown, "SKILL_TYPE": "None"} if skill else shown
        shown = {
            "ACTION_FISH": str(info.action_fish),
            "ATK": str(info.enemy_expected_injury[0]),
            "TARGET": str([slot for slot, pos in enumerate(info.enemy_targets) if pos != 0]),
        }
        return {**shown, "SKILL_TYPE": self.wording.skill_names[info.skill]} if skill else shown

    def passives(self) -> dict[str, str]:
        shown: dict[str, str] = {}
        for pos, kind in self.my_action.enemy_passives + self.enemy_action.friend_passives:
            shown[f"Position: {pos}"] = self.wording.passive_names[kind]
        return shown

    def unknown_enemies(self, game: Game) -> list[str]:
        return [str(f.pos) for f in game.teams[1 - self.seat] if f.shown_hp > 0 and f.pos not in self.guessed]

    def guess_prompt(self, game: Game, previous_correct: bool) -> str:
        enemy = self._action(self.enemy_action, skill=True)
        passives = json.dumps(self.passives(), ensure_ascii=False)
        return self.wording.guess_prompt % (previous_correct, self.unknown_enemies(game), enemy, passives)

    def action_prompt(self, game: Game) -> str:
        mine, enemy = self._action(self.my_action, skill=False), self._action(self.enemy_action, skill=False)
        return self.wording.action_prompt % (state_json(game, self.seat), mine, enemy)
