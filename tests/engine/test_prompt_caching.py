"""Prompt caching across turns: Anthropic cache_control breakpoints on the stable prefix, OpenAI-compatible
requests whose prefix stays byte-identical from turn to turn, and the cached tokens (read and written) that
the servers report stored per call in model_calls."""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web
from engine_support import echo_config, query, run, serve_app, start_mock

from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.models.anthropic import MAX_CACHE_BREAKPOINTS, add_cache_breakpoints
from agentbench_async.models.wire import dumps_body

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "providers"
FIVE_TURNS = {"env_options": {"echo": {"turns": 5, "tasks": 4}}, "history": "full"}


def _marks(body: dict) -> list[str]:
    """Where the cache_control breakpoints are: 'system', 'tool', or 'message <i>'."""
    out = [f"system" for b in body.get("system") or [] if isinstance(b, dict) and "cache_control" in b]
    out += ["tool" for t in body.get("tools") or [] if "cache_control" in t]
    for i, m in enumerate(body["messages"]):
        out += [f"message {i}" for b in m["content"] if "cache_control" in b]
    return out


def _conversation(n_turns: int) -> list[dict]:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "instructions and examples"}]}]
    for k in range(n_turns):
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": f"reply {k}"}]})
        msgs.append({"role": "user", "content": [{"type": "text", "text": f"observation {k}"}]})
    return msgs


def test_breakpoints_mark_system_instructions_previous_turn_and_end_within_the_limit():
    body = {"system": "be brief", "messages": _conversation(3)}
    add_cache_breakpoints(body)
    assert _marks(body) == ["system", "message 0", "message 4", "message 6"]
    assert len(_marks(body)) <= MAX_CACHE_BREAKPOINTS
    assert body["system"] == [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    # the first turn: instructions and end are the same block, marked once
    first = {"messages": _conversation(0)}
    add_cache_breakpoints(first)
    assert _marks(first) == ["message 0"]
    # no system: the tools carry the first breakpoint
    tooled = {"tools": [{"name": "a"}, {"name": "b"}], "messages": _conversation(1)}
    add_cache_breakpoints(tooled)
    assert _marks(tooled) == ["tool", "message 0", "message 2"] and "cache_control" in tooled["tools"][-1]
    blocks = {"system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "messages": _conversation(0)}
    add_cache_breakpoints(blocks)
    assert _marks(blocks) == ["system", "message 0"] and "cache_control" in blocks["system"][1]


def test_breakpoints_never_land_on_thinking_blocks_nor_change_the_callers_blocks():
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    user = {"role": "user", "content": [{"type": "text", "text": "q"}]}
    body = {"messages": [user, {"role": "assistant", "content": [thinking]}, {"role": "user", "content": [{"type": "text", "text": "o"}]}]}
    add_cache_breakpoints(body)
    assert "cache_control" not in thinking and "cache_control" not in user["content"][0]
    assert _marks(body) == ["message 0", "message 2"]


async def test_anthropic_reads_the_cached_prefix_from_the_second_turn_on(tmp_path):
    server = await start_mock(cache_min_tokens=1)
    try:
        out = tmp_path / "a.duckdb"
        await run(echo_config(out, server.base_url, models=[{"name": "mock-oracle", "provider": "anthropic"}], **FIVE_TURNS))
    finally:
        await server.stop()
    rows = query(out, "SELECT turn, input_tokens, cache_read_tokens, cache_write_tokens FROM model_calls ORDER BY episode_id, turn")
    assert len(rows) == 20
    assert all(r[2] == 0 and r[3] > 0 for r in rows if r[0] == 1), "the first turn writes the prefix"
    assert all(r[2] > 0 for r in rows if r[0] > 1), "later turns read the previous turn's prefix"
    assert all(r[2] + r[3] <= r[1] for r in rows), "input_tokens is the whole prompt, cached parts included"
    (read, written), = query(out, "SELECT sum(cache_read_tokens), sum(cache_write_tokens) FROM model_calls")
    assert (read, written) == (server.stats["cache_read_tokens"], server.stats["cache_write_tokens"])
    assert query(out, "SELECT count(*) FROM episodes WHERE success") == [(4,)]


async def test_anthropic_caching_can_be_turned_off(tmp_path):
    server = await start_mock(cache_min_tokens=1)
    try:
        out = tmp_path / "a.duckdb"
        models = [{"name": "mock-oracle", "provider": "anthropic", "prompt_caching": False}]
        await run(echo_config(out, server.base_url, models=models, **FIVE_TURNS))
    finally:
        await server.stop()
    assert query(out, "SELECT sum(cache_read_tokens), sum(cache_write_tokens), count(*) FROM model_calls") == [(0, 0, 20)]


async def test_openai_prefix_is_byte_identical_across_turns_and_cached_tokens_are_stored(tmp_path):
    mock = MockModelServer(MockOptions(cache_min_tokens=1))
    raw_bodies: dict[str, list[bytes]] = {}

    async def completions(request: web.Request) -> web.Response:
        raw = await request.read()
        raw_bodies.setdefault(request.headers["X-AgentBench-Episode"], []).append(raw)
        status, body = mock.answer(json.loads(raw), request.headers, anthropic=False)
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    out = tmp_path / "o.duckdb"
    async with serve_app(app) as port:
        await run(echo_config(out, f"http://127.0.0.1:{port}/v1", **FIVE_TURNS))
    assert len(raw_bodies) == 4
    for bodies in raw_bodies.values():
        assert len(bodies) == 5
        for before, after in zip(bodies, bodies[1:]):
            messages = dumps_body(json.loads(before)["messages"])[:-1]  # the array without its closing bracket
            prefix = before[: before.index(messages) + len(messages)]
            assert after.startswith(prefix), "turn k+1 repeats turn k's request bytes up to the end of its messages"
    rows = query(out, "SELECT turn, cache_read_tokens, cache_write_tokens FROM model_calls")
    assert all(r[1] == 0 for r in rows if r[0] == 1) and all(r[1] > 0 for r in rows if r[0] > 1)
    assert {r[2] for r in rows} == {None}, "OpenAI does not report cache writes"
    assert sum(r[1] for r in rows) == mock.stats["cache_read_tokens"]


def _keys(value: object) -> object:
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items()}
    return type(value).__name__


def test_mock_usage_has_the_providers_shape():
    mock = MockModelServer(MockOptions())
    _, openai = mock.answer({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, {}, anthropic=False)
    fixture = json.loads((FIXTURES / "usage_openai_cached.json").read_text())["body"]
    assert set(fixture["prompt_tokens_details"]) == set(openai["usage"]["prompt_tokens_details"])
    assert set(openai["usage"]) <= set(fixture)
    _, anthropic = mock.answer({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}, {}, anthropic=True)
    fixture = json.loads((FIXTURES / "usage_anthropic_cache.json").read_text())["body"]
    assert _keys(anthropic["usage"]) == _keys(fixture)
