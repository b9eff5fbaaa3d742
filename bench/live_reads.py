"""Live reads: a run's throughput with and without readers querying its file every 100 ms, and what the readers saw.

    python bench/live_reads.py                        # 6,000 echo episodes (3 turns) at concurrency 500, 2 rounds
    python bench/live_reads.py --episodes 20000 --rounds 3 --latency-ms 50

Starts `agentbench serve-mock` (its own process), then runs `agentbench run` (its own process, the command line a
user types, --task-header, no YAML) at concurrency C against it, alternately alone and with a reader process that
every 100 ms looks at the file as the viewer's live page does (`load()` once, then `Results.refresh()`) and
runs three queries (episodes per status, the failure_classes view, live_turns per env). Prints episodes/s of the run (the run's own figure: from
its first admitted episode to its last write) for both, the change, the readers' query latency, how old the
newest episode they saw was (now - its finished_at: includes up to one flush interval of the writer), and how
many answers came from the live snapshot. The machine's load average is printed too: the cores may be shared
(the run, the mock server and the reader each want a core).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from throughput import _start_mock  # serve-mock in its own process (bench/ is on the path)

_READER = r"""
import json, sys, time
from agentbench_async.analytics import load
out, stop = sys.argv[1], sys.argv[2]
import os
lat, ages, live, res = [], [], 0, None
while not os.path.exists(stop):
    t0 = time.perf_counter()
    try:
        res = load(out) if res is None else res.refresh()
    except Exception as exc:  # the file does not exist yet
        if "no such file" not in str(exc):
            raise
        time.sleep(0.05)
        continue
    res.sql("SELECT status, count(*) FROM episodes GROUP BY status")
    res.sql("SELECT * FROM failure_classes")
    res.sql("SELECT env, count(*) FROM live_turns GROUP BY env")
    newest = res.sql("SELECT epoch(max(finished_at)) AS t FROM episodes").item()
    live += bool(res.live_files)
    lat.append(time.perf_counter() - t0)
    if newest is not None and res.live_files:
        ages.append(time.time() - newest)
    time.sleep(max(0.0, 0.1 - (time.perf_counter() - t0)))
print(json.dumps({"latency": lat, "ages": ages, "live": live}))
"""


def _run(url: str, out: Path, episodes: int, concurrency: int, readers: bool) -> dict[str, float]:
    stop = out.with_suffix(".stop")
    reader = None
    if readers:
        reader = subprocess.Popen([sys.executable, "-c", _READER, str(out), str(stop)], stdout=subprocess.PIPE, text=True)
    proc = subprocess.run(
        [sys.executable, "-m", "agentbench_async.cli", "run", "--model", "mock-oracle", "--base-url", url, "--task-header",
         "--env", "echo", "--split", "test", "--env-option", f"echo.tasks={episodes}", "--env-option", "echo.turns=3",
         "--max-concurrency", str(concurrency), "--max-in-flight", str(concurrency), "--timeout", "120", "--no-progress",
         "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    found = re.search(r"(\d+) episodes finished.*?, ([\d.]+)s ->", " ".join(proc.stderr.split()))
    if not found:
        raise SystemExit(f"no summary line in: {proc.stderr}")
    result = {"episodes_per_s": int(found.group(1)) / float(found.group(2))}
    if reader is not None:
        stop.touch()
        seen = json.loads(reader.communicate(timeout=60)[0])
        lat, ages = seen["latency"], seen["ages"]
        result.update(queries=len(lat), live_answers=seen["live"], lat_p50=statistics.median(lat) * 1000,
                      lat_max=max(lat) * 1000, age_p50=statistics.median(ages) if ages else float("nan"),
                      age_max=max(ages) if ages else float("nan"))  # fmt: skip
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=6000)
    ap.add_argument("--concurrency", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2, help="alone / with readers, alternating, this many times (medians)")
    ap.add_argument("--latency-ms", type=float, default=100.0, help="the mock's reply latency")
    args = ap.parse_args()
    mock, url = _start_mock("--latency-ms", str(args.latency_ms))
    try:
        alone: list[float] = []
        read: list[dict[str, float]] = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.rounds):
                alone.append(_run(url, Path(tmp) / f"alone{i}.duckdb", args.episodes, args.concurrency, readers=False)["episodes_per_s"])
                read.append(_run(url, Path(tmp) / f"read{i}.duckdb", args.episodes, args.concurrency, readers=True))
        with_readers = statistics.median(r["episodes_per_s"] for r in read)
        base = statistics.median(alone)
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.episodes} echo episodes x 3 turns, "
              f"concurrency {args.concurrency}, mock latency {args.latency_ms:.0f} ms, {args.rounds} rounds (medians)")
        print(f"run alone:              {base:8.1f} episodes/s   (rounds: {', '.join(f'{x:.1f}' for x in alone)})")
        rounds = ", ".join(f"{r['episodes_per_s']:.1f}" for r in read)
        print(f"run with a reader:      {with_readers:8.1f} episodes/s   (rounds: {rounds})")
        print(f"change:                 {100 * (with_readers / base - 1):+8.1f} %")
        for i, r in enumerate(read):
            print(f"reader, round {i + 1}: {r['queries']:.0f} answers ({r['live_answers']:.0f} from the live snapshot), "
                  f"refresh+3 queries p50 {r['lat_p50']:.0f} ms, max {r['lat_max']:.0f} ms; newest episode seen was "
                  f"{r['age_p50']:.2f} s old (p50), {r['age_max']:.2f} s (max)")
    finally:
        mock.terminate()
        mock.wait(10)


if __name__ == "__main__":
    main()
