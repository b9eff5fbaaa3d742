"""The whole benchmark in one command: every environment's test split, the mock oracle playing, against ``serve-mock``
answering each call after a fixed latency (1 s by default), as a user runs it.

    PYTHONPATH=src python bench/whole_benchmark.py [--data-dir ../shared/agentbench-data] [--latency-ms 1000]
                                                   [--limit N] [--env all] [--keep DIR]

``serve-mock`` runs in its own process; the run is ``agentbench run --env all --split test --data-dir DIR`` in
another (official tasks where the data dir has them, built-in suites elsewhere; every episode admitted at once and
the model's requests unlimited in flight, so the mock's latency is what bounds it). Printed: the command, the wall
time of the run process, episodes, model calls and calls/s, every turn stored (checked in the result file), each
environment's end (seconds after the run started, episodes, calls, its longest episode and that episode's calls,
which run one after another), what bounded the run (the last environment to finish and why), the peak resident
memory of the run's process tree (the run, its game workers, its MariaDB; sampled every 0.2 s) and the machine's
load average before and after (its cores may be shared: wall times move with it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
from _support import load_average
from throughput import _start_mock  # serve-mock in its own process (bench/ is on the path)

REPO = Path(__file__).resolve().parents[1]


def _children(pid: int) -> list[int]:
    """Child pids of ``pid`` (from every thread's ``children`` list: a child belongs to the thread that forked it)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    except OSError:
        pass
    return out


def _tree_rss_bytes(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (from /proc, walking down from ``root``: scanning every
    process of the machine five times a second cost this bench ~12% of a core, taken from the run it measures)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        todo += _children(pid)
    return total


class _PeakRss(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.peak = max(self.peak, _tree_rss_bytes(self.pid))


def _report(out: Path, wall: float, latency_s: float) -> None:
    con = duckdb.connect(str(out), read_only=True)
    try:
        (start,) = con.execute("SELECT min(started_at) FROM episodes").fetchone()
        episodes, calls = con.execute("SELECT count(*), (SELECT count(*) FROM model_calls) FROM episodes").fetchone()
        unstored = con.execute(
            "SELECT count(*) FROM episodes e WHERE n_turns > (SELECT count(*) FROM turns t WHERE t.episode_id = e.episode_id "
            "AND t.role = 'assistant')"
        ).fetchone()[0]  # fmt: skip
        statuses = con.execute("SELECT status, count(*) FROM episodes GROUP BY 1 ORDER BY 2 DESC").fetchall()
        con_last = con.execute("SELECT epoch(max(finished_at)) - epoch(min(started_at)) FROM episodes").fetchone()
        rows = con.execute(
            """
            WITH per_episode AS (
                SELECT e.env, e.episode_id, e.source, epoch(e.finished_at) - epoch(e.started_at) AS seconds,
                       epoch(e.finished_at) - epoch(?::TIMESTAMPTZ) AS ended,
                       (SELECT count(*) FROM model_calls c WHERE c.episode_id = e.episode_id) AS calls
                FROM episodes e)
            SELECT env, any_value(source), count(*), sum(calls), max(ended), max(seconds), arg_max(calls, seconds),
                   arg_max(episode_id, seconds)
            FROM per_episode GROUP BY env ORDER BY max(ended)
            """,
            [start],
        ).fetchall()
    finally:
        con.close()
    (last,) = con_last
    print(f"{episodes:,} episodes ({', '.join(f'{s} {n:,}' for s, n in statuses)}), {calls:,} model calls; the run process "
          f"took {wall:.1f} s (start-up of the environments included), its episodes {last:.1f} s from the first start to the "
          f"last end: {calls / wall:,.0f} calls/s over the process, {calls / last:,.0f} over the episodes; episodes with fewer "
          f"stored replies than turns: {unstored}")  # fmt: skip
    print(f"{'environment':<11} {'source':<9} {'episodes':>8} {'calls':>7} {'ended at':>9} {'longest episode':>16}  (its calls)")
    for env, source, n, env_calls, ended, longest, longest_calls, _ in rows:
        print(f"{env:<11} {source:<9} {n:>8,} {env_calls:>7,} {ended:>8.1f}s {longest:>15.1f}s  ({longest_calls})")
    env, _, n, _, ended, longest, longest_calls, episode = rows[-1]
    if longest >= 0.8 * ended:
        why = (f"its longest episode ({episode}) took {longest:.1f} s: {longest_calls} model calls in about "
               f"{longest / latency_s:.0f} call latencies one after another ({latency_s:g} s each); the run cannot end before it")  # fmt: skip
    else:
        why = f"its {n} episodes took turns (its longest alone took {longest:.1f} s of the {ended:.1f} s)"
    print(f"bounded by: {env}, the last environment to finish ({ended:.1f} s after the first episode started): {why}")


@contextlib.contextmanager
def mock_and_folder(data_dir: Path | None, latency_ms: float) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """``serve-mock`` answering after ``latency_ms`` with every test task set loaded, its base URL and a temporary
    folder; the load average printed before and after."""
    print(f"before: {load_average()}")
    # the mock loads every task set before it listens: its first answers do not wait on task loading (a real API has none)
    mock, base_url = _start_mock("--latency-ms", str(latency_ms), "--preload", "test",
                                 *(["--data-dir", str(data_dir)] if data_dir else []))  # fmt: skip
    folder = tempfile.TemporaryDirectory()
    try:
        yield mock, base_url, Path(folder.name)
    finally:
        mock.terminate()
        mock.wait()
        folder.cleanup()
    print(f"after: {load_average()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "agentbench-data")
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    parser.add_argument("--limit", type=int, help="only the first N tasks of each environment")
    parser.add_argument("--env", default="all")
    parser.add_argument("--keep", type=Path, help="write the result file here (default: a temporary folder)")
    args = parser.parse_args()
    data_dir = args.data_dir if args.data_dir and args.data_dir.is_dir() else None
    with mock_and_folder(data_dir, args.latency_ms) as (_, base_url, folder):
        out = args.keep or folder / "whole.duckdb"
        command = [sys.executable, "-m", "agentbench_async.cli", "run", "--env", args.env, "--split", "test",
                   "--model", "mock-oracle", "--judge-model", "mock-judge", "--base-url", base_url, "--task-header",
                   "--max-in-flight", "100000", "--max-concurrency", "100000", "--no-progress", "--out", str(out)]  # fmt: skip
        if data_dir is not None:
            command += ["--data-dir", str(data_dir)]
        if args.limit:
            command += ["--limit", str(args.limit)]
        print("$ agentbench " + shlex.join(command[3:]))
        started = time.perf_counter()
        run = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        peak = _PeakRss(run.pid)
        peak.start()
        _, err = run.communicate()
        wall = time.perf_counter() - started
        peak.done.set()
        peak.join()
        print(err.rstrip())
        if run.returncode != 0:
            raise SystemExit(f"the run failed (exit {run.returncode})")
        _report(out, wall, args.latency_ms / 1000)
        print(f"peak resident memory of the run's process tree: {peak.peak / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main()
