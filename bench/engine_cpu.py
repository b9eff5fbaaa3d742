"""The engine's own CPU per model call, without the network: ``throughput.py``'s engine run (the ``echo`` environment, 2
calls an episode, 1,000 in flight, every turn and HTTP attempt stored, the live snapshot published) with each HTTP
exchange answered at once in-process by a stand-in that gives the mock's reply (the same bytes and headers), so what is
measured is the engine's own work: the episode loop, the environment, the client's request and reply handling, the
records, the limits and the writer.

    python bench/engine_cpu.py                            # 6,000 episodes, 5 runs, medians
    python bench/engine_cpu.py --before /tmp/before       # alternated with another checkout's engine (its src)

Each run is a fresh process; with ``--before ROOT`` this checkout's engine and ROOT's alternate, ROOT's ``src`` first on
the path in its runs. Prints CPU per call of the whole run (what ``throughput.py`` counts), of the main thread (the event
loop) and of the other threads (the writer's: Arrow, DuckDB, the live snapshot), the run's fixed part (opening the file,
its tables and views; the final checkpoint), and the load average. The stand-in does no HTTP: it is no measure of the
engine against a server (``throughput.py`` is), and its own cost (a few us a call: a regex and a format) is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _support import load_average

TURNS = 2
_REPLY = (b'{"id": "chatcmpl-10682aebc838", "object": "chat.completion", "model": "mock-oracle", "choices": [{"index": 0, '
          b'"message": {"role": "assistant", "content": "ANSWER: %s"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 30, '
          b'"completion_tokens": 3, "total_tokens": 33, "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}}}')  # fmt: skip
_ASKED = re.compile(rb"Repeat this number: (\d+)")


def _stand_in() -> None:
    """Every ``ClientSession.post`` answered at once with the mock oracle's reply (one pass through the event loop)."""
    import aiohttp
    from multidict import CIMultiDict, CIMultiDictProxy

    headers = CIMultiDictProxy(CIMultiDict({"Content-Type": "application/json; charset=utf-8", "Content-Length": "338",
                                            "Server": "Python/3.11 aiohttp/3.14.5"}))  # fmt: skip

    class Content:
        def __init__(self, body: bytes) -> None:
            self._body = body

        async def _chunks(self) -> Any:
            yield self._body

        def iter_chunked(self, n: int) -> Any:
            return self._chunks()

    class Reply:
        status = 200

        def __init__(self, body: bytes) -> None:
            self.headers, self.content, self.content_length = headers, Content(body), len(body)

    class Exchange:
        def __init__(self, data: bytes) -> None:
            self._data = data

        async def __aenter__(self) -> Reply:
            await asyncio.sleep(0)
            return Reply(_REPLY % _ASKED.findall(self._data)[-1])

        async def __aexit__(self, *exc: object) -> None:
            return None

    aiohttp.ClientSession.post = lambda self, url, data=None, **kw: Exchange(data)  # type: ignore[method-assign,assignment]


async def _run(episodes: int, concurrency: int) -> dict[str, float]:
    from agentbench_async.config import build_config
    from agentbench_async.scheduler import Evaluation
    from agentbench_async.store import db

    fixed = [0.0]
    for name in ("__init__", "close"):  # the file's opening (tables, views) and its final checkpoint
        def timed(*args: Any, _orig: Any = getattr(db.Store, name), **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return _orig(*args, **kwargs)
            finally:
                fixed[0] += time.thread_time() - start
        setattr(db.Store, name, timed)
    cfg = build_config({
        "out": Path(tempfile.mkdtemp()) / "bench.duckdb", "envs": ["echo"], "split": "test", "max_concurrency": concurrency,
        "env_options": {"echo": {"tasks": episodes, "turns": TURNS}},
        "models": [{"name": "mock-oracle", "base_url": "http://127.0.0.1:9/v1", "task_header": True, "max_in_flight": concurrency}],
    })  # fmt: skip
    cpu, main = time.process_time(), time.thread_time()
    summary = await Evaluation(cfg, progress=False).run()
    cpu, main = time.process_time() - cpu, time.thread_time() - main
    assert summary.statuses == {"completed": episodes}, summary.statuses
    per = 1e6 / summary.calls
    return {"cpu_us": cpu * per, "main_us": main * per, "threads_us": (cpu - main) * per, "fixed_s": fixed[0]}


def _child(args: argparse.Namespace) -> None:
    if args.src:
        sys.path.insert(0, str(args.src))
    import uvloop

    _stand_in()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        print(json.dumps(runner.run(_run(args.episodes, args.concurrency))))


def _measure(args: argparse.Namespace, src: Path | None) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", "--episodes", str(args.episodes), "--concurrency", str(args.concurrency)]
    proc = subprocess.run([*cmd, *(["--src", str(src)] if src else [])], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(src)} if src else None)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"the engine's run failed:\n{proc.stderr[-3000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _line(label: str, runs: list[dict[str, float]]) -> str:
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return (f"{label}: {med['cpu_us']:.0f} us a call (main thread {med['main_us']:.0f}, other threads {med['threads_us']:.0f}); "
            f"fixed {med['fixed_s']:.2f} s; runs {' '.join(str(round(r['cpu_us'])) for r in runs)}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--episodes", type=int, default=6000)
    p.add_argument("--concurrency", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--before", type=Path, help="another checkout's root: its engine alternated with this one's")
    p.add_argument("--child", action="store_true")
    p.add_argument("--src", type=Path)
    args = p.parse_args()
    if args.child:
        _child(args)
        return
    before = args.before.resolve() / "src" if args.before else None
    if before is not None and not (before / "agentbench_async").is_dir():
        raise SystemExit(f"--before {args.before}: no src/agentbench_async there (a checkout of this project)")
    print(f"{args.episodes} echo episodes, {args.concurrency} in flight, HTTP answered in-process at once; {load_average()}")
    now_runs: list[dict[str, float]] = []
    before_runs: list[dict[str, float]] = []
    for _ in range(args.repeat):
        if before is not None:
            before_runs.append(_measure(args, before))
        now_runs.append(_measure(args, None))
    if before_runs:
        print(_line("before", before_runs))
        change = statistics.median(n["cpu_us"] / b["cpu_us"] for n, b in zip(now_runs, before_runs))
        print(f"now/before (median of the rounds): {change:.2f}")
    print(_line("now", now_runs) + f"  ({load_average()})")


if __name__ == "__main__":
    main()
