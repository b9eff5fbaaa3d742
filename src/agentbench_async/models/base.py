"""What every model client shares: configuration, the retry loop, call records, error classification.

A provider module only says how to build a request and how to read a reply; this module sends it over
the model's one ``aiohttp.ClientSession`` under the model's limits, retries with tenacity, and records
every HTTP attempt as a ``model_calls`` row.
"""

from __future__ import annotations

import abc
import asyncio
import email.utils
import json
import math
import os
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type

from ..bounds import DEFAULT_MAX_RESPONSE_BYTES, BodyTooLarge, read_body, shown, url_userinfo
from ..errors import ConfigError, ContextLimitError, ModelError, RetryableModelError
from ..limits import BACKPRESSURE_PAUSE_S, DEFAULT_MAX_CONNECTIONS, ModelLimits
from ..records import CallRow, now
from ..redaction import SECRETS, redact, register, register_url
from ..types import Message, ModelReply
from .network import Route, redact_url, request_kwargs, route
from .replies import MalformedReply, ReplyReader
from .server_errors import fatal_cause, overflow_server
from .server_timing import header_queue_ms, timings_queue_ms
from .wire import dumps_body, loads_body

# What openai-python 3.3.1 and anthropic-sdk-python 0.121.0 retry (``_base_client.py`` ``_should_retry``): 408, 409,
# 429 and every 5xx; a server's ``x-should-retry: true``/``false`` overrides the status.
RETRY_STATUSES = frozenset({408, 409, 429})


def retryable_status(status: int) -> bool:
    """Whether the SDKs retry a reply with this HTTP status (when the server does not say with ``x-should-retry``)."""
    return status in RETRY_STATUSES or status >= 500
REASONING_HANDLING = ("separate", "raw")
# Anthropic's thinking settings (anthropic-sdk-python 0.121.0, types/thinking_config_*_param.py)
THINKING_TYPES = ("enabled", "adaptive", "disabled")
THINKING_DISPLAYS = ("summarized", "omitted")
SDK_CONNECT_TIMEOUT_S = 5.0
# reasoning_effort as OpenAI's API reference documents it (ReasoningEffort: which models take which is the model's own rule)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_LENGTH_REASONS = frozenset({"length", "max_tokens"})


@dataclass
class ModelConfig:
    """One model of a run (a ``models:`` entry of the config file, or the ``--model`` flags)."""

    name: str  # the label stored in episodes.model; unique within a run
    provider: str = "openai"  # openai (any OpenAI-compatible server) | anthropic
    model: str | None = None  # the provider's model id; defaults to ``name``
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the environment variable holding the key
    temperature: float | None = 0.0
    max_tokens: int = 512
    extra_body: dict[str, Any] = field(default_factory=dict)  # request fields merged into every request body
    headers: dict[str, str] = field(default_factory=dict)  # extra HTTP headers sent with every request
    context_window: int | None = None  # tokens; prompts estimated larger end as context_limit_exceeded
    max_in_flight: int | str = 64  # or "auto": adapted to the server's latency and refusals (limits.py)
    # connections to its server at once (the SDKs' pool: 1,000); a request beyond waits for one, and fewer are used while
    # the server refuses connections (limits.py)
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    rpm: int | str | None = None  # None/"auto": the limit the server reports in its headers, if any
    tpm: int | str | None = None
    max_retries: int = 5
    # requests refused the same permanent way this many times in a row stop the model (its unplayed episodes wait for a
    # resume after the fix); 0: never
    max_same_failures: int = 5
    timeout: float = 600.0  # seconds for one HTTP attempt (the SDKs' 10 minutes; connecting: at most 5 s)
    # the largest response body read (decompressed); a larger one is this call's model_error, read no further
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    task_header: bool = False  # send X-AgentBench-Task (only the built-in mock model uses it)
    price_in: float | None = None  # USD per 1M input tokens (reports)
    price_out: float | None = None  # USD per 1M output tokens (reports)
    price_cached_in: float | None = None  # USD per 1M input tokens read from the prompt cache (None: price_in)
    price_cache_write: float | None = None  # USD per 1M input tokens written to the cache (None: price_in)
    batch_discount: float = 0.5  # share of the price a batch request saves (OpenAI and Anthropic: 50%)
    max_cost: float | None = None  # USD: no new call of this model once its spend in the run reaches it (spend.py)
    max_total_tokens: int | None = None  # input + output tokens: the same, counted in tokens
    rate_window_s: float = 60.0  # the window of rpm/tpm (60 = per minute)
    retry_backoff_s: float = 0.5  # exponential backoff with full jitter: random in [0, backoff * 2^n]
    retry_backoff_max_s: float = 30.0  # the longest backoff between two attempts
    retry_after_max_s: float = 120.0  # the longest pause a server's Retry-After gets (it may ask for a day)
    # OpenAI-compatible: the request field carrying max_tokens; None = max_completion_tokens for OpenAI's
    # own API (api.openai.com, *.openai.azure.com), max_tokens for every other server
    max_tokens_param: str | None = None
    reasoning_effort: str | None = None  # OpenAI reasoning models: none | minimal | low | medium | high | xhigh
    thinking: dict[str, Any] | None = None  # Anthropic extended thinking: {type: enabled, budget_tokens: N} | {type: adaptive}
    anthropic_version: str = "2023-06-01"  # Anthropic: the anthropic-version header (what anthropic-sdk-python 0.121.0 sends)
    api_version: str | None = None  # provider azure: the api-version query (default $OPENAI_API_VERSION)
    reasoning_handling: str = "separate"  # separate: thinking kept out of the reply | raw: AgentBench's behaviour
    proxy: str | None = None  # http:// proxy for this model (overrides HTTP(S)_PROXY/NO_PROXY)
    ca_bundle: str | None = None  # PEM file of extra CA certificates (added to the system's)
    # Anthropic: cache_control breakpoints on the stable prefix of each request (OpenAI-compatible servers
    # cache prefixes without being asked; the engine keeps those byte-identical across turns)
    prompt_caching: bool = True
    # provider batch API (OpenAI Batch API, Anthropic Message Batches): None/false = direct calls; a number =
    # batch size; true = the default size; or a mapping of batches.BatchSettings fields
    batch: Any = None
    # Not a config field: which of ADAPTABLE the config left to the engine (set when it is read). A server's refusal
    # of such a field is adapted to once (families.py); a field the config sets always wins.
    left_to_engine: frozenset[str] = field(default=frozenset(), repr=False)

    @property
    def model_id(self) -> str:
        return self.model or self.name

    @property
    def max_tokens_field(self) -> str:
        if self.max_tokens_param:
            return self.max_tokens_param
        if self.provider == "azure":
            return "max_completion_tokens"
        if self.provider != "openai":
            return "max_tokens"
        host = urlsplit(self.base_url).hostname or "" if self.base_url else "api.openai.com"
        return "max_completion_tokens" if host == "api.openai.com" or host.endswith(".openai.azure.com") else "max_tokens"

    def check(self, where: str) -> None:
        """The reasoning-related fields and the constraints their APIs set, checked at config time."""
        self.register_secrets()  # before any message could name them
        if self.api_key_env and self.base_url and url_userinfo(self.base_url) is not None:
            raise ConfigError(f"{where}.base_url: {shown(redact_url(self.base_url))} carries a user and password, sent as the Authorization "
                              f"header, and the model has a key (${self.api_key_env}) sent as the same header; a request carries one: "
                              "drop the credentials from base_url (a gateway's own go in headers) or set api_key_env: null")  # fmt: skip
        if self.max_tokens_param not in (None, "max_tokens", "max_completion_tokens"):
            raise ConfigError(f"{where}.max_tokens_param: {shown(self.max_tokens_param)} is not max_tokens or max_completion_tokens")
        if self.reasoning_handling not in REASONING_HANDLING:
            raise ConfigError(f"{where}.reasoning_handling: {shown(self.reasoning_handling)} is not one of {', '.join(REASONING_HANDLING)}")
        if self.reasoning_effort is not None:
            if self.provider == "anthropic":
                raise ConfigError(f"{where}.reasoning_effort: Anthropic has no reasoning_effort; use thinking: {{type: enabled, budget_tokens: N}}")
            if self.reasoning_effort not in REASONING_EFFORTS:
                raise ConfigError(f"{where}.reasoning_effort: {shown(self.reasoning_effort)} is not one of {', '.join(REASONING_EFFORTS)} "
                                  "(OpenAI's values; another server's own word goes in extra_body: {reasoning_effort: WORD})")  # fmt: skip
        if self.thinking is not None:
            self._check_thinking(where)
        for name in ("proxy", "ca_bundle"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{where}.{name}: expected a string, got {shown(value)}")

    def _check_thinking(self, where: str) -> None:
        # Constraints of Anthropic's extended thinking: budget_tokens >= 1024 and below max_tokens; no
        # temperature (nor top_k) with thinking; top_p only between 0.95 and 1.
        t = self.thinking
        if self.provider != "anthropic":
            raise ConfigError(f"{where}.thinking: is Anthropic's extended thinking; for OpenAI reasoning models set "
                              "reasoning_effort, for other servers' switches use extra_body")  # fmt: skip
        if not isinstance(t, dict) or t.get("type") not in THINKING_TYPES:
            raise ConfigError(f"{where}.thinking: expected {{type: enabled, budget_tokens: N}}, {{type: adaptive}} or {{type: disabled}} "
                              f"(anthropic-sdk-python 0.121.0's ThinkingConfigParam), got {shown(t)}")  # fmt: skip
        if t.get("display") is not None and t["type"] != "disabled" and t["display"] not in THINKING_DISPLAYS:
            raise ConfigError(f"{where}.thinking.display: expected one of {', '.join(THINKING_DISPLAYS)}, got {shown(t['display'])}")
        if t["type"] == "disabled":
            return
        if t["type"] == "enabled":
            self._check_budget(t.get("budget_tokens"), where)
        if self.temperature is not None:
            raise ConfigError(f"{where}.temperature: Anthropic does not accept a temperature with extended thinking; set temperature: null")
        if "top_k" in self.extra_body:
            raise ConfigError(f"{where}.extra_body.top_k: Anthropic does not accept top_k with extended thinking")
        top_p = self.extra_body.get("top_p")
        if top_p is not None and not (isinstance(top_p, (int, float)) and 0.95 <= top_p <= 1):
            raise ConfigError(f"{where}.extra_body.top_p: with extended thinking Anthropic accepts only 0.95 to 1, got {shown(top_p)}")

    def _check_budget(self, budget: Any, where: str) -> None:
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1024:
            raise ConfigError(f"{where}.thinking.budget_tokens: Anthropic requires an integer >= 1024, got {shown(budget)}")
        if budget >= self.max_tokens:
            raise ConfigError(f"{where}.thinking.budget_tokens: {budget} must be below max_tokens ({self.max_tokens}): "
                              f"the thinking is part of the output; raise max_tokens above {budget}")  # fmt: skip

    def pause_for(self, retry_after: float | None) -> float | None:
        """The pause a server's ``Retry-After`` gets: what it asked, at most ``retry_after_max_s``."""
        return None if retry_after is None else min(retry_after, self.retry_after_max_s)

    def api_key(self, where: str | None = None) -> str | None:
        """The key from the environment; never stored, logged or put into an exception message."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        register(key)  # never stored or printed from now on (redaction.py)
        if not key:
            raise ConfigError(
                f"{where or 'model ' + repr(self.name)}: environment variable {self.api_key_env} is not set (export it, "
                f"or set api_key_env to the variable that holds the key)"
            )
        return key

    def public_dict(self) -> dict[str, Any]:
        """The config as stored in ``runs.config`` (no secret in it: the key's variable name only, and a
        proxy URL without its credentials)."""
        out = {k: v for k, v in self.__dict__.items() if k != "left_to_engine"}
        for name in ("proxy", "base_url"):
            if out.get(name):
                out[name] = redact_url(out[name])
        return out

    def register_secrets(self) -> None:
        """This model's credentials besides its key (read by ``api_key``) are secrets of this process (``redaction.py``):
        the user and password of its base_url and proxy, the values of the extra headers it sends."""
        register_url(self.base_url)
        register_url(self.proxy)
        for value in (self.headers or {}).values():
            register(value)

    def route(self, where: str | None = None) -> Route:
        """How this model's server is reached (proxy, TLS), decided once."""
        return route(self.base_url or _DEFAULT_BASE_URLS.get(self.provider, ""), proxy=self.proxy, ca_bundle=self.ca_bundle,
                     where=f"{where or 'model ' + repr(self.name)}.proxy")  # fmt: skip


_DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com/v1"}
# What a base_url should look like, for the message of a 404
_EXPECTED_BASE_URL = {
    "openai": "the root of an OpenAI-compatible API, where /chat/completions is, usually ending in /v1 (https://api.openai.com/v1, "
              "http://localhost:8000/v1)",
    "anthropic": "the host root as Anthropic's SDK takes it (https://api.anthropic.com; /v1 is added) or the same ending in /v1",
    "azure": "the Azure OpenAI endpoint (https://RESOURCE.openai.azure.com) with the deployment's name as the model",
}  # fmt: skip


def expected_base_url(provider: str) -> str:
    """What a base_url should look like (the fix named with a 404)."""
    return _EXPECTED_BASE_URL.get(provider, "the API root")


def estimate_tokens(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
    """A cheap, slightly generous token estimate (about 3.5 characters a token)."""
    chars = sum(len(m.get("content") or "") + 16 for m in messages)
    chars += sum(len(json.dumps(m["tool_calls"])) for m in messages if m.get("tool_calls"))
    if tools:
        chars += len(json.dumps(tools))
    return int(chars / 3.5) + 8


def backoff_seconds(config: ModelConfig, attempt: int, exc: BaseException | None) -> float:
    """Wait before attempt ``attempt + 1``: the pause the server asked for (``retry-after-ms``/``Retry-After``, already
    capped at ``retry_after_max_s`` where the error was raised), as the SDKs honour it; else exponential backoff
    with full jitter."""
    if isinstance(exc, RetryableModelError) and exc.retry_after is not None and exc.retry_after > 0:
        return exc.retry_after
    return random.uniform(0, min(config.retry_backoff_max_s, config.retry_backoff_s * 2 ** (attempt - 1)))


class ModelClient(abc.ABC):
    """Sends chat requests for one model. Subclasses implement the provider's wire format."""

    default_base_url: str = ""

    def __init__(self, config: ModelConfig, session: aiohttp.ClientSession, limits: ModelLimits, target: Route | None = None) -> None:
        self.config = config
        self.session = session
        self.limits = limits
        self.base_url = (config.base_url or self.default_base_url).rstrip("/")
        self.endpoint = self.base_url  # where a model call is posted (each provider sets its own)
        self._api_key = config.api_key()  # registered as a secret when read, as are the config's other credentials
        config.register_secrets()
        # as the SDKs (openai-python 3.3.1, anthropic-sdk-python 0.121.0: httpx.Timeout(600, connect=5.0)); aiohttp's
        # connect would also count the wait for a pooled connection, sock_connect is the connection itself
        self._timeout = aiohttp.ClientTimeout(total=config.timeout, sock_connect=min(SDK_CONNECT_TIMEOUT_S, config.timeout))
        self._via = request_kwargs(target) if target is not None else {}  # the proxy, decided once
        self._failed: ModelError | None = None  # set by an error no retry fixes: every later call fails at once
        self._refused: tuple[tuple[int, bytes], int] | None = None  # the last permanent refusal and how many in a row
        self.stats = {"calls": 0, "retries": 0, "errors": 0, "http_429": 0, "input_tokens": 0, "output_tokens": 0}
        self.on_usage: Callable[[CallRow], None] | None = None  # each answered call, as read (the run's spend: spend.py)

    # -- provider specifics -------------------------------------------------------------------
    @abc.abstractmethod
    def _request(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        """Return (url, headers, json body)."""

    @abc.abstractmethod
    def _parse(self, body: Any, read: ReplyReader) -> ModelReply:
        """Read a 200 reply body (any JSON value) with ``read``'s typed readers; raise ``MalformedReply``
        (``read.malformed``) if it cannot be read."""

    # -- shared -------------------------------------------------------------------------------
    async def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        *,
        calls: list[CallRow],
        turn: int,
        caller: str = "agent",
        task_header: dict[str, str] | None = None,
    ) -> ModelReply:
        """One model turn, retried as needed. Every attempt is appended to ``calls``.

        Raises ``ContextLimitError`` (prompt too long) or ``ModelError`` (failed for good).
        """
        estimate = self._precheck(messages, tools)
        first = 1
        for resent in range(_MAX_ADAPTATIONS + 1):
            request = _Request(messages, tools, task_header if task_header and self.config.task_header else None)
            try:
                # The first attempt straight from here (no coroutine in between: each one is resumed again at every
                # wait of the HTTP exchange) and outside tenacity: most calls succeed, and the retry machinery costs ~50 us.
                try:
                    return await self._attempt(request, estimate, calls, turn, first, caller)
                except RetryableModelError as exc:
                    failure = exc
                return await self._retry(request, estimate, calls, turn, caller, first, failure)
            except _Adapted as exc:  # the server refused a field left to the engine: once more with it adapted
                first = len([c for c in calls if c.turn == turn and c.caller == caller]) + 1
                if resent == _MAX_ADAPTATIONS:
                    raise ModelError(f"{self.config.name}: the server refused the request after adapting it: {exc}", fatal=True) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _retry(self, request: _Request, estimate: int, calls: list[CallRow], turn: int, caller: str, first: int,
                     failure: RetryableModelError) -> ModelReply:  # fmt: skip
        """The retries of ``request``, whose attempt ``first`` failed with ``failure`` (each sends the same bytes)."""
        attempt_no = first
        last_refusal = getattr(failure, "signature", None)
        # failed attempts counted towards max_retries: a connection the loaded server refused is not one (_Backpressure)
        counted = [0 if isinstance(failure, _Backpressure) else 1]
        try:
            if self.config.max_retries == 0 and not isinstance(failure, _Backpressure):
                raise failure
            await asyncio.sleep(backoff_seconds(self.config, 1, failure))
            retrying = AsyncRetrying(
                retry=retry_if_exception_type(RetryableModelError),
                stop=lambda state: counted[0] > self.config.max_retries,
                wait=lambda state: backoff_seconds(self.config, state.attempt_number + 1, state.outcome.exception() if state.outcome else None),
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    attempt_no += 1
                    self.stats["retries"] += 1
                    try:
                        return await self._attempt(request, estimate, calls, turn, attempt_no, caller)
                    except _Backpressure:
                        raise
                    except _Refused as exc:
                        counted[0] += 1
                        if exc.signature == last_refusal:
                            self.stats["errors"] += 1
                            raise self._for_good(exc.signature, str(exc), exc.permanent(self.config.name, "the server")) from None
                        last_refusal = exc.signature
                        raise
                    except RetryableModelError:
                        counted[0] += 1
                        raise
        except RetryableModelError as exc:
            self.stats["errors"] += 1
            raise ModelError(
                f"{self.config.name}: giving up after {attempt_no} attempts: {exc}", http_status=exc.http_status
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _precheck(self, messages: list[Message], tools: list[dict[str, Any]] | None, *, need_estimate: bool = False) -> int:
        """Before a request: fail at once after an error no retry fixes, or when the prompt cannot fit the
        configured context window. Returns the token estimate (0 when nothing needs it)."""
        if self._failed is not None:  # an earlier call hit an error no retry fixes: no more requests
            raise ModelError(str(self._failed), http_status=self._failed.http_status, fatal=True)
        window = self.config.context_window
        # the estimate is only needed for the context pre-check and the tokens/min budget
        estimate = estimate_tokens(messages, tools) if window or self.limits.counts_tokens or need_estimate else 0
        if window and estimate + self.config.max_tokens > window:
            raise ContextLimitError(
                f"estimated prompt of {estimate} tokens + max_tokens {self.config.max_tokens} exceeds "
                f"the context window of {window} configured for {self.config.name}"
            )
        return estimate

    def _build(self, request: _Request) -> None:
        """The URL, headers and JSON body of ``request`` (provider's ``_request``, the task headers)."""
        url, headers, body = self._request(request.messages, request.tools)
        if request.task_header:
            headers.update(request.task_header)
        request.url, request.headers, request.body, request.payload = url, headers, body, dumps_body(body)

    async def _attempt(self, request: _Request, estimate: int, calls: list[CallRow], turn: int, attempt_no: int, caller: str) -> ModelReply:
        row = CallRow(turn=turn, attempt=attempt_no, http_status=None, latency_ms=0.0, caller=caller, model=self.config.name)
        calls.append(row)
        start = time.perf_counter()
        try:
            async with self.limits.slot(estimate + self.config.max_tokens) as slot:
                admitted = time.perf_counter()
                if request.payload is None:  # built once a place is free (_Request), outside the wait and the latency
                    try:
                        self._build(request)
                    except BaseException:
                        calls.remove(row)  # nothing was sent: no row, as when the request was built before its attempt
                        raise
                row.started_at = now()
                row.queue_ms, start = (admitted - start) * 1000, time.perf_counter()  # the wait in our limiter, not latency
                url, sent = request.url, request.body
                sent_at = asyncio.get_running_loop().time()  # the limits' clock (a test's loop may run on virtual time)
                in_use = self.limits.in_flight  # requests in flight with this one: too many, should its connection be refused
                self.stats["calls"] += 1
                try:
                    async with self.session.post(url, data=request.payload, headers=request.headers, timeout=self._timeout, **self._via) as resp:
                        row.http_status = resp.status
                        try:
                            raw = await read_body(resp, self.config.max_response_bytes)
                        except BodyTooLarge as exc:
                            raise self._oversized(exc, row, resp, sent_at, start) from None
                        retry_after = server_pause(resp.headers)
                        should_retry = resp.headers.get("x-should-retry")
                        self._observe(row, resp.status, resp.headers, sent_at)
                except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as exc:
                    self._observe(row, None, None, sent_at)
                    row.latency_ms = (time.perf_counter() - start) * 1000
                    kind = "timeout" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
                    row.error = self._redact(f"{kind}: {exc}")[:300] if str(exc) else kind
                    if _nothing_listens(exc) and self.limits.answered_at == -float("inf"):
                        raise self._unreachable(url, row.error) from None
                    if _connect_failure(exc) and self.limits.connection_refused(sent_at, in_use):
                        row.note = BACKPRESSURE_NOTE
                        raise _Backpressure(row.error) from None
                    raise RetryableModelError(row.error) from None
                row.latency_ms = (time.perf_counter() - start) * 1000
                row.retry_after_s = retry_after
                status = resp.status
                if status != 200:
                    self._refusal(status, raw, retry_after, row, url, sent, should_retry)
                reply = self._read_reply(raw, status, row)
                slot.report_usage((reply.usage.input_tokens or 0) + (reply.usage.output_tokens or 0))
                return self._accept(reply, row)
        except asyncio.CancelledError:
            # Ctrl-C: this attempt was abandoned, not unanswered by the server
            row.error = "cancelled: the run was interrupted before the server answered"
            row.latency_ms = (time.perf_counter() - start) * 1000
            raise

    def _unreachable(self, url: str, error: str) -> ModelError:
        """A connection refused (or not made) by a server that has not answered once in this run: nothing listens there
        (a wrong base URL, a server not started), so the model stops at once in one line instead of retrying each call
        for a minute. A server that answered before and then went away is an outage: retried as ever."""
        self.stats["errors"] += 1
        self._failed = ModelError(f"{self.config.name}: nothing answers at {self._redact(url)} ({error}); start the server or "
                                  "fix base_url (--base-url)", fatal=True)  # fmt: skip
        return self._failed

    def _oversized(self, exc: BodyTooLarge, row: CallRow, resp: aiohttp.ClientResponse, sent_at: float, start: float) -> ModelError:
        """A reply past ``max_response_bytes``: not read further (the connection is dropped), this call's ``model_error``
        (not retried: the same request would be answered the same size)."""
        self._observe(row, resp.status, resp.headers, sent_at)
        row.latency_ms = (time.perf_counter() - start) * 1000
        row.error = f"{exc}; not read further (raise max_response_bytes if this server's replies are that large)"
        self.stats["errors"] += 1
        return ModelError(f"{self.config.name}: HTTP {resp.status}, {row.error}", http_status=resp.status)

    def _observe(self, row: CallRow, status: int | None, headers: Mapping[str, str] | None, sent_at: float) -> None:
        """Let the limits learn from this answer to a request sent at ``sent_at`` (the event loop's clock): its
        rate-limit headers, its latency; note on the row what they pace to now."""
        limits = self.limits
        now = asyncio.get_running_loop().time()  # (each read of the running loop is a getpid() system call on Python 3.11)
        limits.observe(status, headers, now - sent_at, now)
        row.in_flight_limit, row.rpm_limit, row.tpm_limit = limits.in_flight_limit, limits.rpm, limits.tpm
        row.server_queue_ms = header_queue_ms(headers)

    def _read_reply(self, raw: bytes, status: int, row: CallRow) -> ModelReply:
        """A 200 reply body read into typed values (``replies.py``); a malformed one is retryable (the error
        is stored on the row), values repaired or dropped on the way are noted on the row."""
        read = ReplyReader()
        try:
            body = self._decode(raw)
        except (ValueError, RecursionError, KeyError, TypeError) as exc:  # not JSON (an HTML error page, a cut body), or nested past any use
            row.error = self._redact(f"malformed reply body: {exc}")[:300]
            raise MalformedReply(row.error, http_status=status) from None
        try:
            reply = self._parse(body, read)
        except RetryableModelError as exc:
            row.error = self._redact(str(exc))[:300]
            raise MalformedReply(row.error, http_status=status) from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
            # a shape the typed readers did not foresee: still the reply's fault, never the environment's
            row.error = self._redact(f"malformed reply: {type(exc).__name__}: {exc}")[:300]
            raise MalformedReply(row.error, http_status=status) from None
        row.note = read.note()
        if row.server_queue_ms is None:
            row.server_queue_ms = timings_queue_ms(body, row.latency_ms)
        usage = reply.usage
        row.input_tokens = usage.input_tokens
        row.output_tokens = usage.output_tokens
        row.reasoning_tokens = usage.reasoning_tokens
        row.cache_read_tokens, row.cache_write_tokens = usage.cache_read_tokens, usage.cache_write_tokens
        row.finish_reason = reply.finish_reason
        return reply

    def _for_good(self, signature: tuple[int, bytes], said: str, refused: ModelError) -> ModelError:
        """A request refused for good (``refused``; the refusal's ``signature`` and what the server ``said``); the ``max_same_failures``-th
        such refusal in a row, the same each time, stops the model instead: the server refuses everything (a wrong
        field, an endpoint that does not fit), and the episodes not played are better left for a resume after the fix."""
        count = self._refused[1] + 1 if self._refused is not None and self._refused[0] == signature else 1
        self._refused = (signature, count)
        limit = self.config.max_same_failures
        if not limit or count < limit:
            return refused
        self._failed = ModelError(f"{self.config.name}: stopped after {count} requests in a row were refused the same way ({said}); "
                                  "fix the cause and run the same command again: these episodes and those not played yet run then",
                                  http_status=signature[0], fatal=True)  # fmt: skip
        return self._failed

    def _decode(self, raw: bytes) -> Any:
        """A 200 reply's body as JSON values (a provider whose replies are streamed assembles them here)."""
        return loads_body(raw)

    def _accept(self, reply: ModelReply, row: CallRow) -> ModelReply:
        """Count a parsed reply; an empty reply cut at the context window is raised as an overflow."""
        self._refused = None  # an answer: refusals so far were not everything the server says
        self.stats["input_tokens"] += reply.usage.input_tokens or 0
        self.stats["output_tokens"] += reply.usage.output_tokens or 0
        if self.on_usage is not None:
            self.on_usage(row)
        if reply.finish_reason in _LENGTH_REASONS and not reply.content and not reply.tool_calls:
            self._budget_or_window(reply, row)
        elif reply.finish_reason == "model_context_window_exceeded":
            row.limit_kind, row.limit_basis = "context_window", "stop reason model_context_window_exceeded"
            raise ContextLimitError("the model stopped because its context window is full (model_context_window_exceeded)")
        return reply

    def _refusal(self, status: int, raw: bytes, retry_after: float | None, row: CallRow, url: str, sent: dict[str, Any] | None,
                 should_retry: str | None = None) -> None:
        """Classify a non-200 reply to the request ``sent`` to ``url`` and raise accordingly (never returns); ``should_retry``:
        the server's ``x-should-retry`` header, which decides over the status as in the SDKs (a context overflow and an
        error no retry fixes are still recognised first)."""
        raw = self._redact_bytes(raw)  # before anything is cut from it (the message at 300 characters)
        body = _json_or_text(raw)
        message = self._redact(_error_message(body))
        row.error = f"HTTP {status}: {message}"[:500]
        fatal = fatal_cause(status, body)
        if fatal is not None:
            adapted = self._adapt(fatal, sent) if sent is not None else None
            if adapted is not None:
                row.note = f"adapted: {adapted}"
                raise _Adapted(f"{row.error} (adapted: {adapted})")
            self.stats["errors"] += 1
            self._failed = ModelError(_fatal_message(self.config, status, fatal, message, url), http_status=status, fatal=True)
            raise self._failed
        pause = self.config.pause_for(retry_after)  # the row keeps what the server asked (retry_after_s)
        if status == 429:
            self.stats["http_429"] += 1
            self.limits.pause(pause if pause is not None else 1.0)
        server = overflow_server(status, body)
        if server is not None:
            row.limit_kind, row.limit_basis = "context_window", f"{server} overflow reply (HTTP {status})"
            raise ContextLimitError(f"the server ({server}) says the prompt exceeds the context window: {message}"[:300])
        if should_retry == "false":
            row.note = "not retried: x-should-retry: false"
            self.stats["errors"] += 1
            refused = ModelError(f"{self.config.name}: HTTP {status}, not retried (the server answered x-should-retry: false): {message}",
                                 http_status=status, permanent=400 <= status < 500)  # fmt: skip
            raise self._for_good((status, raw[:4000]), row.error, refused) if refused.permanent else refused
        if should_retry == "true" or retryable_status(status):
            raise RetryableModelError(row.error, http_status=status, retry_after=pause)
        if 400 <= status < 500:
            raise _Refused(row.error, http_status=status, signature=(status, raw[:4000]))
        raise ModelError(f"{self.config.name} ({self.config.base_url or self.config.provider}): HTTP {status}, the request "
                         f"was rejected: {message}", http_status=status)  # fmt: skip

    def _adapt(self, cause: tuple[str, str | None], sent: dict[str, Any]) -> str | None:
        """For a refusal no retry fixes (``cause``) of the request ``sent``: what was adapted so that the request
        can go again (also when another call adapted it meanwhile), or None (the refusal stands). Providers whose
        clients adapt nothing keep this."""
        return None

    def _record_adaptation(self, what: str) -> None:
        self.stats[_ADAPTED + what] = 1

    def _budget_or_window(self, reply: ModelReply, row: CallRow) -> None:
        """An empty reply cut by the length limit: the output budget ran out (returned to the environment
        as an empty reply), unless the prompt itself filled the context window (raised as an overflow)."""
        usage, max_tokens, window = reply.usage, self.config.max_tokens, self.config.context_window
        prompt, output = usage.input_tokens or 0, usage.output_tokens or 0  # a count dropped as invalid: unknown, 0
        spent = f"{output} output tokens" + (f" ({usage.reasoning_tokens} reasoning)" if usage.reasoning_tokens else "")
        reason = f"finish reason {reply.finish_reason!r} with an empty reply"
        if output and output >= max_tokens:
            kind, basis = "output_budget", f"{reason}; {spent} of max_tokens {max_tokens}"
        elif window and prompt + output >= window:
            kind, basis = "context_window", f"{reason}; prompt {prompt} + {spent} reach context_window {window}"
        elif output or prompt:
            kind, basis = "context_window", f"{reason} after {spent}, below max_tokens {max_tokens}: the server's context is full"
        else:
            kind, basis = "output_budget", f"{reason}; the server reported no usage"
        row.limit_kind, row.limit_basis = kind, basis
        if kind == "context_window":
            raise ContextLimitError(f"the model stopped at the context window: {basis}")

    def _redact(self, text: str) -> str:
        """Error text as stored (call it before any cut): never a secret of the client (``redaction.py``: the key, the
        URLs' passwords, the headers' values), nor a provider's masked echo of a key."""
        text = redact(text)
        return _KEY_ECHO.sub("***", text) if "-" in text else text

    def _redact_bytes(self, raw: bytes) -> bytes:
        """A server's error body without the client's secrets, before it is parsed and cut."""
        if not SECRETS.active:
            return raw
        text = raw.decode("utf-8", "replace")
        redacted = redact(text)
        return raw if redacted is text else redacted.encode()


# how a permanent refusal says so, and what it says instead when the same refusal stopped the model (scheduler.py)
PERMANENT_WORDS = "a permanent failure of this episode (resume does not re-run it)"
STOPPED_WORDS = "the server's answer to every request, so the model was stopped (resume re-runs it)"
_MAX_ADAPTATIONS = 2  # a request is sent again at most twice after adapting (the token field, the temperature)
_ADAPTED = "adapted: "


def adaptations(stats: Mapping[str, Any]) -> list[str]:
    """What a model's requests were adapted to (from its client's ``stats``, also when summed over workers)."""
    return sorted(k.removeprefix(_ADAPTED) for k, v in stats.items() if k.startswith(_ADAPTED) and v)


class _Adapted(Exception):
    """The server refused a field the config left to the engine; it was adapted: send the request again."""


class _Request:
    """One request of a call: its messages until it is built (``ModelClient._build``: URL, headers, JSON body) when its
    first attempt gets a place in the model's limits; its retries send the same bytes. Most of 10,000 episodes in
    flight wait for one of 1,000 connections: waiting, a request holds no body, headers or JSON of its own."""

    __slots__ = ("messages", "tools", "task_header", "url", "headers", "body", "payload")

    def __init__(self, messages: list[Message], tools: list[dict[str, Any]] | None, task_header: dict[str, str] | None) -> None:
        self.messages, self.tools, self.task_header = messages, tools, task_header
        self.url = ""
        self.headers: dict[str, str] = {}
        self.body: dict[str, Any] = {}
        self.payload: bytes | None = None


BACKPRESSURE_NOTE = "connection refused or timed out while the server answered others: backpressure, not counted towards max_retries"


class _Backpressure(RetryableModelError):
    """A connection the server refused (or that timed out) while it answered others: the server is full, not failing.
    Sent again after the model's pause (limits.py), without counting towards ``max_retries``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retry_after=random.uniform(0.5, 1.5) * BACKPRESSURE_PAUSE_S)


def _connect_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection to the server that could not be made (refused, timed out, reset while connecting);
    a TLS certificate or handshake failure is not: no wait fixes it."""
    if isinstance(exc, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientConnectorSSLError, aiohttp.ClientSSLError)):
        return False
    return isinstance(exc, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError))


def _nothing_listens(exc: BaseException) -> bool:
    """Whether ``exc`` says that nothing listens at the address (refused, no route, a name that does not resolve), as
    opposed to a server too loaded to accept in time: a connect timeout (ours or the kernel's) is never this, since a
    server with a full listen queue times out new connections before it has answered anything."""
    if not _connect_failure(exc) or not isinstance(exc, aiohttp.ClientConnectorError):
        return False
    return not isinstance(exc.os_error, TimeoutError)


class _Refused(RetryableModelError):
    """An unrecognised 4xx: retried once; the same refusal again is a permanent failure of the episode."""

    def __init__(self, message: str, *, http_status: int, signature: tuple[int, bytes]) -> None:
        super().__init__(message, http_status=http_status)
        self.signature = signature

    def permanent(self, model: str, by: str) -> ModelError:
        """The episode's failure when ``by`` (the server, the batch API) refused the same way twice."""
        return ModelError(f"{model}: {by} refused this request the same way twice, {PERMANENT_WORDS}: {self}",
                          http_status=self.http_status, permanent=True)  # fmt: skip


_KEY_ECHO = re.compile(r"\b(?:sk|sk-ant|sk-or|key)-[A-Za-z0-9_*.\-]{6,}")


def server_pause(headers: Mapping[str, str] | None) -> float | None:
    """The pause a reply asks for, read as openai-python 3.3.1's ``_parse_retry_after_header``: ``retry-after-ms``
    (milliseconds) first, then ``Retry-After`` in seconds or as an HTTP date. None when none is readable."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            seconds = float(ms) / 1000
        except ValueError:
            seconds = math.nan
        if not math.isnan(seconds):
            return max(0.0, seconds)
    return retry_after_seconds(headers.get("Retry-After"))


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """A ``Retry-After`` header in seconds: a number (``inf`` stays infinite: the caller caps it) or an HTTP date (the
    seconds from ``now``, the wall clock); None when absent, unreadable or NaN."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_tz(value)
            if when is None:
                return None
            seconds = email.utils.mktime_tz(when) - (time.time() if now is None else now)
        except (TypeError, ValueError, OverflowError):
            return None
    return None if math.isnan(seconds) else max(0.0, seconds)


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:300]


def _error_message(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("type") or err)[:300]
        return str(err)[:300]
    return str(body)[:300]


def _param_fix(param: str | None) -> str:
    if param == "max_tokens":
        return "set max_tokens_param: max_completion_tokens for this model"
    if param == "max_completion_tokens":
        return "set max_tokens_param: max_tokens for this model"
    if param == "temperature":
        return "set temperature: null for this model (the server accepts only its default)"
    if param == "reasoning_effort":
        return "change or remove reasoning_effort for this model"
    if param:
        return f"remove or change {param!r} (extra_body, or the model field of that name)"
    return "remove the parameter the message names from the model's config"


def _fatal_message(config: ModelConfig, status: int, cause: tuple[str, str | None], message: str, url: str) -> str:
    """One line: which model, the cause, the fix; the server's own words last."""
    kind, param = cause
    where = f"{config.name} ({config.base_url or config.provider})"
    key = f"${config.api_key_env}" if config.api_key_env else "no key (set api_key_env)"
    text = {
        "insufficient_quota": f"the account behind {key} has no quota left (insufficient_quota); add credit or raise the "
                              "billing limit at the provider, or use another key",
        "unsupported_parameter": f"the server does not accept the parameter {param!r}; {_param_fix(param)}",
        "unsupported_value": f"the server does not accept the value given for {param!r}; {_param_fix(param)}",
        "credit_balance": f"the Anthropic account behind {key} has too little credit; add credit in Plans & Billing",
        "payment_required": f"the account behind {key} is out of credit or balance; add credit at the provider",
        "invalid_key": f"the server refused the API key from {key}; check the key (and api_key_env)",
        "permission": f"the key from {key} may not use this model or endpoint; check the key's permissions and the model",
        "not_found": f"model {config.model_id!r} or the endpoint was not found (POST {redact_url(url)}); check model and "
                     f"base_url: {expected_base_url(config.provider)}",
    }[kind]  # fmt: skip
    return f"{where}: HTTP {status}, {text}. Server said: {message}"
