"""Opening a run file, registering runs, and the resume queries."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from .. import statuses as st
from ..differences import config_changes
from ..errors import StoreError
from ..records import utcnow
from ..redaction import redact
from .live import create_live_turns, remove_live_dir
from .schema import create_schema


def connect(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file with a one-line error when it is missing or held by another process."""
    if read_only and not path.exists():
        raise StoreError(f"{path}: no such file (give the --out file of a run)")
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        first = str(exc).splitlines()[0]
        if "lock" not in first.lower():  # not held by anyone: the folder or file cannot be written (or read) here
            fix = "give a file you can read" if read_only else "give an --out path you can write"
            raise StoreError(f"{path}: cannot open ({first}); {fix}") from None
        raise StoreError(f"{path}: cannot open ({first}); is another agentbench process using it (a run writing it, or a "
                         "report or view still reading it: a run needs the file to itself)?") from None
    except duckdb.Error as exc:
        raise StoreError(f"{path}: not a DuckDB file this program can read ({str(exc).splitlines()[0]})") from None


def new_run_id() -> str:
    """A run's id (``runs.run_id``)."""
    return uuid.uuid4().hex[:12]


# What DuckDB raises when the file cannot be written (disk full, file or folder removed, permissions, a failed
# commit, the database invalidated after one of these); other errors are bugs and keep their traceback.
WRITE_FAILURES = (duckdb.IOException, duckdb.FatalException, duckdb.TransactionException, duckdb.PermissionException,
                  duckdb.OutOfMemoryException)  # fmt: skip


def write_failure(path: Path, exc: BaseException, doing: str) -> StoreError:
    """The one line for a write to ``path`` that failed (disk full, file or folder removed, I/O error): the file,
    what was being done, DuckDB's cause, and that the committed part stays for a re-run to resume."""
    cause = " ".join(str(exc).split())[:300]
    return StoreError(f"{path}: {doing} failed ({cause}); the run stopped. Everything committed before is kept: "
                      "make room (or restore the file) and run the same command again to resume")  # fmt: skip


CHECKPOINT_MB = 64  # the WAL a run's writer lets grow before it checkpoints (Store.after_commit)
HELD_MB = 32  # what DuckDB may hold in memory of the rows committed since the last checkpoint before the writer checkpoints
MEMORY_LIMIT = "256MB"  # DuckDB's buffer pool in a run's writer: what a query of the writer's may take
_CACHE_AFTER_CHECKPOINT = "16MB"  # what DuckDB's buffer pool keeps cached once a checkpoint has written it to the file


class Store:
    """A run file opened for writing (one process only, as DuckDB requires)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.con = connect(path)
        try:
            # The writer's memory has a bound we choose, not DuckDB's defaults (docs/performance.md): rows committed since the
            # last checkpoint are held in memory as well as in the WAL, so the writer checkpoints once DuckDB holds HELD_MB
            # of them, as DuckDB counts it (64 MB of WAL held 73-86 MB; a checkpoint costs ~0.2-0.4 s), or once the WAL
            # reaches CHECKPOINT_MB (rows that hold little memory: deletions); DuckDB's buffer pool, which otherwise keeps every block it read or
            # wrote up to 80% of the machine's memory, is held to MEMORY_LIMIT (it spills to FILE.tmp beyond) for what a
            # query needs, and emptied of what a checkpoint wrote (after_commit). The writer checkpoints itself so it
            # knows when the file holds everything; DuckDB's own checkpoint, at four times the size, is only a backstop.
            self.con.execute(f"SET checkpoint_threshold = '{4 * CHECKPOINT_MB}MB'")
            self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
            # No vacuum at the writer's checkpoints: each checkpoint leaves the rows it wrote in a row group of their own,
            # and DuckDB's vacuum merges such partly filled row groups at later checkpoints by reading them back into new
            # ones in memory: every other checkpoint of a long run held 30-100 MB more for a second or two, more as the
            # file grew (a writer fed 300,000 echo episodes: 129 -> 180 MB at 70k -> 280k; off: at most 5 MB more than
            # before the checkpoint, the file 55 MB instead of 63). Row groups that every row left (live_turns: its
            # episodes finished) are still dropped; deleted rows of a re-run's earlier attempts stay in the file until a
            # row group is empty. Older DuckDB without the setting: as before.
            with contextlib.suppress(duckdb.CatalogException):
                self.con.execute("SET max_vacuum_tasks = 0")
            self._wal = Path(f"{path}.wal")
            self._checkpoint_bytes = CHECKPOINT_MB * 2**20
            self._held_bytes = HELD_MB * 2**20
            self.checkpoints = 0  # the writer's (after_commit)
            # One thread: the writer's transactions are a second's episodes each, too small for DuckDB's parallel
            # operators, whose hand-offs between its threads cost CPU (~10% of the writer's); the final checkpoint
            # (close) gets the default again.
            self.con.execute("SET threads = 1")
            create_schema(self.con)
            create_live_turns(self.con)
        except WRITE_FAILURES as exc:
            self.con.close()
            raise write_failure(path, exc, "preparing the tables") from None

    def after_commit(self, *, merging: bool = False) -> None:
        """After the writer's commit: once DuckDB holds ``HELD_MB`` of the rows committed since the last checkpoint
        (its buffer pool's ``IN_MEMORY_TABLE``: they are held in memory as well as in the WAL until a checkpoint
        writes them) or the WAL holds ``CHECKPOINT_MB``, checkpoint, then drop the blocks the checkpoint wrote from
        DuckDB's buffer pool. The memory is what is bounded, so it is what is counted: the WAL's bytes are not its
        size (64 MB of WAL held 73-86 MB of an echo run's rows). And DuckDB keeps every block it wrote or read cached
        up to ``memory_limit``, so over a long run the cache alone grew with the file (a 1,000,000-episode echo file
        is ~200 MB): RSS climbed from checkpoint to checkpoint while Python's memory stayed flat. The blocks are in the
        file now, and what the writer reads again (``live_turns``, the last row groups it appends to) is small and
        read back on demand. Lowering the limit evicts them (nothing else is held right after a checkpoint; a
        failure to lower it only keeps the cache); the limit is put back at once. A checkpoint that fails (disk
        full) raises: the writer stops the run, and the WAL keeps what was committed.

        ``merging``: a merge of the live snapshot runs in its own thread, holding its own memory (Arrow's) meanwhile.
        Then the bounds are halved, so what DuckDB holds and the merge holds do not add up to the most of both (a
        million-episode run peaked where a checkpoint at the full bound met the largest merge: DuckDB 63 MB and Arrow's
        merge together): a few more checkpoints, each smaller."""
        if self._reached(2 if merging else 1):
            self._checkpoint()

    def checkpoint_ahead(self) -> None:
        """Before a large merge of the live snapshot (64 flushes or more) starts: checkpoint now unless DuckDB holds less
        than a quarter of ``HELD_MB`` of uncheckpointed rows (and the WAL less than a quarter of ``CHECKPOINT_MB``), so
        the merge begins with DuckDB at its lowest. It runs inside the live snapshot's publishing, whose own failures
        only stop live reads; a checkpoint that fails (disk full) is the file's, so it is a ``StoreError``: the run
        stops, as at ``after_commit``, and the WAL keeps what was committed."""
        if self._reached(4):
            try:
                self._checkpoint()
            except duckdb.Error as exc:
                raise write_failure(self.path, exc, "a checkpoint before a live merge") from None

    def _reached(self, share: int) -> bool:
        """Whether the WAL holds ``CHECKPOINT_MB / share`` or DuckDB ``HELD_MB / share`` of uncheckpointed rows."""
        try:
            size = self._wal.stat().st_size
        except OSError:  # no WAL: nothing committed since the last checkpoint
            return False
        return size >= self._checkpoint_bytes // share or self._held() >= self._held_bytes // share

    def _checkpoint(self) -> None:
        self.con.execute("CHECKPOINT")
        self.checkpoints += 1
        with contextlib.suppress(duckdb.Error):
            self.con.execute(f"SET memory_limit = '{_CACHE_AFTER_CHECKPOINT}'")
        self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")

    def _held(self) -> int:
        """The bytes of committed rows DuckDB holds in memory until a checkpoint writes them (and those of temporary
        tables): what its buffer pool tags ``IN_MEMORY_TABLE``."""
        # fetched to the end: DuckDB 2 refuses register()/sql() on a connection whose last result is unfinished
        rows = self.con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'").fetchall()
        return int(rows[0][0] or 0) if rows else 0

    def check_run(self, config: dict[str, Any], fingerprint: str, *, new_run: bool) -> None:
        """Refuse a file that holds other configs unless ``new_run`` (before anything of the run starts); the refusal
        names the settings that differ from the file's latest run, as the user set them (``max_tokens: 256 in the
        file, 128 now``)."""
        rows = self.con.execute("SELECT DISTINCT fingerprint FROM runs").fetchall()
        known = {r[0] for r in rows}
        if known and fingerprint not in known and not new_run:
            row = self.con.execute("SELECT config FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
            changed = "; ".join(config_changes(_loaded(row[0] if row else None), config))
            raise StoreError(
                f"{self.path} holds results of a different run config{f' ({changed})' if changed else ''}; "
                f"use another --out file, or pass --new-run to add this config to the same file"
            )

    def resumed_fingerprint(self, config: dict[str, Any], fingerprint: str) -> str:
        """The fingerprint this run's episodes are stored under: its own, or that of a config in the file it agrees
        with in every deciding setting over the environments both name (another ``--env`` list resumes and extends
        those results: ``differences.config_changes``), the latest such."""
        rows = self.con.execute("SELECT fingerprint, config FROM runs ORDER BY created_at DESC").fetchall()
        stored: dict[str, list[dict[str, Any]]] = {}
        for known, text in rows:
            stored.setdefault(known, []).append(_loaded(text))
        if not stored or fingerprint in stored:
            return fingerprint
        for known, configs in stored.items():  # a config without its environment list (older files) is never assumed alike
            if all(c.get("envs") and not config_changes(c, config) for c in configs):
                return known
        return fingerprint

    def begin_run(self, config: dict[str, Any], fingerprint: str, *, command: str, version: str, new_run: bool,
                  run_id: str | None = None) -> str:  # fmt: skip
        """Register this invocation (as ``run_id``, or a new id) after ``check_run``; returns its id."""
        self.check_run(config, fingerprint, new_run=new_run)
        run_id = run_id or new_run_id()
        try:
            self.con.execute(
                "INSERT INTO runs (run_id, created_at, config, fingerprint, command, version) VALUES (?, ?, ?, ?, ?, ?)",
                [run_id, utcnow(), redact(json.dumps(config, default=str)), fingerprint, redact(command), version],
            )
        except WRITE_FAILURES as exc:
            raise write_failure(self.path, exc, "registering the run") from None
        return run_id

    def finish_run(self, run_id: str, *, interrupted: bool, adapted: Mapping[str, list[str]] | None = None,
                   planned: Mapping[str, Mapping[str, int]] | None = None) -> None:
        """The run's end; ``adapted``: per model, what its requests were adapted to (stored as ``adapted`` in the model's
        entry of ``runs.config``); ``planned``: model -> env -> the episodes the run was to hold, done before included
        (``runs.config.planned``: what an interrupted run's totals are out of)."""
        try:
            self.con.execute("UPDATE runs SET finished_at = ?, interrupted = ? WHERE run_id = ?", [utcnow(), interrupted, run_id])
            if adapted or planned:
                row = self.con.execute("SELECT config FROM runs WHERE run_id = ?", [run_id]).fetchone()
                config = json.loads(row[0]) if row else {}
                for model in [*(config.get("models") or []), config.get("judge") or {}]:
                    if model.get("name") in (adapted or {}):
                        model["adapted"] = adapted[model["name"]]  # type: ignore[index]
                if planned:
                    config["planned"] = {m: dict(envs) for m, envs in planned.items()}
                self.con.execute("UPDATE runs SET config = ? WHERE run_id = ?", [json.dumps(config), run_id])
        except WRITE_FAILURES as exc:
            raise write_failure(self.path, exc, "recording the end of the run") from None

    def done_episode_ids(self, fingerprint: str) -> set[str]:
        """Episodes of this config that ended with an agent outcome, or with a permanent refusal of their
        request by the server (a ``model_error`` with ``details.permanent``): a re-run skips them."""
        return self._episode_ids(fingerprint, st.AGENT_OUTCOMES) | self._permanent_ids(fingerprint)

    def rerun_episode_ids(self, fingerprint: str) -> set[str]:
        """Episodes of this config stored with an infrastructure status (a re-run replaces them)."""
        return self._episode_ids(fingerprint, st.RETRY_ON_RESUME) - self._permanent_ids(fingerprint)

    def _permanent_ids(self, fingerprint: str) -> set[str]:
        rows = self.con.execute(
            "SELECT episode_id FROM episodes WHERE fingerprint = ? AND status = 'model_error' "
            "AND coalesce(TRY_CAST(json_extract(details, '$.permanent') AS BOOLEAN), false)",
            [fingerprint],
        ).fetchall()
        return {r[0] for r in rows}

    def _episode_ids(self, fingerprint: str, wanted: frozenset[str]) -> set[str]:
        statuses = sorted(wanted)
        placeholders = ", ".join("?" for _ in statuses)
        rows = self.con.execute(
            f"SELECT episode_id FROM episodes WHERE fingerprint = ? AND status IN ({placeholders})",
            [fingerprint, *statuses],
        ).fetchall()
        return {r[0] for r in rows}

    def close(self) -> None:
        """Checkpoint and close; a checkpoint that cannot be written (disk full) is a ``StoreError`` after the
        file is closed (the WAL keeps what was committed: the next open replays it)."""
        try:
            self.con.execute("RESET threads")
            self.con.execute("CHECKPOINT")
        except WRITE_FAILURES as exc:
            raise write_failure(self.path, exc, "the final checkpoint") from None
        except duckdb.InterruptException:  # a second Ctrl-C while the file is checkpointed: what was committed stays (WAL)
            raise KeyboardInterrupt from None
        finally:
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            remove_live_dir(self.path)  # readers now open the file itself


def _loaded(stored_json: str | None) -> dict[str, Any]:
    try:
        value = json.loads(stored_json) if stored_json else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
