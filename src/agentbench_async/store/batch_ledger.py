"""The record of submitted batches in the run file (tables ``batches`` and ``batch_requests``).

A batch is recorded before it is created (its requests, by custom id and request key), its OpenAI input file
when uploaded, and its provider id once created, each in its own small transaction on a cursor of its own
(the episode writer's transactions touch other tables). After a kill, a resumed run reads which requests of
its unfinished episodes are already in a batch and collects those batches instead of paying for the
requests again.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from ..records import utcnow
from .db import WRITE_FAILURES, Store, write_failure


@dataclass(frozen=True)
class Recorded:
    """A request already submitted in a batch: where its result is."""

    local_id: str
    batch_id: str | None
    input_file_id: str | None
    custom_id: str
    attempt: int
    created_at: datetime | None = None  # when the batch was recorded (just before it was created)
    n_requests: int = 0


@dataclass(frozen=True)
class RequestEntry:
    custom_id: str
    request_key: str
    episode_id: str
    turn: int
    caller: str
    attempt: int


class BatchLedger:
    def __init__(self, store: Store, run_id: str, fingerprint: str) -> None:
        self.run_id = run_id
        self.fingerprint = fingerprint
        self._con = store.con.cursor()
        self._path = store.path
        self._lock = asyncio.Lock()

    async def _run(self, sql: str, params: list[Any], many: list[list[Any]] | None = None) -> None:
        def write() -> None:
            self._con.execute("BEGIN TRANSACTION")
            try:
                self._con.execute(sql, params)
                if many:
                    self._con.executemany(
                        "INSERT INTO batch_requests (local_id, custom_id, request_key, episode_id, turn, caller, attempt) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", many)  # fmt: skip
                self._con.execute("COMMIT")
            except duckdb.Error as exc:
                with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already ended the transaction
                    self._con.execute("ROLLBACK")
                if isinstance(exc, WRITE_FAILURES):
                    raise write_failure(self._path, exc, "recording a batch") from None
                raise

        async with self._lock:
            await asyncio.to_thread(write)

    async def intent(self, local_id: str, model: str, provider: str, entries: list[RequestEntry]) -> None:
        """Before the batch is created: its requests (a kill after this point finds them on resume)."""
        await self._run(
            "INSERT INTO batches (local_id, run_id, fingerprint, model, provider, n_requests, created_at, status) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'submitting')",
            [local_id, self.run_id, self.fingerprint, model, provider, len(entries), utcnow()],
            [[local_id, e.custom_id, e.request_key, e.episode_id, e.turn, e.caller, e.attempt] for e in entries],
        )

    async def uploaded(self, local_id: str, file_id: str) -> None:
        await self._run("UPDATE batches SET input_file_id = ? WHERE local_id = ?", [file_id, local_id])

    async def submitted(self, local_id: str, batch_id: str) -> None:
        await self._run("UPDATE batches SET batch_id = ?, status = 'submitted' WHERE local_id = ?", [batch_id, local_id])

    async def ended(self, local_id: str, status: str) -> None:
        await self._run("UPDATE batches SET status = ?, ended_at = ? WHERE local_id = ?", [status, utcnow(), local_id])

    def recorded(self, model: str, done: set[str]) -> dict[str, Recorded]:
        """Request key -> its latest submission, for this config's requests of ``model`` whose episode is not
        stored as done (called once at start, before any batch of this invocation)."""
        rows = self._con.execute(
            """
            SELECT r.request_key, r.episode_id, b.local_id, b.batch_id, b.input_file_id, r.custom_id, r.attempt, b.created_at,
                   b.n_requests
            FROM batch_requests AS r JOIN batches AS b USING (local_id)
            WHERE b.fingerprint = ? AND b.model = ? AND b.status <> 'not_submitted'
            ORDER BY r.attempt
            """,
            [self.fingerprint, model],
        ).fetchall()
        out: dict[str, Recorded] = {}
        for key, episode_id, local_id, batch_id, file_id, custom_id, attempt, created_at, n_requests in rows:
            if episode_id not in done:
                out[key] = Recorded(local_id, batch_id, file_id, custom_id, attempt, created_at, n_requests or 0)  # later attempts win
        return out

    def close(self) -> None:
        self._con.close()
