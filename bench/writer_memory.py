"""The run writer alone: what DuckDB holds over a long run, and when (issue 49; docs/performance.md).

    python bench/writer_memory.py                              # 150,000 two-turn echo episodes, 10,000 in flight
    python bench/writer_memory.py --episodes 300000 --rate 2000 --tags --csv /tmp/w.csv

Feeds ``EpisodeWriter`` (the one ``agentbench run`` uses, a flush a second, the live snapshot published) the rows of
two-turn ``echo`` episodes without the engine: ``--concurrency`` episodes in flight, each handing its rows to the
writer's live sink turn by turn (as the engine does: they go to ``live_turns`` and are deleted when the episode
finishes), ``--rate`` episodes finishing a second. A thread samples every ``--sample-s`` seconds the process's RSS, what
DuckDB's own allocator holds resident (its jemalloc, read through ``duckdb_je_mallctl``) and the WAL's size; with
``--tags``, also ``duckdb_memory()`` per tag (from a cursor of its own) and, in the writer's thread, just before each
checkpoint. Prints, per checkpoint of the writer's: the episodes then, the WAL it checkpointed, DuckDB's allocator
before, at its highest during and after, and how long it took; then the highest of DuckDB's allocator between
checkpoints and during them, RSS, and the writer's CPU (the CPU time of the writer's thread inside its writes:
DuckDB runs them on that thread) a 1,000 episodes. Runs whichever code is first on the path (``PYTHONPATH=OLD/src``
measures another tree).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

# Not bench/_support.py's rss_mb/duckdb_resident: importing it puts this tree's src first on the path, and this script
# measures whichever code PYTHONPATH names.
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def _jemalloc() -> Any:
    """A function returning the MB DuckDB's allocator holds resident (-1 without its jemalloc)."""
    try:
        import _duckdb

        ctl = ctypes.CDLL(_duckdb.__file__).duckdb_je_mallctl
        ctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_size_t]
    except (ImportError, OSError, AttributeError):
        return lambda: -1.0

    def resident() -> float:
        epoch, value, size = ctypes.c_uint64(1), ctypes.c_size_t(0), ctypes.c_size_t(8)
        ctl(b"epoch", ctypes.byref(epoch), ctypes.byref(size), ctypes.byref(epoch), 8)
        return value.value / 2**20 if ctl(b"stats.resident", ctypes.byref(value), ctypes.byref(size), None, 0) == 0 else -1.0

    return resident


def _rows(turn: int, n: int) -> list[Any]:
    """The rows an echo episode's turn adds (as the environment writes them)."""
    from agentbench_async.records import TurnRow

    out = []
    if turn == 0:
        out.append(TurnRow(turn=0, seq=0, role="user", content="You will be shown 2 number(s), one per turn. Each time, reply with a "
                           f"line `ANSWER: <number>`.\nRepeat this number: {n}"))  # fmt: skip
    seq = 1 if turn == 0 else 3
    out.append(TurnRow(turn=turn, seq=seq, role="assistant", content=f"ANSWER: {n + turn}", action=f"answer({n + turn})", valid=True))
    out.append(TurnRow(turn=turn, seq=seq + 1, role="user", content=f"Correct. Repeat this number: {n + 1}" if turn == 0 else "Correct."))
    return out


def _record(episode_id: str, rows: list[Any], started: float) -> Any:
    from agentbench_async.records import CallRow, EpisodeRecord

    return EpisodeRecord(episode_id=episode_id, model="mock-oracle", env="echo", split="test", task_id=episode_id.split("/")[3], repeat=0,
                         status="completed", score=1.0, success=True, n_turns=2, input_tokens=60, output_tokens=8, started_at=started,
                         finished_at=time.time(), error=None, details={}, source="builtin", action_mode="text", paper_status="completed",
                         turns=rows, calls=[CallRow(turn=t, attempt=1, http_status=200, latency_ms=100.0, input_tokens=30, output_tokens=4,
                                                    model="mock-oracle") for t in (0, 1)])  # fmt: skip


_TAGS_SQL = "SELECT tag, memory_usage_bytes / 2**20 FROM duckdb_memory() WHERE memory_usage_bytes > 0"


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from agentbench_async.store import EpisodeWriter, Store

    if args.checkpoint_mb:  # an experiment with the writer's bound
        from agentbench_async.store import db

        db.CHECKPOINT_MB = args.checkpoint_mb
    if args.held_mb:
        from agentbench_async.store import db

        db.HELD_MB = args.held_mb
    out = Path(args.out or tempfile.mkdtemp()) / "writer.duckdb"
    out.unlink(missing_ok=True)
    wal = Path(f"{out}.wal")
    store = Store(out)
    for setting in args.set:
        name, value = setting.split("=", 1)
        store.con.execute(f"SET {name} = '{value}'")
    run_id = store.begin_run({"models": [{"name": "mock-oracle"}]}, "fp", command="bench", version="bench", new_run=False)
    writer = EpisodeWriter(store, run_id, "fp")
    je = _jemalloc()
    done = [0]
    state = {"in_checkpoint": False}
    checkpoints: list[dict[str, Any]] = []
    writer_cpu = [0.0]
    cursor = store.con.cursor() if args.tags else None
    tag_peaks: dict[str, float] = {}

    after_commit = type(store).after_commit

    def watched(self: Any, **kwargs: Any) -> None:  # (checkpoints ahead of a large merge are not watched)
        before = getattr(self, "checkpoints", 0)
        size = wal.stat().st_size if wal.exists() else 0
        entry = {"finished": done[0], "wal_mb": size / 2**20, "je_before": je(), "je_peak": 0.0, "t": time.monotonic()}
        if args.tags:
            entry["tags"] = dict(self.con.execute(_TAGS_SQL).fetchall())
        state["in_checkpoint"], state["entry"] = True, entry
        try:
            after_commit(self, **kwargs)
        finally:
            state["in_checkpoint"] = False
        if getattr(self, "checkpoints", 0) > before:
            entry.update(seconds=time.monotonic() - entry["t"], je_after=je())
            checkpoints.append(entry)

    type(store).after_commit = watched  # type: ignore[method-assign]
    write = EpisodeWriter._write

    def timed(self: Any, *a: Any) -> None:
        t = time.thread_time()
        try:
            write(self, *a)
        finally:
            writer_cpu[0] += time.thread_time() - t

    EpisodeWriter._write = timed  # type: ignore[method-assign]
    samples: list[tuple[float, int, float, float, float, bool]] = []
    stop = threading.Event()
    t0 = time.monotonic()

    def sample() -> None:
        while not stop.wait(args.sample_s):
            j = je()
            busy = state["in_checkpoint"]
            if busy:
                state["entry"]["je_peak"] = max(state["entry"]["je_peak"], j)
            samples.append((time.monotonic() - t0, done[0], _rss_mb(), j, wal.stat().st_size / 2**20 if wal.exists() else 0.0, busy))
            if cursor is not None:
                try:
                    for tag, mb in cursor.execute(_TAGS_SQL).fetchall():
                        key = f"{tag} ({'checkpoint' if busy else 'between'})"
                        tag_peaks[key] = max(tag_peaks.get(key, 0.0), mb)
                except Exception:  # noqa: BLE001 - a sample missed
                    pass

    writer.start()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu = time.process_time()
    tick = 0.05
    per_tick = max(1, round(args.rate * tick))
    in_flight: dict[str, list[Any]] = {}
    queue: deque[str] = deque()
    started = 0
    while done[0] < args.episodes:
        while len(in_flight) < args.concurrency and started < args.episodes:
            episode = f"mock-oracle/echo/test/test-{started:07d}/0"
            in_flight[episode] = [0, [], writer.live_sink(episode, "mock-oracle", "echo"), time.time()]
            queue.append(episode)
            started += 1
        for _ in range(min(2 * per_tick, len(queue))):  # two turns an episode: 2 x rate turns a second
            episode = queue.popleft()
            st = in_flight[episode]
            rows = _rows(st[0], 7 * int(episode[-9:-2]))
            st[1].extend(rows)
            st[0] += 1
            if st[0] == 2:
                writer.submit(_record(episode, st[1], st[3]))
                del in_flight[episode]
                done[0] += 1
            else:
                if not args.no_live:
                    st[2](rows)
                queue.append(episode)
        await asyncio.sleep(tick)
    await writer.close()
    stop.set()
    sampler.join()
    if writer.failure is not None:
        raise SystemExit(f"the writer stopped: {writer.failure}")
    cpu = time.process_time() - cpu
    groups = {t: store.con.execute(f"SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('{t}')").fetchone()[0]
              for t in ("episodes", "turns", "model_calls", "live_turns")}  # fmt: skip
    store.close()
    return {"samples": samples, "checkpoints": checkpoints, "writer_cpu": writer_cpu[0], "cpu": cpu, "seconds": time.monotonic() - t0,
            "tag_peaks": tag_peaks, "groups": groups, "file_mb": out.stat().st_size / 2**20, "episodes": done[0]}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=150_000)
    p.add_argument("--concurrency", type=int, default=10_000, help="episodes in flight")
    p.add_argument("--rate", type=float, default=1000, help="episodes finishing a second")
    p.add_argument("--sample-s", type=float, default=0.1)
    p.add_argument("--tags", action="store_true", help="also sample duckdb_memory() per tag (costs the writer a little)")
    p.add_argument("--checkpoint-mb", type=int, help="the WAL the writer lets grow before it checkpoints (default: the engine's)")
    p.add_argument("--held-mb", type=int, help="the rows DuckDB may hold in memory before the writer checkpoints (default: the engine's)")
    p.add_argument("--no-live", action="store_true", help="episodes hand no rows while they run (no live_turns): an experiment")
    p.add_argument("--set", action="append", default=[], help="a DuckDB setting for the writer's connection (NAME=VALUE): an experiment")
    p.add_argument("--out", help="folder for the DuckDB file (default: a temporary one)")
    p.add_argument("--csv", help="write the samples (seconds, finished, rss_mb, duckdb_allocator_mb, wal_mb, in_checkpoint)")
    p.add_argument("--quiet", action="store_true", help="only the summary lines")
    args = p.parse_args()
    import agentbench_async

    print(f"{args.episodes:,} echo episodes, {args.concurrency:,} in flight, {args.rate:.0f} finishing a second; code "
          f"{Path(agentbench_async.__file__).parents[1]}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)  # fmt: skip
    r = asyncio.run(_run(args))
    s = r["samples"]
    if args.csv:
        Path(args.csv).write_text("seconds,finished,rss_mb,duckdb_allocator_mb,wal_mb,in_checkpoint\n"
                                  + "".join(f"{t:.2f},{d},{m:.1f},{j:.1f},{w:.1f},{int(b)}\n" for t, d, m, j, w, b in s))  # fmt: skip
    if not args.quiet:
        print("checkpoint: finished, WAL MB, DuckDB's allocator before / highest during / after (MB), seconds")
        for c in r["checkpoints"]:
            tags = "  " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(c.get("tags", {}).items()) if v >= 1) if "tags" in c else ""
            print(f"  {c['finished']:>9,} {c['wal_mb']:6.1f} {c['je_before']:6.0f} {max(c['je_peak'], c['je_before']):6.0f} "
                  f"{c['je_after']:6.0f} {c['seconds']:6.2f}{tags}")  # fmt: skip
        for k, v in sorted(r["tag_peaks"].items()):
            if v >= 1:
                print(f"  duckdb_memory() highest: {k}: {v:.0f} MB")
    between = [j for _, _, _, j, _, b in s if not b]
    during = [j for _, _, _, j, _, b in s if b]
    settled = [x for x in s if x[1] >= min(args.concurrency, args.episodes)]
    print(f"DuckDB's allocator: highest between checkpoints {max(between, default=0):.0f} MB, during one {max(during, default=0):.0f} MB, "
          f"lowest after the first {args.concurrency:,} finished {min((x[3] for x in settled), default=0):.0f} MB; RSS start {s[0][2]:.0f}, "
          f"highest {max(x[2] for x in s):.0f} MB; WAL highest {max(x[4] for x in s):.0f} MB")  # fmt: skip
    print(f"{len(r['checkpoints'])} checkpoints; the writer's CPU {r['writer_cpu']:.2f} s ({r['writer_cpu'] / r['episodes'] * 1e3 * 1e3:.0f} ms "
          f"a 1,000 episodes), the process {r['cpu']:.1f} s, wall {r['seconds']:.0f} s; file {r['file_mb']:.0f} MB (row groups before the "
          f"last checkpoint: {', '.join(f'{t} {n}' for t, n in r['groups'].items())}); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    main()
