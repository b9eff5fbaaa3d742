"""OpenAI-compatible Chat Completions (OpenAI, vLLM, TGI, SGLang, llama.cpp, Together, OpenRouter, DeepSeek,
the mock)."""

from __future__ import annotations

from typing import Any

import aiohttp

from ..limits import ModelLimits
from ..types import Message, ModelReply, ToolCall, Usage
from .base import ModelClient, ModelConfig
from .families import azure_deployment_root, join_url
from .network import Route
from .reasoning import message_reasoning, split_think
from .replies import ReplyReader


class OpenAIClient(ModelClient):
    default_base_url = "https://api.openai.com/v1"

    def __init__(self, config: ModelConfig, session: aiohttp.ClientSession, limits: ModelLimits, target: Route | None = None) -> None:
        super().__init__(config, session, limits, target)
        self.endpoint = join_url(self.base_url, "/chat/completions")  # a base URL's query stays after the path
        # the fixed part of every request body, built once (and changed when the server refuses a field left to the engine)
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
            headers.update(self._auth(self._api_key))
        return self.endpoint, headers, body

    @staticmethod
    def _auth(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def _adapt(self, cause: tuple[str, str | None], sent: dict[str, Any]) -> str | None:
        """``unsupported_parameter`` for the token field: the other one; ``unsupported_value``/``unsupported_parameter``
        for the temperature: none. Only for a field the config left to the engine and extra_body does not set."""
        kind, param = cause
        if kind not in ("unsupported_parameter", "unsupported_value") or param not in sent or param in self.config.extra_body:
            return None
        fields = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}
        if param in fields and kind == "unsupported_parameter":
            other = fields[param]
            what = f"{other} instead of {param}"
            if other not in self._fixed:  # (else another call switched it meanwhile: just send again)
                if "max_tokens_param" not in self.config.left_to_engine:
                    return None
                self._fixed[other] = self._fixed.pop(param)
                self._record_adaptation(what)
            return what
        if param == "temperature":
            what = "no temperature (the server takes only its default)"
            if "temperature" in self._fixed:
                if "temperature" not in self.config.left_to_engine:
                    return None
                del self._fixed["temperature"]
                self._record_adaptation(what)
            return what
        return None

    def _parse(self, body: Any, read: ReplyReader) -> ModelReply:
        body = read.mapping(body, "the body")
        choices = read.items(body.get("choices"), "choices")
        if not choices:
            raise read.malformed("no choices")
        choice = read.mapping(choices[0], "choices[0]")
        message = read.mapping(choice.get("message"), "choices[0].message")
        tool_calls = [self._tool_call(read, tc, i) for i, tc in enumerate(read.items(message.get("tool_calls"), "message.tool_calls"))]
        usage = read.optional_mapping(body.get("usage"), "usage")
        details = usage.get("completion_tokens_details")
        prompt_details = usage.get("prompt_tokens_details")  # cached_tokens: the part of prompt_tokens read from the cache
        content = _content(read, message.get("content"))
        reasoning = message_reasoning(message)
        if reasoning is not None:
            reasoning = read.clean(reasoning, "message.reasoning")
        think_removed = False
        if self._split and content:
            thought, content = split_think(content)
            if thought is not None:
                reasoning = f"{reasoning}\n\n{thought}" if reasoning else thought
                think_removed = True
        return ModelReply(
            content=content,
            tool_calls=tool_calls,
            finish_reason=read.word(choice.get("finish_reason"), "choices[0].finish_reason"),
            usage=Usage(
                read.count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
                read.count(usage.get("completion_tokens"), "usage.completion_tokens"),
                read.count(details.get("reasoning_tokens"), "usage.completion_tokens_details.reasoning_tokens", missing=None)
                if isinstance(details, dict) else None,
                read.count(prompt_details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens", missing=None)
                if isinstance(prompt_details, dict) else None,
            ),
            reasoning=reasoning,
            think_removed=think_removed,
        )

    @staticmethod
    def _tool_call(read: ReplyReader, raw: Any, i: int) -> ToolCall:
        where = f"message.tool_calls[{i}]"
        call = read.mapping(raw, where)
        function = read.mapping(call.get("function"), f"{where}.function")
        call_id = call.get("id")
        return ToolCall(
            id=read.name(call_id, f"{where}.id") if call_id not in (None, "") else f"call_{i}",
            name=read.name(function.get("name"), f"{where}.function.name"),
            arguments=read.text(function.get("arguments"), f"{where}.function.arguments") or "{}",
        )


class AzureOpenAIClient(OpenAIClient):
    """Azure OpenAI as the openai SDK's ``AzureOpenAI`` calls it: the deployment (the model id) in the path, the
    ``api-version`` query, the key in an ``api-key`` header."""

    def __init__(self, config: ModelConfig, session: aiohttp.ClientSession, limits: ModelLimits, target: Route | None = None) -> None:
        super().__init__(config, session, limits, target)
        root = azure_deployment_root(self.base_url, config.model_id)
        self.endpoint = join_url(root, "/chat/completions", {"api-version": config.api_version or ""})

    @staticmethod
    def _auth(key: str) -> dict[str, str]:
        return {"api-key": key}


def _content(read: ReplyReader, value: Any) -> str:
    """The message's text: a string, null, or a list of text parts (``{"type": "text", "text": ...}``, the
    content-part shape some gateways answer with) joined; anything else is malformed."""
    if not isinstance(value, list):
        return read.text(value, "message.content")
    parts = []
    for i, part in enumerate(value):
        part = read.mapping(part, f"message.content[{i}]")
        if part.get("type") != "text":
            raise read.malformed(f"message.content[{i}] is a {part.get('type')!r} part, expected text")
        parts.append(read.text(part.get("text"), f"message.content[{i}].text"))
    return "".join(parts)
