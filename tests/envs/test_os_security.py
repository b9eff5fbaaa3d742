"""os: the sandbox against a hostile model — each attack of issue 19 run for real, and it must fail.

Root in the sandbox is an unowned id range of the host (user namespace), a seccomp filter refuses the calls
that reach past it, the warden starts every process (nothing from the writable root runs privileged), and
checks run the pristine image's interpreters: the exploits below get nothing, and nothing on the host changes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from agentbench_async.envs.os_interaction import OSEnvironment
from agentbench_async.envs.os_interaction import sandbox as sandbox_mod
from agentbench_async.envs.os_interaction.grading import grade, run_script
from agentbench_async.errors import EnvError
from support import require

from test_os_sandbox import _Episode, os_root, sandboxed  # noqa: F401  (fixtures)

# Python run inside the sandbox by the agent: the raw syscalls of each attack, printing errno names.
_PROBE = r"""
import ctypes, errno, os, struct
libc = ctypes.CDLL(None, use_errno=True)
def err(): return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
out = []
# shocker: a file handle of the root of whatever file system each inherited fd lives on, then open it
for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
    buf = ctypes.create_string_buffer(struct.pack("II", 128, 0) + b"\0" * 128)
    mount_id = ctypes.c_int()
    rc = libc.name_to_handle_at(fd, b"", buf, ctypes.byref(mount_id), 0x1000)
    out.append(f"name_to_handle_at fd{fd}={rc if rc >= 0 else err()}")
    h = ctypes.create_string_buffer(struct.pack("Ii", 8, 1) + struct.pack("II", 2, 0))
    rc = libc.open_by_handle_at(fd, h, 0)
    out.append(f"open_by_handle_at fd{fd}={'OPENED' if rc >= 0 else err()}")
SYS = {"add_key": 248, "keyctl": 250, "ptrace": 101, "unshare": 272, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323}
rc = libc.syscall(SYS["add_key"], b"user", b"stolen", b"secret", 6, -4)  # KEY_SPEC_USER_KEYRING
out.append(f"add_key={'ADDED' if rc >= 0 else err()}")
rc = libc.syscall(SYS["keyctl"], 0, -4, 0)  # KEYCTL_GET_KEYRING_ID of @u
out.append(f"keyctl={'READ' if rc >= 0 else err()}")
rc = libc.syscall(SYS["ptrace"], 16, 1, 0, 0)  # PTRACE_ATTACH to the keeper (pid 1)
out.append(f"ptrace={'ATTACHED' if rc >= 0 else err()}")
rc = libc.syscall(SYS["unshare"], 0x10000000)  # a nested user namespace
out.append(f"unshare_user={'NESTED' if rc >= 0 else err()}")
rc = libc.syscall(SYS["bpf"], 0, 0, 0)
out.append(f"bpf={'BPF' if rc >= 0 else err()}")
rc = libc.syscall(SYS["userfaultfd"], 0)
out.append(f"userfaultfd={'UFFD' if rc >= 0 else err()}")
status = open("/proc/self/status").read()
out += [line.replace("\t", " ") for line in status.splitlines() if line.startswith(("CapEff", "CapBnd", "Seccomp:", "NoNewPrivs"))]
out.append("uid_map=" + " ".join(open("/proc/self/uid_map").read().split()))
print("\n".join(out))
"""
_ATTACK_NAMES = ("open_by_handle_at", "add_key", "keyctl", "ptrace", "unshare_user", "bpf", "userfaultfd")


def _probe_results(out: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found.setdefault(key.split()[0], value) if key.startswith("open_by_handle_at") else found.update({key: value})
    return found


async def test_no_capability_reaches_the_host(sandboxed: None) -> None:
    """File handles, keyrings, ptrace, nested namespaces, bpf: refused in the agent's shell and in checks."""
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        await ep.sh("cat > /tmp/probe.py <<'PY'\n" + _PROBE + "\nPY")
        shell_out = await ep.sh("python3 /tmp/probe.py")
        code, check_out = await run_script(ep.session._sandbox, {"language": "python", "code": _PROBE}, [], 30, check=True)
        assert code == 0, check_out
        for out in (shell_out, check_out):
            assert "OPENED" not in out and "ADDED" not in out and "ATTACHED" not in out and "NESTED" not in out, out
            assert "open_by_handle_at fd0=EPERM" in out and "add_key=EPERM" in out and "ptrace=EPERM" in out, out
            assert "unshare_user=EPERM" in out and "bpf=EPERM" in out, out
            assert "Seccomp: 2" in out and "NoNewPrivs: 1" in out, out
            # root inside is the unowned range on the host, not host root
            assert f"uid_map=0 {sandbox_mod.ROOT_ID_BASE} 65536" in out, out
            cap_eff = int(next(line.split()[1] for line in out.splitlines() if line.startswith("CapEff")), 16)
            assert cap_eff & ~0x200000FF == 0, out  # nothing beyond the sandbox's own set (no SYS_ADMIN, ...)
        # seen from the host, the shell runs as that unowned id
        shell_pid = ep.session._shell._shell_pid
        uids = Path(f"/proc/{shell_pid}/status").read_text().split("Uid:")[1].split()[:4]
        assert {int(u) for u in uids} == {sandbox_mod.ROOT_ID_BASE}


async def test_host_settings_devices_and_processes_stay_untouched(sandboxed: None) -> None:
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    overcommit = Path("/proc/sys/vm/overcommit_ratio").read_text()
    full = os.stat("/dev/full")
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        out = await ep.sh(
            "echo '|/tmp/pwn' > /proc/sys/kernel/core_pattern; echo 99 > /proc/sys/vm/overcommit_ratio; "
            "echo b > /proc/sysrq-trigger; chmod 600 /dev/full; touch /dev/full; chown 1000 /dev/null; echo done"
        )
        assert "done" in out
        out = await ep.sh("ps -eo args | grep -c -e '[_]warden' -e '[a]gentbench_async' -e '[p]ytest'")
        assert out.split()[-1] == "0", out  # the warden (and the engine) are not in the sandbox
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
    assert Path("/proc/sys/vm/overcommit_ratio").read_text() == overcommit
    after = os.stat("/dev/full")
    assert (after.st_mode, after.st_mtime_ns, after.st_uid) == (full.st_mode, full.st_mtime_ns, full.st_uid)
    assert os.stat("/dev/null").st_uid == 0


def _answer_task(language: str) -> dict[str, Any]:
    if language == "compare":  # as most official records: the example's output, then check/integer-match.py
        return {"check": [None, {"language": "compare", "code": "integer-match"}], "example": {"language": "bash", "code": "echo 42"}}
    code = (
        "import sys\nsys.exit(0 if sys.argv[1].strip() == '42' else 1)\n"
        if language == "python"
        else '[ "$(printf %s "$1" | tr -d "[:space:]")" = 42 ] && [ "$(echo 42 | wc -l)" = 1 ]'
    )
    return {"check": [{"language": language, "code": code}]}


# Everything a check could run from the episode's root, replaced by something that says "correct".
_RIG = r"""
for f in /usr/bin/bash /usr/bin/python3.11 /usr/bin/env /usr/bin/setpriv /usr/bin/dash /usr/bin/tr /usr/bin/wc /usr/bin/printf; do
  printf '#!/bin/sh\nexit 0\n' > /tmp/fake && chmod 755 /tmp/fake && cp /tmp/fake "$f.new" && mv "$f.new" "$f"
done
for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do for t in python3 bash sh tr wc; do
  [ -e "$d/$t" ] || { cp /tmp/fake "$d/$t" 2>/dev/null; }; done; done
echo /tmp/evil.so > /etc/ld.so.preload
printf 'junk' > /tmp/libc && mv /tmp/libc /usr/lib/x86_64-linux-gnu/libc.so.6
"""


@pytest.mark.parametrize("language", ["python", "bash", "compare"])
async def test_rigged_interpreters_libc_and_path_do_not_change_the_verdict(sandboxed: None, language: str) -> None:
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        sandbox = ep.session._sandbox
        assert (await grade(sandbox, _answer_task(language), "42", 30))[0]
        code, out = await run_script(sandbox, {"language": "bash", "code": _RIG}, [], 30)
        assert code == 0, out
        # the episode is wrecked: its own interpreters say "correct" or no longer start at all
        try:
            code, _ = await run_script(sandbox, {"language": "bash", "code": "exit 1"}, [], 30)
            assert code != 1
        except EnvError as exc:
            assert "could not start" in str(exc)
        ok, details = await grade(sandbox, _answer_task(language), "999999", 30)
        assert not ok, details
        ok, details = await grade(sandbox, _answer_task(language), "42", 30)
        assert ok, details
        # the planted setpriv/env/interpreters give a check no capability (the 'second route' of issue 19)
        code, out = await run_script(sandbox, {"language": "python", "code": _PROBE}, [], 30, check=True)
        assert code == 0 and "Seccomp: 2" in out, out
        cap_eff = int(next(line.split()[1] for line in out.splitlines() if line.startswith("CapEff")), 16)
        assert cap_eff & ~0x200000FF == 0, out


async def test_answers_of_any_size_and_content_reach_the_check(sandboxed: None) -> None:
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        sandbox = ep.session._sandbox
        big = "7" * (300 << 10)  # over Linux's 128 KiB limit for one argv string
        task = {"check": [{"language": "python", "code": f"import sys\nsys.exit(0 if sys.argv[1] == '7' * {300 << 10} else 1)"}]}
        assert (await grade(sandbox, task, big, 30))[0]
        task = {"check": [{"language": "python", "code": "import sys\nsys.exit(0 if sys.argv[1] == 'a\\x00b' else 1)"}]}
        assert (await grade(sandbox, task, "a\0b", 30))[0]
        task = {"check": [{"language": "bash", "code": '[ "$1" = ab ] && [ "$#" = 1 ]'}]}
        assert (await grade(sandbox, task, "a\0b", 30))[0]  # bash cannot hold NUL: it is dropped


async def test_a_full_disk_is_enospc_and_memory_kills_are_named(sandboxed: None) -> None:
    env = OSEnvironment(options={"memory_mb": 256, "disk_mb": 128, "command_timeout": 20})
    async with _Episode(env) as ep:
        out = await ep.sh("dd if=/dev/zero of=/big bs=1M count=300 2>&1 | grep -o 'No space left on device'; echo shell-alive")
        assert "No space left on device" in out and "shell-alive" in out and "out of memory" not in out, out
        out = await ep.sh("rm /big; dd if=/dev/zero of=/dev/shm/x bs=1M count=100 2>&1 | grep -o 'No space left on device'; rm /dev/shm/x")
        assert "No space left on device" in out, out
        cgroups = ep.session._sandbox._cgroups
        if cgroups is not None and cgroups.memory is not None:  # without a memory cgroup: RLIMIT_AS, no kill
            out = await ep.sh("python3 -c 'x = bytearray(1 << 30); x[::4096] = b\"1\" * len(x[::4096])'; echo rc=$?")
            assert "rc=137" in out and "ran out of memory (256 MiB)" in out, out
        assert "alive" in await ep.sh("echo alive")


async def test_a_huge_block_never_stalls_the_event_loop_and_cancels_at_once(sandboxed: None) -> None:
    env = OSEnvironment(options={"command_timeout": 3})
    async with _Episode(env) as ep:
        gaps: list[float] = []

        async def ticker() -> None:
            loop = asyncio.get_running_loop()
            last = loop.time()
            while True:
                await asyncio.sleep(0.02)
                gaps.append(loop.time() - last)
                last = loop.time()

        tick = asyncio.create_task(ticker())
        block = "sleep 100000\n" + "echo filler-line-to-fill-the-terminal-input-queue\n" * 1200  # ~60 KB
        out = await ep.sh(block)
        assert "interrupted" in out
        assert "alive" in await ep.sh("echo alive")
        step = asyncio.create_task(ep.sh(block))
        await asyncio.sleep(1)
        step.cancel()  # what Ctrl-C does to an episode in flight
        t0 = asyncio.get_running_loop().time()
        with pytest.raises(asyncio.CancelledError):
            await step
        assert asyncio.get_running_loop().time() - t0 < 2
        tick.cancel()
        assert max(gaps) < 0.5, max(gaps)


async def test_stale_state_of_killed_runs_is_swept(sandboxed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = tmp_path / f"{sandbox_mod._STATE_PREFIX}999999999.1-abcdef-x"
    alive = tmp_path / f"{sandbox_mod._STATE_PREFIX}{sandbox_mod._RUN_TAG}-abcdef-y"
    dead.mkdir()
    alive.mkdir()
    monkeypatch.setattr(sandbox_mod, "_swept", False)
    sandbox_mod._sweep_stale(tmp_path)
    assert not dead.exists() and alive.exists()


def test_sandbox_processes_die_with_a_killed_engine(sandboxed: None, tmp_path: Path) -> None:
    """kill -9 of the engine: the warden (PDEATHSIG) and so every sandbox process go with it."""
    script = tmp_path / "engine.py"
    script.write_text(
        "import asyncio, sys, os\n"
        "from agentbench_async.envs.os_interaction import OSEnvironment\n"
        "from test_os_sandbox import _Episode\n"
        "async def main():\n"
        "    async with _Episode(OSEnvironment(options={})) as ep:\n"
        "        await ep.sh('sleep 1000 &')\n"
        "        print(ep.session._sandbox.keeper_pid, flush=True)\n"
        "        await asyncio.sleep(1000)\n"
        "asyncio.run(main())\n"
    )
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), str(Path(__file__).parent), str(Path(__file__).parents[1])])}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    keeper = int(proc.stdout.readline())
    assert Path(f"/proc/{keeper}").exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for _ in range(100):
        if not Path(f"/proc/{keeper}").exists():
            break
        import time

        time.sleep(0.05)
    assert not Path(f"/proc/{keeper}").exists()


async def test_scripts_start_with_default_signal_handling(sandboxed: None) -> None:
    """The warden is Python (SIGPIPE ignored): its children must not inherit that, or `ls | head` in a check
    prints 'Broken pipe' into the output it compares (std-004-N225 failed that way)."""
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        for check in (False, True):
            code, out = await run_script(ep.session._sandbox, {"language": "bash", "code": "grep SigIgn /proc/self/status; yes | head -1"}, [], 30, check=check)
            assert code == 0 and out == "SigIgn:\t0000000000000000\ny\n", out


async def test_the_agents_processes_share_the_cpu_below_the_engine_and_cannot_raise_it(sandboxed: None) -> None:
    """A model's CPU-bound commands (an `apt` run, a busy loop) must not slow the engine's event loop, which times every
    model call: the agent's shell and the checks run 10 nice steps below the engine, and their scheduling groups
    (the kernel's autogroups, one per session) too; nothing inside can raise it back."""
    from agentbench_async.envs.os_interaction import control
    from agentbench_async.processes import HELPER_NICENESS

    expected = min(os.getpriority(os.PRIO_PROCESS, 0) + HELPER_NICENESS, 19)
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        stat_nice = "cut -d' ' -f19 /proc/self/stat"
        assert (await ep.sh(stat_nice)).split()[-1] == str(expected)
        raised = await ep.sh(f"renice -n 0 -p $$; nice -n -5 {stat_nice}")  # nice runs it anyway, at its own niceness
        assert raised.count("Permission denied") == 2 and raised.split()[-1] == str(expected), raised
        assert (await ep.sh(stat_nice)).split()[-1] == str(expected)
        for check in (False, True):
            code, out = await run_script(ep.session._sandbox, {"language": "bash", "code": stat_nice}, [], 30, check=check)
            assert code == 0 and out.strip() == str(expected), out
        autogroups = Path("/proc/sys/kernel/sched_autogroup_enabled")
        if os.geteuid() == 0 and autogroups.exists() and autogroups.read_text().strip() == "1":
            shell = ep.session._shell._proc
            zygote = control._zygote._proc  # noqa: SLF001 - the session of the wardens and of scripts
            assert shell is not None and zygote is not None
            for pid in (shell.pid, zygote.pid):
                assert Path(f"/proc/{pid}/autogroup").read_text().split()[-1] == str(expected)


# --- round 3 (issue 37): host paths, pid 1's memory, per-user kernel quotas, vsock, mountinfo -------------


async def test_a_dev_ptmx_linked_to_a_host_path_opens_nothing_of_the_host(sandboxed: None, tmp_path: Path) -> None:
    """The shell's restart opens its terminal through a handle of the sandbox's own devpts, never by a path the
    episode can replace: a /dev/ptmx linked to a host FIFO neither opens it nor ends the episode."""
    fifo = tmp_path / "host-fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    host_pts = set(os.listdir("/dev/pts"))
    env = OSEnvironment(options={})
    try:
        async with _Episode(env) as ep:
            assert "linked" in await ep.sh(f"rm -f /dev/ptmx; ln -s {fifo} /dev/ptmx; echo linked")
            await ep.sh("exit")  # the next command starts a new login shell (a new terminal)
            out = await ep.sh("tty; stat -f -c %T $(tty); echo alive")
            assert "alive" in out and "/dev/pts/" in out and "devpts" in out, out
        assert set(os.listdir("/dev/pts")) == host_pts  # no terminal of the host's devpts was made
        assert os.read(reader, 10) == b""  # nobody ever opened the FIFO for writing: no writer, end of file
    finally:
        os.close(reader)


async def test_pid_1_cannot_be_patched_or_killed_and_stays_readable(sandboxed: None) -> None:
    """/proc/1/mem (and its thread's), pid 1's OOM score: no opening them; /proc/1/fd still lists (find / as
    under Docker); the socket pid 1 blocks on cannot be opened; pid 1 ignores every signal from inside."""
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        probe = (
            "import os\n"
            "for p in ('/proc/1/mem', '/proc/1/task/1/mem', '/proc/1/oom_score_adj', '/proc/1/oom_adj'):\n"
            "    try:\n"
            "        os.close(os.open(p, os.O_RDWR)); print(p, 'OPENED')\n"
            "    except OSError as e:\n"
            "        print(p, e.strerror)\n"
            "for fd in os.listdir('/proc/1/fd'):\n"
            "    try:\n"
            "        if os.readlink(f'/proc/1/fd/{fd}').startswith('socket:'):\n"
            "            os.close(os.open(f'/proc/1/fd/{fd}', os.O_WRONLY)); print('socket OPENED')\n"
            "    except OSError as e:\n"
            "        print('socket', e.strerror)\n"
        )
        await ep.sh(f"cat > /tmp/p.py <<'PY'\n{probe}PY")
        out = await ep.sh("python3 /tmp/p.py; kill -9 1; kill -STOP 1; kill -SEGV 1; sleep 0.2; ps -o stat= -p 1; find / -xdev -path /proc -prune -o -name nothing-here -print 2>&1 | wc -l; find /proc/1 2>&1 | grep -c 'Permission denied'")
        assert "OPENED" not in out and out.count("Permission denied") >= 4, out
        assert "socket No such device or address" in out, out
        lines = out.split()
        assert lines[-2:] == ["0", "0"] and lines[-3].startswith("S"), out  # pid 1 sleeps on; /proc/1 reads clean
        assert "alive" in await ep.sh("echo alive")


async def test_each_episodes_kernel_quotas_are_its_own(sandboxed: None) -> None:
    """inotify instances and POSIX message queues are counted per user of the host: an episode that takes all it
    can leaves the host's root and another episode theirs (each episode's namespace has its own owner)."""
    import ctypes

    require(os.geteuid() == 0, "per-episode namespace owners need a root engine (an ordinary user's episodes share its quotas)")
    hog = (
        "import ctypes, os, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "n = 0\n"
        "while n < 100000 and libc.inotify_init() >= 0:\n"
        "    n += 1\n"
        "class A(ctypes.Structure):\n"
        "    _fields_ = [('f', ctypes.c_long), ('m', ctypes.c_long), ('s', ctypes.c_long), ('c', ctypes.c_long), ('r', ctypes.c_long * 4)]\n"
        "q = 0\n"
        "while q < 1000 and libc.mq_open(f'/q{q}'.encode(), 0o100 | 2, 0o600, ctypes.byref(A(0, 10, 8192, 0))) >= 0:\n"
        "    q += 1\n"
        "print('held', n, q, flush=True)\n"
        "time.sleep(600)\n"
    )
    use = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "class A(ctypes.Structure):\n"
        "    _fields_ = [('f', ctypes.c_long), ('m', ctypes.c_long), ('s', ctypes.c_long), ('c', ctypes.c_long), ('r', ctypes.c_long * 4)]\n"
        "print('inotify', libc.inotify_init() >= 0, 'mq', libc.mq_open(b'/mine', 0o100 | 2, 0o600, ctypes.byref(A(0, 10, 8192, 0))) >= 0)\n"
    )
    env = OSEnvironment(options={})
    async with _Episode(env) as a, _Episode(env) as b:
        await a.sh(f"cat > /tmp/hog.py <<'PY'\n{hog}PY")
        out = await a.sh("python3 /tmp/hog.py > /tmp/hog.out 2>&1 & sleep 3; cat /tmp/hog.out")
        held = out.split()
        assert "held" in held and int(held[held.index("held") + 1]) >= 100, out  # it took what its owner may have
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init()
        assert fd >= 0, f"the host's root lost its inotify instances to an episode (errno {ctypes.get_errno()})"
        os.close(fd)
        await b.sh(f"cat > /tmp/use.py <<'PY'\n{use}PY")
        assert "inotify True mq True" in await b.sh("python3 /tmp/use.py"), "another episode lost its quotas"


async def test_vsock_is_refused_and_mountinfo_names_no_host_path(sandboxed: None) -> None:
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        out = await ep.sh("python3 -c 'import socket; socket.socket(40, socket.SOCK_STREAM)' 2>&1 | tail -1")
        assert "Address family not supported" in out, out
        out = await ep.sh("cat /proc/self/mountinfo")
        assert sandbox_mod._STATE_PREFIX not in out and "/tmp/" not in out and "lowerdir=pristine" in out, out


def test_the_image_cache_is_its_owners_alone(sandboxed: None, os_root: Path) -> None:
    """The images' setuid files are owned by the sandbox's ids: no other user of the host reaches them."""
    from agentbench_async.envs.os_interaction import rootfs as rootfs_mod

    assert rootfs_mod.cache_root().stat().st_mode & 0o077 == 0
