"""Where a call's time went (issue 36): ``model_calls.queue_ms`` is the wait in the engine's limiter before the request
was sent (not in ``latency_ms``), ``server_queue_ms`` the part of ``latency_ms`` the server says the request waited in its
own queue (text-generation-inference's ``x-queue-time``, llama.cpp's ``timings``: fixtures read from their source). A
time limit counted in model time (card_game: 300 s a decision) names the share that was waiting, and the report hints
when limits were hit mostly waiting. Every figure is checked against servers that queue."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from aiohttp import web
from engine_support import echo_config, query, run, serve_app, start_mock

from agentbench_async.analytics import load
from agentbench_async.analytics.operations import limit_lines, waiting_hints
from agentbench_async.config import build_config
from agentbench_async.models.server_timing import header_queue_ms, timings_queue_ms

FIXTURES = json.loads((Path(__file__).parents[1] / "fixtures" / "conventions" / "server_queue_time.json").read_text())


def test_the_servers_own_words_are_read_as_their_source_writes_them() -> None:
    tgi, llama = FIXTURES["tgi"], FIXTURES["llama_cpp"]
    assert header_queue_ms(tgi["headers"]) == tgi["server_queue_ms"]
    assert timings_queue_ms(llama["body"], llama["latency_ms"]) == llama["server_queue_ms"]
    assert header_queue_ms({"x-total-time": "12"}) is None and timings_queue_ms({"choices": []}, 100.0) is None
    assert timings_queue_ms(llama["body"], 10.0) == 0.0  # a latency below its own work time: no queue, never negative


async def test_a_server_that_queues_says_so_and_our_limiter_s_wait_is_apart(tmp_path: Path) -> None:
    # capacity 1: requests wait in the mock's queue and it says for how long, as text-generation-inference does
    server = await start_mock(latency_ms=200, capacity=1, queue_limit=50)
    out = tmp_path / "server.duckdb"
    try:
        await run(echo_config(out, server.base_url, limit=4, max_concurrency=4))
    finally:
        await server.stop()
    rows = query(out, "SELECT latency_ms, server_queue_ms, queue_ms FROM model_calls")
    assert all(q is not None and 0 <= q <= lat for lat, q, _ in rows)
    assert max(q for _, q, _ in rows) >= 300  # four at once, one served at a time: the later ones waited 200 ms per call ahead
    assert all(lat - q >= 150 for lat, q, _ in rows)  # the rest is the 200 ms of serving
    assert all(ours < 50 for _, _, ours in rows)  # 64 in flight allowed: nothing waited in our limiter
    with load(out) as res:
        [line] = limit_lines(res)
        usage = res.call_usage.row(0, named=True)
    assert usage["server_queue_s"] == sum(q for _, q, _ in rows) / 1000 and usage["answer_s"] == sum(lat for lat, _, _ in rows) / 1000
    assert "of it in the server's queue" in line and "waiting in the engine's limiter" not in line

    # one request in flight at a time, a server without a queue: the wait is ours, outside latency_ms, and the server says nothing
    server = await start_mock(latency_ms=200)
    out = tmp_path / "ours.duckdb"
    try:
        await run(echo_config(out, server.base_url, models=[{"name": "mock-oracle", "max_in_flight": 1}], limit=4, max_concurrency=4))
    finally:
        await server.stop()
    rows = query(out, "SELECT latency_ms, server_queue_ms, queue_ms FROM model_calls")
    assert all(q is None for _, q, _ in rows) and all(lat < 400 for lat, _, _ in rows)
    assert max(ours for _, _, ours in rows) >= 300
    with load(out) as res:
        [line] = limit_lines(res)
    assert "waiting in the engine's limiter before sending" in line and "server's queue" not in line  # it says nothing


async def test_llama_cpp_timings_through_the_client(tmp_path: Path) -> None:
    # a server answering in llama.cpp's shape after 300 ms, 60 ms of which it reports as work: 240 ms were waiting
    body = json.loads(json.dumps(FIXTURES["llama_cpp"]["body"]))
    body["timings"].update({"prompt_ms": 40.0, "predicted_ms": 20.0})

    async def chat(request: web.Request) -> web.Response:
        payload = await request.json()
        numbers = payload["messages"][-1]["content"]
        body["choices"][0]["message"]["content"] = "Answer: " + numbers.rsplit(":", 1)[-1].strip()
        await asyncio.sleep(0.3)
        return web.json_response(body)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    out = tmp_path / "llama.duckdb"
    async with serve_app(app) as port:
        await run(echo_config(out, f"http://127.0.0.1:{port}/v1", limit=1))
    [(latency, queued)] = query(out, "SELECT latency_ms, server_queue_ms FROM model_calls LIMIT 1")
    assert queued == latency - 60.0 and 230 <= queued <= 1000


def test_card_game_names_the_waiting_share_of_a_time_limit_and_the_report_hints(tmp_path: Path) -> None:
    async def play() -> Path:
        # one game's call served at a time for 400 ms while three others wait: a 1 s decision limit is hit waiting
        server = await start_mock(latency_ms=400, capacity=1, queue_limit=50)
        out = tmp_path / "dcg.duckdb"
        fast = {"timeout": 30, "retry_backoff_s": 0.01, "retry_backoff_max_s": 0.1}
        cfg = build_config({"out": out, "envs": ["card_game"], "split": "dev", "limit": 4, "max_concurrency": 4,
                            "env_options": {"card_game": {"decision_seconds": 1}},
                            "models": [{"name": "mock-oracle", "base_url": server.base_url, "task_header": True, **fast}]},
                           where="test")  # fmt: skip
        try:
            await run(cfg)
        finally:
            await server.stop()
        return out

    started = time.monotonic()
    out = asyncio.run(play())
    assert time.monotonic() - started < 120
    forfeits = query(out, "SELECT error, details FROM episodes WHERE json_extract_string(details, '$.forfeit_cause') = 'time_limit'")
    assert forfeits, query(out, "SELECT status, error FROM episodes")
    waited = [json.loads(d) for _, d in forfeits]
    assert all(d["queued_seconds"] > 0.5 * d["model_seconds"] for d in waited), waited
    assert all("s of it waiting in the server's queue" in e for e, _ in forfeits), forfeits
    with load(out) as res:
        [hint] = waiting_hints(res)
    assert hint.startswith(f"hint: mock-oracle · card_game: {len(forfeits)} episodes hit a time limit counted in model time mostly waiting")
