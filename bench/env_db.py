"""db environment cost: start-up, oracle episodes/s at several concurrencies, memory per live episode.

    PYTHONPATH=src python bench/env_db.py [--concurrency 1 8 32] [--data-dir ../shared/agentbench-data]
                                          [--mode text|tools] [--db-url mysql://user:pass@host:port/]

Start-up = from nothing (no datadir, no server) to the end of the first oracle episode: the
environment runs mariadb-install-db (or copies its cached pristine datadir), starts mariadbd and
plays one episode. Throughput runs the oracle
through the real episode loop over the built-in dev+test suites (or the official ones with
--data-dir); each episode creates its own database and account, loads its table, runs the gold SQL,
hashes the table if needed and drops everything. Memory per live episode counts this process
(tracemalloc) and the server (RSS of mariadbd) with N episodes open at once. Prints numbers,
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from _support import begin_sessions, play_oracle, traced_growth

from agentbench_async.envs import make_env
from agentbench_async.testing import play


def _server_rss_mb(pid: int | None) -> float:
    if not pid:
        return float("nan")
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def _throughput(env, tasks, concurrency: int, mode: str) -> None:  # type: ignore[no-untyped-def]
    records, dt = await play_oracle(env, tasks, concurrency, mode)
    ok = sum(r.success for r in records)
    statements = sum(int(r.details.get("operations", 0)) for r in records)
    print(
        f"concurrency {concurrency:3d}: {len(tasks) / dt:7.1f} oracle episodes/s, {statements / dt:7.1f} agent statements/s, "
        f"{ok}/{len(tasks)} solved, {dt:.1f} s"
    )


async def _memory_per_episode(env, tasks, n: int) -> None:  # type: ignore[no-untyped-def]
    server = getattr(env, "server", None)
    pid = server.pid if server else None

    rss_before = _server_rss_mb(pid)
    py_bytes, sessions = await traced_growth(lambda: begin_sessions(env, tasks, n))
    rss_after = _server_rss_mb(pid)
    print(
        f"memory per live episode ({n} open): {py_bytes / n / 1024:.1f} KiB in this process, "
        f"{(rss_after - rss_before) * 1024 / n:.1f} KiB in mariadbd (RSS {rss_before:.0f} -> {rss_after:.0f} MiB)"
    )
    await asyncio.gather(*(s.close() for s in sessions))


async def _startup(env, label: str, mode: str) -> None:  # type: ignore[no-untyped-def]
    task = next(iter(env.tasks("dev")))
    t0 = time.perf_counter()
    await env.start()
    t_server = time.perf_counter() - t0
    first = await play(env, task, "oracle", action_mode=mode)
    t_first = time.perf_counter() - t0
    await env.close()
    print(f"start-up ({label}): server ready in {t_server:.2f} s, first episode done after {t_first:.2f} s (solved: {first.success})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--mode", choices=["text", "tools"], default="text")
    parser.add_argument("--db-url", default=None)
    parser.add_argument("--live", type=int, default=64, help="episodes held open for the memory figure")
    args = parser.parse_args()
    options = {"db_url": args.db_url} if args.db_url else {}
    if not args.db_url:
        # "from nothing": mariadb-install-db into a fresh datadir, then with the cached template datadir
        for label, extra in (("fresh install", {"datadir_cache": False}), ("cached datadir", {})):
            probe = make_env("db", data_dir=args.data_dir, options={**options, **extra})
            if extra == {}:  # make sure the template exists, so this measures the warm path
                await probe.start()
                await probe.close()
            await _startup(probe, label, args.mode)
    env = make_env("db", data_dir=args.data_dir, options=options)
    tasks = list(env.tasks("dev")) + list(env.tasks("test"))
    await env.start()
    try:
        for concurrency in args.concurrency:
            await _throughput(env, tasks, concurrency, args.mode)
        await _memory_per_episode(env, tasks, args.live)
    finally:
        await env.close()


if __name__ == "__main__":
    asyncio.run(main())
