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
