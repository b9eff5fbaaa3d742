"""One Mind2Web step as an episode: the knockout over the ranker's top candidates (AgentBench v0.2
``Mind2Web.start_sample``).

Each round takes the first ``ROUND_SIZE`` candidates out of the pool, renders the page for them and asks
the model in a fresh conversation (the prompt file's examples, then this page and question). A pick
(B, C, …) goes back to the end of the pool and becomes the prediction; A ("none of the above"), an
unreadable reply (read as A) or a letter with no choice eliminates the whole round. The step ends when
at most one candidate is left. See docs/envs/mind2web.md for statuses and metrics.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...environment import EnvError, Message, ModelReply, Outcome, Session, Step, Task, statuses as st
from ...history import AGENTBENCH_SEGMENT_BUDGET, count_segments
from .dom import PageError, Round, parse_page, render_round
from .prompts import FewShot, question, round_messages
from .protocol import ROUND_SIZE, gold_action, initial_pool, parse_reply, step_metrics

_CONTEXT, _TURN_CAP = "context limit", "turn cap"


def _gold_and_first_round(data: dict[str, Any], first: list[str] | None) -> tuple[str, Round | PageError | None]:
    """The gold action and the first round's page (``first``: its candidates; None: no round), from one parse of the
    page (a ``PageError`` raised here is the gold element's; the round's is returned)."""
    root = parse_page(data["cleaned_html"])
    action = gold_action(root, data["target"]["element"][0], data["operation"]["op"], data["operation"]["value"])
    if first is None:
        return action, None
    try:
        return action, render_round(root, first)
    except PageError as exc:
        return action, exc


class Mind2WebSession(Session):
    def __init__(self, task: Task, few_shot: FewShot) -> None:
        self._task = task
        self._data = task.data
        self._few_shot = few_shot
        self._pool: list[str] = []
        self._prediction: tuple[str, str] | None = None
        self._round: Round | None = None
        self._rounds: list[dict[str, Any]] = []
        self._unreadable = 0
        self._settled: Outcome | None = None
        self._target: dict[str, Any] | None = None  # the gold elements and the gold action (rendered in begin)

    # -- rounds -------------------------------------------------------------------------------------

    async def begin(self) -> list[Message]:
        if self._data["target"] is None:
            reason = "no positive candidate among the ranker's top 10: nothing to ask (upstream: UNKNOWN, scored 0)"
            self._settled = self._outcome(st.COMPLETED, st.PAPER_UNKNOWN, reason)
            return []
        data = self._data
        pool = initial_pool(self._data)
        first = pool[:ROUND_SIZE] if len(pool) > 1 else None
        try:
            action, rendered = await asyncio.to_thread(_gold_and_first_round, data, first)
        except PageError as exc:  # upstream's loader crashed on such a step
            raise EnvError(f"mind2web: step {data['sid']} (sample {data['index']}): the gold element cannot be rendered: {exc}") from None
        self._target = {**data["target"], "action": action}
        self._pool = pool
        if first is None:
            reason = "only one candidate in the ranker's top 10: upstream asks nothing and records an invalid action"
            self._settled = self._outcome(st.INVALID_ACTION, st.PAPER_AGENT_INVALID_ACTION, reason)
            return []
        return await self._next_round(rendered)

    def settled(self) -> Outcome | None:
        return self._settled

    async def _next_round(self, rendered: Round | PageError | None = None) -> list[Message]:
        """The next round's messages; ``rendered``: its page rendered already (or why it could not be)."""
        ids, self._pool = self._pool[:ROUND_SIZE], self._pool[ROUND_SIZE:]
        try:
            if isinstance(rendered, PageError):
                raise rendered
            rnd = rendered or await asyncio.to_thread(render_round, self._data["cleaned_html"], ids)
        except PageError as exc:
            raise EnvError(f"mind2web: step {self._data['sid']} (sample {self._data['index']}): {exc}") from None
        self._round = rnd
        messages = round_messages(self._few_shot, rnd.page, question(self._few_shot.wording, self._data, rnd.choices))
        segments = sum(count_segments(m.get("content") or "") for m in messages)
        self._rounds.append({
            "candidates": ids,
            "choices": [node_id for node_id, _ in rnd.choices],
            "segments": segments,  # the prompt's size in AgentBench's history measure
            "over_history_budget": segments >= AGENTBENCH_SEGMENT_BUDGET,  # --history agentbench shortens it
        })  # fmt: skip
        return messages

    async def step(self, reply: ModelReply) -> Step:
        assert self._round is not None
        parsed = parse_reply(reply.content or "")
        choices = self._round.choices
        entry = self._rounds[-1]
        entry.update(answer=parsed.letter, action=parsed.action, readable=parsed.readable)
        valid, error, picked = True, None, None
        if not parsed.readable:
            self._unreadable += 1
            valid, error = False, "no 'Answer: <A-F>' in the reply: read as A (none of the above)"
        elif parsed.letter != "A":
            k = ord(parsed.letter) - ord("B")
            if k < len(choices):
                picked = choices[k][0]
                self._pool.append(picked)
                self._prediction = (picked, parsed.action)
                entry["picked"] = picked
            else:
                valid, error = False, f"answer {parsed.letter} names no choice (this round has B-{chr(ord('A') + len(choices))})"
        action = f"Answer: {parsed.letter}" + (f" -> {picked}" if picked else "") + (f" {parsed.action.strip()}" if parsed.action.strip() else "")
        if len(self._pool) > 1:
            messages = await self._next_round()  # the few-shot examples, then this round's page and question
            return Step(observation=messages, restart=True, action=action, valid=valid, error=error,
                        injected=frozenset(range(len(messages) - 1)))  # fmt: skip
        return Step(action=action, valid=valid, error=error, outcome=self._final())

    async def on_context_limit(self, error: str) -> Outcome:
        return self._final(_CONTEXT, error)

    async def on_turn_limit(self) -> Outcome:
        return self._final(_TURN_CAP, "turn limit reached")

    # -- outcome ------------------------------------------------------------------------------------

    def _final(self, interrupted: str | None = None, error: str | None = None) -> Outcome:
        """Upstream's end of a sample: no pick, or an empty pool, is an invalid action scored as no prediction."""
        if self._prediction is None or not self._pool:
            if self._prediction is None:
                reason = "no round picked a candidate"
            else:
                reason = "the last round answered A: every remaining candidate was eliminated (the earlier pick is discarded, as upstream)"
            self._prediction = None
            if interrupted == _CONTEXT:
                # upstream records an invalid action here; ours says what happened
                return self._outcome(st.CONTEXT_LIMIT_EXCEEDED, st.PAPER_AGENT_INVALID_ACTION, f"{error}; {reason}")
            if interrupted == _TURN_CAP:
                return self._outcome(st.TASK_LIMIT_EXCEEDED, st.PAPER_AGENT_INVALID_ACTION, f"{error}; {reason}")
            status = st.INVALID_FORMAT if self._unreadable else st.INVALID_ACTION
            if self._unreadable:
                reason += f" ({self._unreadable} reply(s) without 'Answer: <letter>')"
            return self._outcome(status, st.PAPER_AGENT_INVALID_ACTION, reason)
        if interrupted == _CONTEXT:
            return self._outcome(st.CONTEXT_LIMIT_EXCEEDED, st.PAPER_AGENT_CONTEXT_LIMIT, error)
        if interrupted == _TURN_CAP:
            return self._outcome(st.TASK_LIMIT_EXCEEDED, st.PAPER_TASK_LIMIT_REACHED, error)
        return self._outcome(st.COMPLETED, st.PAPER_COMPLETED, None)

    def _outcome(self, status: str, paper_status: str, error: str | None) -> Outcome:
        prediction = self._prediction or ("", "")
        target = self._target
        metrics = step_metrics(prediction, target)
        details: dict[str, Any] = {
            **metrics,
            "prediction": list(prediction),
            "target": target,
            "sid": self._data["sid"],
            "index": self._data["index"],
            "annotation_id": self._data["annotation_id"],
            "action_uid": self._data["action_uid"],
            "step": self._data["step"],
            "rounds": self._rounds,
            "model_calls": sum(1 for r in self._rounds if "answer" in r),
        }
        success = bool(metrics["step_success"])
        return Outcome(status=status, score=1.0 if success else 0.0, success=success, error=error, details=details, paper_status=paper_status)
