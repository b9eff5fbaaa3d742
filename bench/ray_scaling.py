"""What worker processes buy: the local path vs the Ray path (``--workers N``), against the loopback mock.

    python bench/ray_scaling.py               # all three parts
    python bench/ray_scaling.py --quick       # smaller runs

1. CPU-heavy environment: the ``echo`` environment with ``cpu_ms`` (each step spends that much CPU in Python
   code, holding the GIL, as a game engine would): episodes/s in one process (no Ray), then on 1 and 2
   Ray worker processes. One process is bound by its one core; two workers use two.
2. Overhead of the Ray path per episode, on plain ``echo`` (no CPU per step, mock latency 0): wall time and
   the driver's CPU time per episode, local vs 1 Ray worker.
3. The curve for ``--workers N``, N = 1, 2, 4: calls/s and episodes/s on ``echo`` with many episodes in
   flight (the mock answers after 20 ms), against one local process.

The mock runs in its own process (``agentbench serve-mock``); Ray is one local instance started here
(``ray.init(address="local")``), shared by the runs (worker start-up is not timed: the figures are from the
first scheduled episode to the last stored one). The machine's load average is printed with each row: its
cores may be shared with other work.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import resource
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
    """One run in a fresh file; returns the summary and the driver's CPU seconds during it."""
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
        cpu = _cpu_s()
        summary = await evaluation.run()
        return summary, _cpu_s() - cpu


def _row(label: str, summary: RunSummary, cpu: float, base: float | None = None) -> str:
    eps = summary.episodes / summary.seconds
    ratio = f"  x{eps / base:.2f}" if base else ""
    return (f"  {label:<22} {summary.episodes:>6} episodes {summary.seconds:7.2f}s  {eps:8.1f} episodes/s  "
            f"{summary.calls / summary.seconds:8.1f} calls/s{ratio}   ({load_average()})")  # fmt: skip


async def _curve(base_url: str, workers: tuple[int, ...], label: str, *, tasks: int, cpu_ms: float, concurrency: int) -> None:
    """One process, then each number of Ray workers, on the same work: a row each, with the ratio to one process."""
    local, cpu = await _run(base_url, workers=None, tasks=tasks, turns=2, cpu_ms=cpu_ms, concurrency=concurrency)
    print(_row("one process (no Ray)", local, cpu))
    for k in workers:
        summary, cpu = await _run(base_url, workers=k, tasks=tasks, turns=2, cpu_ms=cpu_ms, concurrency=concurrency)
        print(_row(label.format(k=k), summary, cpu, local.episodes / local.seconds))


async def main(quick: bool) -> None:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=4, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, Ray {ray.__version__}")
    proc, base_url = _start_mock()
    try:
        n = 60 if quick else 200
        print(f"\n1. CPU-heavy environment (echo, 20 ms of CPU per step, 2 steps an episode, {n} episodes, 32 in flight)")
        await _curve(base_url, (1, 2), "{k} Ray worker(s)", tasks=n, cpu_ms=20, concurrency=32)

        n = 500 if quick else 2000
        print(f"\n2. Overhead of the Ray path per episode (echo, 2 turns, mock latency 0, {n} episodes, 64 in flight)")
        local, local_cpu = await _run(base_url, workers=None, tasks=n, turns=2, cpu_ms=0, concurrency=64)
        remote, remote_cpu = await _run(base_url, workers=1, tasks=n, turns=2, cpu_ms=0, concurrency=64)
        print(_row("one process (no Ray)", local, local_cpu))
        print(_row("1 Ray worker", remote, remote_cpu, local.episodes / local.seconds))
        wall = (remote.seconds / remote.episodes - local.seconds / local.episodes) * 1e3
        print(f"  per episode: wall {local.seconds / local.episodes * 1e3:.2f} ms local, {remote.seconds / remote.episodes * 1e3:.2f} ms Ray "
              f"(+{wall:.2f} ms); driver CPU {local_cpu / local.episodes * 1e3:.2f} ms local, "
              f"{remote_cpu / remote.episodes * 1e3:.2f} ms Ray (the worker's own CPU not counted)")  # fmt: skip
    finally:
        proc.terminate()
        proc.wait()

    proc, base_url = _start_mock("--latency-ms", "20")
    try:
        n = 1000 if quick else 4000
        print(f"\n3. --workers N (echo, 2 turns, mock latency 20 ms, {n} episodes, 1000 in flight)")
        await _curve(base_url, (1, 2, 4), "--workers {k}", tasks=n, cpu_ms=0, concurrency=1000)
    finally:
        proc.terminate()
        proc.wait()
        ray.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    asyncio.run(main(parser.parse_args().quick))
