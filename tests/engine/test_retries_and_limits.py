"""Retry, rate-limit and error-classification behaviour against the fault-injecting loopback mock."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web
from engine_support import echo_config, query, run, start_mock

from agentbench_async.errors import ContextLimitError, ModelError
from agentbench_async.limits import ModelLimits, _TokenWindow
from agentbench_async.models import ModelConfig, make_client
from agentbench_async.records import CallRow


async def test_every_retryable_fault_is_retried_and_recorded(tmp_path):
    faults = ["429", "500", "502", "503", "529", "timeout", "reset", "malformed", "truncated"]
    server = await start_mock(fault_script=faults, retry_after_s=0.01, timeout_sleep_s=2)
    try:
        cfg = echo_config(tmp_path / "r.duckdb", server.base_url, models=[{"name": "mock-oracle", "timeout": 0.5, "max_retries": 9}], limit=1)
        summary = await run(cfg)
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 1}
    rows = query(tmp_path / "r.duckdb", "SELECT attempt, http_status, error IS NOT NULL FROM model_calls ORDER BY attempt")
    # task dev-00000 has one number: one turn, the first 9 attempts fail, the 10th answers.
    assert [r[0] for r in rows] == list(range(1, 11))
    assert [r[1] for r in rows] == [429, 500, 502, 503, 529, None, None, 200, 200, 200]
    assert [r[2] for r in rows] == [True] * 9 + [False]
    assert server.stats["requests"] == 10
    ep = query(tmp_path / "r.duckdb", "SELECT status, score, n_turns FROM episodes")
    assert ep == [("completed", 1.0, 1)]


async def test_gives_up_after_max_retries_as_model_error_and_rerun_resumes(tmp_path):
    server = await start_mock(fault_script=["503"] * 3, retry_after_s=0.01)
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_retries": 2}], limit=2, max_concurrency=1)
        summary = await run(cfg)
        assert summary.statuses == {"model_error": 1, "completed": 1}
        err = query(out, "SELECT error FROM episodes WHERE status = 'model_error'")[0][0]
        assert "giving up after 3 attempts" in err and "503" in err
        # a re-run retries the model_error episode only; still one row per episode
        summary2 = await run(cfg)
    finally:
        await server.stop()
    assert summary2.skipped == 1 and summary2.statuses == {"completed": 1}
    assert query(out, "SELECT count(*), count(DISTINCT episode_id) FROM episodes") == [(2, 2)]
    assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed'") == [(2,)]


async def test_retry_after_is_honoured_and_pauses_the_whole_model(tmp_path):
    # The first request gets 429 with Retry-After 0.4 s; the other episodes' requests must wait too.
    server = await start_mock(fault_script=["429"], retry_after_s=0.4, latency_ms=20)
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_in_flight": 1}], limit=6)
        await run(cfg)
    finally:
        await server.stop()
    rows = query(out, "SELECT epoch(started_at), http_status FROM model_calls ORDER BY started_at")
    t429 = rows[0][0]
    assert rows[0][1] == 429
    later = [t for t, _ in rows[1:]]
    assert min(later) - t429 >= 0.39, "no request may start before Retry-After has passed"
    assert query(out, "SELECT count(*) FROM episodes WHERE status = 'completed'") == [(6,)]


@pytest.mark.parametrize("asked", [86400.0, float("inf")])
async def test_retry_after_beyond_the_cap_pauses_the_cap_and_the_summary_says_so(tmp_path, asked):
    server = await start_mock(fault_script=["429"], retry_after_s=asked)
    out = tmp_path / "cap.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_in_flight": 1, "retry_after_max_s": 0.3}], limit=2)
        summary = await asyncio.wait_for(run(cfg), 30)
    finally:
        await server.stop()
    rows = query(out, "SELECT epoch(started_at), http_status, retry_after_s FROM model_calls ORDER BY started_at")
    assert rows[0][1:] == (429, asked), "the call keeps what the server asked"
    assert min(t for t, _, _ in rows[1:]) - rows[0][0] >= 0.29, "the cap is still a pause"
    assert summary.statuses == {"completed": 2}
    assert summary.retry_after_lines() == [f"mock-oracle: the server asked 1x to wait longer than retry_after_max_s (up to {asked:g} s); "
                                           "each of those pauses was 0.3 s"]  # fmt: skip


async def test_rpm_limit_is_never_exceeded_and_well_used(tmp_path):
    # The server enforces 20 requests per 1-second window and answers 429 beyond; the client has the
    # same limit and must never trigger it.
    server = await start_mock(rpm_limit=20, rpm_window_s=1.0)
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "rpm": 20, "rate_window_s": 1.0}], limit=20)
        start = time.monotonic()
        summary = await run(cfg)
        elapsed = time.monotonic() - start
    finally:
        await server.stop()
    calls = query(out, "SELECT count(*) FROM model_calls")[0][0]
    assert summary.statuses == {"completed": 20}
    assert server.stats["429_rate_limit"] == 0
    assert server.max_requests_in_window <= 20
    assert calls == 39  # dev tasks 0..19 ask for 1, 2, 3, 1, 2, 3, ... numbers: 7*1 + 7*2 + 6*3
    assert elapsed >= 1.0  # 40 requests at 20/s cannot finish within one window


async def test_tokens_per_minute_window_waits_for_budget():
    window = _TokenWindow(limit=100, window_s=0.3)
    start = time.monotonic()
    await window.charge(80)
    await window.charge(80)  # must wait until the first charge leaves the window
    assert time.monotonic() - start >= 0.29
    c = await window.charge(10)
    window.correct(c, 5)
    assert window._used == 85


async def _client(base_url: str, **kw) -> tuple[aiohttp.ClientSession, object]:
    session = aiohttp.ClientSession()
    cfg = ModelConfig(name="m", base_url=base_url, retry_backoff_s=0.01, **kw)
    return session, make_client(cfg, session, ModelLimits())


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_provider_context_length_error_is_context_limit_without_retry(provider):
    server = await start_mock(fault_script=["context"])
    session, client = await _client(server.base_url, provider=provider)
    calls: list[CallRow] = []
    try:
        with pytest.raises(ContextLimitError):
            await client.complete([{"role": "user", "content": "hi"}], None, calls=calls, turn=1)
    finally:
        await session.close()
        await server.stop()
    assert len(calls) == 1 and calls[0].http_status == 400


async def test_other_bad_request_is_not_context_limit_and_is_permanent_when_repeated(aiohttp_raw_server):
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "Invalid value for temperature", "type": "invalid_request_error", "code": None}}, status=400)

    srv = await aiohttp_raw_server(handler)
    session, client = await _client(str(srv.make_url("/v1")))
    calls: list[CallRow] = []
    try:
        with pytest.raises(ModelError, match="HTTP 400.*temperature") as info:
            await client.complete([{"role": "user", "content": "hi"}], None, calls=calls, turn=1)
    finally:
        await session.close()
    assert len(calls) == 2, "an unrecognised 4xx is retried once; the identical refusal again is final"
    assert info.value.permanent and not info.value.fatal


async def test_finish_reason_length_with_empty_reply_is_context_limit(aiohttp_raw_server):
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "length"}], "usage": {"prompt_tokens": 9000, "completion_tokens": 0}})

    srv = await aiohttp_raw_server(handler)
    session, client = await _client(str(srv.make_url("/v1")))
    try:
        with pytest.raises(ContextLimitError, match="length"):
            await client.complete([{"role": "user", "content": "hi"}], None, calls=[], turn=1)
    finally:
        await session.close()


async def test_context_window_precheck_ends_episode_before_any_call(tmp_path):
    server = await start_mock()
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "context_window": 100, "max_tokens": 90}], limit=2)
        summary = await run(cfg)
    finally:
        await server.stop()
    assert summary.statuses == {"context_limit_exceeded": 2}
    assert server.stats["requests"] == 0
    assert "context window of 100" in query(out, "SELECT error FROM episodes LIMIT 1")[0][0]


async def test_bad_api_key_fails_fast_stops_the_model_and_never_leaks_the_key(tmp_path, monkeypatch):
    secret = "sk-test-SECRET-123456789"
    monkeypatch.setenv("AB_TEST_KEY", secret)
    server = await start_mock(api_key="the-right-key")
    out = tmp_path / "r.duckdb"
    try:
        cfg = echo_config(out, server.base_url, models=[{"name": "mock-oracle", "api_key_env": "AB_TEST_KEY"}], max_concurrency=1)
        summary = await run(cfg)
    finally:
        await server.stop()
    assert server.stats["401"] == 1, "401 is not retried and no further episode is started"
    assert summary.statuses == {"model_error": 1}
    assert summary.fatal_errors and "AB_TEST_KEY" in summary.fatal_errors[0]
    assert secret not in summary.fatal_errors[0]
    await asyncio.sleep(0)
    assert secret.encode() not in out.read_bytes()


@pytest.fixture
async def aiohttp_raw_server():
    servers: list[web.AppRunner] = []

    class _Srv:
        def __init__(self, port: int) -> None:
            self.port = port

        def make_url(self, path: str) -> str:
            return f"http://127.0.0.1:{self.port}{path}"

    async def factory(handler):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        servers.append(runner)
        return _Srv(site._server.sockets[0].getsockname()[1])

    yield factory
    for r in servers:
        await r.cleanup()
