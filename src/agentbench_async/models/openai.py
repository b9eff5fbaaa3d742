"""OpenAI-compatible Chat Completions (OpenAI, vLLM, TGI, SGLang, llama.cpp, Together, OpenRouter, DeepSeek,
the mock)."""

from __future__ import annotations

from typing import Any

import aiohttp

from ..errors import RetryableModelError
from ..limits import ModelLimits
from ..types import Message, ModelReply, ToolCall, Usage
from .base import ModelClient, ModelConfig
from .network import Route
from .reasoning import message_reasoning, split_think


class OpenAIClient(ModelClient):
    default_base_url = "https://api.openai.com/v1"

    def __init__(self, config: ModelConfig, session: aiohttp.ClientSession, limits: ModelLimits, target: Route | None = None) -> None:
        super().__init__(config, session, limits, target)
        # the fixed part of every request body, built once
        fixed: dict[str, Any] = {config.max_tokens_field: config.max_tokens}
        if config.temperature is not None:  # temperature: null omits it (reasoning models take only their default)
            fixed["temperature"] = config.temperature
        if config.reasoning_effort is not None:
            fixed["reasoning_effort"] = config.reasoning_effort
        self._fixed = fixed
        self._split = config.reasoning_handling == "separate"

    def _request(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        body: dict[str, Any] = {"model": self.config.model_id, "messages": messages, **self._fixed}
        if tools:
            body["tools"] = tools
        body.update(self.config.extra_body)
        headers = {"Content-Type": "application/json", **self.config.headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return f"{self.base_url}/chat/completions", headers, body

    def _parse(self, body: dict[str, Any]) -> ModelReply:
        choices = body.get("choices")
        if not choices:
            raise RetryableModelError("reply has no choices")
        choice = choices[0]
        message = choice["message"]
        tool_calls = [
            ToolCall(id=tc.get("id") or f"call_{i}", name=tc["function"]["name"], arguments=tc["function"].get("arguments") or "{}")
            for i, tc in enumerate(message.get("tool_calls") or [])
        ]
        usage = body.get("usage") or {}
        details = usage.get("completion_tokens_details")
        prompt_details = usage.get("prompt_tokens_details")  # cached_tokens: the part of prompt_tokens read from the cache
        content = message.get("content") or ""
        reasoning = message_reasoning(message)
        if self._split and content:
            thought, content = split_think(content)
            if thought is not None:
                reasoning = f"{reasoning}\n\n{thought}" if reasoning else thought
        return ModelReply(
            content=content,
            tool_calls=tool_calls,
            finish_reason=choice.get("finish_reason"),
            usage=Usage(
                int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0),
                details.get("reasoning_tokens") if isinstance(details, dict) else None,
                prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None,
            ),
            reasoning=reasoning,
        )
