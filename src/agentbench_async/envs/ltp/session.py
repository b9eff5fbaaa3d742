"""One Lateral Thinking Puzzle game: the player (model under test) asks, the host (judge model) answers.

One model reply = one round (AgentBench v0.2, ``LateralThinkingPuzzle.sync_start_sample``):

1. the first line of the reply is the question; an empty reply ends the game (``completed``);
2. a question containing an invalid phrase ("new game", ...) adds 2 to ``abort`` and gets a hint; at
   ``abort >= 5`` (the third one) the game ends (``completed``);
3. a question whose character-unigram BLEU against a story key exceeds 0.85 gets a "the story already
   says so" hint (round used, no judge call);
4. otherwise the host answers (its reply goes to the player verbatim); a yes/no answer is restated as a
   fact, the facts since the last key hit are merged, and the merge is compared with the remaining
   answer keys that are not longer than the question (at most one key per round);
5. after ``rounds`` rounds the game ends with ``task_limit_exceeded`` (the normal end).

Score = game progress = keys hit / number of answer keys. A context overflow of the player ends the game
with the progress made so far (upstream keeps its metrics then); a failure of the judge, its overflow
included, is a ``model_error`` (upstream: TASK_ERROR) and is re-run on resume.

The host's calls after its answer overlap with the player's next turn (``overlap``, the default): the player
sees only the answer, so its next question is asked while the host restates the answer as a fact (the next
answer waits for that fact: the host is told the facts so far) and, round after round in their own chain,
merges the facts and compares them with the keys. The calls, their prompts, the game's outcome and every
turn are those of the sequential order (step 4 complete before the next question; ``overlap=False``); only
a judge failure may now be noticed one player turn later (the episode is a ``model_error`` either way).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ...environment import (
    ContextLimitError,
    EnvError,
    EpisodeContext,
    JudgeFn,
    Message,
    ModelError,
    ModelReply,
    Outcome,
    Session,
    Step,
    Task,
    statuses as st,
)
from .bleu import char_unigram_bleu
from .data import key_lines
from .prompts import Prompter

# What upstream records (spec §7): an empty reply or the third invalid question end the game COMPLETED,
# the round cap TASK_LIMIT_REACHED, a player overflow AGENT_CONTEXT_LIMIT.
_PAPER_STATUS = {
    st.COMPLETED: st.PAPER_COMPLETED,
    st.TASK_LIMIT_EXCEEDED: st.PAPER_TASK_LIMIT_REACHED,
    st.CONTEXT_LIMIT_EXCEEDED: st.PAPER_AGENT_CONTEXT_LIMIT,
}
STORY_REPEAT_BLEU = 0.85  # a question this close to a story key repeats the story
ABORT_LIMIT = 5  # abort score at which the game ends (+2 per invalid question: the third one)
_LOG_KEYS = ("round", "question", "event", "host", "fact", "key_hit", "reply")  # a round's log entry, in the sequential order


class LTPSession(Session):
    def __init__(self, task: Task, ctx: EpisodeContext, judge: JudgeFn, prompter: Prompter, rounds: int, *, overlap: bool = True) -> None:
        self._task = task
        self._ctx = ctx
        self._judge = judge
        self._p = prompter
        self._rounds = rounds
        self._overlap = overlap
        self._fact: asyncio.Task[str] | None = None  # the last round's restatement: the next answer needs it
        self._keys: asyncio.Task[None] | None = None  # the merges and key comparisons so far, one round after another
        data = task.data
        self._story: str = data["story"]
        self._truth: str = data["truth"]
        self._story_keys = key_lines(data["story_keys"])
        self._answer_keys = key_lines(data["answer_keys"])
        self._hints = len(self._answer_keys)  # fix: non-empty key lines only
        self._remaining: list[str] = list(self._answer_keys)
        self._primer = self._build_primer(data["story_keys"], data["answer_keys"])
        # game state (names as upstream)
        self._round = 0  # rounds played so far
        self._correct = 0
        self._relevance = 0
        self._bingo = 0
        self._abort = 0
        self._finished = False
        self._finish_round = rounds
        self._known: list[str] = []
        self._reasoning: list[str] = []
        self._hit_keys: dict[str, str] = {}
        self._log: list[dict[str, Any]] = []

    # -- prompts -----------------------------------------------------------------------------------

    def _build_primer(self, story_keys: str, answer_keys: str) -> list[Message]:
        p = self._p
        rules = p.host_rules
        texts = [
            p.host_intro.format(story=self._story, truth=self._truth, rules=rules),
            p.ack,
            p.ask_story_keys,
            story_keys,
            p.ask_answer_keys,
            answer_keys,
            p.ask_rules,
            rules,
            p.start,
            p.start_reply.format(story=self._story),
        ]
        return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]

    async def begin(self) -> list[Message]:
        return [{"role": "user", "content": self._p.player_intro.format(story=self._story)}]

    # -- judge ----------------------------------------------------------------------------------------

    async def _ask_judge(self, messages: list[Message]) -> str:
        try:
            reply = await self._judge(messages)
        except ContextLimitError as exc:  # the host's prompt, not the player's: not the player's outcome
            raise ModelError(f"judge: {exc}") from None
        return (reply.content or "").strip()

    async def _ask_single(self, instruction: str, text: str) -> str:
        return await self._ask_judge([{"role": "user", "content": f"{instruction}\n{text}"}])

    def _is_yes(self, text: str) -> bool:
        return text.startswith(self._p.yes_prefixes)

    def _is_no(self, text: str) -> bool:
        return text.startswith(self._p.no_prefixes)

    # -- the round ------------------------------------------------------------------------------------

    async def step(self, reply: ModelReply) -> Step:
        await self._raise_failure()  # a judge call of an earlier round failed: the episode is a model_error now
        content = reply.content or ""
        round_no = self._round  # 0-based index of this round
        self._round += 1
        if not content:
            self._log.append({"round": round_no + 1, "question": None, "event": "empty reply"})
            return Step(action=None, valid=False, error="empty reply", outcome=await self._end(st.COMPLETED, "empty reply"))
        question = content.split("\n")[0].strip()
        entry: dict[str, Any] = {"round": round_no + 1, "question": question}
        self._log.append(entry)

        if any(phrase in question for phrase in self._p.invalid_phrases):
            self._abort += 2
            entry["event"] = "invalid question"
            err = "invalid question (asks to end or change the game)"
            if self._abort >= ABORT_LIMIT:
                return Step(action=question, valid=False, error=err, outcome=await self._end(st.COMPLETED, "aborted: invalid questions"))
            return await self._next(question, self._p.invalid_hint, valid=False, error=err)

        hypothesis = question.replace("?", ".")
        if any(char_unigram_bleu(key, hypothesis) > STORY_REPEAT_BLEU for key in self._story_keys):
            entry["event"] = "repeats the story"
            return await self._next(question, self._p.story_hint, valid=False, error="question repeats the story")
        # Upstream also compares the question with earlier ones, with BLEU > 1: that never fires, so
        # repeated questions go to the host as usual (kept; see docs).

        if self._fact is not None:
            await self._fact  # the host is told the facts so far: the last round's restatement first
        answer = await self._ask_judge(self._answer_messages(question))
        entry["host"] = answer
        if self._is_yes(answer):
            self._correct += 1
            instruction = self._p.restate_yes
        elif self._is_no(answer):
            instruction = self._p.restate_no
        else:
            return await self._next(question, answer)
        self._relevance += 1
        # the player sees only the answer: the rest of the round runs beside its next turn
        self._fact = asyncio.create_task(self._restate(instruction, question, entry))
        self._keys = asyncio.create_task(self._match_keys(round_no, question, entry, self._fact, self._keys))
        if not self._overlap:
            await self._settle()
        return await self._next(question, answer)

    async def _restate(self, instruction: str, question: str, entry: dict[str, Any]) -> str:
        summary = await self._ask_single(instruction, question)
        self._known.append(summary)
        entry["fact"] = summary
        return summary

    async def _match_keys(self, round_no: int, question: str, entry: dict[str, Any], fact: asyncio.Task[str],
                          earlier: asyncio.Task[None] | None) -> None:  # fmt: skip
        """One round's merge and key comparisons, after the earlier rounds' (a hit clears the facts to merge)."""
        if earlier is not None:
            await earlier
        summary = await fact
        self._reasoning.append(summary)
        merged = summary if len(self._reasoning) == 1 else await self._ask_single(self._p.merge, " ".join(self._reasoning))
        hit = await self._check_keys(question, merged)
        if hit is not None:
            entry["key_hit"] = hit
        if self._bingo >= self._hints and not self._finished:  # fix: upstream compared with len(remaining)
            self._finished = True
            self._finish_round = round_no + 1

    async def _settle(self) -> None:
        """Wait for the host's calls still running (their failure is raised here)."""
        for task in (self._fact, self._keys):
            if task is not None:
                await task

    async def _raise_failure(self) -> None:
        for task in (self._fact, self._keys):
            if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
                await task

    async def close(self) -> None:
        for task in (self._fact, self._keys):  # an episode that ended early (the player failed, a cancel): stop the host
            if task is not None and not task.done():
                task.cancel()
            if task is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await task

    def _answer_messages(self, question: str) -> list[Message]:
        instruction = self._p.answer_instruction
        messages = list(self._primer)
        if self._known:
            messages.append({"role": "user", "content": " ".join(self._known) + instruction})
            messages.append({"role": "assistant", "content": self._p.known_ack})
        messages.append({"role": "user", "content": question + instruction})
        return messages

    async def _check_keys(self, question: str, merged: str) -> str | None:
        """Compare the merged facts with the remaining keys; the first match is hit (one per round)."""
        asked_len = len(question.replace("?", ""))
        for key in self._remaining:
            if asked_len < len(key):  # upstream filter: a key needs a question at least as long as it
                continue
            verdict = await self._ask_judge([{"role": "user", "content": self._p.compare.format(key=key, merged=merged)}])
            if self._is_yes(verdict):
                self._bingo += 1
                self._remaining.remove(key)
                self._reasoning = []
                self._hit_keys[key] = merged
                return key
        return None

    async def _next(self, question: str, host_msg: str, *, valid: bool = True, error: str | None = None) -> Step:
        """End the round: the host's message goes to the player, or the game ends at the round cap."""
        self._log[-1]["reply"] = host_msg
        observation: list[Message] = [{"role": "user", "content": host_msg}]
        outcome = None
        if self._round >= self._rounds:
            outcome = await self._end(st.TASK_LIMIT_EXCEEDED, "round limit reached")
        return Step(observation=observation, action=question, valid=valid, error=error, outcome=outcome)

    async def on_turn_limit(self) -> Outcome:
        return await self._end(st.TASK_LIMIT_EXCEEDED, "round limit reached")

    async def on_context_limit(self, error: str) -> Outcome:
        # upstream: AGENT_CONTEXT_LIMIT, and the game's metrics so far are kept (not scored 0)
        return await self._end(st.CONTEXT_LIMIT_EXCEEDED, "context limit", error=error)

    # -- metrics --------------------------------------------------------------------------------------

    async def _end(self, status: str, end_reason: str, *, error: str | None = None) -> Outcome:
        """The game's outcome once the host's calls still running are done."""
        await self._settle()
        return self._outcome(status, end_reason, error=error)

    def _outcome(self, status: str, end_reason: str, *, error: str | None = None) -> Outcome:
        rounds = self._rounds
        progress = self._bingo / self._hints if self._hints else 0.0
        details: dict[str, Any] = {
            "progress": progress,  # GP (the score)
            "accuracy": self._correct / rounds,  # SGA: share of rounds answered yes
            "efficiency": (1 - self._finish_round / rounds) if self._finished else 0.0,  # RE
            "relevance": self._relevance / rounds,  # QR: share of rounds answered yes or no
            "correct": self._correct,
            "relevant": self._relevance,
            "bingo": self._bingo,
            "hints": self._hints,
            "finished": self._finished,
            "finish_round": self._finish_round,
            "rounds": rounds,
            "rounds_used": self._round,
            "abort": self._abort,
            "end_reason": end_reason,
            "language": self._task.data.get("language", "en"),  # the puzzles'
            "prompter": self._p.language,  # the wording's (v0.2: English for either set)
            "hit_keys": dict(self._hit_keys),
            "missed_keys": list(self._remaining),
            "log": [{k: entry[k] for k in _LOG_KEYS if k in entry} for entry in self._log],
        }
        if error is None and end_reason.startswith("aborted"):
            error = end_reason
        return Outcome(status=status, score=progress, success=progress >= 1.0, error=error, details=details,
                       paper_status=_PAPER_STATUS[status])


def require_judge(ctx: EpisodeContext) -> JudgeFn:
    if ctx.judge is None:
        raise EnvError("ltp needs a judge model to host the game: configure one with --judge-model")
    return ctx.judge
