"""``os``: AgentBench's Operating System environment in a bubblewrap sandbox.

Each episode gets a fresh copy-on-write root over a root filesystem built for the purpose (see
:mod:`.rootfs` and :mod:`.sandbox`), a persistent interactive bash on a PTY (:mod:`.shell`), the task's
init scripts and ``start`` command, up to 8 turns of ``bash``/``answer``/``finish`` (:mod:`.protocol`),
and grading in the same machine (:mod:`.grading`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...environment import (
    Deviation,
    EnvError,
    EnvUnavailableError,
    Environment,
    EpisodeContext,
    Message,
    ModelReply,
    Option,
    Outcome,
    Session,
    Step,
    Task,
    missing_file,
    statuses as st,
)
from ..reasons import REASON_KEY, UNSOLVABLE_KEY
from ..upstream_prompts import FC, V02, tool_replies_deviation, upstream_path, wording_deviations
from .control import close_idle_wardens
from .grading import grade, needs_example, run_example, run_script
from .protocol import (UPSTREAM_TASK, Action, ParseError, Prompts, ToolNotice, first_messages, load_prompts, observation_text, parse_text,
                       parse_tools)
from .records import builtin_tasks, official_tasks, own_file_tasks
from .rootfs import ensure_shifted
from .rootfs import resolve as resolve_root
from .limits import sandboxes_within_host, warn_nofile_shortfall
from .sandbox import IdMap, Limits, Sandbox, check_available, host_idmap
from .shell import AgentShell
from .spares import SPARE_MACHINES, Machine, Spares

TIMEOUT_NOTE = "\n[the command ran longer than {s:g} s and was interrupted]"
FLOOD_NOTE = "\n[the command printed too much output and was interrupted]"
OOM_NOTE = "\n[a process was killed: the sandbox ran out of memory ({mb} MiB)]"
# A start command with tabs, typed into the interactive login shell as AgentBench types it (its bytes and a newline into
# `bash --login` on a terminal, Container.execute): readline takes each tab for completion, so a tab-indented program
# (official os dev 0-2: a `python3 -c` writer started in the background) loses its indentation and exits at once. The
# same happens in AgentBench (reproduced in tests/envs/test_os_start_tabs.py); this note goes in the episode's details.
START_TABS_NOTE = ("the start command has tabs and is typed into the interactive login shell as AgentBench types it: readline "
                   "takes each tab for completion, so its indentation is lost (a tab-indented python3 -c program exits at "
                   "once, IndentationError); AgentBench's own shell does the same, so this is kept")
# what every report says of such a task (official os dev 0-2 and 4: the program the question is about never runs)
UNSOLVABLE_START = ("the task's background program never runs: its start command's tab indentation is eaten by the login "
                    "shell, as in AgentBench, so the answer cannot be observed, only guessed")
IGNORED = "Ignored: only one action per turn."  # a message's later tool calls, which FC leaves unanswered (os.tool_replies)
# live sandboxes at once: an episode's sandbox mostly waits for its model (1-10 s a call) while its own work takes
# ~0.1 s of CPU, so 64 keep two cores busy at a 1 s model (16 left them idle behind the place: issue 33)
DEFAULT_CONCURRENCY = 64
# of those, starting, running init scripts or being graded at once (the environment's own CPU work, see busy()): a
# phase takes 0.1-0.5 s of wall time (waits included), so 8 a core keep the cores busy (2 a core, 4 here, held an
# 8-model run to 0.66 of its 2 cores: 300 s) while a run's start no longer begins all of its 64 episodes at once
DEFAULT_SCRIPT_CONCURRENCY = max(8, 8 * (os.cpu_count() or 1))
RESTART_NOTE = "\n[the shell ended; a new login shell runs the next command (variables and the working directory start afresh)]"


class OSEnvironment(Environment):
    name = "os"
    description = "Operating System: solve Linux tasks in an interactive bash (a user-namespace bubblewrap sandbox per episode)"
    max_turns = 8
    metric = "success rate"
    supports_tools = True
    task_file_format = "a JSON list of AgentBench os_interaction records (description, create, evaluation), as data/os_interaction/data/dev.json"
    requires = (
        "bubblewrap, libseccomp2 and mmdebstrap (apt-get install bubblewrap libseccomp2 mmdebstrap); root, or an "
        "ordinary user with user namespaces (and uidmap plus an /etc/subuid range for tasks with several users); "
        "the Debian mirror once, to build the sandbox root (or os.rootfs=DIR|TAR)"
    )

    option_specs: ClassVar[dict[str, Option]] = {
        "concurrency": Option("int", "episodes (sandboxes) at once", minimum=1),
        "script_concurrency": Option("int", "episodes starting, running init scripts or being graded at once", minimum=1),
        "memory_mb": Option("int", "MiB for the processes of one episode", minimum=16),
        "disk_mb": Option("int", "MiB of the episode's writable layer"),
        "shm_mb": Option("int", "MiB of /dev/shm"),
        "pids": Option("int", "processes in one episode", minimum=8),
        "cpu_seconds": Option("int", "CPU seconds per process"),
        "command_timeout": Option("number", "seconds one bash action may run", minimum=0),
        "script_timeout": Option("number", "seconds one init or check script may run", minimum=0),
        "rootfs": Option("text", "a root filesystem DIR or TAR instead of the built one"),
        "mirror": Option("url", "the Debian mirror the root is built from"),
    }

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        if action_mode == "tools":  # FC's system text and tool definitions
            return missing_file([upstream_path(data_dir, FC, UPSTREAM_TASK), upstream_path(data_dir, FC, "configs/tasks/os.yaml")])
        return missing_file([upstream_path(data_dir, V02, UPSTREAM_TASK)])  # v0.2's instruction and one-shot example

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        out = wording_deviations("os", data_dir, action_mode, upstream="upstream's instruction and one-shot example",
                                 text="the project's own instruction and one-shot example",
                                 tools="the project's own bash_action/answer_action/finish_action definitions", fc_text=True)  # fmt: skip
        if action_mode == "tools":
            out.append(tool_replies_deviation("os", "a message's later calls, which AgentBench FC does not run, get an 'Ignored' "
                                              "tool message"))  # fmt: skip
        return out

    def __init__(self, *, data_dir: Any = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=self.check_options(options or {}))
        opts = self.options
        self.rootfs: str | None = opts.get("rootfs") or None
        self.mirror: str | None = opts.get("mirror") or None
        self.root: Path | None = None  # the resolved lower layer, set by start()
        self.idmap: IdMap | None = None  # the sandboxes' id range, set by start()
        self.command_timeout = float(opts.get("command_timeout", 30))
        self.script_timeout = float(opts.get("script_timeout", 120))
        self.limits = Limits(
            memory_mb=int(opts.get("memory_mb", 512)),
            pids=int(opts.get("pids", 256)),
            disk_mb=int(opts.get("disk_mb", 512)),
            cpu_seconds=int(opts.get("cpu_seconds", 600)),
            shm_mb=int(opts.get("shm_mb", 64)),
        )
        self._checked = False
        self._prompts: dict[str, Prompts] = {}  # per action mode, read on first use
        self._start_lock: asyncio.Lock | None = None
        self._spares = Spares(self._new_machine)
        self.script_concurrency = int(opts.get("script_concurrency", DEFAULT_SCRIPT_CONCURRENCY))
        self._gate: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    @property
    def capacity(self) -> int:
        """Live sandboxes at once: ``concurrency``, fewer where together they could hold more than a share of the
        host's memory (:func:`.limits.sandboxes_within_host`; said in one line at start)."""
        return sandboxes_within_host(self.limits, int(self.options.get("concurrency", DEFAULT_CONCURRENCY)), SPARE_MACHINES)[0]

    @contextlib.asynccontextmanager
    async def busy(self) -> AsyncIterator[None]:
        """A place among the episodes doing CPU work of the environment's own at once (a sandbox start, the task's
        init, the checks): the rest of the ``capacity`` live sandboxes wait for their model, which costs nothing, so a
        burst (every episode of a run starting together) queues here instead of overrunning the cores; a script's
        timeout starts once it has its place."""
        loop = asyncio.get_running_loop()
        if self._gate is None or self._gate[0] is not loop:
            self._gate = (loop, asyncio.Semaphore(self.script_concurrency))
        async with self._gate[1]:
            yield

    @classmethod
    def read_task_file(cls, path: Path, split: str, options: Mapping[str, Any]) -> Iterator[Task]:
        return own_file_tasks(path, split)

    def tasks(self, split: str) -> Iterator[Task]:
        own = self.own_tasks(split)
        if own is not None:
            return own
        if self.data_dir is not None:
            return official_tasks(self.data_dir, split)
        return builtin_tasks(split)

    async def start(self) -> None:
        check_available()
        warn_nofile_shortfall(self.limits.nofile)  # one line when Docker's open-files limit is out of reach
        _, fewer = sandboxes_within_host(self.limits, int(self.options.get("concurrency", DEFAULT_CONCURRENCY)), SPARE_MACHINES)
        if fewer is not None:
            print(f"note: {fewer}", file=sys.stderr, flush=True)
        self.idmap = host_idmap()
        root = await resolve_root(self.rootfs, self.mirror)
        self.root = await ensure_shifted(root, self.idmap.uid_base, self.idmap.gid_base)
        probe = Sandbox(self.limits, self.root, self.idmap)
        try:
            await probe.start()
            code, out = await run_script(probe, {"language": "bash", "code": "echo ok"}, [], 20)
        except EnvError as exc:
            raise EnvUnavailableError(f"os: cannot create a bubblewrap sandbox here ({exc}); check that bubblewrap works") from None
        finally:
            await probe.close()
        if code != 0 or out.strip() != "ok":
            raise EnvUnavailableError(f"os: the sandbox does not run commands (exit {code}: {out.strip()[:200]})")
        self._checked = True

    async def close(self) -> None:
        try:
            await self._spares.close()  # episodes' machines still closing, and the spares
        finally:
            await close_idle_wardens()  # the ones started ahead for sandboxes this run will not make

    async def _new_machine(self) -> Machine:
        """A fresh sandbox with the agent's login shell started (before any init, like upstream's)."""
        assert self.root is not None  # open_session starts the environment first
        sandbox = Sandbox(self.limits, self.root, self.idmap)
        try:
            await sandbox.start()
            shell = AgentShell(sandbox)
            await shell.start()
        except BaseException:
            await sandbox.close()
            raise
        return Machine(sandbox, shell)

    def prompts(self, action_mode: str) -> Prompts:
        """The run's wording in ``action_mode``: AgentBench's from ``--data-dir`` (v0.2's text, FC's tools), else the
        project's own."""
        if action_mode not in self._prompts:
            self._prompts[action_mode] = load_prompts(self.data_dir, action_mode)
        return self._prompts[action_mode]

    def opening(self, task: Task, ctx: EpisodeContext) -> tuple[list[Message], list[dict[str, Any]] | None]:
        """``OSSession.begin()``'s messages and ``tools()`` (agentbench plan: no sandbox)."""
        prompts = self.prompts(ctx.action_mode)
        return first_messages(task.data["description"], ctx.action_mode, prompts), prompts.tools if ctx.action_mode == "tools" else None

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        self.prompts(ctx.action_mode)  # a missing or changed prompt file fails before a sandbox is taken
        if not self._checked:
            self._start_lock = self._start_lock or asyncio.Lock()
            async with self._start_lock:
                if not self._checked:
                    await self.start()
        return OSSession(self, task, ctx)


_MULTI_USER = re.compile(r"\b(useradd|adduser|userdel|usermod|groupadd|addgroup|gpasswd|chown|chgrp|runuser|su|sudo|newgrp)\b")


def _needs_several_users(data: dict[str, Any]) -> bool:
    """Whether a task's scripts or description manage users (a single-id sandbox has only root)."""
    texts = [data.get("description") or "", data.get("start") or ""]
    for key in ("init", "check"):
        texts += [s["code"] for s in data.get(key) or [] if isinstance(s, dict)]
    if isinstance(data.get("example"), dict):
        texts.append(data["example"]["code"])
    return any(_MULTI_USER.search(t) for t in texts)


class OSSession(Session):
    def __init__(self, env: OSEnvironment, task: Task, ctx: EpisodeContext) -> None:
        self._env = env
        self._task = task
        self._ctx = ctx
        self._machine: Machine | None = None  # taken in begin(): made ahead, or made then
        self._notes: dict[str, str] = {}  # what the episode's details say about how it was set up (START_TABS_NOTE)
        self._expected: tuple[int, str] | None = None  # the example's (exit code, output) before the first turn

    @property
    def _sandbox(self) -> Sandbox:
        assert self._machine is not None, "begin() first"
        return self._machine.sandbox

    @property
    def _shell(self) -> AgentShell:
        assert self._machine is not None, "begin() first"
        return self._machine.shell

    def tools(self) -> list[dict[str, Any]] | None:
        return self._env.prompts("tools").tools if self._ctx.action_mode == "tools" else None

    async def begin(self) -> list[Message]:
        data = self._task.data
        assert self._env.idmap is not None
        if not self._env.idmap.several_users and _needs_several_users(data):
            raise EnvError(
                f"os: task {self._task.task_id} needs several users (useradd, su, chown, ...), which this user's "
                "single-id sandbox cannot hold; give the user an /etc/subuid and /etc/subgid range "
                "(usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER; apt-get install uidmap) or run as root"
            )
        async with self._env.busy():
            # the shell is started before init, like upstream's: rc files written by init are not loaded
            self._machine = await self._env._spares.take()
            for i, script in enumerate(data["init"]):
                code, out = await run_script(self._sandbox, script, [], self._env.script_timeout)
                if code != 0:
                    why = "timed out" if code == -1 else f"exited {code}"
                    raise EnvError(f"os: init script {i} of {self._task.task_id} {why}: {out.strip()[-300:]}")
            if data.get("start"):
                if "\t" in data["start"]:
                    self._notes["start_note"] = START_TABS_NOTE
                    self._notes[UNSOLVABLE_KEY] = UNSOLVABLE_START
                await self._shell.run(data["start"], self._env.command_timeout)
            if needs_example(data):  # the expected answer, from the state the task set up (see grading)
                self._expected = await run_example(self._sandbox, data, self._env.script_timeout)
        return self._env.opening(self._task, self._ctx)[0]

    def _observe(self, reply: ModelReply, text: str) -> list[Message]:
        if self._ctx.action_mode == "tools" and reply.tool_calls:
            msgs: list[Message] = [{"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": text}]
            for extra in reply.tool_calls[1:]:
                msgs.append({"role": "tool", "tool_call_id": extra.id, "content": IGNORED})
            return msgs
        return [{"role": "user", "content": text}]

    async def step(self, reply: ModelReply) -> Step:
        parsed = parse_tools(reply, self._env.prompts("tools")) if self._ctx.action_mode == "tools" else parse_text(reply.content)
        if isinstance(parsed, ToolNotice):  # FC answers without acting; the round is used (the engine's cap: 8)
            ignored = [{"role": "tool", "tool_call_id": c.id, "content": IGNORED} for c in reply.tool_calls[1:]]
            notice = [parsed.message, *ignored] if parsed.message["role"] == "tool" else [*ignored, parsed.message]
            return Step(valid=False, error=parsed.error, observation=notice)
        if isinstance(parsed, ParseError):
            # upstream has one status for every unparsable reply (AGENT_INVALID_ACTION), we tell two apart
            outcome = Outcome(status=parsed.status, error=parsed.error, paper_status=st.PAPER_AGENT_INVALID_ACTION,
                              details={**self._notes, REASON_KEY: parsed.reason})
            return Step(valid=False, error=parsed.error, outcome=outcome)
        action: Action = parsed
        if action.kind == "bash":
            try:
                result = await self._shell.run(action.command, self._env.command_timeout)
            except EnvError:
                if not self._sandbox.ended_by_episode():
                    raise  # the host's failure (the warden), not the model's
                return Step(action=action.describe(), outcome=self._failed("the sandbox ended during the model's command (its pid 1 exited)"))
            output = result.output
            if result.timed_out:
                output += TIMEOUT_NOTE.format(s=self._env.command_timeout)
            elif result.truncated:
                output += FLOOD_NOTE
            if result.oom_killed:
                output += OOM_NOTE.format(mb=self._env.limits.memory_mb)
            if result.restarted:
                output += RESTART_NOTE
            return Step(action=action.describe(), observation=self._observe(reply, observation_text(output)))
        answer = action.answer if action.kind == "answer" else None
        async with self._env.busy():
            ok, details = await grade(self._machine and self._machine.sandbox, self._task.data, answer, self._env.script_timeout, expected=self._expected)
        details.update(
            self._notes,
            result=ok,
            answer=answer,
            file=self._task.data.get("file"),
            index_in_file=self._task.data.get("index_in_file"),
        )
        outcome = Outcome(
            status=st.COMPLETED, score=1.0 if ok else 0.0, success=ok, details=details, paper_status=st.PAPER_COMPLETED
        )
        return Step(action=action.describe(), outcome=outcome)

    def _failed(self, reason: str) -> Outcome:
        """The model's failure without a verdict of the checks (completed, score 0, the reason stored)."""
        details = {"result": False, "reason": reason, **self._notes, "file": self._task.data.get("file"),
                   "index_in_file": self._task.data.get("index_in_file")}  # fmt: skip
        return Outcome(status=st.COMPLETED, score=0.0, success=False, details=details, paper_status=st.PAPER_COMPLETED)

    async def on_turn_limit(self) -> Outcome:
        return Outcome(
            status=st.TASK_LIMIT_EXCEEDED,
            error="round limit",
            details={"result": False, "reason": "round limit", **self._notes},
            paper_status=st.PAPER_TASK_LIMIT_REACHED,
        )

    async def close(self) -> None:
        machine, self._machine = self._machine, None
        if machine is not None:
            self._env._spares.release(machine)  # closed in the background; the environment's close waits
