"""The writer's DuckDB memory has the bound we chose (issue 49, docs/performance.md): once a checkpoint has written the
rows to the file, DuckDB's buffer pool does not keep them cached (it kept every block it wrote, so a long run's memory
grew with its file)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from agentbench_async.errors import StoreError
from agentbench_async.store import EpisodeWriter, Store, db, live
from agentbench_async.records import CallRow, EpisodeRecord, TurnRow


def _record(i: int) -> EpisodeRecord:
    rows = [TurnRow(turn=t // 2, seq=t, role="assistant" if t % 2 else "user", content=f"episode {i} turn {t} " + "x" * 200)
            for t in range(6)]  # fmt: skip
    return EpisodeRecord(episode_id=f"m/echo/test/t{i}/0", model="m", env="echo", split="test", task_id=f"t{i}", repeat=0,
                         status="completed", score=1.0, success=True, n_turns=3, input_tokens=1, output_tokens=1,
                         started_at=1_700_000_000.0, finished_at=1_700_000_001.0, error=None, details={}, source="builtin",
                         action_mode="text", paper_status="completed", turns=rows,
                         calls=[CallRow(turn=1, attempt=1, http_status=200, latency_ms=5.0, model="m")])  # fmt: skip


def _cached_mb(store: Store) -> float:
    row = store.con.execute("SELECT sum(memory_usage_bytes) / 2**20 FROM duckdb_memory() WHERE tag = 'BASE_TABLE'").fetchone()
    return float(row[0] or 0) if row else 0.0


@pytest.mark.parametrize("trimmed", [True, False])
async def test_blocks_a_checkpoint_wrote_are_not_kept_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trimmed: bool) -> None:
    monkeypatch.setattr(db, "CHECKPOINT_MB", 1)
    monkeypatch.setattr(db, "_CACHE_AFTER_CHECKPOINT", "1MB")
    if not trimmed:  # DuckDB's own checkpoints, as before: what the test tells apart
        monkeypatch.setattr(Store, "after_commit", lambda self, **_: None)
    store = Store(tmp_path / "run.duckdb")
    writer = EpisodeWriter(store, store.begin_run({}, "fp", command="run", version="test", new_run=False), "fp", flush_interval=0.01)
    writer.start()
    for batch in range(6):  # ~1.5 MB of turns a batch: a checkpoint after each
        for i in range(1000):
            writer.submit(_record(batch * 1000 + i))
        await _flushed(writer, (batch + 1) * 1000)
    await writer.close()
    assert store.con.execute("SELECT count(*) FROM turns").fetchone() == (36_000,)
    cached = _cached_mb(store)
    store.close()
    if trimmed:
        assert store.checkpoints >= 5
        assert cached <= 2, f"{cached:.1f} MB of written blocks still cached"
    else:
        assert cached > 2  # DuckDB alone keeps them: the bound above is the writer's doing


async def _flushed(writer: EpisodeWriter, episodes: int) -> None:
    import asyncio

    while writer.episodes_written < episodes:
        await asyncio.sleep(0.01)


async def test_rows_held_until_a_checkpoint_are_bounded_and_finished_live_rows_leave_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What DuckDB holds of the committed rows until a checkpoint stays near ``HELD_MB`` whatever the WAL (its bound
    counts DuckDB's memory, not log bytes); and with DuckDB's vacuum off at the writer's checkpoints, the live rows of
    finished episodes still leave the file (a row group every row of which was deleted is dropped)."""
    monkeypatch.setattr(db, "CHECKPOINT_MB", 10_000)  # the WAL alone would never checkpoint here
    monkeypatch.setattr(db, "HELD_MB", 6)
    store = Store(tmp_path / "run.duckdb")
    writer = EpisodeWriter(store, store.begin_run({}, "fp", command="run", version="test", new_run=False), "fp", flush_interval=0.01)
    writer.start()
    held = []
    for batch in range(12):  # ~1.5 MB of turns a batch, each handed live first and then finished
        for i in range(batch * 1000, (batch + 1) * 1000):
            record = _record(i)
            writer.live_sink(record.episode_id, "m", "echo")(record.turns[:4])
        await _live_flushed(store, writer)
        for i in range(batch * 1000, (batch + 1) * 1000):
            writer.submit(_record(i))
        await _flushed(writer, (batch + 1) * 1000)
        held.append(store._held() / 2**20)
    await writer.close()
    assert store.con.execute("SELECT count(*) FROM turns").fetchone() == (72_000,)
    assert store.con.execute("SELECT count(*) FROM live_turns").fetchone() == (0,)
    store.close()
    con = duckdb.connect(str(tmp_path / "run.duckdb"), read_only=True)  # the file as the run left it
    live_groups = con.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('live_turns')").fetchone()[0]
    con.close()
    assert max(held) < 10, f"DuckDB held {max(held):.1f} MB of committed rows after a flush (bound 6 MB + one flush)"  # 48 MB unbounded
    assert store.checkpoints >= 2
    assert live_groups <= 1, f"live_turns kept {live_groups} row groups of deleted rows"


async def _live_flushed(store: Store, writer: EpisodeWriter) -> None:
    import asyncio

    while writer._live:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the flush that took them has committed


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _given_back_mb(pool: pa.MemoryPool) -> float:
    """In a thread of its own (as the writer's flushes and the live snapshot's merges run): 96 arrays of ~780 KB from
    ``pool``, every other one freed; the MB of RSS given back within 5 s (polled from the main thread)."""
    held: list[pa.Array] = []
    before: list[float] = []

    def work() -> None:
        base = pa.array(np.arange(100_000, dtype=np.int64))  # numpy's memory: the arrays below are Arrow's
        arrays = [pc.add(base, i, memory_pool=pool) for i in range(96)]
        before.append(_rss_mb())
        held.extend(arrays[::2])
        del arrays

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    deadline = time.monotonic() + 5
    while before[0] - _rss_mb() < 30 and time.monotonic() < deadline:
        time.sleep(0.05)
    given = before[0] - _rss_mb()
    held.clear()
    return given


# read without Arrow's thread pool, as the engine reads: a process on jemalloc that used that pool may abort at exit
# (apache/arrow#34314; it did here, once in a CI run, with threads on)
_ARROW_IN_A_PROCESS = (
    "import pyarrow as pa, pyarrow.parquet as pq, io; f = io.BytesIO(); pq.write_table(pa.table({'x': list(range(1000))}), f); "
    "print(pa.default_memory_pool().backend_name, pq.read_table(pa.BufferReader(f.getvalue()), use_threads=False).num_rows)"
)  # fmt: skip


def _arrow_pool_of(code: str, chosen: str | None) -> list[str]:
    """What a fresh process running ``code`` (then Arrow, a Parquet table written and read) prints: pool and rows."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    out = subprocess.run([sys.executable, "-c", f"{code}; {_ARROW_IN_A_PROCESS}"], env=env, capture_output=True, text=True,
                         timeout=60, check=True)  # fmt: skip
    assert out.stderr == ""  # no warning from Arrow about the pool
    return out.stdout.split()


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="the program picks jemalloc on Linux x86-64 only")
@pytest.mark.parametrize(("chosen", "pool"), [(None, "jemalloc"), ("mimalloc", "mimalloc"), ("system", "system")])
def test_the_agentbench_program_allocates_all_of_arrow_from_jemalloc(chosen: str | None, pool: str) -> None:
    """The ``agentbench`` program makes all of Arrow allocate from jemalloc before its modules load (its C++ Parquet
    code too: the live snapshot's parts and merges); a pool the user named stands."""
    start = "from agentbench_async.program import choose_arrow_pool; choose_arrow_pool(); import agentbench_async.cli"
    assert _arrow_pool_of(start, chosen) == [pool, "1000"]


def test_a_script_importing_the_engine_keeps_its_own_arrow_pool() -> None:
    """A script that imports the engine keeps the pool its Arrow would have had (jemalloc may abort at exit in a process
    that used Arrow's thread pool: apache/arrow#34314; only the program, which never starts that pool, changes it)."""
    own = _arrow_pool_of("import pyarrow as pa; own = pa.default_memory_pool().backend_name", None)
    assert _arrow_pool_of("import agentbench_async.cli", None) == own


def test_the_agentbench_command_starts_through_the_program() -> None:
    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "agentbench"]
    assert script.value == "agentbench_async.program:main"


@pytest.mark.skipif(sys.platform != "linux", reason="RSS read from /proc")
def test_jemalloc_gives_back_what_another_thread_freed() -> None:
    """Why the program picks jemalloc: ~37 MB that a thread other than the one that allocated it freed (as the writer's
    flushes and the live snapshot's merges free) goes back to the system within seconds (mimalloc, Arrow's Linux
    default, kept it: docs/performance.md)."""
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow was built without jemalloc")
    assert _given_back_mb(pool) >= 30


# -- a checkpoint and a merge of the live snapshot do not add up ------------------------------------
def _batch_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_mb: int) -> tuple[Store, EpisodeWriter]:
    """A writer driven flush by flush (no event loop), publishing a live snapshot that merges 2 parts into 1; the
    writer checkpoints at ``held_mb`` of rows DuckDB holds (the WAL alone never)."""
    monkeypatch.setattr(db, "HELD_MB", held_mb)
    monkeypatch.setattr(db, "CHECKPOINT_MB", 10_000)
    monkeypatch.setattr(live, "_FANOUT", 2)
    monkeypatch.setattr(live, "_GRACE_S", 0.0)
    store = Store(tmp_path / "run.duckdb")
    writer = EpisodeWriter(store, store.begin_run({}, "fp", command="run", version="test", new_run=False), "fp")
    writer._start_live({})
    return store, writer


def _flush(writer: EpisodeWriter, first: int, n: int) -> None:
    writer._write([_record(i) for i in range(first, first + n)], [], {})


def _checkpoints(monkeypatch: pytest.MonkeyPatch, store: Store, writer: EpisodeWriter) -> list[tuple[float, bool]]:
    """Each checkpoint of the writer's from now on: the MB of rows DuckDB held just before it, whether a merge ran then."""
    seen: list[tuple[float, bool]] = []
    checkpoint = Store._checkpoint

    def watched(self: Store) -> None:
        seen.append((self._held() / 2**20, writer._publisher is not None and writer._publisher.merging))
        checkpoint(self)

    monkeypatch.setattr(Store, "_checkpoint", watched)
    return seen


def test_while_a_merge_holds_its_memory_duckdb_holds_half(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         blocked: tuple[threading.Event, threading.Event]) -> None:
    """While a merge of the live snapshot is written in its thread (its memory is Arrow's), the writer checkpoints at
    half its bound, so DuckDB's rows and the merge's do not add up to the most of both; with no merge running, at the
    whole bound."""
    release, waiting = blocked
    store, writer = _batch_writer(tmp_path, monkeypatch, held_mb=4)
    seen = _checkpoints(monkeypatch, store, writer)
    try:
        _flush(writer, 0, 100)
        _flush(writer, 100, 100)  # the second flush sets off a merge, which waits
        assert waiting.wait(10)
        first = 200
        while len(seen) < 2 and first < 20_000:  # ~0.25 MB a flush
            _flush(writer, first, 150)
            first += 150
        assert len(seen) == 2 and all(merging and 2 <= held < 3 for held, merging in seen), seen
        monkeypatch.setattr(live, "_FANOUT", 10_000)  # no merge after this one
        release.set()
        assert writer._publisher is not None
        writer._publisher.settle()
        seen.clear()
        while not seen and first < 40_000:
            _flush(writer, first, 150)
            first += 150
        assert seen and all(4 <= held < 5 and not merging for held, merging in seen), seen
    finally:
        release.set()
        writer._stop_live()
        store.close()


def test_a_large_merge_starts_right_after_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge of 64 flushes or more (here 4: two into one) starts with DuckDB's rows just checkpointed, so a checkpoint's
    memory and the merge's do not meet; smaller merges and flushes leave the checkpoints to the usual bound."""
    store, writer = _batch_writer(tmp_path, monkeypatch, held_mb=16)
    publisher = writer._publisher
    assert publisher is not None
    ahead: list[tuple[float, float]] = []
    checkpoint_ahead = publisher.before_large_merge
    assert checkpoint_ahead is not None

    def watched() -> None:
        before = store._held() / 2**20
        checkpoint_ahead()
        ahead.append((before, store._held() / 2**20))

    publisher.before_large_merge = watched
    try:
        for k in range(16):  # ~1 MB a flush
            _flush(writer, k * 400, 400)
            publisher.settle()
        assert len(ahead) >= 3, ahead  # the merges of level 1 parts and above (16 flushes: 4 + 2 + 1)
        assert any(before >= 4 for before, _ in ahead), ahead  # a quarter of the bound or more: checkpointed
        assert all(after < 4 for _, after in ahead), ahead
        assert all(after < 1 for before, after in ahead if before >= 4), ahead
    finally:
        writer._stop_live()
        store.close()


def test_a_checkpoint_failing_before_a_large_merge_stops_the_run_not_only_live_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint ahead of a large merge runs inside the live snapshot's publishing, whose own failures only stop live
    reads; a disk that refuses the checkpoint is the run file's failure: one line naming the file, and the run stops."""
    store, writer = _batch_writer(tmp_path, monkeypatch, held_mb=16)

    def refused(self: Store) -> None:
        raise duckdb.IOException("IO Error: No space left on device")

    monkeypatch.setattr(Store, "_checkpoint", refused)
    try:
        with pytest.raises(StoreError, match=r"run\.duckdb: a checkpoint before a live merge failed \(IO Error: No space left on device\)"):
            for k in range(16):  # ~1 MB a flush: the first checkpoint due is the one ahead of the first large merge
                _flush(writer, k * 400, 400)
                assert writer._publisher is not None
                writer._publisher.settle()
        assert writer.live_error is None
    finally:
        writer._stop_live()
        monkeypatch.undo()
        store.close()
