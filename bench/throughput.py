"""Engine throughput against the loopback mock model, compared with a careful bare aiohttp client (the ceiling).

    python bench/throughput.py                       # concurrency 100, 1000, 5000 on uvloop and asyncio + RPM check
    python bench/throughput.py --quick               # smaller runs
    python bench/throughput.py --levels 1000 --loops asyncio --repeat 3
    python bench/throughput.py --levels 10000 --engine-only   # 10,000 episodes in flight: peak RSS

For each concurrency C it starts `agentbench serve-mock --latency-ms 100` in its own process (on the default
loop), then in a fresh child process (so peak RSS is per measurement) runs either the engine on the `echo`
environment (2 turns an episode, C episodes in flight, every turn written to DuckDB) or the ceiling: a bare
aiohttp client making the same HTTP calls (byte-identical bodies and headers, computed before timing; replies
parsed by the engine's JSON reader) with C workers over one session, with the GC tuned as a careful
hand-written client would be (``gc.freeze()`` and a gen-0 threshold of 1,000,000, as the engine). Both run on
the same event loop (``--loops``: uvloop, asyncio's standard loop, or both); with ``--repeat N`` the ceiling
and the engine alternate N times and the medians are printed.
The load average is printed with the figures: the machine's cores may be shared.
``--before ROOT`` (another checkout of the project, e.g. ``git worktree add /tmp/before COMMIT``) compares the engine's
CPU per call before and after a change: each round runs the bare client, that checkout's engine (its own
``bench/throughput.py --child engine`` with its ``src`` first on the path) and this one's, each in a fresh process
against the same mock; it prints every round and the medians of each side's CPU per call and of the rounds' ratios.
Prints calls/s, episodes/s, their ratio (the median of the paired runs' ratios), peak RSS, DuckDB rows/s and
the CPU time per call of each side (all its threads: on a shared machine a steadier figure than calls/s).
Then the RPM check: a server that enforces N requests per window (429 beyond) and a client with the same
limit; prints utilisation in the steady state and the number of 429s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import load_average

TURNS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the mock server did not listen on port {port}")


def _start_mock(*extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "agentbench_async.cli", "serve-mock", "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _wait_port(port)
    return proc, f"http://127.0.0.1:{port}/v1"


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _engine(base_url: str, concurrency: int, episodes: int) -> dict[str, float]:
    from agentbench_async.config import build_config
    from agentbench_async.scheduler import Evaluation

    out = Path(tempfile.mkdtemp()) / "bench.duckdb"
    cfg = build_config({
        "out": out, "envs": ["echo"], "split": "test", "max_concurrency": concurrency,
        "env_options": {"echo": {"tasks": episodes, "turns": TURNS}},
        "models": [{"name": "mock-oracle", "base_url": base_url, "task_header": True, "max_in_flight": concurrency, "timeout": 120}],
    })  # fmt: skip
    start, cpu = time.perf_counter(), time.process_time()
    summary = await Evaluation(cfg, progress=False).run()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert summary.statuses == {"completed": episodes}, summary.statuses
    return {
        "calls_per_s": summary.calls / elapsed,
        "episodes_per_s": summary.episodes / elapsed,
        "rows_per_s_writer": summary.rows_written / max(summary.write_seconds, 1e-9),
        "rows": summary.rows_written,
        "seconds": elapsed,
        "cpu_us_per_call": cpu / summary.calls * 1e6,  # all the process's threads (writer, DuckDB)
    }


async def _ceiling_requests(calls: int) -> list[tuple[bytes, dict[str, str]]]:
    """The HTTP requests the engine makes for the same episodes, byte for byte: the echo environment's own
    sessions are played with the oracle's answers to produce each turn's messages."""
    from agentbench_async.envs import make_env
    from agentbench_async.envs.base import EpisodeContext
    from agentbench_async.models.task_headers import CALLER_HEADER, EPISODE_HEADER, TASK_HEADER
    from agentbench_async.models.wire import dumps_body
    from agentbench_async.types import ModelReply

    env = make_env("echo", options={"tasks": calls // TURNS, "turns": TURNS})
    requests = []
    for task in env.tasks("test"):
        episode_id = f"mock-oracle/echo/test/{task.task_id}/0"
        session = await env.open_session(task, EpisodeContext(episode_id=episode_id, action_mode="text", seed=0, options={}))
        messages = list(await session.begin())
        headers = {"Content-Type": "application/json", TASK_HEADER: f"echo/test/{task.source}/{task.task_id}",
                   EPISODE_HEADER: episode_id, CALLER_HEADER: "agent"}  # fmt: skip
        for number in task.data["numbers"]:
            body = {"model": "mock-oracle", "messages": messages, "max_tokens": 512, "temperature": 0.0}
            requests.append((dumps_body(body), headers))
            reply = {"role": "assistant", "content": f"ANSWER: {number}"}
            step = await session.step(ModelReply(content=reply["content"]))
            messages = [*messages, reply, *step.observation]
    return requests


async def _bare(base_url: str, concurrency: int, calls: int) -> dict[str, float]:
    """The ceiling: the same HTTP calls as the engine makes, by a client written for speed: one session and
    connection pool, bodies serialised before timing, replies parsed (by the engine's own JSON reader, so
    neither side parses faster), the GC frozen with a large gen-0 threshold; nothing else (no environment,
    no records, no limits, no writer)."""
    import aiohttp

    from agentbench_async.models.wire import loads_body

    requests = await _ceiling_requests(calls)
    url = base_url + "/chat/completions"
    gc.collect()
    gc.freeze()
    gc.set_threshold(1_000_000, 10, 10)
    queue = iter(requests)

    async def worker(session: aiohttp.ClientSession) -> None:
        for body, headers in queue:
            async with session.post(url, data=body, headers=headers) as r:
                loads_body(await r.read())

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"calls_per_s": len(requests) / elapsed, "seconds": elapsed, "cpu_us_per_call": cpu / len(requests) * 1e6}


async def _rpm(base_url: str, rpm: int, window: float, windows: int) -> dict[str, float]:
    import duckdb

    from agentbench_async.config import build_config
    from agentbench_async.scheduler import Evaluation

    out = Path(tempfile.mkdtemp()) / "rpm.duckdb"
    episodes = rpm * windows // TURNS
    cfg = build_config({
        "out": out, "envs": ["echo"], "split": "test", "max_concurrency": 500,
        "env_options": {"echo": {"tasks": episodes, "turns": TURNS}},
        "models": [{"name": "mock-oracle", "base_url": base_url, "task_header": True, "rpm": rpm, "rate_window_s": window, "max_in_flight": 500}],
    })  # fmt: skip
    summary = await Evaluation(cfg, progress=False).run()
    con = duckdb.connect(str(out), read_only=True)
    t0, statuses = con.execute("SELECT min(epoch(started_at)), list(DISTINCT http_status) FROM model_calls").fetchone()
    # steady state: calls started in windows 2..N (the first window is a burst of `rpm` at once)
    steady = con.execute(f"SELECT count(*) FROM model_calls WHERE epoch(started_at) >= {t0} + {window} AND epoch(started_at) < {t0} + {window * (windows - 1)}").fetchone()[0]
    n429 = con.execute("SELECT count(*) FROM model_calls WHERE http_status = 429").fetchone()[0]
    con.close()
    return {"utilisation": steady / (rpm * (windows - 2)), "http_429": n429, "calls": summary.calls, "statuses": str(statuses)}


def _child(args: argparse.Namespace) -> None:
    factory = None
    if args.loop == "uvloop":
        import uvloop  # the `fast` extra

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        if args.mode == "engine":
            result = runner.run(_engine(args.base_url, args.concurrency, args.episodes))
        else:
            result = runner.run(_bare(args.base_url, args.concurrency, args.episodes * TURNS))
        result["loop"] = type(runner.get_loop()).__module__
    result["peak_rss_mb"] = _peak_rss_mb()
    print(json.dumps(result))


def _measure(mode: str, loop: str, base_url: str, concurrency: int, episodes: int, root: Path | None = None) -> dict[str, float]:
    """One run in a fresh process; ``root``: another checkout whose engine runs (its own script and ``src``)."""
    script, env = __file__, None
    if root is not None:
        script, env = str(root / "bench" / "throughput.py"), {**os.environ, "PYTHONPATH": str(root / "src")}
    proc = subprocess.run([sys.executable, script, "--child", mode, "--loop", loop, "--base-url", base_url,
                           "--concurrency", str(concurrency), "--episodes", str(episodes)],
                          capture_output=True, text=True, check=False, env=env)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{mode} on {loop} at concurrency {concurrency} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child", choices=["engine", "bare"])
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    p.add_argument("--loops", default="uvloop,asyncio", help="comma-separated: uvloop, asyncio")
    p.add_argument("--levels", help="comma-separated concurrencies (default 100,1000,5000; --quick 100,1000)")
    p.add_argument("--episodes", type=int, help="episodes per measurement (default: by concurrency)")
    p.add_argument("--repeat", type=int, default=1, help="alternate ceiling and engine this many times; print medians")
    p.add_argument("--engine-only", action="store_true", help="no ceiling, no RPM check (e.g. the 10,000-in-flight RSS)")
    p.add_argument("--no-rpm", action="store_true")
    p.add_argument("--base-url")
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--latency-ms", type=float, default=100)
    p.add_argument("--before", type=Path, help="another checkout's root: its engine's CPU per call against this one's, alternated")
    args = p.parse_args()
    if args.child:
        args.mode = args.child
        _child(args)
        return
    if args.before is not None:
        _before_and_after(args)
        return
    levels = [int(x) for x in args.levels.split(",")] if args.levels else [100, 1000] if args.quick else [100, 1000, 5000]
    loops = [x.strip() for x in args.loops.split(",") if x.strip()]
    print(f"mock latency {args.latency_ms:.0f} ms, echo environment, {TURNS} calls per episode, {os.cpu_count()} cores, "
          f"{args.repeat} run(s) each (medians); {load_average()}")  # fmt: skip
    print(f"{'loop':>8} {'C':>6} {'engine calls/s':>15} {'ceiling calls/s':>16} {'ratio':>6} {'episodes/s':>11} "
          f"{'engine RSS MB':>14} {'ceiling RSS MB':>15} {'writer rows/s':>14} {'CPU us/call engine':>18} {'ceiling':>7}  ratios of the runs")  # fmt: skip
    for loop in loops:
        for c in levels:
            if args.episodes:
                episodes = args.episodes
            elif args.quick:
                episodes = max(500, 2 * c)
            else:
                # start-up amortised: the engine's timed run includes opening the store (~0.1 s), counting the
                # tasks and its last flush, the ceiling's only the requests
                episodes = {100: 4000, 1000: 20000}.get(c, 6 * c)
            mock, url = _start_mock("--latency-ms", str(args.latency_ms))
            engine_runs, bare_runs = [], []
            try:
                for _ in range(args.repeat):
                    if not args.engine_only:
                        bare_runs.append(_measure("bare", loop, url, c, episodes))
                    engine_runs.append(_measure("engine", loop, url, c, episodes))
            finally:
                mock.terminate()
                mock.wait()
            eng = {k: _median(engine_runs, k) for k in ("calls_per_s", "episodes_per_s", "peak_rss_mb", "rows_per_s_writer", "cpu_us_per_call")}
            if bare_runs:
                bare = {k: _median(bare_runs, k) for k in ("calls_per_s", "peak_rss_mb", "cpu_us_per_call")}
                paired = [e["calls_per_s"] / b["calls_per_s"] for e, b in zip(engine_runs, bare_runs)]
                ratios = " ".join(f"{r:.0%}" for r in paired)
                # the ratio is the median of the paired runs' ratios (each pair ran back to back: less drift)
                ceiling = f"{bare['calls_per_s']:>16.0f} {statistics.median(paired):>6.0%}"
                ceiling_rss, ceiling_cpu = f"{bare['peak_rss_mb']:>15.0f}", f"{bare['cpu_us_per_call']:>7.0f}"
            else:
                ratios, ceiling, ceiling_rss, ceiling_cpu = "", f"{'-':>16} {'-':>6}", f"{'-':>15}", f"{'-':>7}"
            print(f"{loop:>8} {c:>6} {eng['calls_per_s']:>15.0f} {ceiling} {eng['episodes_per_s']:>11.0f} "
                  f"{eng['peak_rss_mb']:>14.0f} {ceiling_rss} {eng['rows_per_s_writer']:>14.0f} {eng['cpu_us_per_call']:>18.0f} {ceiling_cpu}"
                  f"  {ratios}  ({load_average()})", flush=True)  # fmt: skip
    if args.engine_only or args.no_rpm:
        return
    rpm, window, windows = (300, 5.0, 4) if args.quick else (600, 10.0, 5)
    mock, url = _start_mock_window(rpm, window)  # serve-mock's --rpm-limit is per minute; use a shorter window
    try:
        r = asyncio.run(_rpm(url, rpm, window, windows))
    finally:
        mock.terminate()
        mock.wait()
    print(f"RPM check: limit {rpm} per {window:.0f} s window on both sides, steady-state utilisation {r['utilisation']:.1%}, "
          f"429 answers {r['http_429']}, {r['calls']} calls")  # fmt: skip


def _before_and_after(args: argparse.Namespace) -> None:
    """``--before ROOT``: bare client, the engine of ROOT and this engine, alternated in fresh processes (each loop and level)."""
    root = args.before.resolve()
    if not (root / "bench" / "throughput.py").is_file() or not (root / "src" / "agentbench_async").is_dir():
        raise SystemExit(f"--before {args.before}: not a checkout of this project (no bench/throughput.py and src/agentbench_async there)")
    levels = [int(x) for x in args.levels.split(",")] if args.levels else [1000]
    print(f"CPU per call (us, all of a side's threads): bare client, engine of {root}, engine here; mock {args.latency_ms:.0f} ms, "
          f"{args.repeat} round(s); {load_average()}")  # fmt: skip
    for loop in [x.strip() for x in args.loops.split(",") if x.strip()]:
        for c in levels:
            episodes = args.episodes or 6 * c
            mock, url = _start_mock("--latency-ms", str(args.latency_ms))
            rows = []
            try:
                for n in range(1, args.repeat + 1):
                    bare = _measure("bare", loop, url, c, episodes)["cpu_us_per_call"]
                    before = _measure("engine", loop, url, c, episodes, root)["cpu_us_per_call"]
                    after = _measure("engine", loop, url, c, episodes)["cpu_us_per_call"]
                    rows.append((bare, before, after))
                    print(f"{loop:>8} C={c} round {n}: bare {bare:.0f}, before {before:.0f} ({before / bare:.2f}x), "
                          f"now {after:.0f} ({after / bare:.2f}x), now/before {after / before:.2f}  ({load_average()})", flush=True)  # fmt: skip
            finally:
                mock.terminate()
                mock.wait()
            med = [statistics.median(r[i] for r in rows) for i in range(3)]
            ratio = [statistics.median(r[i] / r[0] for r in rows) for i in (1, 2)]
            change = statistics.median(r[2] / r[1] for r in rows)
            print(f"{loop:>8} C={c} medians: bare {med[0]:.0f}, before {med[1]:.0f}, now {med[2]:.0f} us a call; against the bare client "
                  f"before {ratio[0]:.2f}x, now {ratio[1]:.2f}x; now/before {change:.2f}", flush=True)  # fmt: skip


def _start_mock_window(rpm: int, window: float) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    code = (
        "import asyncio\n"
        "from agentbench_async.mock.server import MockModelServer, MockOptions\n"
        "async def main():\n"
        f"    s = MockModelServer(MockOptions(rpm_limit={rpm}, rpm_window_s={window}, latency_ms=20))\n"
        f"    await s.start('127.0.0.1', {port})\n"
        "    await asyncio.Event().wait()\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(port)
    return proc, f"http://127.0.0.1:{port}/v1"


if __name__ == "__main__":
    main()
