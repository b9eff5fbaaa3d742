"""One Aquawar game between the model and a rule-based opponent: what both modes share, and the fixed game.

Every model reply is one try of one decision. Each of the model's turns has two decisions, a guess and
an action (upstream ``Agent.Assert`` and ``Agent.Act``); the opponent's whole turn (its guess and its
action) runs inside the session right after the model's action, so the next prompt already shows it.
A decision gets up to 5 tries, the same prompt re-sent after a failed one (no error feedback, as
upstream). A guess that fails 5 times becomes "no guess" (no penalty). An action that fails 5 times
forfeits the game: ``invalid_action`` if any try held parseable JSON, else ``invalid_format``.

``GameSession`` holds what both modes share (the game, the opponent, the bookkeeping, the endings);
``FixedSession`` is the fixed game (``card_game.fixes=true``: one conversation, the display corrected, eel
and sunfish skills sent, no time limits); ``agentbench_session.AgentBenchSession`` is AgentBench's game.

Score (per game) = 0.7 x win + 0.3 x damage / 1600, where damage = all HP the opponent's four fish lost.
The mean of this score over a suite equals upstream's ``0.7 x win_rate + min(0.3, 0.3 x damage_rate)``
(damage never exceeds 1600, so the ``min`` never binds; every game counts in both denominators, except a
game the ``agentbench`` mode's 600 s limit killed: see ``AgentBenchSession``).
"""

from __future__ import annotations

from typing import Any

from ...environment import EnvError, EpisodeContext, Message, ModelReply, Outcome, Session, Step, Task, statuses as st
from .baselines import Baseline, Move, baseline_turn, play_move
from .engine import FISH_NAMES, MAX_HP, Game, IllegalMove
from .protocol import (
    ACK,
    INVALID_MOVE,
    MAX_TRIES,
    Decision,
    action_prompt,
    description,
    guess_json,
    guess_prompt,
    move_json,
    parse_action,
    parse_guess,
)

WIN_WEIGHT, DAMAGE_WEIGHT = 0.7, 0.3
FULL_DAMAGE = 4 * MAX_HP


def game_score(win: bool, damage: int) -> float:
    """One game's contribution to upstream's metric (see the module docstring)."""
    return WIN_WEIGHT * float(win) + min(DAMAGE_WEIGHT, DAMAGE_WEIGHT * damage / FULL_DAMAGE)


def opponent_seed(task_seed: int, run_seed: int) -> int | str:
    """The opponent's random seed: the sample's own, mixed with the run's ``seed`` when it is not 0."""
    return task_seed if run_seed == 0 else f"{task_seed}/{run_seed}"


class GameSession(Session):
    """The game, the opponent, the decisions and their tries, and the endings of one episode; subclasses say
    what the model is sent (``_retry``, ``_after_guess``, ``_next_turn``)."""

    mode = ""  # "agentbench" or "fixed", stored in the episode's details
    upstream_client = False  # read actions as upstream's client does (protocol.parse_action(upstream=...))
    wording_source = "own"  # where the texts came from (details.wording)

    def __init__(self, task: Task, ctx: EpisodeContext) -> None:
        data = task.data
        self.seat: int = data["agent"]
        self.base: str = data["base"]
        self._data = data
        self.game = Game()
        self.bot = Baseline(self.base, 1 - self.seat, opponent_seed(data["seed"], ctx.seed))
        self.decision: Decision = "guess"
        self._prompt = ""
        self._tries = 0  # failed tries of the current decision
        self._codes: list[int] = []  # per-try failure codes of the current action decision
        self._previous_correct = False
        self._try_times = 0  # upstream's try_times: failed tries before each successful decision
        self._guesses = 0
        self._correct_guesses = 0
        self._failed_guess_decisions = 0
        self._log: list[str] = []

    async def step(self, reply: ModelReply) -> Step:
        if self.game.over:
            raise EnvError("card_game: step after the game ended")
        try:
            return self._on_reply(reply.content or "")
        except IllegalMove as exc:  # the parser checks every rule first, so this is a bug, not the model's fault
            raise EnvError(f"card_game: the engine refused a checked move: {exc.reason}") from None

    def _on_reply(self, text: str) -> Step:
        return self._on_guess(text) if self.decision == "guess" else self._on_action(text)

    def _retry(self, error: str) -> Step:
        """A failed try: the same prompt again, without feedback (as upstream)."""
        raise NotImplementedError

    def _after_guess(self, *, valid: bool, error: str | None, action: str | None) -> Step:
        """The guess decision is over: ask for the action (unless the guess ended the game)."""
        raise NotImplementedError

    def _next_turn(self, action: str) -> Step:
        """The model acted and the opponent played its turn: ask for the next guess."""
        raise NotImplementedError

    def _answered(self, text: str) -> None:
        """A reply that settled the current decision (AgentBench's client keeps it in that conversation)."""

    # -- decisions --------------------------------------------------------------------------------------

    def _on_guess(self, text: str) -> Step:
        parsed = parse_guess(text, self.game, self.seat)
        if parsed.move is None:
            self._tries += 1
            if self._tries < MAX_TRIES:
                return self._retry(f"{parsed.error} (try {self._tries} of {MAX_TRIES})")
            self._no_guess()
            return self._after_guess(valid=False, error=f"{parsed.error} ({MAX_TRIES} failed tries: no guess this round)", action=None)
        self._answered(text)
        return self._after_guess(valid=True, error=None, action=self._guess(parsed.move))

    def _on_action(self, text: str) -> Step:
        parsed = parse_action(text, self.game, self.seat, upstream=self.upstream_client)
        if parsed.move is None:
            self._tries += 1
            if not parsed.refused:  # upstream's client records no code for a move its SDK refused
                self._codes.append(parsed.code)
            if self._tries < MAX_TRIES:
                return self._retry(f"{parsed.error} (try {self._tries} of {MAX_TRIES})")
            return self._forfeit_without_action(parsed.error)
        self._answered(text)
        action = self._act(parsed.move)
        if self.game.over:
            return Step(action=action, outcome=self._outcome())
        return self._next_turn(action)

    # -- moves ----------------------------------------------------------------------------------------

    def _guess(self, move: tuple[int, int]) -> str:
        """Play a valid guess (one on a revealed fish is "no guess", as the client SDK sends it)."""
        self._try_times += self._tries
        pos, kind = move
        state = self.game.state + 1
        if self.game.teams[1 - self.seat][pos].revealed:
            self.game.guess(self.seat)
            self._previous_correct = False
            self._log.append(f"{state}: model guessed revealed position {pos}: no guess")
        else:
            record = self.game.guess(self.seat, pos, kind)
            self._guesses += 1
            self._correct_guesses += record.correct
            self._previous_correct = record.correct
            self._log.append(f"{state}: model guessed {pos}={FISH_NAMES[kind]} ({'right' if record.correct else 'wrong'})")
        return guess_json(move)

    def _no_guess(self) -> None:
        """Five failed tries: the client sends "no guess" (no penalty)."""
        self._failed_guess_decisions += 1
        self._log.append(f"{self.game.state + 1}: model made no guess ({MAX_TRIES} failed tries)")
        self.game.guess(self.seat)
        self._previous_correct = False

    def _act(self, move: Move) -> str:
        """Play a valid action, then (unless it ended the game) the opponent's whole turn."""
        self._try_times += self._tries
        action = move_json(move, self.game, self.seat)
        self._log.append(f"{self.game.state + 1}: model {action}")
        play_move(self.game, self.seat, move)
        if not self.game.over:
            self._opponent_turn()
        return action

    def _forfeit_without_action(self, error: str | None) -> Step:
        """The fifth failed action try: the model's player gives up and loses the game. With no per-try code
        (every try refused when sent) upstream's client crashed on ``min([])`` and its status stayed COMPLETED."""
        self._log.append(f"{self.game.state + 1}: model gave no valid action in {MAX_TRIES} tries: forfeit")
        self.game.forfeit(self.seat)
        if self._codes:
            return Step(action=None, valid=False, error=error, outcome=self._outcome(forfeit_code=min(self._codes)))
        error = f"every action try was refused when sent ({error}): upstream's client crashed, a forfeit"
        outcome = self._outcome(status=st.COMPLETED, paper_status=st.PAPER_COMPLETED, error=error, extra={"forfeit_cause": "client_crash"})
        return Step(action=None, valid=False, error=error, outcome=outcome)

    def _opponent_turn(self) -> None:
        player, state = self.bot.player, self.game.state + 1
        acted = self.game.turns[player]
        baseline_turn(self.game, self.bot)
        guess = self.game.last_guess[player]
        if guess is not None and guess.pos is not None and guess.kind is not None:
            self._log.append(f"{state}: {self.base} guessed {guess.pos}={FISH_NAMES[guess.kind]} ({'right' if guess.correct else 'wrong'})")
        action = self.game.last_action[player]
        if action is not None and self.game.turns[player] > acted:
            self._log.append(f"{state + 1}: {self.base} {action.skill} by {action.actor} on {list(action.targets)}")

    # -- endings --------------------------------------------------------------------------------------

    async def on_turn_limit(self) -> Outcome:
        # Unreachable with the default cap (every decision ends within 5 replies and the game within 128 states).
        return self._outcome(status=st.TASK_LIMIT_EXCEEDED, error="turn limit reached before the game ended", paper_status=st.PAPER_TASK_LIMIT_REACHED)

    async def on_context_limit(self, error: str) -> Outcome:
        """Upstream: no reply -> the model's player stops -> it forfeits; the damage done so far counts."""
        self.game.forfeit(self.seat)
        return self._outcome(status=st.CONTEXT_LIMIT_EXCEEDED, error=error, paper_status=st.PAPER_AGENT_CONTEXT_LIMIT)

    def _outcome(
        self,
        *,
        forfeit_code: int | None = None,
        status: str | None = None,
        error: str | None = None,
        paper_status: str | None = None,
        killed: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> Outcome:
        """How the game ended. ``killed``: upstream's judger run was killed (no replay: no win, no damage, and
        ``test_times`` 0, so the game leaves upstream's win-rate denominator)."""
        game, seat = self.game, self.seat
        won = game.winner == seat and not killed
        damage = game.damage_to(1 - seat)
        if status is None:
            if forfeit_code is None:
                status, paper_status = st.COMPLETED, st.PAPER_COMPLETED
            elif forfeit_code == INVALID_MOVE:
                status, paper_status = st.INVALID_ACTION, st.PAPER_AGENT_INVALID_ACTION
                error = f"no valid action in {MAX_TRIES} tries (JSON found, move not legal): forfeit"
            else:
                status, paper_status = st.INVALID_FORMAT, st.PAPER_AGENT_VALIDATION_FAILED
                error = f"no JSON move in {MAX_TRIES} tries: forfeit"
        details: dict[str, Any] = {
            # upstream's per-game meta (cal_metric.process_file), for the model's side
            "win_round": int(won),
            "damage": 0 if killed else damage,
            "takedown": 0 if killed else game.takedowns_of(1 - seat),
            "test_times": 0 if killed else 1,
            "full_play": int(not killed and (game.end_reason != "forfeit" or game.winner == seat)),
            "try_times": self._try_times,
            "round_num": game.state,
            # the sample and how the game ended
            "mode": self.mode,
            "wording": self.wording_source,
            "stage": self._data["stage"],
            "base": self.base,
            "agent": seat,
            "seed": self._data["seed"],
            "winner": "model" if won else self.base,
            "end_reason": "killed" if killed else game.end_reason,
            "state": game.state,
            "model_turns": game.turns[seat],
            "damage_dealt": damage,
            "damage_taken": game.damage_to(seat),
            "guesses": self._guesses,
            "correct_guesses": self._correct_guesses,
            "guess_decisions_failed": self._failed_guess_decisions,
            "model_hp": [f.shown_hp for f in game.teams[seat]],
            "opponent_hp": [f.shown_hp for f in game.teams[1 - seat]],
            **(extra or {}),
            "log": self._log,
        }
        return Outcome(
            status=status,
            score=0.0 if killed else game_score(won, damage),
            success=won,
            error=error,
            details=details,
            paper_status=paper_status,
        )


class FixedSession(GameSession):
    """The fixed game: one conversation (rules, acknowledgement, then every prompt and reply), the display
    corrected (targets, passives, unknown fish, digits), eel and sunfish skills sent, an empty reply a failed
    try, no time limits."""

    mode = "fixed"

    async def begin(self) -> list[Message]:
        if self.seat == 1:  # the opponent is player 0 and moves first
            self._opponent_turn()
        self._prompt = guess_prompt(self.game, self.seat, self._previous_correct)
        return [
            {"role": "user", "content": description()},
            {"role": "assistant", "content": ACK},
            {"role": "user", "content": self._prompt},
        ]

    # an empty reply is a failed try like any other (fix: upstream waited for the time-out)

    def _after_guess(self, *, valid: bool, error: str | None, action: str | None) -> Step:
        self._tries = 0
        if self.game.over:
            return Step(action=action, valid=valid, error=error, outcome=self._outcome())
        self.decision = "action"
        self._prompt = action_prompt(self.game, self.seat)
        return Step(observation=[{"role": "user", "content": self._prompt}], action=action, valid=valid, error=error)

    def _next_turn(self, action: str) -> Step:
        self._tries, self._codes = 0, []
        self.decision = "guess"
        self._prompt = guess_prompt(self.game, self.seat, self._previous_correct)
        return Step(observation=[{"role": "user", "content": self._prompt}], action=action)

    def _retry(self, error: str) -> Step:
        return Step(
            observation=[{"role": "user", "content": self._prompt}],
            action=None,
            valid=False,
            error=error,
            info={"decision": self.decision, "try": self._tries},
        )
