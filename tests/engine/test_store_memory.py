"""The writer's DuckDB memory has the bound we chose (issue 49, docs/performance.md): once a checkpoint has written the
rows to the file, DuckDB's buffer pool does not keep them cached (it kept every block it wrote, so a long run's memory
grew with its file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench_async.store import EpisodeWriter, Store, db
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
        monkeypatch.setattr(Store, "after_commit", lambda self: None)
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
