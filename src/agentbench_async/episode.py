"""The turn loop of one episode: model reply -> environment step -> observation, until an outcome.

Statuses come from the environment (completed, invalid_format, invalid_action, task_limit_exceeded),
from the model client (context_limit_exceeded, model_error), from failures of the environment
(env_error) and from shutdown (cancelled). Every message and every HTTP attempt is recorded.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from . import statuses as st
from .envs.base import Environment, EpisodeContext, Outcome, Session, Task
from .errors import ContextLimitError, EnvError, ModelError
from .history import history_policy
from .records import CallRow, EpisodeRecord, TurnRow, now
from .spend import EpisodeLimits, Prices
from .wording import counted
from .types import Message, ModelReply

# The turn a judge call belongs to: the turn whose step made it. Set around ``session.step``; a task the step starts
# (ltp's host calls running beside the player's next turn) keeps the value it was started with.
_STEP_TURN: contextvars.ContextVar[int | None] = contextvars.ContextVar("agentbench_step_turn", default=None)

# (messages, tools, turn, calls, caller) -> reply; raises ContextLimitError / ModelError.
AgentFn = Callable[[list[Message], list[dict[str, Any]] | None, int, list[CallRow], str], Awaitable[ModelReply]]


@dataclass
class EpisodeSpec:
    """Which episode to run."""

    model: str
    task: Task
    repeat: int = 0
    action_mode: str = "text"
    history: str = "full"
    max_turns: int | None = None  # None: the environment's own cap
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    limits: EpisodeLimits | None = None  # the run's per-episode limits (spend.py); None: turn caps only, as AgentBench
    prices: Prices | None = None  # the model's prices (a cost limit counts its calls at them)
    # read several times an episode; made once (functools.cached_property takes a lock on Python 3.11)
    episode_id: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.episode_id = episode_id(self.model, self.task, self.repeat)


def episode_id(model: str, task: Task, repeat: int) -> str:
    """The id of ``model``'s ``repeat``-th episode of ``task`` (``episodes.episode_id``)."""
    return f"{model}/{task.env}/{task.split}/{task.task_id}/{repeat}"


class _Transcript:
    """Collects turn rows in order."""

    def __init__(self, live: Callable[[list[TurnRow]], None] | None) -> None:
        self.rows: list[TurnRow] = []
        self._live = live
        self._shown = 0

    def turn_done(self) -> None:
        """Hand the rows of the turn that just completed to the live sink (the writer stores them as they come)."""
        if self._live is not None:
            self._live(self.rows[self._shown :])
            self._shown = len(self.rows)

    def add(self, turn: int, message: Message, *, reply: bool = False, injected: bool = False) -> TurnRow:
        """Append a message: the model's ``reply``, or the environment's, which is ``injected`` set-up text when
        the environment says so or when it is in the assistant role (examples, acknowledgements)."""
        role = message.get("role", "user")
        row = TurnRow(
            turn=turn,
            seq=len(self.rows),
            role=role,
            content=message.get("content"),
            tool_calls=json.dumps(message["tool_calls"]) if message.get("tool_calls") else None,
            injected=not reply and (injected or role == "assistant"),
        )
        self.rows.append(row)
        return row


def _observation_text(messages: list[Message], injected: frozenset[int] = frozenset()) -> str | None:
    """``turns.observation`` of a reply: the environment's answer to it. Set-up text sent with the answer (rules re-sent,
    few-shot examples, earlier exchanges: ``injected`` positions and assistant-role messages, which the transcript
    marks as the environment's injected turns) is not copied in: one bracketed line says how many such messages
    came with it, so no example reply ever reads as the model's."""
    if not messages:
        return None
    if len(messages) == 1 and not injected and messages[0].get("role") != "assistant":  # the usual case
        return messages[0].get("content") or ""
    own = [m for i, m in enumerate(messages) if i not in injected and m.get("role") != "assistant"]
    text = "\n".join(m.get("content") or "" for m in own)
    setup = len(messages) - len(own)
    if not setup:
        return text
    mark = (f"[with {counted(setup, 'set-up message')} of the environment (rules, examples, earlier exchanges): in the "
            "transcript as its injected turns, not the model's words]")
    return f"{mark}\n{text}" if own else mark


def run_episode(env: Environment, spec: EpisodeSpec, agent: AgentFn, judge: AgentFn | None = None,
                live: Callable[[list[TurnRow]], None] | None = None) -> Coroutine[Any, Any, EpisodeRecord]:  # fmt: skip
    """Run one episode to its end (``await`` it) and return its record (see ``_run_episode``); with a wall-time limit
    (``episode_limits.seconds``) an episode still running at it is stopped where it is and ends
    ``episode_limit_exceeded`` (its calls and turns so far kept). A plain function handing back the episode's
    coroutine: an episode in flight holds no coroutine of this one's (10,000 in flight: ~3 MB)."""
    seconds = spec.limits.seconds if spec.limits is not None else None
    if seconds is None:
        return _run_episode(env, spec, agent, judge, live)
    return _run_limited(env, spec, agent, judge, live, seconds)


async def _run_limited(env: Environment, spec: EpisodeSpec, agent: AgentFn, judge: AgentFn | None,
                       live: Callable[[list[TurnRow]], None] | None, seconds: float) -> EpisodeRecord:  # fmt: skip
    """``_run_episode`` stopped at ``seconds`` of wall time (``episode_limit_exceeded``)."""
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await _run_episode(env, spec, agent, judge, live)
    except EpisodeCancelled as cancelled:
        if not deadline.expired():
            raise  # the run was stopped (Ctrl-C, a spend cap): cancelled, played again on resume
        record = cancelled.record
    record.status, record.details = st.EPISODE_LIMIT_EXCEEDED, {"limit": "seconds"}
    record.error = f"episode wall-time limit reached: {seconds:g} s (episode_limits.seconds)"
    record.paper_status = st.paper_status_of(record.status)
    return record


async def _run_episode(env: Environment, spec: EpisodeSpec, agent: AgentFn, judge: AgentFn | None,
                       live: Callable[[list[TurnRow]], None] | None) -> EpisodeRecord:  # fmt: skip
    """Run one episode to its end and return its record; ``live`` gets each turn's rows as the turn completes.

    Model and environment failures become statuses, never exceptions. If the episode is cancelled
    (shutdown), ``EpisodeCancelled`` carries the partial record with status ``cancelled``.
    """
    started = now()
    calls: list[CallRow] = []
    transcript = _Transcript(live)
    turn = 0
    n_turns = 0
    shape = history_policy(spec.history)

    judge_fn: Callable[[list[Message]], Awaitable[ModelReply]] | None = None
    if judge is not None:  # (a closure an episode in flight holds only where there is a judge)

        async def judge_fn(messages: list[Message]) -> ModelReply:
            assert judge is not None
            step_turn = _STEP_TURN.get()
            return await judge(messages, None, turn if step_turn is None else step_turn, calls, "judge")

    ctx = EpisodeContext(
        episode_id=spec.episode_id,
        action_mode=spec.action_mode,  # type: ignore[arg-type]
        seed=spec.seed,
        judge=judge_fn,
        options=spec.options,
        model_seconds=lambda: sum(c.latency_ms for c in calls if c.caller == "agent" and c.batch_id is None) / 1000,
        queued_seconds=lambda: sum(c.server_queue_ms or 0.0 for c in calls if c.caller == "agent" and c.batch_id is None) / 1000,
    )
    outcome: Outcome | None = None
    session = None
    try:
        try:
            session = await env.open_session(spec.task, ctx)
            messages = list(await session.begin())
        except (EnvError, OSError) as exc:
            raise _EnvFailure(str(exc)) from None
        for message in messages:
            transcript.add(0, message)
        transcript.turn_done()
        # tools mode: the opening (system text, any one-shot, the task) is never cut; text mode keeps v0.2's rule
        keep = len(messages) if spec.action_mode == "tools" else 1
        max_turns = spec.max_turns or env.max_turns
        tools = session.tools()
        outcome = session.settled()
        while outcome is None:
            if turn >= max_turns:
                outcome = await session.on_turn_limit()
                break
            reached = spec.limits.reached(calls, spec.prices) if spec.limits is not None else None
            if reached is not None:  # no new call past a per-episode limit
                outcome = Outcome(status=st.EPISODE_LIMIT_EXCEEDED, error=reached[1], details={"limit": reached[0]})
                break
            turn += 1
            reply = await agent(shape(messages, keep=keep), tools, turn, calls, "agent")
            n_turns += 1
            reply_msg = reply.as_message()
            row = transcript.add(turn, reply_msg, reply=True)
            row.reasoning = reply.reasoning  # stored; the environment parses reply.content only
            row.think_removed = reply.think_removed
            step_turn = _STEP_TURN.set(turn)
            try:
                step = await session.step(reply)
            except EnvError as exc:
                raise _EnvFailure(str(exc)) from None
            finally:
                _STEP_TURN.reset(step_turn)
            row.action, row.valid, row.error = step.action, step.valid, step.error
            row.observation = _observation_text(step.observation, step.injected)
            if step.restart:  # a fresh conversation: only the observation is sent next
                messages = []
            else:
                messages.append(reply_msg if step.history_reply is None else {**reply_msg, "content": step.history_reply})
            for index, obs in enumerate(step.observation):
                transcript.add(turn, obs, injected=index in step.injected)
                messages.append(obs)
            transcript.turn_done()
            outcome = step.outcome
    except ContextLimitError as exc:
        outcome = await _context_limit_outcome(session, str(exc))
    except ModelError as exc:
        outcome = _model_error_outcome(exc)
    except _EnvFailure as exc:
        outcome = Outcome(status=st.ENV_ERROR, error=str(exc))
    except asyncio.CancelledError:
        outcome = Outcome(status=st.CANCELLED, error="run interrupted")
        raise EpisodeCancelled(_record(spec, outcome, started, n_turns, transcript, calls)) from None
    except Exception as exc:  # a bug in an environment must not stop the run
        outcome = Outcome(status=st.ENV_ERROR, error=_bug_line(exc))
    finally:
        # A session without its own close() has nothing to release: no shielded task for it (that task
        # costs ~10 us an episode).
        if session is not None and type(session).close is not Session.close:
            try:
                await asyncio.shield(session.close())
            except Exception:  # noqa: BLE001 - close must not hide the outcome
                pass
    assert outcome is not None
    return _record(spec, outcome, started, n_turns, transcript, calls)


def _model_error_outcome(exc: ModelError) -> Outcome:
    details = {"fatal": True} if exc.fatal else {"permanent": True} if exc.permanent else {}
    return Outcome(status=st.MODEL_ERROR, error=str(exc), details=details)


async def _context_limit_outcome(session: Session | None, error: str) -> Outcome:
    """The environment decides what a context overflow leaves (upstream may keep partial results)."""
    if session is not None:
        try:
            return await session.on_context_limit(error)
        except EnvError as exc:
            return Outcome(status=st.ENV_ERROR, error=str(exc))
        except ModelError as exc:  # a judge call still running for the session failed (ltp)
            return _model_error_outcome(exc)
    return Outcome(status=st.CONTEXT_LIMIT_EXCEEDED, error=error)


def _bug_line(exc: BaseException) -> str:
    """An environment's unexpected exception as stored: its type, message and where it was raised in the environment's
    code (the innermost frame outside this engine: ``my_env.py:42``), so a mistake points at its line."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/agentbench_async/" not in f.filename.replace("\\", "/")
              or "/agentbench_async/envs/" in f.filename.replace("\\", "/")]  # fmt: skip
    at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}"[: 500 - len(at)] + at


class _EnvFailure(Exception):
    pass


class EpisodeCancelled(Exception):
    """Raised instead of ``CancelledError`` so the caller can store the partial episode."""

    def __init__(self, record: EpisodeRecord) -> None:
        super().__init__(record.episode_id)
        self.record = record


def _record(
    spec: EpisodeSpec, outcome: Outcome, started: Any, n_turns: int, transcript: _Transcript, calls: list[CallRow]
) -> EpisodeRecord:
    input_tokens = output_tokens = 0  # the agent's calls' (a judge's are its own)
    for c in calls:
        if c.caller == "agent":
            input_tokens += c.input_tokens or 0
            output_tokens += c.output_tokens or 0
    return EpisodeRecord(
        episode_id=spec.episode_id,
        model=spec.model,
        env=spec.task.env,
        split=spec.task.split,
        task_id=spec.task.task_id,
        repeat=spec.repeat,
        status=outcome.status,
        score=float(outcome.score),
        success=bool(outcome.success),
        n_turns=n_turns,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        started_at=started,
        finished_at=now(),
        error=outcome.error,
        details=outcome.details,
        source=spec.task.source,
        action_mode=spec.action_mode,
        paper_status=st.paper_status_of(outcome.status, outcome.paper_status),
        turns=transcript.rows,
        calls=calls,
    )
