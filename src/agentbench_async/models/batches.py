"""Batch mode (``--batch [SIZE]``, ``batch:`` per model): the model requests of all episodes in flight go to
the provider's batch API (half the price) instead of one HTTP call each.

``BatchClient.complete`` has the signature of ``ModelClient.complete``: an episode asks for its turn and waits.
Meanwhile the request sits in a queue that is flushed into a batch at ``size`` requests or ``wait_s`` after
the oldest one arrived; the batch is recorded in the run file (``store.batch_ledger``), created, polled with
exponential backoff (``poll_s`` doubling up to ``poll_max_s``), and its results are handed back to the
waiting episodes, which go on turn by turn. Each request gets one ``model_calls`` row per attempt with the
batch id.

- Limits: at most ``max_batches`` batches in progress, optionally ``max_enqueued_tokens`` (estimated) in
  them (OpenAI's per-model enqueued-token limit), and never more requests or bytes in one batch than the
  provider takes. A provider that refuses a batch because its queue is full (Anthropic: HTTP 429; OpenAI:
  the batch fails with ``token_limit_exceeded``) is asked again once a batch of ours has ended, without
  using up the requests' retries.
- Retries: a request the batch reports as errored (retryable statuses), expired or cancelled goes into a
  later batch, up to ``max_retries`` more times; errors no retry fixes end the episode as the direct path
  does (same classification).
- Resume: a request whose episode was cut by a kill and that was already submitted is found by its request
  key (episode, caller, turn and body); its batch is collected, not submitted again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ConfigError, ModelError, RetryableModelError
from ..records import CallRow, now
from ..store.batch_ledger import BatchLedger, Recorded, RequestEntry
from ..types import Message, ModelReply
from .base import _MAX_ADAPTATIONS, ModelClient, _Adapted, _Refused, backoff_seconds
from .batch_api import BATCH_APIS, BatchAPI, BatchLine, BatchState, ItemResult, QueueFull
from .task_headers import EPISODE_HEADER

DEFAULT_SIZE = 100


@dataclass
class BatchSettings:
    size: int = DEFAULT_SIZE  # flush a batch at this many requests
    wait_s: float = 2.0  # ... or this long after the oldest queued request arrived
    poll_s: float = 5.0  # first wait between polls of a batch; doubles up to poll_max_s
    poll_max_s: float = 60.0  # the longest wait between two polls
    max_batches: int = 50  # batches in progress at once
    max_enqueued_tokens: int | None = None  # estimated input tokens in progress (OpenAI's enqueued-token limit)


def batch_settings(raw: Any, where: str) -> BatchSettings | None:
    """The ``batch:`` setting of a model: None/false (direct calls), true, a size, or a mapping."""
    if raw is None or raw is False:
        return None
    if raw is True:
        return BatchSettings()
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = {"size": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}.batch: expected true, a batch size or a mapping of {', '.join(f.name for f in fields(BatchSettings))}; got {raw!r}")
    known = {f.name: f for f in fields(BatchSettings)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"{where}.batch: unknown field {unknown[0]!r} (known: {', '.join(known)})")
    settings = BatchSettings(**raw)
    for name in ("size", "max_batches"):
        value = getattr(settings, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{where}.batch.{name}: expected a positive integer, got {value!r}")
    for name in ("wait_s", "poll_s", "poll_max_s"):
        value = getattr(settings, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{where}.batch.{name}: expected seconds > 0, got {value!r}")
    tokens = settings.max_enqueued_tokens
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
        raise ConfigError(f"{where}.batch.max_enqueued_tokens: expected a positive integer or nothing, got {tokens!r}")
    return settings


def request_key(body: dict[str, Any], episode_id: str, caller: str, turn: int) -> str:
    """The identity of a request across a kill: the same episode asking the same thing at the same turn."""
    text = json.dumps([episode_id, caller, turn, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class _Pending:
    line: BatchLine
    entry: RequestEntry
    tokens: int
    size: int
    placed: asyncio.Future[str]  # the batch id, once the request is in a created batch
    queued_at: float = field(default_factory=time.monotonic)


class BatchClient:
    """A model's requests through its provider's batch API (same ``complete`` as a ``ModelClient``)."""

    def __init__(self, client: ModelClient, settings: BatchSettings, ledger: BatchLedger | None, api: BatchAPI | None = None) -> None:
        self.client = client
        self.config = client.config
        self.settings = settings
        self.ledger = ledger
        self.api = api or BATCH_APIS[client.config.provider](client)
        self.stats = client.stats
        self.stats.update(batches_submitted=0, batches_in_progress=0, batches_done=0, batch_requests=0, batch_requests_recovered=0)
        self._queue: list[_Pending] = []
        self._wake = asyncio.Event()
        self._results: dict[str, asyncio.Future[dict[str, ItemResult]]] = {}
        self._failures: dict[str, BatchState] = {}
        self._recorded: dict[str, Recorded] = {}
        self._tokens_in_progress = 0
        self._queue_full_at: int | None = None  # batches in progress when the provider last refused one
        self._capacity = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flusher: asyncio.Task[None] | None = None

    # -- lifetime -----------------------------------------------------------------------------------
    async def start(self, done_episodes: set[str]) -> None:
        """Start flushing; collect the batches a killed run submitted for episodes still to run."""
        if self.ledger is not None:
            self._recorded = await asyncio.to_thread(self.ledger.recorded, self.config.name, done_episodes)
        batches = {rec.local_id: rec for rec in self._recorded.values()}
        found = {local_id: rec.batch_id for local_id, rec in batches.items() if rec.batch_id}
        for local_id, rec in sorted(batches.items(), key=lambda item: str(item[1].created_at)):
            if not rec.batch_id:  # killed between creating the batch and recording its id
                batch_id = await self.api.find(rec.input_file_id, rec.created_at, rec.n_requests, set(found.values()))
                if batch_id:
                    found[local_id] = batch_id
                    if self.ledger is not None:
                        await self.ledger.submitted(local_id, batch_id)
        for local_id, batch_id in found.items():
            self._spawn(self._collect(local_id, batch_id, 0))
        # requests whose batch was never created are submitted again (they were never paid for)
        self._recorded = {k: Recorded(r.local_id, found[r.local_id], r.input_file_id, r.custom_id, r.attempt)
                          for k, r in self._recorded.items() if r.local_id in found}  # fmt: skip
        self._flusher = asyncio.create_task(self._flush_loop(), name=f"batches-{self.config.name}")

    async def aclose(self) -> None:
        """Stop flushing and polling (batches in progress stay recorded: a resumed run collects them)."""
        tasks = [*self._tasks, *([self._flusher] if self._flusher else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one request --------------------------------------------------------------------------------
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
        """One model turn through batches, retried as needed; every attempt is appended to ``calls``."""
        client = self.client
        estimate = client._precheck(messages, tools, need_estimate=True)
        _, _, body = client._request(messages, tools)
        episode_id = (task_header or {}).get(EPISODE_HEADER, "")
        key = request_key(body, episode_id, caller, turn)
        headers = dict(task_header) if task_header and self.config.task_header else None
        attempt, retries_used, last_refusal, adapted = 0, 0, None, 0
        while True:
            recorded = self._recorded.pop(key, None)
            attempt = recorded.attempt if recorded is not None else attempt + 1
            row = CallRow(turn=turn, attempt=attempt, http_status=None, latency_ms=0.0, caller=caller, model=self.config.name)
            calls.append(row)
            start = time.perf_counter()
            try:
                if recorded is not None:
                    self.stats["batch_requests_recovered"] += 1
                    batch_id, custom_id = recorded.batch_id or "", recorded.custom_id
                else:
                    custom_id = f"{key[:40]}-{attempt}"
                    entry = RequestEntry(custom_id, key, episode_id, turn, caller, attempt)
                    line = BatchLine(custom_id, body, headers)
                    pending = _Pending(line, entry, estimate, self.api.line_bytes(line), asyncio.get_running_loop().create_future())
                    self._queue.append(pending)
                    self._wake.set()
                    batch_id = await pending.placed
                row.batch_id = batch_id
                row.started_at = now()
                results = await asyncio.shield(self._results_future(batch_id))
                row.latency_ms = (time.perf_counter() - start) * 1000
                self.stats["calls"] += 1
                return self._read(results.get(custom_id), batch_id, row, body)
            except QueueFull as exc:  # the provider refused the whole batch: not the request's fault
                row.error = str(exc)[:300]
                row.latency_ms = (time.perf_counter() - start) * 1000
                continue
            except _Adapted:  # a field left to the engine was refused and adapted: the request goes again, changed
                adapted += 1
                if adapted > _MAX_ADAPTATIONS:
                    raise ModelError(f"{self.config.name}: the batch API refused the request after adapting it: {row.error}", fatal=True) from None
                _, _, body = client._request(messages, tools)
                key = request_key(body, episode_id, caller, turn)
                continue
            except _Refused as exc:
                if last_refusal == exc.signature:
                    self.stats["errors"] += 1
                    raise exc.permanent(self.config.name, "the batch API") from None
                last_refusal = exc.signature
                failure: RetryableModelError = exc
            except RetryableModelError as exc:
                failure = exc
            except asyncio.CancelledError:
                row.error = row.error or "cancelled: the run was interrupted before the batch returned this request"
                row.latency_ms = (time.perf_counter() - start) * 1000
                raise
            retries_used += 1
            if retries_used > self.config.max_retries:
                self.stats["errors"] += 1
                raise ModelError(f"{self.config.name}: giving up after {retries_used} batch attempts: {failure}", http_status=failure.http_status)
            self.stats["retries"] += 1
            await asyncio.sleep(backoff_seconds(self.config, retries_used, failure) / 10)

    def _read(self, result: ItemResult | None, batch_id: str, row: CallRow, sent: dict[str, Any]) -> ModelReply:
        """The request's result -> the reply, or the exception the direct path would raise."""
        client = self.client
        if result is None:
            state = self._failures.get(batch_id)
            if state is not None and state.failure_code == "token_limit_exceeded":
                raise QueueFull(f"batch {batch_id} refused: {state.failure}", None)
            row.error = f"batch {batch_id} {state.status if state else 'ended'} without this request" + (f": {state.failure}" if state and state.failure else "")
            raise RetryableModelError(row.error[:300])
        row.http_status = result.status
        if result.kind == "succeeded":
            return client._accept(client._read_reply(result.body, 200, row), row)
        if result.kind in ("expired", "canceled"):
            row.error = f"batch {batch_id}: the request {result.kind} before it ran"
            raise RetryableModelError(row.error)
        if result.status is None:
            row.error = f"batch {batch_id}: {result.body.decode('utf-8', 'replace')}"[:300]
            raise RetryableModelError(row.error)
        client._refusal(result.status, result.body, None, row, client.endpoint, sent)  # raises what the direct path would
        raise AssertionError("unreachable")  # pragma: no cover

    def _results_future(self, batch_id: str) -> asyncio.Future[dict[str, ItemResult]]:
        if batch_id not in self._results:
            self._results[batch_id] = asyncio.get_running_loop().create_future()
        return self._results[batch_id]

    # -- batches ------------------------------------------------------------------------------------
    def _limit(self) -> int:
        limit = self.settings.max_batches
        return min(limit, max(1, self._queue_full_at)) if self._queue_full_at is not None else limit

    async def _flush_loop(self) -> None:
        s = self.settings
        while True:
            self._queue = [p for p in self._queue if not p.placed.done()]  # episodes cancelled while queued
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            deadline = self._queue[0].queued_at + s.wait_s
            if len(self._queue) < s.size and time.monotonic() < deadline:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), deadline - time.monotonic())
                except asyncio.TimeoutError:
                    pass
                continue
            take = self._take()
            async with self._capacity:
                await self._capacity.wait_for(lambda: self.stats["batches_in_progress"] < self._limit() and self._tokens_fit(take))
                take = [p for p in take if not p.placed.done()]  # episodes cancelled while the batch waited for room
                if not take:
                    continue
                self.stats["batches_in_progress"] += 1
                self._tokens_in_progress += sum(p.tokens for p in take)
            await self._submit(take)

    def _take(self) -> list[_Pending]:
        """The next batch: up to ``size`` requests within the provider's request and byte limits."""
        limit = min(self.settings.size, self.api.max_requests)
        take: list[_Pending] = []
        total = 0
        for pending in self._queue:
            if len(take) >= limit or (take and total + pending.size > self.api.max_bytes):
                break
            take.append(pending)
            total += pending.size
        self._queue = self._queue[len(take):]
        return take

    def _tokens_fit(self, take: list[_Pending]) -> bool:
        cap = self.settings.max_enqueued_tokens
        return cap is None or self.stats["batches_in_progress"] == 0 or self._tokens_in_progress + sum(p.tokens for p in take) <= cap

    async def _release(self, tokens: int) -> None:
        async with self._capacity:
            self.stats["batches_in_progress"] -= 1
            self._tokens_in_progress -= tokens
            self._capacity.notify_all()

    async def _submit(self, take: list[_Pending]) -> None:
        local_id = uuid.uuid4().hex[:16]
        tokens = sum(p.tokens for p in take)
        lines = [p.line for p in take]
        ledger = self.ledger

        async def on_file(file_id: str) -> None:
            if ledger is not None:
                await ledger.uploaded(local_id, file_id)

        try:
            if ledger is not None:
                await ledger.intent(local_id, self.config.name, self.api.provider, [p.entry for p in take])
            batch_id = await self.api.create(lines, on_file)
            if ledger is not None:
                await ledger.submitted(local_id, batch_id)
        except QueueFull as exc:
            await self._refused(local_id, tokens, exc.retry_after)
            self._queue[:0] = [p for p in take if not p.placed.done()]  # first in line again
            self._wake.set()
            return
        except (ModelError, OSError) as exc:
            await self._release(tokens)
            if ledger is not None:
                await ledger.ended(local_id, "not_submitted")
            for p in take:
                if not p.placed.done():
                    p.placed.set_exception(exc if isinstance(exc, ModelError) else ModelError(f"{self.config.name}: submitting a batch failed: {exc}"))
            return
        self.stats["batches_submitted"] += 1
        self.stats["batch_requests"] += len(take)
        self._results_future(batch_id)
        for p in take:
            if not p.placed.done():
                p.placed.set_result(batch_id)
        self._spawn(self._collect(local_id, batch_id, tokens, counted=True))

    async def _refused(self, local_id: str, tokens: int, retry_after: float | None) -> None:
        """The provider's queue is full: wait for one of our batches to end (or for Retry-After)."""
        if self.ledger is not None:
            await self.ledger.ended(local_id, "not_submitted")
        async with self._capacity:
            self.stats["batches_in_progress"] -= 1
            self._tokens_in_progress -= tokens
            level = self.stats["batches_in_progress"]
            self._queue_full_at = level
            if level == 0:  # nothing of ours to wait for: the provider's queue is someone else's
                self._queue_full_at = None
                self._capacity.notify_all()
        if level == 0:
            await asyncio.sleep(retry_after if retry_after is not None else self.settings.poll_s)

    async def _collect(self, local_id: str, batch_id: str, tokens: int, counted: bool = False) -> None:
        """Poll a batch with backoff until it ends, then hand its results to the waiting requests."""
        future = self._results_future(batch_id)
        if not counted:
            async with self._capacity:
                self.stats["batches_in_progress"] += 1
        delay = self.settings.poll_s
        try:
            while True:
                state = await self.api.retrieve(batch_id)
                if state.ended:
                    break
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.poll_max_s)
            results = {} if state.failure else await self.api.results(state)
            if state.failure:
                self._failures[batch_id] = state
            elif state.status != "completed" and state.status != "ended":
                self._failures[batch_id] = state
            if self.ledger is not None:
                await self.ledger.ended(local_id, state.status)
            if not future.done():
                future.set_result(results)
        except ModelError as exc:
            if exc.http_status == 404:  # the batch or its results are gone (archived, deleted): its requests go again
                self._failures[batch_id] = BatchState(batch_id, "gone", True, f"the provider no longer has it ({exc})"[:300])
                if self.ledger is not None:
                    await self.ledger.ended(local_id, "gone")
                if not future.done():
                    future.set_result({})
            elif not future.done():
                future.set_exception(exc)
        finally:
            self.stats["batches_done"] += 1
            async with self._capacity:
                self.stats["batches_in_progress"] -= 1
                self._tokens_in_progress -= tokens
                level = self.stats["batches_in_progress"]
                refused = self._failures.get(batch_id)
                if refused is not None and refused.failure_code == "token_limit_exceeded":
                    self._queue_full_at = level or None  # OpenAI's enqueued limit: no more than are running now
                elif self._queue_full_at is not None and level < self._queue_full_at:
                    self._queue_full_at = None  # room again: try the configured limit
                self._capacity.notify_all()


__all__ = ["BatchClient", "BatchSettings", "batch_settings", "request_key"]
