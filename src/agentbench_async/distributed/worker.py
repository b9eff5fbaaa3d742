"""One worker process of a distributed run: the run's environments started where it runs, the models'
clients (with limits leased from the broker), and whole episodes played on the driver's request.

The body of a Ray actor (``cluster.py`` wraps it); its methods run on the actor's event loop.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
import socket
from typing import Any

import aiohttp

from ..config import RunConfig
from ..envs import make_env
from ..envs.base import Environment
from ..episode import EpisodeCancelled, EpisodeSpec, run_episode
from ..errors import EnvUnavailableError
from ..models import ModelClient, open_client
from ..records import EpisodeRecord, TurnRow
from ..scheduler import agent_fn, raise_open_file_limit
from .leases import LeaseChannel

_COLLECT_WAIT_S = 10.0  # a long poll for finished episodes returns empty after this long
# a long poll that finds a few finished episodes waits this long for more: each answer is a Ray call, whose fixed cost
# (~15 % of a worker's CPU at 1,000 episodes/s when every episode came back alone) is then shared by many
_COLLECT_GATHER_S = 0.02
_COLLECT_BATCH = 64
LiveBatch = list[tuple[str, str, str, list[TurnRow]]]  # (episode_id, model, env, turn rows) of running episodes


def pack(value: Any) -> bytes:
    """What driver and workers send each other (episode specs, records, live turns): the standard library's C pickler
    into bytes, which Ray passes as they are; Ray's own cloudpickle of the same objects took ~12 % of a worker's CPU."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(payload: bytes) -> Any:
    return pickle.loads(payload)


class EpisodeWorker:
    """Plays episodes of the run's environments in this process (sent and returned in batches)."""

    def __init__(self, index: int, config: RunConfig, broker: Any) -> None:
        self.index = index
        self.config = config
        self._channel = LeaseChannel(broker, index)
        self._envs: dict[str, Environment] = {}
        self._unavailable: dict[str, str] = {}
        self._clients: dict[str, ModelClient] = {}
        self._judge: ModelClient | None = None
        self._sessions: list[aiohttp.ClientSession] = []
        self._running: dict[str, asyncio.Task[None]] = {}
        self._finished: list[EpisodeRecord] = []
        self._wake = asyncio.Event()
        self._live: LiveBatch = []

    async def start(self) -> dict[str, Any]:
        """Start the environments here (one that cannot start is reported, and gets no episodes here)."""
        import ray

        cfg = self.config
        raise_open_file_limit()
        for name in cfg.envs:
            env = make_env(name, data_dir=cfg.env_data_dir(name), options=cfg.env_options.get(name))
            try:
                await env.start()
            except EnvUnavailableError as exc:
                self._unavailable[name] = str(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - reported to the driver; the other environments go on
                self._unavailable[name] = f"failed to start ({type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'})"
                try:
                    await env.close()
                except Exception:  # noqa: BLE001 - already reported
                    pass
                continue
            self._envs[name] = env
        for model in cfg.models:
            self._clients[model.name] = open_client(model, self._sessions, limits=self._channel.limits(model))
        if cfg.judge is not None:
            self._judge = self._clients.get(cfg.judge.name) or open_client(cfg.judge, self._sessions, limits=self._channel.limits(cfg.judge))
        # as the local scheduler does: thousands of live objects make the GC's walks most of the cost
        gc.collect()
        gc.freeze()
        gc.set_threshold(1_000_000, *gc.get_threshold()[1:])
        return {
            "index": self.index,
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "envs": {name: env.capacity for name, env in self._envs.items()},
            "unavailable": dict(self._unavailable),
            "cpu_seconds": sum(os.times()[:2]),  # spent starting (benches count the run's CPU from here)
        }

    async def submit(self, payload: bytes) -> None:
        """Start playing these episodes (``pack``ed specs); their records come back through ``collect``."""
        specs: list[EpisodeSpec] = unpack(payload)
        for spec in specs:
            self._running[spec.episode_id] = asyncio.create_task(self._play(spec))

    async def _play(self, spec: EpisodeSpec) -> None:
        env = self._envs[spec.task.env]
        agent = agent_fn(self._clients[spec.model], spec)
        judge = agent_fn(self._judge, spec) if self._judge is not None else None
        try:
            record = await run_episode(env, spec, agent, judge, live=self._live_sink(spec.episode_id, spec.model, env.name))
        except EpisodeCancelled as cancelled:
            record = cancelled.record
        finally:
            self._running.pop(spec.episode_id, None)
        self._finished.append(record)
        self._wake.set()

    async def collect(self) -> bytes:
        """Wait for finished episodes (a long poll: empty after a while without any): ``pack``ed (records, counters)."""
        if not self._finished:
            try:
                await asyncio.wait_for(self._wake.wait(), _COLLECT_WAIT_S)
            except asyncio.TimeoutError:
                pass
        if self._finished and len(self._finished) < _COLLECT_BATCH:
            await asyncio.sleep(_COLLECT_GATHER_S)  # the episodes ending just after come in the same answer
        self._wake.clear()
        finished, self._finished = self._finished, []
        return pack((finished, self.stats()))

    def _live_sink(self, episode_id: str, model: str, env: str) -> Any:
        def sink(rows: list[TurnRow]) -> None:
            if rows:
                self._live.append((episode_id, model, env, rows))

        return sink

    async def cancel(self, episode_id: str) -> bool:
        """Stop a running episode (Ctrl-C on the driver): it ends as ``cancelled`` and ``collect`` returns it."""
        task = self._running.get(episode_id)
        if task is None:
            return False
        task.cancel()
        return True

    async def drain(self) -> bytes:
        """Turns of running episodes since the last call (for live readers of the file) and the counters, ``pack``ed.
        Those of episodes that have ended since are left out: their records carry every turn (the driver would drop
        them too), so most turns are no longer pickled, sent and unpickled twice."""
        live, self._live = self._live, []
        running = self._running
        return pack(([item for item in live if item[0] in running], self.stats()))

    def stats(self) -> dict[str, Any]:
        """Each client's counters (calls, retries, errors, tokens) by model name, and the grants that came too late."""
        clients = dict(self._clients)
        if self._judge is not None:
            clients.setdefault(self._judge.config.name, self._judge)
        times = os.times()
        return {"models": {name: dict(client.stats) for name, client in clients.items()}, "stale_leases": self._channel.stale,
                "cpu_seconds": times.user + times.system}  # fmt: skip

    async def close(self) -> dict[str, Any]:
        """Close the environments and sessions; the final counters."""
        self._channel.close()
        for env in self._envs.values():
            try:
                await env.close()
            except Exception:  # noqa: BLE001 - closing must go on for the others
                pass
        for session in self._sessions:
            await session.close()
        return self.stats()
