"""The os sandbox's spawn path (issue 49 item 3): processes started by the spawn helper (``_spawn.c``, a vfork of a
small program instead of a fork of the warden's Python) get everything a forked child got, checks' namespaces built
by the warden itself show the sandbox's /proc, nothing leaks into the warden, and without a C compiler the warden
forks as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentbench_async.envs.os_interaction import sandbox as sandbox_mod
from agentbench_async.envs.os_interaction import spawn_helper as helper_mod
from agentbench_async.envs.os_interaction.grading import run_script
from agentbench_async.envs.os_interaction.sandbox import CAPS, Limits, Sandbox, host_idmap
from agentbench_async.envs.os_interaction.shell import AgentShell
from agentbench_async.envs.os_interaction.rootfs import ensure_shifted

from test_os_sandbox import os_root, sandboxed  # noqa: F401  (fixtures)

_CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
             "SETUID": 7, "AUDIT_WRITE": 29}  # fmt: skip
_SANDBOX_CAPS = f"{sum(1 << _CAP_BITS[c] for c in CAPS):016x}"
# what a process says of itself: capabilities, no_new_privs, seccomp, its cgroups, whether it can read its own mem
_PROBE = (
    "grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|CapInh|NoNewPrivs|Seccomp):' /proc/self/status; "
    "cut -d: -f2- /proc/self/cgroup | grep -E 'pids|memory|freezer' | sort; "
    "echo pgid=$(ps -o pgid= $$ | tr -d ' ') pid=$$ sid=$(ps -o sid= $$ | tr -d ' ')"
)


async def _sandbox(os_root: Path) -> Sandbox:  # noqa: F811
    idmap = host_idmap()
    root = await ensure_shifted(os_root, idmap.uid_base, idmap.gid_base)
    sb = Sandbox(Limits(), root, idmap)
    await sb.start()
    return sb


def _fields(out: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if _}


def _cgroups(out: str) -> set[str]:
    """The memory, pids and freezer cgroups the process is in, as the sandbox's cgroup namespace shows them."""
    lines = [line for line in out.splitlines() if line.split(":")[0] in ("freezer", "memory", "pids")]
    assert len(lines) == 3, out
    return {line.split(":", 1)[1] for line in lines}


def _ids(out: str) -> dict[str, str]:
    return dict(w.split("=") for w in next(line for line in out.splitlines() if line.startswith("pgid=")).split())


def _assert_confined(out: str) -> None:
    f = _fields(out)
    for key in ("CapEff", "CapPrm", "CapBnd", "CapInh"):
        assert f[key] == _SANDBOX_CAPS, (key, out)
    assert f["CapAmb"] == "0" * 16 and f["NoNewPrivs"] == "1" and f["Seccomp"] == "2", out


async def test_every_kind_of_process_gets_the_sandboxs_confinement(sandboxed: None, os_root: Path) -> None:  # noqa: F811
    """The login shell (a terminal), a script (the episode's cgroup) and a check (the checks' cgroup) each run with the
    sandbox's capabilities (bounding set included), no_new_privs and the seccomp filter, in their own process group
    (the shell: its own session) and in the cgroups of their kind."""
    sb = await _sandbox(os_root)
    try:
        assert sb._helper is not None  # noqa: SLF001 - the machine has a C compiler: the helper is what is tested here
        shell = AgentShell(sb)
        await shell.start()
        out = (await shell.run(_PROBE, 10)).output
        _assert_confined(out)
        probe = _ids(out)
        assert probe["sid"] == probe["pid"] == probe["pgid"], out  # the shell leads its session (and its group)
        assert _cgroups(out) == {"/"}, out  # the root of the sandbox's cgroup namespace: the episode's cgroup
        code, out = await run_script(sb, {"language": "bash", "code": _PROBE}, [], 10)
        assert code == 0, out
        _assert_confined(out)
        probe = _ids(out)
        assert probe["pgid"] == probe["pid"] != probe["sid"], out  # its own group: the engine kills it as one
        assert _cgroups(out) == {"/"}, out  # the root of the sandbox's cgroup namespace: the episode's cgroup
        code, out = await run_script(sb, {"language": "bash", "code": _PROBE}, [], 10, check=True)
        assert code == 0, out
        _assert_confined(out)
        assert _cgroups(out) == {f"/../{sb.name}-checks"}, out  # its sibling
        await shell.close()
    finally:
        await sb.close()


async def test_a_checks_namespace_shows_the_sandbox_and_leaves_nothing_in_the_warden(sandboxed: None, os_root: Path) -> None:  # noqa: F811
    """A check's /proc is the sandbox's (pid 1 the keeper, no host process, /proc/self its own pid there), its tools the
    image's; twenty checks later the warden holds no more descriptors than after the first."""
    sb = await _sandbox(os_root)
    try:
        assert sb._warden is not None  # noqa: SLF001
        warden_fds = Path(f"/proc/{sb._warden.pid}/fd")  # noqa: SLF001
        code, out = await run_script(sb, {"language": "bash", "code": "cat /proc/1/comm; readlink /proc/self; ls /proc | grep -c '^[0-9]'"}, [], 10, check=True)
        assert code == 0, out
        comm, me, count = out.split()
        assert comm == "bash" and int(me) < 100 and int(count) < 20, out  # host pids are not there
        first = len(os.listdir(warden_fds))
        for _ in range(20):
            code, out = await run_script(sb, {"language": "bash", "code": "exit 0"}, [], 10, check=True)
            assert code == 0, out
        assert len(os.listdir(warden_fds)) == first
    finally:
        await sb.close()


async def test_without_a_compiler_the_warden_forks_as_before(sandboxed: None, os_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """No helper (no C compiler): the same confinement, by the warden's Python fork."""
    monkeypatch.setattr(sandbox_mod, "spawn_helper", lambda: None)
    sb = await _sandbox(os_root)
    try:
        assert sb._helper is None  # noqa: SLF001
        for check in (False, True):
            code, out = await run_script(sb, {"language": "bash", "code": _PROBE}, [], 10, check=check)
            assert code == 0, out
            _assert_confined(out)
    finally:
        await sb.close()


def test_no_compiler_is_one_note_and_no_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert helper_mod._build(helper_mod.SOURCE, tmp_path / "out") is None  # noqa: SLF001
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "spawn helper was not built" in err and "install gcc" in err
    assert not any((tmp_path / "out").glob("agentbench-spawn-*"))


def test_the_helper_is_built_once_and_reused(tmp_path: Path) -> None:
    path = helper_mod._build(helper_mod.SOURCE, tmp_path)  # noqa: SLF001
    assert path is not None and os.access(path, os.X_OK)
    mtime = os.stat(path).st_mtime_ns
    assert helper_mod._build(helper_mod.SOURCE, tmp_path) == path and os.stat(path).st_mtime_ns == mtime  # noqa: SLF001
    assert [p.name for p in tmp_path.iterdir()] == [Path(path).name]  # no temporary file left

