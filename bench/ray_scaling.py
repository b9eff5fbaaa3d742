"""What worker processes buy: the local path vs the Ray path (``--workers N``), against the loopback mock.

    python bench/ray_scaling.py               # all three parts
    python bench/ray_scaling.py --quick       # smaller runs

1. CPU-heavy environment: the ``echo`` environment with ``cpu_ms`` (each step spends that much CPU in Python
   code, holding the GIL, as a game engine would): episodes/s in one process (no Ray), then on 1 and 2
   Ray worker processes. One process is bound by its one core; two workers use two.
2. Overhead of the Ray path per episode, on plain ``echo`` (no CPU per step, mock latency 0): wall time and
   the CPU time per episode, local vs 1 Ray worker.
3. The curve for ``--workers N``, N = 1, 2, 4: calls/s and episodes/s on ``echo`` with many episodes in
   flight (the mock answers after 20 ms), against one local process.

The mock runs in its own process (``agentbench serve-mock``); Ray is one local instance started here
(``ray.init(address="local")``), shared by the runs (worker start-up is not timed: the figures are from the
first scheduled episode to the last stored one). CPU per call counts every process of the run over that window: the
driver (or the one process), and with Ray the workers and the limit broker (start-up not counted on either side: the
store's creation, Ray's actors; printed apart; Ray's own daemons not counted). The
machine's load average is printed with each row: its cores may be shared with other work. ``--part 3`` runs one
part only.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _support import load_average
from throughput import _start_mock  # serve-mock in its own process (bench/ is on the path)

from agentbench_async.config import build_config
from agentbench_async.distributed import RaySettings
from agentbench_async.distributed.evaluation import RayEvaluation
from agentbench_async.scheduler import Evaluation, RunSummary


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run(base_url: str, *, workers: int | None, tasks: int, turns: int, cpu_ms: float, concurrency: int) -> tuple[RunSummary, float]:
    """One run in a fresh file; returns the summary and the CPU seconds of the run: this process's, and with Ray the
    workers' and the limit broker's from the run's start to their close (their start-up not counted)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw: dict[str, Any] = {
            "out": str(Path(tmp) / "b.duckdb"), "envs": ["echo"], "split": "dev", "max_concurrency": concurrency,
            "models": [{"name": "mock-oracle", "base_url": base_url, "task_header": True, "max_in_flight": 10_000}],
            "env_options": {"echo": {"tasks": tasks, "turns": turns, "cpu_ms": cpu_ms}},
        }  # fmt: skip
        cfg = build_config(raw, where="bench")
        if workers is None:
            evaluation: Evaluation = Evaluation(cfg, progress=False)
        else:
            cfg.ray = RaySettings(workers=workers)
            evaluation = RayEvaluation(cfg, progress=False)
        whole = _cpu_s()
        summary = await evaluation.run()
        whole = _cpu_s() - whole
        # this process's CPU from the first episode to the last stored (the wall time's window, less the GC's one full collection
        # before the episodes start: 0.05-0.3 s, a fixed cost like the rest of the start-up): the start-up
        # before it (the store's schema and views, with Ray the actors' creation: ~0.3-0.6 s of the driver's CPU, a
        # fixed cost, ~75 µs a call of a 4,000-episode run) is printed apart, as the workers' start-up is not counted
        cpu = summary.cpu_seconds
        per_call = 1e6 / max(1, summary.calls)
        if isinstance(evaluation, RayEvaluation):
            cluster = evaluation.cluster
            broker = cluster.broker_stats.get("cpu_seconds", 0.0) - cluster.start_cpu.get("broker", 0.0)
            print(f"    CPU per call: driver {cpu * per_call:.0f} µs, workers {(cluster.cpu_seconds() - broker) * per_call:.0f} µs, "
                  f"limit broker {broker * per_call:.0f} µs; the driver's start-up and close (not counted) "
                  f"{(whole - cpu):.2f} s")  # fmt: skip
            cpu += cluster.cpu_seconds()
        else:
            print(f"    start-up and close (not counted) {(whole - cpu):.2f} s of CPU")
        return summary, cpu


def _row(label: str, summary: RunSummary, cpu: float, base: float | None = None) -> str:
    eps = summary.episodes / summary.seconds
    ratio = f"  x{eps / base:.2f}" if base else ""
    return (f"  {label:<22} {summary.episodes:>6} episodes {summary.seconds:7.2f}s  {eps:8.1f} episodes/s  "
            f"{summary.calls / summary.seconds:8.1f} calls/s{ratio}  CPU {cpu / max(1, summary.calls) * 1e6:5.0f} µs/call "
            f"(all processes)   ({load_average()})")  # fmt: skip


async def _curve(base_url: str, workers: tuple[int, ...], label: str, *, tasks: int, cpu_ms: float, concurrency: int,
                 repeat: int = 1) -> None:  # fmt: skip
    """One process, then each number of Ray workers, on the same work: a row each, with the ratio to one process;
    ``repeat`` rounds of all of them, then the medians of the ratios to the same round's one process."""
    ratios: dict[int, list[tuple[float, float]]] = {k: [] for k in workers}  # (episodes/s ratio, CPU/call ratio)
    for _ in range(repeat):
        local, local_cpu = await _run(base_url, workers=None, tasks=tasks, turns=2, cpu_ms=cpu_ms, concurrency=concurrency)
        print(_row("one process (no Ray)", local, local_cpu))
        for k in workers:
            summary, cpu = await _run(base_url, workers=k, tasks=tasks, turns=2, cpu_ms=cpu_ms, concurrency=concurrency)
            print(_row(label.format(k=k), summary, cpu, local.episodes / local.seconds))
            ratios[k].append((summary.episodes / summary.seconds / (local.episodes / local.seconds),
                              cpu / max(1, summary.calls) / (local_cpu / max(1, local.calls))))  # fmt: skip
    if repeat > 1:
        for k, pairs in ratios.items():
            print(f"  {label.format(k=k)}: median of {repeat} rounds x{statistics.median(p[0] for p in pairs):.2f} episodes/s, "
                  f"x{statistics.median(p[1] for p in pairs):.2f} CPU per call of one process")  # fmt: skip


async def main(quick: bool, parts: set[int], repeat: int) -> None:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=4, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, Ray {ray.__version__}")
    proc, base_url = _start_mock()
    try:
        n = 60 if quick else 200
        if 1 in parts:
            print(f"\n1. CPU-heavy environment (echo, 20 ms of CPU per step, 2 steps an episode, {n} episodes, 32 in flight)")
            await _curve(base_url, (1, 2), "{k} Ray worker(s)", tasks=n, cpu_ms=20, concurrency=32, repeat=repeat)
        n = 500 if quick else 2000
        if 2 in parts:
            await _overhead(base_url, n)
    finally:
        proc.terminate()
        proc.wait()

    proc, base_url = _start_mock("--latency-ms", "20")
    try:
        n = 1000 if quick else 4000
        if 3 in parts:
            print(f"\n3. --workers N (echo, 2 turns, mock latency 20 ms, {n} episodes, 1000 in flight)")
            await _curve(base_url, (1, 2, 4), "--workers {k}", tasks=n, cpu_ms=0, concurrency=1000, repeat=repeat)
    finally:
        proc.terminate()
        proc.wait()
        ray.shutdown()


async def _overhead(base_url: str, n: int) -> None:
    print(f"\n2. Overhead of the Ray path per episode (echo, 2 turns, mock latency 0, {n} episodes, 64 in flight)")
    local, local_cpu = await _run(base_url, workers=None, tasks=n, turns=2, cpu_ms=0, concurrency=64)
    remote, remote_cpu = await _run(base_url, workers=1, tasks=n, turns=2, cpu_ms=0, concurrency=64)
    print(_row("one process (no Ray)", local, local_cpu))
    print(_row("1 Ray worker", remote, remote_cpu, local.episodes / local.seconds))
    wall = (remote.seconds / remote.episodes - local.seconds / local.episodes) * 1e3
    print(f"  per episode: wall {local.seconds / local.episodes * 1e3:.2f} ms local, {remote.seconds / remote.episodes * 1e3:.2f} ms Ray "
          f"(+{wall:.2f} ms); CPU {local_cpu / local.episodes * 1e3:.2f} ms local, "
          f"{remote_cpu / remote.episodes * 1e3:.2f} ms Ray (driver, worker and limit broker)")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--part", type=int, nargs="+", choices=(1, 2, 3), default=[1, 2, 3])
    parser.add_argument("--repeat", type=int, default=1, help="rounds of parts 1 and 3 (medians printed)")
    cli = parser.parse_args()
    asyncio.run(main(cli.quick, set(cli.part), cli.repeat))
