"""os environment cost: sandbox start+stop (alone and beside a concurrency-16 load), oracle episodes/s
and memory per live episode. The sandbox root is built first if it is not cached yet.

    PYTHONPATH=src python bench/env_os.py [--concurrency 1 4 16] [--rounds N] [--official DATA_DIR] [--split dev]
    PYTHONPATH=src python bench/env_os.py --per-task [--official DATA_DIR] [--split test] [--top 20]
    PYTHONPATH=src python bench/env_os.py --phases N

Prints numbers, asserts nothing. Beside episodes/s it prints the CPU an episode costs the whole process
tree (engine, warden zygote, wardens, bubblewrap, every process in the sandboxes: this process is their
child subreaper, and each measurement ends by reaping them all), which other load on the machine does not
move much, and what that allows on this machine's idle cores. ``--official`` runs the oracle over every official task of the split
(e.g. ``--official ../shared/agentbench-data --split test`` for the 144 std tasks) and lists failures.
``--per-task`` plays the split's tasks one after another instead and prints the CPU each took (the whole tree, read
from a cpuacct cgroup of this process's own, v1 or v2: root only): its distribution (minimum, quartiles, mean) and
the tasks that cost most, which tells the sandbox's own cost (the cheapest tasks) from the tasks' commands.
``--phases N`` prints the CPU of each piece of the spawn path instead (a sandbox's start and close, the login shell, a
command, a script, a check), the median of N of each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agentbench_async.envs import make_env  # noqa: E402
from agentbench_async.envs.base import EpisodeContext  # noqa: E402
from agentbench_async.envs.os_interaction import control  # noqa: E402
from agentbench_async.envs.os_interaction.rootfs import ensure_shifted, resolve  # noqa: E402
from agentbench_async.envs.os_interaction.grading import run_script  # noqa: E402
from agentbench_async.envs.os_interaction.sandbox import Limits, Sandbox, host_idmap  # noqa: E402
from agentbench_async.envs.os_interaction.shell import AgentShell  # noqa: E402
from agentbench_async.testing import play  # noqa: E402


def _tree_cpu() -> float:
    """CPU seconds of this process and of every descendant reaped so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _reap_all() -> None:
    """End the warden zygote and reap every descendant left (their CPU then counts in RUSAGE_CHILDREN)."""
    control._zygote._stop()  # noqa: SLF001 - bench accounting
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def _sandbox_memory_kb(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


async def _start_stop_ms(n: int) -> list[float]:
    idmap = host_idmap()
    root = await ensure_shifted(await resolve(None), idmap.uid_base, idmap.gid_base)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        sb = Sandbox(Limits(), root, idmap)
        await sb.start()
        await sb.close()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _summary(times: list[float]) -> str:
    times = sorted(times)
    return f"median {times[len(times) // 2]:.1f} ms, p90 {times[int(len(times) * 0.9)]:.1f} ms (n={len(times)})"


async def _start_cost(n: int = 30) -> None:
    await _start_stop_ms(3)  # warm the page cache
    print(f"sandbox start+stop, nothing else running in this process: {_summary(await _start_stop_ms(n))}")


async def _start_cost_under_load(conc: int = 16, n: int = 30) -> None:
    """The same, measured while the oracle plays the built-in dev suite at ``conc`` in the same process."""
    env = make_env("os")
    await env.start()
    tasks = list(env.tasks("dev"))
    stop = asyncio.Event()

    async def worker(k: int) -> None:
        while not stop.is_set():
            await play(env, tasks[k % len(tasks)], "oracle")
            k += conc

    workers = [asyncio.create_task(worker(k)) for k in range(conc)]
    await asyncio.sleep(1.0)
    times = await _start_stop_ms(n)
    stop.set()
    await asyncio.gather(*workers)
    print(f"sandbox start+stop, under load (oracle at concurrency {conc} alongside): {_summary(times)}")


async def _memory(n: int = 8) -> None:
    env = make_env("os")
    await env.start()
    task = next(iter(env.tasks("dev")))
    sessions = [await env.open_session(task, EpisodeContext(episode_id=f"m{i}")) for i in range(n)]
    for s in sessions:
        await s.begin()
    pids: list[int] = []
    for s in sessions:
        cg = s._sandbox._cgroups  # noqa: SLF001 - bench introspection
        pids += cg.pids_in() if cg else []
    rss = _sandbox_memory_kb(pids)
    for s in sessions:
        await s.close()
    print(f"memory per live episode: {rss / n / 1024:.1f} MiB PSS of sandbox processes ({len(pids) / n:.0f} processes)")


async def _throughput(split: str, conc: int, data_dir: Path | None, *, rounds: int = 1) -> None:
    _reap_all()  # what earlier measurements left counts before the start (wardens started ahead die with it)
    cpu0 = _tree_cpu()
    env = make_env("os", data_dir=data_dir)
    await env.start()
    tasks = list(env.tasks(split)) * rounds
    sem = asyncio.Semaphore(conc)
    outcomes = {}

    async def one(i, t):  # type: ignore[no-untyped-def]
        async with sem:
            outcomes[f"{t.task_id}#{i}" if rounds > 1 else t.task_id] = (await play(env, t, "oracle")).outcome

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks)))
    dt = time.perf_counter() - t0
    await env.close()
    _reap_all()
    cpu = (_tree_cpu() - cpu0) / len(tasks)
    ok = sum(o.success for o in outcomes.values())
    src = "official" if data_dir else "built-in"
    print(
        f"oracle {src} {split}{f' x{rounds}' if rounds > 1 else ''}: {len(tasks)} episodes at concurrency {conc}: "
        f"{len(tasks) / dt:.2f} episodes/s, {ok}/{len(tasks)} passed, {dt:.1f} s; "
        f"CPU {cpu * 1000:.0f} ms an episode (at most {(os.cpu_count() or 1) / cpu:.0f} episodes/s on idle cores)"
    )
    if ok < len(tasks):
        print("  statuses:", dict(Counter(o.status for o in outcomes.values())))
        for tid, o in sorted(outcomes.items()):
            if not o.success:
                print(f"  failed {tid}: {o.status} {o.error or ''}".rstrip())


class _CpuCgroup:
    """A cgroup holding this process (and so everything it starts): its CPU seconds so far."""

    def __init__(self) -> None:
        v1, v2 = Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup")
        if (v2 / "cgroup.controllers").exists():
            self.dir, self.file = v2 / f"agentbench-bench-{os.getpid()}", "cpu.stat"
        else:
            self.dir, self.file = v1 / f"agentbench-bench-{os.getpid()}", "cpuacct.usage"
        self.dir.mkdir()
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> float:
        text = (self.dir / self.file).read_text()
        if self.file == "cpu.stat":
            return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
        return int(text) / 1e9


async def _per_task(split: str, data_dir: Path | None, top: int) -> None:
    try:
        cg = _CpuCgroup()
    except OSError as exc:
        print(f"--per-task needs a cgroup of its own (root, cpuacct or cgroup v2): {exc}")
        return
    env = make_env("os", data_dir=data_dir)
    await env.start()
    tasks = list(env.tasks(split))
    await play(env, tasks[0], "oracle")  # the spares start from here on, as in a run
    costs = []
    for task in tasks:
        await env._spares.settle()  # noqa: SLF001 - the previous machine closed, the next spares made: not this task's
        before = cg.seconds()
        outcome = (await play(env, task, "oracle")).outcome
        await env._spares.settle()  # noqa: SLF001 - this task's machine closed (its spare's replacement counts here)
        costs.append((cg.seconds() - before, task.task_id, outcome.success))
    await env.close()
    ms = sorted(c * 1000 for c, _, _ in costs)
    q = lambda f: ms[min(len(ms) - 1, int(len(ms) * f))]  # noqa: E731
    src = "official" if data_dir else "built-in"
    print(f"{src} {split}, {len(ms)} tasks one after another, CPU of the whole tree a task: min {ms[0]:.0f} ms, "
          f"p25 {q(0.25):.0f}, median {q(0.5):.0f}, p75 {q(0.75):.0f}, mean {sum(ms) / len(ms):.0f}, max {ms[-1]:.0f}; "
          f"the {top} costliest {sum(sorted(ms)[-top:]) / sum(ms):.0%} of the total")
    for cost, task_id, ok in sorted(costs, reverse=True)[:top]:
        print(f"  {cost * 1000:7.0f} ms  {task_id}{'' if ok else '  (failed)'}")
    with contextlib.suppress(OSError):
        (cg.dir.parent / "cgroup.procs").write_text(str(os.getpid()))
        cg.dir.rmdir()


async def _phases(n: int) -> None:
    """The spawn path's pieces, each ``n`` times (medians), CPU of the whole tree from a cpuacct cgroup and of this
    process alone: a sandbox's start and close, the agent's login shell, a command typed into it, a script (the
    episode's cgroup) and a check (the checks' cgroup and mount namespace) of ``exit 0``, a python check of ``pass``."""
    try:
        cg = _CpuCgroup()
    except OSError as exc:
        print(f"--phases needs a cgroup of its own (root, cpuacct or cgroup v2): {exc}")
        return
    idmap = host_idmap()
    root = await ensure_shifted(await resolve(None), idmap.uid_base, idmap.gid_base)

    async def measure(name: str, step: Callable[[], Awaitable[object]]) -> None:
        await step()  # warm
        tree, mine = [], []
        for _ in range(n):
            c0, m0 = cg.seconds(), _own_cpu()
            await step()
            tree.append(cg.seconds() - c0)
            mine.append(_own_cpu() - m0)
        print(f"  {name:36s} {sorted(tree)[n // 2] * 1000:6.2f} ms  (this process {sorted(mine)[n // 2] * 1000:5.2f} ms)")

    async def start_close() -> None:
        sb = Sandbox(Limits(), root, idmap)
        await sb.start()
        await sb.close()

    print(f"the spawn path, median of {n} each, CPU of the whole tree:")
    await measure("sandbox start + close", start_close)
    sb = Sandbox(Limits(), root, idmap)
    await sb.start()
    try:

        async def login() -> None:
            shell = AgentShell(sb)
            await shell.start()
            await shell.close()

        await measure("login shell start + close", login)
        shell = AgentShell(sb)
        await shell.start()
        await measure("a command typed into it (true)", lambda: shell.run("true", 10))
        await measure("a script (bash: exit 0)", lambda: run_script(sb, {"language": "bash", "code": "exit 0"}, [], 10))
        await measure("a check (bash: exit 0)", lambda: run_script(sb, {"language": "bash", "code": "exit 0"}, [], 10, check=True))
        await measure("a check (python: pass)", lambda: run_script(sb, {"language": "python", "code": "pass"}, [], 10, check=True))
        await shell.close()
    finally:
        await sb.close()
        _reap_all()
        with contextlib.suppress(OSError):
            (cg.dir.parent / "cgroup.procs").write_text(str(os.getpid()))
            cg.dir.rmdir()


def _own_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--official", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=None, help="play the split this many times per measurement (default: 8 built-in, 1 official)")
    ap.add_argument("--per-task", action="store_true", help="each task's CPU, the tasks played one after another")
    ap.add_argument("--top", type=int, default=20, help="with --per-task: how many of the costliest tasks to list")
    ap.add_argument("--phases", type=int, metavar="N", help="the spawn path's pieces instead, N times each (medians)")
    args = ap.parse_args()
    if args.phases:
        print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (other processes share the machine)")
        asyncio.run(_phases(args.phases))
        return
    if args.per_task:
        print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (other processes share the machine)")
        asyncio.run(_per_task(args.split, args.official, args.top))
        return
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphaned descendants are reaped here
    print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (other processes share the machine)")
    asyncio.run(_start_cost())
    asyncio.run(_start_cost_under_load())
    asyncio.run(_memory())
    for c in args.concurrency:
        rounds = args.rounds or (1 if args.official else 8)
        asyncio.run(_throughput(args.split, c, args.official, rounds=rounds))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
