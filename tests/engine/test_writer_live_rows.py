"""An episode's turns stored live while it runs are its stored turns when it finishes, value for value: in the file
and in what live readers see, whether the finished record holds the very rows handed live (this process ran it:
they are read back from live_turns, not converted again) or copies of them (a distributed worker's)."""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path
from typing import Any

import duckdb

from agentbench_async.records import CallRow, EpisodeRecord, TurnRow
from agentbench_async.store import EpisodeWriter, Store

_COLUMNS = "episode_id, turn, seq, role, content, action, observation, valid, error, tool_calls, epoch(created_at), reasoning, injected"


def _rows(episode: str, n: int) -> list[TurnRow]:
    return [TurnRow(turn=i // 2, seq=i, role="assistant" if i % 2 else "user", content=f"{episode} message {i} " + "é" * i,
                    action=f"act {i}" if i % 2 else None, observation=f"obs {i}" if i % 2 else None, valid=bool(i % 3) if i % 2 else None,
                    error="bad" if i == 5 else None, created_at=1_700_000_000.0 + i, reasoning="why" if i == 3 else None,
                    injected=i == 2) for i in range(n)]  # fmt: skip


def _record(episode: str, rows: list[TurnRow]) -> EpisodeRecord:
    return EpisodeRecord(episode_id=episode, model="m", env="echo", split="dev", task_id=episode.split("/")[3], repeat=0,
                         status="completed", score=1.0, success=True, n_turns=len(rows) // 2, input_tokens=1, output_tokens=1,
                         started_at=1_700_000_000.0, finished_at=1_700_000_100.0, error=None, details={}, source="builtin",
                         action_mode="text", paper_status="completed", turns=rows,
                         calls=[CallRow(turn=1, attempt=1, http_status=200, latency_ms=5.0, model="m")])  # fmt: skip


def _expected(rows: list[TurnRow]) -> list[tuple[Any, ...]]:
    return [(r.turn, r.seq, r.role, r.content, r.action, r.observation, r.valid, r.error, r.tool_calls, r.created_at, r.reasoning,
             r.injected) for r in rows]  # fmt: skip


_READER = """
import json, sys, time
from agentbench_async.analytics import load
path, query, wanted, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + 20
while True:
    with load(path) as res:  # a reader in another process, as report/view are: the run holds the file
        if res.sql(query).item() == wanted:
            print(json.dumps([list(r) for r in res.sql(rows).rows()] if rows else [], default=str))
            break
    if time.monotonic() > deadline:
        sys.exit(f"{query} never reached {wanted}")
    time.sleep(0.05)
"""


async def _until(path: Path, query: str, wanted: int, rows: str = "") -> list[list[Any]]:
    """Once a live reader of ``path`` sees ``wanted`` from ``query`` (the writer flushes every 50 ms here): ``rows``."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _READER, str(path), query, str(wanted), rows,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return json.loads(out)  # type: ignore[no-any-return]


async def test_turns_stored_live_are_stored_whole_when_the_episode_finishes(tmp_path: Path) -> None:
    path = tmp_path / "run.duckdb"
    store = Store(path)
    run_id = store.begin_run({"models": [{"name": "m"}]}, "fp", command="run", version="test", new_run=False)
    writer = EpisodeWriter(store, run_id, "fp", flush_interval=0.05)
    writer.start()
    own, remote = "m/echo/dev/t1/0", "m/echo/dev/t2/0"
    own_rows, remote_rows = _rows(own, 9), _rows(remote, 6)
    own_sink, remote_sink = writer.live_sink(own, "m", "echo"), writer.live_sink(remote, "m", "echo")
    own_sink(own_rows[:4])
    remote_sink(remote_rows[:4])
    await _until(path, "SELECT count(*) FROM live_turns", 8)
    own_sink(own_rows[4:6])  # two more flushes' worth; rows 6-8 are never handed live (the episode ends first)
    await _until(path, "SELECT count(*) FROM live_turns", 10)
    writer.submit(_record(own, own_rows))  # the very rows handed live
    writer.submit(_record(remote, copy.deepcopy(remote_rows)))  # copies of them, as a worker's record arrives
    # what live readers see once the episodes are committed: every turn, none left live
    seen = await _until(path, "SELECT count(*) FROM episodes", 2, f"SELECT {_COLUMNS}, (SELECT count(*) FROM live_turns) FROM turns "
                        "ORDER BY episode_id, seq")  # fmt: skip
    await writer.close()
    store.close()
    con = duckdb.connect(str(path), read_only=True)
    stored = con.execute(f"SELECT {_COLUMNS} FROM turns ORDER BY episode_id, seq").fetchall()
    assert con.execute("SELECT count(*) FROM live_turns").fetchone() == (0,)
    con.close()
    expected = [(own, *row) for row in _expected(own_rows)] + [(remote, *row) for row in _expected(remote_rows)]
    assert [tuple(r) for r in stored] == expected
    assert [tuple(r[:-1]) for r in seen] == [tuple(json.loads(json.dumps(list(r), default=str))) for r in expected]
    assert {r[-1] for r in seen} == {0}
