"""The built-in mock model: an aiohttp server speaking OpenAI Chat Completions (``/v1/chat/completions``)
and Anthropic Messages (``/v1/messages``) on loopback, with both providers' batch APIs (``batches.py``).

It answers with the environments' policies (``oracle``, ``weak``, ``judge``...) and can misbehave on
purpose: latency, 429 with Retry-After, 5xx, timeouts, connection resets, malformed or truncated JSON,
replies with a bad shape or bad values (``bad_replies.py``), context-length errors, and an enforced
requests-per-window limit (answering 429 beyond it), reported in OpenAI's or Anthropic's rate-limit headers or
hidden, or a limited serving capacity with a queue (``rate_limits.py``).

Which policy answers: the request's model name when it is ``mock-<policy>`` or ``<policy>``, else the
server's default policy; judge calls (``X-AgentBench-Caller: judge``) use the environment's ``judge``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from ..config import envs_missing_data
from ..envs import env_class, make_env
from ..envs.base import Environment, PolicyReply, Task, run_policy
from ..errors import AgentBenchError
from ..models.task_headers import CALLER_HEADER, EPISODE_HEADER, TASK_HEADER
from ..types import Message
from .policy import env_policies
from .bad_replies import BAD_REPLIES, bad_reply
from .batches import MockBatches
from .caching import CacheUsage, PromptCache
from .rate_limits import RequestBucket, Saturation
from ..models.streaming import stream_of
from .providers import (FATAL_FAULTS, THINKING_TEXT, anthropic_thinking_error, openai_parameter_error, overflow_body,
                        overflow_response, signature)  # fmt: skip

FAULT_KINDS = ("429", "500", "502", "503", "529", "timeout", "reset", "malformed", "truncated", "context", *FATAL_FAULTS, *BAD_REPLIES)


@dataclass
class MockOptions:
    policy: str = "oracle"
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0  # uniform extra latency in [0, jitter]
    fault_rate: float = 0.0  # share of requests that get a random fault from ``fault_kinds``
    fault_kinds: tuple[str, ...] = ("429", "500", "503", "timeout", "reset", "malformed")
    fault_script: list[str] = field(default_factory=list)  # faults for the first requests, in order ("ok" = none)
    retry_after_s: float = 1.0
    timeout_sleep_s: float = 30.0  # how long a "timeout" fault stalls (longer than the client's timeout)
    rpm_limit: int | None = None  # enforce this many requests per window (429 beyond)
    rpm_window_s: float = 60.0
    # rate_limits.py: with rate_headers set, rpm_limit is a token bucket whose state every answer reports in this
    # provider's headers (openai | anthropic), or not at all (none)
    rate_headers: str | None = None
    capacity: int | None = None  # serve this many requests at once, queue more (latency climbs), refuse beyond
    queue_limit: int = 0  # how many may wait for a serving slot before a 429
    seed: int = 0
    data_dir: Path | None = None  # for official tasks (X-AgentBench-Task source=official)
    # environment options (as the run's --env-option / --webshop-data ...), e.g. where an environment's own
    # official download is; the server builds each environment with the same options as the run
    env_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    api_key: str | None = None  # if set, requests must carry it (Bearer or x-api-key), else 401
    # context overflows answered in this server's shape (providers.OVERFLOW_SHAPES); "" = the endpoint's own
    overflow_shape: str = ""
    # act as a reasoning model (providers.REASONING_MODES): openai | reasoning_content | reasoning | think | anthropic
    reasoning: str | None = None
    reasoning_tokens: int = 64  # thinking tokens per reply; a max_(completion_)tokens at or below it is used up thinking
    # prompt caching as the providers report it (caching.PromptCache): prefixes of at least this many tokens
    cache_min_tokens: int = 1024
    # batch APIs (batches.MockBatches): processing delay, per-request errors, expiry half-way, queue limit
    batch_delay_s: float = 0.05
    batch_error_script: list[str] = field(default_factory=list)  # first batch requests: "error" (a 500 result) or "ok"
    batch_expire_batches: int = 0  # this many first batches expire after half of their requests ran
    batch_max_in_progress: int | None = None  # batches in progress at once; more are refused (the providers' queue limit)


class MockModelServer:
    def __init__(self, options: MockOptions | None = None) -> None:
        self.options = options or MockOptions()
        self._rng = random.Random(self.options.seed)
        self._script = deque(self.options.fault_script)
        self._arrivals: deque[float] = deque()
        self._envs: dict[tuple[str, str], Environment] = {}
        self._tasks: dict[tuple[str, str, str], dict[str, Task]] = {}
        self.stats: Counter[str] = Counter()
        self.max_requests_in_window = 0
        opts = self.options
        self._bucket = RequestBucket(opts.rpm_limit, opts.rate_headers, opts.rpm_window_s) if opts.rate_headers and opts.rpm_limit else None
        self._saturation = Saturation(opts.capacity, opts.queue_limit) if opts.capacity else None
        self.cache = PromptCache(self.options.cache_min_tokens)
        self.batches = MockBatches(self.answer, delay_s=opts.batch_delay_s, expire_batches=opts.batch_expire_batches,
                                   error_script=opts.batch_error_script, max_in_progress=opts.batch_max_in_progress)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.host = "127.0.0.1"

    # -- lifecycle ---------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/stats", self._stats)
        self.batches.routes(app)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Start serving; returns the base URL (``http://host:port/v1``)."""
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=8192, reuse_address=True)
        await site.start()
        sockets = site._server.sockets  # type: ignore[union-attr]
        self.host, self.port = host, sockets[0].getsockname()[1]
        return self.base_url

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def stop(self) -> None:
        await self.batches.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- tasks and policies ------------------------------------------------------------------
    def _task(self, header: str) -> Task | None:
        try:
            env_name, split, source, task_id = header.split("/", 3)
        except ValueError:
            return None
        tasks = self._task_set(env_name, split, source)
        task = tasks.get(task_id)
        if task is None:  # e.g. a suite enlarged by environment options the server does not know
            try:
                task = self._env(env_name, source).get_task(split, task_id)
            except AgentBenchError:
                return None
            tasks[task_id] = task
        return task

    def _task_set(self, env_name: str, split: str, source: str) -> dict[str, Task]:
        key = (env_name, split, source)
        if key not in self._tasks:
            self._tasks[key] = {t.task_id: t for t in self._env(env_name, source).tasks(split)}
        return self._tasks[key]

    def preload(self, split: str, envs: Iterable[str]) -> dict[str, str]:
        """Load ``split`` of each of ``envs`` now (the source a run of every environment with the same data flags
        plays: official where the data is there, else built-in), so the first requests do not wait while a task set
        loads; env -> what was loaded."""
        names, data_dir, env_options = list(envs), self.options.data_dir, self.options.env_options
        # as `agentbench run --env all`: those that miss something under --data-dir play without it
        skipped = envs_missing_data(names, data_dir, env_options, split, "text") if data_dir is not None else {}
        loaded = {}
        for name in names:
            options = env_options.get(name, {})
            played = env_class(name).plays_official_tasks(None if name in skipped else data_dir, options)
            source = "official" if played else "builtin"
            try:
                loaded[name] = f"{source}, {len(self._task_set(name, split, source))} tasks"
            except AgentBenchError as exc:  # e.g. no such split: its requests load it when they come
                loaded[name] = f"not loaded ({exc})"
        return loaded

    def _env(self, name: str, source: str) -> Environment:
        key = (name, source)
        if key not in self._envs:
            data_dir = self.options.data_dir if source == "official" else None
            options = self.options.env_options.get(name, {}) if source in ("official", "custom") else {}
            if source == "custom" and not options.get("tasks_file"):
                raise AgentBenchError(f"the mock server needs {name}'s task file of your own: serve-mock --tasks {name}=PATH")
            if source == "official" and not env_class(name).plays_official_tasks(data_dir, options):
                raise AgentBenchError(f"the mock server needs the data of {name}'s official tasks (--data-dir or the environment's own data flag)")
            self._envs[key] = make_env(name, data_dir=data_dir, options=options)
        return self._envs[key]

    def _policy_reply(self, headers: Mapping[str, str], model: str, messages: list[Message], tools: Any) -> PolicyReply:
        header = headers.get(TASK_HEADER)
        task = self._task(header) if header else None
        if task is None:
            return PolicyReply(content="I am the mock model; send X-AgentBench-Task to get a task policy.")
        caller = headers.get(CALLER_HEADER, "agent")
        policies = env_policies(task.env)
        name = "judge" if caller == "judge" else model.removeprefix("mock-")
        if name not in policies:
            name = self.options.policy
        if name not in policies:
            return PolicyReply(content=f"The mock model has no policy {name!r} for {task.env}.")
        episode = headers.get(EPISODE_HEADER, header or "")
        return run_policy(policies[name], task, messages, tools, episode)

    # -- faults ------------------------------------------------------------------------------
    def _next_fault(self) -> str | None:
        if self._script:
            fault = self._script.popleft()
            return None if fault == "ok" else fault
        if self.options.fault_rate and self._rng.random() < self.options.fault_rate:
            return self._rng.choice(self.options.fault_kinds)
        return None

    def _over_rate_limit(self) -> float | None:
        """Seconds until a slot frees up if this request exceeds the enforced limit, else None."""
        limit = self.options.rpm_limit
        if not limit:
            return None
        now = time.monotonic()
        window = self.options.rpm_window_s
        while self._arrivals and now - self._arrivals[0] >= window:
            self._arrivals.popleft()
        if len(self._arrivals) >= limit:
            return self._arrivals[0] + window - now
        self._arrivals.append(now)
        self.max_requests_in_window = max(self.max_requests_in_window, len(self._arrivals))
        return None

    async def _common(self, request: web.Request, anthropic: bool) -> web.StreamResponse:
        self.stats["requests"] += 1
        if self.options.api_key is not None:
            given = request.headers.get("x-api-key") or request.headers.get("Authorization", "").removeprefix("Bearer ")
            if given != self.options.api_key:
                self.stats["401"] += 1
                return web.json_response({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}, status=401)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            self.stats["bad_request"] += 1
            return web.json_response({"error": {"message": "body is not JSON", "type": "invalid_request_error"}}, status=400)
        limit_headers: dict[str, str] = {}
        if self._bucket is not None:
            allowed, limit_headers = self._bucket.admit(time.monotonic(), time.time())
            if not allowed:
                self.stats["429_rate_limit"] += 1
                return web.json_response(_rate_limit_error(anthropic), status=429, headers=limit_headers)
        wait = None if self._bucket is not None else self._over_rate_limit()
        if wait is not None:
            self.stats["429_rate_limit"] += 1
            return web.json_response(
                {"error": {"message": "rate limit exceeded", "type": "rate_limit_error"}},
                status=429,
                headers={"Retry-After": f"{max(wait, 0.001):.3f}"},
            )
        refusal = self._reasoning_rules(body, anthropic)
        if refusal is not None:
            self.stats["reasoning_rule"] += 1
            return refusal
        if self._saturation is None:
            response = await self._serve(request, body, anthropic)
        else:
            queued_at = time.monotonic()
            began: list[float] = []

            async def work() -> web.StreamResponse:
                began.append(time.monotonic())
                return await self._serve(request, body, anthropic)

            served = await self._saturation.serve(work)
            if served is None:
                self.stats["429_overloaded"] += 1
                return web.json_response({"error": {"message": "Model is overloaded", "type": "overloaded"}}, status=429)
            response = served
            if not response.prepared:  # as text-generation-inference's router says it (models/server_timing.py): whole ms
                response.headers["x-queue-time"] = str(int((began[0] - queued_at) * 1000))
        if limit_headers and not response.prepared:
            response.headers.update(limit_headers)
        return response

    async def _serve(self, request: web.Request, body: Any, anthropic: bool) -> web.StreamResponse:
        fault = self._next_fault()
        delay = self.options.latency_ms + self._rng.random() * self.options.latency_jitter_ms
        if delay:
            await asyncio.sleep(delay / 1000)
        if fault:
            self.stats[f"fault_{fault}"] += 1
            if fault not in BAD_REPLIES:
                return await self._fault(request, fault, anthropic)
        status, out = self.answer(body, request.headers, anthropic)
        if fault and status == 200:  # the real answer, with a bad shape or value
            return web.Response(body=bad_reply(fault, out, anthropic), content_type="application/json")
        if anthropic and status == 200 and body.get("stream") is True:  # Anthropic's streamed reply: server-sent events
            self.stats["streamed"] += 1
            return web.Response(body=stream_of(out), content_type="text/event-stream")
        return web.json_response(out, status=status)

    def answer(self, body: dict[str, Any], headers: Mapping[str, str], anthropic: bool) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of the reply to one request that got past the faults (the direct endpoints
        and the batch APIs answer the same way)."""
        messages, tools = _messages(body, anthropic)
        if self.options.reasoning and any(m.get("role") == "assistant" and THINKING_TEXT in (m.get("content") or "") for m in messages):
            self.stats["thinking_in_history"] += 1  # a client sent the thinking back as part of the reply
        reply = self._policy_reply(headers, str(body.get("model", "")), messages, tools)
        if reply.fail == "context_length":
            self.stats["context_length"] += 1
            return overflow_body(self.options.overflow_shape or ("anthropic" if anthropic else "openai"))
        self.stats["ok"] += 1
        usage_in = sum(len(m.get("content") or "") for m in messages) // 4 + 1
        usage_out = len(reply.content) // 4 + 1
        out = _reply_body(body, reply, usage_in, usage_out, anthropic)
        cache = self.cache.anthropic(body, usage_in) if anthropic else self.cache.openai(body, usage_in)
        _add_cache_usage(out, cache, anthropic)
        self.stats["cache_read_tokens"] += cache.read
        self.stats["cache_write_tokens"] += cache.written
        if self.options.reasoning:
            _add_reasoning(out, body, self.options.reasoning, self.options.reasoning_tokens, anthropic)
        return 200, out

    def _reasoning_rules(self, body: dict[str, Any], anthropic: bool) -> web.Response | None:
        mode = self.options.reasoning
        if mode == "openai" and not anthropic:
            return openai_parameter_error(body)
        if mode == "anthropic" and anthropic:
            return anthropic_thinking_error(body)
        return None

    def _context_error(self, anthropic: bool) -> web.Response:
        return overflow_response(self.options.overflow_shape or ("anthropic" if anthropic else "openai"))

    async def _fault(self, request: web.Request, fault: str, anthropic: bool) -> web.StreamResponse:
        if fault in ("429", "500", "502", "503", "529"):
            headers = {"Retry-After": str(self.options.retry_after_s)} if fault == "429" else {}
            return web.json_response({"error": {"message": f"injected {fault}", "type": "server_error"}}, status=int(fault), headers=headers)
        if fault == "timeout":
            await asyncio.sleep(self.options.timeout_sleep_s)
            return web.json_response({"error": {"message": "too late"}}, status=504)
        if fault == "reset":
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        if fault == "malformed":
            return web.Response(status=200, text="<html>upstream proxy error</html>", content_type="application/json")
        if fault == "truncated":
            return web.Response(status=200, text='{"id": "x", "choices": [{"message": {"content": "hal', content_type="application/json")
        if fault == "context":
            return self._context_error(anthropic)
        if fault in FATAL_FAULTS:
            status, body = FATAL_FAULTS[fault]
            return web.json_response(body, status=status)
        raise ValueError(f"unknown fault {fault!r}")

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._common(request, anthropic=False)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._common(request, anthropic=True)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        names = ["mock-oracle", "mock-weak"]
        return web.json_response({"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

    async def _stats(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({**self.stats, "max_requests_in_window": self.max_requests_in_window})


def _messages(body: dict[str, Any], anthropic: bool) -> tuple[list[Message], Any]:
    """The request's history in OpenAI shape (policies read only roles and text)."""
    tools = body.get("tools")
    if not anthropic:
        return list(body.get("messages") or []), tools
    out: list[Message] = []
    if body.get("system"):
        out.append({"role": "system", "content": body["system"]})
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            out.append({"role": msg["role"], "content": content})
            continue
        text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
        results = [b for b in content if b.get("type") == "tool_result"]
        if msg["role"] == "user" and results:
            for b in results:
                out.append({"role": "tool", "tool_call_id": b.get("tool_use_id", ""), "content": str(b.get("content", ""))})
            if text:
                out.append({"role": "user", "content": text})
        else:
            item: Message = {"role": msg["role"], "content": text}
            uses = [b for b in content if b.get("type") == "tool_use"]
            if uses:
                item["tool_calls"] = [
                    {"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}))}}
                    for b in uses
                ]
            out.append(item)
    if tools:
        tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""), "parameters": t.get("input_schema", {})}} for t in tools]
    return out, tools


def _add_cache_usage(out: dict[str, Any], cache: CacheUsage, anthropic: bool) -> None:
    """The usage fields of prompt caching, in each provider's shape (tests/fixtures/providers/usage_*.json)."""
    usage = out["usage"]
    if anthropic:
        usage["input_tokens"] = cache.total - cache.read - cache.written
        usage["cache_creation_input_tokens"] = cache.written
        usage["cache_read_input_tokens"] = cache.read
    else:
        usage["prompt_tokens_details"] = {"cached_tokens": cache.read, "audio_tokens": 0}


def _add_reasoning(out: dict[str, Any], request: dict[str, Any], mode: str, tokens: int, anthropic: bool) -> None:
    """Make a reply look like a reasoning model's: thinking in the mode's place, its tokens counted; a reply
    whose output limit is at or below the thinking's length is cut while thinking (empty reply)."""
    if anthropic:
        if mode != "anthropic" or not isinstance(request.get("thinking"), dict) or request["thinking"].get("type") != "enabled":
            return
        out["content"].insert(0, {"type": "thinking", "thinking": THINKING_TEXT, "signature": signature(THINKING_TEXT)})
        out["usage"]["output_tokens"] += tokens
        return
    choice, usage = out["choices"][0], out["usage"]
    message = choice["message"]
    limit = request.get("max_completion_tokens") or request.get("max_tokens")
    exhausted = limit is not None and limit <= tokens
    if exhausted:
        message["content"], choice["finish_reason"] = "", "length"
        message.pop("tool_calls", None)
        usage["completion_tokens"] = limit
    else:
        usage["completion_tokens"] += tokens
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if mode == "openai":
        usage["completion_tokens_details"] = {"reasoning_tokens": limit if exhausted else tokens}
    elif mode in ("reasoning_content", "reasoning"):
        message[mode] = THINKING_TEXT
    elif mode == "think":
        message["content"] = f"<think>\n{THINKING_TEXT}" + ("" if exhausted else f"\n</think>\n\n{message['content']}")


def _rate_limit_error(anthropic: bool) -> dict[str, Any]:
    # the providers' own error shapes for a rate limit (Anthropic: type error / rate_limit_error; OpenAI: rate_limit_exceeded)
    if anthropic:
        return {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}}
    return {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}


def _reply_body(request_body: dict[str, Any], reply: PolicyReply, usage_in: int, usage_out: int, anthropic: bool) -> dict[str, Any]:
    model = request_body.get("model", "mock")
    if anthropic:
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
        for tc in reply.tool_calls:
            content.append({"type": "tool_use", "id": tc.id, "name": tc.name, "input": json.loads(tc.arguments or "{}")})
        return {
            "id": "msg_" + uuid.uuid4().hex[:12], "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
        }  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [tc.to_openai() for tc in reply.tool_calls]
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {"prompt_tokens": usage_in, "completion_tokens": usage_out, "total_tokens": usage_in + usage_out},
    }  # fmt: skip
