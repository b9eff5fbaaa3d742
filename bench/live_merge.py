"""The live snapshot's merges alone: their seconds and memory, at every level (issue 49).

    python bench/live_merge.py                          # 520 flushes shaped like bench/million.py's: one level-3 merge
    python bench/live_merge.py --flushes 1100 --finished 1000
    PYTHONPATH=/tmp/old/src python bench/live_merge.py  # another tree's code (alternate them, each in a fresh process)

Drives a ``LivePublisher`` (``store/live.py``) over a run file of its own with ``--flushes`` synthetic flushes shaped like
those of ``bench/million.py`` (1,000,000 two-turn echo episodes, 10,000 in flight): each flush publishes the first turn
(2 ``live_turns`` rows) of ``--finished`` new episodes and finishes the episodes that started ``--lag`` flushes
before (their ``episodes`` row, 4 ``turns`` rows, 2 ``model_calls`` rows and a ``finish`` deletion each): with the
defaults ~10,000 episodes in flight, ~1,800 finished a flush (the 1M run: 548 flushes, ~1,800 episodes each). The
8th, 64th and 512th flush set off the merges of level 1, 2 and 3 (8 parts into 1).

For each merge level it prints how many merges ran, their seconds (median, most; in the merge's own thread), Arrow's
bytes allocated at their peak (sampled every 2 ms by a thread, above what was allocated when the merge began), the
process's RSS at their peak, and the rows of the merged part's deletions file; then how long a flush's publish held the
writer's thread (median, longest) and the load average. The code before merges had their own thread (682a806 and
earlier) timed ``_merge`` in the writer's thread: run that tree's own copy of this script.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from _support import load_average, rss_mb

from agentbench_async.store import live
from agentbench_async.store.db import Store

_RUN = "run-bench"
_FINGERPRINT = "f" * 64


def _episode(i: int) -> str:
    return f"mock-oracle/echo/test/test-{i:07d}/0"


def _turn_rows(ids: list[str], seqs: list[int], now: datetime) -> dict[str, Any]:
    n = len(ids)
    return {
        "run_id": [_RUN] * n, "episode_id": ids, "turn": [s // 2 for s in seqs], "seq": seqs,
        "role": ["user" if s % 2 == 0 else "assistant" for s in seqs],
        "content": [f"You will be shown 2 number(s), one per turn. Each time, reply with a line `ANSWER: <number>`.\n"
                    f"Repeat this number: {(hash(e) + s) % 1000}" if s % 2 == 0 else f"ANSWER: {(hash(e) + s) % 1000}"
                    for e, s in zip(ids, seqs)],
        "created_at": [now] * n, "injected": [False] * n,
    }  # fmt: skip


def _flush(publisher: live.LivePublisher, k: int, finished: int, lag: int) -> tuple[dict[str, pa.Table], list[tuple[str, str]]]:
    """Flush ``k``: the first turn of ``finished`` new episodes, and the end of those started ``lag`` flushes before."""
    now = datetime.now(timezone.utc)
    started = [_episode(k * finished + j) for j in range(finished)]
    live_ids = [e for e in started for _ in range(2)]
    live_rows = {**_turn_rows(live_ids, [0, 1] * finished, now), "model": ["mock-oracle"] * len(live_ids), "env": ["echo"] * len(live_ids)}
    done = [_episode((k - lag) * finished + j) for j in range(finished)] if k >= lag else []
    n = len(done)
    episodes = {
        "run_id": [_RUN] * n, "episode_id": done, "model": ["mock-oracle"] * n, "env": ["echo"] * n, "split": ["test"] * n,
        "task_id": [e.split("/")[3] for e in done], "repeat": [0] * n, "status": ["completed"] * n, "score": [1.0] * n,
        "success": [True] * n, "n_turns": [2] * n, "input_tokens": [60] * n, "output_tokens": [8] * n,
        "started_at": [now] * n, "finished_at": [now] * n, "details": ['{"answers": 2}'] * n, "source": ["echo"] * n,
        "fingerprint": [_FINGERPRINT] * n, "attempts": [1] * n,
    }  # fmt: skip
    turn_ids = [e for e in done for _ in range(4)]
    calls = {
        "run_id": [_RUN] * 2 * n, "episode_id": [e for e in done for _ in range(2)], "turn": [0, 1] * n, "attempt": [1] * 2 * n,
        "http_status": [200] * 2 * n, "latency_ms": [101.5] * 2 * n, "input_tokens": [30] * 2 * n, "output_tokens": [4] * 2 * n,
        "caller": ["agent"] * 2 * n, "model": ["mock-oracle"] * 2 * n, "finish_reason": ["stop"] * 2 * n,
        "started_at": [now] * 2 * n, "queue_ms": [900.0] * 2 * n,
    }  # fmt: skip
    tables = {
        "episodes": pa.table(episodes), "turns": pa.table(_turn_rows(turn_ids, [0, 1, 2, 3] * n, now)),
        "model_calls": pa.table(calls), "live_turns": pa.table(live_rows),
    }
    return tables, [("finish", e) for e in done]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flushes", type=int, default=520)
    parser.add_argument("--finished", type=int, default=1800, help="episodes finished (and started) a flush")
    parser.add_argument("--lag", type=int, default=5, help="flushes from an episode's first turn to its end")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="live-merge-"))
    store = Store(folder / "run.duckdb")
    publisher = live.LivePublisher(store.con, store.path, _RUN, _FINGERPRINT)
    publisher.start({})

    peak = {"arrow": 0, "rss": 0.0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.002):
            peak["arrow"] = max(peak["arrow"], pa.total_allocated_bytes())
            peak["rss"] = max(peak["rss"], rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    merges: dict[int, list[tuple[float, float, float, int]]] = {}
    run_merge = live.LivePublisher._run_merge

    def timed_merge(self: live.LivePublisher, job: Any) -> None:  # in the merge's own thread
        base = pa.total_allocated_bytes()
        peak["arrow"], peak["rss"] = base, rss_mb()
        t = time.perf_counter()
        run_merge(self, job)
        seconds = time.perf_counter() - t
        if job.error is None:
            rows = pq.ParquetFile(job.folder / "deletions.parquet").metadata.num_rows if "deletions" in job.tables else 0
            merges.setdefault(job.tail[0].level + 1, []).append((seconds, (peak["arrow"] - base) / 2**20, peak["rss"], rows))

    live.LivePublisher._run_merge = timed_merge  # type: ignore[method-assign]
    flush_s: list[float] = []
    rss0 = rss_mb()
    t0 = time.monotonic()
    for k in range(args.flushes):
        tables, deletions = _flush(publisher, k, args.finished, args.lag)
        t = time.perf_counter()
        publisher.publish(tables, deletions, {})
        flush_s.append(time.perf_counter() - t)
    publisher.settle()  # the merges still running
    stop.set()
    sampler.join()
    print(f"{args.flushes} flushes of {args.finished:,} episodes finished (their first turns {args.lag} flushes before), "
          f"{time.monotonic() - t0:.1f} s; RSS {rss0:.0f} MB after the start, {rss_mb():.0f} MB at the end")  # fmt: skip
    print("level  merges  seconds (median / most)  Arrow above the merge's start (most)  RSS at the peak (most)  deletions rows (most)")
    for level in sorted(merges):
        ms = merges[level]
        print(f"{level:5d}  {len(ms):6d}  {statistics.median(m[0] for m in ms):7.3f} / {max(m[0] for m in ms):7.3f} s  "
              f"{max(m[1] for m in ms):28.1f} MB  {max(m[2] for m in ms):17.0f} MB  {max(m[3] for m in ms):14,d}")  # fmt: skip
    # the merges run in a thread of their own (before 2026-12-07: in the writer's, within the publish that set them off)
    print(f"a flush's publish (the writer's thread held): median {statistics.median(flush_s) * 1000:.1f} ms, "
          f"longest {max(flush_s) * 1000:.1f} ms; {load_average()}")
    store.close()


if __name__ == "__main__":
    main()
