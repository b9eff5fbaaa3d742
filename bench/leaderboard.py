"""A leaderboard in one command: N models x the whole test split of all eight environments in one ``agentbench run``,
against ``serve-mock --preload test`` answering each call after a fixed latency (1 s by default).

    PYTHONPATH=src python bench/leaderboard.py [--models N | --config FILE] [--data-dir ../shared/agentbench-data]
                                               [--latency-ms 1000] [--limit N] [--env all] [--keep DIR]
                                               [--engine-defaults] [--env-option ENV.KEY=VALUE ...]

``--models N`` writes a configuration of N models (``model-1`` ... each the mock's oracle, ``mock-oracle``);
``--config FILE`` takes the models of a run config instead (their base_url replaced by the mock's). The judge is
``mock-judge``. ``serve-mock`` runs in its own process, the run in another, as in ``whole_benchmark.py``; without
``--engine-defaults`` every episode is admitted at once and each model's requests are unlimited in flight
(``--max-in-flight 100000 --max-concurrency 100000``, as ``whole_benchmark.py``), so the mock's latency and this
machine's CPU bound the run; ``--engine-defaults`` runs with the engine's defaults (64 requests in flight a model,
256 episodes at once: what a user who types only the models gets), and the summary the run prints says when one of
the engine's limits, rather than the server, set the pace.

Printed: the command, the wall time of the run process, what ``whole_benchmark.py`` prints (episodes, calls,
every turn stored, each environment's end, what bounded the run), each model's end, the CPU of the whole process
tree of the run (engine, os wardens and sandboxes, MariaDB, game workers: this process is their child subreaper
and reaps every one before reading its children's usage) in total and per model-split, the CPU of each
environment's own processes per episode (sampled from /proc once a second: a subtree's CPU is its live processes'
own time plus the time of the descendants they reaped; the engine's share is not split by environment), and the
load average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import resource
import shlex
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import duckdb
import yaml
from whole_benchmark import REPO, _children, _PeakRss, _report, mock_and_folder  # bench/ is on the path

_PR_SET_CHILD_SUBREAPER = 36
_TICK = os.sysconf("SC_CLK_TCK")
# a process of the run's tree belongs to the environment whose words its command line holds (its own or an ancestor's)
_CLASSES = (("os", ("_warden", "os_interaction", "bwrap")), ("db", ("mariadbd", "mysqld", "mariadb")),
            ("alfworld", ("alfworld",)), ("card_game", ("card_game",)), ("webshop", ("webshop",)))  # fmt: skip


def _stat(pid: int) -> tuple[float, float] | None:
    """(own CPU seconds, CPU seconds of the children it reaped) of ``pid`` from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK, (int(fields[13]) + int(fields[14])) / _TICK


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class _EnvCpu(threading.Thread):
    """CPU of each environment's processes in the run's tree, sampled every second (the largest sum seen)."""

    def __init__(self, root: int, mock: int) -> None:
        super().__init__(daemon=True)
        self.root, self.mock, self.done = root, mock, threading.Event()
        self.peak: dict[str, float] = defaultdict(float)
        self.engine = 0.0
        self._names: dict[int, str] = {}

    def _class(self, pid: int, parent_class: str | None) -> str:
        if parent_class is not None:
            return parent_class
        if pid not in self._names:  # a class once found is kept; none is looked for again (a fork not yet exec'd)
            line = _cmdline(pid)
            env = next((env for env, words in _CLASSES if any(w in line for w in words)), "")
            if not env:
                return ""
            self._names[pid] = env
        return self._names[pid]

    def sample(self) -> None:
        own = _stat(self.root)
        if own is not None:
            self.engine = max(self.engine, own[0])
        sums: dict[str, float] = defaultdict(float)
        # the run's children, and the orphans of its tree this process adopted as their subreaper (os wardens)
        tops = _children(self.root) + [c for c in _children(os.getpid()) if c not in (self.root, self.mock)]
        todo: list[tuple[int, str | None]] = [(c, None) for c in tops]
        while todo:
            pid, parent = todo.pop()
            env = self._class(pid, parent) or None
            got = _stat(pid)
            if got is not None:
                sums[env or "other"] += got[0] + got[1]
            todo += [(c, env) for c in _children(pid)]
        for env, seconds in sums.items():
            self.peak[env] = max(self.peak[env], seconds)

    def run(self) -> None:
        while not self.done.wait(1.0):
            self.sample()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reap_orphans(keep: set[int]) -> None:
    """Reap every child left (orphans of the run adopted by this subreaper), except ``keep`` (the mock)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pending = [p for p in _children(os.getpid()) if p not in keep]
        if not pending:
            return
        for pid in pending:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)


def _config(args: argparse.Namespace, base_url: str, folder: Path) -> tuple[Path, list[str]]:
    """The run config's path (written when ``--models N``) and its model names."""
    if args.config is not None:
        raw = yaml.safe_load(args.config.read_text())
        models = [m if isinstance(m, dict) else {"name": m} for m in raw.get("models") or []]
        if not models:
            raise SystemExit(f"{args.config}: no 'models:' list")
    else:
        models = [{"name": f"model-{i + 1}", "model": "mock-oracle"} for i in range(args.models)]
        raw = {}
    raw["models"] = [{**m, "base_url": base_url, "task_header": True} for m in models]
    raw["judge"] = {"name": "mock-judge", "base_url": base_url, "task_header": True}
    path = folder / "leaderboard.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path, [m["name"] for m in models]


def _model_report(out: Path) -> tuple[int, dict[str, int]]:
    """Each model's end (seconds after the first episode started) and episodes per environment."""
    con = duckdb.connect(str(out), read_only=True)
    try:
        rows = con.execute(
            "SELECT model, count(*), epoch(max(finished_at)) - epoch((SELECT min(started_at) FROM episodes)), "
            "count(*) FILTER (WHERE status = 'env_error') FROM episodes GROUP BY 1 ORDER BY 3"
        ).fetchall()
        per_env = dict(con.execute("SELECT env, count(*) FROM episodes GROUP BY 1").fetchall())
    finally:
        con.close()
    print(f"{'model':<14} {'episodes':>8} {'env_error':>9} {'ended at':>9}")
    for model, n, ended, env_errors in rows:
        print(f"{model:<14} {n:>8,} {env_errors:>9,} {ended:>8.1f}s")
    return len(rows), per_env


def _cpu_report(total: float, engine: float, attributed: float, envs: dict[str, float], per_env: dict[str, int],
                n_models: int, wall: float) -> None:  # fmt: skip
    print(f"CPU of the run's whole process tree: {total:.1f} s ({total / wall:.2f} cores over {wall:.1f} s), "
          f"{total / max(n_models, 1):.1f} s per model-split; the engine process's own {engine:.1f} s (at its last "
          f"sample), the environments' processes {attributed:.1f} s, not sampled {max(total - engine - attributed, 0):.1f} s")  # fmt: skip
    cores = os.cpu_count() or 1
    if total >= 0.8 * cores * wall:
        print(f"the run's process tree kept {total / wall / cores:.0%} of this machine's {cores} cores busy: its CPU, more than "
              "the mock's latency, bounded the run")  # fmt: skip
    print(f"{'environment':<11} {'episodes':>8} {'own processes CPU':>18} {'per episode':>12}")
    for env in sorted(per_env):
        if env not in envs:
            print(f"{env:<11} {per_env[env]:>8,} {'none: its work runs in the engine process':>42}")
            continue
        print(f"{env:<11} {per_env[env]:>8,} {envs[env]:>17.1f}s {1000 * envs[env] / per_env[env]:>10.1f}ms")
    if envs.get("other"):
        print(f"{'other':<11} {'':>8} {envs['other']:>17.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--models", type=int, default=8, help="N models, each the mock's oracle (default 8)")
    which.add_argument("--config", type=Path, help="a run config whose models: list is used")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "agentbench-data")
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    parser.add_argument("--limit", type=int, help="only the first N tasks of each environment")
    parser.add_argument("--env", default="all")
    parser.add_argument("--keep", type=Path, help="write the result file here (default: a temporary folder)")
    parser.add_argument("--env-option", action="append", default=[], metavar="ENV.KEY=VALUE",
                        help="passed to the run (e.g. os.concurrency=128: os plays 16 episodes at once by default)")
    parser.add_argument("--engine-defaults", action="store_true",
                        help="the engine's default max_in_flight and max_concurrency (default: unlimited)")
    args = parser.parse_args()
    data_dir = args.data_dir if args.data_dir and args.data_dir.is_dir() else None
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    with mock_and_folder(data_dir, args.latency_ms) as (mock, base_url, folder):
        config, names = _config(args, base_url, folder)
        out = args.keep or folder / "leaderboard.duckdb"
        command = [sys.executable, "-m", "agentbench_async.cli", "run", "--config", str(config), "--env", args.env,
                   "--split", "test", "--no-progress", "--out", str(out)]  # fmt: skip
        for flag, value in (("--data-dir", data_dir), ("--limit", args.limit)):
            if value is not None:
                command += [flag, str(value)]
        for option in args.env_option:
            command += ["--env-option", option]
        if not args.engine_defaults:
            command += ["--max-in-flight", "100000", "--max-concurrency", "100000"]
        print(f"{len(names)} models: {', '.join(names)}")
        print("$ agentbench " + shlex.join(command[3:]))
        cpu0 = _children_cpu()
        started = time.perf_counter()
        run = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        peak, env_cpu = _PeakRss(run.pid), _EnvCpu(run.pid, mock.pid)
        peak.start()
        env_cpu.start()
        _, err = run.communicate()
        wall = time.perf_counter() - started
        peak.done.set()
        env_cpu.done.set()
        peak.join()
        env_cpu.join()
        _reap_orphans({mock.pid})
        total = _children_cpu() - cpu0
        print(err.rstrip())
        if run.returncode != 0:
            raise SystemExit(f"the run failed (exit {run.returncode})")
        _report(out, wall, args.latency_ms / 1000)
        n_models, per_env = _model_report(out)
        attributed = sum(s for e, s in env_cpu.peak.items() if e != "other")
        _cpu_report(total, env_cpu.engine, attributed, dict(env_cpu.peak), per_env, n_models, wall)
        print(f"peak resident memory of the run's process tree: {peak.peak / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main()
