"""os grading audit: every official os task played by an agent that does nothing, and by the oracle.

    PYTHONPATH=src python bench/os_grading_audit.py DATA_DIR [--concurrency 4] [--policies idle oracle]

DATA_DIR is AgentBench's data/ folder (e.g. ../shared/agentbench-data). Plays the dev split (26), the test split
(144 std tasks) and every other record file under ``os_interaction/data`` that no split reads (``6-backup.json``,
as a task file of one's own) with the mock's ``idle`` policy (an empty answer at once, or ``finish`` without
acting) and the ``oracle``. Prints each task ``idle`` passes (a grading that accepts the state the task set up)
and each task the oracle fails, with the episode's status and details, and the machine's load. Asserts nothing:
which passes are our grading's defects and which are the tasks' own is written in docs/threat-model.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from _support import load_average

from agentbench_async.envs import make_env
from agentbench_async.envs.os_interaction.records import STD_GROUPS, official_root, own_file_tasks
from agentbench_async.testing import play


def _tasks(data_dir: Path) -> list[Any]:
    env = make_env("os", data_dir=data_dir)
    tasks = list(env.tasks("dev")) + list(env.tasks("test"))
    root = official_root(data_dir)
    read = {root / "dev.json", *(p for g in STD_GROUPS for p in (root / g).glob("*.json"))}
    for path in sorted(root.rglob("*.json")):
        if path not in read:
            name = path.relative_to(root).as_posix().replace("/", "-").removesuffix(".json")
            tasks += [replace(task, task_id=f"{name}-{task.task_id}") for task in own_file_tasks(path, "test")]
    return tasks


async def _play_all(data_dir: Path, tasks: list[Any], policy: str, concurrency: int) -> dict[str, Any]:
    env = make_env("os", data_dir=data_dir)
    limit = asyncio.Semaphore(concurrency)
    out: dict[str, Any] = {}

    async def one(task: Any) -> None:
        async with limit:
            out[task.task_id] = (await play(env, task, policy)).outcome

    try:
        await asyncio.gather(*(one(t) for t in tasks))
    finally:
        await env.close()
    return out


def _line(task: Any, outcome: Any) -> str:
    desc = " ".join(str(task.data.get("description", "")).split())[:90]
    details = {k: v for k, v in (outcome.details or {}).items() if k in ("reason", "answer", "expected", "checks")}
    return f"  {task.task_id:32} {outcome.status:10} score {outcome.score}  {desc!r}  {details or ''} {outcome.error or ''}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--policies", nargs="+", default=["idle", "oracle"])
    args = ap.parse_args()
    tasks = _tasks(args.data_dir)
    by_id = {t.task_id: t for t in tasks}
    print(f"{len(tasks)} tasks; {load_average()}", flush=True)
    for policy in args.policies:
        t0 = time.perf_counter()
        results = asyncio.run(_play_all(args.data_dir, tasks, policy, args.concurrency))
        passed = sorted(tid for tid, o in results.items() if o.success)
        print(f"\n{policy}: {len(passed)}/{len(results)} passed in {time.perf_counter() - t0:.0f} s; {load_average()}")
        shown = passed if policy != "oracle" else sorted(set(results) - set(passed))
        print(f"{'passed' if policy != 'oracle' else 'failed'}:")
        for tid in shown:
            print(_line(by_id[tid], results[tid]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
