"""The single writer of a run's DuckDB file.

Finished episodes are queued, and so are the turns of episodes still running (``live_sink``); one coroutine drains the queue into batches and writes each batch in one
transaction from Arrow tables (``INSERT ... SELECT``), in a worker thread so the event loop never
waits on DuckDB. A batch is written at least every ``flush_interval`` seconds. Because an episode's
turns, calls and ``episodes`` row are in the same transaction, a crash (even ``kill -9``) loses at most
the episodes not yet flushed and never leaves half an episode.

Turns of running episodes go to ``live_turns`` at each flush (an episode that finished within the same
interval skips that table); its finish deletes them in the transaction that stores it. After each commit the
flush is published to ``FILE.live/`` for readers in other processes (``store/live.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import typing
from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import StoreError
from ..statuses import RETRY_ON_RESUME
from ..records import CallRow, EpisodeRecord, TurnRow
from ..redaction import redact_table
from .db import Store, write_failure
from .live import LivePublisher
from .schema import ATTEMPT_TABLES
from .storable import column_types, details_json, make_storable, storable_turns

_EPISODE_COLUMNS = (
    "run_id", "episode_id", "model", "env", "split", "task_id", "repeat", "status", "score", "success",
    "n_turns", "input_tokens", "output_tokens", "started_at", "finished_at", "error", "details", "source",
    "action_mode", "fingerprint", "paper_status", "attempts",
)  # fmt: skip
_RECORD_COLUMNS = tuple(c for c in _EPISODE_COLUMNS if c not in ("run_id", "fingerprint", "attempts"))  # taken from the record
_TURN_FIELDS = tuple(f.name for f in fields(TurnRow))
_CALL_FIELDS = tuple(f.name for f in fields(CallRow))
LiveSink = Callable[[list[TurnRow]], None]
_RUN_AGAIN = frozenset(RETRY_ON_RESUME)  # statuses a retry within the run or a resume runs again


def _columns(objects: list[Any], names: tuple[str, ...]) -> dict[str, list[Any]]:
    """The attributes ``names`` of ``objects`` as one list per name (a C-level pass per name: ~1.3x faster than
    transposing a tuple of every object's values)."""
    return {name: list(map(attrgetter(name), objects)) for name in names}


_ARROW_TYPES: dict[type, pa.DataType] = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}


def _value_types(*classes: type) -> dict[str, type]:
    """Column -> the one Python type its values have (``int | None`` -> int), for the fields of ``classes`` that have one."""
    out: dict[str, type] = {}
    for cls in classes:
        for name, hint in typing.get_type_hints(cls).items():
            kinds = [k for k in typing.get_args(hint) or (hint,) if k is not type(None)]
            if len(kinds) == 1 and kinds[0] in _ARROW_TYPES:
                out.setdefault(name, kinds[0])
    return out


# the text columns the writer adds (ids, the episode's details as JSON text), then the rows' own fields
_VALUE_TYPES = {"run_id": str, "episode_id": str, "fingerprint": str, "model": str, "env": str, "details": str,
                **_value_types(EpisodeRecord, TurnRow, CallRow)}  # fmt: skip


def _table(columns: dict[str, Any]) -> pa.Table:
    """Columns (lists of Python values, or Arrow arrays) as an Arrow table. A list whose values are all of its field's
    type (or None) is converted with that type: what pyarrow would infer, without inferring (a pass over every value,
    and an attempt to import dateutil for each list); any other list as pyarrow infers it (DuckDB casts it when
    inserting, as before)."""
    arrays = {}
    for name, values in columns.items():
        kind = _VALUE_TYPES.get(name)
        if kind is not None and isinstance(values, list) and set(map(type, values)) <= {kind, type(None)}:
            arrays[name] = pa.array(values, _ARROW_TYPES[kind])
        else:
            arrays[name] = pa.array(values) if isinstance(values, list) else values
    return pa.table(arrays)


def _timestamps(seconds: list[float]) -> pa.Array:
    """Unix seconds -> a TIMESTAMPTZ column, converted as a whole."""
    micros = pc.cast(pc.multiply(pa.array(seconds, pa.float64()), 1e6), pa.int64(), safe=False)
    return micros.cast(pa.timestamp("us", tz="UTC"))


class EpisodeWriter:
    """Async facade over the store: ``submit`` records, ``close`` flushes everything."""

    def __init__(self, store: Store, run_id: str, fingerprint: str, *, replace: set[str] | None = None,
                 flush_interval: float = 1.0, progress: Callable[[], dict[str, Any]] | None = None,
                 on_failure: Callable[[StoreError], None] | None = None) -> None:  # fmt: skip
        self.store = store
        # Episodes already stored for this config with an infrastructure status (and those of this run: submit): their re-run
        # replaces them, and the earlier attempt is kept in the attempt tables (_keep_attempts)
        self.replace = replace or set()
        self.run_id = run_id
        self.fingerprint = fingerprint
        self.flush_interval = flush_interval
        self._pending: list[EpisodeRecord] = []
        self._live: list[tuple[str, str, str, list[TurnRow]]] = []  # (episode_id, model, env, rows) of running episodes
        self._live_stored: set[str] = set()  # this run's episodes with rows in live_turns
        # this run's episodes whose first N turn rows are in live_turns, and the last of them: when the finished record
        # holds those very rows (this process ran the episode) they are read from there (DuckDB to Arrow) instead of
        # converted from Python values a second time; N = -1: not all of them, converted
        self._live_prefix: dict[str, _Prefix] = {}
        self._stale_live: set[str] = set()  # episodes with live_turns rows an earlier run of this config left
        self._progress = progress or dict
        self._publisher: LivePublisher | None = LivePublisher(store.con, store.path, run_id, fingerprint,
                                                               before_large_merge=store.checkpoint_ahead)
        self.live_error: str | None = None  # why live publishing stopped (the run goes on without it)
        self._http_429 = 0  # HTTP 429 answers in the calls of the episodes written so far
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.failure: StoreError | None = None  # why writing stopped (disk full, file removed): the run stops
        self._on_failure = on_failure
        self._inode = os.stat(store.path).st_ino
        self.episodes_written = 0
        self.rows_written = 0
        self.write_seconds = 0.0

    def start(self) -> None:
        self._task = asyncio.create_task(self._drain(), name="duckdb-writer")

    def submit(self, record: EpisodeRecord) -> None:
        if self.failure is None:  # after a failure nothing more is stored: the run is stopping
            self._pending.append(record)
            if record.status in _RUN_AGAIN:  # a retry within the run (or a resume) replaces it and keeps it as an earlier attempt
                self.replace.add(record.episode_id)

    def live_sink(self, episode_id: str, model: str, env: str) -> LiveSink:
        """Where a running episode hands its turns as each one completes (stored at the next flush)."""

        def sink(rows: list[TurnRow]) -> None:
            if rows:
                self._live.append((episode_id, model, env, rows))

        return sink

    async def close(self) -> None:
        """Write everything submitted so far and stop (after a failure: stop; ``failure`` says why)."""
        self._closing.set()
        if self._task is not None:
            await asyncio.shield(self._task)

    async def _drain(self) -> None:
        """Write until closed; a write that fails (disk full, file removed) ends the writer and tells the run
        (``on_failure``), which stops: what was committed before stays and a re-run resumes from it."""
        try:
            await self._drain_batches()
        except Exception as exc:  # noqa: BLE001 - whatever stopped the writer stops the run, in one line
            self.failure = exc if isinstance(exc, StoreError) else write_failure(self.store.path, exc, "writing")
            self._pending.clear()
            if self._on_failure is not None:
                self._on_failure(self.failure)
        finally:  # a live snapshot's merge in flight is stopped before the store closes (and removes the snapshot)
            await asyncio.to_thread(self._stop_live)

    async def _drain_batches(self) -> None:
        await asyncio.to_thread(self._start_live, self._progress())
        # Wake up once per interval (or at close) and write everything that accumulated in one batch.
        while True:
            try:
                await asyncio.wait_for(self._closing.wait(), self.flush_interval)
            except asyncio.TimeoutError:
                pass
            batch, self._pending = self._pending, []
            live, self._live = self._live, []
            self._http_429 += sum(c.http_status == 429 for rec in batch for c in rec.calls)
            progress = self._progress()
            progress["http_429"] = max(progress.get("http_429", 0), self._http_429)  # clients that count them know more
            for part in _rounds(batch):  # an episode retried within the interval: its attempts stored one after the other
                await asyncio.to_thread(self._write, part, live, progress)
                live = []
            if self._closing.is_set() and not self._pending:
                return

    def _start_live(self, progress: dict[str, Any]) -> None:
        try:
            rows = self.store.con.execute(
                "SELECT DISTINCT episode_id FROM live_turns WHERE run_id IN (SELECT run_id FROM runs WHERE fingerprint = ?)", [self.fingerprint]
            ).fetchall()
        except duckdb.Error as exc:
            raise write_failure(self.store.path, exc, "reading the live turns") from None
        self._stale_live = {r[0] for r in rows}
        self._live_call(lambda p: p.start(progress))

    def _live_call(self, action: Callable[[LivePublisher], None]) -> None:
        """Publish for live readers; a failure there stops publishing, never the run."""
        if self._publisher is None:
            return
        try:
            action(self._publisher)
        except (OSError, duckdb.Error, pa.ArrowException) as exc:
            self._stop_live()
            self.live_error = f"live reads of {self.store.path} stopped: {exc}"

    def _stop_live(self) -> None:
        """Stop publishing: a merge in flight is stopped and waited for (in the writer's thread, or once it has ended)."""
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            publisher.close()

    def _live_table(self, kept: list[tuple[str, str, str, list[TurnRow]]]) -> pa.Table:
        rows = [t for _, _, _, turns in kept for t in turns]
        cols: dict[str, list[Any]] = {
            "run_id": [self.run_id] * len(rows), "episode_id": [e for e, _, _, turns in kept for _ in turns],
            **_columns(rows, _TURN_FIELDS),
            "model": [m for _, m, _, turns in kept for _ in turns], "env": [v for _, _, v, turns in kept for _ in turns],
        }  # fmt: skip
        cols["created_at"] = _timestamps(cols["created_at"])
        return _table(cols)

    def _tables(self, batch: list[EpisodeRecord], live: list[tuple[str, str, str, list[TurnRow]]]) -> _Tables:
        """The batch as Arrow tables in the stored tables' column order (the INSERTs select *); raises on a
        value its column cannot hold (the caller makes the batch storable and builds again)."""
        # the values are read by attrgetter, a column at a time: ~5x faster than a getattr per field and row (this
        # thread holds the GIL meanwhile)
        ep_cols: dict[str, list[Any]] = {c: [] for c in _EPISODE_COLUMNS}
        ep_cols.update(_columns(batch, _RECORD_COLUMNS))
        stored = {rec.episode_id: n for rec in batch if (n := _stored_prefix(self._live_prefix.get(rec.episode_id), rec.turns))}
        turns = [t for rec in batch for t in rec.turns[stored.get(rec.episode_id, 0):]]
        calls = [k for rec in batch for k in rec.calls]
        turn_cols: dict[str, list[Any]] = {"run_id": [], "episode_id": [rec.episode_id for rec in batch
                                                                         for _ in range(len(rec.turns) - stored.get(rec.episode_id, 0))],
                                           **_columns(turns, _TURN_FIELDS)}  # fmt: skip
        call_cols: dict[str, list[Any]] = {"run_id": [], "episode_id": [rec.episode_id for rec in batch for _ in rec.calls],
                                           **_columns(calls, _CALL_FIELDS)}  # fmt: skip
        ep_cols["details"] = [details_json(d) for d in ep_cols["details"]]
        ep_cols["run_id"] = [self.run_id] * len(batch)
        ep_cols["fingerprint"] = [self.fingerprint] * len(batch)
        ep_cols["attempts"] = [1] * len(batch)  # an episode run again gets its count when its earlier attempt is moved (_commit)
        turn_cols["run_id"] = [self.run_id] * len(turn_cols["episode_id"])
        call_cols["run_id"] = [self.run_id] * len(call_cols["episode_id"])
        for cols, names in ((ep_cols, ("started_at", "finished_at")), (turn_cols, ("created_at",)), (call_cols, ("started_at",))):
            for name in names:
                cols[name] = _timestamps(cols[name])
        finished = {rec.episode_id for rec in batch}
        turn_table = self._with_stored_turns(_table(turn_cols), stored)
        if turn_table is None:  # the live rows were not all there as expected: every turn converted, as without them
            self._live_prefix = {**self._live_prefix, **dict.fromkeys(stored, _Prefix(-1, None))}
            return self._tables(batch, live)
        kept = [item for item in live if item[0] not in finished]  # finished within this interval: straight to turns
        # every text stored (turns, answers, details, errors) without the client's secrets (redaction.py): one step for all
        return _Tables(redact_table(_table(ep_cols)), redact_table(turn_table), redact_table(_table(call_cols)),
                       redact_table(self._live_table(kept)), finished,
                       _prefixes(self._live_prefix, kept))  # fmt: skip

    def _with_stored_turns(self, converted: pa.Table, stored: dict[str, int]) -> pa.Table | None:
        """``converted`` with the rows of finished episodes already in live_turns (the first ``stored[episode]`` of each),
        read from there in the converted rows' types; None when they are not all there."""
        if not stored:
            return converted
        con = self.store.con
        con.register("_stored", pa.table({"episode_id": list(stored), "n": list(stored.values())}))
        try:
            rows = con.sql(f"SELECT l.run_id, l.episode_id, {', '.join('l.' + f for f in _TURN_FIELDS)} FROM live_turns AS l "
                           "JOIN _stored AS s ON l.episode_id = s.episode_id AND l.seq < s.n WHERE l.run_id = $run",
                           params={"run": self.run_id}).to_arrow_table()  # fmt: skip
            if rows.num_rows != sum(stored.values()):
                return None
            return pa.concat_tables([rows.cast(converted.schema), converted])
        except (duckdb.Error, pa.ArrowException):
            return None
        finally:
            with contextlib.suppress(duckdb.Error):
                con.unregister("_stored")

    def _storable(self, batch: list[EpisodeRecord], live: list[tuple[str, str, str, list[TurnRow]]]) -> _Tables:
        """The batch's tables after every value its column cannot hold was set to null (named in the episode's error)."""
        types = column_types(self.store.con)
        for rec in batch:
            make_storable(rec, types)
        for _, _, _, rows in live:
            storable_turns(rows, types)
        return self._tables(batch, live)

    def _write(self, batch: list[EpisodeRecord], live: list[tuple[str, str, str, list[TurnRow]]], progress: dict[str, Any]) -> None:
        if not batch and not live:
            self._live_call(lambda p: p.heartbeat(progress))
            return
        start = time.perf_counter()
        try:
            tables = self._tables(batch, live)
        except _UNSTORABLE:
            tables = self._storable(batch, live)
        try:
            self._commit(batch, tables, progress, data_errors=True)
        except _DATA_ERRORS:  # a value Arrow took but its column refuses: once more with every value checked
            self._commit(batch, self._storable(batch, live), progress, data_errors=False)
        self._check_file()
        # while a merge of the live snapshot holds its own memory, DuckDB holds half as much (Store.after_commit)
        self.store.after_commit(merging=self._publisher is not None and self._publisher.merging)
        self.episodes_written += len(batch)
        self.rows_written += tables.episodes.num_rows + tables.turns.num_rows + tables.calls.num_rows
        self.write_seconds += time.perf_counter() - start

    def _commit(self, batch: list[EpisodeRecord], tables: _Tables, progress: dict[str, Any], *, data_errors: bool) -> None:
        """One transaction: the batch's episodes, turns and calls, and the live turns. A value a column refuses is
        raised as it is when ``data_errors`` (the caller checks every value and tries again); any other failure
        (disk full, file gone) is a ``StoreError``."""
        replaced = [rec.episode_id for rec in batch if rec.episode_id in self.replace]
        finished, live_table = tables.finished, tables.live
        new_live = set(live_table.column("episode_id").to_pylist()) - self._live_stored
        # live turns to delete: those of episodes that finished now, and those a killed earlier run left for
        # an episode that runs again
        done_live = sorted(finished & (self._live_stored | self._stale_live))
        restarted = sorted(new_live & self._stale_live)
        con = self.store.con
        same_config = "run_id IN (SELECT run_id FROM runs WHERE fingerprint = $fp)"
        try:
            con.execute("BEGIN TRANSACTION")
            if replaced:
                # A re-run of an infrastructure failure replaces the earlier attempt (one row per episode), which is kept
                # in the attempt tables
                con.register("_ids", pa.table({"episode_id": replaced}))
                tables = tables._replace(episodes=self._keep_attempts(con, same_config, tables.episodes))
                for table in ("episodes", "turns", "model_calls"):
                    con.execute(
                        f"DELETE FROM {table} WHERE episode_id IN (SELECT episode_id FROM _ids) AND {same_config}",
                        {"fp": self.fingerprint},
                    )
            if done_live:
                con.register("_done_live", pa.table({"episode_id": done_live}))
                con.execute(f"DELETE FROM live_turns WHERE episode_id IN (SELECT episode_id FROM _done_live) AND {same_config}",
                            {"fp": self.fingerprint})  # fmt: skip
            if restarted:
                con.register("_restarted", pa.table({"episode_id": restarted}))
                con.execute(f"DELETE FROM live_turns WHERE episode_id IN (SELECT episode_id FROM _restarted) AND run_id <> $run "
                            f"AND {same_config}", {"fp": self.fingerprint, "run": self.run_id})  # fmt: skip
            if batch:
                con.register("_ep", tables.episodes)
                con.register("_turns", tables.turns)
                con.register("_calls", tables.calls)
                con.execute(f"INSERT INTO episodes ({', '.join(_EPISODE_COLUMNS)}) SELECT * FROM _ep")
                con.execute(f"INSERT INTO turns (run_id, episode_id, {', '.join(_TURN_FIELDS)}) SELECT * FROM _turns")
                con.execute(f"INSERT INTO model_calls (run_id, episode_id, {', '.join(_CALL_FIELDS)}) SELECT * FROM _calls")
            if live_table.num_rows:
                con.register("_live", live_table)
                con.execute(f"INSERT INTO live_turns ({', '.join(live_table.column_names)}) SELECT * FROM _live")
            con.execute("COMMIT")
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already ended the transaction
                con.execute("ROLLBACK")
            if data_errors and isinstance(exc, _DATA_ERRORS):
                raise
            raise write_failure(self.store.path, exc, f"writing {len(batch)} finished episodes") from None
        finally:
            for name in ("_ids", "_earlier", "_ep", "_turns", "_calls", "_live", "_done_live", "_restarted"):
                with contextlib.suppress(duckdb.Error):
                    con.unregister(name)
        self._live_stored = (self._live_stored | new_live) - finished
        self._live_prefix = {e: n for e, n in tables.live_prefix.items() if e not in finished}
        self._stale_live -= finished | new_live
        deletions = [("replace", e) for e in replaced] + [("finish", e) for e in done_live] + [("restart", e) for e in restarted]
        published = {"episodes": tables.episodes, "turns": tables.turns, "model_calls": tables.calls, "live_turns": live_table}
        self._live_call(lambda p: p.publish(published, deletions, progress))

    def _keep_attempts(self, con: duckdb.DuckDBPyConnection, same_config: str, episodes: pa.Table) -> pa.Table:
        """Inside ``_commit``'s transaction: copy the stored attempt of each episode in ``_ids`` (its episodes, turns and
        model_calls rows) to the attempt tables, numbered (``_earlier``: episode_id, run_id, episode_attempt); returns
        ``episodes`` (the new rows) with each new attempt's number, one after the earlier one's."""
        con.execute(f"CREATE OR REPLACE TEMP TABLE _earlier AS SELECT episode_id, run_id, coalesce(attempts, 1) AS episode_attempt "
                    f"FROM episodes WHERE episode_id IN (SELECT episode_id FROM _ids) AND {same_config}", {"fp": self.fingerprint})  # fmt: skip
        for table, source in ATTEMPT_TABLES.items():
            con.execute(f"INSERT INTO {table} BY NAME SELECT s.*, p.episode_attempt, now() AS superseded_at, $run AS superseded_by "
                        f"FROM {source} AS s JOIN _earlier AS p USING (episode_id, run_id)", {"run": self.run_id})  # fmt: skip
        earlier = dict(con.execute("SELECT episode_id, max(episode_attempt) FROM _earlier GROUP BY episode_id").fetchall())
        if not earlier:
            return episodes
        numbers = [earlier.get(e, 0) + 1 for e in episodes.column("episode_id").to_pylist()]
        return episodes.set_column(episodes.schema.get_field_index("attempts"), "attempts", pa.array(numbers, episodes.schema.field("attempts").type))

    def _check_file(self) -> None:
        """The file is still where the run opened it: removed (or replaced) under a running writer, everything
        written from now on would be lost with it."""
        try:
            same = os.stat(self.store.path).st_ino == self._inode
        except OSError:
            same = False
        if not same:
            raise StoreError(f"{self.store.path}: the file was removed or replaced while the run was writing it; the run "
                             "stopped (what it held went with it): run the same command again to start over")  # fmt: skip


class _Tables(NamedTuple):
    episodes: pa.Table
    turns: pa.Table
    calls: pa.Table
    live: pa.Table
    finished: set[str]
    live_prefix: dict[str, _Prefix]  # EpisodeWriter._live_prefix once these are committed


class _Prefix(NamedTuple):
    rows: int  # an episode's first rows stored in live_turns (seq 0..rows-1); -1: not a prefix
    last: TurnRow | None  # the last of them (the very object)


def _prefixes(prefix: dict[str, _Prefix], kept: list[tuple[str, str, str, list[TurnRow]]]) -> dict[str, _Prefix]:
    """``prefix`` after storing ``kept``'s live rows."""
    out = dict(prefix)
    for episode_id, _, _, rows in kept:
        n = out.get(episode_id, _Prefix(0, None)).rows
        contiguous = n >= 0 and rows[0].seq == n and rows[-1].seq == n + len(rows) - 1
        out[episode_id] = _Prefix(n + len(rows), rows[-1]) if contiguous else _Prefix(-1, None)
    return out


def _rounds(batch: list[EpisodeRecord]) -> list[list[EpisodeRecord]]:
    """``batch`` in parts in which no episode comes twice, in order (an attempt is stored before the attempt that replaces it)."""
    parts: list[list[EpisodeRecord]] = [[]]
    seen: set[str] = set()
    for rec in batch:
        if rec.episode_id in seen:
            parts.append([])
            seen = set()
        parts[-1].append(rec)
        seen.add(rec.episode_id)
    return parts


def _stored_prefix(prefix: _Prefix | None, rows: list[TurnRow]) -> int:
    """How many of a finished episode's ``rows`` are in live_turns as they are (0: none to read from there): its first
    rows, when they are the very objects stored (an episode of another process hands copies: converted, as before)."""
    if prefix is None or prefix.rows <= 0 or len(rows) < prefix.rows or rows[prefix.rows - 1] is not prefix.last:
        return 0
    return prefix.rows if rows[0].seq == 0 and prefix.last is not None and prefix.last.seq == prefix.rows - 1 else 0


# Building the tables fails on a value its Arrow type cannot hold (text that is not UTF-8, an integer out of
# range, NaN in the JSON details, a wrong type); inserting them, on a value DuckDB's column refuses.
_UNSTORABLE = (pa.ArrowException, UnicodeError, OverflowError, TypeError, ValueError, RecursionError)
_DATA_ERRORS = (duckdb.ConversionException, duckdb.OutOfRangeException, duckdb.InvalidInputException, duckdb.TypeMismatchException,
                duckdb.ConstraintException)  # fmt: skip
