"""``db``: AgentBench's Database environment (DBBench) on a real MySQL-compatible server.

Each task is one table and a question: answer it (SELECT-like tasks, graded against the gold answer
list) or change the table (INSERT/UPDATE/DELETE, graded by a hash of the table afterwards). The agent
runs at most 15 SQL statements; see docs/envs/db.md.

Options (``Environment(options=...)``, from the run config / CLI):

- ``db_url``: ``mysql://user:pass@host:port/`` of a server to use instead of starting a private
  MariaDB (the account must be able to create databases and users and grant privileges);
- ``statement_timeout``: seconds one agent statement may run (default 10);
- ``capacity``: episodes at once (default 256 on the private server, 64 on a ``db_url`` server);
- ``mariadbd`` / ``mariadb_install_db``: paths of the server binaries (default: found on PATH);
- ``port``: also listen on 127.0.0.1:<port> (the private server is unix-socket only otherwise);
- ``official_variant``: ``v0.2`` (default) or ``fc``: with ``--data-dir``, the test split is AgentBench
  FC's copy of std (``dbbench/agentbench-fc/standard.jsonl``, 11 records fixed);
- ``datadir_cache``: copy a cached pristine datadir (made once per MariaDB build under
  ``~/.cache/agentbench-async/mariadb``) instead of running ``mariadb-install-db`` each run (default true);
- ``tmp_mb``: size in MB of the private server's tmpfs for temp files (sort files, on-disk temporary tables;
  default 512); 0 keeps them uncapped in the system temp folder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from ...environment import Deviation, EnvUnavailableError, Environment, EpisodeContext, Message, Option, Session, Task, missing_file
from ..upstream_prompts import FC, V02, upstream_path, wording_deviations
from .backend import Backend
from .protocol import FC_TASK, MAX_OPERATIONS, UPSTREAM_TASK, Prompts, first_messages, load_prompts
from .server import DEFAULT_TMP_MB, PrivateMariaDB, parse_db_url, probe_flavour
from .session import DBSession
from .tasks import load_tasks, official_path, own_file_tasks

_DEFAULT_TIMEOUT = 10.0
_DEFAULT_CAPACITY = 256  # an episode mostly waits for its model (issue 33: 64 held 8 models' db split for 2 min)
_DEFAULT_URL_CAPACITY = 64  # a server of the user's own: its connection limit is theirs (MySQL's default is 151)


class DBEnvironment(Environment):
    name: ClassVar[str] = "db"
    description: ClassVar[str] = "Database (DBBench): answer questions about a MySQL table or modify it with SQL"
    max_turns: ClassVar[int] = MAX_OPERATIONS + 1  # 15 SQL executions, then one more reply for the answer
    turn_caps: ClassVar[Mapping[str, int]] = {"text": MAX_OPERATIONS + 1, "tools": MAX_OPERATIONS}  # FC: 15 rounds
    result_options: ClassVar[dict[str, Any]] = {"official_variant": "v0.2"}  # fc: AgentBench FC's corrected std
    metric: ClassVar[str] = "success rate"
    supports_tools: ClassVar[bool] = True
    requires: ClassVar[str] = "MariaDB server (apt-get install mariadb-server), or a MySQL server via --db-url"
    task_file_format: ClassVar[str] = "JSONL of AgentBench dbbench records (description, type, table, label or answer_md5), as data/dbbench/dev.jsonl"
    option_specs: ClassVar[dict[str, Option]] = {
        "db_url": Option("url", "a MySQL/MariaDB server instead of a private one", schemes=("mysql", "mariadb")),
        "statement_timeout": Option("number", "seconds one agent statement may run", minimum=0),
        "capacity": Option("int", "episodes at once"),
        "mariadbd": Option("text", "path of the server binary"),
        "mariadb_install_db": Option("text", "path of mariadb-install-db"),
        "port": Option("int", "also listen on 127.0.0.1:PORT", maximum=65535),
        "official_variant": Option("choice", "v0.2's std, or AgentBench FC's copy", choices=("v0.2", "fc")),
        "datadir_cache": Option("bool"),
        "tmp_mb": Option("int", "MB of the server's temp-file tmpfs; 0: uncapped", minimum=0),
    }

    @classmethod
    def missing_data(cls, data_dir: Path, options: Mapping[str, Any], split: str, action_mode: str) -> str | None:
        wording = [upstream_path(data_dir, FC, "configs/tasks/dbbench.yaml"), upstream_path(data_dir, FC, FC_TASK)] \
            if action_mode == "tools" else [upstream_path(data_dir, V02, UPSTREAM_TASK)]  # fmt: skip
        return missing_file([official_path(data_dir, split, str(options.get("official_variant") or "v0.2")), *wording])

    @classmethod
    def deviations(cls, data_dir: object, options: dict[str, Any], action_mode: str) -> list[Deviation]:
        out = wording_deviations("db", data_dir, action_mode, upstream="upstream's instruction and acknowledgement",
                                 text="the project's own instruction", tools="the project's own execute_sql/commit_final_answer descriptions",
                                 fc_text=True)  # fmt: skip
        if action_mode == "tools":
            out.append(Deviation("db.tool_grading", "committed answers graded as v0.2 grades text mode's", "AgentBench FC compares "
                                 "them with DBResultProcessor.compare_results (result_processor.py, not in the pulled files)",
                                 "grading of SELECT-like answers may differ", envs=("db",)))  # fmt: skip
        return out

    def prompts(self, action_mode: str) -> Prompts:
        """The run's wording in ``action_mode`` (AgentBench's from ``--data-dir``, else the project's), read once."""
        if action_mode not in self._prompts:
            self._prompts[action_mode] = load_prompts(self.data_dir, action_mode)
        return self._prompts[action_mode]

    def __init__(self, *, data_dir: Path | None = None, options: dict[str, Any] | None = None) -> None:
        super().__init__(data_dir=data_dir, options=options)
        self._backend: Backend | None = None
        self._prompts: dict[str, Prompts] = {}
        self._server: PrivateMariaDB | None = None
        self._start_lock = asyncio.Lock()

    @property
    def capacity(self) -> int:
        default = _DEFAULT_URL_CAPACITY if self.option("db_url") else _DEFAULT_CAPACITY
        return int(self.option("capacity", default))

    @property
    def server(self) -> PrivateMariaDB | None:
        """The private MariaDB server (None with ``db_url``)."""
        return self._server

    @classmethod
    def read_task_file(cls, path: Path, split: str, options: Mapping[str, Any]) -> Iterator[Task]:
        return own_file_tasks(cls.name, path, split)

    def tasks(self, split: str) -> Iterator[Task]:
        return self.own_tasks(split) or load_tasks(self.name, split, self.data_dir, self.option("official_variant", "v0.2"))

    async def start(self) -> None:
        async with self._start_lock:
            if self._backend is not None:
                return
            timeout = float(self.option("statement_timeout", _DEFAULT_TIMEOUT))
            capacity = self.capacity
            url = self.option("db_url")
            if url:
                info = parse_db_url(str(url))
                try:
                    await asyncio.to_thread(probe_flavour, info)
                except pymysql.MySQLError as exc:
                    raise EnvUnavailableError(f"db: cannot connect to db_url {info.host}:{info.port} as {info.user!r}: {exc}") from None
            else:
                self._server = PrivateMariaDB(
                    mariadbd=self.option("mariadbd"),
                    install_db=self.option("mariadb_install_db"),
                    max_connections=capacity * 3 + 50,
                    port=self.option("port"),
                    cache=self.option("datadir_cache", True),
                    tmp_mb=self.option("tmp_mb", DEFAULT_TMP_MB),
                )
                info = await self._server.start()
            self._backend = Backend(info, statement_timeout=timeout, workers=capacity + 8, server=self._server)

    async def close(self) -> None:
        if self._backend is not None:
            backend, self._backend = self._backend, None
            await backend.close()
        if self._server is not None:
            await self._server.stop()
            self._server = None

    def opening(self, task: Task, ctx: EpisodeContext) -> tuple[list[Message], list[dict[str, Any]] | None]:
        """``DBSession.begin()``'s messages and ``tools()`` (agentbench plan: no database)."""
        prompts = self.prompts(ctx.action_mode)
        return first_messages(task.data, ctx.action_mode, prompts), prompts.tools if ctx.action_mode == "tools" else None

    async def open_session(self, task: Task, ctx: EpisodeContext) -> Session:
        prompts = self.prompts(ctx.action_mode)
        if self._backend is None:
            await self.start()
        assert self._backend is not None
        return DBSession(self._backend, task, ctx, prompts)


__all__ = ["DBEnvironment"]
