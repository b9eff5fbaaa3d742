"""The model clients' JSON on the wire: fast path for ordinary bodies, the standard library's leniency kept."""

from __future__ import annotations

import json

import pytest

from agentbench_async.models.wire import dumps_body, loads_body


def test_request_bodies_are_compact_utf8_json_with_the_same_content() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "héllo \"quoted\"\nnext 中文"}], "max_tokens": 512, "temperature": 0.0}
    raw = dumps_body(body)
    assert isinstance(raw, bytes) and json.loads(raw) == body
    assert "héllo".encode() in raw and b", " not in raw  # UTF-8, not \\u escapes; no padding


def test_a_lone_surrogate_from_an_earlier_reply_still_reaches_the_server() -> None:
    reply = loads_body(b'{"content": "broken \\ud800 text"}')  # what json.loads lets through
    assert reply == {"content": "broken \ud800 text"}
    raw = dumps_body({"messages": [{"role": "assistant", "content": reply["content"]}]})
    assert json.loads(raw)["messages"][0]["content"] == "broken \ud800 text"


def test_replies_read_as_before_and_garbage_is_a_value_error() -> None:
    assert loads_body(b'{"usage": {"prompt_tokens": NaN}}')["usage"]["prompt_tokens"] != 0  # NaN, as json reads it
    assert loads_body('{"a": [1, 2.5, null, true]}') == {"a": [1, 2.5, None, True]}
    with pytest.raises(ValueError):
        loads_body(b"<html>502 Bad Gateway</html>")


@pytest.mark.parametrize("chars", [100, 5_000, 50_000])
def test_a_request_body_holds_about_its_own_length_in_memory(chars: int) -> None:
    # thousands of requests wait for a connection with their bodies built: orjson 3.12+ hands back its output in an
    # untrimmed buffer (4 KB at least, ~10x the JSON for larger ones), which each one held (bench/inflight_memory.py)
    import tracemalloc

    body = {"model": "m", "messages": [{"role": "user", "content": "x" * chars}], "max_tokens": 512}
    dumps_body(body)  # (whatever the first call sets up once)
    tracemalloc.start()
    try:
        raws = [dumps_body(body) for _ in range(20)]
        held = tracemalloc.get_traced_memory()[0] / len(raws)
    finally:
        tracemalloc.stop()
    assert held < len(raws[0]) * 1.1 + 200
