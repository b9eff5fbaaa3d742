"""The providers' batch APIs on the wire (shapes: tests/fixtures/providers/batch_*.json).

- OpenAI Batch API: the requests go up as a JSONL file (``POST /files``, purpose ``batch``), a batch is
  created from it (``POST /batches``, 24 h window), polled (``GET /batches/{id}``), and its output and error
  files are downloaded (``GET /files/{id}/content``). Up to 50,000 requests or 200 MB per batch.
- Anthropic Message Batches: one ``POST /messages/batches`` with the requests inline, polled
  (``GET /messages/batches/{id}``), results from its ``results_url`` (JSONL). Up to 100,000 requests or
  256 MB per batch.

Every request's result comes back as an ``ItemResult``: ``succeeded`` (the reply body, as the direct
endpoint would have sent it), ``errored`` (the HTTP status and error body), ``expired`` or ``canceled``.
Control calls are retried on network errors and retryable statuses; a full provider queue (HTTP 429 on
create) is ``QueueFull``.
"""

from __future__ import annotations

import abc
import asyncio
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp

from ..bounds import BodyTooLarge, read_body
from ..errors import ModelError
from .base import ModelClient, backoff_seconds, expected_base_url, retryable_status, server_pause
from .network import redact_url

HEADERS_FIELD = "agentbench_headers"  # the mock model's task headers, sent inside a line (task_header only)
# Anthropic's error types (ErrorResponse.error.type) and the HTTP status each stands for
ANTHROPIC_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
                          "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                          "timeout_error": 504, "overloaded_error": 529}  # fmt: skip


@dataclass
class BatchLine:
    custom_id: str
    body: dict[str, Any]
    headers: dict[str, str] | None = None


@dataclass
class ItemResult:
    kind: str  # succeeded | errored | expired | canceled
    status: int | None = None  # the request's HTTP status (200 when succeeded; None when it never ran)
    body: bytes = b""  # the reply (succeeded) or the error body (errored), JSON


@dataclass
class BatchState:
    batch_id: str
    status: str  # the provider's word (OpenAI status, Anthropic processing_status)
    ended: bool
    failure: str | None = None  # the whole batch failed (OpenAI "failed"): the provider's reason
    failure_code: str | None = None
    raw: dict[str, Any] | None = None


class QueueFull(Exception):
    """The provider's batch queue is full (HTTP 429 on create): submit again after some batches ended."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BatchAPI(abc.ABC):
    """One provider's batch endpoints, over the model client's session, key and route."""

    provider: str
    max_requests: int
    max_bytes: int

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.config = client.config
        self.base_url = client.base_url
        self._timeout = aiohttp.ClientTimeout(total=max(client.config.timeout, 60.0))

    @abc.abstractmethod
    def _headers(self) -> dict[str, str]: ...

    @abc.abstractmethod
    async def create(self, lines: list[BatchLine], on_file: Any) -> str:
        """Submit the lines; returns the batch id. ``on_file(file_id)`` is awaited between upload and create."""

    @abc.abstractmethod
    async def retrieve(self, batch_id: str) -> BatchState: ...

    @abc.abstractmethod
    async def results(self, state: BatchState) -> dict[str, ItemResult]: ...

    @abc.abstractmethod
    async def cancel(self, batch_id: str) -> None: ...

    @abc.abstractmethod
    async def find(self, file_id: str | None, recorded_at: datetime | None, n_requests: int, known: set[str]) -> str | None:
        """The batch a killed run created but had not recorded yet (the kill fell between creating it and
        writing its id): OpenAI's by its uploaded input file; Anthropic's (no file, no metadata) as the first
        batch of ``n_requests`` created after ``recorded_at`` that is not ``known``. A wrong guess costs
        nothing: the requests whose custom ids its results lack are submitted again. None: not created."""

    def line_bytes(self, line: BatchLine) -> int:
        return len(json.dumps(line.body)) + 200

    async def _call(self, method: str, url: str, *, what: str, **kwargs: Any) -> bytes:
        """One control request, retried like a model call; a non-retryable refusal is a ``ModelError``."""
        headers = {**self._headers(), **kwargs.pop("headers", {})}
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self.client.session.request(method, url, headers=headers, timeout=self._timeout, **self.client._via, **kwargs) as resp:
                    try:
                        raw = await read_body(resp, self.config.max_response_bytes)
                    except BodyTooLarge as exc:
                        raise ModelError(f"{self.config.name} ({self.base_url}): {what}: HTTP {resp.status}, {exc}; not read "
                                         "further (raise max_response_bytes, or batch fewer requests)", http_status=resp.status) from None  # fmt: skip
                    status, asked = resp.status, server_pause(resp.headers)
            except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                if attempt > self.config.max_retries:
                    raise ModelError(f"{self.config.name}: {what} failed after {attempt} attempts: {error}"[:500]) from None
                await asyncio.sleep(backoff_seconds(self.config, attempt, None))
                continue
            if 200 <= status < 300:
                return raw
            text = self.client._redact(raw.decode("utf-8", "replace"))[:300]
            if status == 429 and what == "creating a batch":
                raise QueueFull(f"{self.config.name}: the provider's batch queue is full (HTTP 429): {text}", self.config.pause_for(asked))
            if retryable_status(status) and attempt <= self.config.max_retries:
                await asyncio.sleep(max(self.config.pause_for(asked) or 0.0, backoff_seconds(self.config, attempt, None)))
                continue
            # a 404 creating a batch is a wrong base_url (polling one, the batch is gone: the caller handles that)
            creating = what in ("creating a batch", "uploading the batch file")
            where = f" ({method} {redact_url(url)}; base_url: {expected_base_url(self.config.provider)})" if status == 404 and creating else ""
            raise ModelError(f"{self.config.name} ({self.base_url}): {what}: HTTP {status}{where}: {text}", http_status=status)

    async def _json(self, method: str, url: str, *, what: str, **kwargs: Any) -> dict[str, Any]:
        raw = await self._call(method, url, what=what, **kwargs)
        try:
            data = json.loads(raw)
        except ValueError:
            raise ModelError(f"{self.config.name}: {what}: the reply is not JSON: {raw[:200]!r}") from None
        if not isinstance(data, dict):
            raise ModelError(f"{self.config.name}: {what}: expected a JSON object, got {type(data).__name__}")
        return data


def _jsonl(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


class OpenAIBatchAPI(BatchAPI):
    provider = "openai"
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024
    ENDPOINT = "/v1/chat/completions"

    def _headers(self) -> dict[str, str]:
        key = self.config.api_key()
        return {**self.config.headers, **({"Authorization": f"Bearer {key}"} if key else {})}

    def _line(self, line: BatchLine) -> dict[str, Any]:
        out: dict[str, Any] = {"custom_id": line.custom_id, "method": "POST", "url": self.ENDPOINT, "body": line.body}
        if line.headers:
            out[HEADERS_FIELD] = line.headers
        return out

    async def create(self, lines: list[BatchLine], on_file: Any) -> str:
        data = "".join(json.dumps(self._line(line)) + "\n" for line in lines).encode()
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", data, filename="agentbench-batch.jsonl", content_type="application/jsonl")
        uploaded = await self._json("POST", f"{self.base_url}/files", what="uploading the batch file", data=form)
        file_id = str(uploaded["id"])
        await on_file(file_id)
        body = {"input_file_id": file_id, "endpoint": self.ENDPOINT, "completion_window": "24h",
                "metadata": {"agentbench_model": self.config.name[:512]}}  # fmt: skip
        batch = await self._json("POST", f"{self.base_url}/batches", what="creating a batch", json=body)
        return str(batch["id"])

    async def retrieve(self, batch_id: str) -> BatchState:
        b = await self._json("GET", f"{self.base_url}/batches/{batch_id}", what=f"polling batch {batch_id}")
        status = str(b.get("status"))
        failure = code = None
        if status == "failed":
            errors = ((b.get("errors") or {}).get("data") or [{}])
            failure = "; ".join(str(e.get("message") or e.get("code")) for e in errors)[:300] or "the batch failed"
            code = errors[0].get("code")
        return BatchState(batch_id, status, status in ("completed", "failed", "expired", "cancelled"), failure, code, b)

    async def results(self, state: BatchState) -> dict[str, ItemResult]:
        out: dict[str, ItemResult] = {}
        for field_name in ("output_file_id", "error_file_id"):
            file_id = (state.raw or {}).get(field_name)
            if not file_id:
                continue
            raw = await self._call("GET", f"{self.base_url}/files/{file_id}/content", what=f"downloading {field_name} of {state.batch_id}")
            for line in _jsonl(raw):
                out[str(line["custom_id"])] = _openai_item(line)
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._call("POST", f"{self.base_url}/batches/{batch_id}/cancel", what=f"cancelling batch {batch_id}")

    async def find(self, file_id: str | None, recorded_at: datetime | None, n_requests: int, known: set[str]) -> str | None:
        if not file_id:
            return None  # killed before the upload: no batch
        after: str | None = None
        for _ in range(50):  # the newest 5,000 batches
            page = await self._json("GET", f"{self.base_url}/batches", what="listing batches",
                                    params={"limit": "100", **({"after": after} if after else {})})  # fmt: skip
            for b in page.get("data") or []:
                if b.get("input_file_id") == file_id:
                    return str(b["id"])
            if not page.get("has_more") or not page.get("last_id"):
                return None
            after = str(page["last_id"])
        return None


def _openai_item(line: dict[str, Any]) -> ItemResult:
    error, response = line.get("error"), line.get("response")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        if code == "batch_expired":
            return ItemResult("expired")
        if code == "batch_cancelled":
            return ItemResult("canceled")
        return ItemResult("errored", None, json.dumps({"error": error}).encode())
    if not isinstance(response, dict):
        return ItemResult("errored", None, json.dumps({"error": {"message": "no response in the batch output"}}).encode())
    status = int(response.get("status_code") or 0)
    body = json.dumps(response.get("body")).encode()
    return ItemResult("succeeded" if status == 200 else "errored", status, body)


class AnthropicBatchAPI(BatchAPI):
    provider = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def _headers(self) -> dict[str, str]:
        key = self.config.api_key()
        return {"anthropic-version": self.config.anthropic_version, **self.config.headers, **({"x-api-key": key} if key else {})}

    async def create(self, lines: list[BatchLine], on_file: Any) -> str:
        requests = []
        for line in lines:
            item: dict[str, Any] = {"custom_id": line.custom_id, "params": line.body}
            if line.headers:
                item[HEADERS_FIELD] = line.headers
            requests.append(item)
        batch = await self._json("POST", f"{self.base_url}/messages/batches", what="creating a batch", json={"requests": requests})
        return str(batch["id"])

    async def retrieve(self, batch_id: str) -> BatchState:
        b = await self._json("GET", f"{self.base_url}/messages/batches/{batch_id}", what=f"polling batch {batch_id}")
        status = str(b.get("processing_status"))
        return BatchState(batch_id, status, status == "ended", raw=b)

    async def results(self, state: BatchState) -> dict[str, ItemResult]:
        url = (state.raw or {}).get("results_url") or f"{self.base_url}/messages/batches/{state.batch_id}/results"
        raw = await self._call("GET", url, what=f"downloading the results of {state.batch_id}")
        out: dict[str, ItemResult] = {}
        for line in _jsonl(raw):
            result = line.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded":
                out[str(line["custom_id"])] = ItemResult("succeeded", 200, json.dumps(result.get("message")).encode())
            elif kind == "errored":
                error = result.get("error") or {}
                inner = error.get("error") if isinstance(error.get("error"), dict) else {}
                status = ANTHROPIC_ERROR_STATUS.get(str(inner.get("type")), 500)
                out[str(line["custom_id"])] = ItemResult("errored", status, json.dumps(error).encode())
            else:
                out[str(line["custom_id"])] = ItemResult("canceled" if kind == "canceled" else "expired")
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._call("POST", f"{self.base_url}/messages/batches/{batch_id}/cancel", what=f"cancelling batch {batch_id}")

    async def find(self, file_id: str | None, recorded_at: datetime | None, n_requests: int, known: set[str]) -> str | None:
        if recorded_at is None:
            return None
        since = recorded_at.timestamp() - 5  # clocks differ a little
        candidates = []
        after: str | None = None
        for _ in range(20):  # the newest 2,000 batches (the list is newest first)
            page = await self._json("GET", f"{self.base_url}/messages/batches", what="listing batches",
                                    params={"limit": "100", **({"after_id": after} if after else {})})  # fmt: skip
            data = page.get("data") or []
            for b in data:
                created = _rfc3339(b.get("created_at"))
                if created is not None and created >= since and b.get("id") not in known \
                        and sum((b.get("request_counts") or {}).values()) == n_requests:
                    candidates.append((created, str(b["id"])))
            oldest = _rfc3339(data[-1].get("created_at")) if data else None
            if not page.get("has_more") or not page.get("last_id") or (oldest is not None and oldest < since):
                break
            after = str(page["last_id"])
        return min(candidates)[1] if candidates else None


def _rfc3339(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


BATCH_APIS: dict[str, type[BatchAPI]] = {"openai": OpenAIBatchAPI, "anthropic": AnthropicBatchAPI}
