"""The driver's view of a distributed run: connect to Ray, start the limit broker and the workers, send each
episode to a worker able to run its environment, and survive workers that die.

An episode whose worker (or whole node) dies while playing it is sent to another worker and played again
from the start; only the driver stores records, so each episode is stored once, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from ..config import RunConfig
from ..episode import EpisodeSpec
from ..errors import ConfigError
from ..models import ModelConfig
from ..records import EpisodeRecord
from . import LOCAL, RaySettings
from .leases import LimitBroker
from .watchdog import watchdog
from .worker import EpisodeWorker, LiveBatch, pack, unpack

_CANCEL_WAIT_S = 30.0  # how long a cancelled episode may take to come back as `cancelled`
PROCESS_START_S = 30.0  # a worker whose process is not up by then (Ray cannot start it) counts as failed to start
INIT_S = 45.0  # ray.init: 24 s here at a load of 37 on 2 cores; beyond this it is taken to hang (watchdog.py)
_CLOSE_WAIT_S = 30.0
_POLL_S = 1.0  # live turns and counters are fetched from the workers this often (the writer's flush interval)


@dataclass
class _Worker:
    index: int
    actor: Any
    host: str = "?"
    ip: str = "?"
    pid: int = 0
    node_id: str = ""
    envs: dict[str, int] = field(default_factory=dict)  # environment -> episodes it may run at once
    unavailable: dict[str, str] = field(default_factory=dict)
    alive: bool = True
    in_flight: Counter[str] = field(default_factory=Counter)
    pending: dict[str, asyncio.Future[EpisodeRecord]] = field(default_factory=dict)  # episode id -> its record to come
    outbox: list[EpisodeSpec] = field(default_factory=list)  # episodes not yet sent
    flush_due: bool = False
    collector: asyncio.Task[None] | None = None

    @property
    def where(self) -> str:
        return f"worker {self.index} on {self.host} ({self.ip}, pid {self.pid})"


class ModelStats:
    """A model's client counters summed over the workers (what ``Progress`` reads as ``.stats``)."""

    def __init__(self, name: str, per_worker: dict[int, dict[str, Any]]) -> None:
        self.name = name
        self._per_worker = per_worker

    @property
    def stats(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for stats in self._per_worker.values():
            total.update(stats.get("models", {}).get(self.name, {}))
        return total


def _models(config: RunConfig) -> list[ModelConfig]:
    models = list(config.models)
    if config.judge is not None and config.judge.name not in {m.name for m in models}:
        models.append(config.judge)
    return models


def _key_variables(config: RunConfig) -> dict[str, str]:
    """The API keys the workers need, from the driver's environment (a node may also set them itself)."""
    names = {m.api_key_env for m in _models(config) if m.api_key_env}
    return {name: os.environ[name] for name in sorted(names) if os.environ.get(name)}


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


class Cluster:
    """The Ray side of one run (``open`` it, use it, ``close`` it)."""

    def __init__(self, settings: RaySettings, config: RunConfig, console: Console) -> None:
        self.settings = settings
        self.config = config
        self.console = console
        self.workers: list[_Worker] = []
        self.stats: dict[int, dict[str, Any]] = {}  # worker -> its last counters (final ones after close)
        self.broker_stats: dict[str, Any] = {}  # the limit broker's counters when the run closed
        self.start_cpu: dict[int | str, float] = {}  # CPU seconds each worker (and "broker") had spent when the run began
        self.stopping = False
        self.rerun = 0  # episodes sent again after their worker was lost
        self.unrun: Counter[str] = Counter()  # environment -> episodes no worker was left to run
        self.failures: list[str] = []
        self._broker: Any = None
        self._connected = False
        self._waiters: list[asyncio.Future[None]] = []

    # -- start and stop -----------------------------------------------------------------------------
    async def open(self) -> None:
        import ray

        self._connect(ray)
        n = self._worker_count(ray)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # the broker lives on the head node: a cluster cannot lose its head anyway (Ray's control store is there)
        head = NodeAffinitySchedulingStrategy(node_id=_head_node(ray), soft=False)
        self._broker = ray.remote(LimitBroker).options(num_cpus=0, max_concurrency=100_000, scheduling_strategy=head).remote(_models(self.config))
        keys = _key_variables(self.config)
        options: dict[str, Any] = {
            "num_cpus": self.settings.worker_cpus, "max_concurrency": max(1000, self.config.max_concurrency + 64),
            "scheduling_strategy": "SPREAD", "max_restarts": 0,
        }  # fmt: skip
        if keys:
            options["runtime_env"] = {"env_vars": keys}
        actor_class = ray.remote(EpisodeWorker).options(**options)
        self.workers = [_Worker(i, actor_class.remote(i, self.config, self._broker)) for i in range(n)]
        await asyncio.gather(*(self._start(w) for w in self.workers))
        with contextlib.suppress(Exception):
            self.start_cpu["broker"] = (await _await(self._broker.stats.remote()))["cpu_seconds"]
        started = [w for w in self.workers if w.alive]
        if not started:
            raise ConfigError(f"no Ray worker started ({'; '.join(self.failures)}); check that every node has agentbench-async[ray] "
                              "installed in the same Python version as the driver")  # fmt: skip
        self._report_start(started)

    def _connect(self, ray: Any) -> None:
        if ray.is_initialized():  # the calling program connected already (a bench, a notebook)
            return
        quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
        hung = (f"error: Ray did not start within {INIT_S:g} s at {self.settings.address!r}: its processes may be dying as they "
                "come up (out of memory: `mmap failed`; see /tmp/ray/session_latest/logs, raylet.err); nothing was run, and "
                "running the same command again resumes")  # fmt: skip
        try:
            with watchdog(INIT_S, hung):  # ray.init can hang for good, beyond any timeout of ours (watchdog.py)
                self._init(ray, quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot connect to Ray at {self.settings.address!r} ({_short(exc)}); start a cluster with "
                              "`ray start --head` and give its address (or `auto` on a node of it)") from None  # fmt: skip
        self._connected = True

    def _init(self, ray: Any, quiet: dict[str, Any]) -> None:
        if self.settings.address == LOCAL:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            cpus = (self.settings.workers or os.cpu_count() or 1) * self.settings.worker_cpus
            # address="local": always a new instance of our own, never a cluster `ray start` left running here
            ray.init(address="local", num_cpus=max(1, math.ceil(cpus)), include_dashboard=False, **quiet)
        else:
            _reachable(self.settings.address)
            ray.init(address=self.settings.address, **quiet)

    def _worker_count(self, ray: Any) -> int:
        cpus = float(ray.cluster_resources().get("CPU", 0))
        fits = int(cpus // self.settings.worker_cpus)
        n = self.settings.workers or ((os.cpu_count() or 1) if self.settings.address == LOCAL else fits)
        if n > fits:
            raise ConfigError(f"ray: {n} workers of {self.settings.worker_cpus:g} CPU need {n * self.settings.worker_cpus:g} CPUs; "
                              f"the cluster has {cpus:g} (add nodes, or lower workers/worker_cpus)")  # fmt: skip
        return max(1, n)

    async def _start(self, worker: _Worker) -> None:
        try:
            try:  # the process first: one Ray cannot start (it dies as it comes up) is never waited for start_timeout_s
                await asyncio.wait_for(_await(worker.actor.__ray_ready__.remote()), min(PROCESS_START_S, self.settings.start_timeout_s))
            except asyncio.TimeoutError:
                raise TimeoutError(f"its process did not come up within {min(PROCESS_START_S, self.settings.start_timeout_s):g} s: "
                                   "Ray could not start it; its logs are under /tmp/ray/session_latest/logs") from None  # fmt: skip
            info = await asyncio.wait_for(_await(worker.actor.start.remote()), self.settings.start_timeout_s)
        except Exception as exc:  # noqa: BLE001 - one worker failing to start must not stop the others
            worker.alive = False
            self.failures.append(f"worker {worker.index} did not start ({_short(exc)})")
            self._kill(worker.actor)
            return
        worker.host, worker.ip, worker.pid, worker.node_id = info["host"], info["ip"], info["pid"], info["node_id"]
        worker.envs, worker.unavailable = info["envs"], info["unavailable"]
        self.start_cpu[worker.index] = float(info.get("cpu_seconds", 0.0))

    def _report_start(self, started: list[_Worker]) -> None:
        nodes = {w.node_id for w in started}
        self.console.print(f"ray: {_count(len(started), 'worker')} on {_count(len(nodes), 'node')}", highlight=False)
        seen: set[tuple[str, str]] = set()
        for w in started:
            for env, reason in w.unavailable.items():
                if (env, w.node_id) not in seen:
                    seen.add((env, w.node_id))
                    self.console.print(f"[yellow]ray: {env} cannot run on {w.host} ({w.ip}): {reason}; that node gets none of its episodes[/yellow]",
                                       highlight=False, soft_wrap=True)  # fmt: skip
        for line in self.failures:
            self.console.print(f"[yellow]ray: {line}[/yellow]", highlight=False, soft_wrap=True)

    async def close(self) -> None:
        import ray

        alive = [w for w in self.workers if w.alive]
        await asyncio.gather(*(self._close(w) for w in alive))
        for w in alive:
            self._kill(w.actor)
        if self._broker is not None:
            with contextlib.suppress(Exception):  # its counters and CPU time, for benches (ray_scaling.py)
                self.broker_stats = await asyncio.wait_for(_await(self._broker.stats.remote()), _CLOSE_WAIT_S)
            self._kill(self._broker)
        if self._connected:
            ray.shutdown()

    async def _close(self, worker: _Worker) -> None:
        try:
            self.stats[worker.index] = await asyncio.wait_for(_await(worker.actor.close.remote()), _CLOSE_WAIT_S)
        except Exception:  # noqa: BLE001 - it is killed next anyway
            pass

    @staticmethod
    def _kill(actor: Any) -> None:
        import ray

        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    # -- what the scheduler asks ----------------------------------------------------------------------
    def capacity(self, env: str) -> int:
        return sum(w.envs.get(env, 0) for w in self.workers if w.alive)

    def unavailable_reason(self, env: str) -> str | None:
        """Why no worker can run ``env`` (None: some can)."""
        if self.capacity(env) > 0:
            return None
        reasons = sorted({f"{w.host}: {w.unavailable.get(env, 'worker lost')}" for w in self.workers if w.host != "?"})
        return f"{env} cannot run on any node of the cluster ({'; '.join(reasons) or 'no worker started'})"

    def model_stats(self, name: str) -> ModelStats:
        return ModelStats(name, self.stats)

    async def run(self, env: str, spec: EpisodeSpec) -> EpisodeRecord | None:
        """Play ``spec`` on a worker able to run ``env``; again elsewhere if that worker dies. ``None``: no
        worker was left to play it (or it was cancelled and did not come back): resume runs it."""
        while True:
            worker = await self._acquire(env)
            if worker is None:
                self.unrun[env] += 1
                return None
            try:
                return await self._play_on(worker, spec)
            except Exception as exc:  # noqa: BLE001 - RayActorError and kin: the worker (or its node) is gone
                await self._lose(worker, exc)
                if self.stopping:
                    return None
                self.rerun += 1
            finally:
                self._release(worker, env)

    async def _play_on(self, worker: _Worker, spec: EpisodeSpec) -> EpisodeRecord | None:
        pending = self._send(worker, spec)
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            # Ctrl-C: the worker stops the episode and returns it as `cancelled`, to be stored and re-run on resume
            worker.actor.cancel.remote(spec.episode_id)
            try:
                return await asyncio.wait_for(pending, _CANCEL_WAIT_S)
            except Exception:  # noqa: BLE001 - not back in time: not stored, so resume runs it
                worker.pending.pop(spec.episode_id, None)
                return None

    def _send(self, worker: _Worker, spec: EpisodeSpec) -> asyncio.Future[EpisodeRecord]:
        """Queue ``spec`` for ``worker``: the episodes queued during one turn of the event loop go in one message,
        and one long poll per worker brings the records back as they finish."""
        loop = asyncio.get_running_loop()
        pending: asyncio.Future[EpisodeRecord] = loop.create_future()
        worker.pending[spec.episode_id] = pending
        worker.outbox.append(spec)
        if not worker.flush_due:
            worker.flush_due = True
            loop.call_soon(self._flush, worker)
        if worker.collector is None or worker.collector.done():
            worker.collector = asyncio.create_task(self._collect(worker))
        return pending

    @staticmethod
    def _flush(worker: _Worker) -> None:
        worker.flush_due = False
        if worker.outbox:
            batch, worker.outbox = worker.outbox, []
            worker.actor.submit.remote(pack(batch))

    async def _collect(self, worker: _Worker) -> None:
        try:
            while worker.pending:
                records, stats = unpack(await _await(worker.actor.collect.remote()))
                self.stats[worker.index] = stats
                for record in records:
                    pending = worker.pending.pop(record.episode_id, None)
                    if pending is not None and not pending.done():
                        pending.set_result(record)
        except Exception as exc:  # noqa: BLE001 - the worker is gone: every episode it had is played elsewhere
            for pending in worker.pending.values():
                if not pending.done():
                    pending.set_exception(exc)
            worker.pending.clear()

    async def _acquire(self, env: str) -> _Worker | None:
        loop = asyncio.get_running_loop()
        while True:
            able = [w for w in self.workers if w.alive and env in w.envs]
            if not able:
                return None
            free = [w for w in able if w.in_flight[env] < w.envs[env]]
            if free:
                worker = min(free, key=lambda w: (w.in_flight.total(), w.index))
                worker.in_flight[env] += 1
                return worker
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            await waiter

    def _release(self, worker: _Worker, env: str) -> None:
        worker.in_flight[env] -= 1
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _lose(self, worker: _Worker, exc: BaseException) -> None:
        if not worker.alive:
            return
        worker.alive = False
        what = "its episodes in flight are not re-run now (resume runs them)" if self.stopping else "its episodes in flight are re-run on other workers"
        line = f"{worker.where} was lost ({_short(exc)[:160]}); {what}"
        self.failures.append(line)
        self.console.print(f"[yellow]ray: {line}[/yellow]", highlight=False, soft_wrap=True)
        self._kill(worker.actor)  # a worker that is only unreachable must not go on calling the model
        try:
            await asyncio.wait_for(_await(self._broker.forget.remote(worker.index)), _CLOSE_WAIT_S)
        except Exception:  # noqa: BLE001 - the broker is on the driver's node; if it is gone the run ends anyway
            pass
        self._wake()

    async def poll(self, sink: Callable[[LiveBatch], None], stop: Callable[[], None]) -> None:
        """Forever: fetch the turns of running episodes and the counters from every worker; ``stop`` the run if
        the limit broker is gone (no request could be sent under the limits any more)."""
        while True:
            await asyncio.sleep(_POLL_S)
            try:
                await asyncio.wait_for(_await(self._broker.stats.remote()), 10 * _POLL_S)
            except Exception as exc:  # noqa: BLE001 - the head node (or its broker) is gone
                line = f"the run's limit broker was lost ({_short(exc)[:160]}); stopping: re-run the command to resume"
                self.failures.append(line)
                self.console.print(f"[red]ray: {line}[/red]", highlight=False, soft_wrap=True)
                stop()
                return
            alive = [w for w in self.workers if w.alive]
            results = await asyncio.gather(*(asyncio.wait_for(_await(w.actor.drain.remote()), 10 * _POLL_S) for w in alive),
                                           return_exceptions=True)  # fmt: skip
            for worker, result in zip(alive, results):
                if isinstance(result, BaseException):
                    continue  # a lost worker is noticed through its episodes
                live, stats = unpack(result)
                self.stats[worker.index] = stats
                sink(live)

    def cpu_seconds(self) -> float:
        """CPU seconds the workers and the limit broker spent from the run's start to their close (benches)."""
        workers = sum(stats.get("cpu_seconds", 0.0) - self.start_cpu.get(index, 0.0) for index, stats in self.stats.items())
        return workers + self.broker_stats.get("cpu_seconds", 0.0) - self.start_cpu.get("broker", 0.0)

    def summary_line(self) -> str:
        started = [w for w in self.workers if w.host != "?"]
        lost = sum(1 for w in started if not w.alive and w.pid)
        nodes = len({w.node_id for w in started})
        line = f"ray: {_count(len(started), 'worker')} on {_count(nodes, 'node')}; {lost} lost, {self.rerun} episodes re-run after a loss"
        stale = sum(stats.get("stale_leases", 0) for stats in self.stats.values())
        if stale:
            line += f"; {stale} leases arrived too late to use (a busy worker) and were asked for again"
        if self.unrun:
            line += f"; not run (no worker left for {', '.join(sorted(self.unrun))}): {sum(self.unrun.values())}, resume runs them"
        return line


def _head_node(ray: Any) -> str:
    """The head node's id (the driver's own node if none is marked as head)."""
    for node in ray.nodes():
        if node.get("Alive") and "node:__internal_head__" in node.get("Resources", {}):
            return str(node["NodeID"])
    return str(ray.get_runtime_context().get_node_id())


def _reachable(address: str) -> None:
    """Fail at once on a HOST:PORT nobody listens on (Ray itself retries for minutes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {host}:{port} ({exc.strerror or exc})") from None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _await(ref: Any) -> asyncio.Future[Any]:
    """A Ray ObjectRef as an asyncio future."""
    return asyncio.wrap_future(ref.future())
