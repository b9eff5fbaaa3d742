"""AgentBench v0.2's card game as its LLM client played it (``AI/AI_En.py``, ``AI/client.py``, the SDK).

* **Two conversations.** Guesses and actions have separate histories. Before every call, each retry
  included, ``Client.llm_call`` appends (first message, acknowledgement) to the decision's history again, and
  only successful (prompt, reply) pairs are kept, so a call sends
  ``[D, ack, p1, r1, D, ack, p2, r2, ..., D, ack, (D, ack for each failed try), p_now]``. Every call is a
  fresh conversation for the engine (``Step.restart``), whose history policy then applies to it as
  AgentBench's framework applied its 3,500-segment truncation; everything but ``p_now`` is marked
  ``injected`` in the transcript.
* **Upstream's display** (``client_view.py``): stale ``TARGET`` slots and ``ATK``, the 24 passive slots,
  unknown fish minus every position ever guessed; ``pick_fish`` "0"-"3" name the next fish.
* **Eel's and sunfish's skills are refused** when sent (``protocol.client_sends``): the try is repeated
  without feedback and records no per-try code. Five failed tries forfeit the game: the status is the
  lowest code (``invalid_action``/``invalid_format``), or ``completed`` when every try was refused (upstream's
  client then crashed on an empty ``min()`` and left its status alone).
* **Time** (``ctx.model_seconds``: the HTTP time of the model's calls, not the engine's queueing; the server's own
  queueing is in it, as it was in upstream's wall-clock limits, and the forfeit names its share when the server
  says it, ``details.queued_seconds``): a decision
  taking ``decision_seconds`` (300) or more forfeits the game (upstream's judger ends it for the player's
  time-out: ``completed``, a loss, damage so far counts); an empty reply forfeits the same way (upstream's
  client sent nothing and waited for that time-out). When the game's model time reaches ``game_seconds`` (600)
  the game is killed, as upstream's ``run_cmd(timeout=600)`` killed the judger: no replay, so it scores no win
  and no damage and has ``test_times`` 0 (``completed``, ``details.end_reason`` = ``killed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...environment import EpisodeContext, Message, Outcome, Step, Task, statuses as st
from .client_view import ClientView
from .session import GameSession
from .wording import Wording

PLAYER_TLE = 3  # engine error type of a player's time-out


@dataclass(frozen=True)
class TimeLimits:
    """Upstream's limits in seconds of model time (0: none)."""

    decision: float = 300.0  # the engine's limit per ASSERT/ACTION message (judger Time_thread)
    game: float = 600.0  # task.py's run_cmd(timeout=600) around the whole judger run


class AgentBenchSession(GameSession):
    mode = "agentbench"
    upstream_client = True

    def __init__(self, task: Task, ctx: EpisodeContext, wording: Wording, limits: TimeLimits) -> None:
        super().__init__(task, ctx)
        self.wording = wording
        self.wording_source = wording.source
        self.limits = limits
        self.view = ClientView(self.seat, wording)
        self._history: dict[str, list[tuple[str, str]]] = {"guess": [], "action": []}  # assert_history, history
        self._clock = ctx.model_seconds
        self._queued = ctx.queued_seconds
        self._game_start = self._game_queued = 0.0
        self._decision_start = self._decision_queued = 0.0

    def _now(self) -> float:
        return self._clock() if self._clock is not None else 0.0

    def _waited(self) -> float:
        """Of ``_now()``, the seconds the server said the calls waited in its queue."""
        return self._queued() if self._queued is not None else 0.0

    # -- the conversations ----------------------------------------------------------------------------

    def _call(self, *, new: bool) -> list[Message]:
        """The messages of the next call for the current decision, as ``Client.llm_call`` builds them."""
        if new:
            self._tries, self._codes = 0, []
            self._decision_start, self._decision_queued = self._now(), self._waited()
        history = self._history[self.decision]
        first = self.wording.guess_description if self.decision == "guess" else self.wording.action_description
        history.append((first, self.wording.ack))
        messages: list[Message] = []
        for user, assistant in history:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        messages.append({"role": "user", "content": self._prompt})
        return messages

    def _ask(self, *, new: bool, action: str | None = None, valid: bool = True, error: str | None = None) -> Step:
        messages = self._call(new=new)
        info = {} if new else {"decision": self.decision, "try": self._tries}
        return Step(observation=messages, restart=True, injected=frozenset(range(len(messages) - 1)),
                    action=action, valid=valid, error=error, info=info)  # fmt: skip

    def _start_turn(self) -> None:
        """The model's ASSERT message: the client parses both last actions, then asks for a guess."""
        self.view.start_turn(self.game)
        self.decision = "guess"
        self._prompt = self.view.guess_prompt(self.game, self._previous_correct)

    async def begin(self) -> list[Message]:
        self._game_start, self._game_queued = self._now(), self._waited()
        if self.seat == 1:  # the opponent is player 0 and moves first
            self._opponent_turn()
        self._start_turn()
        return self._call(new=True)

    # -- replies --------------------------------------------------------------------------------------

    def _on_reply(self, text: str) -> Step:
        late = self._past_a_limit(empty=not text)
        if late is not None:
            return Step(action=None, valid=False, error=late.error, outcome=late)
        return super()._on_reply(text)

    def _retry(self, error: str) -> Step:
        return self._ask(new=False, valid=False, error=error)

    def _answered(self, text: str) -> None:
        self._history[self.decision].append((self._prompt, text))

    def _guess(self, move: tuple[int, int]) -> str:
        self.view.guessed.add(move[0])  # AI_En's known_enemy, right or wrong
        return super()._guess(move)

    def _after_guess(self, *, valid: bool, error: str | None, action: str | None) -> Step:
        if self.game.over:
            return Step(action=action, valid=valid, error=error, outcome=self._outcome())
        self.decision = "action"
        self._prompt = self.view.action_prompt(self.game)
        return self._ask(new=True, action=action, valid=valid, error=error)

    def _next_turn(self, action: str) -> Step:
        self._start_turn()
        return self._ask(new=True, action=action)

    # -- time -------------------------------------------------------------------------------------------

    def _past_a_limit(self, *, empty: bool) -> Outcome | None:
        """The ending this reply came too late for, if any. An empty reply never arrives (upstream's client
        waited on): its decision ends at the decision limit."""
        decision, game = self.limits.decision, self.limits.game
        began = self._decision_start - self._game_start  # game time when the decision was asked
        took = math.inf if empty else self._now() - self._decision_start
        timed_out = bool(decision) and took >= decision
        ends = began + (decision if timed_out else 0.0 if empty else took)  # game time at which the decision ends
        if game and ends >= game:
            self.game.forfeit(self.seat, PLAYER_TLE)
            spent, waited = self._now() - self._game_start, self._waited() - self._game_queued
            error = (f"the game's model time reached {game:.0f} s{_waiting(waited)}: upstream's judger run was killed (no win, "
                     "no damage, test_times 0)")
            return self._outcome(status=st.COMPLETED, paper_status=st.PAPER_COMPLETED, error=error, killed=True,
                                 extra={"model_seconds": round(spent, 1), "queued_seconds": round(waited, 1)})  # fmt: skip
        if not (timed_out or empty):
            return None
        self.game.forfeit(self.seat, PLAYER_TLE)
        extra: dict[str, object] = {"forfeit_cause": "empty_reply" if empty else "time_limit"}
        if empty:
            error = "empty reply: upstream's client sent nothing and waited for the decision time limit, a forfeit"
        else:
            waited = self._waited() - self._decision_queued
            error = f"the {self.decision} decision took {took:.0f} s of model time{_waiting(waited)} (limit {decision:.0f} s): forfeit"
            extra.update({"model_seconds": round(took, 1), "queued_seconds": round(waited, 1)})
        return self._outcome(status=st.COMPLETED, paper_status=st.PAPER_COMPLETED, error=error, extra=extra)


def _waiting(seconds: float) -> str:
    """`` (248 s of it waiting in the server's queue)`` when the server said its calls waited there."""
    return f" ({seconds:.0f} s of it waiting in the server's queue)" if seconds >= 0.5 else ""
