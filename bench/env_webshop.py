"""webshop environment cost: catalog load time and memory at 1k and 100k products, search latency, oracle
episodes/s, memory per live episode.

    PYTHONPATH=src python bench/env_webshop.py [--sizes 1000 100000] [--concurrency 1 32] [--live 1000]
                                               [--mode text|tools] [--webshop-data DIR]

Each catalog is made by the built-in generator (``environments/webshop/generate.py``, the same code that
wrote the committed 1,200-product catalog) into a temporary folder, in WebShop's file formats, and then
loaded in a fresh Python process through the official loader (``--webshop-data`` path): streaming JSON
reader, products, goals, BM25 index. That process prints the load time, its resident memory after loading
(VmRSS) and its peak (VmHWM), the mean search time over the goals' reference queries, oracle episodes/s
through the real episode loop, and the memory each live episode adds (tracemalloc and RSS over ``--live``
open sessions). ``--webshop-data DIR`` measures a WebShop download instead. Prints numbers, asserts nothing.
(Upstream: one full-data WebShop server needed ~15 GB per worker.)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from agentbench_async.envs.base import EpisodeContext  # noqa: E402
from agentbench_async.envs.webshop import WebShopEnvironment  # noqa: E402
from _support import load_generator, play_oracle, traced_growth  # noqa: E402

N_GOALS = 300


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _throughput(env: WebShopEnvironment, tasks: list, concurrency: int, mode: str) -> None:  # type: ignore[type-arg]
    records, dt = await play_oracle(env, tasks, concurrency, mode)
    solved, rounds = sum(r.score == 1.0 for r in records), sum(r.n_turns for r in records)
    print(
        f"  oracle, concurrency {concurrency:3d}: {len(tasks) / dt:7.1f} episodes/s ({rounds / dt:7.1f} rounds/s), "
        f"reward 1.0 on {solved}/{len(tasks)}"
    )


async def _live(env: WebShopEnvironment, tasks: list, n: int, mode: str) -> None:  # type: ignore[type-arg]
    async def open_sessions() -> list:  # type: ignore[type-arg]
        sessions = []
        for i in range(n):
            task = tasks[i % len(tasks)]
            session = await env.open_session(task, EpisodeContext(episode_id=f"live{i}", action_mode=mode))  # type: ignore[arg-type]
            await session.begin()
            # one search and one product page: the state a live episode typically holds
            await session.step(_reply(mode, f"search[{task.data['reference']['search']}]"))
            sessions.append(session)
        return sessions

    gc.collect()
    rss0 = _status_mb("VmRSS")
    py_bytes, sessions = await traced_growth(open_sessions)
    rss1 = _status_mb("VmRSS")
    print(
        f"  memory per live episode ({n} open, after a search): {py_bytes / n / 1024:.1f} KiB (tracemalloc), "
        f"{(rss1 - rss0) * 1024 / n:.1f} KiB RSS"
    )


def _reply(mode: str, action: str):  # type: ignore[no-untyped-def]
    from agentbench_async.types import ModelReply, ToolCall

    if mode == "tools":
        keywords = action[len("search[") : -1]
        return ModelReply(content="", tool_calls=[ToolCall("c", "search_action", '{"keywords": ' + repr(keywords).replace("'", '"') + "}")])
    return ModelReply(content=f"Action:\n{action}")


async def measure(folder: Path, concurrency: list[int], live: int, mode: str, n_goals: int | None) -> None:
    rss0 = _status_mb("VmRSS")
    options = {"webshop_data": str(folder)}
    if n_goals is not None:
        options["test_range"] = f"0:{n_goals}"
    env = WebShopEnvironment(options=options)
    t0 = time.perf_counter()
    catalog = env.catalog()
    t_load = time.perf_counter() - t0
    await env.start()
    t_index = time.perf_counter() - t0 - t_load
    rss1, hwm = _status_mb("VmRSS"), _status_mb("VmHWM")
    print(
        f"{len(catalog.products):,} products, {len(catalog.goals):,} goals ({folder}):\n"
        f"  load {t_load:.2f} s + index {t_index:.2f} s; RSS {rss1:.0f} MiB after loading "
        f"({rss1 - rss0:.0f} MiB for the shop), peak {hwm:.0f} MiB"
    )
    tasks = list(env.tasks("test"))[:N_GOALS]
    shop = env.shop()
    queries = [t.data["reference"]["search"] for t in tasks]
    t0 = time.perf_counter()
    for q in queries:
        shop.search(q)
    print(f"  search: {(time.perf_counter() - t0) / len(queries) * 1000:.2f} ms per query (mean of {len(queries)})")
    for c in concurrency:
        await _throughput(env, tasks, c, mode)
    await _live(env, tasks, live, mode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--live", type=int, default=1000, help="episodes held open for the memory figure")
    parser.add_argument("--mode", choices=["text", "tools"], default="text")
    parser.add_argument("--webshop-data", type=Path, default=None, help="measure this WebShop data folder instead")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--goals", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or args.webshop_data:
        folder = args.child or args.webshop_data
        asyncio.run(measure(folder, args.concurrency, args.live, args.mode, args.goals))
        return
    generator = load_generator("webshop")
    common = ["--concurrency", *map(str, args.concurrency), "--live", str(args.live), "--mode", args.mode]
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix=f"webshop-{size}-") as tmp:
            t0 = time.perf_counter()
            files = generator.build(n_products=size, n_goals=N_GOALS)
            generator.write(Path(tmp), files)
            megabytes = sum(len(t.encode()) for t in files.values()) / 1e6
            del files
            print(f"generated {size:,} products in {time.perf_counter() - t0:.1f} s ({megabytes:.0f} MB of JSON)")
            # a fresh process per size, so its memory figures are its own
            subprocess.run([sys.executable, __file__, "--child", tmp, "--goals", "280", *common], check=True)


if __name__ == "__main__":
    main()
