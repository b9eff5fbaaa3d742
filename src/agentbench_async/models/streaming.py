"""Anthropic's streamed Messages replies (server-sent events), as anthropic-sdk-python 0.121.0 requires them for long
outputs: its client refuses a non-streaming request whose ``max_tokens`` could take longer than 10 minutes
(``_base_client._calculate_nonstreaming_timeout``: 3,600 s x max_tokens / 128,000 above 600 s, i.e. above 21,333
tokens; or above the model's ``MODEL_NONSTREAMING_TOKENS``). The engine streams those requests and assembles the
events into the message a non-streamed reply would have been (``message_start``, ``content_block_start``/``_delta``/
``_stop``, ``message_delta``, ``message_stop``; an ``error`` event is a failed attempt, retried)."""

from __future__ import annotations

import json
from typing import Any

# anthropic-sdk-python 0.121.0, src/anthropic/_constants.py
MODEL_NONSTREAMING_TOKENS = {
    "claude-opus-4-20250514": 8_192,
    "claude-opus-4-0": 8_192,
    "claude-4-opus-20250514": 8_192,
    "anthropic.claude-opus-4-20250514-v1:0": 8_192,
    "claude-opus-4@20250514": 8_192,
    "anthropic.claude-opus-4-1-20250805-v1:0": 8192,
    "claude-opus-4-1@20250805": 8192,
}
_MAXIMUM_S, _DEFAULT_S = 60 * 60, 60 * 10


def needs_streaming(model_id: str, max_tokens: int) -> bool:
    """Whether the SDK would refuse this request unstreamed (it may take longer than 10 minutes)."""
    limit = MODEL_NONSTREAMING_TOKENS.get(model_id)
    return _MAXIMUM_S * max_tokens / 128_000 > _DEFAULT_S or (limit is not None and max_tokens > limit)


def events(raw: bytes) -> list[dict[str, Any]]:
    """The JSON data of each server-sent event of ``raw`` (``ValueError`` for data that is not JSON)."""
    out = []
    for chunk in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in chunk.split("\n") if line.startswith("data:"))
        if data:
            out.append(json.loads(data))
    return out


def assemble(raw: bytes) -> dict[str, Any]:
    """The message a streamed reply adds up to; ``ValueError`` for an error event or a stream cut before its end."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    stopped = False
    for event in events(raw):
        kind = event.get("type")
        if kind == "error":
            raise ValueError(f"the stream ended with an error event: {json.dumps(event.get('error'))[:200]}")
        if kind == "message_start":
            message = dict(event["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            step = delta.get("type")
            if step == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif step == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
            elif step == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif step == "signature_delta":
                block["signature"] = delta["signature"]
        elif kind == "content_block_stop" and event["index"] in partial:
            blocks[event["index"]]["input"] = json.loads(partial.pop(event["index"]) or "{}")
        elif kind == "message_delta" and message is not None:
            message.update({k: v for k, v in (event.get("delta") or {}).items() if k in ("stop_reason", "stop_sequence")})
            message["usage"].update(event.get("usage") or {})
        elif kind == "message_stop":
            stopped = True
    if message is None or not stopped:
        raise ValueError("the stream ended before message_stop")
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def stream_of(message: dict[str, Any]) -> bytes:
    """A message as the events Anthropic streams it in (the mock's streamed replies; ``assemble`` is its inverse)."""
    out: list[tuple[str, dict[str, Any]]] = []
    usage = dict(message.get("usage") or {})
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    out.append(("message_start", {"type": "message_start", "message": start}))
    for i, block in enumerate(message.get("content") or []):
        kind = block.get("type")
        empty = {"text": {"type": "text", "text": ""}, "tool_use": {**block, "input": {}},
                 "thinking": {"type": "thinking", "thinking": "", "signature": ""}}.get(kind, block)  # fmt: skip
        out.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": empty}))
        if kind == "text":
            text = block.get("text", "")
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                out.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}}))
        elif kind == "tool_use":
            args = json.dumps(block.get("input") or {})
            for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
                out.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "input_json_delta", "partial_json": piece}}))  # fmt: skip
        elif kind == "thinking":
            out.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "thinking_delta", "thinking": block.get("thinking", "")}}))  # fmt: skip
            out.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "signature_delta", "signature": block.get("signature", "")}}))  # fmt: skip
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason"), "stop_sequence": None},
                                  "usage": {"output_tokens": usage.get("output_tokens", 0)}}))  # fmt: skip
    out.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in out).encode()
