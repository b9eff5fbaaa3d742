"""``Evaluation`` with its episodes played by Ray workers: the scheduler, the writer, progress and the
summary stay in the driver, exactly as in a local run; only where an episode runs changes."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from ..envs.base import Environment
from ..episode import AgentFn, EpisodeSpec
from ..errors import ConfigError, EnvUnavailableError
from ..models import ModelConfig
from ..places import ModelPlaces
from ..scheduler import Evaluation, RunSummary
from ..store import EpisodeWriter
from .cluster import Cluster, ModelStats
from .worker import LiveBatch


class RayEvaluation(Evaluation):
    """One invocation of ``agentbench run --ray``/``--workers`` (``config.ray`` says where)."""

    def __init__(self, config: Any, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        assert config.ray is not None
        self.cluster = Cluster(config.ray, config, self.console)
        self._finished: set[str] = set()  # episodes stored by this invocation (their late live turns are dropped)

    async def run(self) -> RunSummary:
        for model in [*self.config.models, self.config.judge]:
            if model is not None and getattr(model, "batch", None):
                raise ConfigError(f"model {model.name!r}: batch requests go through one provider job sent from one process; "
                                  "run this model without --ray/--workers")  # fmt: skip
        try:
            await self.cluster.open()
            summary = await super().run()
        finally:
            await self.cluster.close()  # whatever was started, even if opening failed half-way
        self.console.print(self.cluster.summary_line(), highlight=False)
        if self.cluster.unrun:
            summary.fatal_errors.append(self.cluster.summary_line())
        return summary

    def stop(self) -> None:
        self.cluster.stopping = True
        super().stop()

    # -- hooks of the local scheduler --------------------------------------------------------------
    async def _start_env(self, env: Environment) -> None:
        reason = self.cluster.unavailable_reason(env.name)  # the workers started the environments where they run
        if reason is not None:
            raise EnvUnavailableError(reason)

    async def _close_env(self, env: Environment) -> None:
        return None  # the workers close what they started

    def _capacity(self, env: Environment) -> int:
        return self.cluster.capacity(env.name)

    def _client(self, model: ModelConfig, sessions: list[aiohttp.ClientSession], shared: dict[str, Any] | None = None) -> Any:
        if shared and model.name in shared:
            return shared[model.name]
        return self.cluster.model_stats(model.name)  # the clients live in the workers; progress reads their counters

    async def _batched(self, client: Any, done: set[str]) -> Any:
        return client  # never a batch model here (refused in run())

    async def _run_streams(self, envs: dict[str, Environment], done: set[str], counts: dict[tuple[str, str], tuple[int, int]],
                           writer: EpisodeWriter, summary: RunSummary) -> None:  # fmt: skip
        poller = asyncio.create_task(self.cluster.poll(lambda live: self._live(writer, live), self.stop))
        try:
            await super()._run_streams(envs, done, counts, writer, summary)
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller

    def _live(self, writer: EpisodeWriter, live: LiveBatch) -> None:
        for episode_id, model, env, rows in live:
            if episode_id not in self._finished:
                self.progress.counting(model, env, episode_id, writer.live_sink(episode_id, model, env))(rows)

    async def _one(self, env: Environment, spec: EpisodeSpec, agent: AgentFn, judge: AgentFn | None, writer: EpisodeWriter,
                   summary: RunSummary, global_sem: ModelPlaces, env_sem: ModelPlaces) -> None:  # fmt: skip
        self.progress.started(spec.model, env.name)
        try:
            record = await self._attempts(lambda: self.cluster.run(env.name, spec), writer, summary)  # infrastructure failures retried
            if record is None:  # no worker left for it, or cancelled without coming back: resume runs it
                self.progress.rows[(spec.model, env.name)].in_flight -= 1
            else:
                self._finished.add(record.episode_id)
                for call in record.calls:  # the workers' calls counted as their episode comes back (the caps: spend.py)
                    if call.input_tokens is not None:
                        self.spend.record(call)
                self._finish(record, writer, summary)
        finally:
            global_sem.release()
            env_sem.release()
