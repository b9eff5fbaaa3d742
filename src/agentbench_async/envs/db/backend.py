"""Per-episode databases on the MySQL server: create, run the agent's SQL, hash, drop.

Each episode gets a database and an account of its own (random names ``ab_<hex>``/``abu_<hex>``).
The account holds data privileges on that one database only: no FILE (so no ``LOAD_FILE``/``INTO
OUTFILE``), no PROCESS/SUPER, no access to ``mysql.*`` or to other episodes' databases, no routines,
triggers or events, and at most a few connections. Like AgentBench, every statement runs in a fresh
session (connect, ``USE``, execute, fetch, ``COMMIT``), so no state but the tables survives a turn.

A statement is bounded three ways: the server's ``max_statement_time`` (per account and per session),
a watchdog that kills the connection from the admin side when the statement outlives the timeout
(``SET STATEMENT max_statement_time=0 FOR ...`` cannot escape it), and an unbuffered fetch that stops
reading once the observation is past the 800-character cut.

Off the episode's path: a few databases with their accounts are made ahead, while other episodes run (an episode
takes one and only creates its table), and an episode's database and account are dropped after it ended, in the
background (the environment's close waits for those drops and drops the spares). An episode's database is never
used by another episode: names are random, a spare is handed out once.

The admin's connections (making and dropping episode databases, creating an episode's table, grading) are kept for
the next call of the same kind (``admin_for``): a connection cost ~0.2 ms of CPU (client and server), four of them an
episode. An agent's statement still gets a fresh session, as in AgentBench.

The driver is PyMySQL, run in the environment's own thread pool, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pymysql
import pymysql.cursors

from ...environment import EnvError
from .grading import hash_query, quote_ident
from .server import GROUP_CONCAT_MAX_LEN, MYSQL8_SQL_MODE, PrivateMariaDB, ServerInfo, connect
from .sqltext import RowsText, error_text

T = TypeVar("T")

# Privileges of an episode account, on its own database only.
EPISODE_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, CREATE VIEW, SHOW VIEW"
_CLIENT_ERRORS_SERVER_DOWN = frozenset({2002, 2003, 2006})
_FETCH_BATCH = 64
SPARE_DATABASES = 2  # episode databases (with their accounts) kept made ahead
_ADMIN_KEPT = 4  # idle admin connections kept for each kind of use


@dataclass(frozen=True)
class Account:
    """An episode's database and the account that may use it (random names: never two episodes')."""

    db_name: str
    user: str
    password: str = field(repr=False)

    @classmethod
    def new(cls) -> Account:
        token = secrets.token_hex(6)
        return cls(f"ab_{token}", f"abu_{token}", secrets.token_urlsafe(18))


def _server_error(exc: pymysql.MySQLError) -> tuple[int, str]:
    args = exc.args
    if len(args) >= 2 and isinstance(args[0], int):
        return args[0], str(args[1])
    return 2000, str(exc) or type(exc).__name__


def _sqlstate(conn: pymysql.connections.Connection) -> str | None:
    """The SQLSTATE of the last error on ``conn`` (PyMySQL drops it from the exception)."""
    try:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            cur.execute("GET DIAGNOSTICS CONDITION 1 @ab_sqlstate = RETURNED_SQLSTATE")
            cur.execute("SELECT @ab_sqlstate")
            row = cur.fetchone()
            return str(row[0]) if row and row[0] else None
    except Exception:  # noqa: BLE001 - a lost connection: fall back to HY000
        return None


class Backend:
    """The server connection settings plus the thread pool the blocking driver runs in."""

    def __init__(self, info: ServerInfo, *, statement_timeout: float, workers: int, server: PrivateMariaDB | None,
                 spare: int = SPARE_DATABASES) -> None:  # fmt: skip
        self.info = info
        self.statement_timeout = statement_timeout
        self.server = server
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentbench-db")
        self._spare_wanted = spare
        self._spare: list[Account] = []
        self._filling: asyncio.Task[None] | None = None
        self._dropping: set[asyncio.Task[None]] = set()
        self._idle: dict[str, list[pymysql.connections.Connection]] = {}
        self._idle_lock = threading.Lock()
        self._closing = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    async def ensure_server(self) -> None:
        if self.server is not None:
            await self.server.ensure_running()

    # ----- episode databases: made ahead, dropped after -----------------------------------------------

    async def account(self) -> Account:
        """A database and account for an episode: a spare made ahead, else one made now; then more spares are made."""
        await self.ensure_server()
        account = self._spare.pop() if self._spare else None
        if account is None:
            account = Account.new()
            await self.run(self._make_account, account)
        if self._spare_wanted and (self._filling is None or self._filling.done()):
            self._filling = asyncio.create_task(self._fill())
        return account

    def release(self, account: Account) -> None:
        """Drop an episode's database and account in the background (``settle`` waits for it)."""
        task = asyncio.create_task(self._drop_quietly(account))
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)

    async def settle(self) -> None:
        """Wait until the spares being made and the drops under way are done."""
        while self._dropping or (self._filling is not None and not self._filling.done()):
            await asyncio.gather(*self._dropping, *([self._filling] if self._filling is not None else []), return_exceptions=True)

    async def close(self) -> None:
        """Finish the drops, drop the spares (a server of the user's keeps nothing of the run), stop the threads."""
        self._spare_wanted = 0
        try:
            await self.settle()
            spares, self._spare = self._spare, []
            await asyncio.gather(*(self._drop_quietly(a) for a in spares))
            self._closing = True
            with contextlib.suppress(Exception):
                await self.run(self._close_idle)
        finally:
            self._closing = True
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _fill(self) -> None:
        while len(self._spare) < self._spare_wanted:
            account = Account.new()
            try:
                await self.run(self._make_account, account)
            except EnvError:
                return  # the next episode makes its own and says what failed
            self._spare.append(account)

    async def _drop_quietly(self, account: Account) -> None:
        with contextlib.suppress(Exception):  # a server gone: nothing left to drop; the run goes on
            await self.run(self._drop_account, account)

    def _make_account(self, account: Account) -> None:
        with self.admin_for("account") as conn, conn.cursor() as cur:
            try:
                cur.execute(f"CREATE DATABASE {quote_ident(account.db_name)} CHARACTER SET utf8mb4 COLLATE {self.info.collation}")
                limits = "MAX_USER_CONNECTIONS 4"
                if self.info.mariadb:
                    limits += f" MAX_STATEMENT_TIME {self.statement_timeout:g}"
                cur.execute(f"CREATE USER %s@%s IDENTIFIED BY %s WITH {limits}", (account.user, self.info.account_host, account.password))
                cur.execute(f"GRANT {EPISODE_PRIVILEGES} ON {quote_ident(account.db_name)}.* TO %s@%s", (account.user, self.info.account_host))
            except pymysql.MySQLError as exc:
                with contextlib.suppress(pymysql.MySQLError):  # what part of it was made
                    self._drop_with(cur, account)
                errno, msg = _server_error(exc)
                raise EnvError(f"db: could not create the episode database: {errno}: {msg}") from None

    def _drop_account(self, account: Account) -> None:
        with self.admin_for("account") as conn, conn.cursor() as cur:
            self._drop_with(cur, account)

    def _drop_with(self, cur: Any, account: Account) -> None:
        cur.execute("DROP USER IF EXISTS %s@%s", (account.user, self.info.account_host))
        cur.execute(f"DROP DATABASE IF EXISTS {quote_ident(account.db_name)}")

    def session_init(self) -> str:
        """SQL run at the start of every agent session: MySQL 8 behaviour and the statement timeout."""
        parts = [f"sql_mode='{MYSQL8_SQL_MODE}'", f"group_concat_max_len={GROUP_CONCAT_MAX_LEN}"]
        if self.info.mariadb:
            parts.append(f"max_statement_time={self.statement_timeout:g}")
        else:
            parts.append(f"max_execution_time={int(self.statement_timeout * 1000)}")
        return "SET SESSION " + ", ".join(parts)

    def admin(self) -> pymysql.connections.Connection:
        try:
            return self.info.admin_connect()
        except pymysql.MySQLError as exc:
            errno, msg = _server_error(exc)
            raise EnvError(f"db: cannot connect to the MySQL server as admin: {errno}: {msg}") from None

    @contextlib.contextmanager
    def admin_for(self, use: str) -> Iterator[pymysql.connections.Connection]:
        """An admin connection for one kind of ``use`` (call from a worker thread): one that an earlier call of the same
        kind left, alive (a ping), else a new one. Each kind sets what its statements need in the session itself, so a
        kept connection's session is what a new one's would be at that point. Kept again when the call raised nothing
        (at most ``_ADMIN_KEPT`` of a kind), closed otherwise."""
        conn = self._take_idle(use)
        if conn is None:
            conn = self.admin()
        try:
            yield conn
        except BaseException:
            _close_quietly(conn)
            raise
        with self._idle_lock:
            idle = self._idle.setdefault(use, [])
            if not self._closing and len(idle) < _ADMIN_KEPT:
                idle.append(conn)
                return
        _close_quietly(conn)

    def _take_idle(self, use: str) -> pymysql.connections.Connection | None:
        with self._idle_lock:
            idle = self._idle.get(use)
            conn = idle.pop() if idle else None
        if conn is not None:
            try:
                conn.ping(reconnect=False)  # a server restarted since: a new connection instead
            except Exception:  # noqa: BLE001 - any failure: this connection is not used again
                _close_quietly(conn)
                return None
        return conn

    def _close_idle(self) -> None:
        with self._idle_lock:
            conns = [conn for idle in self._idle.values() for conn in idle]
            self._idle.clear()
        for conn in conns:
            _close_quietly(conn)


def _close_quietly(conn: pymysql.connections.Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close()


class EpisodeDatabase:
    """One episode's database and account."""

    def __init__(self, backend: Backend, table_name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.backend = backend
        self.table_name = table_name
        self.columns = list(columns)
        self.rows = rows
        self.account: Account | None = None
        self.setup_errors: list[str] = []

    @property
    def db_name(self) -> str:
        assert self.account is not None, "create() first"
        return self.account.db_name

    @property
    def user(self) -> str:
        assert self.account is not None, "create() first"
        return self.account.user

    # ----- async API -------------------------------------------------------------------------

    async def create(self) -> None:
        self.account = await self.backend.account()  # from here on, drop() removes it
        await self.backend.run(self._create)

    async def execute(self, sql: str) -> str:
        """Run one agent statement; return the observation text (rows or error, not yet truncated)."""
        holder: dict[str, int] = {}
        future = asyncio.ensure_future(self.backend.run(self._execute, sql, holder))
        timeout = self.backend.statement_timeout
        try:
            text = await asyncio.wait_for(asyncio.shield(future), timeout + 2.0)
        except asyncio.TimeoutError:
            thread_id = holder.get("thread_id")
            if thread_id is not None:
                await self.backend.run(self._kill, thread_id)
            try:
                text = await asyncio.wait_for(asyncio.shield(future), 15.0)
            except asyncio.TimeoutError:
                raise EnvError(f"db: a statement could not be stopped {timeout + 17:.0f} s after it started") from None
        return text.replace(self.db_name, self.table_name)

    async def table_hash(self) -> str:
        text = await self.backend.run(self._hash)
        return text.replace(self.db_name, self.table_name)

    async def drop(self) -> None:
        """Hand the database and account to the background drop (the episode does not wait for it)."""
        account, self.account = self.account, None
        if account is not None:
            self.backend.release(account)

    # ----- blocking parts (worker threads) ---------------------------------------------------

    def _create(self) -> None:
        try:
            with self.backend.admin_for("create") as conn, conn.cursor() as cur:
                cur.execute(f"USE {quote_ident(self.db_name)}")
                cur.execute(f"SET SESSION sql_mode='{MYSQL8_SQL_MODE}'")
                # AgentBench's set-up: every column TEXT, one multi-row INSERT of the values as text,
                # run statement by statement here (upstream fired them as one unchecked batch).
                table = quote_ident(self.table_name)
                col_defs = ", ".join(f"{quote_ident(c)} TEXT" for c in self.columns)
                try:
                    cur.execute(f"CREATE TABLE IF NOT EXISTS {table} ({col_defs})")
                except pymysql.MySQLError as exc:
                    self._record_setup_error("CREATE TABLE", exc)
                    return
                if not self.rows:
                    return
                # PyMySQL formats the statement with %: column names must not carry a bare one.
                col_list = ", ".join(quote_ident(c) for c in self.columns).replace("%", "%%")
                table = table.replace("%", "%%")
                values = ", ".join("(" + ", ".join(["%s"] * len(row)) + ")" for row in self.rows)
                params = [_as_text(v) for row in self.rows for v in row]
                try:
                    cur.execute(f"INSERT INTO {table} ({col_list}) VALUES {values}", params)
                except pymysql.MySQLError as exc:
                    self._record_setup_error("INSERT", exc)
        except pymysql.MySQLError as exc:
            errno, msg = _server_error(exc)
            raise EnvError(f"db: could not create the episode database: {errno}: {msg}") from None

    def _record_setup_error(self, what: str, exc: pymysql.MySQLError) -> None:
        errno, msg = _server_error(exc)
        self.setup_errors.append(f"{what}: {errno}: {msg}".replace(self.db_name, self.table_name))

    def _connect_agent(self) -> pymysql.connections.Connection:
        info = self.backend.info
        try:
            assert self.account is not None
            return connect(
                user=self.account.user,
                password=self.account.password,
                autocommit=False,
                cursorclass=pymysql.cursors.SSCursor,
                collation=info.collation,
                init_command=self.backend.session_init(),
                read_timeout=int(self.backend.statement_timeout) + 60,
                write_timeout=60,
                **info.connect_args(),
            )
        except pymysql.MySQLError as exc:
            errno, msg = _server_error(exc)
            raise EnvError(f"db: cannot open an agent session: {errno}: {msg}") from None

    def _execute(self, sql: str, holder: dict[str, int]) -> str:
        conn = self._connect_agent()
        holder["thread_id"] = conn.thread_id()
        cur = conn.cursor()
        try:
            cur.execute(f"USE {quote_ident(self.db_name)}")
            cur.execute(sql)
            if cur.description is None:
                conn.commit()
                return "[]"
            text = RowsText()
            while not text.full:
                batch = cur.fetchmany(_FETCH_BATCH)
                if not batch:
                    break
                text.add(batch)
            if text.full:
                # Enough for the observation: drop the connection without reading the rest (and
                # without committing: this was a query that returns rows).
                return text.text()
            conn.commit()
            return text.text()
        except pymysql.MySQLError as exc:
            errno, msg = _server_error(exc)
            if errno in _CLIENT_ERRORS_SERVER_DOWN:
                raise EnvError(f"db: lost the MySQL server during a statement: {errno}: {msg}") from None
            state = _sqlstate(conn) if 1000 <= errno < 2000 else None
            return error_text(errno, state, msg)
        except UnicodeError:  # e.g. a lone surrogate from a JSON escape: the driver cannot send it
            return "Error: the statement is not valid Unicode text; nothing was executed."
        finally:
            _abandon(cur, conn)

    def _kill(self, thread_id: int) -> None:
        conn = self.backend.admin()
        try:
            with conn.cursor() as cur, contextlib.suppress(pymysql.MySQLError):
                cur.execute(f"KILL CONNECTION {int(thread_id)}")
        finally:
            conn.close()

    def _hash(self) -> str:
        with self.backend.admin_for("hash") as conn:
            with conn.cursor() as cur:
                try:
                    cur.execute(f"USE {quote_ident(self.db_name)}")
                    cur.execute(f"SET SESSION group_concat_max_len={GROUP_CONCAT_MAX_LEN}")
                    cur.execute(hash_query(self.table_name, self.columns))
                    return str(list(cur.fetchall()))
                except pymysql.MySQLError as exc:
                    errno, msg = _server_error(exc)
                    if errno in _CLIENT_ERRORS_SERVER_DOWN:
                        raise EnvError(f"db: lost the MySQL server while grading: {errno}: {msg}") from None
                    return error_text(errno, _sqlstate(conn), msg)



def _abandon(cur: Any, conn: pymysql.connections.Connection) -> None:
    """Close without reading what is left of an unbuffered result (the server aborts it)."""
    result = getattr(cur, "_result", None)
    if result is not None:
        result.unbuffered_active = False  # else PyMySQL drains the rows on close / garbage collection
    cur._result = None
    conn._result = None
    with contextlib.suppress(Exception):
        conn.close()


def _as_text(value: Any) -> str | None:
    """How AgentBench's client literal ended up stored in a TEXT column."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)
