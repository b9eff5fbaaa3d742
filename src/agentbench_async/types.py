"""Small value types shared by the model clients, the episode loop and the environments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

Role = Literal["system", "user", "assistant", "tool"]


class Message(TypedDict, total=False):
    """One chat message in OpenAI shape (the Anthropic client converts it).

    ``tool_calls`` is set on assistant messages in tools mode; ``tool_call_id`` on ``tool`` messages.
    """

    role: Role
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    name: str
    # Anthropic extended thinking: the reply's thinking blocks, passed back unchanged with tool use
    thinking_blocks: list[dict[str, Any]]


@dataclass(frozen=True)
class ToolCall:
    """A native tool call made by the model (tools mode)."""

    id: str
    name: str
    arguments: str  # the raw JSON text the model produced; environments parse it themselves

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Usage:
    # None: the server sent a value that is not a count (the client dropped it and noted it on the call)
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    reasoning_tokens: int | None = None  # part of output_tokens spent thinking, when the server reports it
    # prompt caching, as the server reports it (both are part of input_tokens): tokens read from the cache
    # (OpenAI prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens) and written to it
    # (Anthropic cache_creation_input_tokens; OpenAI caches without saying so: None)
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


@dataclass
class ModelReply:
    """What the model answered for one turn."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    reasoning: str | None = None  # thinking separated from ``content`` (never parsed by an environment)
    thinking_blocks: list[dict[str, Any]] | None = None  # Anthropic's raw thinking blocks (with signatures)
    # a ``<think>`` block was cut out of ``content`` (reasoning_handling: separate) before an environment read it:
    # AgentBench v0.2 would have parsed it and kept it in the history (turns.think_removed, a named deviation)
    think_removed: bool = False

    def as_message(self) -> Message:
        """The reply as history: the thinking text is left out; Anthropic's thinking blocks ride along
        only with tool calls, where the API requires them back unchanged."""
        msg: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
            if self.thinking_blocks:
                msg["thinking_blocks"] = self.thinking_blocks
        return msg
