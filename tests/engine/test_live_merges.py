"""Merging the live snapshot's parts changes no row a reader sees. The writer is fed flush after flush (episodes that run
over many flushes, finish within one, are retried within the run, and an earlier killed run's live turns that run again or
just finish), and after every flush the views over its snapshot (merged two into one here, every level) read exactly
the rows the views read over the same flushes never merged; and a merged part keeps only the deletions a reader still
needs, not one per episode finished in its flushes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from agentbench_async.records import CallRow, EpisodeRecord, TurnRow
from agentbench_async.store import EpisodeWriter, Store
from agentbench_async.store import live

_TABLES = ("episodes", "turns", "model_calls", "live_turns")


def _turns(episode: str, first: int, n: int) -> list[TurnRow]:
    return [TurnRow(turn=i // 2, seq=i, role="assistant" if i % 2 else "user", content=f"{episode} says {i}", created_at=1.7e9 + i)
            for i in range(first, first + n)]  # fmt: skip


def _record(episode: str, turns: list[TurnRow], status: str = "completed") -> EpisodeRecord:
    return EpisodeRecord(episode_id=episode, model="m", env="echo", split="dev", task_id=episode.split("/")[3], repeat=0, status=status,
                         score=1.0 if status == "completed" else 0.0, success=status == "completed", n_turns=len(turns) // 2,
                         input_tokens=1, output_tokens=1, started_at=1.7e9, finished_at=1.7e9 + 1, error=None, details={},
                         source="builtin", action_mode="text", paper_status=status, turns=turns,
                         calls=[CallRow(turn=t, attempt=1, http_status=200, latency_ms=5.0, model="m") for t in range(len(turns) // 2)])  # fmt: skip


class _Unmerged(live.LivePublisher):
    """The same flushes published and never merged: what the views read without merges."""

    def _merge(self) -> None:
        pass


def _view_rows(*snapshots: Path) -> list[dict[str, list[tuple[Any, ...]]]]:
    """Each snapshot's rows of every table, read through the views (one connection)."""
    con = duckdb.connect()
    try:
        out = []
        for i, path in enumerate(snapshots):
            manifest = live.read_manifest(path)
            assert manifest is not None
            live.create_live_views(con, f"snap{i}", path, manifest)
            out.append({t: con.execute(f"SELECT * FROM snap{i}.{t} ORDER BY ALL").fetchall() for t in _TABLES})
        return out
    finally:
        con.close()


def _plan(flushes: int) -> list[tuple[list[EpisodeRecord], list[tuple[str, list[TurnRow]]]]]:
    """Each flush: (the records finished in it, the live turns handed in it)."""
    plan: list[tuple[list[EpisodeRecord], list[tuple[str, list[TurnRow]]]]] = [([], []) for _ in range(flushes)]
    for n in range(40):
        episode, start, length = f"m/echo/dev/t{n:03d}/0", (n * 7) % 20, 1 + (n * 5) % 9  # 1 to 9 flushes live
        played = 0
        for k in range(start, start + length):  # a turn a flush
            plan[k][1].append((episode, _turns(episode, played, 2)))
            played += 2
        if n % 9 == 4:  # an infrastructure failure, retried within the run: live again, then done
            plan[start + length][0].append(_record(episode, _turns(episode, 0, played), "env_error"))
            for k in range(start + length + 1, start + length + 4):
                plan[k][1].append((episode, _turns(episode, 2 * (k - start - length - 1), 2)))
            plan[start + length + 4][0].append(_record(episode, _turns(episode, 0, 6)))
        elif n % 11 == 3:  # still running when the flushes end
            continue
        else:
            plan[start + length][0].append(_record(episode, _turns(episode, 0, played + 2)))
    for k in range(0, flushes, 3):  # finished within a flush: no live turns
        plan[k][0].append(_record(f"m/echo/dev/q{k:03d}/0", _turns(f"q{k}", 0, 4)))
    plan[2][1].append(("m/echo/dev/s1/0", _turns("m/echo/dev/s1/0", 0, 2)))  # the killed run's episode runs again (restart)
    plan[12][0].append(_record("m/echo/dev/s1/0", _turns("m/echo/dev/s1/0", 0, 4)))
    plan[20][0].append(_record("m/echo/dev/s2/0", _turns("m/echo/dev/s2/0", 0, 2)))  # the killed run's live turns, finished
    return plan


@pytest.mark.parametrize("settle", [True, False], ids=["each-merge-done-before-the-next-flush", "merges-in-flight-meanwhile"])
def test_merges_change_no_row_the_views_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settle: bool) -> None:
    """Merges run in a thread of their own while the writer goes on: the views read the same rows whether a flush comes
    after every merge due has been swapped in, or while one is still being written (then the parts it merges are read)."""
    monkeypatch.setattr(live, "_FANOUT", 2)  # level 3 after 8 flushes: 34 flushes make 3 level-3 parts and every level below
    monkeypatch.setattr(live, "_GRACE_S", 0.0)
    path = tmp_path / "run.duckdb"
    store = Store(path)
    killed = store.begin_run({"models": [{"name": "m"}]}, "fp", command="run", version="test", new_run=False)
    earlier = EpisodeWriter(store, killed, "fp")
    earlier._publisher = None  # the killed run left live turns (s1, s2, s3) and no snapshot
    earlier._write([], [(e, "m", "echo", _turns(e, 0, 2)) for e in ("m/echo/dev/s1/0", "m/echo/dev/s2/0", "m/echo/dev/s3/0")], {})
    run_id = store.begin_run({"models": [{"name": "m"}]}, "fp", command="run", version="test", new_run=False)
    writer = EpisodeWriter(store, run_id, "fp")
    reference = _Unmerged(store.con, tmp_path / "ref.duckdb", run_id, "fp")
    merged = writer._publisher
    assert merged is not None
    publish = merged.publish

    def both(tables: dict[str, Any], deletions: Any, progress: Any) -> None:
        deletions = list(deletions)
        reference.publish(tables, deletions, progress)
        publish(tables, deletions, progress)

    monkeypatch.setattr(merged, "publish", both)
    writer._start_live({})
    reference.start({})
    try:
        for k, (records, turns) in enumerate(_plan(34)):
            for record in records:
                writer.submit(record)
            batch, writer._pending = writer._pending, []
            writer._write(batch, [(e, "m", "echo", rows) for e, rows in turns], {})
            if settle:
                merged.settle()
                merged.heartbeat({})  # the manifest lists the merged parts
            seen, unmerged_seen = _view_rows(path, tmp_path / "ref.duckdb")
            assert seen == unmerged_seen, f"after flush {k}"
        merged.settle()
        merged.heartbeat({})
        seen, unmerged_seen = _view_rows(path, tmp_path / "ref.duckdb")
        assert seen == unmerged_seen, "every merge done"
        assert writer.live_error is None
        manifest, unmerged = live.read_manifest(path), live.read_manifest(tmp_path / "ref.duckdb")
        assert manifest is not None and unmerged is not None
        assert [p["level"] for p in manifest["parts"]][:3] == [3, 3, 3], manifest["parts"]
        # what the views read is the file (but the live turns a retry writes after the failed attempt: the views hide those
        # until it finishes, merged or not; none is running at the end)
        for table in _TABLES:
            stored = store.con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
            assert seen[table] == stored, table
        assert {r[1] for r in seen["live_turns"]} == {"m/echo/dev/s3/0", *(f"m/echo/dev/t{n:03d}/0" for n in (3, 14, 25, 36))}
        # a merged part keeps only the finish deletions a reader still needs: of episodes whose live turns began before its
        # flushes, or that may have more to come (a retried failure), or an earlier run's (-1); one per episode finished in
        # its flushes no more
        first = 0
        for part in manifest["parts"]:  # in order; a part of level L holds 2**L flushes here
            if part["level"] > 0 and "deletions" in part["tables"]:
                dels = pq.read_table(live.live_dir(path) / part["name"] / "deletions.parquet").to_pylist()
                assert all(d["since"] < first for d in dels if d["kind"] == "finish"), (part, dels)
            first += 2 ** part["level"]
        kept, published = (pq.ParquetDataset([live.live_dir(snapshot) / p["name"] / "deletions.parquet" for p in m["parts"]
                                              if "deletions" in p["tables"]]).read().num_rows
                           for snapshot, m in ((path, manifest), (tmp_path / "ref.duckdb", unmerged)))  # fmt: skip
        assert published >= 40 and kept < published, (kept, published)
    finally:
        store.close()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A run file whose live snapshot merges two parts into one, merged-away parts deleted at once."""
    monkeypatch.setattr(live, "_FANOUT", 2)
    monkeypatch.setattr(live, "_GRACE_S", 0.0)
    store = Store(tmp_path / "run.duckdb")
    yield store
    store.close()


def _live_writer(store: Store) -> tuple[EpisodeWriter, live.LivePublisher]:
    """A writer of a new run in ``store``, publishing its live snapshot."""
    writer = EpisodeWriter(store, store.begin_run({"models": [{"name": "m"}]}, "fp", command="run", version="test", new_run=False), "fp")
    writer._start_live({})
    assert writer._publisher is not None
    return writer, writer._publisher


def _flushes(writer: EpisodeWriter, plan: list[tuple[list[EpisodeRecord], list[tuple[str, list[TurnRow]]]]]) -> None:
    for records, turns in plan:
        for record in records:
            writer.submit(record)
        batch, writer._pending = writer._pending, []
        writer._write(batch, [(e, "m", "echo", rows) for e, rows in turns], {})


def _assert_views_read_the_file(store: Store) -> None:
    (seen,) = _view_rows(store.path)
    for table in _TABLES:
        assert seen[table] == store.con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall(), table


def _assert_only_listed_folders(path: Path, manifest: dict[str, Any]) -> None:
    """The snapshot's folder holds the parts the manifest lists, no other (a merge's unfinished or merged-away part)."""
    assert {p.name for p in live.live_dir(path).iterdir() if p.name.startswith("part-")} == {p["name"] for p in manifest["parts"]}


def test_the_writer_goes_on_while_a_merge_is_written(store: Store, blocked: tuple[threading.Event, threading.Event]) -> None:
    """A merge held in its thread holds no flush: the writer commits and publishes 10 more flushes meanwhile, and the
    views read every row the file holds; once the merge ends it is swapped in and the next ones run."""
    release, waiting = blocked
    writer, publisher = _live_writer(store)
    plan = _plan(34)
    _flushes(writer, plan[:2])  # the second flush sets off the first merge, which waits
    assert waiting.wait(10)
    _flushes(writer, plan[2:12])
    assert writer.episodes_written == sum(len(records) for records, _ in plan[:12])
    manifest = live.read_manifest(store.path)
    assert manifest is not None and [p["level"] for p in manifest["parts"]] == [0] * 12  # nothing merged yet
    _assert_views_read_the_file(store)
    release.set()
    publisher.settle()
    publisher.heartbeat({})
    manifest = live.read_manifest(store.path)
    assert manifest is not None and [p["level"] for p in manifest["parts"]] == [3, 2], manifest["parts"]  # 8 + 4 flushes
    _assert_views_read_the_file(store)
    _assert_only_listed_folders(store.path, manifest)


def test_the_end_of_a_run_stops_a_merge_in_flight(store: Store, blocked: tuple[threading.Event, threading.Event]) -> None:
    """When the writer stops, a merge still being written is stopped and its thread waited for: its folder, which no
    manifest listed, is gone, and the snapshot is what the last manifest lists."""
    release, waiting = blocked
    writer, publisher = _live_writer(store)
    _flushes(writer, _plan(34)[:2])
    assert waiting.wait(10)
    job = publisher._merging
    assert job is not None and job.thread.is_alive()
    threading.Timer(0.2, release.set).start()  # the merge goes on once close has asked it to stop
    writer._stop_live()
    assert not job.thread.is_alive() and not job.folder.exists()
    manifest = live.read_manifest(store.path)
    assert manifest is not None
    _assert_only_listed_folders(store.path, manifest)
    assert writer._publisher is None


def test_a_merge_that_fails_stops_live_reads_not_the_run(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge failing in its thread (here: the disk refuses the file) stops live publishing with a warning at the next
    flush, as a flush's own failure does; the writer goes on storing episodes."""

    def refused(self: live.LivePublisher, *args: Any, **kwargs: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(live.LivePublisher, "_write_merged", refused)
    writer, publisher = _live_writer(store)
    plan = _plan(34)
    _flushes(writer, plan[:2])
    job = publisher._merging
    assert job is not None
    job.thread.join(10)
    _flushes(writer, plan[2:6])
    assert writer.live_error is not None and "No space left on device" in writer.live_error
    assert writer._publisher is None and not job.folder.exists()
    stored = store.con.execute("SELECT count(*) FROM episodes").fetchone()
    assert stored is not None and stored[0] == writer.episodes_written == sum(len(records) for records, _ in plan[:6])
