"""Pace hints that know what the server said: a server that answers one request at a time (and says how long each
waited in its queue, as text-generation-inference and llama.cpp do) set the pace, so the run does not advise raising
max_concurrency, which would only lengthen that queue."""

from __future__ import annotations

from pathlib import Path

from engine_support import echo_config, run, start_mock

from agentbench_async.analytics import load
from agentbench_async.analytics.operations import limit_lines


async def _lines(tmp_path: Path, **mock: object) -> tuple[list[str], float]:
    server = await start_mock(latency_ms=150, **mock)
    try:
        cfg = echo_config(tmp_path / "r.duckdb", server.base_url, limit=8, max_concurrency=4)
        summary = await run(cfg)
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 8}
    return summary.pace.lines(cfg.models, cfg.judge, cfg.max_concurrency), max(summary.pace.held_s.values(), default=0.0)


async def test_a_one_at_a_time_server_is_named_as_the_pace_not_max_concurrency(tmp_path: Path) -> None:
    lines, held = await _lines(tmp_path, capacity=1, queue_limit=50)  # four requests at once, one served at a time
    assert held >= 1.0  # episodes did wait for a place under max_concurrency: before, the run advised raising it
    assert [line for line in lines if "max_concurrency" in line] == []
    [line] = [line for line in lines if "server's own queue" in line]
    assert line.startswith("mock-oracle: its requests waited ") and "the server answers few requests at a time and set the pace" in line
    assert "more concurrency would only wait there" in line
    # the report: the calls' summed latency beside the wall time they took (four at a time: the sum is larger)
    with load(tmp_path / "r.duckdb") as res:
        [limits] = limit_lines(res)
    assert "(summed latency of every call) within " in limits and "of wall time from the first call's start to the last's" in limits
