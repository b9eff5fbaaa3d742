"""The event loop the commands run on: uvloop when it is installed (the ``fast`` extra), else asyncio's.

uvloop's loop is a drop-in replacement written over libuv; at 1,000 episodes in flight it lifts the
engine's calls/s noticeably (see docs/performance.md, bench/throughput.py). Set ``AGENTBENCH_LOOP=asyncio`` to use the
standard loop even when uvloop is installed (for debugging, or to compare).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .errors import ConfigError

T = TypeVar("T")
LOOP_VARIABLE = "AGENTBENCH_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the loop to use: uvloop's if installed and not turned off, else ``None`` (asyncio)."""
    choice = os.environ.get(LOOP_VARIABLE, "auto").strip().lower() or "auto"
    if choice not in ("auto", "uvloop", "asyncio"):
        raise ConfigError(f"{LOOP_VARIABLE}={choice!r}: expected auto, uvloop or asyncio")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ConfigError(f"{LOOP_VARIABLE}=uvloop but uvloop is not installed: pip install 'agentbench-async[fast]'") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the chosen loop."""
    try:
        factory = loop_factory()
    except ConfigError:
        main.close()  # never started: close it so Python does not warn that it was never awaited
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
