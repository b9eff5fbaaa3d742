"""Helpers for the engine tests: a loopback mock model and a run on the ``echo`` environment."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
from aiohttp import web

from agentbench_async.config import RunConfig, build_config
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.scheduler import Evaluation, RunSummary


def echo_config(out: Path, base_url: str, *, models: list[dict[str, Any]] | None = None, **settings: Any) -> RunConfig:
    models = models or [{"name": "mock-oracle"}]
    fast = {"timeout": 5, "retry_backoff_s": 0.01, "retry_backoff_max_s": 0.1}
    raw = {
        "out": out,
        "envs": ["echo"],
        "split": "dev",
        "models": [{"base_url": base_url, "task_header": True, **fast, **m} for m in models],
        # the tests of what an infrastructure failure leaves see it as it happens; the retry within the run (on by default)
        # has its own tests (test_attempts_kept.py), which set it
        "infra_retries": 0,
        **settings,
    }
    return build_config(raw, where="test")


async def run(cfg: RunConfig) -> RunSummary:
    return await Evaluation(cfg, progress=False).run()


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


async def start_mock(**options: Any) -> MockModelServer:
    server = MockModelServer(MockOptions(**options))
    await server.start()
    return server


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, ssl_context: Any = None) -> AsyncIterator[int]:
    """Serve an aiohttp app on a free loopback port for the duration of the block; yields the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def app_in_thread(make_app: Callable[[], web.Application]) -> Iterator[int]:
    """Serve the app ``make_app`` builds on a free loopback port, in a thread with its own event loop (for tests that
    drive the CLI, which runs its own loop); yields the port."""
    ready, stop = threading.Event(), threading.Event()
    port: list[int] = []
    loop = asyncio.new_event_loop()

    async def serve() -> None:
        runner = web.AppRunner(make_app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.02)
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30), "the test server did not start"
    try:
        yield port[0]
    finally:
        stop.set()
        thread.join(10)
        loop.close()


@contextlib.contextmanager
def mock_process(*options: str, python: str = sys.executable) -> Iterator[str]:
    """``agentbench serve-mock`` in its own process (of the interpreter ``python``: another virtualenv's, say) on a free
    loopback port for the block; yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([python, "-m", "agentbench_async.cli", "serve-mock", "--port", str(port), *options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # the server's start takes seconds on a loaded machine
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(10)
