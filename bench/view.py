"""`agentbench view` on a big result file: how long it takes to open and to answer each page.

Builds a result file with --episodes episodes (default 100,000) of --turns messages each (default 20, so
2 million turns) and one HTTP attempt per model turn (plus a retried 429 on every 7th episode), written
through the store schema with set-based SQL; then starts the view app on loopback and prints the time to
open the file (load + first page) and each page's answer time (median and max of --tries requests).

    .venv/bin/python bench/view.py [--episodes 100000] [--turns 20] [--keep PATH]

With --export DIR it writes the static site instead (or reuses the one in DIR when DIR/index.html exists) (``agentbench view FILE --export DIR``), printing the time and
size, then opens its pages from file:// in headless Chromium (tests/view/view_browser.py) and prints how long the
first page (the overview), the failure matrix, the first and last page of the list of all episodes and a
transcript take to load (navigation start to the load event, as the browser measures it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import duckdb

from agentbench_async.store.schema import create_schema

MODELS = ("alpha", "beta", "gamma", "delta")
ENVS = ("os", "db", "kg", "ltp", "webshop")
STATUSES = ("completed", "completed", "completed", "invalid_format", "invalid_action", "task_limit_exceeded",
            "context_limit_exceeded", "completed", "env_error", "model_error")


def build(path: Path, episodes: int, turns: int) -> None:
    """Write a result file of ``episodes`` episodes x ``turns`` messages (set-based SQL, a few seconds)."""
    con = duckdb.connect(str(path))
    create_schema(con)
    per_cell = max(1, episodes // (len(MODELS) * len(ENVS)))
    models = "[" + ", ".join(f"'{m}'" for m in MODELS) + "]"
    envs = "[" + ", ".join(f"'{e}'" for e in ENVS) + "]"
    statuses = "[" + ", ".join(f"'{s}'" for s in STATUSES) + "]"
    con.execute("INSERT INTO runs VALUES ('run-big', now(), '{\"models\": []}', 'fp-big', 'run', '0.1.0', now(), false)")
    con.execute(f"""
        CREATE TEMP TABLE plan AS
        SELECT i,
               {models}[1 + (i // ({per_cell} * {len(ENVS)})) % {len(MODELS)}] AS model,
               {envs}[1 + (i // {per_cell}) % {len(ENVS)}] AS env,
               'task-' || lpad(CAST(i % {per_cell} AS VARCHAR), 6, '0') AS task_id,
               {statuses}[1 + (hash(i) % {len(STATUSES)})::BIGINT] AS status
        FROM range({episodes}) AS r(i)
    """)
    con.execute(f"""
        INSERT INTO episodes
        SELECT 'run-big', model || '/' || env || '/test/' || task_id || '/0', model, env, 'test', task_id, 0, status,
               CASE WHEN status <> 'completed' THEN 0.0 WHEN env IN ('kg', 'ltp', 'webshop') THEN ((hash(i * 7) % 100)::BIGINT) / 100.0
                    ELSE ((hash(i * 3) % 2)::BIGINT)::DOUBLE END,
               status = 'completed' AND hash(i * 3) % 2 = 1, {turns // 2}, 1000 * {turns}, 50 * {turns},
               TIMESTAMPTZ '2025-03-01 12:00:00+00' + to_milliseconds(i * 10),
               TIMESTAMPTZ '2025-03-01 12:00:01+00' + to_milliseconds(i * 10),
               CASE status WHEN 'invalid_format' THEN 'no action found in reply ' || (i % 50)
                           WHEN 'invalid_action' THEN 'unknown command ''x' || (i % 30) || ''''
                           WHEN 'env_error' THEN 'container failed to start' WHEN 'model_error' THEN 'HTTP 500 after 5 retries' END,
               '{{}}', 'builtin', 'text', 'fp-big', NULL
        FROM plan
    """)
    con.execute(f"""
        INSERT INTO turns
        SELECT 'run-big', model || '/' || env || '/test/' || task_id || '/0', (s + 1) // 2, s,
               CASE WHEN s = 0 THEN 'user' WHEN s % 2 = 1 THEN 'assistant' ELSE 'user' END,
               CASE WHEN s % 2 = 1 THEN 'Think: step ' || s || ' of task ' || task_id || '. Act: bash ls -la /tmp/dir' || (s % 7)
                    ELSE 'observation ' || s || ': total 8 drwxr-xr-x 2 root root 4096 file' || (i % 97) END,
               CASE WHEN s % 2 = 1 THEN 'bash ls -la /tmp/dir' || (s % 7) END,
               CASE WHEN s % 2 = 1 THEN 'total 8' END,
               CASE WHEN s % 2 = 1 THEN true END, NULL, NULL,
               TIMESTAMPTZ '2025-03-01 12:00:00+00' + to_milliseconds(i * 10 + s), NULL, NULL
        FROM plan, range({turns}) AS t(s)
    """)
    con.execute(f"""
        INSERT INTO model_calls (run_id, episode_id, turn, attempt, http_status, latency_ms, input_tokens, output_tokens,
                                 error, caller, model, finish_reason, started_at, retry_after_s)
        SELECT 'run-big', model || '/' || env || '/test/' || task_id || '/0', k, a,
               CASE WHEN a = 1 AND k = 1 AND i % 7 = 0 THEN 429 ELSE 200 END, 200 + (hash(i + k) % 800)::BIGINT, 1000, 50,
               CASE WHEN a = 1 AND k = 1 AND i % 7 = 0 THEN 'HTTP 429 rate limited' END, 'agent', model, 'stop',
               TIMESTAMPTZ '2025-03-01 12:00:00+00' + to_milliseconds(i * 10 + k), NULL
        FROM plan, range(1, {turns // 2 + 1}) AS t(k), range(1, 3) AS r(a)
        WHERE a = 1 OR (k = 1 AND i % 7 = 0)
    """)
    con.close()


PAGES = (
    ("overview", "/"),
    ("failures", "/failures"),
    ("episodes", "/episodes"),
    ("episodes: failure cell, page 5", "/episodes?model=beta&env=kg&status=invalid_format&page=5"),
    ("episodes: task + repeat", "/episodes?task=task-00012&repeat=0"),
    ("episodes: free text (all messages)", "/episodes?q=file96&model=gamma"),
    ("episode transcript", "/episode?id=beta%2Fkg%2Ftest%2Ftask-000123%2F0"),
    ("live", "/live"),
    ("compare alpha vs beta", "/compare?ma=alpha&mb=beta"),
    ("sql", "/sql?q=SELECT+model%2C+env%2C+failure_class%2C+count%28*%29+FROM+episode_outcomes+GROUP+BY+ALL"),
)


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    async with session.get(url) as resp:
        body = await resp.text()
    return time.perf_counter() - t0, resp.status, body


async def measure(path: Path, tries: int) -> None:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "agentbench_async.cli", "view", str(path), "--port", "0",
                                                stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = (await proc.stderr.readline()).decode()
        base = line.split("agentbench view: ", 1)[1].split()[0].rstrip("/")
        async with aiohttp.ClientSession() as session:
            _, status, body = await _get(session, base + "/")
            opened = time.perf_counter() - t0
            print(f"open: command start -> overview answered: {opened:.2f} s (HTTP {status})")
            if "bootstrap interval: computing" in body:
                during = [(await _get(session, base + url))[0] for url in ("/episodes", "/failures", "/episodes?q=file96&model=gamma")]
                print("while the bootstrap intervals are computed (in the helper process): "
                      + ", ".join(f"{u} {1000 * t:.0f} ms" for u, t in zip(("episodes", "failures", "free text"), during)))
            while "bootstrap interval: computing" in body:
                await asyncio.sleep(0.2)
                _, status, body = await _get(session, base + "/")
            print(f"bootstrap intervals of the non-0/1 cells ready after {time.perf_counter() - t0:.2f} s")
            for name, url in PAGES:
                times = []
                for _ in range(tries):
                    seconds, status, _ = await _get(session, base + url)
                    assert status == 200, (url, status)
                    times.append(seconds)
                print(f"{name:38s} first {1000 * times[0]:6.0f} ms   median {1000 * statistics.median(times):6.0f} ms   "
                      f"max {1000 * max(times):6.0f} ms")
    finally:
        proc.terminate()
        await proc.wait()


async def measure_export(path: Path, folder: Path, tries: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "view"))
    from view_browser import Browser  # the view tests' DevTools driver

    from agentbench_async.view.export import export, size_text

    if (folder / "index.html").exists():  # measure the pages of an export already written (or being written)
        print(f"reusing the export in {folder}; first page {(folder / 'index.html').stat().st_size / 1e3:.1f} kB")
    else:
        done = export([path], folder)
        print(f"export: {done.episodes:,} transcripts, {done.list_pages:,} pages of {done.lists:,} episode lists, "
              f"{size_text(done.bytes)} in {done.seconds:.1f} s; first page {done.first_page_bytes / 1e3:.1f} kB")
    index = (folder / "index.html").read_text(encoding="utf-8")
    every = folder / index.split('">Episodes</a>', 1)[0].rsplit('href="', 1)[1]
    last = max(every.parent.glob("*.html"), key=lambda p: int(p.stem))
    pages = (("first page (overview)", folder / "index.html"), ("failure matrix", folder / "failures.html"),
             ("all episodes, page 1", every), (f"all episodes, page {last.stem}", last),
             ("a transcript", folder / "episodes" / "0" / "0.html"))
    with tempfile.TemporaryDirectory() as profile:
        async with Browser(Path(profile)) as b:
            for name, page in pages:
                times = []
                for _ in range(tries):
                    await b.goto("about:blank")
                    t0 = time.perf_counter()
                    await b.goto(page.as_uri())
                    wall = time.perf_counter() - t0
                    timing = await b.js("(() => { const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime; })()")
                    times.append((wall, timing / 1000))
                first = times[0]
                print(f"{name:32s} load event after {1000 * first[1]:5.0f} ms first, median "
                      f"{1000 * statistics.median(t[1] for t in times):5.0f} ms (wall incl. DevTools {1000 * first[0]:5.0f} ms)")
            assert not b.console_errors, b.console_errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=20, help="messages per episode")
    parser.add_argument("--tries", type=int, default=7, help="requests per page")
    parser.add_argument("--keep", type=Path, help="build the file here (reused when it exists) instead of a temporary folder")
    parser.add_argument("--export", type=Path, metavar="DIR", help="measure the static export into DIR (new or empty) instead of the app")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "big.duckdb"
        if not path.exists():
            t0 = time.perf_counter()
            build(path, args.episodes, args.turns)
            print(f"built {path} in {time.perf_counter() - t0:.1f} s")
        with duckdb.connect(str(path), read_only=True) as con:
            counts = [con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("episodes", "turns", "model_calls")]  # type: ignore[index]
        print(f"{counts[0]:,} episodes, {counts[1]:,} turns, {counts[2]:,} model calls; {path.stat().st_size / 1e6:.0f} MB; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        if args.export:
            asyncio.run(measure_export(path, args.export, args.tries))
        else:
            asyncio.run(measure(path, args.tries))


if __name__ == "__main__":
    main()
