"""Rate limits without guessing: the limits a server reports (OpenAI's and Anthropic's headers, fixtures from
their docs) are adopted, and ``max_in_flight: auto`` finds a header-less server's capacity.

The minutes-long runs use virtual time: an event loop whose clock jumps to the next timer instead of waiting
(``VirtualTimeLoop``), and the real ``ModelClient`` and ``ModelLimits`` talking to the mock's hidden limits
(``mock/rate_limits.py``) through a stand-in for the aiohttp session. A simulated minute takes well under a second.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import selectors
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import asyncio_throttle.throttler
import pytest
from engine_support import echo_config, query, run, serve_app, start_mock
from multidict import CIMultiDict

from agentbench_async.analytics.loading import load
from agentbench_async.analytics.operations import limit_lines
from agentbench_async.config import model_from_dict
from agentbench_async.errors import ConfigError, ModelError
from agentbench_async.limits import AUTO_IN_FLIGHT_START, ModelLimits
from agentbench_async.mock.rate_limits import RequestBucket, Saturation, go_duration, rfc3339
from agentbench_async.models import make_client
from agentbench_async.models.base import ModelConfig
from agentbench_async.rate_headers import parse_duration, read_limits
from agentbench_async.records import CallRow
from agentbench_async.scheduler import RunSummary
from agentbench_async.view import Source, make_app
from agentbench_async.store.schema import create_schema

FIXTURES = Path(__file__).parent.parent / "fixtures" / "providers"
WALL0 = 1_750_000_000.0  # the simulated wall clock at virtual time 0


def _fixtures() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("ratelimit_*.json"))]


@pytest.mark.parametrize("fixture", _fixtures(), ids=lambda f: f["source"][:40])
def test_documented_headers_read_into_limit_remaining_and_reset(fixture):
    wall = datetime.fromisoformat(fixture["wall_now"].replace("Z", "+00:00")).timestamp() if "wall_now" in fixture else None
    limits = read_limits(CIMultiDict(fixture["headers"]), wall)
    assert limits is not None and limits.style == fixture["style"]
    for kind in ("requests", "tokens"):
        budget = getattr(limits, kind)
        limit, remaining, reset = fixture["expect"][kind]
        assert (budget.limit, budget.remaining) == (limit, remaining)
        assert budget.reset_s == pytest.approx(reset)


def test_reset_formats_and_what_a_server_without_headers_sends():
    assert [parse_duration(v) for v in ("1s", "6m0s", "20ms", "1h2m3.5s", "0.5")] == [1.0, 360.0, 0.02, 3723.5, 0.5]
    assert parse_duration("soon") is None
    assert [go_duration(s) for s in (1.0, 360.0, 0.02, 1.5)] == ["1s", "6m0s", "20ms", "1.5s"]
    assert rfc3339(WALL0 + 0.2) == "2025-06-15T15:06:41Z"  # rounded up to the second, as the docs' examples
    assert read_limits(CIMultiDict({"content-type": "application/json"})) is None  # vLLM, TGI, llama.cpp
    # Azure's "not reported" (-1) is not a limit
    assert read_limits(CIMultiDict({"x-ratelimit-limit-tokens": "-1", "x-ratelimit-remaining-tokens": "-1"})).tokens is None


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_mock_reports_its_bucket_in_the_providers_headers(style):
    bucket = RequestBucket(rpm=60, headers=style)
    for _ in range(59):
        assert bucket.admit(0.0, WALL0)[0]
    ok, headers = bucket.admit(0.0, WALL0)
    limits = read_limits(CIMultiDict(headers), WALL0)
    assert ok and (limits.requests.limit, limits.requests.remaining) == (60, 0)
    assert limits.requests.reset_s == pytest.approx(60.0)  # empty: full again after a whole minute
    refused, headers = bucket.admit(0.5, WALL0 + 0.5)  # half a request refilled
    assert not refused and headers["retry-after"] == "1"
    assert bucket.admit(1.0, WALL0 + 1.0)[0]  # one request a second
    assert RequestBucket(rpm=60, headers="none").admit(0.0, WALL0)[1] == {}


def test_config_takes_auto_and_says_so_when_a_value_is_wrong():
    assert model_from_dict({"name": "m", "rpm": "auto", "tpm": "auto", "max_in_flight": "auto"}, "m").max_in_flight == "auto"
    with pytest.raises(ConfigError, match=r"^m\.max_in_flight: expected a positive integer or auto, got 'many'$"):
        model_from_dict({"name": "m", "max_in_flight": "many"}, "m")
    with pytest.raises(ConfigError, match=r"^m\.tpm: expected a positive integer or auto \(the limit the server reports\) or nothing"):
        model_from_dict({"name": "m", "tpm": "lots"}, "m")


def test_reported_limits_are_adopted_an_explicit_number_kept_and_a_used_up_budget_waited_for():
    docs = CIMultiDict(json.loads((FIXTURES / "ratelimit_openai_docs.json").read_text())["headers"])

    async def main() -> tuple[ModelLimits, ModelLimits, float]:
        learned, given = ModelLimits(), ModelLimits(rpm=10)
        assert (learned.rpm, learned.tpm, learned.counts_tokens) == (None, None, False)
        learned.observe(200, docs, 0.5)
        given.observe(200, docs, 0.5)
        # the budget is used up: 0 of 60 left, full again in 6 s, so one request is free in 6/60 s
        learned.observe(200, CIMultiDict({**docs, "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6s"}), 0.5)
        start = asyncio.get_running_loop().time()
        async with learned.slot(10):
            waited = asyncio.get_running_loop().time() - start
        return learned, given, waited

    loop = VirtualTimeLoop()
    try:
        learned, given, waited = loop.run_until_complete(main())
    finally:
        loop.close()
    assert (learned.rpm, learned.tpm, learned.counts_tokens, learned.learned_from) == (60, 150000, True, "openai")
    assert (given.rpm, given.tpm) == (10, 150000)  # the configured rpm wins; tpm was left to the server
    assert waited == pytest.approx(0.1)


# -- virtual time -------------------------------------------------------------------------------------
class _NoWaitSelector(selectors.BaseSelector):
    """Never waits: a select with a timeout moves the loop's clock to the timeout's end instead."""

    def __init__(self, loop_clock: list[float]) -> None:
        self._clock = loop_clock
        self._map: dict[int, selectors.SelectorKey] = {}

    def register(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._map[fd] = key
        return key

    def unregister(self, fileobj):  # type: ignore[no-untyped-def]
        return self._map.pop(fileobj if isinstance(fileobj, int) else fileobj.fileno())

    def select(self, timeout=None):  # type: ignore[no-untyped-def]
        if timeout is None:
            raise RuntimeError("virtual time: nothing is scheduled and nothing can happen (a deadlock)")
        self._clock[0] += timeout
        return []

    def get_map(self):  # type: ignore[no-untyped-def]
        return self._map


@pytest.fixture(autouse=True)
def _throttler_on_the_loop_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio-throttle reads time.monotonic(), which is the loop's clock on real loops; on the virtual one
    below it must read the loop's time too."""

    class _Clock:
        @staticmethod
        def monotonic() -> float:
            try:
                return asyncio.get_running_loop().time()
            except RuntimeError:
                return time.monotonic()

    monkeypatch.setattr(asyncio_throttle.throttler, "time", _Clock)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual = [0.0]
        super().__init__(_NoWaitSelector(self._virtual))

    def time(self) -> float:
        return self._virtual[0]


class _Response:
    def __init__(self, status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
        self.status, self.headers, self._body = status, CIMultiDict(headers), json.dumps(body).encode()

    async def read(self) -> bytes:
        return self._body

    # what bounds.read_body reads: the declared length and the body in chunks
    @property
    def content_length(self) -> int:
        return len(self._body)

    @property
    def content(self) -> _Response:
        return self

    async def iter_chunked(self, size: int) -> Any:
        yield self._body

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


_OPENAI_OK = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 10, "completion_tokens": 2}}  # fmt: skip
_ANTHROPIC_OK = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                 "usage": {"input_tokens": 10, "output_tokens": 2}}  # fmt: skip


class SimulatedServer:
    """The mock's hidden limits behind a stand-in for the client's aiohttp session; records every arrival."""

    def __init__(self, *, anthropic: bool, service_s: float, bucket: RequestBucket | None = None, saturation: Saturation | None = None) -> None:
        self.anthropic, self.service_s, self.bucket, self.saturation = anthropic, service_s, bucket, saturation
        self.arrivals: list[tuple[float, int]] = []  # (virtual time, status)

    def post(self, url: str, **kw: Any) -> _Exchange:
        return _Exchange(self)

    async def answer(self) -> _Response:
        now = asyncio.get_running_loop().time()
        headers: dict[str, str] = {}
        status = 200
        if self.bucket is not None:
            allowed, headers = self.bucket.admit(now, WALL0 + now)
            status = 200 if allowed else 429
        if status == 200:
            if self.saturation is not None:
                served = await self.saturation.serve(lambda: asyncio.sleep(self.service_s, result=True))
                status = 200 if served else 429
            else:
                await asyncio.sleep(self.service_s)
        self.arrivals.append((now, status))
        if status != 200:
            return _Response(status, headers, {"error": {"message": "rate limit", "type": "rate_limit_error"}})
        return _Response(200, headers, _ANTHROPIC_OK if self.anthropic else _OPENAI_OK)

    def served_per_minute(self, start: float, end: float) -> float:
        return sum(1 for t, s in self.arrivals if start <= t < end and s == 200) * 60 / (end - start)

    def refused_share(self, start: float) -> float:
        later = [s for t, s in self.arrivals if t >= start]
        return sum(1 for s in later if s == 429) / len(later)


class _Exchange:
    def __init__(self, server: SimulatedServer) -> None:
        self._server = server

    async def __aenter__(self) -> _Response:
        return await self._server.answer()

    async def __aexit__(self, *exc: object) -> None:
        return None


def simulate(server: SimulatedServer, config: ModelConfig, *, episodes: int, minutes: float) -> list[CallRow]:
    """``episodes`` agents calling the model back to back for ``minutes`` of virtual time; the calls' rows."""
    random.seed(0)  # the retries' jitter
    loop = VirtualTimeLoop()
    calls: list[CallRow] = []

    async def main() -> None:
        limits = ModelLimits(max_in_flight=config.max_in_flight, rpm=config.rpm, tpm=config.tpm, window_s=config.rate_window_s)
        client = make_client(config, server, limits)  # type: ignore[arg-type]
        end = minutes * 60

        async def episode() -> None:
            turn = 0
            while asyncio.get_running_loop().time() < end:
                turn += 1
                try:
                    await client.complete([{"role": "user", "content": "hi"}], None, calls=calls, turn=turn)
                except ModelError:
                    pass

        await asyncio.gather(*(episode() for _ in range(episodes)))

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return calls


@pytest.mark.parametrize(("provider", "hidden_rpm"), [("openai", 600), ("anthropic", 600), ("openai", 40), ("anthropic", 40)])
def test_no_limits_given_the_servers_reported_limit_is_used_without_429s(provider, hidden_rpm):
    # 100 episodes, up to 64 requests in flight of 2 s each could send ~1900 requests a minute; the server
    # takes hidden_rpm and says so in its headers. Nothing is configured.
    server = SimulatedServer(anthropic=provider == "anthropic", service_s=2.0, bucket=RequestBucket(hidden_rpm, provider))
    config = ModelConfig(name="m", provider=provider, base_url="http://sim/v1")
    assert config.rpm is None and config.tpm is None
    calls = simulate(server, config, episodes=100, minutes=4)
    assert server.served_per_minute(60, 240) >= 0.9 * hidden_rpm
    assert server.refused_share(60) <= 0.01
    assert {c.rpm_limit for c in calls if c.http_status} == {hidden_rpm}


def test_an_explicit_rpm_still_wins_over_the_headers():
    server = SimulatedServer(anthropic=False, service_s=2.0, bucket=RequestBucket(600, "openai"))
    calls = simulate(server, ModelConfig(name="m", base_url="http://sim/v1", rpm=120), episodes=100, minutes=2)
    assert 0.9 * 120 <= server.served_per_minute(60, 120) <= 120
    assert {c.rpm_limit for c in calls} == {120}


def test_without_headers_the_limit_is_ignored_as_before():
    # the same hidden limit without headers and nothing configured: the client only learns from 429s (pauses)
    server = SimulatedServer(anthropic=False, service_s=2.0, bucket=RequestBucket(120, "none"))
    calls = simulate(server, ModelConfig(name="m", base_url="http://sim/v1"), episodes=100, minutes=2)
    assert server.refused_share(60) > 0.05
    assert {c.rpm_limit for c in calls} == {None}


def test_max_in_flight_auto_finds_a_headerless_servers_capacity():
    # vLLM-like: 16 requests served at once (1 s each: 960 a minute), 16 more may queue, 429 beyond; 200 episodes
    server = SimulatedServer(anthropic=False, service_s=1.0, saturation=Saturation(capacity=16, queue_limit=16))
    calls = simulate(server, ModelConfig(name="m", base_url="http://sim/v1", max_in_flight="auto"), episodes=200, minutes=4)
    hidden_rpm = 16 * 60
    assert server.served_per_minute(60, 240) >= 0.9 * hidden_rpm
    assert server.refused_share(60) <= 0.01
    sizes = [c.in_flight_limit for c in calls if c.in_flight_limit is not None]
    assert sizes[0] <= AUTO_IN_FLIGHT_START + 1 and max(sizes) >= 16  # stored per call: how the size moved
    assert max(sizes[len(sizes) // 2 :]) <= 16 * 2.5  # and it stays near the capacity, not at the cap


# -- over HTTP: the mock sends the headers, a run stores what it paced to ------------------------------
async def _run_on_mock(out: Path, model: dict[str, Any], limit: int, **mock: Any) -> RunSummary:
    server = await start_mock(**mock)
    try:
        return await run(echo_config(out, server.base_url, models=[model], limit=limit))
    finally:
        await server.stop()


async def test_a_run_against_the_mock_adopts_its_headers_and_stores_the_limits(tmp_path):
    out = tmp_path / "r.duckdb"
    summary = await _run_on_mock(out, {"name": "mock-oracle", "provider": "anthropic"}, 4, rpm_limit=6000, rate_headers="anthropic")
    assert summary.statuses == {"completed": 4}
    rows = query(out, "SELECT DISTINCT rpm_limit, in_flight_limit FROM model_calls")
    assert rows == [(6000, 64)]
    with load(out) as res:
        (line,) = limit_lines(res)
    # then where the time went (the mock without --capacity says nothing of a queue)
    assert line.startswith("limits: mock-oracle: 6,000 requests/min, no tokens/min limit known, 64 in flight; "
                           "0 of 7 attempts answered 429; calls answered in ") and "server's queue" not in line  # fmt: skip
    async with serve_app(make_app(Source([out]))) as port:  # agentbench view's overview says the same
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/") as resp:
            page = await resp.text()
    assert "Request limits" in page and "limits: mock-oracle: 6,000 requests/min" in page


async def test_serve_mock_capacity_with_max_in_flight_auto(tmp_path):
    # a header-less server serving 2 requests at once (2 more queue, 429 beyond): the run completes, each call
    # notes the in-flight cap, and the report says how it moved
    out = tmp_path / "r.duckdb"
    summary = await _run_on_mock(out, {"name": "mock-oracle", "max_in_flight": "auto"}, 12, capacity=2, queue_limit=2, latency_ms=20)
    assert summary.statuses == {"completed": 12}
    sizes = [r[0] for r in query(out, "SELECT in_flight_limit FROM model_calls ORDER BY started_at")]
    assert None not in sizes and max(sizes) <= 256
    with load(out) as res:
        (line,) = limit_lines(res)
    assert line.startswith("limits: mock-oracle: no requests/min limit known, no tokens/min limit known, ")


def test_old_files_without_the_limit_columns_read_with_no_limit_lines(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    create_schema(con)
    for column in ("in_flight_limit", "rpm_limit", "tpm_limit"):
        con.execute(f"ALTER TABLE model_calls DROP COLUMN {column}")
    con.close()
    with load(path) as res:
        assert limit_lines(res) == []


class SlidingWindow:
    """A server that takes at most ``rpm`` requests in any 60 s (a sliding window, not a refilling bucket) and reports
    it in ``style``'s headers: remaining in the window, reset when the window is empty again."""

    def __init__(self, rpm: int, style: str) -> None:
        self.rpm, self.style, self.times = rpm, style, collections.deque()

    def admit(self, now: float, wall_now: float) -> tuple[bool, dict[str, str]]:
        while self.times and now - self.times[0] >= 60:
            self.times.popleft()
        allowed = len(self.times) < self.rpm
        if allowed:
            self.times.append(now)
        remaining, empty_in = self.rpm - len(self.times), (self.times[-1] + 60 - now) if self.times else 0.0
        if self.style == "openai":
            headers = {"x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-remaining-requests": str(remaining),
                       "x-ratelimit-reset-requests": go_duration(max(empty_in, 0.001))}  # fmt: skip
        else:
            headers = {"anthropic-ratelimit-requests-limit": str(self.rpm), "anthropic-ratelimit-requests-remaining": str(remaining),
                       "anthropic-ratelimit-requests-reset": rfc3339(wall_now + empty_in)}  # fmt: skip
        if not allowed:
            headers["retry-after"] = str(max(1, round(self.times[0] + 60 - now)))
        return allowed, headers


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_learned_limits_never_overshoot_a_sliding_window(provider):
    # issue 35: 240 rpm in a 60 s sliding window, reported in headers, answers at once, 64 in flight. The burst sent
    # before the first answer counts in the learned window (it answered 60 of 834 calls 429, 7.2%, before).
    server = SimulatedServer(anthropic=provider == "anthropic", service_s=0.0, bucket=SlidingWindow(240, provider))  # type: ignore[arg-type]
    simulate(server, ModelConfig(name="m", provider=provider, base_url="http://sim/v1"), episodes=64, minutes=3)
    assert len(server.arrivals) >= 600
    assert server.refused_share(0) <= 0.01
    assert server.served_per_minute(60, 180) >= 0.95 * 240
