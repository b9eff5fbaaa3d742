"""The rows an episode produces, before the writer stores them (columns match store/schema.py)."""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from .envs.base import Outcome


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


# Rows keep times as Unix seconds (float): cheap on the per-call path; the writer turns whole columns
# into TIMESTAMPTZ at once.
now = time.time


@dataclass(slots=True)
class TurnRow:
    turn: int
    seq: int
    role: str
    content: str | None
    action: str | None = None
    observation: str | None = None
    valid: bool | None = None
    error: str | None = None
    tool_calls: str | None = None  # JSON text
    created_at: float = field(default_factory=now)
    reasoning: str | None = None  # assistant rows: the thinking separated from the reply
    # the environment's set-up text, not the model's reply (few-shot examples, acknowledgements, rules
    # re-inserted): the engine sets it (store/schema.py, turns.injected)
    injected: bool = False
    # assistant rows: a <think> block was cut out of the content before the environment read it (reasoning_handling:
    # separate; AgentBench v0.2 parsed the whole content): store/schema.py, turns.think_removed
    think_removed: bool | None = None


@dataclass(slots=True)
class CallRow:
    turn: int
    attempt: int
    http_status: int | None
    latency_ms: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None
    caller: str = "agent"
    model: str | None = None
    finish_reason: str | None = None
    started_at: float = field(default_factory=now)
    retry_after_s: float | None = None
    reasoning_tokens: int | None = None  # reported by the server (OpenAI-style usage details)
    limit_kind: str | None = None  # context_window | output_budget: which limit ended this call's turn
    limit_basis: str | None = None  # how that was decided (server shape, finish reason, usage)
    cache_read_tokens: int | None = None  # input tokens read from the provider's prompt cache (part of input_tokens)
    cache_write_tokens: int | None = None  # input tokens written to it (Anthropic cache_creation_input_tokens)
    batch_id: str | None = None  # the provider's batch that carried this request (--batch), else None
    note: str | None = None  # what the client repaired or dropped in the reply (a count out of range, invalid text)
    # what the model's limits paced to after this answer (limits.py): learned from the server or as configured
    in_flight_limit: int | None = None
    rpm_limit: int | None = None
    tpm_limit: int | None = None
    # where the time went besides the server's answer: waiting in the engine's limiter before the request was sent (its
    # in-flight cap, requests/tokens per minute, a 429's pause), and, of latency_ms, waiting in the server's own queue
    # where the server says so (models/server_timing.py)
    queue_ms: float | None = None
    server_queue_ms: float | None = None


@dataclass(slots=True)
class EpisodeRecord:
    """Everything about one finished episode; the writer commits it in one transaction."""

    episode_id: str
    model: str
    env: str
    split: str
    task_id: str
    repeat: int
    status: str
    score: float
    success: bool
    n_turns: int
    input_tokens: int
    output_tokens: int
    started_at: float  # Unix seconds
    finished_at: float
    error: str | None
    details: dict[str, Any]
    source: str
    action_mode: str
    turns: list[TurnRow] = field(default_factory=list)
    calls: list[CallRow] = field(default_factory=list)
    paper_status: str | None = None  # AgentBench v0.2's status for the episode (statuses.PAPER_STATUSES)

    @property
    def outcome(self) -> Outcome:
        return Outcome(status=self.status, score=self.score, success=self.success, error=self.error, details=self.details)


def _fast_pickling(cls: type) -> None:
    """Pickle a slots dataclass as its class and field values in order (rebuilt by calling the class): what a
    distributed run sends between processes for every turn and call (``distributed/worker.pack``); the dataclass's
    own state methods walk ``dataclasses.fields`` per object, ~3x slower both ways."""
    values = operator.attrgetter(*(f.name for f in fields(cls)))
    cls.__reduce__ = lambda self: (cls, values(self))  # type: ignore[method-assign,assignment]


_fast_pickling(TurnRow)
_fast_pickling(CallRow)
_fast_pickling(EpisodeRecord)
