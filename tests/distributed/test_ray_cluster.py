"""Distributed runs on a real Ray cluster on 127.0.0.1, started here as a user would (``ray start --head``,
``ray start --address``), driven by ``agentbench run --ray ADDRESS`` against the loopback mock model.

One cluster (a head and one worker node, one CPU each) serves the whole module; the fault test adds a node
of its own and kills it. Every process started here is stopped by its process group at the end.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_support import query, run, start_mock
from support import require

from agentbench_async.analytics import load
from agentbench_async.config import build_config
from agentbench_async.store.live import live_dir

HAS_RAY = importlib.util.find_spec("ray") is not None
HAS_MARIADB = bool(shutil.which("mariadbd") or os.access("/usr/sbin/mariadbd", os.X_OK))
RAY = Path(sys.executable).with_name("ray")
_STARTED = "Ray runtime started"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Node:
    proc: subprocess.Popen[bytes]
    log: Path

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal every process of the node: ``ray start --block`` leads a session of its own, and everything it
        started stays in it (Ray's worker processes put themselves in process groups of their own)."""
        for pid in _session_members(self.proc.pid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.kill(signal.SIGKILL)
        self.proc.wait(10)


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session ...
            if int(fields[3]) == sid:
                members.append(int(entry.name))
    return members


def _start_node(args: list[str], env: dict[str, str], log: Path) -> _Node:
    with log.open("wb") as out:
        # each node's agent gets a port of its own: several nodes (and other Ray instances) share this host
        own = [f"--dashboard-agent-listen-port={_free_port()}", "--object-store-memory=100000000"]  # and a small object store
        proc = subprocess.Popen([str(RAY), "start", *args, *own, "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    node = _Node(proc, log)
    deadline = time.monotonic() + 90
    while _STARTED not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            node.stop()
            pytest.fail(f"ray start {' '.join(args)} did not come up:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return node


@dataclass
class _Cluster:
    address: str
    env: dict[str, str]
    temp: Path

    def add_node(self, log: Path) -> _Node:
        return _start_node([f"--address={self.address}", "--num-cpus=1"], self.env, log)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Cluster]:
    require(HAS_RAY, "Ray is not installed (pip install '.[ray]')")
    logs = tmp_path_factory.mktemp("ray-logs")
    temp = Path(tempfile.mkdtemp(prefix="abray", dir="/tmp"))  # short: Ray's unix sockets live under it
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16), "RAY_USAGE_STATS_ENABLED": "0"}
    port = _free_port()
    nodes = [_start_node(["--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false", f"--temp-dir={temp}"], env, logs / "head.log")]
    try:
        state = _Cluster(f"127.0.0.1:{port}", env, temp)
        nodes.append(state.add_node(logs / "node1.log"))
        yield state
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(temp, ignore_errors=True)


def _config(out: Path, base_url: str, envs: list[str], **settings: Any) -> dict[str, Any]:
    fast = {"base_url": base_url, "task_header": True, "timeout": 10, "retry_backoff_s": 0.05, "retry_backoff_max_s": 0.5}
    models = settings.pop("models", [{"name": "mock-oracle"}])
    return {"out": str(out), "envs": envs, "split": "dev", "models": [{**fast, **m} for m in models], **settings}


async def _start(cluster: _Cluster, *args: str) -> asyncio.subprocess.Process:
    # a session of its own: a test that fails or times out ends the run and everything it started (_finish)
    return await asyncio.create_subprocess_exec(sys.executable, "-m", "agentbench_async.cli", *args, env=cluster.env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                start_new_session=True)  # fmt: skip


async def _finish(proc: asyncio.subprocess.Process, timeout: float = 300) -> tuple[int, str]:
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except BaseException:  # a timeout, a cancelled test: the run and what it started (a Ray instance) do not outlive it
        _end_group(proc.pid)
        await proc.wait()
        raise
    return proc.returncode or 0, " ".join(err.decode(errors="replace").split())  # as one line (older output wrapped at 80)


def _end_group(pid: int) -> None:
    """SIGKILL to the process group ``pid`` leads (a driver started with start_new_session), if it still exists."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def _agentbench(cluster: _Cluster, *args: str) -> tuple[int, str]:
    return await _finish(await _start(cluster, *args))


async def _served(server: Any, requests: int, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 120
    while server.stats["requests"] < requests:
        if proc.returncode is not None:  # ended before it got going: say why
            code, err = await _finish(proc)
            raise AssertionError(f"the run ended (exit {code}) before {requests} requests: {err}")
        if time.monotonic() > deadline:
            proc.kill()
            _, err = await _finish(proc)
            raise AssertionError(f"the run never got going: {err}")
        await asyncio.sleep(0.05)


def _results(path: Path) -> list[tuple[Any, ...]]:
    return query(path, "SELECT episode_id, status, score, success, n_turns, paper_status FROM episodes ORDER BY episode_id")


def _transcripts(path: Path) -> list[tuple[Any, ...]]:
    rows = query(path, "SELECT episode_id, seq, turn, role, content, action, valid FROM turns ORDER BY episode_id, seq")
    # db gives each episode a database user of a random name, which its error messages quote
    return [(*r[:4], re.sub(r"abu_[0-9a-f]+", "abu_*", r[4] or ""), *r[5:]) for r in rows]


async def test_cluster_run_matches_a_local_run_under_an_enforced_rate_limit(cluster: _Cluster, tmp_path: Path) -> None:
    require(HAS_MARIADB, "mariadbd is not installed (apt-get install mariadb-server)")
    # The server refuses (429) beyond 40 requests in any second; the two models may use 20 each.
    server = await start_mock(rpm_limit=40, rpm_window_s=1.0)
    limits = {"rpm": 20, "rate_window_s": 1.0}
    models = [{"name": "mock-oracle", **limits}, {"name": "mock-weak", **limits}]
    try:
        raw = _config(tmp_path / "ray.duckdb", server.base_url, ["echo", "db", "kg"], limit=4, models=models)
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
        code, err = await _agentbench(cluster, "run", "--config", str(tmp_path / "run.yaml"), "--ray", cluster.address, "--no-progress")
        assert code == 0, err
        assert server.stats["429_rate_limit"] == 0, "a worker went over the model's limit"
        assert server.max_requests_in_window <= 40
        assert "ray: 2 workers on 2 nodes" in err
        assert re.search(r"24 episodes finished .*; 0 already done", err), err
        # the same config in one local process, against the same server
        local = build_config({**raw, "out": tmp_path / "local.duckdb"}, where="test")
        await run(local)
    finally:
        await server.stop()
    ray_results = _results(tmp_path / "ray.duckdb")
    assert len(ray_results) == len({r[0] for r in ray_results}) == 24  # 2 models x 3 environments x 4 tasks, one row each
    assert ray_results == _results(tmp_path / "local.duckdb")
    assert _transcripts(tmp_path / "ray.duckdb") == _transcripts(tmp_path / "local.duckdb")
    assert query(tmp_path / "ray.duckdb", "SELECT count(*) FROM model_calls WHERE http_status <> 200") == [(0,)]
    # re-running the command resumes: nothing left to do
    code, err = await _agentbench(cluster, "run", "--config", str(tmp_path / "run.yaml"), "--ray", cluster.address, "--no-progress")
    assert code == 0, err
    assert "0 episodes finished (nothing to do); 24 already done" in err


async def test_killing_a_worker_node_mid_run_loses_nothing(cluster: _Cluster, tmp_path: Path) -> None:
    extra = cluster.add_node(tmp_path / "node2.log")  # a third node, killed mid-run
    server = await start_mock(latency_ms=250)
    try:  # 100 episodes of 3 turns, 12 at a time: about 6 s of work (with 60, a fast run could end before the
        # first live snapshot), 4 episodes in flight on each worker
        out = tmp_path / "r.duckdb"
        raw = _config(out, server.base_url, ["echo"], max_concurrency=12, env_options={"echo": {"tasks": 100, "turns": 3}})
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
        running = asyncio.ensure_future(_agentbench(cluster, "run", "--config", str(tmp_path / "run.yaml"), "--ray", cluster.address, "--no-progress"))
        deadline = time.monotonic() + 120
        while server.stats["requests"] < 24:  # the workers are started and every one has episodes in flight
            assert not running.done(), running.result()[1]
            assert time.monotonic() < deadline, "the run never got going"
            await asyncio.sleep(0.05)
        # turns of running episodes reach the file's live snapshot from the workers, as in a local run
        live = 0
        while live == 0:
            assert not running.done(), running.result()[1]
            assert time.monotonic() < deadline, "no live turns were published"
            if live_dir(out).joinpath("manifest.json").exists():
                with load(out) as res:
                    live = res.sql("SELECT count(*) FROM live_turns").item()
            await asyncio.sleep(0.1)
        extra.kill()
        code, err = await running
    finally:
        extra.stop()
        await server.stop()
    assert code == 0, err
    assert "ray: 3 workers on 3 nodes" in err
    assert "was lost" in err
    lost = re.search(r"1 lost, (\d+) episodes re-run after a loss", err)
    assert lost and int(lost.group(1)) > 0, err
    rows = query(out, "SELECT count(*), count(DISTINCT episode_id), count(*) FILTER (WHERE status = 'completed' AND success) FROM episodes")
    assert rows == [(100, 100, 100)], query(out, "SELECT status, error, count(*) FROM episodes GROUP BY ALL")  # every episode stored once, each a full, correct run
    assert query(out, "SELECT count(*) FROM live_turns") == [(0,)]  # no live turn outlives its stored episode


async def test_workers_on_this_machine(tmp_path: Path) -> None:
    require(HAS_RAY, "Ray is not installed (pip install '.[ray]')")
    server = await start_mock()
    try:
        raw = _config(tmp_path / "w.duckdb", server.base_url, ["echo"], limit=10)
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "agentbench_async.cli", "run", "--config", str(tmp_path / "run.yaml"),
                                                    "--workers", "2", "--no-progress", env=env, stderr=asyncio.subprocess.PIPE,
                                                    start_new_session=True)  # fmt: skip
        _, err = await _finish(proc)  # ends the run and its Ray instance if it fails or times out
    finally:
        await server.stop()
    assert proc.returncode == 0, err
    assert "ray: 2 workers on 1 node;" in err
    assert query(tmp_path / "w.duckdb", "SELECT count(*), count(*) FILTER (WHERE success) FROM episodes") == [(10, 10)]


async def test_an_interrupted_or_killed_driver_resumes(cluster: _Cluster, tmp_path: Path) -> None:
    server = await start_mock(latency_ms=200)
    out = tmp_path / "i.duckdb"
    try:
        raw = _config(out, server.base_url, ["echo"], max_concurrency=8, env_options={"echo": {"tasks": 40, "turns": 3}})
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
        # two workers: a node killed by an earlier test may still count in the cluster's CPUs for a while
        command = ("run", "--config", str(tmp_path / "run.yaml"), "--ray", cluster.address, "--workers", "2", "--no-progress")
        # Ctrl-C: the episodes in flight on the workers are stopped and stored as cancelled
        proc = await _start(cluster, *command)
        await _served(server, 12, proc)
        proc.send_signal(signal.SIGINT)
        code, err = await _finish(proc)
        assert code == 130, err
        cancelled = query(out, "SELECT count(*) FROM episodes WHERE status = 'cancelled'")[0][0]
        assert cancelled > 0, err
        # kill -9 of the driver: its workers go with it; nothing half-written
        proc = await _start(cluster, *command)
        await _served(server, server.stats["requests"] + 12, proc)
        proc.kill()
        await proc.wait()
        # the same command resumes and finishes
        code, err = await _agentbench(cluster, *command)
    finally:
        await server.stop()
    assert code == 0, err
    assert query(out, "SELECT count(*), count(DISTINCT episode_id), count(*) FILTER (WHERE success) FROM episodes") == [(40, 40, 40)]


def test_an_address_nobody_answers_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require(HAS_RAY, "Ray is not installed (pip install '.[ray]')")
    from agentbench_async.cli import main

    address = f"127.0.0.1:{_free_port()}"
    code = main(["run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", "echo", "--out", str(tmp_path / "x.duckdb"),
                 "--ray", address, "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: cannot connect to Ray at '{address}'") and "ray start --head" in err


def test_ray_is_never_imported_without_ray_or_workers() -> None:
    probe = ("import sys; from agentbench_async import cli, scheduler; from agentbench_async.config import build_config; "
             "build_config({'out': 'x.duckdb', 'envs': ['echo'], 'models': ['m']}); print('ray' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
