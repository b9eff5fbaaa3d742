"""The mock model's batch APIs, in the providers' documented shapes (tests/fixtures/providers/batch_*.json):

- OpenAI Batch API: ``POST /v1/files`` (multipart, purpose ``batch``, a JSONL file of
  ``{custom_id, method, url, body}`` lines), ``POST /v1/batches``, ``GET /v1/batches[/{id}]``,
  ``POST /v1/batches/{id}/cancel``, ``GET /v1/files/{id}/content`` (the output and error files).
- Anthropic Message Batches: ``POST /v1/messages/batches`` (``{requests: [{custom_id, params}]}``),
  ``GET /v1/messages/batches[/{id}]``, ``GET /v1/messages/batches/{id}/results`` (JSONL),
  ``POST /v1/messages/batches/{id}/cancel``.

Each batch is processed in the background after ``batch_delay_s``, every request answered exactly as the
direct endpoint would answer it (``MockModelServer.answer``). It can misbehave on purpose: per-request errors
(``batch_error_script``: ``error`` = a server error for that request, ``ok`` = none), the first
``batch_expire_batches`` batches expire after half of their requests ran, and more than
``batch_max_in_progress`` batches at once are refused as the providers refuse them (OpenAI: the batch fails
with ``token_limit_exceeded``; Anthropic: HTTP 429). ``processed`` counts the requests that ran (what a
provider bills), by custom_id.

A request's ``X-AgentBench-*`` task headers (which the mock needs to pick a policy) ride in an
``agentbench_headers`` field of the line, sent only to the mock (``task_header: true``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from ..models.batch_api import HEADERS_FIELD
_ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                          404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}  # fmt: skip
# (request body, request headers, Anthropic's shape) -> (HTTP status, reply body): the server's answer to one request
Answer = Callable[[dict[str, Any], Mapping[str, str], bool], tuple[int, dict[str, Any]]]


@dataclass
class _Batch:
    id: str
    anthropic: bool
    requests: list[dict[str, Any]]  # {custom_id, body, headers}
    created_at: float
    input_file_id: str | None = None
    metadata: dict[str, Any] | None = None
    status: str = "in_progress"  # OpenAI words; Anthropic's processing_status is derived
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom_id -> result line
    ended_at: float | None = None
    cancel: bool = False
    failed_errors: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


class MockBatches:
    """Batch state of one mock server."""

    def __init__(self, answer: Answer, *, delay_s: float, expire_batches: int, error_script: Iterable[str],
                 max_in_progress: int | None) -> None:  # fmt: skip
        """``answer``: the server's reply to one request (``MockModelServer.answer``); the rest: its ``batch_*``
        options (``MockOptions``)."""
        self.answer = answer
        self.delay_s = delay_s
        self.expire_left = expire_batches
        self.error_script = deque(error_script)
        self.max_in_progress = max_in_progress
        self.batches: dict[str, _Batch] = {}
        self.files: dict[str, tuple[str, bytes]] = {}  # id -> (purpose, content)
        self.processed: Counter[str] = Counter()  # custom_id -> times run (billed)
        self.stats: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_post("/v1/files", self._upload)
        r.add_get("/v1/files/{id}/content", self._file_content)
        r.add_post("/v1/batches", self._openai_create)
        r.add_get("/v1/batches", self._openai_list)
        r.add_get("/v1/batches/{id}", self._openai_retrieve)
        r.add_post("/v1/batches/{id}/cancel", self._cancel)
        r.add_post("/v1/messages/batches", self._anthropic_create)
        r.add_get("/v1/messages/batches", self._anthropic_list)
        r.add_get("/v1/messages/batches/{id}", self._anthropic_retrieve)
        r.add_get("/v1/messages/batches/{id}/results", self._anthropic_results)
        r.add_post("/v1/messages/batches/{id}/cancel", self._cancel)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- shared ------------------------------------------------------------------------------------
    def _in_progress(self) -> int:
        return sum(1 for b in self.batches.values() if b.ended_at is None)

    def _start(self, batch: _Batch) -> None:
        self.batches[batch.id] = batch
        self.stats["batches_created"] += 1
        self.stats["batch_requests_submitted"] += len(batch.requests)
        task = asyncio.create_task(self._process(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process(self, batch: _Batch) -> None:
        await asyncio.sleep(self.delay_s)
        expire_at = len(batch.requests) // 2 if self.expire_left > 0 else None
        if expire_at is not None:
            self.expire_left -= 1
        for index, item in enumerate(batch.requests):
            if batch.cancel or (expire_at is not None and index >= expire_at):
                kind = "canceled" if batch.cancel else "expired"
                batch.results[item["custom_id"]] = self._unprocessed(batch, item["custom_id"], kind)
                continue
            batch.results[item["custom_id"]] = self._run(batch, item)
            await asyncio.sleep(0)
        batch.status = "cancelled" if batch.cancel else "expired" if expire_at is not None else "completed"
        batch.ended_at = time.time()
        if not batch.anthropic:
            self._write_openai_files(batch)
        self.stats[f"batches_{batch.status}"] += 1

    def _run(self, batch: _Batch, item: dict[str, Any]) -> dict[str, Any]:
        custom_id = item["custom_id"]
        fault = self.error_script.popleft() if self.error_script else "ok"
        if fault == "error":
            status, body = 500, {"error": {"message": "injected batch request error", "type": "server_error"}}
            self.stats["batch_request_errors"] += 1
        else:
            status, body = self.answer(item["body"], item["headers"], batch.anthropic)
            if status == 200:
                self.processed[custom_id] += 1
        if batch.anthropic:
            if status == 200:
                return {"custom_id": custom_id, "result": {"type": "succeeded", "message": body}}
            err = body.get("error") if isinstance(body.get("error"), dict) else {}
            kind = err.get("type") if body.get("type") == "error" else _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
            return {"custom_id": custom_id, "result": {"type": "errored", "error": {
                "type": "error", "error": {"type": kind, "message": str(err.get("message") or body)}}}}  # fmt: skip
        return {"id": "batch_req_" + uuid.uuid4().hex[:24], "custom_id": custom_id,
                "response": {"status_code": status, "request_id": "req_" + uuid.uuid4().hex[:12], "body": body}, "error": None}  # fmt: skip

    def _unprocessed(self, batch: _Batch, custom_id: str, kind: str) -> dict[str, Any]:
        self.stats[f"batch_requests_{kind}"] += 1
        if batch.anthropic:
            return {"custom_id": custom_id, "result": {"type": kind}}
        code, message = (("batch_expired", "This request could not be executed before the completion window expired.") if kind == "expired"
                         else ("batch_cancelled", "This request was cancelled before it could be executed."))  # fmt: skip
        return {"id": "batch_req_" + uuid.uuid4().hex[:24], "custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}

    def _write_openai_files(self, batch: _Batch) -> None:
        ok = [r for r in batch.results.values() if r["error"] is None and r["response"]["status_code"] == 200]
        bad = [r for r in batch.results.values() if r not in ok]
        if ok:
            batch.output_file_id = self._store_file("batch_output", ok)
        if bad:
            batch.error_file_id = self._store_file("batch_output", bad)

    def _store_file(self, purpose: str, lines: list[dict[str, Any]]) -> str:
        file_id = "file-" + uuid.uuid4().hex[:24]
        self.files[file_id] = (purpose, "".join(json.dumps(line) + "\n" for line in lines).encode())
        return file_id

    def _get(self, request: web.Request, anthropic: bool) -> _Batch:
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch.anthropic != anthropic:
            raise web.HTTPNotFound(text=json.dumps(_not_found(anthropic)), content_type="application/json")
        return batch

    async def _cancel(self, request: web.Request) -> web.Response:
        anthropic = request.path.startswith("/v1/messages/")
        batch = self._get(request, anthropic)
        if batch.ended_at is None:
            batch.cancel = True
            batch.status = "cancelling"
        return web.json_response(self._anthropic_object(request, batch) if anthropic else self._openai_object(batch))

    # -- OpenAI ------------------------------------------------------------------------------------
    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        purpose = str(form.get("purpose") or "")
        if purpose != "batch" or not isinstance(upload, web.FileField):
            return web.json_response({"error": {"message": "expected multipart fields 'purpose' (batch) and 'file'",
                                                "type": "invalid_request_error", "param": None, "code": None}}, status=400)  # fmt: skip
        content = upload.file.read()
        file_id = "file-" + uuid.uuid4().hex[:24]
        self.files[file_id] = (purpose, content)
        self.stats["files_uploaded"] += 1
        return web.json_response({"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                                  "filename": upload.filename, "purpose": purpose, "status": "processed", "expires_at": None,
                                  "status_details": None})  # fmt: skip

    async def _file_content(self, request: web.Request) -> web.Response:
        entry = self.files.get(request.match_info["id"])
        if entry is None:
            raise web.HTTPNotFound(text=json.dumps(_not_found(False)), content_type="application/json")
        return web.Response(body=entry[1], content_type="application/octet-stream")

    async def _openai_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        entry = self.files.get(str(body.get("input_file_id")))
        if entry is None or body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return web.json_response({"error": {"message": "input_file_id must name an uploaded batch file; endpoint /v1/chat/completions; "
                                                "completion_window 24h", "type": "invalid_request_error", "param": None, "code": None}},
                                     status=400)  # fmt: skip
        requests = []
        for line in entry[1].decode().splitlines():
            if line.strip():
                item = json.loads(line)
                requests.append({"custom_id": item["custom_id"], "body": item["body"], "headers": item.get(HEADERS_FIELD) or {}})
        batch = _Batch(id="batch_" + uuid.uuid4().hex[:24], anthropic=False, requests=requests, created_at=time.time(),
                       input_file_id=str(body["input_file_id"]), metadata=body.get("metadata"))  # fmt: skip
        if self.max_in_progress is not None and self._in_progress() >= self.max_in_progress:
            # OpenAI accepts the batch and fails it while validating when the model's enqueued limit is reached
            batch.status, batch.ended_at = "failed", time.time()
            batch.failed_errors = [{"code": "token_limit_exceeded", "line": None, "param": None,
                                    "message": f"Enqueued token limit reached for {requests[0]['body'].get('model') if requests else 'the model'}. "
                                               "Please try again once some in_progress batches have been completed."}]  # fmt: skip
            self.batches[batch.id] = batch
            self.stats["batches_refused"] += 1
        else:
            self._start(batch)
        return web.json_response(self._openai_object(batch))

    async def _openai_retrieve(self, request: web.Request) -> web.Response:
        self.stats["batch_polls"] += 1
        return web.json_response(self._openai_object(self._get(request, False)))

    async def _openai_list(self, request: web.Request) -> web.Response:
        mine = [b for b in self.batches.values() if not b.anthropic]
        mine.sort(key=lambda b: b.created_at, reverse=True)
        after = request.query.get("after")
        if after:
            ids = [b.id for b in mine]
            mine = mine[ids.index(after) + 1:] if after in ids else []
        limit = int(request.query.get("limit", 20))
        page = mine[:limit]
        return web.json_response({"object": "list", "data": [self._openai_object(b) for b in page],
                                  "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
                                  "has_more": len(mine) > limit})  # fmt: skip

    def _openai_object(self, b: _Batch) -> dict[str, Any]:
        done = sum(1 for r in b.results.values() if r["error"] is None and r["response"]["status_code"] == 200)
        ended = int(b.ended_at) if b.ended_at else None
        return {
            "id": b.id, "object": "batch", "endpoint": "/v1/chat/completions",
            "errors": {"object": "list", "data": b.failed_errors} if b.failed_errors else None,
            "input_file_id": b.input_file_id, "completion_window": "24h", "status": b.status,
            "output_file_id": b.output_file_id, "error_file_id": b.error_file_id, "created_at": int(b.created_at),
            "in_progress_at": None if b.failed_errors else int(b.created_at), "expires_at": int(b.created_at) + 86400,
            "finalizing_at": ended if b.status in ("completed", "expired") else None,
            "completed_at": ended if b.status == "completed" else None, "failed_at": ended if b.status == "failed" else None,
            "expired_at": ended if b.status == "expired" else None, "cancelling_at": None,
            "cancelled_at": ended if b.status == "cancelled" else None,
            "request_counts": {"total": len(b.requests), "completed": done, "failed": len(b.results) - done},
            "metadata": b.metadata,
        }  # fmt: skip

    # -- Anthropic ---------------------------------------------------------------------------------
    async def _anthropic_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        items = body.get("requests")
        if not isinstance(items, list) or not items:
            return web.json_response({"type": "error", "error": {"type": "invalid_request_error", "message": "requests: expected a non-empty list"}},
                                     status=400)  # fmt: skip
        if self.max_in_progress is not None and self._in_progress() >= self.max_in_progress:
            self.stats["batches_refused"] += 1
            return web.json_response({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of batch requests in the "
                                      "processing queue exceeds your rate limit."}}, status=429, headers={"retry-after": "0.2"})  # fmt: skip
        requests = [{"custom_id": i["custom_id"], "body": i["params"], "headers": i.get(HEADERS_FIELD) or {}} for i in items]
        batch = _Batch(id="msgbatch_" + uuid.uuid4().hex[:24], anthropic=True, requests=requests, created_at=time.time())
        self._start(batch)
        return web.json_response(self._anthropic_object(request, batch))

    async def _anthropic_retrieve(self, request: web.Request) -> web.Response:
        self.stats["batch_polls"] += 1
        return web.json_response(self._anthropic_object(request, self._get(request, True)))

    async def _anthropic_list(self, request: web.Request) -> web.Response:
        mine = sorted((b for b in self.batches.values() if b.anthropic), key=lambda b: b.created_at, reverse=True)
        return web.json_response({"data": [self._anthropic_object(request, b) for b in mine], "has_more": False,
                                  "first_id": mine[0].id if mine else None, "last_id": mine[-1].id if mine else None})  # fmt: skip

    async def _anthropic_results(self, request: web.Request) -> web.Response:
        batch = self._get(request, True)
        if batch.ended_at is None:
            return web.json_response({"type": "error", "error": {"type": "invalid_request_error",
                                      "message": f"Message Batch {batch.id} has not yet ended."}}, status=400)  # fmt: skip
        text = "".join(json.dumps(r) + "\n" for r in batch.results.values())
        return web.Response(text=text, content_type="application/binary")

    def _anthropic_object(self, request: web.Request, b: _Batch) -> dict[str, Any]:
        kinds = Counter(r["result"]["type"] for r in b.results.values()) if b.ended_at else Counter()
        processing = 0 if b.ended_at else len(b.requests)
        status = "ended" if b.ended_at else "canceling" if b.cancel else "in_progress"
        base = f"{request.scheme}://{request.host}/v1/messages/batches/{b.id}/results"
        return {
            "id": b.id, "type": "message_batch", "processing_status": status,
            "request_counts": {"processing": processing, "succeeded": kinds["succeeded"], "errored": kinds["errored"],
                               "canceled": kinds["canceled"], "expired": kinds["expired"]},
            "ended_at": _iso(b.ended_at), "created_at": _iso(b.created_at), "expires_at": _iso(b.created_at + 86400),
            "archived_at": None, "cancel_initiated_at": _iso(b.created_at) if b.cancel else None,
            "results_url": base if b.ended_at else None,
        }  # fmt: skip


def _not_found(anthropic: bool) -> dict[str, Any]:
    if anthropic:
        return {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}
    return {"error": {"message": "No such object", "type": "invalid_request_error", "param": "id", "code": None}}
