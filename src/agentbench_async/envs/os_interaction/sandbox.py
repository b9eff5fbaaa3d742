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
privilege than the agent. They live in the episode's cgroup (memory, pids, freezer) when the host delegates
those controllers, else under rlimits (see ``_Cgroups``); the task's example and check scripts in the checks'
sibling cgroup, while the episode's is frozen (:meth:`Sandbox.stop_model`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ...errors import EnvError, EnvUnavailableError
from .cgroups import Cgroups as _Cgroups
from .cgroups import counter, kill_dirs
from .control import PID1_EXITED, RemoteProcess, WardenChannel, take_warden
from .idmap import ID_COUNT, OWNER_BASE, OWNER_COUNT, ROOT_ID_BASE, IdMap, host_idmap
from .limits import Limits
from .process import kill_process_group, off_loop
from .seccomp import filter_program
from .spawn_helper import spawn_helper

__all__ = ["CAPS", "ROOT_ID_BASE", "IdMap", "Limits", "Sandbox", "SandboxProcess", "check_available", "host_idmap"]

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# a check's environment (its PATH is the agent's: checks may count its entries; no command of the episode's hides
# one of the image's there, see _warden.UNION_DIRS): no user site-packages (``~/.local`` is the episode's), no bytecode written, no system git
# configuration (the episode's /etc/gitconfig could name a program for git to run)
CHECK_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "GIT_CONFIG_NOSYSTEM": "1"}
HOSTNAME = "agentbench"
# What root inside the sandbox may do: own files, change modes/owners, switch users, signal its own
# processes — all only inside its user namespace. No CAP_SYS_ADMIN (mounts), CAP_MKNOD, CAP_NET_*, CAP_SYS_PTRACE.
CAPS = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "AUDIT_WRITE")
_TOOLS = ("bwrap",)
_SPAWN_TIMEOUT = 60.0  # the warden forks and the child execs: milliseconds, unless the machine is stuck
_STATE_PREFIX = "agentbench-os-"


def _process_tag(pid: int) -> str | None:
    """``<pid>.<start time>`` of a live process (its name on our state folders and cgroups), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return f"{pid}.{stat.rsplit(')', 1)[1].split()[19]}"


_RUN_TAG = _process_tag(os.getpid()) or str(os.getpid())


@functools.cache
def _host_tool(name: str) -> str:
    """The host's own binary by absolute path (resolved before anything enters the sandbox; once a process)."""
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
        end = OWNER_BASE + OWNER_COUNT  # the sandboxes' ids, then their namespaces' owners
        clash = sorted(i for i in _owned_ids(etc / "passwd") | _owned_ids(etc / "group") if ROOT_ID_BASE <= i < end)
        if clash:
            raise EnvUnavailableError(
                f"os: host account id {clash[0]} lies in the sandbox's id range {ROOT_ID_BASE}-{end - 1}; "
                "sandbox root and the owners of the sandboxes' namespaces must be ids no host account owns"
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
    stale = []
    for path in candidates:
        tag = path.name.removeprefix(_STATE_PREFIX).split("-", 1)[0]
        pid, _, _start = tag.partition(".")
        if pid.isdigit() and _process_tag(int(pid)) != tag:  # else a live engine's (or not ours)
            stale.append(path)
    cgroups = [p for p in stale if p.is_dir() and str(p).startswith(str(cgroup_root))]
    # a frozen episode's processes die only once thawed (v1): killed by the group, the freezers' folders first
    frozen = [p for p in cgroups if (p / "freezer.state").exists() or (p / "cgroup.freeze").exists()]
    for path in frozen:
        kill_dirs([path], path, 1.0)
    if cgroups:
        kill_dirs([p for p in cgroups if p not in frozen], None, 1.0)
    for path in stale:  # cgroups, and the empty mount points (the tmpfs went with its mount namespace)
        with contextlib.suppress(OSError):
            path.rmdir()


def _own_cgroup_dirs(top: Path) -> list[Path]:
    """Where this process makes episode cgroups under hierarchy ``top`` (v2 root or a v1 controller)."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if (top.name in ("cgroup", "unified") and ctrls == "") or top.name in ctrls.split(","):
                out.append(top / path.lstrip("/"))
    return out


_swept = False


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


class Sandbox:
    """A started sandbox; ``spawn()`` starts a program inside it (through the episode's warden)."""

    def __init__(self, limits: Limits, root: Path, idmap: IdMap | None = None) -> None:
        self.limits = limits
        self.root = root  # the read-only lower layer (see .rootfs), owned by ``idmap``'s range
        self.idmap = idmap or host_idmap()
        self.name = f"{_STATE_PREFIX}{_RUN_TAG}-{uuid.uuid4().hex[:12]}"
        self._state_dir: str | None = None
        self._warden: RemoteProcess | None = None
        self._channel: WardenChannel | None = None
        self._stderr: Any = None  # the warden's own stderr (a host process; never handed to the sandbox)
        self._cgroups: _Cgroups | None = None
        self.keeper_pid: int = 0
        self._keep: set[int] = set()
        self._scan_hits = 0  # pid-limit hits found by scanning (no pids cgroup)
        self._frozen = False  # the episode's cgroup frozen for its checks (stop_model) and not thawed since
        self._helper: str | None = None  # the spawn helper the warden starts processes with (see .spawn_helper)
        self._next_id = 0

    def _pids(self) -> list[int]:
        """Host pids of the sandbox's processes: its pids cgroup, else a scan of its pid namespace."""
        if self._cgroups is not None and self._cgroups.pids is not None:
            return self._cgroups.pids_in()
        return _namespace_pids(self.keeper_pid) if self.keeper_pid else []

    async def start(self) -> None:
        await off_loop(self._prepare)
        assert self._state_dir is not None and self._cgroups is not None
        self._warden, ours, self._stderr = await take_warden()
        self._channel = channel = WardenChannel(ours)
        try:
            config = {
                "lower": str(self.root), "state_dir": self._state_dir,
                "disk_mb": self.limits.disk_mb, "shm_mb": self.limits.shm_mb,
                "cgroup_procs": self._cgroups.procs_files, "check_procs": self._cgroups.checks.procs_files,
                "seccomp": filter_program().hex(),
                "caps": list(CAPS), "hostname": HOSTNAME, "path": SANDBOX_PATH, "bwrap": _host_tool("bwrap"),
                "setgroups": self.idmap.setgroups, "nofile": self.limits.nofile, "idmap": self.idmap.config(),
                "owners": (OWNER_BASE, OWNER_COUNT) if os.geteuid() == 0 else None, "spawn_helper": self._helper,
            }  # fmt: skip
            ready = channel.expect("ready")
            mapping = None if self.idmap.helper else channel.expect("map")
            await channel.send(config)
            deadline = asyncio.get_running_loop().time() + 30
            if mapping is not None:  # the warden has made its user namespace: its id maps, written from here
                await asyncio.wait_for(mapping, timeout=30)
                try:
                    self.idmap.write(self._warden.pid)
                    why = ""
                except OSError as exc:
                    why = str(exc)
                await channel.send({"op": "mapped", "error": why})
            msg, _ = await asyncio.wait_for(ready, timeout=max(0.0, deadline - asyncio.get_running_loop().time()))
            self.keeper_pid = int(msg["keeper"])
            self._keep = {self.keeper_pid, int(msg["bwrap"]), self._warden.pid}
            _protect_from_oom(self.keeper_pid, int(msg["bwrap"]))
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
        self._helper = spawn_helper()  # built the first time (once a machine)
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

    def running(self) -> bool:
        """Whether the sandbox is up (started, its warden still there)."""
        return self._channel is not None and not self._channel.closed.done() and bool(self.keeper_pid)

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
        terminal of the sandbox's own devpts instead (80 columns, 24 rows, no echo), whose master end is returned
        (else -1). ``check``: a check, whose tools (executables, libraries, loader, NSS, Python's site, ...: ``_warden.TOOL_DIRS``)
        are the pristine image's over the episode's (see ``_warden.UNION_DIRS``). Never blocks on the sandbox: the warden
        forks, the caller awaits."""
        if self._channel is None or not self.keeper_pid:
            raise EnvError("os: the sandbox is not running")
        base_env = {"HOME": "/root", "PATH": SANDBOX_PATH, **(CHECK_ENV if check else {})}
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
        try:
            msg, fds = await asyncio.wait_for(spawned, timeout=_SPAWN_TIMEOUT)
        except asyncio.TimeoutError:
            raise EnvError(f"os: the sandbox did not start {argv[0]} within {_SPAWN_TIMEOUT:g} s") from None
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

    async def _request(self, op: str, reply: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """Send the warden ``op`` and wait for its ``reply``."""
        if self._channel is None:
            raise EnvError("os: the sandbox is not running")
        self._next_id += 1
        done = self._channel.expect(reply, self._next_id)
        await self._channel.send({"op": op, "id": self._next_id, **fields})
        try:
            msg, _ = await asyncio.wait_for(done, timeout=timeout)
        except asyncio.TimeoutError:
            raise EnvError(f"os: the sandbox's warden did not answer {op} within {timeout:g} s") from None
        return msg

    @property
    def freezable(self) -> bool:
        """Whether the episode's processes can be frozen as a group (a cgroup freezer); else they are killed."""
        return self._cgroups is not None and self._cgroups.freezer is not None

    async def stop_model(self) -> str | None:
        """At the end of the model's turns, before the first check: every process of the episode frozen as a group
        (nothing inside can thaw it; processes a check counts are still there), or, without a freezer, every one but
        pid 1 killed. Returns why that could not be done (a process that stays in an uninterruptible wait), else None."""
        if self._cgroups is not None and self._cgroups.freezer is not None:
            self._frozen = True
            if await off_loop(self._cgroups.freeze):
                return None
            return "the episode's processes could not be frozen before the checks"
        await self.kill_all_but(set())
        return None

    async def resume_model(self) -> None:
        """Thaw the episode's processes (after its checks: only a session that goes on needs them running)."""
        if self._cgroups is not None and self._cgroups.freezer is not None:
            await off_loop(self._cgroups.thaw)
            self._frozen = False

    async def clear_checks(self, pgid: int) -> None:
        """After a check (or example) whose process was ``pgid``: whatever it left running, so the next starts alone
        (the checks' cgroup killed by the group; without one, the check's process group)."""
        if self._cgroups is not None and self._cgroups.checks.dirs:
            if self._cgroups.checks.occupied():  # the usual check leaves nothing: no thread for that
                await off_loop(self._cgroups.checks.kill)
        else:
            await self.kill_group(pgid)

    def ended_by_episode(self) -> bool:
        """Whether the sandbox ended because its pid 1 did (the episode's memory, or its processes, took it down:
        the model's doing) rather than its warden (the host's)."""
        return self._channel is not None and self._channel.closed.done() and self._channel.closed.result() == PID1_EXITED

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
        return counter(self._cgroups.pids / "pids.events", "max")

    def oom_kills(self) -> int:
        """How many processes the episode's memory limit has killed so far (0 without a memory cgroup)."""
        if self._cgroups is None or self._cgroups.memory is None:
            return 0
        path = self._cgroups.memory
        if (path / "memory.events").exists():
            return counter(path / "memory.events", "oom_kill")
        return counter(path / "memory.oom_control", "oom_kill")

    async def close(self) -> None:
        """Kill everything in the sandbox and remove its state. Never raises."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        if self._frozen and self._cgroups is not None:
            # by the group: a frozen process (v1) dies only once thawed, and pid 1 cannot end before the others
            with contextlib.suppress(Exception):
                await off_loop(self._cgroups.kill)
        warden, self._warden = self._warden, None
        if warden is not None:  # bubblewrap dies with it, and every process inside with pid 1
            await kill_process_group(warden, timeout=10)
        with contextlib.suppress(Exception):
            await off_loop(self._cleanup)
        self.keeper_pid = 0


def _protect_from_oom(*pids: int) -> None:
    """Never the OOM killer's choice: the sandbox's pid 1 and bubblewrap's monitor (whose end ends it), so an episode
    that fills its memory loses its own processes, not its sandbox. Needs CAP_SYS_RESOURCE on the host (root); an
    ordinary user's engine leaves them as they are (a sandbox that ends then is the model's failure, see grading)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")


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
