"""What the one redaction step (``redaction.py``) costs: the writer's pass over every text column, and a whole run.

    python bench/redaction.py                  # both parts
    python bench/redaction.py --episodes 2000 --repeat 3

1. The writer's pass alone: a batch of turn rows shaped as a run's (a reply of ~300 characters, an observation of
   ~1,500, tool calls, errors mostly null) through ``Redactor.table`` with no secret (a keyless local server), with a
   key and a password registered and nothing echoed, and with every tenth row echoing the key: microseconds a row.
2. A whole run: the engine on the ``echo`` environment against the in-process mock model, once with a key read from
   a variable (its secrets registered: every batch redacted) and once without, alternated ``--repeat`` times in
   fresh processes; the process's CPU time per model call (all its threads). The load average is printed: the
   machine's cores may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import load_average

KEY = "sk-proj-Q7vX2mLp9RtZ4kWn8YbC3dHf6JsA1eGu5NoT0iKr"


def _table_pass(rows: int) -> None:
    import pyarrow as pa

    from agentbench_async.redaction import Redactor

    reply = "I will look at the files first.\nAct: bash\n```bash\nls -la /home/user && cat notes.txt | head -20\n```\n" * 3
    observation = ("total 48\ndrwxr-xr-x 2 user user 4096 Jan  1 00:00 docs\n-rw-r--r-- 1 user user  220 notes.txt\n" * 15)[:1500]
    columns = {"content": [reply] * rows, "observation": [observation] * rows, "tool_calls": [None] * rows,
               "error": [None] * rows, "role": ["assistant"] * rows}  # fmt: skip
    plain = pa.table(columns)
    echoed = pa.table({**columns, "content": [reply + (f" {KEY}" if i % 10 == 0 else "") for i in range(rows)]})
    for label, secrets, table in (("no secret registered", False, plain), ("key + password, nothing echoed", True, plain),
                                  ("key + password, every 10th row echoes the key", True, echoed)):  # fmt: skip
        redactor = Redactor()
        if secrets:
            redactor.register(KEY)
            redactor.register_url("mysql://root:db-Pa55word-91@127.0.0.1:3306/")
        times = []
        for _ in range(5):
            start = time.process_time()
            out = redactor.table(table)
            times.append(time.process_time() - start)
        assert (KEY not in str(out.column("content").to_pylist())) or not secrets
        print(f"  {label:48s} {statistics.median(times) / rows * 1e6:7.2f} us a row ({rows:,} rows of ~1.9 KB text)")


def _child(episodes: int, with_key: bool) -> None:
    import asyncio

    from agentbench_async.config import build_config
    from agentbench_async.mock.server import MockModelServer, MockOptions
    from agentbench_async.scheduler import Evaluation

    async def main() -> dict[str, float]:
        server = MockModelServer(MockOptions())
        await server.start()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                model = {"name": "mock-oracle", "base_url": server.base_url, "task_header": True}
                if with_key:
                    os.environ["BENCH_REDACTION_KEY"] = KEY
                    model["api_key_env"] = "BENCH_REDACTION_KEY"
                cfg = build_config({"out": Path(tmp) / "r.duckdb", "envs": ["echo"], "split": "test", "repeats": max(1, episodes // 50),
                                    "models": [model], "max_concurrency": 200}, where="bench")  # fmt: skip
                start, wall = time.process_time(), time.perf_counter()
                summary = await Evaluation(cfg, progress=False).run()
                cpu, wall = time.process_time() - start, time.perf_counter() - wall
                calls = sum(summary.statuses.values()) * 2
                return {"cpu_per_call_us": cpu / calls * 1e6, "episodes": sum(summary.statuses.values()), "wall": wall}
        finally:
            await server.stop()

    print(json.dumps(asyncio.run(main())))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--child", choices=["key", "nokey"])
    args = p.parse_args()
    if args.child:
        _child(args.episodes, args.child == "key")
        return
    print(load_average())
    print("1. the writer's pass over a batch's text columns (Redactor.table):")
    _table_pass(args.rows)
    print(f"2. a whole run, echo x mock model, ~{args.episodes:,} episodes, CPU per call (fresh processes, alternated):")
    results: dict[str, list[float]] = {"nokey": [], "key": []}
    for _ in range(args.repeat):
        for kind in ("nokey", "key"):
            out = subprocess.run([sys.executable, __file__, "--child", kind, "--episodes", str(args.episodes)],
                                 capture_output=True, text=True, check=True)  # fmt: skip
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            results[kind].append(figures["cpu_per_call_us"])
            print(f"  {kind:6s} {figures['cpu_per_call_us']:7.1f} us CPU a call ({figures['episodes']:,} episodes, {figures['wall']:.1f} s)")
    for kind, values in results.items():
        print(f"  median {'with a key (redaction on)' if kind == 'key' else 'without a key':28s} {statistics.median(values):7.1f} us a call")
    print(load_average())


if __name__ == "__main__":
    main()
