"""The episode status vocabulary (a contract: users' SQL relies on these words)."""

from __future__ import annotations

from typing import Final

COMPLETED: Final = "completed"
CONTEXT_LIMIT_EXCEEDED: Final = "context_limit_exceeded"
INVALID_FORMAT: Final = "invalid_format"
INVALID_ACTION: Final = "invalid_action"
TASK_LIMIT_EXCEEDED: Final = "task_limit_exceeded"
ENV_ERROR: Final = "env_error"
MODEL_ERROR: Final = "model_error"
CANCELLED: Final = "cancelled"
EPISODE_LIMIT_EXCEEDED: Final = "episode_limit_exceeded"  # a per-episode limit of the run (tokens, cost, wall time)

ALL_STATUSES: Final = (
    COMPLETED,
    CONTEXT_LIMIT_EXCEEDED,
    INVALID_FORMAT,
    INVALID_ACTION,
    TASK_LIMIT_EXCEEDED,
    ENV_ERROR,
    MODEL_ERROR,
    CANCELLED,
    EPISODE_LIMIT_EXCEEDED,
)

# What each status means (the documentation's statuses reference is generated from this).
MEANINGS: Final = {
    COMPLETED: "the episode ended normally (the answer may still be wrong: see `score`/`success`)",
    CONTEXT_LIMIT_EXCEEDED: "the conversation no longer fits the model's context window",
    INVALID_FORMAT: "the reply could not be parsed as an action of the environment's protocol",
    INVALID_ACTION: "the reply parsed, but the action is not valid/executable here",
    TASK_LIMIT_EXCEEDED: "the environment's turn cap was reached (ltp, as AgentBench, plays every round: a solved game "
    "ends so, `success` true; reports count it solved)",
    ENV_ERROR: "the environment failed (not the model's fault); `error` says why",
    MODEL_ERROR: "the API failed after retries, or refused the request; not re-run when `details.permanent` (refused "
    "identically twice)",
    CANCELLED: "the run was interrupted while the episode was in flight (or stopped at a spend cap); a resume plays it",
    EPISODE_LIMIT_EXCEEDED: "a per-episode limit of the run (`episode_limits`: tokens, cost or wall time; off by default, a "
    "recorded deviation when on) ended the episode before its next model call; `error` says which; never a turn cap's "
    "`task_limit_exceeded`",
}

# Outcomes that say something about the model; a re-run skips episodes that ended this way.
AGENT_OUTCOMES: Final = frozenset(
    {COMPLETED, CONTEXT_LIMIT_EXCEEDED, INVALID_FORMAT, INVALID_ACTION, TASK_LIMIT_EXCEEDED, EPISODE_LIMIT_EXCEEDED}
)
# Infrastructure outcomes: never scored against the model, run again on resume.
RETRY_ON_RESUME: Final = frozenset({ENV_ERROR, MODEL_ERROR, CANCELLED})

# AgentBench v0.2's own sample statuses (``SampleStatus``), recorded per episode in ``episodes.paper_status``
# by the environment (``Outcome.paper_status``): what upstream would have recorded for the same episode.
PAPER_COMPLETED: Final = "completed"
PAPER_AGENT_CONTEXT_LIMIT: Final = "agent context limit"
PAPER_AGENT_VALIDATION_FAILED: Final = "agent validation failed"
PAPER_AGENT_INVALID_ACTION: Final = "agent invalid action"
PAPER_TASK_LIMIT_REACHED: Final = "task limit reached"
PAPER_TASK_ERROR: Final = "task error"
PAPER_UNKNOWN: Final = "unknown"

PAPER_STATUSES: Final = (
    PAPER_COMPLETED,
    PAPER_AGENT_CONTEXT_LIMIT,
    PAPER_AGENT_VALIDATION_FAILED,
    PAPER_AGENT_INVALID_ACTION,
    PAPER_TASK_LIMIT_REACHED,
    PAPER_TASK_ERROR,
    PAPER_UNKNOWN,
)

# What the engine records in ``episodes.paper_status`` when the environment leaves ``Outcome.paper_status``
# unset (and what the analytics assume for result files written before the column existed). Engine-made
# endings: a provider's context overflow is AGENT_CONTEXT_LIMIT; an environment failure is an exception in
# the task (UNKNOWN); a model/API failure is TASK_ERROR (AgentBench's framework status for a sample whose
# run raised); a cancelled episode has none (upstream never records an interrupted sample).
DEFAULT_PAPER_STATUS: Final = {
    COMPLETED: PAPER_COMPLETED,
    CONTEXT_LIMIT_EXCEEDED: PAPER_AGENT_CONTEXT_LIMIT,
    INVALID_FORMAT: PAPER_AGENT_VALIDATION_FAILED,
    INVALID_ACTION: PAPER_AGENT_INVALID_ACTION,
    TASK_LIMIT_EXCEEDED: PAPER_TASK_LIMIT_REACHED,
    ENV_ERROR: PAPER_UNKNOWN,
    MODEL_ERROR: PAPER_TASK_ERROR,
    # upstream has no such limit; its nearest word: the task's limit was reached (the paper's TLE column)
    EPISODE_LIMIT_EXCEEDED: PAPER_TASK_LIMIT_REACHED,
}


def paper_status_of(status: str, recorded: str | None = None) -> str | None:
    """The AgentBench v0.2 status stored for an episode: the environment's own (``recorded``) when it set
    one, else the default for our ``status``; ``None`` for a cancelled episode."""
    if status == CANCELLED:
        return None
    return recorded or DEFAULT_PAPER_STATUS.get(status)
