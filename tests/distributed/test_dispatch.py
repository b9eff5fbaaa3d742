"""How the driver spreads episodes over workers (no Ray: workers are local objects behind the calling
convention of Ray actor handles): only to workers able to run the episode's environment, and again
elsewhere when a worker dies."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console

from agentbench_async.config import build_config
from agentbench_async.distributed import RaySettings
from agentbench_async.distributed.cluster import Cluster, _Worker
from agentbench_async.distributed.worker import pack, unpack
from agentbench_async.envs.base import Task
from agentbench_async.episode import EpisodeSpec
from agentbench_async.records import EpisodeRecord


class _Call:
    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def remote(self, *args: Any) -> Any:
        return _Ref(asyncio.ensure_future(self._fn(*args)))


class _Ref:
    """What ``cluster._await`` needs of an ObjectRef: ``future()``."""

    def __init__(self, task: asyncio.Future[Any]) -> None:
        self._task = task

    def future(self) -> Any:
        import concurrent.futures

        out: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def done(task: asyncio.Future[Any]) -> None:
            if task.exception() is not None:
                out.set_exception(task.exception())
            else:
                out.set_result(task.result())

        self._task.add_done_callback(done)
        return out


class _FakeWorker:
    """Plays each episode by waiting a little; ``die()`` makes every later call fail as a dead actor's would."""

    def __init__(self) -> None:
        self.played: list[str] = []
        self._finished: list[EpisodeRecord] = []
        self._wake = asyncio.Event()
        self._dead = False

    def __getattr__(self, name: str) -> _Call:
        return _Call(getattr(self, f"_{name}"))

    def die(self) -> None:
        self._dead = True
        self._wake.set()

    async def _submit(self, payload: bytes) -> None:
        for spec in unpack(payload):
            asyncio.ensure_future(self._play(spec))

    async def _play(self, spec: EpisodeSpec) -> None:
        await asyncio.sleep(0.01)
        if self._dead:
            return
        self.played.append(spec.episode_id)
        t = spec.task
        self._finished.append(EpisodeRecord(
            episode_id=spec.episode_id, model=spec.model, env=t.env, split=t.split, task_id=t.task_id, repeat=0, status="completed",
            score=1.0, success=True, n_turns=1, input_tokens=0, output_tokens=0, started_at=0.0, finished_at=0.0, error=None,
            details={}, source="builtin", action_mode="text",
        ))  # fmt: skip
        self._wake.set()

    async def _collect(self) -> bytes:
        await self._wake.wait()
        self._wake.clear()
        if self._dead:
            raise RuntimeError("The actor died unexpectedly before finishing this task.")
        done, self._finished = self._finished, []
        return pack((done, {"models": {"m": {"calls": len(self.played)}}, "stale_leases": 0}))

    async def _forget(self, worker: int) -> int:
        return 0


def _cluster(tmp_path: Any, workers: list[tuple[_FakeWorker, dict[str, int], dict[str, str]]]) -> Cluster:
    cfg = build_config({"out": tmp_path / "x.duckdb", "envs": ["echo"], "models": ["m"]}, where="test")
    cluster = Cluster(RaySettings(), cfg, Console(quiet=True))
    cluster._broker = _FakeWorker()  # only forget() is asked of it
    cluster._kill = lambda actor: None  # type: ignore[method-assign]
    for i, (actor, envs, unavailable) in enumerate(workers):
        cluster.workers.append(_Worker(i, actor, host=f"node{i}", ip=f"10.0.0.{i}", pid=100 + i, node_id=f"n{i}", envs=envs, unavailable=unavailable))
    return cluster


def _spec(env: str, i: int) -> EpisodeSpec:
    return EpisodeSpec(model="m", task=Task(env=env, split="dev", task_id=f"t{i}", data={}))


async def test_a_node_without_an_environment_gets_none_of_its_episodes(tmp_path):
    with_db, without_db = _FakeWorker(), _FakeWorker()
    cluster = _cluster(tmp_path, [(with_db, {"echo": 4, "db": 4}, {}), (without_db, {"echo": 4}, {"db": "db: mariadbd is not installed"})])
    records = await asyncio.gather(*(cluster.run("db", _spec("db", i)) for i in range(12)),
                                   *(cluster.run("echo", _spec("echo", i)) for i in range(12)))  # fmt: skip
    assert all(r is not None and r.status == "completed" for r in records)
    assert sorted(e for e in with_db.played if "/db/" in e) == sorted(_spec("db", i).episode_id for i in range(12))
    assert not any("/db/" in e for e in without_db.played)
    assert any("/echo/" in e for e in without_db.played)  # it still plays the environments it has
    assert cluster.model_stats("m").stats["calls"] == 24  # what progress shows: the workers' counters summed
    assert cluster.capacity("db") == 4 and cluster.unavailable_reason("db") is None
    reason = cluster.unavailable_reason("os")
    assert reason is not None and reason.startswith("os cannot run on any node")


async def test_episodes_of_a_dead_worker_are_played_again_elsewhere(tmp_path):
    doomed, survivor = _FakeWorker(), _FakeWorker()
    cluster = _cluster(tmp_path, [(doomed, {"echo": 8}, {}), (survivor, {"echo": 8}, {})])
    running = asyncio.gather(*(cluster.run("echo", _spec("echo", i)) for i in range(16)))
    await asyncio.sleep(0)  # every episode is sent, half of them to the doomed worker
    doomed.die()
    records = await running
    assert sorted(r.episode_id for r in records) == sorted(_spec("echo", i).episode_id for i in range(16))
    assert len(survivor.played) == 16 and doomed.played == []
    assert cluster.rerun == 8
    assert "1 lost, 8 episodes re-run" in cluster.summary_line()


async def test_episodes_nobody_can_play_are_left_for_resume(tmp_path):
    only = _FakeWorker()
    cluster = _cluster(tmp_path, [(only, {"echo": 4}, {})])
    running = asyncio.gather(*(cluster.run("echo", _spec("echo", i)) for i in range(4)))
    await asyncio.sleep(0)
    only.die()
    assert await running == [None] * 4
    assert cluster.unrun == {"echo": 4}
    assert "not run (no worker left for echo): 4, resume runs them" in cluster.summary_line()


async def test_live_turns_of_episodes_that_ended_are_not_sent_again(tmp_path):
    # A worker hands the driver the turns of its running episodes about once a second (for live readers of the file);
    # an episode that ended since then comes back with all its turns in its record, so its live turns stay behind.
    from agentbench_async.distributed.worker import EpisodeWorker
    from agentbench_async.records import TurnRow

    cfg = build_config({"out": tmp_path / "x.duckdb", "envs": ["echo"], "models": ["m"]}, where="test")
    worker = EpisodeWorker(0, cfg, broker=None)
    running = asyncio.get_running_loop().create_future()
    worker._running["m/echo/dev/t1/0"] = running  # type: ignore[assignment]
    for episode in ("m/echo/dev/t1/0", "m/echo/dev/t2/0"):  # t2 has ended (no longer running)
        worker._live_sink(episode, "m", "echo")([TurnRow(turn=0, seq=0, role="user", content=f"{episode} asks")])
    live, stats = unpack(await worker.drain())
    assert [(episode, [row.content for row in rows]) for episode, _, _, rows in live] == [("m/echo/dev/t1/0", ["m/echo/dev/t1/0 asks"])]
    assert "cpu_seconds" in stats
    assert unpack(await worker.drain())[0] == []  # each turn is sent once
    running.cancel()
