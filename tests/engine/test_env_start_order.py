"""Environments start at once and each one's episodes begin as soon as it has started: an environment that is ready
plays while a slow one is still starting; a user's mistake found by a later start still stops the run with one error
and nothing stored; an environment is closed as soon as its episodes are done (the others still running), and a close
that fails is one line."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentbench_async import scheduler
from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext, Session, Task
from agentbench_async.envs.echo import EchoEnvironment
from agentbench_async.errors import ConfigError
from agentbench_async.scheduler import Evaluation
from engine_support import echo_config, query, start_mock

WAIT_S = 5.0  # how long a gate waits before the test counts it as never opened


class _Gates:
    """What the two environments of a test tell each other (made on the test's event loop)."""

    def __init__(self) -> None:
        self.echo_playing = asyncio.Event()  # the first echo episode has begun
        self.echo_closed = asyncio.Event()
        self.timeline: list[str] = []
        self.requests = 0  # requests the mock model answered


def _envs(monkeypatch: pytest.MonkeyPatch, gates: _Gates, *, slow_start: str = "", close_error: bool = False,
          wait_for_echo_close: bool = False) -> dict[str, Any]:  # fmt: skip
    """Make ``echo`` the real one (watched) and ``os`` an echo environment under that name, each as the test asks."""
    made: dict[str, Any] = {}

    class Echo(EchoEnvironment):
        async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
            if not gates.echo_playing.is_set():
                gates.timeline.append("echo episode begins")
                gates.echo_playing.set()
            return await super().open_session(task, ctx)

        async def close(self) -> None:
            gates.timeline.append("echo closed")
            gates.echo_closed.set()
            if close_error:
                raise RuntimeError("the scratch folder is gone")

    class Other(EchoEnvironment):
        name = "os"
        closed = False

        async def start(self) -> None:
            if slow_start == "user mistake at once":  # a file read when it starts: found before its first wait
                raise ConfigError("os: option rootfs='/nowhere' is not a directory")
            if slow_start:  # still starting until an echo episode has begun (never, if echo waited for this start)
                await asyncio.wait_for(gates.echo_playing.wait(), WAIT_S)
                gates.timeline.append("os started")
                if slow_start == "user mistake":
                    raise ConfigError("os: option rootfs='/nowhere' is not a directory")

        async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
            if wait_for_echo_close:
                await asyncio.wait_for(gates.echo_closed.wait(), WAIT_S)
            return await super().open_session(task, ctx)

        async def close(self) -> None:
            type(self).closed = True

    def fake_make_env(name: str, **kwargs: Any) -> Any:
        env = Other(**kwargs) if name == "os" else Echo(**kwargs) if name == "echo" else make_env(name, **kwargs)
        made[name] = env
        return env

    monkeypatch.setattr(scheduler, "make_env", fake_make_env)
    return made


# Without the task header the mock does not know which task a request is for (an echo environment named os has no mock
# policy): every episode ends on its first reply as invalid_format, an agent outcome. A start that never ended or an
# episode that waited in vain would be a failed start or an env_error instead.
PLAYED = {"invalid_format": 40}


async def _run(tmp_path: Path, gates: _Gates, *, envs: list[str]) -> tuple[Path, Any, str]:
    server = await start_mock(policy="oracle")
    try:
        out = tmp_path / "r.duckdb"
        cfg = echo_config(out, server.base_url, envs=envs, models=[{"name": "mock-oracle", "task_header": False}])
        buf = io.StringIO()
        summary = await Evaluation(cfg, console=Console(file=buf, width=400), progress=False).run()
        return out, summary, buf.getvalue()
    finally:
        gates.requests = server.stats["requests"]
        await server.stop()


async def test_a_ready_environment_plays_while_another_is_still_starting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gates = _Gates()
    _envs(monkeypatch, gates, slow_start="ok")
    out, summary, printed = await _run(tmp_path, gates, envs=["os", "echo"])  # the slow one first in the config
    assert gates.timeline[:2] == ["echo episode begins", "os started"], gates.timeline
    assert printed == "" and not summary.fatal_errors, printed
    assert summary.episodes == 40 and summary.statuses == PLAYED, summary.statuses
    assert query(out, "SELECT env, count(*) FROM episodes GROUP BY env ORDER BY env") == [("echo", 20), ("os", 20)]
    assert query(out, "SELECT count(*) FROM runs WHERE finished_at IS NOT NULL") == [(1,)]


@pytest.mark.parametrize("when", ["user mistake", "user mistake at once"])
async def test_a_users_mistake_found_by_a_start_stops_the_run_with_nothing_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                                  when: str) -> None:  # fmt: skip
    gates = _Gates()
    made = _envs(monkeypatch, gates, slow_start=when)
    with pytest.raises(ConfigError, match="rootfs='/nowhere'"):
        await _run(tmp_path, gates, envs=["os", "echo"])
    # nothing of the run is in the file: the same command, fixed, starts afresh (no --new-run needed)
    counts = "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM episodes), (SELECT count(*) FROM model_calls)"
    assert query(tmp_path / "r.duckdb", counts) == [(0, 0, 0)]
    assert made["os"].closed  # what it had set up is released
    if when == "user mistake at once":  # found before the start's first wait (a file read as it starts): no call at all
        assert gates.requests == 0 and not gates.echo_playing.is_set()
    else:  # found while echo played: its episodes cancelled, unstored; echo closed
        assert gates.echo_playing.is_set() and gates.requests > 0 and gates.echo_closed.is_set()


async def test_an_environment_closes_when_its_episodes_are_done_and_a_failing_close_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    gates = _Gates()
    _envs(monkeypatch, gates, close_error=True, wait_for_echo_close=True)
    out, summary, printed = await _run(tmp_path, gates, envs=["echo", "os"])
    # os's episodes began only once echo was closed: echo's close did not wait for the end of the run
    assert summary.statuses == PLAYED, summary.statuses
    assert printed.strip().splitlines() == ["closing echo failed: the scratch folder is gone"], printed
    assert query(out, "SELECT env, count(*) FROM episodes WHERE status = 'invalid_format' GROUP BY env ORDER BY env") == [("echo", 20), ("os", 20)]


async def test_the_summary_counts_the_cpu_the_episodes_spent(tmp_path: Path) -> None:
    """``RunSummary.cpu_seconds``: this process's CPU from the first episode to the last stored (benches divide it by
    the calls): it holds the environment's own work (echo's ``cpu_ms`` a step) and no more than the wall time allows."""
    server = await start_mock(policy="oracle")
    try:
        cfg = echo_config(tmp_path / "cpu.duckdb", server.base_url, env_options={"echo": {"tasks": 6, "turns": 2, "cpu_ms": 25}})
        summary = await Evaluation(cfg, progress=False).run()
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 6}
    assert 6 * 2 * 0.025 <= summary.cpu_seconds <= summary.seconds * (os.cpu_count() or 1) + 0.05
