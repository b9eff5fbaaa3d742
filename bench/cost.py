"""What prompt caching and batch mode save: a 5-turn environment (echo, 5 numbers per task, a fixed instruction
preamble of AgentBench's size) against the built-in mock model, which reports cached tokens as each provider
does (OpenAI: automatic, prefixes of 1,024+ tokens in 128-token steps; Anthropic: up to the request's
cache_control breakpoints) and implements both batch APIs.

Prints, per provider and setting: input tokens (and the part read from / written to the cache), the input
cost with and without caching, and the total cost with and without batch mode, from the cost views
(analytics/60_cost.sql) at example list prices (USD per 1M tokens, mid-2025):

- Anthropic Claude Sonnet 4: input 3.00, cache read 0.30, cache write 3.75 (5-minute cache), output 15.00
- OpenAI GPT-4.1: input 2.00, cached input 0.50, output 8.00
- both batch APIs: 50% off

    .venv/bin/python bench/cost.py [--tasks 40] [--preamble 1500]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from agentbench_async.analytics import load
from agentbench_async.config import build_config
from agentbench_async.mock.server import MockModelServer, MockOptions
from agentbench_async.scheduler import Evaluation

PRICES: dict[str, dict[str, float]] = {
    "anthropic": {"price_in": 3.0, "price_cached_in": 0.3, "price_cache_write": 3.75, "price_out": 15.0, "batch_discount": 0.5},
    "openai": {"price_in": 2.0, "price_cached_in": 0.5, "price_out": 8.0, "batch_discount": 0.5},
}
TURNS = 5
BATCH = {"size": 50, "wait_s": 0.05, "poll_s": 0.02, "poll_max_s": 0.2}


async def _run(out: Path, provider: str, *, caching: bool, batch: bool, tasks: int, preamble: int) -> tuple[dict[str, Any], float]:
    server = MockModelServer(MockOptions(batch_delay_s=0.05))  # real minimum of a cacheable prefix: 1,024 tokens
    base_url = await server.start()
    model: dict[str, Any] = {"name": "mock-oracle", "provider": provider, "base_url": base_url, "task_header": True,
                             "prompt_caching": caching, **PRICES[provider]}  # fmt: skip
    if batch:
        model["batch"] = BATCH
    raw = {"out": out, "envs": ["echo"], "split": "test", "history": "full", "models": [model], "max_concurrency": 64,
           "env_options": {"echo": {"tasks": tasks, "turns": TURNS, "preamble_tokens": preamble}}}  # fmt: skip
    start = time.perf_counter()
    try:
        summary = await Evaluation(build_config(raw, where="bench"), progress=False).run()
    finally:
        await server.stop()
    seconds = time.perf_counter() - start
    assert summary.statuses == {"completed": tasks}, summary.statuses
    with load(out) as res:
        row = res.cost_by_model_env.row(0, named=True)
    return row, seconds


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--preamble", type=int, default=1500, help="tokens of fixed instructions before each task")
    args = parser.parse_args()
    cases = [("anthropic", False, False), ("anthropic", True, False), ("anthropic", True, True),
             ("openai", True, False), ("openai", True, True)]  # fmt: skip
    print(f"echo: {args.tasks} tasks x {TURNS} turns, a {args.preamble}-token instruction preamble, full history, mock model")
    header = (f"{'provider':<10} {'caching':<8} {'batch':<6} {'input tok':>10} {'cache read':>11} {'cache write':>12} "
              f"{'hit %':>6} {'input $ cached':>15} {'input $ uncached':>17} {'total $':>9} {'total $ no batch':>17} "
              f"{'list $':>8} {'saved %':>8} {'wall s':>7}")  # fmt: skip
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (provider, caching, batch) in enumerate(cases):
            row, seconds = await _run(Path(tmp) / f"{i}.duckdb", provider, caching=caching, batch=batch, tasks=args.tasks,
                                      preamble=args.preamble)  # fmt: skip
            p = PRICES[provider]
            read, written, total = row["cache_read_tokens"], row["cache_write_tokens"], row["input_tokens"]
            input_cached = ((total - read - written) * p["price_in"] + read * p["price_cached_in"]
                            + written * p.get("price_cache_write", p["price_in"])) / 1e6  # fmt: skip
            input_uncached = total * p["price_in"] / 1e6
            print(f"{provider:<10} {('on' if caching else 'off') if provider == 'anthropic' else 'auto':<8} {('yes' if batch else 'no'):<6} "
                  f"{total:>10,} {read:>11,} {written:>12,} {100 * (row['cache_hit_share'] or 0):>6.1f} {input_cached:>15.4f} "
                  f"{input_uncached:>17.4f} {row['cost_usd']:>9.4f} {row['cost_no_batch_usd']:>17.4f} {row['cost_list_usd']:>8.4f} "
                  f"{100 * row['saved_share']:>8.1f} {seconds:>7.1f}")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
