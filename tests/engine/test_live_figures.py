"""The live display's figures are true against a server that queues (issue 36): calls/s counts calls that ended (not
ones sent and still waiting), each episode in flight shows its turns so far, and after Ctrl-C there is no ETA and the
cancelled episodes are cancelled, never "finished" (display, the published live status and the run's last line)."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine_support import echo_config, mock_process, start_mock
from rich.console import Console

from agentbench_async.scheduler import Evaluation
from agentbench_async.view import Source, pages, queries


async def _until(check, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_calls_per_second_count_calls_that_ended_and_turns_show_per_episode(tmp_path: Path) -> None:
    # one request served at a time for 400 ms, the rest wait in the server's queue
    server = await start_mock(latency_ms=400, capacity=1, queue_limit=100)
    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=True)
    cfg = echo_config(tmp_path / "r.duckdb", server.base_url, limit=4, max_concurrency=4, env_options={"echo": {"turns": 3}})
    evaluation = Evaluation(cfg, console=console, progress=True)
    try:
        task = asyncio.create_task(evaluation.run())
        progress = evaluation.progress
        await _until(lambda: progress.snapshot()["calls"] >= 4)  # four requests sent, the first still being served
        first = progress.snapshot()
        assert first["calls_ended"] == 0 and first["calls_per_s"] == 0.0  # before: 4 sent / elapsed, shown as calls/s
        await _until(lambda: any(s["turns"] and max(s["turns"]) >= 2 for s in progress.snapshot()["streams"]))
        row = progress._render().columns[3]._cells[0]  # "in flight (turns so far)" of the echo row
        assert row.startswith("4 (turns ") and "2" in row, row
        summary = await task
    finally:
        await server.stop()
    last = evaluation.progress.snapshot()
    assert last["calls_ended"] == summary.calls  # once all have ended, both counts agree
    assert summary.statuses == {"completed": 4}


async def test_after_ctrl_c_no_eta_and_cancelled_is_never_done(tmp_path: Path) -> None:
    server = await start_mock(latency_ms=2000)
    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=True)
    cfg = echo_config(tmp_path / "r.duckdb", server.base_url, limit=6, max_concurrency=3, env_options={"echo": {"turns": 3}})
    evaluation = Evaluation(cfg, console=console, progress=True)
    try:
        task = asyncio.create_task(evaluation.run())
        await _until(lambda: evaluation.progress.snapshot()["calls"] >= 3)
        evaluation.stop()  # what Ctrl-C does
        summary = await task
    finally:
        await server.stop()
    snap = evaluation.progress.snapshot()
    stream = snap["streams"][0]
    assert summary.statuses == {"cancelled": 3}
    assert stream["cancelled"] == 3 and stream["done"] == 0 and stream["total"] == 6
    assert snap["eta_s"] is None and snap["stopped"]
    title = str(evaluation.progress._render().title)
    assert "0/6 episodes (3 cancelled)" in title and "stopped (Ctrl-C)" in title and "ETA" not in title


def test_the_run_s_last_line_never_calls_cancelled_episodes_finished(tmp_path: Path) -> None:
    out = tmp_path / "r.duckdb"
    with mock_process("--latency-ms", "3000") as base_url:
        proc = subprocess.Popen([sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", base_url,
                                 "--task-header", "--env", "echo", "--split", "dev", "--limit", "3", "--no-progress", "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while not Path(str(out) + ".live").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the first calls are waiting on the server
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    flat = " ".join(err.split())
    assert "0 episodes finished (nothing to do); 3 episodes cancelled (a resume plays them)" in flat, err
    # the viewer's Live page of the stopped file: out of the 3 planned, none done (before: 3/3, a full bar)
    source = Source([out])
    try:
        [live] = source._call(lambda res: queries.live(res, source), [out])
    finally:
        source.close()
    assert [(s.env, s.done, s.total, s.statuses) for s in live.streams] == [("echo", 0, 3, {"cancelled": 3})]
    page = pages.live([live], [str(out)], "now")
    assert 'data-figure="episodes done"' in page and ">0/3<" in page and '<progress max="3" value="0">' in page
