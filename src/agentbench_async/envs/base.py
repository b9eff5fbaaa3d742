"""The environment protocol every environment implements.

An ``Environment`` is created once per run. It lists its tasks lazily, declares how many episodes may
run at once (``capacity``), may hold run-wide resources (``start``/``close``: a database server, a
loaded graph) and opens one ``Session`` per episode. The engine drives a session like this::

    messages = await session.begin()          # the first prompt (instructions, one-shot examples, task)
    loop:
        reply = model(messages, session.tools())
        step = await session.step(reply)       # parse the reply, act, observe, maybe grade
        if step.outcome: stop                  # the episode ended (status, score, success)
        messages += [reply] + step.observation
    at the environment's turn cap: outcome = await session.on_turn_limit()
    finally: await session.close()

Rules for implementers:
- never block the event loop: subprocesses through ``asyncio.create_subprocess_exec``, blocking drivers
  and engines through ``asyncio.to_thread`` (or the environment's own executor);
- model text is hostile input: parse it, never ``eval`` it, act only inside this episode's own state;
- a malformed reply is a ``Step`` with an outcome status (``invalid_format``/``invalid_action``) or an
  observation telling the model what was wrong — never an exception;
- an infrastructure failure raises ``EnvError`` (the engine records ``env_error`` and the run goes on).
"""

from __future__ import annotations

import abc
import functools
import hashlib
import importlib
import random
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..deviation import Deviation
from ..errors import ConfigError, TaskFileError
from ..types import Message, ModelReply, ToolCall
from .options import RESERVED_OPTIONS, TASKS_FILE, Option, check_options

ActionMode = Literal["text", "tools"]
Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")
ENV_FILE = "env_file"  # option set by the run: a file environment's absolute path (files.py)
CODE = "code"  # option set by the run: what the environment's code is (code.py), part of what a run resumes against
_RUN_SET = (*RESERVED_OPTIONS, ENV_FILE, CODE)  # options every environment accepts, whatever its option_specs


@dataclass(frozen=True)
class Task:
    """One task of a split. ``data`` is the environment's own record (JSON-serialisable)."""

    env: str
    split: str
    task_id: str
    data: dict[str, Any]
    source: str = "builtin"  # "builtin" or "official"


@dataclass(frozen=True)
class Outcome:
    """How an episode ended. ``status`` is one of ``statuses.ALL_STATUSES``.

    ``score`` is the environment's metric for this episode (1.0/0.0 for success-rate environments,
    F1 for kg, game progress for ltp, ...). ``details`` is stored as JSON in ``episodes.details``.
    ``paper_status``: what AgentBench v0.2 would have recorded for the same episode (one of
    ``statuses.PAPER_STATUSES``), set by the environment; ``None`` lets the engine derive it from ``status``.
    """

    status: str
    score: float = 0.0
    success: bool = False
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    paper_status: str | None = None


@dataclass
class Step:
    """What the environment made of one model reply.

    ``action``: the parsed action as text (stored in ``turns.action``), ``None`` if nothing parsed.
    ``valid``: whether the reply was a well-formed, executable action.
    ``error``: why it was not (stored in ``turns.error``; used by the failure drill-down).
    ``observation``: messages to append after the model's reply (user or tool messages).
    ``outcome``: set when the episode ends with this step.
    ``history_reply``: if set, the text the model is shown as its own reply in later turns (the transcript
    keeps what it really sent); AgentBench's kg, for instance, keeps only the part before "Observation:".
    ``restart``: the observation starts a fresh conversation: the next model call gets only those messages,
    not the earlier ones nor this reply (the transcript keeps everything); mind2web asks each round anew.
    ``injected``: positions in ``observation`` of set-up text rather than the answer to this reply (rules
    re-inserted, examples); stored with ``turns.injected`` so reports never take it for the model's words.
    Assistant-role messages in ``observation`` (few-shot examples, acknowledgements) are marked without it.
    """

    observation: list[Message] = field(default_factory=list)
    action: str | None = None
    valid: bool = True
    error: str | None = None
    outcome: Outcome | None = None
    info: dict[str, Any] = field(default_factory=dict)
    history_reply: str | None = None
    restart: bool = False
    injected: frozenset[int] = frozenset()


JudgeFn = Callable[[list[Message]], Awaitable[ModelReply]]


@dataclass
class EpisodeContext:
    """What the engine gives a session besides its task."""

    episode_id: str
    action_mode: ActionMode = "text"
    seed: int = 0
    # Calls the configured judge model through the engine's client, limits, retries and model_calls
    # table (rows marked caller='judge'). None when the run has no judge configured.
    judge: JudgeFn | None = None
    options: dict[str, Any] = field(default_factory=dict)  # environment options from the run config
    # Seconds the model has spent answering this episode so far: the HTTP time of every attempt of the agent's
    # calls, failed attempts included; not the waits for a concurrency slot, the rate limiter or a retry's
    # back-off, and not calls carried by a provider batch (their time is the batch's turnaround). None: unknown.
    # card_game's upstream time limits (300 s a decision, 600 s a game) are measured with it.
    model_seconds: Callable[[], float] | None = None
    # Of model_seconds, the seconds the server said those calls waited in its own queue (CallRow.server_queue_ms; 0 when
    # the server does not say): a time limit counted in model time can name its share that was waiting.
    queued_seconds: Callable[[], float] | None = None


# The mock model's policies: what ``Environment.policies()`` gives. A policy answers one chat request for one task;
# the mock server (mock/server.py) and ``testing.play`` ask it through ``run_policy``.


@dataclass
class PolicyRequest:
    task: Task
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    episode_id: str

    @property
    def turn(self) -> int:
        """0-based index of the assistant turn being asked for."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @functools.cached_property
    def rng(self) -> random.Random:
        """Random choices seeded by episode and turn: the same on every machine and re-run."""
        return random.Random(f"{self.episode_id}#{self.turn}")


@dataclass
class PolicyReply:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    # Ask the server to answer like a provider whose context window is full (HTTP 400,
    # code context_length_exceeded) instead of replying.
    fail: Literal["context_length"] | None = None


Policy = Callable[[PolicyRequest], PolicyReply]


def stable_choice(key: str, n: int) -> int:
    """A deterministic pick in ``range(n)`` from a string (same on every machine and run)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def run_policy(policy: Policy, task: Task, messages: list[Message], tools: list[dict[str, Any]] | None, episode_id: str) -> PolicyReply:
    """Ask a policy for the next reply (the mock server and ``testing.play`` both go through here)."""
    return policy(PolicyRequest(task=task, messages=messages, tools=tools, episode_id=episode_id))


class Session(abc.ABC):
    """One episode's live state."""

    @abc.abstractmethod
    async def begin(self) -> list[Message]:
        """Prepare the episode's state and return the first messages shown to the model."""

    @abc.abstractmethod
    async def step(self, reply: ModelReply) -> Step:
        """Handle one model reply."""

    def tools(self) -> list[dict[str, Any]] | None:
        """OpenAI-style tool definitions for tools mode; ``None`` in text mode."""
        return None

    def settled(self) -> Outcome | None:
        """An outcome ``begin()`` decided without asking the model (a task with nothing to ask), else ``None``."""
        return None

    async def on_turn_limit(self) -> Outcome:
        """Called when the environment's turn cap is reached without an outcome."""
        return Outcome(status="task_limit_exceeded", score=0.0, success=False, error="turn limit reached")

    async def on_context_limit(self, error: str) -> Outcome:
        """Called when the model's context overflowed before the episode ended (``error`` says how).

        The default scores 0, as most AgentBench tasks record no result then; an environment whose upstream
        keeps what was achieved so far (ltp's game progress, db's table state) overrides this.
        """
        return Outcome(status="context_limit_exceeded", score=0.0, success=False, error=error)

    async def close(self) -> None:
        """Release the episode's resources (sandbox, database, ...). Must not raise."""


class Environment(abc.ABC):
    """An AgentBench environment. Subclasses set the class attributes and register themselves."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    max_turns: ClassVar[int]
    # A mode's own cap where its sessions stop before ``max_turns`` (webshop's text mode: v0.2's 10 rounds, tools
    # mode FC's 20): what `agentbench envs` shows per action mode (``turn_cap``)
    turn_caps: ClassVar[Mapping[str, int]] = {}
    metric: ClassVar[str] = "success rate"  # what ``score`` means, for reports
    supports_tools: ClassVar[bool] = False
    requires: ClassVar[str] = "nothing"  # what must be installed, shown by `agentbench envs`
    needs_judge: ClassVar[bool] = False  # a judge model takes part in every episode (ltp's host): a run without one is refused
    hidden: ClassVar[bool] = False  # engine self-test environments are not in `envs`/demo
    # Options that decide results, with AgentBench v0.2's value (``None``: upstream has no such option, any
    # value differs). A run using another value is flagged as not comparable to the paper (settings.py).
    # Options not listed are operational (server addresses, timeouts, capacity) and never are.
    result_options: ClassVar[dict[str, Any]] = {}
    # True when the built-in suites are AgentBench's own tasks (card_game generates its samples in code, as
    # upstream does): a run on them is not flagged as "not the paper's tasks".
    builtin_is_official: ClassVar[bool] = False
    # The options this environment accepts (``--env-option ENV.KEY=VALUE``, ``env_options:``): name -> Option (kind,
    # bounds or choices, meaning). The run checks them when its config is read (``check_options``). None: not
    # declared, nothing is checked before the environment reads them itself.
    option_specs: ClassVar[Mapping[str, Option] | None] = None
    # AgentBench's record format this environment reads from a task file of the user's own (``--tasks ENV=PATH``,
    # ``read_task_file``), as a user is told it ("a JSON list of os_interaction records"); "": it reads none.
    task_file_format: ClassVar[str] = ""
    # Raised by one for a change of the code that changes results (a parser, a grader, a prompt): the run stores it
    # (option ``code``, ``code.py``) so a file written with the earlier behaviour is not resumed as the same results.
    # 1 is stored as nothing (files written before it existed resume as they did).
    behaviour_version: ClassVar[int] = 1
    # The report's behaviour heuristics for this environment's failed episodes (analytics/45_behaviour.sql), where the
    # engine's defaults misread it: ``looping`` (False: never call repeated actions a loop, e.g. a game whose right
    # move is the same every turn) and ``stalled`` (the replies without anything new from the environment that make
    # an episode stalled, 3 by default; 0: off, e.g. a game that answers "Higher." again and again as news).
    behaviour_checks: ClassVar[Mapping[str, int | bool]] = {}

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options read with ``option_specs``: unknown names and bad values are a ConfigError in one line. The task
        file of the user's own (``tasks_file``, ``tasks_sha256``: ``own_tasks.py``) is every environment's option."""
        if cls.option_specs is None:
            return dict(options)
        reserved = {k: v for k, v in options.items() if k in _RUN_SET}
        return {**check_options(cls.name, cls.option_specs, {k: v for k, v in options.items() if k not in reserved}), **reserved}

    @classmethod
    def read_task_file(cls, path: Path, split: str, options: Mapping[str, Any]) -> Iterator[Task]:
        """The tasks of a file of the user's own in ``task_file_format`` (source ``custom``), played in either split
        instead of the built-in or official ones; a bad record is a ``TaskFileError`` naming file, record and field."""
        raise ConfigError(f"{cls.name} reads no task file of your own")

    def own_tasks(self, split: str) -> Iterator[Task] | None:
        """The tasks of the run's task file of the user's own (``--tasks``), or None when it has none."""
        path = self.options.get(TASKS_FILE)
        return None if not path else self.read_task_file(Path(str(path)), split, self.options)

    @classmethod
    def settled_options(cls, data_dir: Path | None, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options a run stores for this environment: the given ones, plus the value this machine chooses for an
        option not given whose choice changes results (webshop's title-noun tagger: spaCy when installed, else its
        heuristic), so the stored settings say what ran, ``deviations`` can judge it and the fingerprint tells such
        runs apart. Called once when the run's config is read. Default: the options as given."""
        return dict(options)

    @classmethod
    def plays_official_tasks(cls, data_dir: object, options: dict[str, Any]) -> bool:
        """Whether a run with this ``--data-dir`` and these options plays AgentBench's official tasks (used to
        flag runs on the built-in suites as "not the paper's tasks"). Environments whose official tasks come from
        another download (``--mind2web-data``, ``--webshop-data``) override it. A task file of the user's own
        (``--tasks``) is never the official tasks."""
        if options.get(TASKS_FILE):
            return False
        return cls.builtin_is_official or bool(data_dir)

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        """What this environment needs and does not find for a run with this ``--data-dir`` (its task files there, a
        download or server its official tasks need besides), in one line; ``None`` when it has everything. A run of
        every environment (``--env all``) plays an environment that misses something without ``--data-dir`` (its
        built-in suite, or its own flag's data) and says why; a run naming the environment fails on it when it starts.
        Default: nothing is checked here."""
        return None

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        """This environment's own differences from AgentBench v0.2 in a run with this ``--data-dir``, these options
        and this action mode (the project's prompt wording, another search backend, ...): each a named entry in
        ``settings.deviations``, shown beside the scores. Decided from the stored settings alone (no files read),
        so old result files get the same answer. Generic ones (data, split, ``result_options``) are found there."""
        return []

    @classmethod
    def turn_cap(cls, action_mode: str) -> int:
        """The most replies an episode in ``action_mode`` gets (``turn_caps``, else ``max_turns``)."""
        return cls.turn_caps.get(action_mode, cls.max_turns)

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        self.data_dir = data_dir
        self.options = dict(options or {})

    def option(self, key: str, default: Any = None) -> Any:
        """Option ``key`` (``default`` when not given) read with its declaration in ``option_specs``."""
        value = self.options.get(key, default)
        specs = self.option_specs
        if value is None or specs is None or key not in specs:
            return value
        return specs[key].read(self.name, key, value)

    @property
    def capacity(self) -> int:
        """How many episodes of this environment may run at once in this process."""
        return 10_000

    @abc.abstractmethod
    def tasks(self, split: str) -> Iterator[Task]:
        """Yield the split's tasks lazily: official ones when ``data_dir`` is set, else built-in ones.

        Raise ``TaskFileError`` (one line, naming file and record) for unreadable task files.
        """

    def count(self, split: str) -> int:
        return sum(1 for _ in self.tasks(split))

    def get_task(self, split: str, task_id: str) -> Task:
        for task in self.tasks(split):
            if task.task_id == task_id:
                return task
        raise TaskFileError(f"{self.name}: no task {task_id!r} in split {split!r}")

    @classmethod
    def policies(cls) -> Mapping[str, Policy]:
        """The mock model's policies for this environment: name -> ``Policy``, at least ``oracle`` (solves every task
        through the real protocol) and ``weak`` (fails some, below the oracle); ``judge`` when the environment asks a
        judge model. ``serve-mock``, ``agentbench demo`` and ``testing.play`` play them (``mock-oracle``, ``mock-weak``).

        Default: ``POLICIES`` of the module ``policies`` in the package that defines the class (``mypkg/policies.py``
        beside ``mypkg/__init__.py``), or none when there is no such module."""
        package = cls.__module__
        if not hasattr(sys.modules.get(package), "__path__"):  # defined in a module, not in a package's __init__
            package = package.rpartition(".")[0]
        try:
            module = importlib.import_module(f"{package}.policies")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.policies":
                raise  # the policies module exists and imports something missing: its own error
            return {}
        return dict(getattr(module, "POLICIES", {}))

    async def start(self) -> None:
        """Acquire run-wide resources. Raise ``EnvUnavailableError`` with what to install if impossible."""

    async def close(self) -> None:
        """Release run-wide resources."""

    def opening(self, task: Task, ctx: EpisodeContext) -> tuple[list[Message], list[dict[str, Any]] | None] | None:
        """The messages and tools an episode of ``task`` begins with, when this environment can tell them without the
        episode's resources (a sandbox, a database table): what its session's ``begin()`` and ``tools()`` give, made by
        the same code. ``agentbench plan`` reads it instead of opening a session. None (the default): plan opens a
        session (after ``start()``) and asks ``begin()``."""
        return None

    @abc.abstractmethod
    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        """Create the episode's session (cheap; heavy work goes in ``Session.begin``)."""
