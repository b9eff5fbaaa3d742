"""Shared test support (importable from any test module as ``support``: tests/ is on pytest's pythonpath).

Tests that need a system component (bubblewrap, MariaDB, Virtuoso, Chromium) call ``require(...)``:
locally they skip with a message naming what to install; with ``CI`` set they fail instead, so CI never
skips them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
OFFICIAL_DATA = (REPO.parent / "shared" / "agentbench-data").resolve()
IN_CI = bool(os.environ.get("CI"))


def require(condition: bool, what: str) -> None:
    """Skip (locally) or fail (in CI) when ``condition`` is false; ``what`` says what to install."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI must run this test, but {what}")
    pytest.skip(what)


def load_generator(env: str) -> ModuleType:
    """``environments/<env>/generate.py`` (the built-in suite's generator) imported as a module."""
    spec = importlib.util.spec_from_file_location(f"{env}_generate", REPO / "environments" / env / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module
