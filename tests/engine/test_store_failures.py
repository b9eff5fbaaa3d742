"""The writer never dies silently: values DuckDB cannot hold are stored as null with the episode's error saying
so; a write that fails (disk full, file removed) stops the run with one line naming the file and the cause,
what was committed stays, and a re-run resumes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from engine_support import echo_config, mock_process, query, run, start_mock

from agentbench_async.errors import StoreError
from agentbench_async.records import CallRow, EpisodeRecord, TurnRow, now
from agentbench_async.store import EpisodeWriter, Store
from agentbench_async.store import writer as writer_module


def _record(episode_id: str, **changes: object) -> EpisodeRecord:
    record = EpisodeRecord(
        episode_id=episode_id, model="m", env="echo", split="dev", task_id=episode_id, repeat=0, status="completed", score=1.0,
        success=True, n_turns=1, input_tokens=3, output_tokens=2, started_at=now(), finished_at=now(), error=None, details={},
        source="builtin", action_mode="text",
        turns=[TurnRow(turn=0, seq=0, role="user", content="hi"), TurnRow(turn=1, seq=1, role="assistant", content="ANSWER: 1")],
        calls=[CallRow(turn=1, attempt=1, http_status=200, latency_ms=1.0, input_tokens=3, output_tokens=2)],
    )  # fmt: skip
    for name, value in changes.items():
        setattr(record, name, value)
    return record


async def test_values_duckdb_cannot_hold_are_stored_as_null_and_the_episode_error_says_so(tmp_path):
    store = Store(tmp_path / "v.duckdb")
    run_id = store.begin_run({}, "fp", command="test", version="0", new_run=False)
    writer = EpisodeWriter(store, run_id, "fp")
    writer.start()
    bad = _record("bad", details={"ratio": float("nan")}, n_turns=2**40, error="env said \ud800")
    bad.turns[1].content = "cut \ud83d"
    bad.calls[0].input_tokens = 10**30
    writer.submit(_record("good"))
    writer.submit(bad)
    await writer.close()
    store.close()
    assert writer.failure is None
    rows = dict(query(tmp_path / "v.duckdb", "SELECT episode_id, error FROM episodes"))
    assert rows["good"] is None, "the other episodes of the batch are untouched"
    error = rows["bad"]
    for named in ("error (not valid UTF-8)", "n_turns (1099511627776 does not fit INTEGER)", "details (NaN, Infinity or text that is not JSON)",
                  "turns[1].content (not valid UTF-8)", "model_calls[0].input_tokens (100000000000000000000000000... does not fit BIGINT)"):
        assert named in error, error
    assert error.startswith("stored with null in place of values DuckDB cannot hold: ")
    assert query(tmp_path / "v.duckdb", "SELECT n_turns, details FROM episodes WHERE episode_id = 'bad'") == [(None, "{}")]
    assert query(tmp_path / "v.duckdb", "SELECT content FROM turns WHERE episode_id = 'bad' ORDER BY seq") == [("hi",), (None,)]
    assert query(tmp_path / "v.duckdb", "SELECT input_tokens, output_tokens FROM model_calls WHERE episode_id = 'bad'") == [(None, 2)]


def _can_mount() -> bool:
    return os.geteuid() == 0 and subprocess.run(["mount", "--version"], capture_output=True).returncode == 0


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path) -> Path:
    """Take every free byte of the filesystem of ``folder`` (a file the test removes to free it again)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 512):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * size)
    return filler


@pytest.mark.skipif(not _can_mount(), reason="needs root to mount a small tmpfs")
async def test_values_of_another_type_than_their_field_are_stored_as_before(tmp_path):
    # The writer converts a column with its field's type when every value has it (the fast path); a column holding a
    # value of another type goes through pyarrow's own inference as before: an integer score is a number, while a
    # token count 7.6 beside integer counts, True as a turn count or 1 as a verdict cannot be stored and become null,
    # named in the episode's error (a typed conversion would have truncated 7.6 to 7 without a word).
    store = Store(tmp_path / "t.duckdb")
    run_id = store.begin_run({}, "fp", command="test", version="0", new_run=False)
    writer = EpisodeWriter(store, run_id, "fp")
    writer.start()
    odd = _record("odd", score=1, n_turns=True)
    odd.calls[0].input_tokens = 7.6  # type: ignore[assignment]
    odd.turns[1].valid = 1  # type: ignore[assignment]
    writer.submit(_record("good"))
    writer.submit(odd)
    await writer.close()
    store.close()
    assert writer.failure is None
    path = tmp_path / "t.duckdb"
    rows = query(path, "SELECT episode_id, score, n_turns, error FROM episodes ORDER BY episode_id")
    assert rows[0] == ("good", 1.0, 1, None)
    assert rows[1][:3] == ("odd", 1.0, None)
    assert rows[1][3] == ("stored with null in place of values DuckDB cannot hold: n_turns (bool, not an integer), "
                          "turns[1].valid (int, not a boolean), model_calls[0].input_tokens (float, not an integer)")
    assert query(path, "SELECT episode_id, input_tokens FROM model_calls ORDER BY episode_id") == [("good", 3), ("odd", None)]


async def test_disk_full_stops_the_run_with_one_line_and_a_rerun_resumes(tmp_path, monkeypatch):
    with _tmpfs(tmp_path / "small", "8m") as folder:
        out = folder / "full.duckdb"
        server = await start_mock(latency_ms=100)  # 12 episodes one at a time take >= 2.4 s: several flushes
        real_write = writer_module.EpisodeWriter._write
        state = {"batches": 0}

        def write_then_fill(self, batch, live, progress):  # the disk fills up right after the first batch is stored
            real_write(self, batch, live, progress)
            if batch and state["batches"] == 0:
                state["batches"] = len(batch)
                state["filler"] = _fill(folder)

        monkeypatch.setattr(writer_module.EpisodeWriter, "_write", write_then_fill)
        try:
            cfg = echo_config(out, server.base_url, limit=12, max_concurrency=1)
            with pytest.raises(StoreError) as info:
                await run(cfg)
            message = str(info.value)
            assert "\n" not in message and str(out) in message and "No space left on device" in message
            assert "run the same command again to resume" in message
            stored = state["batches"]
            assert 0 < stored < 12
            monkeypatch.setattr(writer_module.EpisodeWriter, "_write", real_write)
            state["filler"].unlink()  # room again
            summary = await run(cfg)
        finally:
            await server.stop()
        assert summary.skipped == stored and summary.episodes == 12 - stored
        assert query(out, "SELECT count(*), count(DISTINCT episode_id) FROM episodes") == [(12, 12)]


@pytest.mark.skipif(not _can_mount(), reason="needs root to mount a small tmpfs")
def test_agentbench_run_on_a_full_disk_prints_one_line_without_a_traceback(tmp_path):
    with _tmpfs(tmp_path / "small", "8m") as folder, mock_process() as base_url:
        config = tmp_path / "run.yaml"
        config.write_text(yaml.safe_dump({"out": str(folder / "f.duckdb"), "envs": ["echo"], "split": "test",
                                          "models": [{"name": "mock-oracle", "base_url": base_url, "task_header": True}]}))  # fmt: skip
        command = [sys.executable, "-m", "agentbench_async.cli", "run", "--config", str(config), "--no-progress"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        first = subprocess.run([*command, "--limit", "3"], capture_output=True, text=True, timeout=300, env=env)
        assert first.returncode == 0, first.stderr
        filler = _fill(folder)
        full = subprocess.run([*command, "--limit", "40"], capture_output=True, text=True, timeout=300, env=env)
        assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr
        (line,) = [ln for ln in full.stderr.splitlines() if ln.startswith("error: ")]
        assert str(folder / "f.duckdb") in line and "No space left on device" in line
        filler.unlink()
        again = subprocess.run([*command, "--limit", "40"], capture_output=True, text=True, timeout=300, env=env)
        assert again.returncode == 0, again.stderr
        assert query(folder / "f.duckdb", "SELECT count(*), count(DISTINCT episode_id) FROM episodes") == [(40, 40)]


async def test_the_file_removed_under_a_running_writer_stops_the_run_with_one_line(tmp_path, monkeypatch):
    out = tmp_path / "gone.duckdb"
    server = await start_mock()
    real_write = writer_module.EpisodeWriter._write

    def write_then_remove(self, batch, live, progress):
        if batch and out.exists():
            out.rename(tmp_path / f"moved-{uuid.uuid4().hex}.duckdb")
        real_write(self, batch, live, progress)

    monkeypatch.setattr(writer_module.EpisodeWriter, "_write", write_then_remove)
    try:
        with pytest.raises(StoreError) as info:
            await run(echo_config(out, server.base_url, limit=10, max_concurrency=2))
    finally:
        await server.stop()
    assert str(out) in str(info.value) and "removed or replaced while the run was writing it" in str(info.value)
