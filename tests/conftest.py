"""Shared fixtures. Helpers live in ``tests/support.py``: ``from support import require, OFFICIAL_DATA``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import OFFICIAL_DATA, require

__all__ = ["require"]


@pytest.fixture(scope="session")
def official_data_dir() -> Path:
    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    return OFFICIAL_DATA


@pytest.fixture(autouse=True)
def _secrets_of_the_test():
    """The process's registry of secrets (``redaction.py``) as it was before each test: a key one test's run reads must
    not mask text in the next test's."""
    from agentbench_async.redaction import SECRETS

    before = SECRETS.secrets
    yield
    SECRETS.reset(before)


@pytest.fixture(autouse=True)
def _short_infra_retry_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process run that keeps the default wait before re-running an infrastructure failure (5 s, doubling: 15 s
    for the two retries of an episode) waits a hundredth of it: every attempt is still run and stored as it would be, in
    the same order, without 15 s of sleep per test. A test that sets ``infra_retry_backoff_s`` itself keeps its wait."""
    from agentbench_async.config import RunConfig
    from agentbench_async.scheduler import Evaluation

    default = RunConfig.__dataclass_fields__["infra_retry_backoff_s"].default
    real = Evaluation._retry_wait

    def _retry_wait(self: Evaluation, record: object, attempt: int) -> float | None:
        wait = real(self, record, attempt)  # type: ignore[arg-type]
        return wait / 100 if wait is not None and self.config.infra_retry_backoff_s == default else wait

    monkeypatch.setattr(Evaluation, "_retry_wait", _retry_wait)
