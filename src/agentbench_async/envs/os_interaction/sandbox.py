"""One episode's sandbox: a user namespace whose root is nobody on the host, bubblewrap inside it.

Every episode gets its own user namespace whose 65,536 ids map onto a range no host account owns (root
mode: :data:`ROOT_ID_BASE`; an ordinary user: its ``/etc/subuid`` range, else its own id alone), the design of
rootless Podman and unprivileged LXC. Capabilities exist only inside that namespace, so file handles of
host file systems, global sysctls, host device nodes and the host's keyrings are out of reach by
construction; a seccomp filter (:mod:`.seccomp`) refuses those calls and the rest of Docker's list anyway.

The episode's warden (:mod:`._warden`, a host Python process outside every namespace the agent sees) makes
the namespace, mounts the episode's root in its private mount namespace — an overlay whose read-only lower
layer is the root filesystem built for the purpose (:mod:`.rootfs`, its ownership shifted into the id range)
and whose upper layer is a tmpfs (the episode's disk quota) — and starts bubblewrap there: a keeper (pid 1,
a bash loop that reaps orphans) in new pid, net, ipc, uts and cgroup namespaces with a cleared environment,
a reduced capability set, the seccomp filter, a private ``/dev`` (read-only bound null/zero/full/random/
urandom/tty, a devpts instance, a size-limited ``/dev/shm``) and read-only ``/proc/sys``. Every later process
(the agent's shell, init and check scripts) is forked by the warden straight into those namespaces, with
the same capabilities and filter; no helper binary from the sandbox's writable root ever runs with more
privilege than the agent. All of them live in the episode's cgroup (memory, pids) when the host delegates
those controllers, else under rlimits (see ``_Cgroups``).
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import EnvError, EnvUnavailableError
from .process import Child, kill_process_group, off_loop, spawn
from .seccomp import filter_program

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# fd 250 of a check is the pristine image (read-only): its tools come first, the episode's after
PRISTINE = "/proc/self/fd/250"
CHECK_PATH = f"{PRISTINE}/usr/sbin:{PRISTINE}/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOSTNAME = "agentbench"
# What root inside the sandbox may do: own files, change modes/owners, switch users, signal its own
# processes — all only inside its user namespace. No CAP_SYS_ADMIN (mounts), CAP_MKNOD, CAP_NET_*, CAP_SYS_PTRACE.
CAPS = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "AUDIT_WRITE")
# Root mode: the sandbox's ids 0..65535 are host ids 0x70000000.., which no account owns (checked).
ROOT_ID_BASE = 0x70000000
ID_COUNT = 65536
_TOOLS = ("bwrap",)
_WARDEN = Path(__file__).with_name("_warden.py")
_STATE_PREFIX = "agentbench-os-"


def _process_tag(pid: int) -> str | None:
    """``<pid>.<start time>`` of a live process (its name on our state folders and cgroups), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return f"{pid}.{stat.rsplit(')', 1)[1].split()[19]}"


_RUN_TAG = _process_tag(os.getpid()) or str(os.getpid())


@dataclass(frozen=True)
class Limits:
    """Per-episode resource limits."""

    memory_mb: int = 512  # processes; the episode's files in memory (disk, /dev/shm) are counted on top
    pids: int = 256
    disk_mb: int = 512  # the writable layer (tmpfs): full means ENOSPC
    cpu_seconds: int = 600  # RLIMIT_CPU of every sandbox process
    nofile: int = 1_048_576  # std-004-Q09 needs more than 123321
    shm_mb: int = 64  # /dev/shm (Docker's default size)


@dataclass(frozen=True)
class IdMap:
    """How the sandbox's ids 0..count-1 map onto host ids, and who writes the map."""

    uid_base: int
    gid_base: int
    count: int
    helper: bool = False  # newuidmap/newgidmap (an ordinary user's /etc/subuid range)

    @property
    def setgroups(self) -> bool:
        """Whether the namespace may call setgroups (not with a single-id map an ordinary user wrote)."""
        return self.count > 1 or os.geteuid() == 0

    @property
    def several_users(self) -> bool:
        return self.count > 1

    def apply(self, pid: int) -> None:
        """Write the maps of ``pid``'s new user namespace (blocking; called off the event loop)."""
        if self.helper:
            for tool, base in (("newuidmap", self.uid_base), ("newgidmap", self.gid_base)):
                done = subprocess.run([tool, str(pid), "0", str(base), str(self.count)], capture_output=True, timeout=30)
                if done.returncode != 0:
                    why = " ".join(done.stderr.decode(errors="replace").split())
                    raise EnvError(f"{tool} failed ({why})")
            return
        if not self.setgroups:
            Path(f"/proc/{pid}/setgroups").write_text("deny")
        Path(f"/proc/{pid}/uid_map").write_text(f"0 {self.uid_base} {self.count}\n")
        Path(f"/proc/{pid}/gid_map").write_text(f"0 {self.gid_base} {self.count}\n")


def _subid_range(path: Path, user: str, uid: int) -> tuple[int, int] | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in (user, str(uid)) and parts[1].isdigit() and parts[2].isdigit():
            return int(parts[1]), int(parts[2])
    return None


def host_idmap(etc: Path = Path("/etc")) -> IdMap:
    """The id range for sandboxes of this process: root's fixed unowned range, an ordinary user's
    ``/etc/subuid``/``/etc/subgid`` range (through newuidmap/newgidmap), else the user's own id alone."""
    uid = os.geteuid()
    if uid == 0:
        return IdMap(ROOT_ID_BASE, ROOT_ID_BASE, ID_COUNT)
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    subuid = _subid_range(etc / "subuid", user, uid)
    subgid = _subid_range(etc / "subgid", user, uid)
    helpers = shutil.which("newuidmap") and shutil.which("newgidmap")
    if subuid and subgid and helpers and min(subuid[1], subgid[1]) >= ID_COUNT:
        return IdMap(subuid[0], subgid[0], ID_COUNT, helper=True)
    return IdMap(uid, os.getegid(), 1)


def _host_tool(name: str) -> str:
    """The host's own binary by absolute path (resolved before anything enters the sandbox)."""
    path = shutil.which(name)
    if path is None:
        raise EnvUnavailableError(f"os: {name} not found; install the Debian package bubblewrap (apt-get install bubblewrap)")
    return os.path.realpath(path)


def _owned_ids(path: Path) -> set[int]:
    try:
        return {int(line.split(":")[2]) for line in path.read_text().splitlines() if line.count(":") >= 3}
    except (OSError, ValueError, IndexError):
        return set()


def check_available(etc: Path = Path("/etc"), proc: Path = Path("/proc")) -> None:
    """Raise ``EnvUnavailableError`` unless sandboxes can be made on this machine by this user."""
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        raise EnvUnavailableError(
            f"os: {', '.join(missing)} not found; install the Debian package bubblewrap (apt-get install bubblewrap)"
        )
    if not (proc / "self/ns/user").exists():
        raise EnvUnavailableError("os: this kernel has no user namespaces; the sandbox cannot run here")
    if os.geteuid() == 0:
        clash = sorted(i for i in _owned_ids(etc / "passwd") | _owned_ids(etc / "group") if ROOT_ID_BASE <= i < ROOT_ID_BASE + ID_COUNT)
        if clash:
            raise EnvUnavailableError(
                f"os: host account id {clash[0]} lies in the sandbox's id range {ROOT_ID_BASE}-{ROOT_ID_BASE + ID_COUNT - 1}; "
                "sandbox root must map to ids no host account owns"
            )
        return
    restrict = proc / "sys/kernel/apparmor_restrict_unprivileged_userns"
    with contextlib.suppress(OSError, ValueError):
        if int(restrict.read_text()) == 1:
            raise EnvUnavailableError(
                "os: AppArmor forbids unprivileged user namespaces here (Ubuntu 23.10+); allow them with "
                "'sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0' or an AppArmor profile for bwrap and python, "
                "or run as root"
            )
    for knob, bad in (("sys/kernel/unprivileged_userns_clone", 0), ("sys/user/max_user_namespaces", 0)):
        with contextlib.suppress(OSError, ValueError):
            if int((proc / knob).read_text()) == bad:
                raise EnvUnavailableError(
                    f"os: unprivileged user namespaces are off (/proc/{knob} is {bad}); turn them on "
                    f"('sudo sysctl {knob.removeprefix('sys/').replace('/', '.')}=1' or a larger value), or run as root"
                )


def _sweep_stale(tmp: Path | None = None, cgroup_root: Path = Path("/sys/fs/cgroup")) -> None:
    """Remove the state folders and cgroups of sandboxes whose engine died (kill -9): once per process."""
    global _swept
    if _swept:
        return
    _swept = True
    tmp = tmp or Path(tempfile.gettempdir())
    candidates = list(tmp.glob(_STATE_PREFIX + "*"))
    with contextlib.suppress(OSError):
        for top in [cgroup_root, *[p for p in cgroup_root.iterdir() if p.is_dir()]]:
            for own in _own_cgroup_dirs(top):
                candidates += list(own.glob(_STATE_PREFIX + "*"))
    for path in candidates:
        tag = path.name.removeprefix(_STATE_PREFIX).split("-", 1)[0]
        pid, _, _start = tag.partition(".")
        if not pid.isdigit() or _process_tag(int(pid)) == tag:
            continue  # a live engine's (or not ours)
        if path.is_dir() and str(path).startswith(str(cgroup_root)):
            for victim in _read_pids(path):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(victim, signal.SIGKILL)
            with contextlib.suppress(OSError):
                path.rmdir()
        else:
            with contextlib.suppress(OSError):
                path.rmdir()  # an empty mount point: the tmpfs went with its mount namespace


def _own_cgroup_dirs(top: Path) -> list[Path]:
    """Where this process makes episode cgroups under hierarchy ``top`` (v2 root or a v1 controller)."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if (top.name == "cgroup" and ctrls == "") or top.name in ctrls.split(","):
                out.append(top / path.lstrip("/"))
    return out


_swept = False


_CONTROLLERS = ("memory", "pids")
_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


class _Cgroups:
    """The episode's cgroup (the v2 unified tree or v1 hierarchies) when the host delegates the controllers.

    v2: a child of the process's own cgroup gets the memory and pids controllers only if they are enabled
    in that cgroup's ``cgroup.subtree_control`` (what ``cgroup.controllers`` at the root lists is not enough).
    When they are not, or creating/configuring the child fails, nothing is left behind and the sandbox falls
    back to rlimits (``ulimit -v`` per process for memory; the process count is then enforced by scanning
    the sandbox's pid namespace), with one warning line per run.
    """

    def __init__(self, name: str, limits: Limits, root: Path = Path("/sys/fs/cgroup"), self_cgroup: Path = Path("/proc/self/cgroup")) -> None:
        self.dirs: list[Path] = []
        self.memory: Path | None = None
        self.pids: Path | None = None
        try:
            if (root / "cgroup.controllers").exists():
                self._v2(root, _own_cgroup("", self_cgroup), name, limits)
            else:
                self._v1(root, self_cgroup, name, limits)
        except OSError as exc:
            self.remove()
            self.memory = self.pids = None
            _warn_once(f"os: cannot set up the episode cgroup ({exc}); using rlimits instead (memory per process, no cgroup pid limit)")

    def _v2(self, root: Path, own: str, name: str, limits: Limits) -> None:
        base = root / own.lstrip("/")
        try:
            delegated = set((base / "cgroup.subtree_control").read_text().split())
        except OSError:
            delegated = set()
        missing = [c for c in _CONTROLLERS if c not in delegated]
        if missing:
            _warn_once(
                f"os: cgroup v2 controller(s) {', '.join(missing)} not delegated to {base} (its cgroup.subtree_control: "
                f"{' '.join(sorted(delegated)) or 'empty'}); using rlimits instead (memory per process, pid count by scanning)"
            )
            return
        path = base / name
        path.mkdir()
        self.dirs.append(path)
        _write(path / "memory.max", str(_memory_budget(limits)))
        with contextlib.suppress(OSError):  # absent without swap accounting
            _write(path / "memory.swap.max", "0")
        _write(path / "pids.max", str(limits.pids + _OWN_PROCESSES))
        self.memory = self.pids = path

    def _v1(self, root: Path, self_cgroup: Path, name: str, limits: Limits) -> None:
        for ctrl in _CONTROLLERS:
            hier = root / ctrl
            if not hier.is_dir():
                continue
            path = hier / _own_cgroup(ctrl, self_cgroup).lstrip("/") / name
            try:
                path.mkdir()
            except OSError:
                continue
            self.dirs.append(path)
            if ctrl == "memory":
                _write(path / "memory.limit_in_bytes", str(_memory_budget(limits)))
                with contextlib.suppress(OSError):
                    _write(path / "memory.memsw.limit_in_bytes", str(_memory_budget(limits)))
                self.memory = path
            else:
                _write(path / "pids.max", str(limits.pids + _OWN_PROCESSES))
                self.pids = path
        if self.memory is None or self.pids is None:
            _warn_once("os: cgroup v1 memory/pids hierarchies are not writable here; using rlimits for what is missing")

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids_in(self) -> list[int]:
        return _read_pids(self.pids) if self.pids is not None else []

    def remove(self) -> None:
        """Remove the episode's cgroup directories (killing stragglers first); never raises."""
        deadline = time.monotonic() + 2.0
        while self.dirs and not self._try_remove() and time.monotonic() < deadline:
            time.sleep(0.001)
        self.dirs = []

    def _try_remove(self) -> bool:
        left = []
        for d in self.dirs:
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append(d)
                for pid in _read_pids(d):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        self.dirs = left
        return not left


_OWN_PROCESSES = 3  # the warden, bubblewrap's monitor and the keeper
_WARDEN_MB = 32  # the warden's own memory, in the episode's cgroup (it is never the one killed: oom_score_adj)


def _memory_budget(limits: Limits) -> int:
    """memory.max in bytes: the processes' limit plus the episode's in-memory files (its disk and /dev/shm
    are tmpfs, charged to the same cgroup): a full disk is ENOSPC, never an out-of-memory kill."""
    return (limits.memory_mb + limits.disk_mb + limits.shm_mb + _WARDEN_MB) << 20


def _own_cgroup(controller: str, self_cgroup: Path = Path("/proc/self/cgroup")) -> str:
    for line in self_cgroup.read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if (controller == "" and ctrls == "") or controller in ctrls.split(","):
            return path
    return "/"


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


class SandboxProcess:
    """A process the warden started inside the sandbox: its host pid and an awaitable exit status."""

    def __init__(self, pid: int, exited: asyncio.Future[int]) -> None:
        self.pid = pid
        self._exited = exited

    @property
    def returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() and not self._exited.cancelled() else None

    async def wait(self) -> int:
        """The exit status (negative: killed by that signal)."""
        return await asyncio.shield(self._exited)


class _Channel:
    """The engine's end of the warden's socket: JSON packets, descriptors alongside, on the event loop."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        sock.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._waiters: dict[tuple[str, Any], asyncio.Future[tuple[dict[str, Any], list[int]]]] = {}
        self._early: dict[tuple[str, Any], tuple[dict[str, Any], list[int]]] = {}
        self.closed: asyncio.Future[str] = self._loop.create_future()
        self._loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self._sock, 1 << 22, 8)  # type: ignore[attr-defined]
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            data, fds = b"", []
            self._finish(f"the warden's socket failed ({exc})")
            return
        if not data:
            self._finish("the warden exited")
            return
        msg = marshal.loads(data)
        for kind in ("spawned", "exited", "killed", "tampered", "unshared", "ready", "error", "sandbox_exited"):
            if kind in msg:
                key = (kind, msg.get("id") if kind in ("killed", "tampered") else (msg[kind] if kind in ("spawned", "exited") else None))
                waiter = self._waiters.pop(key, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result((msg, fds))
                else:
                    self._early[key] = (msg, fds)
                if kind in ("error", "sandbox_exited"):
                    self._finish(msg.get("error") or "the sandbox's pid 1 exited")
                return

    def _finish(self, why: str) -> None:
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        if not self.closed.done():
            self.closed.set_result(why)
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(EnvError(f"os: {why}"))
        self._waiters.clear()

    def expect(self, kind: str, key: Any = None) -> asyncio.Future[tuple[dict[str, Any], list[int]]]:
        fut: asyncio.Future[tuple[dict[str, Any], list[int]]] = self._loop.create_future()
        if (kind, key) in self._early:
            fut.set_result(self._early.pop((kind, key)))
        elif self.closed.done() and kind != "exited":
            fut.set_exception(EnvError(f"os: {self.closed.result()}"))
        else:
            self._waiters[(kind, key)] = fut
        return fut

    async def send(self, msg: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
        if self.closed.done():
            raise EnvError(f"os: {self.closed.result()}")
        data = marshal.dumps(msg)
        while True:
            try:
                if fds:
                    socket.send_fds(self._sock, [data], list(fds))
                else:
                    self._sock.send(data)
                return
            except BlockingIOError:
                writable: asyncio.Future[None] = self._loop.create_future()
                self._loop.add_writer(self._sock.fileno(), lambda: writable.done() or writable.set_result(None))
                try:
                    await writable
                finally:
                    self._loop.remove_writer(self._sock.fileno())
            except OSError as exc:
                self._finish(f"the warden's socket failed ({exc})")
                raise EnvError(f"os: {self.closed.result()}") from None

    def close(self) -> None:
        self._finish("the sandbox was closed")
        self._sock.close()


class Sandbox:
    """A started sandbox; ``spawn()`` starts a program inside it (through the episode's warden)."""

    def __init__(self, limits: Limits, root: Path, idmap: IdMap | None = None) -> None:
        self.limits = limits
        self.root = root  # the read-only lower layer (see .rootfs), owned by ``idmap``'s range
        self.idmap = idmap or host_idmap()
        self.name = f"{_STATE_PREFIX}{_RUN_TAG}-{uuid.uuid4().hex[:12]}"
        self._state_dir: str | None = None
        self._warden: Child | None = None
        self._channel: _Channel | None = None
        self._stderr: Any = None  # the warden's own stderr (a host process; never handed to the sandbox)
        self._cgroups: _Cgroups | None = None
        self.keeper_pid: int = 0
        self._keep: set[int] = set()
        self._scan_hits = 0  # pid-limit hits found by scanning (no pids cgroup)
        self._next_id = 0

    def _pids(self) -> list[int]:
        """Host pids of the sandbox's processes: its pids cgroup, else a scan of its pid namespace."""
        if self._cgroups is not None and self._cgroups.pids is not None:
            return self._cgroups.pids_in()
        return _namespace_pids(self.keeper_pid) if self.keeper_pid else []

    async def start(self) -> None:
        await off_loop(self._prepare)
        assert self._state_dir is not None and self._cgroups is not None
        self._warden, ours, self._stderr = await _take_warden()
        self._channel = channel = _Channel(ours)
        try:
            config = {
                "engine_pid": os.getpid(), "lower": str(self.root), "state_dir": self._state_dir,
                "disk_mb": self.limits.disk_mb, "shm_mb": self.limits.shm_mb,
                "cgroup_procs": self._cgroups.procs_files, "seccomp": filter_program().hex(),
                "caps": list(CAPS), "hostname": HOSTNAME, "path": SANDBOX_PATH, "bwrap": _host_tool("bwrap"),
                "setgroups": self.idmap.setgroups, "nofile": self.limits.nofile,
            }  # fmt: skip
            unshared = channel.expect("unshared")
            await channel.send(config)
            msg, _ = await asyncio.wait_for(unshared, timeout=30)
            await off_loop(self.idmap.apply, int(msg["unshared"]))
            ready = channel.expect("ready")
            await channel.send({"mapped": True})
            msg, _ = await asyncio.wait_for(ready, timeout=30)
            self.keeper_pid = int(msg["keeper"])
            self._keep = {self.keeper_pid, int(msg["bwrap"]), self._warden.pid}
        except (asyncio.TimeoutError, EnvError, OSError, ValueError, KeyError) as exc:
            why = await self._failure(exc)
            await self.close()
            raise EnvError(f"os: the sandbox did not start: {why}") from None

    async def _failure(self, exc: BaseException) -> str:
        """Why the start failed: the warden's own message, its stderr, else the exception."""
        if self._channel is not None and self._channel.closed.done():
            why = self._channel.closed.result()
            if not why.startswith(("the warden exited", "the warden's socket")):
                return why
        if self._warden is not None:
            await kill_process_group(self._warden, timeout=2)
        err = b""
        if self._stderr is not None:
            self._stderr.seek(0)
            err = self._stderr.read(4000)
        text = " ".join(err.decode(errors="replace").split())
        return text[-600:] or str(exc) or type(exc).__name__

    def _prepare(self) -> None:
        """The host-side state: a private folder (mount point of the tmpfs), the cgroup, a stderr file."""
        _sweep_stale()
        self._state_dir = tempfile.mkdtemp(prefix=self.name + "-")
        os.chmod(self._state_dir, 0o700)
        self._cgroups = _Cgroups(self.name, self.limits)

    def _cleanup(self) -> None:
        if self._cgroups is not None:
            cg, self._cgroups = self._cgroups, None
            cg.remove()
        if self._state_dir is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._state_dir)
            self._state_dir = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def spawn(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        check: bool = False,
        stdio: tuple[int, int, int] | None = None,
        extra_fds: tuple[int, ...] = (),
        tty: bool = False,
    ) -> tuple[SandboxProcess, int]:
        """Start ``argv`` inside, as the sandbox's root, cwd ``/``, with only ``env`` (plus HOME and PATH).

        ``stdio``: the child's fds 0-2 (pipes the caller made); ``extra_fds`` become 3, 4, ...; ``tty``: a
        terminal of the sandbox's own devpts instead, whose master end is returned (else -1). ``check``: the
        interpreters, libraries, loader files and PATH come from the pristine image (see :mod:`._warden`),
        for episodes that changed them (:meth:`tampered`). Never blocks on
        the sandbox: the warden forks, the caller awaits."""
        if self._channel is None or not self.keeper_pid:
            raise EnvError("os: the sandbox is not running")
        base_env = {"HOME": "/root", "PATH": CHECK_PATH if check else SANDBOX_PATH}
        base_env.update(env or {})
        self._next_id += 1
        rid = self._next_id
        lim = self.limits
        rlimits = {"RLIMIT_CORE": 0, "RLIMIT_CPU": lim.cpu_seconds}
        if self._cgroups is None or self._cgroups.memory is None:
            rlimits["RLIMIT_AS"] = lim.memory_mb << 20
        if (self._cgroups is None or self._cgroups.pids is None) and os.geteuid() != 0:
            # an ordinary user's engine cannot scan the sandbox's processes (they are not its uid): the kernel
            # counts them instead, per user of the episode's own user namespace (root scans, see pids_limit_hit)
            rlimits["RLIMIT_NPROC"] = lim.pids
        request = {
            "op": "spawn", "id": rid, "argv": argv, "env": base_env, "mode": "check" if check else "agent",
            "tty": tty, "rlimits": rlimits,
        }  # fmt: skip
        spawned = self._channel.expect("spawned", rid)
        exited = self._channel.expect("exited", rid)
        await self._channel.send(request, () if tty else (*(stdio or ()), *extra_fds))
        msg, fds = await spawned
        if msg.get("error"):
            with contextlib.suppress(asyncio.CancelledError, EnvError):
                await exited
            for fd in fds:
                os.close(fd)
            raise EnvError(f"os: could not start {argv[0]} in the sandbox: {msg['error']}")
        exit_code: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def _done(fut: asyncio.Future[tuple[dict[str, Any], list[int]]]) -> None:
            if exit_code.done():
                return
            if fut.cancelled() or fut.exception() is not None:
                exit_code.set_result(-9)  # the warden (so the sandbox) is gone
            else:
                exit_code.set_result(int(fut.result()[0]["status"]))

        exited.add_done_callback(_done)
        return SandboxProcess(int(msg["pid"]), exit_code), (fds[0] if fds else -1)

    async def tampered(self) -> list[str]:
        """Paths where the episode changed what checks run (executables, libraries, loader files, commands
        shadowing pristine ones); empty for an episode that left them alone."""
        if self._channel is None:
            raise EnvError("os: the sandbox is not running")
        self._next_id += 1
        done = self._channel.expect("tampered", self._next_id)
        await self._channel.send({"op": "tampered", "id": self._next_id})
        msg, _ = await asyncio.wait_for(done, timeout=60)
        return [str(p) for p in msg["tampered"]]

    async def kill(self, pids: list[int], sig: int = signal.SIGKILL) -> None:
        """Signal processes of the sandbox (host pids); the warden does it, it may where the engine may not."""
        if self._channel is not None and not self._channel.closed.done():
            with contextlib.suppress(EnvError):
                await self._channel.send({"op": "kill", "pids": pids, "signal": int(sig)})

    async def kill_group(self, pgid: int, sig: int = signal.SIGKILL) -> None:
        if self._channel is not None and not self._channel.closed.done():
            with contextlib.suppress(EnvError):
                await self._channel.send({"op": "killpg", "pgid": pgid, "signal": int(sig)})

    async def kill_all_but(self, keep: set[int]) -> int:
        """SIGKILL every sandbox process outside ``keep`` (host pids) and the sandbox's own; after a fork bomb."""
        if self._channel is None or self._channel.closed.done():
            return 0
        killed = 0
        for _ in range(100):
            self._next_id += 1
            done = self._channel.expect("killed", self._next_id)
            try:
                await self._channel.send({"op": "kill_all_but", "id": self._next_id, "keep": sorted(keep | self._keep)})
                msg, _ = await asyncio.wait_for(done, timeout=10)
            except (EnvError, asyncio.TimeoutError):
                break
            if not msg["killed"]:
                break
            killed += int(msg["killed"])
        return killed

    def pids_limit_hit(self) -> int:
        """How many times a fork was refused by the pid limit so far (cgroup counter).

        Without a pids cgroup: how many times a scan found more processes than the limit allows.
        """
        if self._cgroups is None or self._cgroups.pids is None:
            if self.keeper_pid and len(_namespace_pids(self.keeper_pid)) > self.limits.pids:
                self._scan_hits += 1
            return self._scan_hits
        return _counter(self._cgroups.pids / "pids.events", "max")

    def oom_kills(self) -> int:
        """How many processes the episode's memory limit has killed so far (0 without a memory cgroup)."""
        if self._cgroups is None or self._cgroups.memory is None:
            return 0
        path = self._cgroups.memory
        if (path / "memory.events").exists():
            return _counter(path / "memory.events", "oom_kill")
        return _counter(path / "memory.oom_control", "oom_kill")

    async def close(self) -> None:
        """Kill everything in the sandbox and remove its state. Never raises."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        warden, self._warden = self._warden, None
        if warden is not None:  # bubblewrap dies with it, and every process inside with pid 1
            await kill_process_group(warden, timeout=10)
        with contextlib.suppress(Exception):
            await off_loop(self._cleanup)
        self.keeper_pid = 0


_WARDENS_AHEAD = 2
_idle_wardens: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[asyncio.Task[tuple[Child, socket.socket, Any]]]] = (
    weakref.WeakKeyDictionary()
)


async def _spawn_warden() -> tuple[Child, socket.socket, Any]:
    """A warden process, started and waiting for its sandbox's config (Python's start-up done)."""
    stderr = tempfile.TemporaryFile()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        child = await spawn(
            [sys.executable, "-I", "-S", str(_WARDEN), str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            pass_fds=(theirs.fileno(),), env={"PATH": SANDBOX_PATH, "LC_ALL": "C.UTF-8"},
        )  # fmt: skip
    except BaseException:
        ours.close()
        stderr.close()
        raise
    finally:
        theirs.close()
    return child, ours, stderr


async def _take_warden() -> tuple[Child, socket.socket, Any]:
    """A warden from the ones started ahead on this event loop (then one more is started), else a new one.
    Idle wardens exit by themselves when their socket closes (the loop or the process ends)."""
    loop = asyncio.get_running_loop()
    ahead = _idle_wardens.setdefault(loop, [])
    while len(ahead) < _WARDENS_AHEAD + 1:
        ahead.append(loop.create_task(_spawn_warden()))
    return await ahead.pop(0)


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, val = line.partition(" ")
            if name == key:
                return int(val)
    except (OSError, ValueError):
        return 0
    return 0


def _namespace_pids(member: int) -> list[int]:
    """Host pids of every process in the pid namespace of ``member``."""
    try:
        ns = os.readlink(f"/proc/{member}/ns/pid")
    except OSError:
        return []
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry.name}/ns/pid") == ns:
                    found.append(int(entry.name))
    return found
