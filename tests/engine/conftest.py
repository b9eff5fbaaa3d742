"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agentbench_async.store import live


@pytest.fixture
def blocked(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Merges that wait, once they begin writing, until the first event is set; the second is set when one is waiting."""
    release, waiting = threading.Event(), threading.Event()
    write = live.LivePublisher._write_merged

    def held(self: live.LivePublisher, *args: Any, **kwargs: Any) -> int:
        waiting.set()
        release.wait(30)
        return write(self, *args, **kwargs)

    monkeypatch.setattr(live.LivePublisher, "_write_merged", held)
    yield release, waiting
    release.set()
