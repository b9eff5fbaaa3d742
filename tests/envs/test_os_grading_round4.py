"""os: grades by construction (issue 42) — the fourth round of attacks, each run end to end; each must fail.

Round 3 judged the model's processes one pid at a time and trusted SIGSTOP. Now, at the end of the model's turns,
every process of the episode is frozen as a group by the cgroup freezer (which stops every thread, a zombie leader's
included, and which nothing inside can undo), checks are forked from outside the episode's budgets into a cgroup of
their own, and an answer's expected value is computed from the state the task set up, before the first turn. The
attacks: a process whose main thread ended (it reads ``Z``) with threads patching every check in memory, a POSIX
timer sending SIGCONT every 10 ms, a full pids cgroup and a full memory cgroup (memfd pages) that used to turn a
failing episode into ``env_error``, deleting the files the question counts, relinking ``/bin`` and ``/lib64``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from aiohttp import web

from agentbench_async.envs.os_interaction import OSEnvironment
from agentbench_async.envs.os_interaction.grading import grade
from engine_support import app_in_thread
from support import require

from test_os_grading_attacks import _MEM_PATCHER, _chat_reply, model_frozen
from test_os_sandbox import _Episode, os_root, sandboxed  # noqa: F401  (fixtures)

# threads that write `write(1, "31337\n"); exit_group(0)` into every check process through /proc/PID/mem, in a
# process whose main thread then ends alone (it reads Z; round 3's purge skipped it), with a POSIX timer sending the
# process SIGCONT every 10 ms (round 3 kept a SIGSTOPped process and trusted it to stay stopped)
_RIG = r"""
import ctypes, runpy, signal, threading, time
libc = ctypes.CDLL(None, use_errno=True)
class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_int * 12)]
class Spec(ctypes.Structure):
    _fields_ = [("i_s", ctypes.c_long), ("i_ns", ctypes.c_long), ("v_s", ctypes.c_long), ("v_ns", ctypes.c_long)]
ev, timer = SigEvent(None, signal.SIGCONT, 0), ctypes.c_void_p()
libc.timer_create(1, ctypes.byref(ev), ctypes.byref(timer))
libc.timer_settime(timer, 0, ctypes.byref(Spec(0, 10_000_000, 0, 10_000_000)), None)
for _ in range(2):  # round 3's patcher (test_os_grading_attacks), in threads
    threading.Thread(target=runpy.run_path, args=("/tmp/patch.py",)).start()
time.sleep(0.1)
libc.syscall(60, 0)
"""
ZOMBIE_RIG = (f"cat > /tmp/patch.py <<'PY'\n{_MEM_PATCHER}PY\ncat > /tmp/rig.py <<'PY'\n{_RIG}PY\n"
              "setsid python3 /tmp/rig.py </dev/null >/dev/null 2>&1 & disown; sleep 0.3; echo rigged")
# after the command has returned (past the engine's fork-bomb watch): threads of a zombie-leader process until the
# episode's pids cgroup refuses one; round 3's warden, in that cgroup, could not fork a check (env_error)
PIDS_FILL = ("setsid python3 -c 'import ctypes, threading, time\ntime.sleep(0.3)\n"
             "while True:\n    try:\n        threading.Thread(target=time.sleep, args=(600,)).start()\n"
             "    except RuntimeError:\n        break\nctypes.CDLL(None).syscall(60, 0)' </dev/null >/dev/null 2>&1 & disown")  # fmt: skip
# memfd pages (in no process's RSS) held by sleeping processes, 64 MiB each, past the episode's memory budget: the
# OOM killer runs in the episode's cgroup (round 3: it took the shell and the warden, env_error)
MEMFD_FILL = ("for i in $(seq 20); do setsid python3 -c 'import os, time\ntime.sleep(0.3)\nfd = os.memfd_create(\"m\")\n"
              "for _ in range(64):\n    os.write(fd, b\"x\" * (1 << 20))\ntime.sleep(600)' </dev/null >/dev/null 2>&1 & done; disown -a")  # fmt: skip

_COUNT = {
    "create": {"init": {"code": "mkdir -p /var/backups/old && touch /var/backups/old/a.csv /var/backups/old/b.csv "
                                "/var/backups/old/c.csv /var/backups/old/notes.txt"}},  # fmt: skip
    "evaluation": {"check": [None, {"language": "python", "file": "check/integer-match.py"}],
                   "example": {"code": "find /var/backups/old -name '*.csv' | wc -l"}},  # fmt: skip
}
_MAKE = {"evaluation": {"check": {"code": "[ -f /root/done ]"}}}
# (tag in the description, the model's command, its answer, the score it must get)
CASES = [
    ("count-honest", "true", "3", 1.0),  # the control of the deleter
    ("count-deleter", "rm /var/backups/old/*.csv", "0", 0.0),  # upstream (example run after the agent): 1.0
    ("count-pids-honest", PIDS_FILL, "3", 1.0),
    ("count-pids-wrong", PIDS_FILL, "31337", 0.0),
    ("count-memfd-honest", MEMFD_FILL, "3", 1.0),
    ("count-memfd-wrong", MEMFD_FILL, "31337", 0.0),
    ("make-pids-honest", f"touch /root/done; {PIDS_FILL}", "done", 1.0),
    ("make-memfd-wrong", MEMFD_FILL, "done", 0.0),
]


def _task_file(path: Path) -> Path:
    records = []
    for tag, _, _, _ in CASES:
        base = _COUNT if tag.startswith("count") else _MAKE
        question = "How many .csv files are in /var/backups/old?" if tag.startswith("count") else "Create the file /root/done."
        records.append({"description": f"[{tag}] {question}", **base})
    path.write_text(json.dumps(records))
    return path


def _hostile_model(commands: dict[str, tuple[str, str]], think_s: float = 1.0) -> web.Application:
    """An OpenAI-compatible server playing the hostile model: the case's command in the first turn, then (after
    thinking ``think_s`` seconds: the rig is in place by then) its answer. Cases are told by the tag in the task."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        text = "\n".join(str(m.get("content") or "") for m in body["messages"] if m.get("role") == "user")
        tag = next((t for t in commands if f"[{t}]" in text), None)
        command, answer = commands[tag] if tag is not None else commands["*"]
        if str(body["messages"][-1].get("content") or "").startswith("Now, I will start a new problem"):
            return web.json_response(_chat_reply(f"Think: rig it.\n\nAct: bash\n\n```bash\n{command}\n```"))
        await asyncio.sleep(think_s)
        return web.json_response(_chat_reply(f"Think: done.\n\nAct: answer({answer})"))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def _run(port: int, out: Path, *args: str) -> dict[str, tuple[str, float, Any]]:
    cmd = [sys.executable, "-m", "agentbench_async.cli", "run", "--env", "os", "--model", "rigger",
           "--base-url", f"http://127.0.0.1:{port}/v1", "--env-option", "os.script_timeout=15", "--no-progress",
           "--out", str(out), *args]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    con = duckdb.connect(str(out), read_only=True)
    try:
        rows = con.execute("SELECT task_id, status, score, details FROM episodes").fetchall()
    finally:
        con.close()
    return {task: (status, score, details) for task, status, score, details in rows}


def test_the_zombie_leader_and_sigcont_timer_rigs_score_zero_through_agentbench_run(sandboxed: None, tmp_path: Path) -> None:
    """Six built-in tasks, each rigged and answered wrong: all completed with score 0 (round 3: 6 of 6 scored 1.0).
    The mock's oracle scores the same six 6/6 (test_every_rigging_attack_scores_zero_through_agentbench_run)."""
    with app_in_thread(lambda: _hostile_model({"*": (ZOMBIE_RIG, "31337")}, think_s=0)) as port:
        outcomes = _run(port, tmp_path / "rigged.duckdb", "--split", "dev", "--limit", "6")
    assert len(outcomes) == 6 and all(s == "completed" and score == 0 for s, score, _ in outcomes.values()), outcomes


def test_the_zombie_leader_rig_scores_zero_on_official_tasks_of_every_check_kind(sandboxed: None, official_data_dir: Path, tmp_path: Path) -> None:
    """An example with integer-match, a bash check, a python check then bash checks, calc (dev and std): 0 each."""
    ids = {"test": ["std-001-stock-00000", "std-006-new-00004", "std-004-Q47-00000", "std-005-new-00000"], "dev": ["dev-001-dev-00003"]}
    outcomes = {}
    with app_in_thread(lambda: _hostile_model({"*": (ZOMBIE_RIG, "31337")}, think_s=0)) as port:
        for split, chosen in ids.items():
            (tmp_path / split).write_text("\n".join(chosen))
            data = ("--data-dir", str(official_data_dir), "--split", split, "--task-ids", str(tmp_path / split))
            outcomes.update(_run(port, tmp_path / f"{split}.duckdb", *data))
    assert set(outcomes) == set(ids["test"] + ids["dev"]), outcomes
    assert all(s == "completed" and score == 0 for s, score, _ in outcomes.values()), outcomes


def test_full_pids_and_memory_cgroups_and_deleted_files_are_the_models_failure_not_env_error(sandboxed: None, tmp_path: Path) -> None:
    """Every case ends `completed`: the fills with a wrong answer (or no file made) score 0 and with the honest one
    1 (the check still starts and runs); deleting the counted files and answering 0 scores 0, the honest count 1."""
    commands = {tag: (command, answer) for tag, command, answer, _ in CASES}
    with app_in_thread(lambda: _hostile_model(commands)) as port:
        outcomes = _run(port, tmp_path / "fills.duckdb", "--tasks", f"os={_task_file(tmp_path / 'tasks.json')}", "--split", "test")
    assert len(outcomes) == len(CASES), outcomes
    for i, (tag, _, _, score) in enumerate(CASES):  # the file's records are custom-00000, ... in order
        status, got, details = outcomes[f"custom-{i:05d}"]
        assert (status, got) == ("completed", score), (tag, status, got, details)


async def test_relinked_bin_and_lib64_show_the_images_folders_to_checks(sandboxed: None) -> None:
    """/bin and /lib64 linked to folders of the model's (a fake bash, no loader): a check still runs the image's
    (round 3: every check failed to start, `open_tree usr/bin: Invalid argument`): the honest answer passes, a wrong
    one fails; the episode's own commands find no loader."""
    check = {"check": [{"language": "bash", "code": 'id root >/dev/null && [ "$(ls /bin/bash)" = /bin/bash ] && [ "$1" = 42 ]'}]}
    rig = ("import os\nos.makedirs('/opt/evil64')\nos.makedirs('/opt/evil')\n"
           "open('/opt/evil/bash', 'w').write('#!/usr/bin/sh\\necho 31337\\n')\nos.chmod('/opt/evil/bash', 0o755)\n"
           "for link, target in (('/bin', '/opt/evil'), ('/lib64', '/opt/evil64')):\n    os.remove(link)\n    os.symlink(target, link)\n"
           "print('relinked')\n")  # fmt: skip
    env = OSEnvironment(options={"script_timeout": 10})
    try:
        async with _Episode(env) as ep:
            from agentbench_async.envs.os_interaction.grading import run_script

            code, out = await run_script(ep.session._sandbox, {"language": "python", "code": rig}, [], 30)
            assert code == 0 and "relinked" in out, out
            assert "cannot execute" in await ep.sh("ls /")  # the episode's own commands have no loader now
            ok, details = await grade(ep.session._sandbox, check, "42", 10)
            assert ok, details
            ok, details = await grade(ep.session._sandbox, check, "31337", 10)
            assert not ok and "reason" not in details, details
    finally:
        await env.close()


def test_a_killed_engine_leaves_nothing_the_next_start_does_not_remove(sandboxed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 of the engine while an episode is frozen for its checks: its processes (a frozen process cannot die
    before it is thawed, v1) and its cgroups are left; the next start's sweep kills them by the group and removes the
    folders of every engine that is gone (round 3 left 99 empty agentbench-os-* cgroups behind)."""
    from agentbench_async.envs.os_interaction import sandbox as sandbox_mod

    script = tmp_path / "engine.py"
    script.write_text(
        "import asyncio\n"
        "from agentbench_async.envs.os_interaction import OSEnvironment\n"
        "from test_os_sandbox import _Episode\n"
        "async def main():\n"
        "    async with _Episode(OSEnvironment(options={})) as ep:\n"
        "        await ep.sh('sleep 1000 & disown')\n"
        "        sb = ep.session._sandbox\n"
        "        assert await sb.stop_model() is None\n"
        "        dirs = [*sb._cgroups.dirs, *sb._cgroups.checks.dirs]\n"
        "        print(sb.keeper_pid, *dirs, flush=True)\n"
        "        await asyncio.sleep(1000)\n"
        "asyncio.run(main())\n"
    )
    here = Path(__file__)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parents[2] / "src"), str(here.parent), str(here.parents[1])])}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    keeper, *folders = proc.stdout.readline().split()
    dirs = [Path(f.decode()) for f in folders]
    require(bool(dirs), "the host gives the sandboxes no cgroups")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)
    assert all(d.exists() for d in dirs)  # left behind by the killed engine
    monkeypatch.setattr(sandbox_mod, "_swept", False)
    sandbox_mod._sweep_stale()
    assert [d for d in dirs if d.exists()] == []
    for _ in range(100):
        if not Path(f"/proc/{int(keeper)}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{int(keeper)}").exists()


_ZOMBIE_TICKER = r"""
import ctypes, sys, threading, time
def tick():
    while True:
        with open(sys.argv[1], "w") as f:
            f.write(str(time.monotonic_ns()))
        time.sleep(0.001)
threading.Thread(target=tick).start()
time.sleep(0.1)
ctypes.CDLL(None).syscall(60, 0)
"""


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_the_v2_freezer_freezes_and_kills_by_the_group(kind: str, tmp_path: Path) -> None:
    """The freezer itself (v1 ``freezer.state``; v2 ``cgroup.freeze``/``cgroup.kill``, on the unified hierarchy
    beside v1's where the host is hybrid): a zombie leader's ticking thread stands still once frozen, SIGCONT does
    not move it, and killing by the group empties the cgroup."""
    from agentbench_async.envs.os_interaction.cgroups import Group, read_pids

    hierarchy = {"v1": Path("/sys/fs/cgroup/freezer"), "v2": Path("/sys/fs/cgroup/unified")}[kind]
    if kind == "v2" and (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
        hierarchy = Path("/sys/fs/cgroup")
    require(os.geteuid() == 0 and hierarchy.is_dir(), f"a {kind} freezer hierarchy this user may write ({hierarchy})")
    folder = hierarchy / f"agentbench-os-test-{os.getpid()}-{kind}"
    folder.mkdir()
    group = Group()
    group.dirs, group.freezer = [folder], folder
    tick = tmp_path / "tick"
    proc = subprocess.Popen([sys.executable, "-c", _ZOMBIE_TICKER, str(tick)], preexec_fn=lambda: (folder / "cgroup.procs").write_text("0"))
    try:
        time.sleep(0.5)
        assert Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"  # its threads run on
        assert group.freeze()
        before = tick.read_text()
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.3)
        assert tick.read_text() == before
        emptied = group.kill()
        proc.wait(timeout=5)
        assert emptied and read_pids(folder) == []
    finally:
        proc.kill()
        proc.wait()
        group.remove()
    assert not folder.exists()


async def test_without_a_freezer_the_episodes_processes_are_killed_before_checks(sandboxed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cgroup at all (an ordinary user without delegation): the zombie-leader rig is killed by thread-group id
    before the checks (its threads with it), so a wrong answer fails and the honest one passes."""
    from agentbench_async.envs.os_interaction import sandbox as sandbox_mod
    from agentbench_async.envs.os_interaction.cgroups import Group

    class _NoCgroups(sandbox_mod._Cgroups):
        def __init__(self, name: str, limits: Any, *args: object) -> None:
            self.dirs, self.memory, self.pids, self.freezer, self.checks = [], None, None, None, Group()

    monkeypatch.setattr(sandbox_mod, "_Cgroups", _NoCgroups)
    env = OSEnvironment(options={"script_timeout": 10})
    check = {"check": [{"language": "bash", "code": 'id root >/dev/null && [ "$1" = 42 ]'}]}
    try:
        async with _Episode(env) as ep:
            assert "rigged" in await ep.sh(ZOMBIE_RIG)
            assert not ep.session._sandbox.freezable
            ok, details = await grade(ep.session._sandbox, check, "31337", 10)
            assert not ok, details
            assert (await grade(ep.session._sandbox, check, "42", 10))[0]
    finally:
        await env.close()


async def test_a_sandbox_closed_while_frozen_leaves_no_process_and_no_cgroup(sandboxed: None) -> None:
    """An episode cancelled during its checks (its cgroup frozen): closing kills it by the group (a frozen v1 process
    dies only once thawed, and pid 1 cannot end before the rest) and removes its cgroups."""
    env = OSEnvironment(options={})
    try:
        async with _Episode(env) as ep:
            await ep.sh("sleep 1000 & disown")
            sandbox = ep.session._sandbox
            assert await sandbox.stop_model() is None and model_frozen(sandbox)
            keeper, dirs = sandbox.keeper_pid, [*sandbox._cgroups.dirs, *sandbox._cgroups.checks.dirs]
            await sandbox.close()
            for _ in range(100):  # ended; reaped by the warden zygote a moment later
                if not Path(f"/proc/{keeper}").exists():
                    break
                await asyncio.sleep(0.05)
            assert not Path(f"/proc/{keeper}").exists() and [d for d in dirs if d.exists()] == []
    finally:
        await env.close()
