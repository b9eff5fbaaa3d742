"""Honest rates and runs that did not finish: calls per wall-clock second of the run (not per second that had a
call), a run interrupted or killed marked as such in `report` with what a resume re-runs, and the one-line hint
when tools-mode replies carry a call as JSON text instead of tool_calls (a llama-cpp-python server's default)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
from aiohttp import web
from analytics_support import ALPHA_KG, ALPHA_OS, T0, WriteRun
from engine_support import serve_app
from rich.console import Console

from agentbench_async.analytics import commands, load

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "providers" / "tools_as_text_llama_cpp_python.json"


def _report(path: Path, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    commands.report([path], html=None, json_out=False, console=console)
    return " ".join(re.sub(r"[│┃]", " ", console.export_text()).split())


def test_calls_per_second_are_per_wall_clock_second_of_the_run(write_run: WriteRun) -> None:
    """47 calls in an 80-minute run: 0.01 calls/s, not the 1.0 a mean over the seconds that had a call gives; each call
    takes 150 s, so calls are in flight from the first start to the last end (busy 4,750 s), though only 47 seconds saw
    a call start."""
    path = write_run("slow", {("alpha", "os"): [("completed", True, 1.0, None)] * 47},
                     config={"models": [{"name": "alpha"}]})  # fmt: skip
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM model_calls WHERE attempt > 1 OR turn > 1")
    con.execute("UPDATE model_calls SET started_at = ? + to_seconds(100 * CAST(regexp_extract(episode_id, 't0*(\\d+)', 1) AS INT))",
                [T0])  # one call every 100 s
    con.execute("UPDATE model_calls SET latency_ms = 150000")  # each one 150 s: the next starts before it ends
    con.execute("UPDATE runs SET created_at = ?, finished_at = ?", [T0, T0 + timedelta(minutes=80)])
    con.close()
    with load(path) as res:
        rate = res.call_rates.row(0, named=True)
    assert rate["calls"] == 47 and rate["run_seconds"] == 4800 and round(rate["calls_per_s"], 4) == round(47 / 4800, 4)
    assert rate["peak_calls_per_s"] == 1 and rate["seconds_with_calls"] == 47 and rate["busy_s"] == 46 * 100 + 150
    text = _report(path, width=120)
    assert "Calls per second of wall-clock time" in text and "alpha 47 1h20m 0.01 1 1h19m" in text  # busy 4,750 s
    con = duckdb.connect(str(path))
    con.execute("UPDATE model_calls SET latency_ms = 2000")  # 2 s each, 100 s apart: busy 47 x 2 s
    con.close()
    with load(path) as res:
        assert res.call_rates.row(0, named=True)["busy_s"] == 94


def test_interrupted_and_killed_runs_are_marked_with_what_a_resume_re_runs(write_run: WriteRun) -> None:
    path = write_run("stopped", {("alpha", "kg"): ALPHA_KG}, config={"models": [{"name": "alpha"}]}, run_id="run-ctrl-c")
    write_run("stopped", {("alpha", "os"): ALPHA_OS}, config={"models": [{"name": "alpha"}]}, run_id="run-killed", path=path)
    con = duckdb.connect(str(path))
    con.execute("UPDATE runs SET interrupted = true WHERE run_id = 'run-ctrl-c'")
    con.execute("UPDATE runs SET finished_at = NULL, interrupted = NULL WHERE run_id = 'run-killed'")
    for episode in ("alpha/os/test/t100/0", "alpha/os/test/t101/0"):  # the killed run's unfinished episodes
        con.execute("INSERT INTO live_turns (run_id, episode_id, turn, seq, role, content, model, env) VALUES "
                    "('run-killed', ?, 0, 0, 'user', 'task', 'alpha', 'os')", [episode])
    con.close()
    text = _report(path, width=200)
    assert "run run-ctrl-c was interrupted (Ctrl-C) at 2025-03-01 12:05:00 after 6 episodes" in text
    assert "run run-killed did not finish: no end was recorded (its process was stopped or killed; last activity" in text
    # cancelled (kg) and env_error (os) episodes, and the two unfinished ones
    assert "it re-runs 4 episodes (1 cancelled, 1 env_error, 2 unfinished) and any task not started yet" in text
    data_console = Console(width=100_000, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    commands.report([path], html=None, json_out=True, console=data_console)
    resume = json.loads(data_console.export_text())["resume"]
    assert sorted((r["status"], r["episodes"]) for r in resume) == [("cancelled", 1), ("env_error", 1), ("unfinished", 2)]


async def test_tools_mode_against_a_server_that_writes_calls_as_text_ends_with_a_hint(tmp_path: Path) -> None:
    """llama-cpp-python's default chat handler answers a request with tools with the model's text: a small model
    writes the call as JSON there. Every episode fails 'no tool call'; the run and the report say why that may be."""
    body = json.loads(FIXTURE.read_text(encoding="utf-8"))["body"]

    async def chat(request: web.Request) -> web.Response:
        assert (await request.json())["tools"]  # the engine asked with tools
        return web.json_response(body)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    out = tmp_path / "tools.duckdb"
    async with serve_app(app) as port:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentbench_async.cli", "run", "--model", "qwen-small", "--base-url", f"http://127.0.0.1:{port}/v1",
            "--env", "echo", "--split", "dev", "--limit", "3", "--action-mode", "tools", "--no-progress", "--out", str(out),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "80"})  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    stderr = err.decode()
    assert proc.returncode == 0, stderr
    hints = [line for line in stderr.splitlines() if line.startswith("hint: ")]
    assert len(hints) == 1, stderr  # one line, however many replies
    assert "qwen-small: 3 of its 3 replies in tools mode had no tool_calls but JSON that looks like a call" in hints[0]
    assert "its server may not support tool calls" in hints[0] and "--action-mode text" in hints[0]
    assert "hint: qwen-small: 3 of its 3 replies" in _report(out)
