"""Fixtures of the viewer's tests: result files with known outcomes (see view_support.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from view_support import write_known


@pytest.fixture(scope="session")
def known_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_known(tmp_path_factory.mktemp("view-known"))
