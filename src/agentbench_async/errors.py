"""The project's exception types.

Every error a user can cause (bad config, bad task file, unreachable server, wrong API key) is an
``AgentBenchError`` whose message is one line naming the file/field/episode and the fix. The CLI prints
``error: <message>`` for these and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class AgentBenchError(Exception):
    """Base class: a user-facing problem with a one-line message."""


class ConfigError(AgentBenchError):
    """The run configuration (YAML file or flags) is invalid."""


class TaskFileError(AgentBenchError):
    """A task file (built-in or from --data-dir) cannot be read or has a bad record."""


class StoreError(AgentBenchError):
    """The DuckDB output file cannot be used (locked, other config, bad SQL)."""


class SpendCapReached(AgentBenchError):
    """The run's spend cap (``--max-cost``, ``--max-total-tokens``) was reached before the run began (a resume with the
    same cap): nothing is run; the CLI prints the line and exits with status 3, as when a run stops at its cap."""


class EnvUnavailableError(AgentBenchError):
    """An environment cannot start on this machine (missing package, no user namespaces, ...)."""


class EnvError(AgentBenchError):
    """An environment failed while running an episode (not the model's fault): status ``env_error``."""


class ModelError(AgentBenchError):
    """The model API failed for good (after retries, or a non-retryable error): status ``model_error``."""

    def __init__(self, message: str, *, http_status: int | None = None, fatal: bool = False, permanent: bool = False) -> None:
        super().__init__(message)
        self.http_status = http_status
        # fatal: retrying other episodes cannot help (bad key, unknown model): the run stops this model.
        self.fatal = fatal
        # permanent: this episode's request is refused the same way on retry; resume does not re-run it.
        self.permanent = permanent


class ContextLimitError(AgentBenchError):
    """The prompt does not fit the model's context window: status ``context_limit_exceeded``."""


class RetryableModelError(Exception):
    """One HTTP attempt failed in a way worth retrying (429, 5xx, reset, timeout, broken JSON).

    Internal to the model clients; after the last retry it becomes a ``ModelError``.
    """

    def __init__(self, message: str, *, http_status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.retry_after = retry_after
