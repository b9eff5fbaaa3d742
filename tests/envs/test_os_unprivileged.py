"""os as an ordinary user: the engine holds the API keys, so it should not need root.

`.ci/setup --test` creates two users: ``agentbench-test`` with an /etc/subuid range (sandboxes map its range
through newuidmap/newgidmap, several users work) and ``agentbench-test1`` without one (a single-id map:
tasks that need several users are refused by name). The test (root) prepares each user's sandbox root in
the user's cache from the built one (owners moved into the user's range — what ``mmdebstrap --mode=unshare``
produces when the user builds it), then runs the os environment as that user with Debian's own python3
(the os environment needs nothing outside the standard library) and checks what it reports.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from agentbench_async.envs.os_interaction import rootfs as rootfs_mod
from agentbench_async.envs.os_interaction import sandbox as sandbox_mod
from support import REPO, require

from test_os_sandbox import os_root, sandboxed  # noqa: F401  (fixtures)

_SCRIPT = r'''
import asyncio, json, sys
from agentbench_async.envs.os_interaction import OSEnvironment
from agentbench_async.envs.os_interaction.grading import grade, run_script
from agentbench_async.envs.os_interaction.sandbox import Sandbox, host_idmap
from agentbench_async.testing import play

options = json.loads(sys.argv[1])
PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("uid_map=" + " ".join(open("/proc/self/uid_map").read().split()))
print("open_by_handle_at=" + str(libc.open_by_handle_at(0, b"\\\\0" * 16, 0)) + "/" + str(ctypes.get_errno()))
try:
    open("/proc/sys/kernel/core_pattern", "w").write("|/tmp/x")
    print("core_pattern=WRITTEN")
except OSError as exc:
    print("core_pattern=" + exc.__class__.__name__)
"""

async def main():
    env = OSEnvironment(options=options)
    out = {"idmap": list(host_idmap().__dict__.values())}
    await env.start()
    results = {}
    for task in list(env.tasks("dev")):
        record = await play(env, task, "oracle")
        results[task.task_id] = [record.outcome.status, record.outcome.success, (record.outcome.error or "")[:300]]
    out["oracle"] = results
    sandbox = Sandbox(env.limits, env.root, env.idmap)
    await sandbox.start()
    try:
        code, probe = await run_script(sandbox, {"language": "python", "code": PROBE}, [], 30, check=True)
        out["probe"] = probe
        await run_script(sandbox, {"language": "bash", "code": "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/python3.11"}, [], 30)
        # the metadata of a tool is the task's state (issue 49): find keeps the set-uid bit, xargs had it taken away
        await run_script(sandbox, {"language": "bash", "code": "chmod u+s /usr/bin/find /usr/bin/xargs && chmod u-s /usr/bin/xargs"}, [], 30)
        task = {"check": [{"language": "python", "code": "import sys\nsys.exit(0 if sys.argv[1] == '42' else 1)"}]}
        out["rigged_wrong"] = (await grade(sandbox, task, "999", 30))[0]
        out["rigged_right"] = (await grade(sandbox, task, "42", 30))[0]
        suid = "ls -l /usr/bin/{} | awk '{{if ($1~/^-..s/) {{ exit 1; }} else {{ exit 0; }}}}'"
        out["suid"] = [(await grade(sandbox, {"check": [{"language": "bash", "code": suid.format(t)}]}, "", 30))[0] for t in ("find", "xargs")]
    finally:
        await sandbox.close()
    print(json.dumps(out))

asyncio.run(main())
'''


def _user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        require(False, f"the test user {name} does not exist (bash .ci/setup --test creates it)")
        raise


def _prepare_root(user: pwd.struct_passwd, built: Path, base: tuple[int, int], count: int) -> Path:
    """The user's cached sandbox root: the built one copied, owners moved into ``base`` (count ids)."""
    built = asyncio.run(rootfs_mod.ensure_shifted(built, sandbox_mod.ROOT_ID_BASE, sandbox_mod.ROOT_ID_BASE))
    cache = Path(user.pw_dir) / ".cache" / "agentbench-async" / "os-rootfs"
    final = cache / (built.parent.name if count > 1 else "single-id")
    root = final / "root"
    marker = final / "idmap.json"
    want = {"uid_base": base[0], "gid_base": base[1]}
    if root.is_dir() and marker.exists() and json.loads(marker.read_text()) == want:
        return root
    shutil.rmtree(final, ignore_errors=True)
    final.mkdir(parents=True)
    subprocess.run(["cp", "-a", f"{built}/.", str(root)], check=True)
    if count > 1:
        rootfs_mod._shift_tree(root, (sandbox_mod.ROOT_ID_BASE, sandbox_mod.ROOT_ID_BASE), base, count)
    else:
        subprocess.run(["chown", "-hR", f"{base[0]}:{base[1]}", str(root)], check=True)
    marker.write_text(json.dumps(want) + "\n")
    for path in [cache.parent.parent, cache.parent, cache, final]:
        os.chown(path, user.pw_uid, user.pw_gid)
    if count == 1:
        os.chown(root, user.pw_uid, user.pw_gid)
    return root


def _run_as(user: pwd.struct_passwd, options: dict[str, object]) -> dict[str, object]:
    src = Path(tempfile.mkdtemp(prefix="agentbench-unpriv-"))
    try:
        os.chmod(src, 0o755)
        shutil.copytree(REPO / "src", src / "src")
        shutil.copytree(REPO / "environments" / "os", src / "environments" / "os")  # the built-in suites
        (src / "run.py").write_text(_SCRIPT)
        subprocess.run(["chmod", "-R", "a+rX", str(src)], check=True)
        env = {"HOME": user.pw_dir, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": f"{src / 'src'}:{src}", "LC_ALL": "C.UTF-8"}
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--",
                "/usr/bin/python3", str(src / "run.py"), json.dumps(options)]  # fmt: skip
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, cwd=src)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(src, ignore_errors=True)


def _subid(user: str, path: str) -> tuple[int, int]:
    for line in Path(path).read_text().splitlines():
        name, start, count = line.split(":")
        if name == user:
            return int(start), int(count)
    require(False, f"{user} has no range in {path} (bash .ci/setup --test adds one)")
    raise AssertionError


@pytest.mark.skipif(os.geteuid() != 0, reason="prepares other users' caches: run the suite as root")
def test_ordinary_user_with_subordinate_ids(sandboxed: None, os_root: Path) -> None:
    require(shutil.which("newuidmap") is not None, "newuidmap is not installed (apt-get install uidmap)")
    require(Path("/usr/bin/python3").exists(), "Debian's python3 is not installed (apt-get install python3)")
    user = _user("agentbench-test")
    uid_base, _ = _subid(user.pw_name, "/etc/subuid")
    gid_base, _ = _subid(user.pw_name, "/etc/subgid")
    _prepare_root(user, os_root, (uid_base, gid_base), 65536)
    out = _run_as(user, {})
    oracle = out["oracle"]
    assert oracle and all(ok for _, ok, _ in oracle.values()), oracle  # useradd/su/chown tasks among them
    probe = str(out["probe"])
    assert f"uid_map=0 {uid_base} 65536" in probe  # root inside is the user's subordinate range, not the user
    assert "open_by_handle_at=-1/1" in probe and "core_pattern=WRITTEN" not in probe, probe
    assert out["rigged_wrong"] is False and out["rigged_right"] is True
    assert out["suid"] == [False, True]  # checks see the episode's find (set-uid) and xargs (not): std-006-new-00003


@pytest.mark.skipif(os.geteuid() != 0, reason="prepares other users' caches: run the suite as root")
def test_ordinary_user_without_subordinate_ids_refuses_multi_user_tasks_by_name(sandboxed: None, os_root: Path) -> None:
    require(Path("/usr/bin/python3").exists(), "Debian's python3 is not installed (apt-get install python3)")
    user = _user("agentbench-test1")
    require(not any(line.startswith(user.pw_name + ":") for line in Path("/etc/subuid").read_text().splitlines()),
            f"{user.pw_name} must have no /etc/subuid range")  # fmt: skip
    root = _prepare_root(user, os_root, (user.pw_uid, user.pw_gid), 1)
    out = _run_as(user, {"rootfs": str(root)})
    oracle = out["oracle"]
    refused = {tid: err for tid, (status, _, err) in oracle.items() if status == "env_error"}
    passed = {tid for tid, (_, ok, _) in oracle.items() if ok}
    assert refused and passed and set(refused) | passed == set(oracle), oracle
    assert all("needs several users" in err and "/etc/subuid" in err for err in refused.values()), refused
    assert f"uid_map=0 {user.pw_uid} 1" in str(out["probe"])
    assert out["rigged_wrong"] is False and out["rigged_right"] is True
    assert out["suid"] == [False, True]  # checks see the episode's find (set-uid) and xargs (not): std-006-new-00003
