"""Open one or more result files read-only and expose the tables and analytics views as polars frames.

Each DuckDB file is ATTACHed read-only into a private in-memory database. The in-memory database holds
views named like the stored tables (``runs``, ``episodes``, ``turns``, ``model_calls``, ``live_turns``) that
UNION the attached files (with a ``source_file`` column), and the ``analytics/*.sql`` views are created on
top of them there. So a report never writes to a result file and several files are reported together.

A file that ``agentbench run`` is writing is locked by DuckDB; it is read instead from what its writer
publishes (``store/live.py``): every committed episode, at most ~2 s old, never half an episode, without
touching the file the run holds. ``Results.refresh()`` picks up what was committed since.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import polars as pl

from ..errors import AgentBenchError, StoreError
from ..store.live import LIVE_TURNS_DDL, LiveStatus, create_live_views, read_manifest, read_status
from ..store.schema import ADDED_COLUMNS, ATTEMPT_TABLES, attempt_extra_columns, create_views

TABLES: tuple[str, ...] = ("runs", "episodes", "turns", "model_calls")
_OPTIONAL_TABLES: tuple[str, ...] = ("live_turns",)  # files written before it existed read as empty
_LIVE_WAIT_S = 5.0  # a run that has just started publishes its first snapshot within this time


class ReportError(AgentBenchError):
    """A report cannot be produced from what the user asked for (unknown episode, model, ...)."""


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Results:
    """The result files opened together: frames for the tables and every analytics view.

    ``episodes`` is the ``episode_outcomes`` view (one row per episode, with ``failure_class``);
    ``raw_episodes``, ``turns``, ``calls`` and ``runs`` are the stored rows; ``view(name)`` returns any
    view and ``sql(query)`` runs any query. Frames are read when first used.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, paths: list[Path], live_files: list[Path] | None = None,
                 pool: bool = False) -> None:  # fmt: skip
        self.con = con
        self.paths = paths
        self.live_files: list[Path] = live_files or []  # the opened files a run is writing right now
        self.pooled = pool  # configurations merged into one row per model x env (analytics/configs.py)
        self._cache: dict[str, pl.DataFrame] = {}
        _set_pool(con, pool)

    # -- frames --------------------------------------------------------------------------------------
    def sql(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run a query against the opened files and their views; returns a polars frame."""
        try:
            return self._run(query, params)
        except duckdb.IOException:
            if not self.live_files:
                raise StoreError("query failed: a result file could not be read") from None
            # a live file's writer merged away (or, at its end, removed) what this snapshot listed: reopen
            self.refresh()
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {str(exc).splitlines()[0]}") from None
        try:
            return self._run(query, params)
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {str(exc).splitlines()[0]}") from None

    def _run(self, query: str, params: Sequence[Any] | None) -> pl.DataFrame:
        relation = self.con.sql(query, params=list(params) if params else None)
        if relation is None:
            return pl.DataFrame()  # a statement without rows
        try:
            return relation.pl()
        except pl.exceptions.ComputeError:
            # an Arrow type polars does not import (DuckDB's INTERVAL arrives as month_day_nano): the rows as Python
            # values instead (an interval is a timedelta, a polars Duration)
            return pl.DataFrame(relation.fetchall(), schema=relation.columns, orient="row", strict=False)

    def refresh(self) -> Results:
        """Show what the writers of live files committed since (cached frames are dropped). Cheap while they
        run (only the live files' views are pointed at the latest snapshot); a file whose run ended is re-opened."""
        if not self._swap_live_views():
            con, live = _open(self.paths)
            self.con.close()
            self.con, self.live_files = con, live
            _set_pool(con, self.pooled)
        self._cache.clear()
        return self

    def _swap_live_views(self) -> bool:
        """Point each live file's views at its writer's latest snapshot; False if one is no longer live."""
        if not self.live_files:
            return False
        for index, path in enumerate(self.paths):
            if path not in self.live_files:
                continue
            manifest = read_manifest(path)
            if manifest is None:
                return False
            self.con.execute("BEGIN TRANSACTION")
            try:
                self.con.execute(f"DROP SCHEMA live{index} CASCADE")  # the union views above bind by name at query time
                create_live_views(self.con, f"live{index}", path, manifest)
                self.con.execute("COMMIT")
            except duckdb.Error:
                self.con.execute("ROLLBACK")
                return False
        return True

    def live_status(self, path: str | Path | None = None) -> LiveStatus | None:
        """Progress the run writing ``path`` (default: the first live file) last published; None if none is."""
        if path is None:
            return read_status(self.live_files[0]) if self.live_files else None
        return read_status(Path(path))

    def view(self, name: str) -> pl.DataFrame:
        if name not in self._cache:
            if name not in self.views:
                raise ReportError(f"no view or table named {name!r}; known: {', '.join(self.views)}")
            self._cache[name] = self.sql(f'SELECT * FROM "{name}"')
        return self._cache[name]

    @property
    def views(self) -> list[str]:
        rows = self.con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name").fetchall()
        return [r[0] for r in rows]

    @property
    def episodes(self) -> pl.DataFrame:
        return self.view("episode_outcomes")

    @property
    def raw_episodes(self) -> pl.DataFrame:
        return self.view("episodes")

    @property
    def turns(self) -> pl.DataFrame:
        return self.view("turns")

    @property
    def calls(self) -> pl.DataFrame:
        return self.view("calls")

    @property
    def runs(self) -> pl.DataFrame:
        return self.view("runs")

    def __getattr__(self, name: str) -> pl.DataFrame:
        # results.env_scores, results.failure_classes, ... (any view)
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.view(name)
        except ReportError:
            raise AttributeError(name) from None

    @contextmanager
    def narrowed(self, name: str, where: str) -> Iterator[Results]:
        """Within the block, the view ``name`` holds only its rows for which ``where`` (SQL over its columns, which may
        name this connection's temporary tables) holds, and so does every view built on it; frames read inside are
        not kept. A temporary view of the same name shadows it (DuckDB looks in ``temp`` first; views bind by name
        when queried)."""
        database = self.con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        kept, self._cache = self._cache, {}
        self.con.execute(f'CREATE TEMP VIEW "{name}" AS SELECT * FROM "{database}".main."{name}" WHERE {where}')
        try:
            yield self
        finally:
            self.con.execute(f'DROP VIEW temp.main."{name}"')
            self._cache = kept

    # -- lifetime ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Detach the files (releases DuckDB's shared lock so a run can write to them again)."""
        self.con.close()

    def __enter__(self) -> Results:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _attach(con: duckdb.DuckDBPyConnection, path: Path, index: int) -> tuple[str, str, bool]:
    """Open one file as source ``index``: (database, schema, live). A file a run is writing (DuckDB's lock)
    is read from what its writer publishes; a run that has just started gets a few seconds to publish."""
    if not path.is_file():
        raise ReportError(f"{path}: no such file (give the .duckdb file a run wrote)")
    alias = f"src{index}"
    deadline = time.monotonic() + _LIVE_WAIT_S
    while True:
        try:
            con.execute(f"ATTACH {_sql_str(str(path))} AS {alias} (READ_ONLY)")
            break
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" not in msg.lower():
                raise StoreError(f"{path}: cannot open as DuckDB ({msg.splitlines()[0]})") from None
        except duckdb.Error as exc:
            raise StoreError(f"{path}: cannot open as DuckDB ({str(exc).splitlines()[0]})") from None
        manifest = read_manifest(path)
        if manifest is not None:
            try:
                create_live_views(con, f"live{index}", path, manifest)
                return "memory", f"live{index}", True
            except duckdb.IOException:
                con.execute(f"DROP SCHEMA IF EXISTS live{index} CASCADE")  # merged away meanwhile: read the manifest again
        if time.monotonic() > deadline:
            raise StoreError(
                f"{path}: the file is locked by another process that publishes no live snapshot (a run of an older "
                "agentbench-async, or another program); wait for it to finish, or copy the file and read the copy"
            )
        time.sleep(0.1)
    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [alias]
        ).fetchall()
    }
    missing = [t for t in TABLES if t not in tables]
    if missing:
        raise ReportError(f"{path}: not an agentbench results file (no {', '.join(missing)} table)")
    return alias, "main", False


def _columns(con: duckdb.DuckDBPyConnection, database: str, schema: str, table: str) -> set[str]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = ? AND table_name = ?",
        [database, schema, table],
    ).fetchall()
    return {r[0] for r in rows}


def _missing_columns(present: set[str], table: str) -> str:
    """NULL columns for what a file written by an older version lacks (e.g. ``episodes.paper_status``), so the
    views see the current schema whatever the files' ages (``live_turns`` has every column of ``turns``)."""
    like = "turns" if table == "live_turns" else ATTEMPT_TABLES.get(table, table)  # (an attempt table has its main table's columns)
    return "".join(f", NULL::{sql_type} AS {column}" for t, column, sql_type in ADDED_COLUMNS if t == like and column not in present)


def _open(paths: list[Path]) -> tuple[duckdb.DuckDBPyConnection, list[Path]]:
    """The in-memory database with the union views over ``paths``, and which of them are live."""
    for _ in range(20):
        try:
            return _open_once(paths)
        except _SnapshotGone:
            time.sleep(0.05)  # a live writer merged away or (at its end) removed the files just listed
    raise StoreError(f"{', '.join(map(str, paths))}: the live snapshot kept changing while it was opened; try again")


class _SnapshotGone(Exception):
    pass


def _open_once(paths: list[Path]) -> tuple[duckdb.DuckDBPyConnection, list[Path]]:
    con = duckdb.connect(":memory:")
    sources: list[tuple[str, str, bool]] = []
    try:
        for i, path in enumerate(paths):
            sources.append(_attach(con, path, i))
        con.execute("CREATE SCHEMA _declared")
        con.execute("USE memory._declared")
        con.execute(LIVE_TURNS_DDL)  # the empty live_turns of files written before it existed
        con.execute("USE memory.main")
        for table in (*TABLES, *_OPTIONAL_TABLES, *ATTEMPT_TABLES):
            parts = []
            for path, (database, schema, _) in zip(paths, sources):
                present = _columns(con, database, schema, table)
                if not present and table in ATTEMPT_TABLES:  # a file without earlier attempts (older, or read live): none
                    source = ATTEMPT_TABLES[table]
                    present = _columns(con, database, schema, source)
                    parts.append(f"SELECT *{_missing_columns(present, source)}{attempt_extra_columns()}, {_sql_str(str(path))} AS source_file "
                                 f"FROM {database}.{schema}.{source} WHERE false")  # fmt: skip
                    continue
                relation = f"{database}.{schema}.{table}" if present else f"memory._declared.{table}"
                parts.append(f"SELECT *{_missing_columns(present, table) if present else ''}, {_sql_str(str(path))} AS source_file FROM {relation}")
            con.execute(f"CREATE VIEW {table} AS " + " UNION ALL BY NAME ".join(parts))
        create_views(con)
    except duckdb.IOException as exc:
        con.close()
        if any(live for _, _, live in sources):
            raise _SnapshotGone from None
        raise StoreError(f"cannot read {', '.join(map(str, paths))} ({str(exc).splitlines()[0]})") from None
    except BaseException:
        con.close()
        raise
    return con, [path for path, (_, _, live) in zip(paths, sources) if live]


def _set_pool(con: duckdb.DuckDBPyConnection, pool: bool) -> None:
    """Whether the views merge the deciding configurations of a model x env into one row (episode_outcomes.config_id)."""
    con.execute(f"SET VARIABLE agentbench_pool = {'true' if pool else 'false'}")


def load(path_or_paths: str | Path | Iterable[str | Path], *, pool: bool = False) -> Results:
    """Open one result file or several (read-only) and return their frames and views.

    Scores and failure tables have one row per model x env x deciding configuration (``config_id``); ``pool``
    merges the configurations of each model x env into one row (``config_id`` 'pooled').

    A file that a run is writing is read from the snapshot its writer publishes (``Results.live_files``,
    ``Results.live_status()``, ``Results.refresh()``); its unfinished episodes' turns are in ``live_turns``.

    >>> res = load("runs/demo.duckdb")
    >>> res.env_scores            # polars frame of the env_scores view
    >>> res.sql("SELECT env, avg(n_turns) FROM episodes GROUP BY env")
    """
    if isinstance(path_or_paths, (str, Path)):
        paths = [Path(path_or_paths)]
    else:
        paths = [Path(p) for p in path_or_paths]
    if not paths:
        raise ReportError("no result file given")
    con, live = _open(paths)
    return Results(con, paths, live, pool)
