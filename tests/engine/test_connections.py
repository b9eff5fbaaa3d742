"""Connections to a model's server are a bounded resource (issue 49): requests wait for one of ``max_connections``
connections instead of opening more, and a server that takes only so many at once (its listen queue full, connections
beyond it time out) slows the run down instead of failing its episodes; the end-of-run line names the connection limit,
not ``max_concurrency``."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from engine_support import mock_process, query

from agentbench_async.cli import main
from agentbench_async.limits import BACKPRESSURE_WINDOW_S, ModelLimits
from agentbench_async.models import base


class _CappedProxy:
    """A loopback TCP proxy in front of the mock that serves at most ``cap`` connections at once, as a server at its
    open-files limit or ``worker_connections`` does: it accepts no more meanwhile, its listen queue (``backlog``) fills,
    and the kernel drops further connection attempts (they time out). Counts the most connections served at once."""

    def __init__(self, upstream: str, cap: int, backlog: int = 1) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.cap, self.backlog = cap, backlog
        self.open = self.most = self.accepted = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.sock.setblocking(False)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}{parts.path}"
        self.loop = asyncio.new_event_loop()

    async def _serve(self) -> None:
        room = asyncio.Semaphore(self.cap)
        while True:
            await room.acquire()  # at the cap nothing is accepted: the listen queue fills, then SYNs are dropped
            conn, _ = await self.loop.sock_accept(self.sock)
            self.accepted += 1
            self.open += 1
            self.most = max(self.most, self.open)
            self.loop.create_task(self._pipe(conn, room))

    async def _pipe(self, conn: socket.socket, room: asyncio.Semaphore) -> None:
        try:
            down_r, down_w = await asyncio.open_connection(sock=conn)
            up_r, up_w = await asyncio.open_connection(*self.upstream)

            async def copy(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                try:
                    while data := await r.read(65536):
                        w.write(data)
                        await w.drain()
                finally:
                    w.close()

            await asyncio.gather(copy(down_r, up_w), copy(up_r, down_w), return_exceptions=True)
        finally:
            self.open -= 1
            room.release()

    @contextmanager
    def running(self) -> Iterator[_CappedProxy]:
        thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        thread.start()
        served = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        try:
            yield self
        finally:
            served.cancel()
            self.loop.call_soon_threadsafe(self.loop.stop)
            thread.join(5)
            self.sock.close()


def _run(capsys: pytest.CaptureFixture[str], out: Path, base_url: str, limit: int, *args: str) -> tuple[int, list[str]]:
    code = main(["run", "--env", "echo", "--split", "dev", "--limit", str(limit), "--env-option", "echo.tasks=1000",
                 "--model", "mock-oracle", "--base-url", base_url, "--task-header", "--no-progress", "--out", str(out), *args])  # fmt: skip
    err = capsys.readouterr().err
    return code, err.splitlines()


def test_requests_wait_for_one_of_max_connections(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with mock_process("--latency-ms", "100") as mock, _CappedProxy(mock, cap=1000, backlog=128).running() as proxy:
        out = tmp_path / "pool.duckdb"
        # 60 episodes at once and 60 requests in flight allowed, but 6 connections: never more than 6 opened
        code, lines = _run(capsys, out, proxy.url, 60, "--max-concurrency", "60", "--max-in-flight", "60", "--max-connections", "6")
        assert code == 0, lines
        assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed'") == [(60,)]
        assert proxy.most <= 6 and proxy.accepted <= 6, (proxy.most, proxy.accepted)
        assert query(out, "SELECT count(*), max(in_flight_limit) FROM model_calls") == [(120, 6)]
        [line] = [x for x in lines if "held them back" in x or "set the pace" in x]  # the connections, not max_concurrency
        assert line.startswith("mock-oracle: its requests waited ") and "for one of its 6 connections to the server" in line, line
        assert "not max_concurrency, held them back" in line and "--max-connections" in line, line


def test_a_server_that_takes_few_connections_slows_the_run_and_fails_no_episode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "SDK_CONNECT_TIMEOUT_S", 0.3)  # connections beyond the server's queue time out sooner
    with mock_process("--latency-ms", "50") as mock, _CappedProxy(mock, cap=8, backlog=1).running() as proxy:
        out = tmp_path / "capped.duckdb"
        code, lines = _run(capsys, out, proxy.url, 80, "--max-concurrency", "40", "--max-in-flight", "40", "--max-retries", "0")
        assert code == 0, lines
        # every episode completes although max_retries is 0 and connections were refused: backpressure, not a failure
        assert query(out, "SELECT status, count(*) FROM episodes GROUP BY ALL") == [("completed", 80)]
        refused, resent = query(out, "SELECT count(*) FILTER (note LIKE '%backpressure%'), count(*) FILTER (attempt > 1) FROM model_calls")[0]
        assert refused > 0 and resent >= refused, (refused, resent)
        assert query(out, "SELECT min(in_flight_limit) FROM model_calls") < [(40,)]  # fewer connections from then on
        assert proxy.most <= 8
        assert query(out, "SELECT count(*) FROM model_calls WHERE error IS NOT NULL AND note NOT LIKE '%backpressure%'") == [(0,)]
        said = [x for x in lines if "connections" in x and "backpressure" in x or "not counted as a retry" in x]
        assert said and "mock-oracle: " in said[0] and "--max-connections" in said[0], lines
        assert not [x for x in lines if x.startswith("max_concurrency ")], lines


def test_a_refusal_is_backpressure_only_while_the_server_answers_others() -> None:
    limits = ModelLimits(max_in_flight=100, max_connections=50)
    assert limits.in_flight_limit == 50  # at most one request in flight a connection
    # nothing answered yet (a server that is not there, or not yet up): a failure like any other
    assert not limits.connection_refused(time.monotonic(), 30) and limits.connection_limit == 50
    limits.observe(200, None, 0.1)
    for _ in range(40):
        limits._in_flight.held += 1  # 40 requests in flight
    assert limits.connection_refused(time.monotonic(), 40)  # the server answers others: it is full
    assert limits.connection_limit == 20 and limits.in_flight_limit == 20 and limits.connection_refusals == 1
    assert limits._paused_until > time.monotonic()  # new requests pause
    assert limits.connection_refused(time.monotonic() - 1, 40)  # asked for before the cut: no second cut
    assert limits.connection_limit == 20 and limits.connection_refusals == 2
    for _ in range(2000):  # answers grow the limit back, to below where the server refused (40 in use), not further
        limits.observe(200, None, 0.1)
    assert limits.connection_limit == 39
    limits._refused_at -= BACKPRESSURE_WINDOW_S + 1  # a while without refusals: up to max_connections again
    for _ in range(2000):
        limits.observe(200, None, 0.1)
    assert limits.connection_limit == 50 and limits.fewest_connections == 20


def test_the_pace_lines_name_the_connections_and_spare_max_concurrency() -> None:
    from agentbench_async.models import ModelConfig
    from agentbench_async.pace import PaceTally
    from agentbench_async.records import CallRow

    model = ModelConfig(name="m", max_in_flight=10_000, max_connections=1_000)
    tally = PaceTally()
    tally.add_calls([CallRow(turn=0, attempt=1, http_status=200, latency_ms=1_000.0, model="m", queue_ms=5_000.0)] * 10)
    tally.admitted("m", "echo", 30.0)  # its episodes also waited for places under max_concurrency
    [line] = tally.lines([model], None, 10_000)
    assert line.startswith("m: its requests waited 50 s in all for one of its 1,000 connections to the server"), line
    assert "(max_connections 1,000), not max_concurrency, held them back" in line and "--max-connections" in line

    # the server refused some while it answered others: said with the lowest cut, also when the limiter did not hold them long
    quiet = PaceTally()
    quiet.add_calls([CallRow(turn=0, attempt=1, http_status=200, latency_ms=1_000.0, model="m")] * 10)
    quiet.connected("m", 300, 42)
    [line] = quiet.lines([model], None, 10_000)
    assert line.startswith("m: the server refused or let time out 42 connections while it answered others") and "cut to 300" in line, line

    # a model held by max_in_flight (below its connections) is named as before, and max_concurrency for another model's episodes
    small = ModelConfig(name="s", max_in_flight=8)
    both = PaceTally()
    both.add_calls([CallRow(turn=0, attempt=1, http_status=200, latency_ms=1_000.0, model="s", queue_ms=5_000.0)] * 10)
    both.admitted("s", "echo", 30.0)
    both.admitted("other", "echo", 3.0)
    lines = both.lines([small, ModelConfig(name="other")], None, 64)
    assert "its limits (max_in_flight 8)" in lines[0] and lines[1].startswith("max_concurrency 64 held episodes back: other's echo"), lines
