"""os: real episodes in the bubblewrap sandbox — oracle, weak statuses, tools mode, isolation, runaways."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.os_interaction import OSEnvironment
from agentbench_async.envs.os_interaction import rootfs as rootfs_mod
from agentbench_async.envs.os_interaction import sandbox as sandbox_mod
from agentbench_async.envs.os_interaction.cgroups import Group
from agentbench_async.envs.os_interaction.limits import DOCKER_NOFILE, NOFILE_TASK, reachable_nofile
from agentbench_async.errors import EnvUnavailableError
from agentbench_async.testing import play
from agentbench_async.types import ModelReply
from support import REPO, require

# Official tasks that cannot pass on every machine (see docs/envs/os.md).
# `echo 123321>file` needs RLIMIT_NOFILE > 123321: Docker's default where this process's hard limit allows it
NEEDS_NOFILE = {"std-004-Q09-00000"} if reachable_nofile(DOCKER_NOFILE) <= NOFILE_TASK else set()
HOST_MEMORY = {"std-007-bootstrap-00006", "std-007-bootstrap-00018"}  # used-memory % may move between answer and check
# What their inits set (00008: `export TARGET_DIR`, 00029: `cd problem_directory`) lasts only in the init's
# shell, so the example counts every file of `/` (as upstream), /proc's per-process entries among them; find
# reaches /proc within milliseconds (third entry of `/` on this root), sometimes before bash has forked the
# pipeline's `wc`, so answer and check may differ by that process's ~250 entries (upstream: the same race)
PROC_COUNT = {"std-007-bootstrap-00008", "std-007-bootstrap-00029"}
# upstream's check/size-match.py takes int() of `du -sh`'s "4.0K": no answer passes, there as here (2fa6614)
UPSTREAM_UNPASSABLE = {"dev-001-dev-00008"}
STD_SAMPLE = [
    "std-001-stock-00000", "std-002-environment-00002", "std-002-environment-00004", "std-003-ac-00002",
    "std-004-N4-00000", "std-004-Q30-00003", "std-004-Q47-00000", "std-004-Q49-00000", "std-005-new-00000",
    "std-005-new-00001", "std-005-new-00002", "std-005-new-00005", "std-006-new-00000", "std-006-new-00002",
    "std-006-new-00003", "std-006-new-00007", "std-007-bootstrap-00000", "std-007-bootstrap-00001",
    "std-007-bootstrap-00004", "std-007-bootstrap-00067",
]  # fmt: skip


def _sandbox_ok() -> bool:
    try:
        sandbox_mod.check_available()
        return True
    except EnvUnavailableError:
        return False


@pytest.fixture(scope="session")
def os_root() -> Path:
    """The built sandbox root: built once per cache (about a minute), so never inside one test's time."""
    require(_sandbox_ok(), "the os sandbox needs bubblewrap (apt-get install bubblewrap) and root")
    require(
        rootfs_mod.shutil.which("mmdebstrap") is not None or any(rootfs_mod.cache_root().glob("bookworm-*/root")),
        "the os sandbox root is built with mmdebstrap (apt-get install mmdebstrap)",
    )
    return asyncio.run(rootfs_mod.resolve(None))


@pytest.fixture
def sandboxed(os_root: Path) -> None:
    assert (os_root / "usr" / "bin" / "python3").exists()


async def _oracle_all(env: OSEnvironment, tasks: list[Task], mode: str = "text", conc: int = 4) -> dict[str, object]:
    sem = asyncio.Semaphore(conc)
    results: dict[str, object] = {}

    async def one(task: Task) -> None:
        async with sem:
            results[task.task_id] = (await play(env, task, "oracle", action_mode=mode)).outcome

    try:
        await asyncio.gather(*(one(t) for t in tasks))
    finally:
        await env.close()  # the machines made ahead and those still closing
    return results


def _failures(results: dict[str, object]) -> dict[str, str]:
    return {k: f"{o.status} {o.error or ''} {o.details}" for k, o in results.items() if not o.success}  # type: ignore[attr-defined]


async def test_oracle_builtin_suites_pass(sandboxed: None) -> None:
    env = make_env("os")
    await env.start()
    tasks = list(env.tasks("dev")) + list(env.tasks("test"))[::3]
    results = await _oracle_all(env, tasks)
    assert _failures(results) == {}


async def test_oracle_tools_mode_same_metric(sandboxed: None) -> None:
    env = make_env("os")
    tasks = list(env.tasks("dev"))[:8]
    results = await _oracle_all(env, tasks, mode="tools")
    assert _failures(results) == {}


async def test_oracle_official_dev_and_std_sample(sandboxed: None, official_data_dir: Path) -> None:
    env = make_env("os", data_dir=official_data_dir)
    tasks = list(env.tasks("dev")) + [env.get_task("test", tid) for tid in STD_SAMPLE]
    results = await _oracle_all(env, tasks)
    assert set(_failures(results)) <= UPSTREAM_UNPASSABLE, _failures(results)


@pytest.mark.slow
async def test_oracle_official_dev_and_std_full(sandboxed: None, official_data_dir: Path) -> None:
    """Every official os task (26 dev, 144 std) under the oracle: all pass but the named ones above, and no
    init fails (no env_error) except Q09's where this machine's open-files hard limit is below 123322. The 46 that
    test_oracle_official_dev_and_std_sample plays (every dev task and STD_SAMPLE, none of them named above but one
    UPSTREAM_UNPASSABLE) are held there to the stricter rule, so they are not played twice in one run of the suite."""
    env = make_env("os", data_dir=official_data_dir)
    tasks = list(env.tasks("dev")) + list(env.tasks("test"))
    assert len(tasks) == 26 + 144
    sampled = {t.task_id for t in env.tasks("dev")} | set(STD_SAMPLE)
    results = await _oracle_all(env, [t for t in tasks if t.task_id not in sampled])
    assert len(results) == 170 - 26 - len(STD_SAMPLE)
    failures = _failures(results)
    assert set(failures) <= NEEDS_NOFILE | HOST_MEMORY | PROC_COUNT | UPSTREAM_UNPASSABLE, failures
    assert {tid for tid, o in results.items() if o.status == "env_error"} <= NEEDS_NOFILE, failures  # type: ignore[attr-defined]


async def test_open_files_limit_is_dockers_where_the_machine_allows(sandboxed: None) -> None:
    env = OSEnvironment(options={})
    try:
        async with _Episode(env) as ep:
            soft, hard = (await ep.sh("ulimit -Sn; ulimit -Hn")).split()[-2:]
    finally:
        await env.close()
    assert int(soft) == int(hard) == reachable_nofile(DOCKER_NOFILE)  # 1048576, or the engine's hard limit


async def test_what_official_tasks_apt_install_installs_with_no_network(os_root: Path) -> None:
    """The root lacks sudo, as AgentBench's image does; std-006-new-00005's init (`apt update && apt install
    sudo -y`, run as inits run: stdin at end of file) installs it from the root's apt cache with no network and
    it works. The overlay lets dpkg rename a new directory into one of the image's (`/usr/libexec/sudo.dpkg-new`:
    EXDEV before) and lets an image directory be removed (EIO before). The root's manifest lists the .deb."""
    listed = (os_root.parent / rootfs_mod.OFFLINE_MANIFEST).read_text().split()
    assert listed[0] == "sudo" and listed[3] == rootfs_mod.offline_debs(os_root)[0][3]
    init = ("command -v sudo || echo no-sudo-yet > /tmp/log; apt update && apt install sudo -y && sudo whoami >> /tmp/log && "
            "rm -r /etc/apt/preferences.d && python3 -c \"import os; os.mkdir('/etc/x.new'); os.rename('/etc/x.new', '/etc/x')\"")  # fmt: skip
    env = OSEnvironment(options={})
    episode = _Episode(env)
    episode.task = Task(env="os", split="dev", task_id="probe", data={
        **episode.task.data, "init": [{"language": "bash", "code": init}]})  # fmt: skip
    try:
        async with episode as ep:
            assert (await ep.sh("cat /tmp/log")).split()[-2:] == ["no-sudo-yet", "root"]
            assert (await ep.sh("ls -d /etc/x /etc/apt/preferences.d 2>/dev/null")).split()[-1] == "/etc/x"
    finally:
        await env.close()


async def test_weak_reaches_every_failure_status(sandboxed: None) -> None:
    env = make_env("os")
    by_mode: dict[str, Task] = {}
    from agentbench_async.environment import stable_choice

    for task in env.tasks("test"):
        by_mode.setdefault(str(stable_choice(task.task_id, 6)), task)
    records = [await play(env, t, "weak") for t in by_mode.values()]
    outcomes = [r.outcome for r in records]
    statuses = Counter(o.status for o in outcomes)
    assert {"completed", "invalid_format", "invalid_action", "task_limit_exceeded", "context_limit_exceeded"} <= set(statuses)
    assert not any(o.success for o in outcomes)
    # the paper convention: what AgentBench v0.2's os task records for the same endings
    paper = {(r.status, r.paper_status) for r in records}
    assert {("invalid_format", "agent invalid action"), ("invalid_action", "agent invalid action"),
            ("completed", "completed"), ("task_limit_exceeded", "task limit reached")} <= paper  # fmt: skip


def test_refuses_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    with pytest.raises(EnvUnavailableError, match="bubblewrap"):
        sandbox_mod.check_available()


class _Episode:
    """Drive one session by hand: run bash commands in it."""

    def __init__(self, env: OSEnvironment, description: str = "probe") -> None:
        task = Task(env="os", split="dev", task_id="probe", data={
            "description": description, "init": [], "start": None, "example": None, "match": {"answer": "x"},
        })  # fmt: skip
        self.env, self.task = env, task

    async def __aenter__(self) -> _Episode:
        self.session = await self.env.open_session(self.task, EpisodeContext(episode_id="probe"))
        await self.session.begin()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    async def sh(self, command: str) -> str:
        step = await self.session.step(ModelReply(content=f"Act: bash\n```bash\n{command}\n```"))
        assert step.outcome is None
        return step.observation[0]["content"]


async def test_state_persists_and_episodes_are_isolated(sandboxed: None) -> None:
    env = OSEnvironment(options={})
    async with _Episode(env) as a, _Episode(env) as b:
        await a.sh("cd /srv && export SECRET_A=1 && echo hi > /srv/a.txt && useradd -m jack")
        assert "/srv" in await a.sh("pwd; echo $SECRET_A")
        assert "No such file" in await b.sh("cat /srv/a.txt")
        assert "no such user" in await b.sh("id jack")
        assert "hi" in await a.sh("cat a.txt")


async def test_hostile_commands_get_nothing(sandboxed: None, tmp_path: Path) -> None:
    os.environ["AGENTBENCH_TEST_API_KEY"] = "sk-test-should-never-leak"
    marker = tmp_path / "host-marker"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    port = server.getsockname()[1]
    hits: list[int] = []
    threading.Thread(target=lambda: hits.append(server.accept() is not None), daemon=True).start()
    env = OSEnvironment(options={"command_timeout": 3})
    try:
        async with _Episode(env) as ep:
            # host files outside the binds: the checkout, the host's /root and /tmp
            out = await ep.sh(f"cat {Path(__file__).resolve()}; ls /work /root/.pyenv {tmp_path}; echo done")
            assert "No such file" in out and "def test_hostile" not in out
            # writing "to the host" only writes into the episode's overlay
            await ep.sh(f"mkdir -p {tmp_path} && echo pwned > {marker}; echo x >> /usr/bin/env-owned; rm -f /etc/hostname")
            assert not marker.exists() and not Path("/usr/bin/env-owned").exists() and Path("/etc/hostname").exists()
            # the network and the host's loopback services are unreachable
            out = await ep.sh(f"timeout 2 bash -c 'echo > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED; echo end")
            assert "CONNECTED" not in out and hits == []
            # the engine's environment variables are not there, not even through /proc
            out = await ep.sh("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c sk-test")
            assert "sk-test-should-never-leak" not in out and "AGENTBENCH_TEST_API_KEY" not in out
            # processes outside the sandbox are invisible and cannot be signalled
            out = await ep.sh(f"kill -9 {os.getpid()}; kill -9 -1; echo survived")
            assert "survived" in out or "empty" in out
            assert os.getpid() > 0  # we are still here
            # device nodes and mounts are refused (no CAP_MKNOD / CAP_SYS_ADMIN)
            out = await ep.sh("mknod /tmp/disk b 8 0; mount -t tmpfs x /mnt; echo checked")
            assert "Operation not permitted" in out and "permission denied" in out.lower()
    finally:
        server.close()
        del os.environ["AGENTBENCH_TEST_API_KEY"]


async def test_runaway_commands_end_and_the_episode_goes_on(sandboxed: None) -> None:
    env = OSEnvironment(options={"command_timeout": 5, "memory_mb": 256, "pids": 128, "disk_mb": 64})
    async with _Episode(env) as ep:
        out = await ep.sh("while true; do :; done")
        assert "interrupted" in out
        out = await ep.sh("trap '' INT; while :; do :; done")
        assert "interrupted" in out
        out = await ep.sh("yes")
        assert "[truncated because the output is too long]" in out
        out = await ep.sh("python3 -c 'x = bytearray(1 << 30)'; echo rc=$?")
        assert "rc=137" in out or "MemoryError" in out
        await ep.sh(":(){ :|:& };:")
        await asyncio.sleep(1)
        await ep.sh("sleep 1")
        assert "still-alive" in await ep.sh("echo still-alive")
        assert "a new login shell runs the next command" in await ep.sh("exit")  # the shell exits, said so ...
        assert "root" in await ep.sh("whoami")  # ... and a fresh one serves the next command


async def test_nothing_of_the_host_is_visible(sandboxed: None, tmp_path: Path) -> None:
    """Files planted on the host (system dirs, homes, temp, the checkout, the result folder) are not inside."""
    secret = f"planted-{uuid.uuid4().hex}"  # the files' content; their names carry another id
    name = f"agentbench-test-{uuid.uuid4().hex}"
    result_dir = tmp_path / "results"
    result_dir.mkdir()
    dirs = [Path("/etc"), Path("/usr/local"), Path("/root"), Path("/home"), Path("/tmp"), REPO, result_dir]
    planted = [d / name for d in dirs]
    try:
        for path in planted:
            path.write_text(secret + "\n")
        env = OSEnvironment(options={})
        async with _Episode(env) as ep:
            listing = " ".join(str(p) for p in planted)
            out = await ep.sh(f"for f in {listing}; do [ -e $f ] && echo FOUND $f; done; cat {listing} 2>/dev/null; "
                              f"grep -rls {secret} /etc /usr/local /root /home /tmp /var /opt /srv /mnt; echo end")
            assert out == "The output of the OS:\n\nend\n", out
            assert "No such file" in await ep.sh(f"ls -d {REPO} {tmp_path}")
            shadow = await ep.sh("cat /etc/shadow")
            assert Path("/etc/shadow").read_text() not in shadow
            mid = await ep.sh("cat /etc/machine-id /var/lib/dbus/machine-id")
            host_id = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() else "no-host-id"
            assert host_id not in mid
            assert "agentbench" in await ep.sh("hostname; cat /etc/hostname")
            # the root is the built one: AgentBench's image packages, no sudo, apt lists kept
            out = await ep.sh("command -v python3 git vim curl wget unzip zip tree ps pip3 sudo; ls /var/lib/apt/lists | grep -c Packages")
            assert "/usr/bin/tree" in out and "/usr/bin/ps" in out and "sudo" not in out and out.rstrip().endswith("1")
    finally:
        for path in planted:
            path.unlink(missing_ok=True)


async def test_own_root_directory_is_used_as_given(sandboxed: None, os_root: Path) -> None:
    env = OSEnvironment(options={"rootfs": str(os_root)})
    async with _Episode(env) as ep:
        assert "agentbench" in await ep.sh("cat /etc/hostname; ls /")
        await ep.sh("echo changed > /etc/motd")
    assert "changed" not in (os_root / "etc" / "motd").read_text(errors="replace")  # the lower layer stays as it was


async def test_without_cgroups_rlimits_and_a_scanned_pid_limit_hold(sandboxed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback when the host delegates no cgroup controllers: memory per process, pid count by scanning."""

    class _NoCgroups(sandbox_mod._Cgroups):
        def __init__(self, name: str, limits: sandbox_mod.Limits, *args: object) -> None:
            self.dirs, self.memory, self.pids, self.freezer, self.checks = [], None, None, None, Group()

    monkeypatch.setattr(sandbox_mod, "_Cgroups", _NoCgroups)
    env = OSEnvironment(options={"command_timeout": 5, "memory_mb": 256, "pids": 40})
    async with _Episode(env) as ep:
        out = await ep.sh("python3 -c 'x = bytearray(1 << 30)'; echo rc=$?")
        assert "MemoryError" in out
        out = await ep.sh("(for i in $(seq 80); do sleep 300 & done) >/dev/null 2>&1; sleep 1.5; echo spawned")
        assert "process limit" in out
        count = await ep.sh("ps -e --no-headers | wc -l")
        assert int(count.rsplit("\n", 2)[-2]) < 40


async def test_a_command_that_takes_the_terminals_input_ends_when_it_does(sandboxed: None) -> None:
    """sudo (relaying the terminal), apt or a flush take what was typed after the command (the engine's end marker):
    the shell, back at its prompt with nothing to read, gets the marker again: the command ends when it does, not
    at the command timeout, and the next command's output is clean."""
    env = OSEnvironment(options={"command_timeout": 10})
    try:
        async with _Episode(env) as ep:
            loop = asyncio.get_running_loop()
            started = loop.time()
            out = await ep.sh("python3 -c 'import termios, time; time.sleep(0.3); termios.tcflush(0, termios.TCIFLUSH)'; echo after")
            assert out == "The output of the OS:\n\nafter\n" and loop.time() - started < 5, (out, loop.time() - started)
            assert await ep.sh("echo next") == "The output of the OS:\n\nnext\n"
    finally:
        await env.close()


async def test_the_calc_check_passes_a_right_calc_and_fails_every_wrong_one(sandboxed: None) -> None:
    """checking/0.sh (the `calc` task): every expression through the episode's calc, one python3 judging them all."""
    from agentbench_async.envs.os_interaction.grading import grade, run_script
    from agentbench_async.envs.os_interaction.scripts import SCRIPT_FILES

    check = {"check": [SCRIPT_FILES["checking/0.sh"]]}
    right = SCRIPT_FILES["example/0.sh"]["code"]
    printed = 'print("%.6f" % ev(ast.parse(" ".join(sys.argv[1:]), mode="eval")))'
    assert printed in right
    body = 'e = " ".join(sys.argv[1:]); v = ev(ast.parse(e, mode="eval")); '
    variants = {  # name: (the calc's last line, whether the check passes)
        "right": (printed, True),
        "more digits and a blank line": (body + 'print("%.9f\\n" % v)', True),
        "spaces around": (body + 'print("  %.6f  " % v)', True),
        "rounded to 2 decimals (1/3 is off)": (body + 'print("%.2f" % v)', False),
        "off by 1e-4 on one expression": (body + 'print("%.6f" % (v + (1e-4 if e == "42" else 0)))', False),
        "a number followed by text": (body + 'print("%.6f units" % v)', False),
        "nothing for one expression": (body + 'print("" if e == "42" else "%.6f" % v)', False),
    }
    env = OSEnvironment(options={})
    async with _Episode(env) as ep:
        sandbox = ep.session._sandbox
        # every variant written before the first grading
        for i, (line, _) in enumerate(variants.values()):
            await ep.sh(right.replace("/usr/local/bin/calc", f"/root/calc-{i}").replace(printed, line))
        assert not (await grade(sandbox, check, None, 60))[0]  # no calc at all
        for i, (why, (_, passes)) in enumerate(variants.items()):
            code, _ = await run_script(sandbox, {"language": "bash", "code": f"cp /root/calc-{i} /usr/local/bin/calc"}, [], 10)
            assert code == 0
            assert (await grade(sandbox, check, None, 60))[0] is passes, why
