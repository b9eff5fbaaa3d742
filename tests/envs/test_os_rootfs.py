"""os without a sandbox: the root's recipe and cache, the host's mirror, own roots, cgroup delegation, paper statuses."""

from __future__ import annotations

import asyncio
import hashlib
import re
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from agentbench_async import statuses as st
from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.os_interaction import OSEnvironment, OSSession
from agentbench_async.envs.os_interaction import rootfs as rootfs_mod
from agentbench_async.envs.os_interaction import limits as limits_mod
from agentbench_async.envs.os_interaction import cgroups as cgroups_mod
from agentbench_async.envs.os_interaction.cgroups import Cgroups as _Cgroups
from agentbench_async.envs.os_interaction.limits import Limits
from agentbench_async.envs.os_interaction.records import official_tasks
from agentbench_async.errors import EnvUnavailableError
from agentbench_async.types import ModelReply, ToolCall


def test_recipe_is_agentbench_default_image_and_its_hash_names_the_cache() -> None:
    recipe = rootfs_mod.default_recipe("http://mirror.example/debian/")
    assert recipe.mirror == "http://mirror.example/debian" and recipe.suite == "bookworm"
    assert {"python3", "python3-pip", "git", "vim", "curl", "wget", "unzip", "zip", "tree", "procps"} == set(recipe.packages)
    assert "sudo" not in recipe.packages and recipe.recommends and recipe.keep_apt_lists
    argv = recipe.argv(Path("/x/root"))
    assert argv[0] == "mmdebstrap" and "--variant=minbase" in argv and "--skip=cleanup/apt/lists" in argv
    assert argv[-3:] == ["bookworm", "/x/root", "http://mirror.example/debian"]
    # the hash is stable for one recipe and changes with anything that decides the root
    assert recipe.key() == rootfs_mod.default_recipe("http://mirror.example/debian").key()
    assert recipe.key() != rootfs_mod.default_recipe("http://other.example/debian").key()


def test_packages_official_tasks_install_wait_in_the_apt_cache_and_change_the_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """sudo is downloaded into the root's apt cache (not installed: local-os/default has none) before the
    hook that empties resolv.conf, and only those .debs survive the build; a root built without them (an
    existing cache from before) has another hash, so it is rebuilt rather than reused."""
    recipe = rootfs_mod.default_recipe("http://mirror.example/debian")
    assert recipe.offline == ("sudo",) and "sudo" not in recipe.packages
    argv = recipe.argv(Path("/x/root"))
    hooks = [a for a in argv if a.startswith("--customize-hook=")]
    assert "apt-get clean && " in hooks[0] and "apt-get install --download-only --yes sudo" in hooks[0]
    assert "resolv.conf" in hooks[1] and "--skip=cleanup/apt/cache" in argv
    key = recipe.key()
    assert key != replace(recipe, offline=()).key() != replace(recipe, offline=("sudo", "acl")).key()
    assert not any("cleanup/apt/cache" in a or "download-only" in a for a in replace(recipe, offline=()).argv(Path("/x")))
    # a hook written in code (not a field) is part of the hash too
    assert "Acquire::Retries" in hooks[0]
    monkeypatch.setattr(rootfs_mod, "_NO_RETRIES", "true")
    assert recipe.key() != key


def test_every_package_an_official_task_apt_installs_is_in_the_root(official_data_dir: Path) -> None:
    """Scans every official os record (dev and std: init, start, example, checks) for `apt(-get) install`."""
    wanted: dict[str, set[str]] = {}
    for split in ("dev", "test"):
        for task in official_tasks(official_data_dir, split):
            scripts = [*task.data["init"], task.data.get("example") or {}, *(task.data.get("check") or [])]
            texts = [s.get("code", "") for s in scripts if s] + [task.data.get("start") or ""]
            for text in texts:
                for args in re.findall(r"\bapt(?:-get)?\s+install\b([^&|;\n]*)", text):
                    for name in args.split():
                        if not name.startswith("-"):
                            wanted.setdefault(name, set()).add(task.task_id)
    assert wanted == {"sudo": {"std-006-new-00005", "std-006-new-00006", "std-006-new-00008"}}
    assert set(wanted) <= set(rootfs_mod.default_recipe("http://m/debian").offline)


def test_the_manifest_lists_each_cached_deb_with_its_hash(tmp_path: Path) -> None:
    archives = tmp_path / "var/cache/apt/archives"
    archives.mkdir(parents=True)
    (archives / "sudo_1.9.13p3-1%2bdeb12u4_amd64.deb").write_bytes(b"deb")
    (archives / "lock").write_bytes(b"")
    assert rootfs_mod.offline_debs(tmp_path) == [("sudo", "1.9.13p3-1+deb12u4", "amd64", hashlib.sha256(b"deb").hexdigest())]


def test_open_files_are_dockers_default_or_one_line_says_why_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Limits().nofile == limits_mod.DOCKER_NOFILE == 1_048_576
    status = tmp_path / "status"
    status.write_text("Name:\tpython3\nCapEff:\t000001fffeffffff\n")  # every capability but CAP_SYS_RESOURCE
    monkeypatch.setattr(limits_mod.resource, "getrlimit", lambda which: (20000, 20000))
    note = limits_mod.nofile_shortfall(status=status)
    assert note is not None and note.count("\n") == 0
    assert "get 20,000 open files, not Docker's 1,048,576" in note and "std-004-Q09" in note
    assert "--ulimit nofile=1048576:1048576" in note and limits_mod.reachable_nofile(1_048_576, status=status) == 20000
    status.write_text("CapEff:\t000001ffffffffff\n")  # may raise its hard limit: the sandbox gets Docker's
    assert limits_mod.nofile_shortfall(status=status) is None
    status.write_text("CapEff:\t0000000000000000\n")
    monkeypatch.setattr(limits_mod.resource, "getrlimit", lambda which: (1024, 524288))  # Docker 25+'s default
    note = limits_mod.nofile_shortfall(status=status)
    assert note is not None and "524,288" in note and "Q09" not in note  # short of Docker's, enough for Q09
    monkeypatch.setattr(limits_mod.resource, "getrlimit", lambda which: (1024, 1_048_576))
    assert limits_mod.nofile_shortfall(status=status) is None


def test_mirror_is_the_one_the_hosts_apt_uses(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    assert rootfs_mod.host_mirror(tmp_path) == rootfs_mod.DEFAULT_MIRROR
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.internal/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.internal/debian/\nSuites: bookworm\nComponents: main\n"
    )
    assert rootfs_mod.host_mirror(tmp_path) == "http://mirror.internal/debian"
    (tmp_path / "sources.list").write_text("# comment\ndeb [arch=amd64] https://deb.example.org/debian bookworm main\n")
    assert rootfs_mod.host_mirror(tmp_path) == "https://deb.example.org/debian"


def test_cached_root_is_used_without_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = rootfs_mod.default_recipe("http://mirror.example/debian")
    root = tmp_path / f"bookworm-{recipe.key()}" / "root"
    root.mkdir(parents=True)
    monkeypatch.setattr(rootfs_mod.shutil, "which", lambda name: None)  # mmdebstrap absent: must not be needed
    assert asyncio.run(rootfs_mod.ensure_built(recipe, cache=tmp_path)) == root
    other = rootfs_mod.default_recipe("http://other.example/debian")
    with pytest.raises(EnvUnavailableError, match=r"apt-get install mmdebstrap.*os.rootfs=DIR\|TAR"):
        asyncio.run(rootfs_mod.ensure_built(other, cache=tmp_path))


def test_own_roots_are_checked_with_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(EnvUnavailableError, match="neither a directory nor a tar archive"):
        asyncio.run(rootfs_mod.resolve(str(tmp_path / "nope")))
    bare = tmp_path / "bare"
    (bare / "bin").mkdir(parents=True)
    with pytest.raises(EnvUnavailableError, match=r"missing /bin/bash, /usr/bin/env, /usr/bin/setpriv"):
        asyncio.run(rootfs_mod.resolve(str(bare)))
    # a tar archive is unpacked once into the cache, then checked the same way
    (bare / "bin" / "bash").write_text("")
    archive = tmp_path / "root.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(bare, arcname=".")
    with pytest.raises(EnvUnavailableError, match="missing /usr/bin/env"):
        asyncio.run(rootfs_mod.resolve(str(archive), report=lambda _: None))
    unpacked = list((tmp_path / "cache" / "agentbench-async" / "os-rootfs").glob("tar-*/root/bin/bash"))
    assert len(unpacked) == 1
    (tmp_path / "junk.tar").write_text("not a tar")
    with pytest.raises(EnvUnavailableError, match="tar cannot unpack it"):
        asyncio.run(rootfs_mod.resolve(str(tmp_path / "junk.tar"), report=lambda _: None))


def _fake_v2(tmp_path: Path, subtree_control: str) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    own = root / "user.slice" / "engine.scope"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (own / "cgroup.subtree_control").write_text(subtree_control)
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text("0::/user.slice/engine.scope\n")
    return root, self_cgroup


def test_cgroup_v2_needs_delegation_else_rlimits_with_one_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cgroups_mod._warned.clear()
    root, self_cgroup = _fake_v2(tmp_path, "cpu\n")  # controllers exist at the root, not delegated to us
    for _ in range(3):
        cg = _Cgroups("agentbench-os-t1", Limits(), root, self_cgroup)
        assert cg.memory is None and cg.pids is None and cg.dirs == []
    assert not (root / "user.slice" / "engine.scope" / "agentbench-os-t1").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: os: cgroup v2 controller(s) memory, pids not delegated")
    # delegated: the episode's cgroup gets the limits
    root, self_cgroup = _fake_v2(tmp_path / "ok", "cpu memory pids\n")
    cg = _Cgroups("agentbench-os-t2", Limits(memory_mb=64, pids=32, disk_mb=100, shm_mb=16), root, self_cgroup)
    path = root / "user.slice" / "engine.scope" / "agentbench-os-t2"
    # processes' 64 MiB + the in-memory disk and /dev/shm; pids: + bubblewrap, keeper (the warden stays outside)
    assert cg.memory == path and (path / "memory.max").read_text() == str((64 + 100 + 16) << 20)
    assert (path / "pids.max").read_text() == "34"
    # the checks' sibling: a budget of their own
    checks = path.with_name("agentbench-os-t2-checks")
    assert cg.checks.memory == checks and (checks / "memory.max").read_text() == str(64 << 20)
    assert (checks / "pids.max").read_text() == "32"


def test_cgroup_write_failure_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cgroups_mod._warned.clear()
    root, self_cgroup = _fake_v2(tmp_path, "memory pids")

    def refuse(path: Path, value: str) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cgroups_mod, "_write", refuse)
    cg = _Cgroups("agentbench-os-t3", Limits(), root, self_cgroup)
    assert cg.memory is None and cg.pids is None
    assert not (root / "user.slice" / "engine.scope" / "agentbench-os-t3").exists()  # the mkdir is undone
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "memory.max" in err and "rlimits" in err
    cgroups_mod._warned.clear()


def _session(mode: str = "text") -> OSSession:
    env = OSEnvironment()
    env.root = Path("/nonexistent-root")  # parsing and the turn cap never touch the sandbox
    task = Task(env="os", split="dev", task_id="t", data={"description": "d", "init": [], "start": None, "example": None, "match": {"answer": "1"}})
    return OSSession(env, task, EpisodeContext(episode_id="e", action_mode=mode))  # type: ignore[arg-type]


async def test_paper_status_is_what_agentbench_v02_records() -> None:
    # upstream os has no "invalid format": a reply without Act: and an unknown action are both AGENT_INVALID_ACTION
    for reply, ours in [
        (ModelReply(content="I think the answer is 3."), st.INVALID_FORMAT),
        (ModelReply(content="Think: x\n\nAct: answer 3"), st.INVALID_FORMAT),
        (ModelReply(content="Think: x\n\nAct: python\n```python\nprint(1)\n```"), st.INVALID_ACTION),
    ]:
        step = await _session().step(reply)
        assert step.outcome is not None and step.outcome.status == ours
        assert step.outcome.paper_status == st.PAPER_AGENT_INVALID_ACTION
    # tools mode is AgentBench FC's round: a call of no tool is answered and the model asked again, not ended
    bad_tool = ModelReply(content="", tool_calls=[ToolCall(id="1", name="python_action", arguments="{}")])
    step = await _session("tools").step(bad_tool)
    assert step.outcome is None and "not one of the tools" in str(step.observation)
    limit = await _session().on_turn_limit()
    assert limit.status == st.TASK_LIMIT_EXCEEDED and limit.paper_status == st.PAPER_TASK_LIMIT_REACHED
    # a match task is graded without the sandbox: right or wrong, upstream says COMPLETED
    for answer, ok in [("1", True), ("2", False)]:
        step = await _session().step(ModelReply(content=f"Think: x\n\nAct: answer({answer})"))
        assert step.outcome is not None and step.outcome.success is ok
        assert step.outcome.status == st.COMPLETED and step.outcome.paper_status == st.PAPER_COMPLETED
