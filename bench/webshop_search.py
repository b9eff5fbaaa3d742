"""WebShop search speed: index build time and queries/s, on the built-in catalogue and a generated 100k one.

    PYTHONPATH=src python bench/webshop_search.py [--sizes 1200 100000] [--before REV]

Each size other than the built-in catalogue's 1,200 products is made by the built-in generator
(``environments/webshop/generate.py``). Queries: every goal's instruction (long, as a model's first search
often is) and two seeded 1-4 word windows of it (short, many ties), single thread; the versions take turns over
``--rounds`` passes and the medians are printed, per second of wall-clock time and of this process's CPU time.
``--before REV`` also times ``envs/webshop/search.py`` as it was at git revision REV (e.g. the bm25s version
before the Lucene-exact one: ``--before bcd0ae4~1``; it needs that version's dependencies installed) and, on
the built-in catalogue, how many of the Anserini fixture's page-1 rankings each version reproduces.
Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from agentbench_async.envs.webshop import search as current  # noqa: E402
from agentbench_async.envs.webshop.catalog import Catalog, load_catalog  # noqa: E402
from agentbench_async.envs.webshop.tasks import builtin_dir  # noqa: E402
from _support import load_average, load_generator  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "webshop_anserini" / "ranks.json"
N_GOALS = 300


def _old_module(rev: str) -> ModuleType:
    """``envs/webshop/search.py`` at ``rev``, imported as a module of the webshop package (for its relative imports)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/agentbench_async/envs/webshop/search.py"],
                            check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("agentbench_async.envs.webshop._search_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"search.py@{rev}", "exec"), module.__dict__)
    return module


def _index(module: ModuleType, catalog: Catalog) -> Any:
    texts = [(p.asin, module.document_text(p.title, p.description, p.bullets, p.options)) for p in catalog.products]
    try:
        return module.SearchIndex(texts)
    except (TypeError, AttributeError, ValueError):
        return module.SearchIndex([text for _, text in texts])  # versions before the (asin, text) documents


def _queries(catalog: Catalog) -> list[str]:
    rng = random.Random(1)
    out = []
    for goal in catalog.goals[:N_GOALS]:
        words = goal.instruction_text.split()
        out.append(goal.instruction_text)
        for _ in range(2):
            n = rng.randint(1, 4)
            start = rng.randrange(max(1, len(words) - n + 1))
            out.append(" ".join(words[start:start + n]))
    return out


def _agreement(index: Any, catalog: Catalog) -> str:
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))["queries"]
    same = sum([catalog.products[i].asin for i in index.search(q["q"])[:10]] == q["asins"] for q in fixture)
    return f"page 1 as Anserini for {same}/{len(fixture)} fixture queries ({same / len(fixture):.1%})"


def _rates(index: Any, queries: list[str]) -> tuple[float, float]:
    """(queries per wall-clock second, per CPU second) over one pass of the queries."""
    t0, c0 = time.perf_counter(), time.process_time()
    for q in queries:
        index.search(q)
    return len(queries) / (time.perf_counter() - t0), len(queries) / (time.process_time() - c0)


def measure(versions: list[tuple[str, ModuleType]], catalog: Catalog, builtin: bool, rounds: int) -> None:
    """Each version's index time, then ``rounds`` passes over the queries, the versions taking turns (so a change in
    the machine's load hits them alike); the medians are printed."""
    queries = _queries(catalog)
    indexes = []
    for name, module in versions:
        t0 = time.perf_counter()
        index = _index(module, catalog)
        indexes.append((name, index, time.perf_counter() - t0))
        index.search(queries[0])  # first-use costs (the tokenizer's Unicode tables) are not per query
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in indexes}
    for _ in range(rounds):
        for name, index, _ in indexes:
            rates[name].append(_rates(index, queries))
    for name, index, t_index in indexes:
        wall = statistics.median(r[0] for r in rates[name])
        cpu = statistics.median(r[1] for r in rates[name])
        extra = f"; {_agreement(index, catalog)}" if builtin else ""
        print(f"  {name}: index {t_index:.2f} s, {wall:,.0f} queries/s ({cpu:,.0f} per CPU second; median of {rounds} "
              f"passes over {len(queries)} queries){extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1200, 100_000])
    parser.add_argument("--before", default=None, help="also time search.py at this git revision")
    parser.add_argument("--rounds", type=int, default=5, help="passes over the queries per version (medians printed)")
    args = parser.parse_args()
    versions = [("now", current)] + ([(f"at {args.before}", _old_module(args.before))] if args.before else [])
    print(f"before: {load_average()}")
    for size in args.sizes:
        if size == 1200:
            catalog, label = load_catalog(builtin_dir()), "built-in catalogue"
        else:
            generator = load_generator("webshop")
            with tempfile.TemporaryDirectory(prefix=f"webshop-{size}-") as tmp:
                generator.write(Path(tmp), generator.build(n_products=size, n_goals=N_GOALS))
                catalog, label = load_catalog(Path(tmp)), "generated"
        print(f"{len(catalog.products):,} products ({label}):")
        measure(versions, catalog, builtin=size == 1200, rounds=args.rounds)
    print(f"after: {load_average()}")


if __name__ == "__main__":
    main()
