"""The MySQL server the ``db`` environment talks to.

Either a private MariaDB server started by the environment (``mariadb-install-db`` into a fresh
datadir under the system temp folder, ``mariadbd`` on a unix socket in a 0700 directory, a random
admin password set at start-up) or a server given by ``db_url`` (``mysql://user:pass@host:port/``).

The private server is configured to behave like the MySQL 8 server AgentBench used: ``utf8mb4``
with an accent- and case-insensitive NO PAD collation, MySQL 8's default ``sql_mode``,
``group_concat_max_len=1024``, no Sequence engine; no file access (``secure_file_priv`` points at an empty
folder); its temp files in a size-capped tmpfs of its own (``tmp_mb``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import os
import secrets
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pymysql
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from ...environment import ConfigError, EnvError, EnvUnavailableError, lower_priority, pid_alive

# MySQL 8's default sql_mode (what AgentBench's `mysql` image ran with).
MYSQL8_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)
# MariaDB's closest match to MySQL 8's utf8mb4_0900_ai_ci: UCA based, accent/case-insensitive, NO PAD.
MARIADB_COLLATION = "utf8mb4_uca1400_nopad_ai_ci"
MYSQL_COLLATION = "utf8mb4_0900_ai_ci"
GROUP_CONCAT_MAX_LEN = 1024
INSTALL_HINT = "apt-get install mariadb-server"
_START_TIMEOUT = 60.0
# how long a connection is retried while the server's listen queue is full (see connect)
_BUSY_RETRY_SECONDS = 20.0
# Every table lives in one system tablespace with a ceiling, so no episode can fill the host's disk
# (past it, writes fail with error 1114 "The table is full"); dropped tables' pages are reused.
_DATA_FILE_PATH = "ibdata1:12M:autoextend:max:4G"
# The server's temp files (sort files, on-disk temporary tables, ...) live in a tmpfs of this many MB mounted
# for it alone in a private mount namespace: a statement that sorts a billion rows fails with errno 28 ("No
# space left on device") instead of writing gigabytes to the host's disk within its time limit.
DEFAULT_TMP_MB = 512
# The tmpfs is mounted by the first process of the server (args: mount point, size, then the server's argv).
_TMPFS_SETUP = 'mount -t tmpfs -o "size=$2,mode=0700" agentbench-db-tmp "$1" || exit 97; shift 2; exec "$@"'
_NO_TMPFS = 97


@dataclass
class ServerInfo:
    """How to reach the server as its administrator."""

    host: str | None
    port: int
    unix_socket: str | None
    user: str
    password: str
    mariadb: bool = True
    collation: str = MARIADB_COLLATION
    # Host part of the per-episode accounts ('localhost' for a socket, '%' for a remote server).
    account_host: str = "localhost"
    extra: dict[str, Any] = field(default_factory=dict)

    def connect_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"charset": "utf8mb4", "connect_timeout": 10, "local_infile": False}
        if self.unix_socket:
            args["unix_socket"] = self.unix_socket
            # PyMySQL otherwise builds an opportunistic TLS context per connection (~90 ms of CPU).
            args["ssl_disabled"] = True
        else:
            if self.host in ("127.0.0.1", "localhost", "::1"):
                args["ssl_disabled"] = True
            args["host"] = self.host
            args["port"] = self.port
        return args

    def admin_connect(self, database: str | None = None) -> pymysql.connections.Connection:
        """A blocking admin connection (call from a worker thread)."""
        return connect(user=self.user, password=self.password, database=database, autocommit=True, **self.connect_args())


def _queue_full(exc: BaseException) -> bool:
    """A connection refused for now: the server's listen queue was full (EAGAIN on its socket), not a server gone."""
    return isinstance(exc, pymysql.OperationalError) and exc.args[:1] in ((2002,), (2003,)) and "[Errno 11]" in str(exc)


def connect(**kwargs: Any) -> pymysql.connections.Connection:
    """``pymysql.connect``, retried with backoff for up to ``_BUSY_RETRY_SECONDS`` while the server's listen queue is
    full: when a run's episodes all begin at once on loaded cores, the server accepts slower than they connect and a
    unix socket then refuses at once ("[Errno 11] Resource temporarily unavailable"). Any other error is raised as is.
    The first attempt is made outside tenacity (an agent's every statement connects; its machinery costs ~9 us)."""
    try:
        return pymysql.connect(**kwargs)
    except pymysql.OperationalError as exc:
        if not _queue_full(exc):
            raise
    for attempt in Retrying(retry=retry_if_exception(_queue_full), stop=stop_after_delay(_BUSY_RETRY_SECONDS),
                            wait=wait_random_exponential(multiplier=0.02, max=0.5), reraise=True):  # fmt: skip
        with attempt:
            return pymysql.connect(**kwargs)
    raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover


def parse_db_url(url: str) -> ServerInfo:
    """``mysql://user:pass@host:port/`` -> ServerInfo (ConfigError naming the option on bad input)."""
    parsed = urlparse(url)
    if parsed.scheme not in ("mysql", "mariadb") or not parsed.hostname:
        raise ConfigError(f"db: bad db_url {url!r}; expected mysql://user:password@host:port/")
    try:
        port = parsed.port or 3306
    except ValueError:
        raise ConfigError(f"db: bad port in db_url {url!r}; expected mysql://user:password@host:port/") from None
    return ServerInfo(
        host=parsed.hostname,
        port=port,
        unix_socket=None,
        user=unquote(parsed.username or "root"),
        password=unquote(parsed.password or ""),
        account_host="%",
    )


def probe_flavour(info: ServerInfo) -> None:
    """Fill in whether the server is MariaDB and which collation mimics MySQL 8 (blocking)."""
    conn = info.admin_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = str(cur.fetchone()[0])
            info.mariadb = "mariadb" in version.lower()
            info.extra["version"] = version
            wanted = MARIADB_COLLATION if info.mariadb else MYSQL_COLLATION
            cur.execute("SELECT COUNT(*) FROM information_schema.COLLATIONS WHERE COLLATION_NAME = %s", (wanted,))
            row = cur.fetchone()
            info.collation = wanted if row and row[0] else "utf8mb4_unicode_ci"
    finally:
        conn.close()


_DIR_PREFIX = "agentbench-db-"
_STALE_AFTER = 600.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Linux: the server gets SIGTERM if this process dies without calling close() (kill -9)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def _remove_stale_dirs() -> None:
    """Remove run folders of servers that are gone (a run killed before its close())."""
    now = time.time()
    for folder in Path(tempfile.gettempdir()).glob(_DIR_PREFIX + "*"):
        try:
            if folder.stat().st_uid != os.geteuid() or now - folder.stat().st_mtime < _STALE_AFTER:
                continue
            pid_file = folder / "run" / "mysqld.pid"
            if pid_file.exists() and pid_alive(int(pid_file.read_text().strip() or 0)):
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _template_dir(mariadbd: str, install: str, install_args: list[str]) -> Path | None:
    """Where the pristine datadir for this MariaDB build lives (None if the cache is unusable)."""
    try:
        stamp = [f"{p}:{os.stat(p).st_size}:{os.stat(p).st_mtime_ns}" for p in (mariadbd, install)]
        key = hashlib.sha256("\n".join(stamp + install_args + [str(os.geteuid())]).encode()).hexdigest()[:16]
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentbench-async" / "mariadb"
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)
        probe = root / f".probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError:
        return None
    return root / key


def _find_binary(name: str, explicit: str | None) -> str | None:
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    for folder in ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


class PrivateMariaDB:
    """A ``mariadbd`` owned by this process: fresh datadir, unix socket, stopped and removed on close."""

    def __init__(
        self, *, mariadbd: str | None = None, install_db: str | None = None, max_connections: int = 300, port: int | None = None,
        cache: bool = True, tmp_mb: int = DEFAULT_TMP_MB,
    ) -> None:
        self._cache = cache
        self._tmp_mb = tmp_mb  # size of the server's private tmpfs for temp files; 0: the host's temp folder, uncapped
        self._port = port  # also listen on 127.0.0.1:<port> (tests of db_url); else unix socket only
        self._mariadbd_opt = mariadbd
        self._install_opt = install_db
        self._max_connections = max_connections
        self._proc: asyncio.subprocess.Process | None = None
        self._base: Path | None = None
        self._lock = asyncio.Lock()
        self.info: ServerInfo | None = None
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _binaries(self) -> tuple[str, str]:
        mariadbd = _find_binary("mariadbd", self._mariadbd_opt) or (
            None if self._mariadbd_opt else _find_binary("mysqld", None)
        )
        install = _find_binary("mariadb-install-db", self._install_opt) or (
            None if self._install_opt else _find_binary("mysql_install_db", None)
        )
        if not mariadbd or not install:
            missing = "mariadbd" if not mariadbd else "mariadb-install-db"
            raise EnvUnavailableError(
                f"db: the MariaDB server is not installed ({missing} not found); install it with "
                f"`{INSTALL_HINT}`, or point the environment at a running server with --db-url mysql://user:pass@host:port/"
            )
        return mariadbd, install

    def _server_args(self, base: Path) -> list[str]:
        args = [
            "--no-defaults",
            f"--datadir={base / 'data'}",
            f"--socket={base / 'run' / 'mysqld.sock'}",
            f"--pid-file={base / 'run' / 'mysqld.pid'}",
            f"--log-error={base / 'run' / 'error.log'}",
            f"--tmpdir={base / 'tmp'}",
            f"--secure-file-priv={base / 'nofiles'}",
            "--skip-name-resolve",
            "--local-infile=0",
            "--symbolic-links=0",
            "--performance-schema=0",
            "--skip-log-bin",
            "--innodb-log-file-size=8M",
            "--innodb-buffer-pool-size=64M",
            "--innodb-file-per-table=0",
            f"--innodb-data-file-path={_DATA_FILE_PATH}",
            "--enforce-storage-engine=InnoDB",
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--innodb-fast-shutdown=2",
            "--debug-no-sync",
            "--innodb-flush-method=nosync",
            "--character-set-server=utf8mb4",
            f"--collation-server={MARIADB_COLLATION}",
            f"--sql-mode={MYSQL8_SQL_MODE}",
            f"--group-concat-max-len={GROUP_CONCAT_MAX_LEN}",
            f"--max-connections={self._max_connections}",
            f"--tmp-disk-table-size={min(256, self._tmp_mb // 2) if self._tmp_mb else 256}M",
            "--max-recursive-iterations=100000",
            "--sequence=OFF",  # MariaDB's seq_1_to_N tables (AgentBench ran MySQL, which has none)
        ]
        if self._tmp_mb:  # InnoDB's temporary tablespace (CREATE TEMPORARY TABLE) is in the datadir: capped too
            args.append(f"--innodb-temp-data-file-path=ibtmp1:12M:autoextend:max:{max(self._tmp_mb, 16)}M")
        if self._port:
            args += ["--bind-address=127.0.0.1", f"--port={self._port}"]
        else:
            args.append("--skip-networking")
        if os.geteuid() == 0 or self._tmp_mb:  # (in the user namespace of a capped server the user is root too)
            args.append("--user=root")
        return args

    def _tmpfs_prefix(self, base: Path) -> list[str]:
        """The command that mounts the server's capped tmpfs at ``base/tmp`` in a private mount namespace (as root;
        otherwise in a user namespace where the user is root) and then runs the server in it."""
        if not self._tmp_mb:
            return []
        unshare = _find_binary("unshare", None)
        if unshare is None:
            raise EnvUnavailableError(self._no_tmpfs("unshare (util-linux) is not installed"))
        userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return [unshare, *userns, "--mount", "--propagation", "private", "--", "sh", "-c", _TMPFS_SETUP, "sh",
                str(base / "tmp"), f"{self._tmp_mb}m"]  # fmt: skip

    def _no_tmpfs(self, why: str) -> str:
        return (f"db: cannot give MariaDB a size-capped temp folder (a {self._tmp_mb} MB tmpfs in a private mount namespace: "
                f"{why}); run as root or allow unprivileged user namespaces, or set --env-option db.tmp_mb=0 to keep its "
                "temp files uncapped in the system temp folder")  # fmt: skip

    async def start(self) -> ServerInfo:
        mariadbd, install = self._binaries()
        await asyncio.to_thread(_remove_stale_dirs)
        base = Path(tempfile.mkdtemp(prefix=_DIR_PREFIX))
        os.chmod(base, 0o700)
        for sub in ("run", "tmp", "nofiles"):
            (base / sub).mkdir(mode=0o700)
        self._base = base
        try:
            await self._prepare_datadir(mariadbd, install, base / "data")
        except BaseException:
            self._remove_files()
            raise
        password = secrets.token_urlsafe(24)
        self.info = ServerInfo(
            host=None, port=0, unix_socket=str(base / "run" / "mysqld.sock"), user="root", password=password
        )
        try:
            await self._launch(mariadbd, first=True)
        except BaseException:
            await self._terminate()
            self._remove_files()
            raise
        return self.info

    def _install_args(self, install: str, datadir: Path) -> list[str]:
        args = [
            install,
            "--no-defaults",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--innodb-log-file-size=8M",
            "--innodb-file-per-table=0",
            f"--innodb-data-file-path={_DATA_FILE_PATH}",
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        return args

    async def _install(self, install: str, datadir: Path) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self._install_args(install, datadir),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            tail = out.decode(errors="replace").strip().splitlines()[-3:]
            raise EnvUnavailableError(f"db: mariadb-install-db failed ({' | '.join(tail)}); reinstall with `{INSTALL_HINT}`")

    async def _prepare_datadir(self, mariadbd: str, install: str, datadir: Path) -> None:
        """A fresh datadir: a copy of a cached pristine ``mariadb-install-db`` output (made once per
        MariaDB build, under the user's cache folder), or a direct install when caching is off or
        the cache folder is not writable."""
        template = _template_dir(mariadbd, install, self._install_args(install, Path("DATADIR"))) if self._cache else None
        if template is None:
            await self._install(install, datadir)
            return
        if not (template / "data").is_dir():
            building = Path(tempfile.mkdtemp(prefix=".building-", dir=template.parent))
            try:
                await self._install(install, building / "data")
                os.rename(building, template)  # atomic; a concurrent builder may have won
            except OSError:
                pass
            finally:
                shutil.rmtree(building, ignore_errors=True)
        await asyncio.to_thread(shutil.copytree, template / "data", datadir)

    async def _launch(self, mariadbd: str, *, first: bool) -> None:
        assert self._base is not None and self.info is not None
        init_file = self._base / "run" / "init.sql"
        # The admin password is set through --init-file on every start (the file is removed once the
        # server answers); the root account is reachable only through the 0700 socket folder anyway.
        init_file.write_text(f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{self.info.password}';\n")
        os.chmod(init_file, 0o600)
        sock = Path(self.info.unix_socket or "")
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        launch_log = self._base / "run" / "launch.log"  # what the tmpfs set-up says if it fails
        with open(launch_log, "wb") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self._tmpfs_prefix(self._base),
                mariadbd,
                *self._server_args(self._base),
                f"--init-file={init_file}",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,  # Ctrl-C of the run reaches us, not the server: close() stops it
                preexec_fn=_die_with_parent,
            )
        lower_priority(self._proc.pid)  # when the cores are busy, the engine's model calls run first
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            if self._proc.returncode == _NO_TMPFS and self._tmp_mb:
                said = " ".join(launch_log.read_text(errors="replace").split())[:300]
                raise EnvUnavailableError(self._no_tmpfs(said or "mount failed"))
            if self._proc.returncode is not None:
                raise EnvUnavailableError(f"db: mariadbd exited at start-up: {self._error_log_tail()}")
            if sock.exists() and await asyncio.to_thread(self._can_connect):
                break
            if time.monotonic() > deadline:
                await self._terminate()
                raise EnvUnavailableError(f"db: mariadbd did not accept connections within {_START_TIMEOUT:.0f} s: {self._error_log_tail()}")
            await asyncio.sleep(0.02)
        with contextlib.suppress(FileNotFoundError):
            init_file.unlink()
        if first:
            await asyncio.to_thread(probe_flavour, self.info)

    def _can_connect(self) -> bool:
        assert self.info is not None
        try:
            conn = self.info.admin_connect()
        except pymysql.MySQLError:
            return False
        conn.close()
        return True

    def _error_log_tail(self) -> str:
        if self._base is None:
            return "no log"
        try:
            lines = (self._base / "run" / "error.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no error log"
        errors = [ln for ln in lines if "[ERROR]" in ln] or lines
        return " | ".join(errors[-3:])[:600]

    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def ensure_running(self) -> None:
        """Restart the server if it died (episodes in flight at that moment fail with env_error)."""
        if self.alive():
            return
        async with self._lock:
            if self.alive() or self.info is None:
                return
            mariadbd, _ = self._binaries()
            self.restarts += 1
            try:
                await self._launch(mariadbd, first=False)
            except EnvUnavailableError as exc:
                raise EnvError(f"db: the MariaDB server died and could not be restarted: {exc}") from None

    async def _terminate(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def stop(self) -> None:
        await self._terminate()
        self._proc = None
        self._remove_files()

    def _remove_files(self) -> None:
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None

