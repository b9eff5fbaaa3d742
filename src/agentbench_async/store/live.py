"""Live reads of a run file while ``agentbench run`` writes it.

DuckDB lets one process write a file and no other process open it meanwhile. So the writer publishes what
it commits next to the file, in ``FILE.live/`` (Parquet files and a JSON manifest), and readers in other
processes read that instead of the locked file:

- ``base/<table>.parquet``: every table as it was when the run started (one consistent export);
- ``part-N/<table>.parquet``: the rows of each flush of the writer, written after DuckDB committed them
  (new episodes with their turns and calls, new ``live_turns``), and ``part-N/deletions.parquet``: the
  rows that flush deleted, by kind (``replace``: an earlier attempt of a re-run episode; ``finish``: the live
  turns of an episode that finished; ``restart``: the live turns an earlier, killed run left for an episode
  that runs again), and for a ``finish`` the flush that first published the episode's live turns (``since``);
- ``manifest.json``: the published parts and the run's progress, replaced atomically every ~1 s. A part is
  listed only once all its files are written, so a reader never sees half an episode.

Small parts are merged (8 into 1, up to a level) so a long run keeps few files; merged-away parts are
deleted a minute later, so a reader that listed them has time to finish. A merge streams its parts, a row group
at a time, and keeps of them only what a reader still needs: the live turns of episodes still running, and the
``finish`` deletions of episodes whose live turns began before the merged flushes (or may come again): its memory
and time are those of the rows it writes, and its ``deletions`` and ``live_turns`` hold about what is in flight,
however many flushes it merges. The writer publishes in its own thread, after its DuckDB transaction, and a
merge runs in a thread of its own meanwhile (one at a time; stopped when the run ends); readers never touch the DuckDB
file or lock anything, so they cannot block, slow or corrupt the writer. When the run ends the store removes ``FILE.live/`` after closing
the file; after a ``kill -9`` it stays behind (the manifest names a dead process) and the next run replaces it.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..processes import pid_alive
from ..statuses import RETRY_ON_RESUME

LIVE_TABLES: tuple[str, ...] = ("runs", "episodes", "turns", "model_calls", "live_turns")
DELETION_KINDS = ("replace", "finish", "restart")
# since: for a finish, the flush of this run (0, 1, ... counting the flushes' own parts) that first published the episode's
# live turns; -1 (and for the other kinds): every merge keeps it (this run published none, or more may come: a retry)
_DELETIONS_SCHEMA = pa.schema([("kind", pa.string()), ("episode_id", pa.string()), ("fingerprint", pa.string()), ("since", pa.int32())])
_KEEP = -1
_FORMAT = 1
_FANOUT = 8  # parts merged at once
_MAX_LEVEL = 3  # a level-3 part holds 8**3 flushes (~8.5 minutes of a run)
_GRACE_S = 60.0  # merged-away parts stay this long for readers that listed them
_MERGED_GROUP_BYTES = 4 * 2**20  # a merge holds about this much of a table's rows before writing them (a row group)
_LARGE_LEVEL = 1  # merges of parts of this level or above (64 flushes or more) are announced to the writer first
MANIFEST = "manifest.json"


# The turns of episodes that have not finished yet, written as they happen (one flush a second). When the
# episode finishes, its rows here are deleted in the same transaction that writes its episodes/turns rows, so
# a turn is never in both tables. After a kill -9 the killed run's unfinished episodes stay here until they
# run again (resume), which replaces them. Same columns as ``turns`` (kept in step by ``create_live_turns``),
# and the episode's model and env.
LIVE_TURNS_DDL = """
CREATE TABLE IF NOT EXISTS live_turns (
    run_id       VARCHAR NOT NULL,
    episode_id   VARCHAR NOT NULL,
    turn         INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    role         VARCHAR NOT NULL,
    content      VARCHAR,
    action       VARCHAR,
    observation  VARCHAR,
    valid        BOOLEAN,
    error        VARCHAR,
    tool_calls   JSON,
    created_at   TIMESTAMPTZ,
    reasoning    VARCHAR,
    model        VARCHAR,
    env          VARCHAR
);
"""


def create_live_turns(con: duckdb.DuckDBPyConnection) -> None:
    """Create ``live_turns`` (idempotent) with every column ``turns`` has (one added to turns is added here)."""
    con.execute(LIVE_TURNS_DDL)
    query = ("SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
             "AND schema_name = current_schema() AND table_name = ?")  # fmt: skip
    live = {r[0] for r in con.execute(query, ["live_turns"]).fetchall()}
    for column, sql_type in con.execute(query, ["turns"]).fetchall():
        if column not in live:
            con.execute(f'ALTER TABLE live_turns ADD COLUMN "{column}" {sql_type}')


def live_dir(path: Path) -> Path:
    """The folder where the writer of ``path`` publishes what it commits (``runs/x.duckdb.live``)."""
    return path.with_name(path.name + ".live")


@dataclass
class StreamStatus:
    """Progress of one model x environment stream of a running evaluation."""

    model: str
    env: str
    total: int
    done: int  # episodes that ended (cancelled ones are not: they are left to a resume)
    in_flight: int
    statuses: dict[str, int] = field(default_factory=dict)
    cancelled: int = 0
    turns: list[int] = field(default_factory=list)  # the turns so far of each episode in flight, most first


@dataclass
class LiveStatus:
    """What the writer of a running file last published about its run (refreshed about every second)."""

    run_id: str
    pid: int
    updated_at: float  # Unix seconds of the last publish
    elapsed_s: float = 0.0
    streams: list[StreamStatus] = field(default_factory=list)
    calls: int = 0
    retries: int = 0
    errors: int = 0
    http_429: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    calls_per_s: float = 0.0
    episodes_per_s: float = 0.0
    eta_s: float | None = None  # None after Ctrl-C (stopped): no episode is admitted any more
    stopped: bool = False
    spend: dict[str, Any] | None = None  # priced models or a cap: USD/tokens so far, the cap, the projection (progress.py)

    @property
    def age_s(self) -> float:
        """Seconds since the writer last published (a few seconds at most while it is alive)."""
        return max(0.0, time.time() - self.updated_at)

    @property
    def done(self) -> int:
        return sum(s.done for s in self.streams)

    @property
    def total(self) -> int:
        return sum(s.total for s in self.streams)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "age_s": self.age_s, "done": self.done, "total": self.total}

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> LiveStatus:
        progress = dict(manifest.get("progress") or {})
        streams = [StreamStatus(**s) for s in progress.pop("streams", [])]
        known = {f for f in cls.__dataclass_fields__ if f not in ("run_id", "pid", "updated_at", "streams")}
        return cls(run_id=manifest["run_id"], pid=int(manifest["pid"]), updated_at=float(manifest["updated_at"]),
                   streams=streams, **{k: v for k, v in progress.items() if k in known})  # fmt: skip


# -- reader side -----------------------------------------------------------------------------------
def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest published by a live writer of ``path``, or None (no writer, or a killed one)."""
    try:
        manifest: dict[str, Any] = json.loads((live_dir(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("format") != _FORMAT or not pid_alive(int(manifest.get("pid", 0))):
        return None
    return manifest


def read_status(path: str | Path) -> LiveStatus | None:
    """The progress a running ``agentbench run`` last published for ``path``; None when no run writes it.

    Cheap (one small JSON file): the thing to poll for a live page.
    """
    manifest = read_manifest(Path(path))
    return LiveStatus.from_manifest(manifest) if manifest is not None else None


def manifest_files(path: Path, manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Table (and ``deletions``) -> the Parquet files holding its published rows, base first."""
    root = live_dir(path.resolve())  # absolute: the views do not depend on the reader's working directory
    files: dict[str, list[str]] = {t: [str(root / "base" / f"{t}.parquet")] for t in LIVE_TABLES}
    files["deletions"] = []
    for part in manifest["parts"]:
        for table in part["tables"]:
            files[table].append(str(root / part["name"] / f"{table}.parquet"))
    return files


# -- writer side -----------------------------------------------------------------------------------
@dataclass
class _Part:
    name: str
    level: int
    tables: list[str]
    first: int  # the first of the flushes it holds (0, 1, ... counting the flushes' own parts)
    # a flush's own part keeps its tables until it is merged: the merge does not read back what was just written
    rows: dict[str, pa.Table] | None = field(default=None, repr=False)


class _Cancelled(Exception):
    """A merge stopped by ``LivePublisher.close``."""


@dataclass
class _Merge:
    """A merge running in its own thread: the parts it merges, into which folder, the episodes running when it began."""

    tail: list[_Part]
    name: str
    folder: Path
    running: pa.Array
    thread: threading.Thread = field(init=False)
    cancel: threading.Event = field(default_factory=threading.Event)
    tables: list[str] = field(default_factory=list)  # written so far
    size: int = 0  # their bytes
    error: BaseException | None = None


class LivePublisher:
    """Publishes a run file's committed changes to ``FILE.live/``. Every method runs in the writer's thread; merges run in
    a thread of their own (``_merge``); ``close`` stops one in flight."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, run_id: str, fingerprint: str, *,
                 before_large_merge: Callable[[], None] | None = None) -> None:
        self.con = con
        # called in the writer's thread just before a merge of 64 flushes or more starts (the writer checkpoints then)
        self.before_large_merge = before_large_merge
        self.path = path
        self.root = live_dir(path)
        self.run_id = run_id
        self.fingerprint = fingerprint
        self.schemas: dict[str, pa.Schema] = {}
        self._parts: list[_Part] = []
        self._next = 0
        self._flushes = 0  # the flushes published as parts of their own
        # episodes with live turns published and no finish since -> the flush that published their first (what is in flight)
        self._live_since: dict[str, int] = {}
        self._retired: list[tuple[float, Path]] = []
        self._merging: _Merge | None = None  # the merge running in its own thread (one at a time)
        self._started = time.time()
        self.bytes_written = 0

    def start(self, progress: dict[str, Any] | None = None) -> None:
        """Replace a stale folder (a killed run's), export every table as the base, publish."""
        shutil.rmtree(self.root, ignore_errors=True)
        tmp = self.root.with_name(self.root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "base").mkdir(parents=True)
        for table in LIVE_TABLES:
            target = tmp / "base" / f"{table}.parquet"
            self.con.execute(f"COPY (SELECT * FROM {table}) TO '{_quote(target)}' (FORMAT parquet, COMPRESSION zstd)")
            self.schemas[table] = self.con.sql(f"SELECT * FROM {table} LIMIT 0").to_arrow_table().schema
        tmp.rename(self.root)
        self._write_manifest(progress)

    def conform(self, table: str, data: pa.Table) -> pa.Table:
        """``data`` with exactly ``table``'s stored columns and types (absent columns as NULL)."""
        schema = self.schemas[table]
        columns = [data.column(f.name).cast(f.type) if f.name in data.column_names else pa.nulls(data.num_rows, f.type) for f in schema]
        return pa.Table.from_arrays(columns, schema=schema)

    def publish(self, tables: dict[str, pa.Table], deletions: Iterable[tuple[str, str]], progress: dict[str, Any] | None) -> None:
        """Publish one committed flush: its new rows per table and its deletions ((kind, episode_id) pairs)."""
        dels = list(deletions)
        rows = {t: self.conform(t, d) for t, d in tables.items() if d.num_rows}
        if rows or dels:
            if dels:
                kinds, ids = zip(*dels)
                rows["deletions"] = pa.Table.from_arrays(
                    [pa.array(kinds, pa.string()), pa.array(ids, pa.string()), pa.array([self.fingerprint] * len(ids), pa.string()),
                     pa.array(self._since(dels, rows.get("episodes")), pa.int32())],
                    schema=_DELETIONS_SCHEMA,
                )  # fmt: skip
            if "live_turns" in rows:
                for episode in pc.unique(rows["live_turns"]["episode_id"]).to_pylist():
                    self._live_since.setdefault(episode, self._flushes)
            self._parts.append(self._write_part(rows, level=0))
            self._flushes += 1
            self._merge()
        self._write_manifest(progress)
        self._collect()

    def _since(self, dels: list[tuple[str, str]], episodes: pa.Table | None) -> list[int]:
        """Each deletion's ``since``; a finish ends the episode's run of live turns (it leaves ``_live_since``). An earlier
        run's live turns of the episode (in the base) are hidden by the ``restart`` deletion this run published when the
        episode ran again (kept by every merge), or by this finish, -1 when this run published none of its own."""
        again: set[str] = set()  # finished with a status a retry runs again: its live turns may come again
        if episodes is not None:
            again = set(pc.filter(episodes["episode_id"], pc.is_in(episodes["status"], pa.array(sorted(RETRY_ON_RESUME)))).to_pylist())
        out = []
        for kind, episode in dels:
            since = self._live_since.pop(episode, _KEEP) if kind == "finish" else _KEEP
            out.append(_KEEP if episode in again else since)
        return out

    @property
    def merging(self) -> bool:
        """Whether a merge runs in its own thread now (holding its own memory: the writer checkpoints at half its bounds)."""
        return self._merging is not None and self._merging.thread.is_alive()

    def heartbeat(self, progress: dict[str, Any] | None) -> None:
        self._write_manifest(progress)
        self._collect()

    def _new_folder(self) -> tuple[str, Path]:
        name = f"part-{self._next:06d}"
        self._next += 1
        folder = self.root / name
        folder.mkdir()
        return name, folder

    def _write_part(self, rows: dict[str, pa.Table], level: int) -> _Part:
        name, folder = self._new_folder()
        # A flush's own part lives until it is merged (eight flushes): snappy, whose writer sets up no compression context
        # per column (zstd's took ~45% of a part's CPU: 1.4 -> 0.8 ms for 16 columns of 300 rows); merged parts, which
        # stay, keep zstd's smaller files.
        compression = "snappy" if level == 0 else "zstd"
        for table, data in rows.items():
            pq.write_table(data, folder / f"{table}.parquet", compression=compression)
            self.bytes_written += (folder / f"{table}.parquet").stat().st_size
        return _Part(name=name, level=level, tables=sorted(rows), first=self._flushes, rows=rows if level == 0 else None)

    def _merge(self) -> None:
        """Merge parts of one level, 8 at a time, up to ``_MAX_LEVEL``: in a thread of its own, one merge at a time, while
        the writer goes on committing and publishing flushes (a level-3 merge rewrites 512 flushes' rows: ~5 s, in the
        writer's thread the finished episodes queued in the engine meanwhile). A merge done since is swapped in here (in
        the writer's thread: ``_parts`` is only ever changed there), and the next one due is started.

        Every table is streamed, one row group of one part at a time, and what is kept of each row is decided from sets the
        size of what is in flight, never from the merged flushes' rows: a merge's memory and time are those of what it
        writes. A ``finish`` deletion hides an episode's live turns wherever they are; within the merged part they are
        dropped (the episode is not running any more), so it is kept only when some may be outside: published before the
        merged flushes (``since`` earlier than the first), an earlier run's or to come (a retry; ``since`` -1), or the
        episode was running when the merge began. What the merge writes is what it would have written had it run then, in
        the writer's thread; the parts published meanwhile come after it either way. The views read the same rows before
        and after (tests/engine/test_live_merges.py)."""
        job = self._merging
        if job is not None:
            if job.thread.is_alive():
                return
            self._merging = None
            self._swap(job)
        tail = self._due()
        if tail is None:
            return
        if tail[0].level >= _LARGE_LEVEL and self.before_large_merge is not None:
            self.before_large_merge()
        name, folder = self._new_folder()
        job = _Merge(tail=tail, name=name, folder=folder, running=pa.array(sorted(self._live_since), pa.string()))
        job.thread = threading.Thread(target=self._run_merge, args=(job,), name="live-merge", daemon=True)
        self._merging = job
        job.thread.start()

    def _due(self) -> list[_Part] | None:
        """The first run of ``_FANOUT`` parts of one level below ``_MAX_LEVEL`` (levels never rise along ``_parts``)."""
        for i in range(len(self._parts) - _FANOUT + 1):
            level = self._parts[i].level
            if level < _MAX_LEVEL and all(p.level == level for p in self._parts[i : i + _FANOUT]):
                return self._parts[i : i + _FANOUT]
        return None

    def _run_merge(self, job: _Merge) -> None:
        """The merge thread: writes ``job``'s part (its tables and bytes in ``job``; what went wrong in ``job.error``)."""
        try:
            later = _replaced_later([self._replaced(p, job.cancel) for p in job.tail])
            first = job.tail[0].first
            for table in (*LIVE_TABLES, "deletions"):
                batches = (self._drop(table, rows, later[i], job.running, first)
                           for i, p in enumerate(job.tail) for rows in self._batches(p, table, job.cancel))  # fmt: skip
                size = self._write_merged(job.folder / f"{table}.parquet", batches, keep_empty=table == "deletions")
                if size:
                    job.tables.append(table)
                    job.size += size
        except BaseException as exc:  # noqa: BLE001 - raised in the writer's thread when the merge is swapped in
            job.error = exc
        finally:
            # Arrow's allocator (mimalloc) keeps what it freed for reuse: after a merge, which read and wrote far more than a
            # flush does, that was tens of MB of RSS kept for the rest of the run (~1.6 ms; in this thread, which allocated it)
            pa.default_memory_pool().release_unused()

    def _swap(self, job: _Merge) -> None:
        """Put ``job``'s merged part in place of the parts it merged (or raise what stopped it: publishing stops)."""
        if job.error is not None:
            shutil.rmtree(job.folder, ignore_errors=True)
            raise job.error
        at = next(i for i, p in enumerate(self._parts) if p is job.tail[0])
        self._parts[at : at + _FANOUT] = [_Part(name=job.name, level=job.tail[0].level + 1, tables=sorted(job.tables), first=job.tail[0].first)]
        self._retired += [(time.monotonic() + _GRACE_S, self.root / p.name) for p in job.tail]
        self.bytes_written += job.size

    def settle(self) -> None:
        """Run every merge due to its end (each swapped in): the parts as merging them in the writer's thread left them."""
        while True:
            job = self._merging
            if job is not None:
                job.thread.join()
            self._merge()
            if self._merging is None:
                return

    def close(self) -> None:
        """Stop a merge in flight and wait for its thread (the run is ending, or publishing stops); its folder, which no
        manifest listed, is removed. The published snapshot stays as the last manifest lists it."""
        job, self._merging = self._merging, None
        if job is not None:
            job.cancel.set()
            job.thread.join()
            shutil.rmtree(job.folder, ignore_errors=True)

    def _replaced(self, part: _Part, cancel: threading.Event) -> set[str]:
        """The episodes whose earlier attempt ``part`` replaced (a retry: few), its deletions streamed."""
        out: set[str] = set()
        for dels in self._batches(part, "deletions", cancel):
            out.update(pc.filter(dels["episode_id"], pc.equal(dels["kind"], "replace")).to_pylist())
        return out

    def _batches(self, part: _Part, table: str, cancel: threading.Event) -> Iterable[pa.Table]:
        """``table``'s rows in ``part``, a row group at a time: a merge holds one of them, not every part's rows (a level-3
        merge reads 512 flushes: read whole, the rows of minutes of a run were in memory at once). Raises ``_Cancelled``
        once ``cancel`` is set."""
        if table not in part.tables:
            return
        if part.rows is not None:
            yield part.rows[table]
            return
        source = pq.ParquetFile(self.root / part.name / f"{table}.parquet")
        for group in range(source.num_row_groups):  # in this thread: its allocator's pages are given back after the merge
            if cancel.is_set():
                raise _Cancelled
            yield source.read_row_group(group, use_threads=False)

    @staticmethod
    def _drop(table: str, rows: pa.Table, replaced_later: pa.Array, running: pa.Array, first: int) -> pa.Table:
        """The rows of ``table`` kept by a merge whose first flush is ``first`` (see ``_merge``)."""
        if table in _ATTEMPT_ROWS:
            return rows.filter(pc.invert(pc.is_in(rows["episode_id"], value_set=replaced_later))) if len(replaced_later) else rows
        if table == "live_turns":
            return rows.filter(pc.is_in(rows["episode_id"], value_set=running))
        if table == "deletions":
            return rows.filter(pc.or_(pc.or_(pc.not_equal(rows["kind"], "finish"), pc.less(rows["since"], first)),
                                      pc.is_in(rows["episode_id"], value_set=running)))  # fmt: skip
        return rows

    def _write_merged(self, path: Path, pieces: Iterable[pa.Table], *, keep_empty: bool) -> int:
        """Write ``pieces`` (one schema) to one zstd Parquet file, a row group per ``_MERGED_GROUP_BYTES`` or so, holding
        no more than that at once; its bytes, 0 (no file) when they hold no rows and not ``keep_empty``."""
        writer: pq.ParquetWriter | None = None
        held: list[pa.Table] = []
        size = 0
        try:
            for piece in pieces:
                if writer is None:
                    writer = pq.ParquetWriter(path, piece.schema, compression="zstd")
                if piece.num_rows:
                    held.append(piece)
                    size += piece.nbytes
                if size >= _MERGED_GROUP_BYTES:
                    writer.write_table(pa.concat_tables(held))
                    held, size = [], 0
            if writer is not None and held:
                writer.write_table(pa.concat_tables(held))
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            return 0
        if not keep_empty and pq.ParquetFile(path).metadata.num_rows == 0:
            path.unlink()
            return 0
        return path.stat().st_size

    def _collect(self) -> None:
        now = time.monotonic()
        keep = []
        for due, folder in self._retired:
            if due <= now:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                keep.append((due, folder))
        self._retired = keep

    def _write_manifest(self, progress: dict[str, Any] | None) -> None:
        manifest = {
            "format": _FORMAT, "pid": os.getpid(), "run_id": self.run_id, "fingerprint": self.fingerprint,
            "started_at": self._started, "updated_at": time.time(), "progress": progress or {},
            "parts": [{"name": p.name, "level": p.level, "tables": p.tables} for p in self._parts],
        }  # fmt: skip
        tmp = self.root / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest), encoding="utf-8")
        os.replace(tmp, self.root / MANIFEST)


# the rows an episode's attempt consists of: an earlier attempt is replaced by a later one's ("replace" deletions)
_ATTEMPT_ROWS = ("episodes", "turns", "model_calls")


def _replaced_later(replaced: list[set[str]]) -> list[pa.Array]:
    """For each of a run of parts (the episodes each replaced, in order), the episodes a later part of the run replaced: a
    retry within the run. Merged into one part, the views could no longer tell those rows came before the deletion: they
    are dropped."""
    out: list[pa.Array] = []
    seen: set[str] = set()
    for episodes in reversed(replaced):
        out.append(pa.array(sorted(seen), pa.string()))
        seen |= episodes
    return out[::-1]


def remove_live_dir(path: Path) -> None:
    """Remove what a writer of ``path`` published (called once the file itself is closed and readable)."""
    shutil.rmtree(live_dir(path), ignore_errors=True)
    shutil.rmtree(live_dir(path).with_name(live_dir(path).name + ".tmp"), ignore_errors=True)


def _literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")


def create_live_views(con: duckdb.DuckDBPyConnection, schema: str, path: Path, manifest: dict[str, Any]) -> None:
    """Views named like the stored tables in ``schema`` of ``con``, over what the writer of ``path`` has
    published: the base minus what later flushes deleted, plus every published flush."""
    files = manifest_files(path, manifest)

    def scan(paths: list[str]) -> str:
        return "read_parquet([" + ", ".join(map(_literal, paths)) + "], union_by_name = true)"

    con.execute(f"CREATE SCHEMA {schema}")
    con.execute(f"CREATE VIEW {schema}.runs AS SELECT * FROM {scan(files['runs'])}")
    # a "replace" deletion hides the rows of that episode published before it: the base's (an earlier run's attempt) and
    # those of earlier parts of this run (a retry within the run; merged parts dropped theirs already). ord: 0 for the
    # base, then each part's place in the manifest
    order = {"base": 0, **{part["name"]: i + 1 for i, part in enumerate(manifest["parts"])}}
    places = "(VALUES " + ", ".join(f"({_literal(name)}, {i})" for name, i in order.items()) + ") AS o(part, ord)"
    part_of = "regexp_extract(replace({}.filename, '\\', '/'), '([^/]+)/[^/]+$', 1)"
    deletions = (f"read_parquet([{', '.join(map(_literal, files['deletions']))}], union_by_name = true, filename = true)" if files["deletions"]
                 else "(SELECT NULL::VARCHAR AS kind, NULL::VARCHAR AS episode_id, NULL::VARCHAR AS fingerprint, NULL::VARCHAR AS filename "
                      "WHERE false)")  # fmt: skip
    # (kind, episode_id, run_id, ord): the rows a deletion hides (deletions name the config, rows their run)
    con.execute(f"CREATE VIEW {schema}._gone AS SELECT d.kind, d.episode_id, r.run_id, o.ord FROM {deletions} AS d "
                f"JOIN {schema}.runs AS r ON r.fingerprint = d.fingerprint JOIN {places} ON o.part = {part_of.format('d')}")  # fmt: skip
    for table in _ATTEMPT_ROWS:
        query = (f"SELECT r.* EXCLUDE (filename) FROM read_parquet([{', '.join(map(_literal, files[table]))}], union_by_name = true, "
                 f"filename = true) AS r JOIN {places} ON o.part = {part_of.format('r')} WHERE NOT EXISTS (SELECT 1 FROM "
                 f"{schema}._gone AS g WHERE g.kind = 'replace' AND g.episode_id = r.episode_id AND g.run_id = r.run_id "
                 "AND g.ord > o.ord)")  # fmt: skip
        con.execute(f"CREATE VIEW {schema}.{table} AS {query}")
    run = "'" + str(manifest["run_id"]).replace("'", "''") + "'"
    con.execute(
        f"CREATE VIEW {schema}.live_turns AS SELECT * FROM {scan(files['live_turns'])} AS l WHERE NOT EXISTS ("
        f"SELECT 1 FROM {schema}._gone AS g WHERE g.episode_id = l.episode_id AND g.run_id = l.run_id "
        f"AND (g.kind = 'finish' OR (g.kind = 'restart' AND l.run_id <> {run})))"
    )
