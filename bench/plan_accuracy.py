"""How close ``agentbench plan`` comes to the run it plans (docs/budgeting.md's table): the built-in mock model plays
one split (the earlier run), ``plan --from`` it plans another, the other is run, and the planned tokens are printed
beside the used ones per model x environment, with the worst case and how long the plan took.

    python bench/plan_accuracy.py                      # mock-oracle + mock-judge, every environment, dev -> test
    python bench/plan_accuracy.py --models mock-oracle,mock-weak --env os,db --earlier test --planned dev

Everything runs through the command line (``agentbench serve-mock``, ``run``, ``plan --json``) into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import load_average

import duckdb


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _agentbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentbench_async.cli", *args], capture_output=True, text=True, check=False)


def _run_flags(models: list[str], env: str, split: str, out: Path, base_url: str) -> list[str]:
    flags = ["--env", env, "--split", split, "--out", str(out), "--base-url", base_url, "--task-header", "--judge-model", "mock-judge"]
    if len(models) == 1:
        return ["--model", models[0], *flags]
    config = out.with_suffix(".yaml")
    config.write_text("models: [" + ", ".join(models) + "]\n", encoding="utf-8")
    return ["--config", str(config), *flags]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mock-oracle", help="mock models, comma-separated (mock-oracle, mock-weak)")
    p.add_argument("--env", default="all")
    p.add_argument("--earlier", default="dev", help="the split of the earlier run (--from)")
    p.add_argument("--planned", default="test", help="the split planned, then run")
    args = p.parse_args()
    models = args.models.split(",")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "agentbench_async.cli", "serve-mock", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        time.sleep(3)
        with tempfile.TemporaryDirectory() as tmp:
            earlier, planned = Path(tmp) / "earlier.duckdb", Path(tmp) / "planned.duckdb"
            done = _agentbench("run", *_run_flags(models, args.env, args.earlier, earlier, base_url), "--no-progress")
            assert done.returncode == 0, done.stderr[-2000:]
            t0 = time.perf_counter()
            plan_run = _agentbench("plan", *_run_flags(models, args.env, args.planned, planned, base_url), "--from", str(earlier), "--json")
            plan_wall = time.perf_counter() - t0
            assert plan_run.returncode == 0, plan_run.stderr[-2000:]
            plan = json.loads(plan_run.stdout)
            done = _agentbench("run", *_run_flags(models, args.env, args.planned, planned, base_url), "--no-progress")
            assert done.returncode == 0, done.stderr[-2000:]
            con = duckdb.connect(str(planned), read_only=True)
            used = {(m, e): (int(t), int(n)) for m, e, t, n in con.execute(
                "SELECT e.model, e.env, sum(c.input_tokens + c.output_tokens), count(DISTINCT e.episode_id) FROM episodes e "
                "JOIN model_calls c USING (run_id, episode_id) WHERE c.input_tokens IS NOT NULL GROUP BY ALL").fetchall()}  # fmt: skip
            con.close()
    finally:
        server.terminate()
        server.wait(10)
    total_planned = total_used = 0.0
    print(f"plan of {args.planned} --from {args.earlier}: {plan['seconds']:.1f} s inside plan, {plan_wall:.1f} s the command; {load_average()}")
    print("model | env | episodes | planned tokens | used tokens | difference | worst case")
    for r in plan["rows"]:
        tokens, episodes = used.get((r["model"], r["env"]), (0, 0))
        expected = r["expected_tokens"] + r["judge_expected_tokens"]
        worst = r["worst_tokens"] + r["judge_worst_tokens"]
        total_planned, total_used = total_planned + expected, total_used + tokens
        diff = f"{100 * (expected / tokens - 1):+.1f}%" if tokens else "-"
        print(f"{r['model']} | {r['env']} | {episodes} | {expected:,.0f} | {tokens:,} | {diff} | {worst:,.0f}{'' if worst >= tokens else ' BELOW'}")
    print(f"total | | | {total_planned:,.0f} | {total_used:,.0f} | {100 * (total_planned / total_used - 1):+.1f}% |")


if __name__ == "__main__":
    main()
