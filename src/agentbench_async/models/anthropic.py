"""Anthropic Messages API."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from ..limits import ModelLimits
from ..types import Message, ModelReply, ToolCall, Usage
from .base import ModelClient, ModelConfig
from .families import anthropic_api_root, join_url
from .network import Route
from .replies import ReplyReader, add_counts
from .streaming import assemble, needs_streaming

MAX_CACHE_BREAKPOINTS = 4  # Anthropic accepts at most four cache_control blocks per request
_EPHEMERAL = {"type": "ephemeral"}


def _to_anthropic(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI-shaped history -> (system, Anthropic messages). Consecutive same-role turns are merged."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for msg in messages:
        role = msg.get("role")
        if role == "system":
            system.append(msg.get("content") or "")
            continue
        if role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id", ""), "content": msg.get("content") or ""}
            blocks = [block]
            role = "user"
        elif role == "assistant":
            # With extended thinking and tool use the API wants the turn's thinking blocks back, first and
            # unchanged (signatures included); elsewhere they are left out (the API would ignore them).
            blocks = list(msg.get("thinking_blocks") or []) if msg.get("tool_calls") else []
            if msg.get("content"):
                blocks.append({"type": "text", "text": msg["content"]})
            for tc in msg.get("tool_calls") or []:
                try:
                    args = json.loads(tc["function"]["arguments"] or "{}")
                except ValueError:
                    args = {"_raw": tc["function"]["arguments"]}
                blocks.append({"type": "tool_use", "id": tc["id"], "name": tc["function"]["name"], "input": args})
        else:
            blocks = [{"type": "text", "text": msg.get("content") or ""}]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system) or None), out


def _mark(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": _EPHEMERAL}


def add_cache_breakpoints(body: dict[str, Any]) -> None:
    """Mark the stable prefix of a request with ``cache_control`` breakpoints (at most four):

    1. the end of tools + system (the instructions every turn repeats);
    2. the first message (the task's instructions and one-shot examples);
    3. the end of the previous turn (the last user message before the latest reply): read this turn;
    4. the end of the request: written now, read by the next turn.

    The cache holds the prefix up to a breakpoint, so a later request that starts with the same bytes pays
    the cached price for it. Breakpoints that fall on the same block count once; thinking blocks are never
    marked (the API refuses that).
    """
    system = body.get("system")
    if isinstance(system, str):
        body["system"] = [_mark({"type": "text", "text": system})]
    elif isinstance(system, list) and system and isinstance(system[-1], dict):  # blocks given in extra_body
        body["system"] = [*system[:-1], _mark(system[-1])]
    elif body.get("tools"):
        body["tools"] = [*body["tools"][:-1], _mark(body["tools"][-1])]
    messages = body["messages"]
    n = len(messages)
    wanted = sorted({i for i in (0, n - 3, n - 1) if 0 <= i < n and messages[i]["role"] == "user"})
    used = 1 if (body.get("system") or body.get("tools")) else 0
    for i in reversed(wanted):  # the latest breakpoints matter most if the limit is reached
        if used >= MAX_CACHE_BREAKPOINTS:
            break
        content = messages[i]["content"]
        last = len(content) - 1
        while last >= 0 and content[last].get("type") in ("thinking", "redacted_thinking"):
            last -= 1
        if last < 0:
            continue
        messages[i] = {**messages[i], "content": [*content[:last], _mark(content[last]), *content[last + 1:]]}
        used += 1


def _tools_to_anthropic(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"name": t["function"]["name"], "description": t["function"].get("description", ""), "input_schema": t["function"].get("parameters", {"type": "object"})}
        for t in tools
    ]


class AnthropicClient(ModelClient):
    default_base_url = "https://api.anthropic.com/v1"

    def __init__(self, config: ModelConfig, session: aiohttp.ClientSession, limits: ModelLimits, target: Route | None = None) -> None:
        super().__init__(config, session, limits, target)
        self.base_url = anthropic_api_root(self.base_url)  # the SDK's host root or the same ending in /v1
        self.endpoint = join_url(self.base_url, "/messages")
        # streamed when the SDK would require it (an output budget that may take over 10 minutes), or asked for in extra_body;
        # never in batch mode (a batch answers whole messages)
        self._stream = not config.batch and (config.extra_body.get("stream") is True or needs_streaming(config.model_id, config.max_tokens))

    def _request(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        system, converted = _to_anthropic(messages)
        body: dict[str, Any] = {"model": self.config.model_id, "messages": converted, "max_tokens": self.config.max_tokens}
        if system:
            body["system"] = system
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if self.config.thinking is not None:
            body["thinking"] = self.config.thinking
        if tools:
            body["tools"] = _tools_to_anthropic(tools)
        body.update(self.config.extra_body)
        if self._stream:
            body["stream"] = True
        if self.config.prompt_caching:
            add_cache_breakpoints(body)
        headers = {"Content-Type": "application/json", "anthropic-version": self.config.anthropic_version, **self.config.headers}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return self.endpoint, headers, body

    def _decode(self, raw: bytes) -> Any:
        return assemble(raw) if self._stream else super()._decode(raw)

    def _parse(self, body: Any, read: ReplyReader) -> ModelReply:
        body = read.mapping(body, "the body")
        if body.get("type") != "message":
            raise read.malformed(f"type is {body.get('type')!r}, expected 'message'")
        text: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, Any]] = []
        for i, raw in enumerate(read.items(body.get("content"), "content", required=True)):
            block = read.mapping(raw, f"content[{i}]")
            kind = block.get("type")
            if kind == "text":
                text.append(read.text(block.get("text"), f"content[{i}].text"))
            elif kind == "tool_use":
                calls.append(ToolCall(id=read.name(block.get("id"), f"content[{i}].id"), name=read.name(block.get("name"), f"content[{i}].name"),
                                      arguments=json.dumps(read.optional_mapping(block.get("input"), f"content[{i}].input"))))  # fmt: skip
            elif kind == "thinking":
                thinking.append({**block, "thinking": read.text(block.get("thinking"), f"content[{i}].thinking")})
            elif kind == "redacted_thinking":
                thinking.append(block)
        usage = read.optional_mapping(body.get("usage"), "usage")
        reasoning = None
        if thinking:
            reasoning = "\n\n".join(b["thinking"] if b["type"] == "thinking" else "[redacted thinking]" for b in thinking)
        # Anthropic's usage counts thinking inside output_tokens and reports no separate number. Its input_tokens
        # are only the tokens after the last cache breakpoint: the prompt is input + cache read + cache write.
        # (a cache count the server left out is 0 in the sum and null in the row; one dropped as invalid voids the sum)
        read_tokens = read.count(usage.get("cache_read_input_tokens"), "usage.cache_read_input_tokens", missing=None)
        written = read.count(usage.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens", missing=None)
        prompt = add_counts(read.count(usage.get("input_tokens"), "usage.input_tokens"),
                            0 if usage.get("cache_read_input_tokens") is None else read_tokens,
                            0 if usage.get("cache_creation_input_tokens") is None else written)  # fmt: skip
        return ModelReply(
            content="".join(text),
            tool_calls=calls,
            finish_reason=read.word(body.get("stop_reason"), "stop_reason"),
            usage=Usage(prompt, read.count(usage.get("output_tokens"), "usage.output_tokens"), None, read_tokens, written),
            reasoning=reasoning,
            thinking_blocks=thinking or None,
        )
