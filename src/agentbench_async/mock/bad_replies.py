"""Replies with a bad shape or bad values, for ``serve-mock --faults``: a 200 answer that a server bug, a
gateway or a cut stream turned into something a client must not trust blindly.

Two kinds, named in ``REPAIRABLE`` and ``MALFORMED``:

- repairable: the policy's real answer with one bad value the client replaces or drops, noting it on the call
  (``surrogate``: a lone surrogate where a multi-byte character was cut; ``usage_huge``: a count of 10**30;
  ``usage_inf``: a count written ``1e400``, which JSON parsers read as infinity);
- malformed: a reply the client cannot read (``body_null``, ``body_list``, ``message_null``, ``content_list``,
  ``content_dict``, ``usage_list``, ``usage_number``: usage itself ``1e400``, ``finish_reason_int``: 123,
  ``tool_name_null``), a model fault the client retries and then reports as ``model_error``.

Each takes the reply body the mock would have sent (OpenAI or Anthropic shape) and returns the bytes sent.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

_INF = "__mock_1e400__"  # replaced by the bare number 1e400 in the serialised body (json.dumps writes Infinity)
CUT_CHARACTER = "\ud83d"  # the first half of an emoji's surrogate pair, as a server that cut it sends it


def _dump(body: Any) -> bytes:
    return json.dumps(body).replace(f'"{_INF}"', "1e400").encode()


def _message(out: dict[str, Any], anthropic: bool) -> dict[str, Any]:
    return out if anthropic else out["choices"][0]["message"]


def _surrogate(out: dict[str, Any], anthropic: bool) -> Any:
    if anthropic:
        out["content"].append({"type": "text", "text": "\n" + CUT_CHARACTER})
    else:
        out["choices"][0]["message"]["content"] = (out["choices"][0]["message"].get("content") or "") + "\n" + CUT_CHARACTER
    return out


def _usage_huge(out: dict[str, Any], anthropic: bool) -> Any:
    out["usage"]["input_tokens" if anthropic else "prompt_tokens"] = 10**30
    return out


def _usage_inf(out: dict[str, Any], anthropic: bool) -> Any:
    out["usage"]["output_tokens" if anthropic else "completion_tokens"] = _INF
    return out


def _message_null(out: dict[str, Any], anthropic: bool) -> Any:
    if anthropic:
        out["content"] = None
    else:
        out["choices"][0]["message"] = None
    return out


def _content_list(out: dict[str, Any], anthropic: bool) -> Any:
    if anthropic:
        out["content"] = [block.get("text", "") for block in out["content"]]  # strings, not blocks
    else:
        out["choices"][0]["message"]["content"] = [1, 2]
    return out


def _content_dict(out: dict[str, Any], anthropic: bool) -> Any:
    if anthropic:
        out["content"] = {"type": "text", "text": "".join(b.get("text", "") for b in out["content"])}
    else:
        message = out["choices"][0]["message"]
        message["content"] = {"text": message.get("content")}
    return out


def _usage_list(out: dict[str, Any], anthropic: bool) -> Any:
    out["usage"] = list(out["usage"].values())
    return out


def _usage_number(out: dict[str, Any], anthropic: bool) -> Any:
    out["usage"] = _INF
    return out


def _finish_reason_int(out: dict[str, Any], anthropic: bool) -> Any:
    if anthropic:
        out["stop_reason"] = 123
    else:
        out["choices"][0]["finish_reason"] = 123
    return out


def _tool_name_null(out: dict[str, Any], anthropic: bool) -> Any:
    if anthropic:
        out["content"].append({"type": "tool_use", "id": "toolu_mock", "name": None, "input": {}})
    else:
        out["choices"][0]["message"]["tool_calls"] = [{"id": "call_mock", "type": "function", "function": {"name": None, "arguments": "{}"}}]
    return out


REPAIRABLE: dict[str, Callable[[dict[str, Any], bool], Any]] = {
    "surrogate": _surrogate, "usage_huge": _usage_huge, "usage_inf": _usage_inf,
}  # fmt: skip
MALFORMED: dict[str, Callable[[dict[str, Any], bool], Any]] = {
    "body_null": lambda out, anthropic: None, "body_list": lambda out, anthropic: [out],
    "message_null": _message_null, "content_list": _content_list, "content_dict": _content_dict,
    "usage_list": _usage_list, "usage_number": _usage_number, "finish_reason_int": _finish_reason_int,
    "tool_name_null": _tool_name_null,
}  # fmt: skip
BAD_REPLIES = {**REPAIRABLE, **MALFORMED}


def bad_reply(kind: str, out: dict[str, Any], anthropic: bool) -> bytes:
    """The body of a ``kind`` reply made from the answer ``out`` (not changed)."""
    return _dump(BAD_REPLIES[kind](copy.deepcopy(out), anthropic))
