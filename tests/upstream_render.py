"""Upstream's own rendering of a task's first request, for tests that compare the project's wire with it.

``load_upstream(path)`` executes a pulled AgentBench task file (``<data-dir>/upstream-prompts/...``) as a module, with
every module it imports that is not installed here (docker, pymysql, agentrl, AgentBench's own ``src.*``, ...)
replaced by a stub whose attributes are inert classes: the file's own code runs, nothing it would reach (a
container, a database, a SPARQL server) exists. ``first_request(coroutine_fn, ...)`` runs a task's sample code with a
``RecordingSession`` until its first ``session.action()``/``sync_action()``: the messages injected by then are what
upstream sends first (before v0.2's history filter, which the project applies the same way).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys
import types
import warnings
from pathlib import Path
from typing import Any


class _InertType(type):
    def __getattr__(cls, name: str) -> Any:  # SampleStatus.COMPLETED and the like: another inert value, the same each time
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (_Inert,), {})
        setattr(cls, name, value)
        return value


class _Inert(metaclass=_InertType):
    """Any stubbed class: takes any arguments, keeps keyword arguments as attributes; any attribute is another stub."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    def __class_getitem__(cls, item: Any) -> type:
        return cls


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (_Inert,), {})
        setattr(self, name, value)
        return value


def _missing(module: str) -> bool:
    top = module.split(".")[0]
    if top == "src":  # AgentBench's own package (a "src" folder on sys.path here is not it)
        return True
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):
        return True


def load_upstream(path: Path, name: str = "upstream_task", preset: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute the upstream file at ``path`` as module ``name`` with stubs for what is not installed; ``preset``: names
    the module's own code finds defined when it runs (FC's kg api.py reads its vocabulary with ``open`` at import)."""
    source = path.read_text(encoding="utf-8")
    saved = dict(sys.modules)
    with warnings.catch_warnings():  # upstream's regexes with invalid escapes: its warnings, not ours
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        return _load(source, path, name, saved, preset or {})


def _load(source: str, path: Path, name: str, saved: dict[str, Any], preset: dict[str, Any]) -> types.ModuleType:
    import ast

    try:
        for node in ast.walk(ast.parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            for full in names:
                if not _missing(full):
                    continue
                parts = full.split(".")
                for i in range(1, len(parts) + 1):
                    sub = ".".join(parts[:i])
                    if sub not in sys.modules or not isinstance(sys.modules[sub], _StubModule):
                        sys.modules[sub] = _StubModule(sub)
                    if i > 1:
                        setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], sys.modules[sub])
        package = f"_{name}_package"  # the file's own relative imports (from .environment import ...) are stubs too
        sys.modules[package] = _StubModule(package)
        sys.modules[package].__path__ = []  # type: ignore[attr-defined]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module:
                sys.modules[f"{package}.{node.module}"] = _StubModule(f"{package}.{node.module}")
        module = types.ModuleType(name)
        module.__file__ = str(path)
        module.__package__ = package
        module.__dict__.update(preset)
        exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - upstream's file, run to read its rendering
        return module
    finally:
        for key in set(sys.modules) - set(saved):
            del sys.modules[key]


class FirstRequest(Exception):
    """Raised at the first request: carries the messages sent."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        super().__init__("first request")
        self.messages = messages


class _Item:
    """A history entry as v0.2's ChatHistoryItem: ``role`` and ``content`` attributes (upstream appends to content)."""

    def __init__(self, role: str, content: Any) -> None:
        self.role, self.content = role, content


class RecordingSession:
    """A stand-in for upstream's Session that records what is injected and stops at the first model call."""

    def __init__(self) -> None:
        self.history: list[_Item] = []

    def inject(self, item: Any) -> None:
        if isinstance(item, list):
            for one in item:
                self.inject(one)
        elif isinstance(item, dict):
            if "role" in item:
                self.history.append(_Item(item["role"], item.get("content")))
        elif hasattr(item, "role"):
            self.history.append(_Item(item.role, getattr(item, "content", None)))
        # anything else (FC's RewardHistoryItem) is not a message

    def _stop(self) -> None:
        roles = {"agent": "assistant"}
        raise FirstRequest([{"role": roles.get(m.role, m.role), "content": m.content} for m in self.history])

    async def action(self, *injection: Any) -> Any:
        self.inject(list(injection))
        self._stop()

    def sync_action(self, *injection: Any) -> Any:
        self.inject(list(injection))
        self._stop()


def first_request(function: Any, *args: Any) -> list[dict[str, Any]]:
    """Run upstream's ``function(*args)`` (sync or async) until its first model call; the messages it sends."""
    try:
        result = function(*args)
        if inspect.isawaitable(result):
            asyncio.run(result)
    except FirstRequest as sent:
        return sent.messages
    raise AssertionError(f"{function.__qualname__} returned without calling the model")


class _Reply:
    """What an AgentRL session's ``action()`` hands FC's task code: ``messages`` (the agent's message dicts)."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.messages = [message]
        self.content = message.get("content")
        self.status = "completed"


def _message(item: Any) -> dict[str, Any] | None:
    """An injected message as a dict (role, content, tool_call_id and tool_calls where present); None for what is not
    a message (FC's RewardHistoryItem)."""
    get = item.get if isinstance(item, dict) else lambda key, default=None: getattr(item, key, default)
    role = get("role")
    if role is None:
        return None
    out = {"role": {"agent": "assistant"}.get(role, role), "content": get("content")}
    for key in ("tool_call_id", "tool_calls"):
        if get(key) is not None:
            out[key] = get(key)
    return out


class ScriptedSession:
    """A stand-in for AgentRL's Session (AgentBench FC): each ``action()``/``sync_action()`` records the conversation
    so far as one request and answers with the next scripted assistant message (which joins the conversation, as
    AgentRL's session appends the agent's reply); when the script is used up the sample is stopped."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.id = 0
        self.history: list[dict[str, Any]] = []
        self.requests: list[list[dict[str, Any]]] = []
        self._replies = list(replies)

    def inject(self, item: Any) -> None:
        if isinstance(item, list):
            for one in item:
                self.inject(one)
            return
        message = _message(item)
        if message is not None:
            self.history.append(message)

    def _next(self) -> _Reply:
        self.requests.append([dict(m) for m in self.history])
        if not self._replies:
            raise FirstRequest(self.history)
        reply = self._replies.pop(0)
        self.history.append(reply)
        return _Reply(reply)

    async def action(self, *injection: Any) -> Any:
        self.inject(list(injection))
        return self._next()

    def sync_action(self, *injection: Any) -> Any:
        self.inject(list(injection))
        return self._next()


def fc_requests(function: Any, session: ScriptedSession, *args: Any) -> tuple[list[list[dict[str, Any]]], Any]:
    """Run FC's sample code ``function(*args)`` (sync or async) with ``session`` until it returns or the script is used
    up: every request it made (the conversation at each ``action()``) and what it returned (None when stopped)."""
    try:
        result = function(*args)
        if inspect.isawaitable(result):
            result = asyncio.run(result)
    except FirstRequest:
        result = None
    return session.requests, result
