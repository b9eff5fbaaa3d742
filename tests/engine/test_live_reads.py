"""Reading a file while ``agentbench run`` writes it (another process), turn by turn, and after a kill -9.

The run is a real ``agentbench run`` process driving the loopback mock (``serve-mock``) from the command
line (``--task-header``, no YAML); the tests read the file with ``load()`` as report/sql/show/view do.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from engine_support import mock_process

from agentbench_async.analytics import commands, load
from agentbench_async.store.live import live_dir, read_status


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def mock_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with mock_process("--latency-ms", str(getattr(request, "param", 100))) as url:
        yield url


def _run(out: Path, url: str, *, tasks: int, turns: int, concurrency: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", url, "--task-header",
         "--env", "echo", "--split", "dev", "--env-option", f"echo.tasks={tasks}", "--env-option", f"echo.turns={turns}",
         "--max-concurrency", str(concurrency), "--max-in-flight", str(concurrency), "--timeout", "60", "--no-progress",
         "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "120"}, timeout=60)  # fmt: skip


def _report(out: Path) -> str:
    """What `agentbench report` prints (in this process), whitespace squeezed."""
    console = Console(width=120, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    commands.report([out], html=None, json_out=False, console=console)
    return " ".join(console.export_text().split())


def _wait_for_file(out: Path, proc: subprocess.Popen[str]) -> None:
    for _ in range(300):
        if live_dir(out).joinpath("manifest.json").exists():
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the run published no live snapshot")


def _half_written(res) -> int:  # type: ignore[no-untyped-def]
    """Episodes whose stored turns or calls do not match their row (a half-written episode)."""
    return res.sql("""
        SELECT count(*) AS n FROM episodes AS e
        WHERE e.n_turns <> (SELECT count(*) FROM turns AS t WHERE t.run_id = e.run_id AND t.episode_id = e.episode_id AND t.role = 'assistant')
           OR e.n_turns > (SELECT count(*) FROM model_calls AS c WHERE c.run_id = e.run_id AND c.episode_id = e.episode_id)
           OR EXISTS (SELECT 1 FROM live_turns AS l WHERE l.run_id = e.run_id AND l.episode_id = e.episode_id)
    """).item()


def test_queries_every_100ms_during_a_run_at_concurrency_500(tmp_path: Path, mock_url: str) -> None:
    out = tmp_path / "run.duckdb"
    proc = _run(out, mock_url, tasks=3000, turns=3, concurrency=500)
    _wait_for_file(out, proc)
    seen: set[str] = set()
    counts: list[int] = []
    live_answers = 0
    held = load(out)  # a long-lived reader (as the viewer's live page) refreshes instead of loading again
    held_counts: list[int] = []
    while proc.poll() is None:
        with load(out) as res:
            ids = set(res.sql("SELECT episode_id FROM episodes")["episode_id"].to_list())
            assert _half_written(res) == 0
            if res.live_files:
                live_answers += 1
                status = res.live_status()
                assert status is not None and status.total == 3000 and status.age_s < 5
        assert len(ids) >= (counts[-1] if counts else 0), "a later answer lost episodes"
        counts.append(len(ids))
        seen |= ids
        held.refresh()
        assert _half_written(held) == 0
        held_counts.append(held.sql("SELECT count(*) FROM episodes").item())
        time.sleep(0.1)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert held_counts == sorted(held_counts) and any(0 < n < 3000 for n in held_counts), held_counts
    held.refresh()  # the run ended: the file itself is read again
    assert held.live_files == [] and held.sql("SELECT count(*) FROM episodes").item() == 3000
    held.close()
    assert not live_dir(out).exists()  # the run's end removes the snapshot: the file itself is read again
    with load(out) as res:
        final = set(res.sql("SELECT episode_id FROM episodes")["episode_id"].to_list())
        assert res.live_files == [] and res.sql("SELECT count(*) FROM live_turns").item() == 0
    assert len(final) == 3000 and seen <= final
    # the reads happened while the run was writing (several answers from the live snapshot: each read opens the views anew,
    # ~0.3-1 s on 2 busy cores, and the run lasts a few seconds: 4 answers on a loaded machine), and saw it progress
    assert live_answers >= 3 and any(0 < n < 3000 for n in counts), counts


@pytest.mark.parametrize("mock_url", [300], indirect=True)  # a slow model: 300 ms a reply
def test_a_long_episode_is_visible_turn_by_turn(tmp_path: Path, mock_url: str) -> None:
    out = tmp_path / "run.duckdb"
    proc = _run(out, mock_url, tasks=2, turns=25, concurrency=2)
    _wait_for_file(out, proc)
    progress: list[int] = []
    seen_at: list[float] = []
    shown = ""
    while proc.poll() is None:
        with load(out) as res:
            # one query, so one snapshot: the run may end between two queries (the second then reads the closed
            # file, where the finished episodes' live turns are gone)
            done, turn = res.sql("SELECT (SELECT count(*) FROM episodes), (SELECT coalesce(max(turn), 0) FROM live_turns)").row(0)
            if res.live_files and done == 0:
                progress.append(turn)
                seen_at.append(time.monotonic())
                if not shown and progress[-1] >= 3:
                    episode = res.sql("SELECT min(episode_id) FROM live_turns").item()
                    shown = _cli("show", str(out), episode).stdout
        time.sleep(0.1)
    assert proc.returncode == 0
    # `agentbench show` of a running episode: its turns so far, marked as not finished
    assert "episode (not finished)" in shown and "running: turns so far" in shown and "turn 3" in shown, shown
    # 25 turns of ~300 ms: the reader saw the unfinished episodes grow a few turns at a time (one flush a second)
    # (a slow sample, e.g. the one that ran `show`, may see more turns at once: ~3 turns a second of gap)
    steps = sorted(set(progress))
    assert progress == sorted(progress) and len(steps) >= 5 and 0 < steps[-1] < 26, progress
    for (a, ta), (b, tb) in zip(zip(progress, seen_at), zip(progress[1:], seen_at[1:])):
        assert b - a <= 6 + (tb - ta) / 0.3, (progress, seen_at)
    with load(out) as res:
        assert res.sql("SELECT count(*) FROM episodes WHERE n_turns = 25 AND status = 'completed'").item() == 2
        assert res.sql("SELECT count(*) FROM live_turns").item() == 0


@pytest.mark.parametrize("mock_url", [300], indirect=True)  # a slow model: the run is still going when `report` reads it
def test_report_on_a_file_being_written_says_it_is_a_snapshot(tmp_path: Path, mock_url: str) -> None:
    out = tmp_path / "run.duckdb"
    proc = _run(out, mock_url, tasks=6, turns=20, concurrency=3)
    _wait_for_file(out, proc)
    reported = _report(out)
    assert proc.poll() is None, "the run ended before report read it"
    assert re.search(r"run \w+ is writing this file now: this is a snapshot of the \d+ episodes? it finished so far, not a final "
                     "result", reported), reported
    assert proc.wait(timeout=120) == 0
    final = _report(out)  # the run ended: nothing left unfinished, nothing to say
    assert "writing this file now" not in final and "did not finish" not in final and "re-runs" not in final


def test_kill_9_in_the_middle_leaves_a_file_that_resumes(tmp_path: Path, mock_url: str) -> None:
    out = tmp_path / "run.duckdb"
    proc = _run(out, mock_url, tasks=400, turns=8, concurrency=100)
    _wait_for_file(out, proc)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = read_status(out)
        if status is not None and status.done >= 50:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # the killed run's file opens directly: committed episodes whole, unfinished ones' turns marked as such
    with load(out) as res:
        assert res.live_files == [] and res.live_status() is None
        done = res.sql("SELECT count(*) FROM episodes").item()
        unfinished = res.sql("SELECT count(DISTINCT episode_id) FROM live_turns").item()
        assert _half_written(res) == 0 and 50 <= done < 400 and unfinished > 0
    # `report` says the run did not finish, and what a resume re-runs: the unfinished episodes (and tasks not started)
    reported = _report(out)
    assert "did not finish: no end was recorded (its process was stopped or killed" in reported
    assert f"it re-runs {unfinished} episode{'s' if unfinished != 1 else ''} ({unfinished} unfinished) and any task not started yet" in reported
    resumed = _run(out, mock_url, tasks=400, turns=8, concurrency=100)
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert f"{done} already done" in " ".join(err.split())
    with load(out) as res:
        assert res.sql("SELECT count(*), count(DISTINCT episode_id) FROM episodes").row(0) == (400, 400)
        assert res.sql("SELECT count(*) FROM episodes WHERE status = 'completed' AND success").item() == 400
        assert res.sql("SELECT count(*) FROM live_turns").item() == 0  # replaced by the re-run episodes
        assert _half_written(res) == 0
        # one set of turns per episode: 8 answers each
        assert res.sql("SELECT count(*) FROM turns WHERE role = 'assistant'").item() == 400 * 8


def test_a_resume_replacing_failed_episodes_is_read_one_row_per_episode(tmp_path: Path, mock_url: str) -> None:
    out = tmp_path / "run.duckdb"
    # nothing listens: every episode ends model_error (all 300 in flight at once: a server that never answered stops the
    # model, so episodes not yet started would not be recorded)
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    first = _cli("run", "--model", "mock-oracle", "--base-url", dead, "--task-header", "--max-retries", "0", "--max-concurrency", "300", "--env", "echo",
                 "--split", "dev", "--env-option", "echo.tasks=300", "--env-option", "echo.turns=3", "--no-progress", "--out", str(out))  # fmt: skip
    assert "model_error 300" in first.stderr, first.stderr
    # ~9 s at 100 ms a call: long enough to be seen half done even when each read takes a loaded second
    proc = _run(out, mock_url, tasks=300, turns=3, concurrency=10)
    _wait_for_file(out, proc)
    completed: list[int] = []
    while proc.poll() is None:
        with load(out) as res:
            # each re-run episode replaces its failed attempt in the same flush: never two rows, never none
            assert res.sql("SELECT count(*), count(DISTINCT episode_id) FROM episodes").row(0) == (300, 300)
            assert _half_written(res) == 0
            completed.append(res.sql("SELECT count(*) FROM episodes WHERE status = 'completed'").item())
        time.sleep(0.1)
    assert proc.returncode == 0
    assert any(0 < n < 300 for n in completed), completed
    with load(out) as res:
        assert res.sql("SELECT count(*) FROM episodes WHERE status = 'completed'").item() == 300
