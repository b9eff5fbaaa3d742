"""Result files for the viewer's tests: the analytics tests' known outcomes (repeated, so lists paginate), a
hostile model reply, and judge calls; plus a viewer served on loopback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analytics"))  # the analytics tests' file writer

from analytics_support import ALPHA_KG, ALPHA_OS, BETA_OS, T0, writer  # noqa: E402
from engine_support import serve_app  # noqa: E402

from agentbench_async.view import Source, make_app  # noqa: E402

REPEATS = 6
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b>bold?</b>'
HOSTILE_ID = "alpha/os/test/t-hostile/0"
JUDGED_ID = "alpha/kg/test/t001/0"  # the episode that gets two judge calls


def write_known(folder: Path) -> Path:
    """alpha and beta on os, alpha on kg, six repeats each; a hostile episode; judge calls on one episode."""
    path = writer(folder)("known", {("alpha", "os"): ALPHA_OS, ("beta", "os"): BETA_OS, ("alpha", "kg"): ALPHA_KG},
                          repeats=REPEATS, config={"models": [{"name": "alpha", "price_in": 2.0, "price_out": 8.0}, {"name": "beta"}]})
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "INSERT INTO episodes (run_id, episode_id, model, env, split, task_id, repeat, status, score, success, n_turns, "
            "input_tokens, output_tokens, started_at, finished_at, error, details, source, action_mode, fingerprint, paper_status) "
            "VALUES ('run-known', ?, 'alpha', 'os', 'test', 't-hostile', 0, 'invalid_action', 0.0, false, 1, 10, 10, ?, ?, ?, "
            "'{}', 'builtin', 'text', 'fp1', 'agent invalid action')",
            [HOSTILE_ID, T0, T0 + timedelta(seconds=1), "bad action " + HOSTILE],
        )
        con.execute("INSERT INTO turns (run_id, episode_id, turn, seq, role, content, created_at) VALUES "
                    "('run-known', ?, 0, 0, 'user', 'Do the task.', ?)", [HOSTILE_ID, T0])
        con.execute("INSERT INTO turns (run_id, episode_id, turn, seq, role, content, action, observation, valid, error, created_at) "
                    "VALUES ('run-known', ?, 1, 1, 'assistant', ?, ?, ?, false, ?, ?)",
                    [HOSTILE_ID, HOSTILE, HOSTILE, "observed " + HOSTILE, "error " + HOSTILE, T0])
        for attempt, status in ((1, 200), (2, 200)):
            con.execute("INSERT INTO model_calls (run_id, episode_id, turn, attempt, http_status, latency_ms, input_tokens, "
                        "output_tokens, caller, model, finish_reason, started_at) VALUES ('run-known', ?, 1, ?, ?, 321.0, 40, 2, "
                        "'judge', 'judge-model', 'stop', ?)", [JUDGED_ID, attempt, status, T0])
    finally:
        con.close()
    return path


@contextlib.asynccontextmanager
async def viewer(paths: Sequence[Path], **options: Any) -> AsyncIterator[str]:
    """The viewer over ``paths`` on a free loopback port (``options``: make_app's); yields its base URL."""
    async with serve_app(make_app(Source(paths), **options)) as port:
        yield f"http://127.0.0.1:{port}"


async def get(url: str, **kwargs: object) -> tuple[int, str, aiohttp.typedefs.LooseHeaders]:
    async with aiohttp.ClientSession() as session, session.get(url, **kwargs) as resp:  # type: ignore[arg-type]
        return resp.status, await resp.text(), resp.headers
