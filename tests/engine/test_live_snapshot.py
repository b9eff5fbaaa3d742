"""What a live writer publishes equals what it committed: after many flushes, merges of parts (eight into one,
here two to exercise them in a short run), parts deleted after their grace time and replaced episodes, the
snapshot's views hold exactly the rows of the DuckDB file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from engine_support import echo_config, query, run, start_mock

from agentbench_async.store import db as store_db
from agentbench_async.store import live


def _snapshot(path: Path, sql: str) -> list[tuple[object, ...]]:
    manifest = live.read_manifest(path)
    assert manifest is not None
    con = duckdb.connect()
    try:
        live.create_live_views(con, "snap", path, manifest)
        return con.execute(sql.replace("{s}", "snap")).fetchall()
    finally:
        con.close()


async def test_published_snapshot_equals_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "_FANOUT", 2)
    monkeypatch.setattr(live, "_GRACE_S", 0.0)
    monkeypatch.setattr(store_db, "remove_live_dir", lambda path: None)  # keep the last snapshot to compare
    out = tmp_path / "run.duckdb"
    dead = await start_mock()
    dead_url = dead.base_url
    await dead.stop()  # nothing listens there any more: every episode of the first run ends model_error
    options = {"echo": {"tasks": 120, "turns": 6}}
    first = await run(echo_config(out, dead_url, env_options=options, models=[{"name": "mock-oracle", "max_retries": 0}]))
    assert first.statuses == {"model_error": 120}
    server = await start_mock(latency_ms=150)
    try:
        summary = await run(echo_config(out, server.base_url, env_options=options, max_concurrency=40))
    finally:
        await server.stop()
    assert summary.statuses == {"completed": 120}
    manifest = live.read_manifest(out)
    assert manifest is not None and any(p["level"] > 0 for p in manifest["parts"]), manifest["parts"]
    folders = {p.name for p in live.live_dir(out).iterdir() if p.name.startswith("part-")}
    assert folders == {p["name"] for p in manifest["parts"]}  # merged-away parts were deleted after their grace time
    for table, key in (("episodes", "episode_id, status, score, n_turns"), ("turns", "episode_id, seq, role, content, action, valid"),
                       ("model_calls", "episode_id, turn, attempt, http_status"), ("runs", "run_id, fingerprint")):  # fmt: skip
        stored = sorted(query(out, f"SELECT run_id, {key} FROM {table}"))
        published = sorted(_snapshot(out, f"SELECT run_id, {key} FROM {{s}}.{table}"))
        assert published == stored, table
    assert _snapshot(out, "SELECT count(*) FROM {s}.live_turns") == [(0,)] == query(out, "SELECT count(*) FROM live_turns")
    assert _snapshot(out, "SELECT count(*), count(DISTINCT episode_id) FROM {s}.episodes") == [(120, 120)]
