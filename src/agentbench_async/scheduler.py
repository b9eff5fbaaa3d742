"""Runs an evaluation: streams work items lazily, admits them under the global, per-environment and
per-model limits, interleaves models and environments fairly, and shuts down cleanly on SIGINT.

Work items (model x environment x task x repeat) are generated on demand by one feeder per
(model, environment) stream; feeders wait for places shared fairly between models (places.py: a freed place
goes to the waiting model holding the fewest), so streams take turns and a slow model never holds the others
back. Finished episodes
go to the single DuckDB writer. SIGINT stops admitting, cancels the episodes in flight (stored as
``cancelled``, re-run on resume), flushes the writer and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from rich.console import Console

from . import __version__
from . import statuses as st
from .config import RunConfig
from .envs import make_env
from .envs.base import Environment, Task
from .episode import AgentFn, EpisodeCancelled, EpisodeSpec, episode_id, run_episode
from .errors import AgentBenchError, ConfigError, EnvUnavailableError, SpendCapReached, StoreError, TaskFileError
from .models import ModelClient, ModelConfig, open_client
from .models.base import PERMANENT_WORDS, STOPPED_WORDS, adaptations
from .models.batches import BatchClient, batch_settings
from .models.task_headers import CALLER_HEADER, EPISODE_HEADER, TASK_HEADER
from .pace import PaceTally
from .places import FairPlaces, ModelPlaces
from .progress import PROGRESS_EVERY_S, Progress
from .records import CallRow, EpisodeRecord
from .store import EpisodeWriter, Store
from .store.batch_ledger import BatchLedger
from .spend import Caps, CapReached, Prices, SpendMeter, add_stored
from .store.db import new_run_id
from .types import Message, ModelReply


@dataclass
class RunSummary:
    run_id: str
    out: str
    episodes: int = 0  # finished in this invocation
    skipped: int = 0  # already done (resume)
    statuses: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    fatal_errors: list[str] = field(default_factory=list)
    unavailable_envs: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    retries: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time (all its threads) from the first episode to the last stored
    rows_written: int = 0
    write_seconds: float = 0.0
    model_statuses: dict[str, Counter[str]] = field(default_factory=dict)  # model -> status counts (this invocation)
    model_errors: dict[str, Counter[str]] = field(default_factory=dict)  # model -> model_error messages
    # model -> (calls whose Retry-After exceeded retry_after_max_s, the longest asked, the cap)
    retry_after_over_cap: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    adapted: dict[str, list[str]] = field(default_factory=dict)  # model -> request fields adapted to its server
    planned: dict[str, dict[str, int]] = field(default_factory=dict)  # model -> env -> episodes the run was to hold
    pace: PaceTally = field(default_factory=PaceTally)  # what waited on the engine's limits (pace.py)
    cap_reached: str | None = None  # the run stopped at its spend cap (spend.py): the one line saying which and how much
    spend: SpendMeter | None = None  # tokens and USD of the run (this file's earlier invocations included)
    retried: Counter[str] = field(default_factory=Counter)  # "status: error" of attempts run again within the run -> count

    def retry_lines(self) -> list[str]:
        """One line on the infrastructure failures run again within this invocation (kept as earlier attempts)."""
        if not self.retried:
            return []
        (reason, n), total = self.retried.most_common(1)[0], sum(self.retried.values())
        return [f"{total} attempt{'s' if total != 1 else ''} ended by an infrastructure failure run again (kept in episode_attempts); "
                f"most common ({n}x): {reason}"]  # fmt: skip

    def model_error_lines(self) -> list[str]:
        """One line per model with model_error episodes, naming its most common error."""
        lines = []
        for model, errors in sorted(self.model_errors.items()):
            (error, n), total = errors.most_common(1)[0], sum(errors.values())
            lines.append(f"{model}: {total} model_error episodes; most common ({n}x): {error}")
        return lines

    def retry_after_lines(self) -> list[str]:
        """One line per model whose server asked for longer pauses than its cap."""
        return [f"{model}: the server asked {n}x to wait longer than retry_after_max_s (up to {asked:g} s); "
                f"each of those pauses was {cap:g} s" for model, (n, asked, cap) in sorted(self.retry_after_over_cap.items())]  # fmt: skip

    def adaptation_lines(self) -> list[str]:
        """One line per model whose requests were adapted to what its server refused."""
        return [f"{model}: the server refused a request field the config left to the engine; sent {', '.join(what)} from then on "
                "(recorded in runs.config, models[].adapted)" for model, what in sorted(self.adapted.items())]  # fmt: skip

    def infra_failed_models(self) -> list[str]:
        """Models whose every episode of this invocation failed for infrastructure reasons (model or env)."""
        return sorted(m for m, counts in self.model_statuses.items()
                      if counts and all(s in ("model_error", "env_error") for s in counts))  # fmt: skip


def _start_failure(name: str, exc: BaseException) -> str:
    """One line for an environment whose ``start()`` raised something other than ``EnvUnavailableError``."""
    text = " ".join(str(exc).split()) or "no message"
    return f"{name}: the environment failed to start ({type(exc).__name__}: {text}); its episodes were not run"


def _start_error(start: asyncio.Task[None]) -> BaseException | None:
    """Why an ended start failed (None: it succeeded)."""
    return asyncio.CancelledError("the start was cancelled") if start.cancelled() else start.exception()


_MAX_RETRY_WAIT_S = 300.0  # the longest wait before an infrastructure failure is run again


def raise_open_file_limit(wanted: int = 65536) -> int:
    """Thousands of sockets need file descriptors: raise the soft limit towards the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard) if hard != resource.RLIM_INFINITY else max(soft, wanted)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        except (ValueError, OSError):
            return soft
    return soft


def agent_fn(client: ModelClient, spec: EpisodeSpec) -> AgentFn:
    """The episode's way to call ``client`` (with the mock model's task headers)."""
    t = spec.task
    task, episode = f"{t.env}/{t.split}/{t.source}/{t.task_id}", spec.episode_id
    headers: dict[str, dict[str, str]] = {}  # caller -> the headers of its calls, made once an episode

    # A plain function handing back the client's coroutine: no coroutine of its own to resume at every wait of a call
    def call(messages: list[Message], tools: list[dict[str, Any]] | None, turn: int, calls: list[CallRow], caller: str) -> Awaitable[ModelReply]:
        task_header = headers.get(caller)
        if task_header is None:
            task_header = headers[caller] = {TASK_HEADER: task, EPISODE_HEADER: episode, CALLER_HEADER: caller}
        return client.complete(messages, tools, calls=calls, turn=turn, caller=caller, task_header=task_header)

    return call


class Evaluation:
    """One invocation of ``agentbench run``/``demo`` over a run config."""

    def __init__(self, config: RunConfig, *, console: Console | None = None, progress: bool | None = None,
                 command: str = "run", skip_unavailable_envs: bool = False, progress_every: float | None = PROGRESS_EVERY_S) -> None:  # fmt: skip
        self.config = config
        self.console = console or Console(stderr=True)
        self.progress = Progress(self.console, enabled=progress, every=progress_every)
        self.command = command
        self.skip_unavailable_envs = skip_unavailable_envs
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._disabled_models: set[str] = set()
        self._starting: dict[str, asyncio.Task[None]] = {}  # environment -> its start (run())
        self._closed: set[str] = set()  # environments closed (or being closed)
        self._registered = False  # the run's row is in the file (after every start settled)
        self._ledger: BatchLedger | None = None
        self._retry_after_caps = {m.name: m.retry_after_max_s for m in [*config.models, config.judge] if m is not None}
        self._held: dict[str, list[EpisodeRecord]] = {}  # model -> permanent refusals not written yet (_submit)
        self._model_tasks: dict[str, set[asyncio.Task[None]]] = {}  # model -> its episodes in flight (a model's cap)
        self.spend = _spend_meter(config, self._cap_reached)
        self._cap_line: str | None = None  # the run's cap, once reached

    def _cap_reached(self, reached: CapReached) -> None:
        """A spend cap was reached (spend.py): no new call; the episodes in flight (the run's, or the model's) end
        ``cancelled`` and are played on resume."""
        if reached.model is None:
            self._cap_line = self._cap_line or reached.line
            self.stop(why="spend cap")
            return
        self._disabled_models.add(reached.model)
        self.console.print(f"{reached.line}; no more episodes for {reached.model} (a resume with a higher cap plays them)",
                           style="yellow", markup=False, highlight=False, soft_wrap=True)  # one line, for grep
        for task in list(self._model_tasks.get(reached.model, ())):
            task.cancel()

    def stop(self, why: str = "Ctrl-C") -> None:
        """Stop admitting episodes and cancel those in flight (SIGINT, a spend cap)."""
        if not self._stopping.is_set():
            self._stopping.set()
            self.progress.stop(why)
            for task in list(self._tasks):
                task.cancel()

    async def run(self) -> RunSummary:
        cfg = self.config
        raise_open_file_limit()
        envs: dict[str, Environment] = {}
        cfg.check_keys()  # an unset key variable: refused before the result file exists
        made = {name: make_env(name, data_dir=cfg.env_data_dir(name), options=cfg.env_options.get(name)) for name in cfg.envs}
        if cfg.task_ids is not None:
            _check_task_ids(cfg, made)  # a task id no environment has: refused before the result file exists
        store = Store(cfg.out)
        fingerprint = store.resumed_fingerprint(cfg.public_dict(), cfg.fingerprint())  # another --env list resumes
        writer: EpisodeWriter | None = None
        try:
            if self.spend.active:  # what earlier invocations spent counts: the same cap again stops at once
                add_stored(self.spend, store.con, fingerprint)
                over = self.spend.over()
                if over is not None and over.model is None:
                    raise SpendCapReached(f"{over.line}; nothing run: resume with a higher cap to go on")
                if over is not None:
                    self._cap_reached(over)
            done = store.done_episode_ids(fingerprint)
            counts: dict[tuple[str, str], tuple[int, int]] = {}  # (model, env) -> (episodes, already done)
            for name, env in made.items():
                # counting reads the task files: a bad one fails before any server starts
                counts.update({(model.name, name): self._count(env, model.name, done) for model in cfg.models})
                envs[name] = env
            store.check_run(cfg.public_dict(), fingerprint, new_run=cfg.new_run)  # another config's file: refused before any start
            # Every environment starts now, at once; each one's episodes begin as soon as it has started (_env_episodes). The
            # run is registered and the writer started once every start has settled (_settle_starts): a start that fails on
            # the user's option or file stops the run with nothing stored (before any call when the start finds it before
            # its first wait: the files an environment reads when it starts).
            self._starting = {name: asyncio.create_task(self._start_env(env), name=f"start {name}") for name, env in envs.items()}
            await asyncio.sleep(0)  # each start runs to its first wait (a server or worker spawned) while the rest is set up
            summary = RunSummary(run_id=new_run_id(), out=str(cfg.out), spend=self.spend)
            writer = EpisodeWriter(store, summary.run_id, fingerprint, replace=store.rerun_episode_ids(fingerprint),
                                   progress=self.progress.snapshot,
                                   on_failure=lambda _: self.stop())  # a write failed (disk full, file removed): stop  # fmt: skip
            models = [m for m in [*cfg.models, cfg.judge] if m is not None]
            self._ledger = BatchLedger(store, summary.run_id, fingerprint) if any(m.batch for m in models) else None
            try:
                await self._run_streams(envs, done, counts, writer, summary)
            finally:
                if self._ledger is not None:
                    self._ledger.close()
                await writer.close()
                summary.rows_written, summary.write_seconds = writer.rows_written, writer.write_seconds
                if writer.live_error:
                    self.console.print(f"[yellow]warning: {writer.live_error}[/yellow]", highlight=False)
                if self._registered and writer.failure is None:
                    store.finish_run(summary.run_id, interrupted=summary.interrupted, adapted=summary.adapted, planned=summary.planned)
        finally:
            await asyncio.gather(*(self._close_when_started(env) for env in envs.values()))  # those still open
            try:
                store.close()
            except StoreError:
                if writer is None or writer.failure is None:
                    raise  # else the writer's failure is the one line the user gets
        if writer.failure is not None:
            raise writer.failure  # the run stopped: one line naming the file and the cause; a re-run resumes
        return summary

    def _ends_the_run(self, start: asyncio.Task[None]) -> bool:
        """Whether ``start`` has failed in a way that stops the run: the user's option or file, or (when the run named
        its environments) an environment that cannot run here."""
        exc = _start_error(start) if start.done() else None
        return isinstance(exc, (ConfigError, TaskFileError)) or (isinstance(exc, EnvUnavailableError) and not self.skip_unavailable_envs)

    async def _settle_starts(self, envs: dict[str, Environment], writer: EpisodeWriter, summary: RunSummary) -> None:
        """Once every start has ended: say which environments did not start and where each one's tasks come from (in the
        config's order), register the run and start the writer (episodes that ended before are written at its first
        flush). A start that ends the run stops it at once: nothing stored, its one line raised (exit 2)."""
        cfg = self.config
        pending = set(self._starting.values())
        while pending:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            fatal = next((_start_error(t) for t in self._starting.values() if self._ends_the_run(t)), None)
            if fatal is not None:  # the episodes begun are cancelled, not stored; the starts still running are closed after
                self.stop()
                raise fatal
        errors = {name: _start_error(task) for name, task in self._starting.items()}
        for name, exc in errors.items():
            if isinstance(exc, EnvUnavailableError):
                summary.unavailable_envs[name] = str(exc)
                self.console.print(f"[yellow]skipping {name}: {exc}[/yellow]")
            elif exc is not None:  # one environment's failure does not end the run; the exit code says one failed
                summary.fatal_errors.append(_start_failure(name, exc))
                self.console.print(f"[red]error: {summary.fatal_errors[-1]}[/red]", highlight=False, soft_wrap=True)
        if cfg.data_dir is not None:  # where each one's tasks come from (stored per episode: source)
            for name, line in cfg.task_sources().items():
                if name in envs and errors.get(name) is None:
                    self.console.print(f"{name}: {line}", markup=False, highlight=False, soft_wrap=True)
        try:
            writer.store.begin_run(cfg.public_dict(), writer.fingerprint, command=self.command, version=__version__,
                                   new_run=cfg.new_run, run_id=summary.run_id)  # fmt: skip
        except StoreError:
            self.stop()
            raise
        self._registered = True
        writer.start()

    async def _close_when_started(self, env: Environment) -> None:
        """Close ``env`` once its start has ended (once only). A close that fails after a start that succeeded is one line
        and the others go on; after a failed start, what it had set up is released quietly (its start said why)."""
        start = self._starting.get(env.name)
        if start is None or env.name in self._closed:
            return  # never started (the run failed before the starts), or closed already
        await asyncio.wait([start])
        if env.name in self._closed:
            return
        self._closed.add(env.name)
        if _start_error(start) is not None:
            with contextlib.suppress(Exception):
                await self._close_env(env)
            return
        try:
            await self._close_env(env)
        except Exception as exc:  # noqa: BLE001 - report, keep closing the others
            self.console.print(f"[yellow]closing {env.name} failed: {exc}[/yellow]")

    async def _run_streams(self, envs: dict[str, Environment], done: set[str], counts: dict[tuple[str, str], tuple[int, int]],
                           writer: EpisodeWriter, summary: RunSummary) -> None:  # fmt: skip
        cfg = self.config
        loop = asyncio.get_running_loop()
        start = loop.time()
        sessions: list[aiohttp.ClientSession] = []
        clients: dict[str, ModelClient] = {}
        settled = asyncio.create_task(self._settle_starts(envs, writer, summary))
        try:
            if self._ledger is not None:  # batch requests are recorded against the registered run: none before every start
                await asyncio.shield(settled)
            for model in cfg.models:
                clients[model.name] = self._client(model, sessions)
            judge = self._client(cfg.judge, sessions, shared=clients) if cfg.judge else None
            for c in [*clients.values(), judge]:
                if c is not None:
                    c.on_usage = self.spend.record  # every answered call counted (the caps, the progress line)
            self.progress.spend = self.spend
            batched = {id(c): await self._batched(c, done) for c in [*clients.values(), judge] if c is not None}
            clients = {name: batched[id(c)] for name, c in clients.items()}
            judge = batched[id(judge)] if judge is not None else None
            self.progress.clients = list(clients.values()) + ([judge] if judge and judge not in clients.values() else [])
            global_sem = FairPlaces(cfg.max_concurrency)  # shared fairly between models (places.py)
            # Python's GC walking thousands of live objects is most of the cost at high concurrency:
            # freeze what exists now and collect the young generation far less often. The young generation
            # is counted as allocations minus deallocations of any age, so while the episodes in flight are
            # renewed the young list holds all of them: each collection walks the whole in-flight state
            # (0.4-1 s at 5,000-10,000 in flight), and at the default threshold or 50,000 they came ~10 times
            # a second at 1,000 in flight. At 1,000,000 a run at a steady concurrency hardly collects (GC
            # time at 10,000 in flight 3.8 s -> 0.4 s, 1,000: 0.6-1.3 s -> ~0.1 s per 40,000 calls); the
            # engine makes little cyclic garbage (the collections found none), and at most a million
            # objects of it wait for the next collection (peak RSS at 10,000 in flight 684 -> 611 MB).
            gc.collect()
            gc.freeze()
            old_threshold = gc.get_threshold()
            gc.set_threshold(1_000_000, *old_threshold[1:])
            start_cpu = time.process_time()  # after that one full collection (0.05-0.3 s, more objects with Ray loaded)
            try:
                self._install_sigint(loop)
                with self.progress:
                    runs = [self._env_episodes(env, clients, judge, done, counts, global_sem, writer, summary) for env in envs.values()]
                    results = await asyncio.gather(settled, *runs, return_exceptions=True)
                    while self._tasks:
                        await asyncio.gather(*list(self._tasks), return_exceptions=True)
                    for result in results:
                        if isinstance(result, BaseException):
                            raise result  # the start that stopped the run (settled first), else a bug
            finally:
                try:
                    # the writer's last flush (up to a second of finished episodes) still with the GC tuned:
                    # under the default threshold it ran ~200 collections, up to a full one (~0.9 s at 1,000
                    # in flight); run() closing it again later is a no-op
                    self._write_held(writer)
                    await writer.close()
                finally:
                    gc.set_threshold(*old_threshold)
                    gc.unfreeze()
                    self._remove_sigint(loop)
        finally:
            if not settled.done():  # failed before the episodes began: stop; the starts still settle
                self.stop()
                await asyncio.wait([settled])
            if not settled.cancelled():
                settled.exception()  # retrieved: the error on its way out is the one the user gets
            for c in {id(c): c for c in self.progress.clients}.values():
                if isinstance(c, BatchClient):
                    await c.aclose()  # batches in progress stay recorded in the file: a resumed run collects them
            for s in sessions:
                await s.close()
        summary.interrupted = self._stopping.is_set()
        summary.cap_reached = self._cap_line
        summary.seconds, summary.cpu_seconds = loop.time() - start, time.process_time() - start_cpu
        summary.calls = sum(c.stats["calls"] for c in self.progress.clients)
        summary.retries = sum(c.stats["retries"] for c in self.progress.clients)
        named = [*clients.items(), *([(cfg.judge.name, judge)] if cfg.judge is not None and judge is not None else [])]
        summary.adapted = {name: what for name, c in named if (what := adaptations(c.stats))}
        for name, c in named:  # the connections each server refused while loaded, and what the limit was cut to (pace.py)
            limits = getattr(c, "limits", None)
            if limits is not None:
                summary.pace.connected(name, limits.fewest_connections, limits.connection_refusals)

    async def _env_episodes(self, env: Environment, clients: dict[str, ModelClient], judge: ModelClient | None, done: set[str],
                            counts: dict[tuple[str, str], tuple[int, int]], global_sem: FairPlaces, writer: EpisodeWriter,
                            summary: RunSummary) -> None:  # fmt: skip
        """One environment's episodes, every model's, from the moment it has started; then its close (the others run on)."""
        start = self._starting[env.name]
        await asyncio.wait([start])
        if _start_error(start) is not None or any(self._ends_the_run(t) for t in self._starting.values()):
            return  # _settle_starts says why
        env_sem = FairPlaces(min(self._capacity(env), self.config.max_concurrency))
        tasks: set[asyncio.Task[None]] = set()
        feeders = []
        for model in self.config.models:
            total, skipped = counts[(model.name, env.name)]
            summary.skipped += skipped
            summary.planned.setdefault(model.name, {})[env.name] = total
            self.progress.add_stream(model.name, env.name, total - skipped)
            feeders.append(self._feed(model, env, clients[model.name], judge, done, global_sem, env_sem, writer, summary, tasks))
        try:
            await asyncio.gather(*feeders)
            while tasks:
                await asyncio.gather(*list(tasks), return_exceptions=True)
        finally:
            await self._close_when_started(env)  # nothing of this environment runs any more: release it while the others run

    async def _batched(self, client: ModelClient, done: set[str]) -> ModelClient:
        """A model with ``batch:`` sends its requests through its provider's batch API."""
        settings = batch_settings(client.config.batch, f"model {client.config.name!r}")
        if settings is None:
            return client
        batch_client = BatchClient(client, settings, self._ledger)
        await batch_client.start(done)
        return batch_client  # type: ignore[return-value]  # same complete() and stats as a ModelClient

    # Where environments run: here (a distributed run overrides these, see distributed/evaluation.py).
    async def _start_env(self, env: Environment) -> None:
        await env.start()

    async def _close_env(self, env: Environment) -> None:
        await env.close()

    def _capacity(self, env: Environment) -> int:
        return env.capacity

    def _client(self, model: ModelConfig, sessions: list[aiohttp.ClientSession], shared: dict[str, ModelClient] | None = None) -> ModelClient:
        if shared and model.name in shared:
            return shared[model.name]  # the judge is one of the evaluated models: same limits
        return open_client(model, sessions)  # own session (proxy and CA settings), limits and route

    def _work(self, env: Environment) -> Iterator[tuple[Task, int]]:
        """``env``'s (task, repeat) pairs to run, in order."""
        cfg = self.config
        tasks = env.tasks(cfg.split)
        if cfg.task_ids is not None:
            wanted = set(cfg.task_ids)
            tasks = (t for t in tasks if t.task_id in wanted)
        for index, task in enumerate(tasks):
            if cfg.limit is not None and index >= cfg.limit:
                return
            for repeat in range(cfg.repeats):
                yield task, repeat

    def _specs(self, env: Environment, model: str) -> Iterator[EpisodeSpec]:
        cfg = self.config
        prices = self.spend.prices.get(model)
        for task, repeat in self._work(env):
            yield EpisodeSpec(
                model=model, task=task, repeat=repeat, action_mode=cfg.action_mode, history=cfg.history,
                seed=cfg.seed, options=cfg.env_options.get(env.name, {}), limits=cfg.episode_limits, prices=prices,
            )  # fmt: skip

    def _count(self, env: Environment, model: str, done: set[str]) -> tuple[int, int]:
        """(episodes, of which already done); the ids are made only when some are done (a resume)."""
        total = skipped = 0
        for task, repeat in self._work(env):
            total += 1
            if done:
                skipped += episode_id(model, task, repeat) in done
        return total, skipped

    async def _feed(self, model: ModelConfig, env: Environment, client: ModelClient, judge: ModelClient | None, done: set[str],
                    global_sem: FairPlaces, env_sem: FairPlaces, writer: EpisodeWriter, summary: RunSummary,
                    tasks: set[asyncio.Task[None]]) -> None:  # fmt: skip
        """Admit ``model``'s episodes of ``env`` one by one under the limits; ``tasks`` gets each one's task."""
        global_sem, env_sem = global_sem.for_model(model.name), env_sem.for_model(model.name)
        for spec in self._specs(env, model.name):
            if spec.episode_id in done:
                continue
            waiting_since, env_full = time.monotonic(), env_sem.locked()
            await env_sem.acquire()
            try:
                full = global_sem.locked()
                await global_sem.acquire()
                if env_full or full:  # an engine's limit held the episode: the summary says so (pace.py)
                    capacity = self._capacity(env) if env_full and not full and self._capacity(env) < self.config.max_concurrency else None
                    summary.pace.admitted(model.name, env.name, time.monotonic() - waiting_since, capacity)
            except BaseException:
                env_sem.release()
                raise
            if self._stopping.is_set() or model.name in self._disabled_models:
                global_sem.release()
                env_sem.release()
                return
            judge_fn = agent_fn(judge, spec) if judge is not None else None
            task = asyncio.create_task(self._one(env, spec, agent_fn(client, spec), judge_fn, writer, summary, global_sem, env_sem))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            if self.spend.model_caps:  # a model's own cap cancels its episodes in flight
                mine = self._model_tasks.setdefault(model.name, set())
                mine.add(task)
                task.add_done_callback(mine.discard)

    async def _one(self, env: Environment, spec: EpisodeSpec, agent: AgentFn, judge: AgentFn | None, writer: EpisodeWriter,
                   summary: RunSummary, global_sem: ModelPlaces, env_sem: ModelPlaces) -> None:  # fmt: skip
        self.progress.started(spec.model, env.name)
        try:
            record = await self._attempts(lambda: self._play(env, spec, agent, judge, writer), writer, summary)
            assert record is not None  # (a local attempt always ends with a record)
            self._finish(record, writer, summary)
        finally:
            global_sem.release()
            env_sem.release()

    async def _attempts(self, play: Callable[[], Awaitable[EpisodeRecord | None]], writer: EpisodeWriter,
                        summary: RunSummary) -> EpisodeRecord | None:  # fmt: skip
        """The episode's last attempt: an infrastructure failure is run again (holding its places) after a wait, as
        AgentBench v0.2's assigner re-ran failed samples; each failed attempt is stored, and kept when the next one replaces
        it (store/writer.py). None: ``play`` had no record (a distributed episode whose worker was lost)."""
        record, attempt = await play(), 1
        while record is not None and (wait := self._retry_wait(record, attempt)) is not None:
            try:
                await asyncio.sleep(wait)
            except asyncio.CancelledError:
                break  # the run is stopping: the failed attempt is stored as it is (a resume runs it again)
            if self._retry_wait(record, attempt) is None:
                break  # meanwhile the model was stopped or the run is stopping: stored as it is
            writer.submit(record)
            summary.retried[f"{record.status}: {' '.join((record.error or 'no message').split())[:160]}"] += 1
            attempt += 1
            record = await play()
        return record

    async def _play(self, env: Environment, spec: EpisodeSpec, agent: AgentFn, judge: AgentFn | None, writer: EpisodeWriter) -> EpisodeRecord:
        """One attempt of an episode (cancelled: what it had when the run stopped)."""
        try:
            live = self.progress.counting(spec.model, env.name, spec.episode_id, writer.live_sink(spec.episode_id, spec.model, env.name))
            return await run_episode(env, spec, agent, judge, live=live)
        except EpisodeCancelled as cancelled:
            return cancelled.record

    def _retry_wait(self, record: EpisodeRecord, attempt: int) -> float | None:
        """Seconds to wait before running ``record``'s episode again (its ``attempt`` ended it), or None: no retry. Only an
        infrastructure failure that may pass is retried (env_error, model_error; not a permanent refusal, nor once the model
        is stopped or the run stopping), ``infra_retries`` times at most, the wait doubling from ``infra_retry_backoff_s``."""
        cfg = self.config
        if (attempt > cfg.infra_retries or record.status not in (st.ENV_ERROR, st.MODEL_ERROR) or self._stopping.is_set()
                or record.details.get("permanent") or record.details.get("fatal") or record.model in self._disabled_models):  # fmt: skip
            return None
        return min(cfg.infra_retry_backoff_s * 2 ** (attempt - 1), _MAX_RETRY_WAIT_S)

    def _submit(self, record: EpisodeRecord, writer: EpisodeWriter, summary: RunSummary) -> None:
        """Write ``record``. A permanent refusal is held while it may turn out to be what the server says to every request
        (the client stops the model after ``max_same_failures`` in a row, a fatal error): then the held episodes are
        written as ordinary model errors, which a resume re-runs; after any other outcome they are written as they are."""
        model, details = record.model, record.details
        if record.status == "model_error" and details.get("permanent"):
            if model in self._disabled_models:  # refused while the model was being stopped
                _not_permanent(record, None)
            else:
                self._held.setdefault(model, []).append(record)
                return
        elif record.status != "cancelled" and model in self._held:
            release = details.get("fatal")
            for held in self._held.pop(model):
                if release:
                    _not_permanent(held, summary.model_errors.get(model))
                writer.submit(held)
        writer.submit(record)

    def _write_held(self, writer: EpisodeWriter) -> None:
        """At the end: the permanent refusals still held are written as they are."""
        for records in self._held.values():
            for record in records:
                writer.submit(record)
        self._held.clear()

    def _finish(self, record: EpisodeRecord, writer: EpisodeWriter, summary: RunSummary) -> None:
        self._submit(record, writer, summary)
        summary.episodes += 1
        summary.statuses[record.status] = summary.statuses.get(record.status, 0) + 1
        statuses = summary.model_statuses.get(record.model)
        if statuses is None:  # (setdefault would make a Counter for every episode)
            statuses = summary.model_statuses[record.model] = Counter()
        statuses[record.status] += 1
        if record.status == "model_error":
            summary.model_errors.setdefault(record.model, Counter())[(record.error or "no message")[:240]] += 1
        summary.pace.add_calls(record.calls)
        summary.pace.add_episode(record.env, record.finished_at - record.started_at, record.calls)
        for call in record.calls:
            if call.retry_after_s is not None and call.model in self._retry_after_caps:
                cap = self._retry_after_caps[call.model]
                if call.retry_after_s > cap:
                    n, asked, _ = summary.retry_after_over_cap.get(call.model, (0, 0.0, cap))
                    summary.retry_after_over_cap[call.model] = (n + 1, max(asked, call.retry_after_s), cap)
        self.progress.finished(record.model, record.env, record.status, record.episode_id)
        if record.details.get("fatal") and record.model not in self._disabled_models:
            self._disabled_models.add(record.model)
            summary.fatal_errors.append(record.error or "fatal model error")
            self.console.print(f"error: {record.error}; no more episodes for {record.model}", style="red", markup=False, highlight=False,
                               soft_wrap=True)  # one line, for grep

    def _install_sigint(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread (tests): the caller may call stop() itself

    def _remove_sigint(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def _on_sigint(self) -> None:
        self.console.print("[yellow]interrupted: finishing up (in-flight episodes are stored as cancelled and re-run on resume)[/yellow]")
        self.stop()


def _spend_meter(cfg: RunConfig, on_cap: Callable[[CapReached], None]) -> SpendMeter:
    """The run's spend at its models' prices, against the run's caps and each model's."""
    models = [m for m in [*cfg.models, cfg.judge] if m is not None]
    return SpendMeter({m.name: Prices.of(m) for m in models}, Caps(cfg.max_cost, cfg.max_total_tokens),
                      {m.name: Caps(m.max_cost, m.max_total_tokens) for m in models}, on_cap)  # fmt: skip


def _check_task_ids(cfg: RunConfig, envs: dict[str, Environment]) -> None:
    """Every id of ``task_ids`` names a task of some environment of the run, or the run is refused in one line."""
    found = {t.task_id for env in envs.values() for t in env.tasks(cfg.split)}
    missing = [t for t in cfg.task_ids or () if t not in found]
    if missing:
        raise ConfigError(f"task id {missing[0]!r}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                          + f" is not a task of the {cfg.split} split of {', '.join(envs)}; agentbench envs --tasks ENV "
                          f"--split {cfg.split} lists them")  # fmt: skip


def _not_permanent(record: EpisodeRecord, counted: Counter[str] | None) -> None:
    """A permanent refusal that turned out to be the server's answer to every request: a model error a resume re-runs
    (``counted``: the summary's count of the model's errors, which counted it as it was)."""
    record.details = {k: v for k, v in record.details.items() if k != "permanent"}
    if record.error:
        was, record.error = record.error, record.error.replace(PERMANENT_WORDS, STOPPED_WORDS)
        if counted is not None and counted[was[:240]] > 0:
            counted[was[:240]] -= 1
            counted += Counter()  # (drops the zero)
            counted[record.error[:240]] += 1


async def run_evaluation(config: RunConfig, **kwargs: Any) -> RunSummary:
    """Run (or resume) an evaluation; see ``Evaluation``."""
    return await Evaluation(config, **kwargs).run()


__all__ = ["AgentBenchError", "Evaluation", "RunSummary", "run_evaluation"]
