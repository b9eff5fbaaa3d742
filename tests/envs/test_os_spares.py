"""os: machines (sandbox + login shell) made ahead and closed behind the episodes (envs/os_interaction/spares.py)."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from agentbench_async.envs.base import EpisodeContext, Task
from agentbench_async.envs.os_interaction import OSEnvironment
from agentbench_async.envs.os_interaction.grading import run_script
from agentbench_async.envs.os_interaction.limits import Limits, sandboxes_within_host
from agentbench_async.envs.os_interaction.spares import SPARE_MACHINES
from agentbench_async.types import ModelReply
from test_os_sandbox import os_root, sandboxed  # noqa: F401  (fixtures)


def _task(i: int, init: str = "") -> Task:
    return Task(env="os", split="dev", task_id=f"spare-{i}", data={
        "description": "probe", "init": [{"language": "bash", "code": init}] if init else [], "start": None,
        "example": None, "match": {"answer": "x"},
    })  # fmt: skip


async def _sh(session: object, command: str) -> str:
    step = await session.step(ModelReply(content=f"Act: bash\n```bash\n{command}\n```"))  # type: ignore[attr-defined]
    return step.observation[0]["content"]


async def _left_alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still alive after half a second (killed processes are reaped at once, not whenever
    the host's init gets to them)."""
    for _ in range(25):
        if not [p for p in pids if _alive(p)]:
            break
        await asyncio.sleep(0.02)
    return [p for p in pids if _alive(p)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def test_later_episodes_take_fresh_machines_made_ahead_and_close_leaves_nothing(sandboxed: None) -> None:
    env = OSEnvironment(options={})
    sessions = []
    for i in range(2):  # a second episode on the loop: spares are made from now on
        session = await env.open_session(_task(i), EpisodeContext(episode_id=f"e{i}"))
        await session.begin()
        sessions.append(session)
    await env._spares.settle()
    ready = list(env._spares._ready)
    assert len(ready) == SPARE_MACHINES and all(m.alive() for m in ready)

    # the next episode takes a spare: its sandbox was started before the episode began
    await _sh(sessions[0], "echo dirty > /root/left-behind; export LEFT=behind; cd /tmp")
    third = await env.open_session(_task(2, init="echo 'echo RC-LOADED' >> /root/.bashrc"), EpisodeContext(episode_id="e2"))
    await third.begin()
    assert third._machine is ready[0]
    # ... and it is as fresh as one made for it: nothing of another episode, the shell at / with the image's
    # rc files (the init's .bashrc edit comes after the login, as upstream's)
    out = await _sh(third, "cat /root/left-behind 2>&1; echo \"[$LEFT]\"; pwd")
    assert "No such file" in out and "[]" in out and out.strip().endswith("/")
    assert "RC-LOADED" not in out
    grade_ok, _ = await _grade(third)
    assert grade_ok is False  # the episode's grading runs in the spare like in any machine

    # ended episodes' machines close in the background; the environment's close settles them and the spares
    pids = [s._sandbox.keeper_pid for s in (*sessions, third)] + [m.sandbox.keeper_pid for m in env._spares._ready]
    for s in (*sessions, third):
        await s.close()
    await env.close()
    assert env._spares._ready == [] and not env._spares._closing
    assert await _left_alive(pids) == []


async def _grade(session: object) -> tuple[bool, dict[str, object]]:
    step = await session.step(ModelReply(content="Act: answer(y)"))  # type: ignore[attr-defined]
    assert step.outcome is not None
    return bool(step.outcome.success), step.outcome.details


async def test_a_dead_spare_is_never_handed_out(sandboxed: None) -> None:
    env = OSEnvironment(options={})
    try:
        for i in range(2):
            session = await env.open_session(_task(i), EpisodeContext(episode_id=f"d{i}"))
            await session.begin()
            await session.close()
        await env._spares.settle()
        dead = env._spares._ready[0]
        await dead.sandbox.close()  # its warden is gone (as after a crash)
        session = await env.open_session(_task(9), EpisodeContext(episode_id="d9"))
        await session.begin()
        assert session._machine is not dead
        assert "ok" in await _sh(session, "echo ok")
        await session.close()
    finally:
        await env.close()


async def test_a_single_episode_makes_no_spares(sandboxed: None) -> None:
    env = OSEnvironment(options={})
    session = await env.open_session(_task(0), EpisodeContext(episode_id="one"))
    await session.begin()
    await session.close()
    await env._spares.settle()
    assert env._spares._ready == []
    await env.close()


async def test_closing_a_sandbox_with_its_shell_and_a_script_still_running_leaves_no_process(sandboxed: None) -> None:
    # as when a run is stopped during a check: the warden dies while processes it started still run; they and
    # the sandbox's pid 1 must end (the warden zygote reaps them; the host's init might never do it)
    env = OSEnvironment(options={})
    await env.start()
    machine = await env._new_machine()
    script = asyncio.ensure_future(run_script(machine.sandbox, {"language": "bash", "code": "sleep 1000"}, [], 60))
    await asyncio.sleep(0.3)
    pids = machine.sandbox._pids()
    assert len(pids) >= 4  # keeper, shell, the script (and bubblewrap's monitor)
    cgroup_dirs = list(machine.sandbox._cgroups.dirs) if machine.sandbox._cgroups else []
    await machine.close()
    script.cancel()
    assert await _left_alive(pids) == []
    assert [d for d in cgroup_dirs if d.exists()] == []  # the episode's cgroups are removed once it is empty
    await env.close()


async def test_a_burst_of_episodes_queues_for_the_environments_work_and_no_init_times_out(sandboxed: None) -> None:
    """Every episode of a run starts at once: the sandboxes' starts and the tasks' init scripts take turns for
    ``script_concurrency`` places, and a script's timeout counts from its own start, not from the burst's."""
    env = OSEnvironment(options={"script_concurrency": 1, "script_timeout": 5, "concurrency": 8})
    assert env.capacity == 8
    # each init records when it ran (host clock, shared by the sandboxes), then takes 1 s: 6 of them in turn take ~6 s,
    # more than a script's 5 s, so a timeout counted from the burst's start would end the later ones
    init = "date +%s.%N > /root/began; sleep 1; date +%s.%N > /root/ended"
    sessions = [await env.open_session(_task(i, init=init), EpisodeContext(episode_id=f"b{i}")) for i in range(6)]
    try:
        await asyncio.gather(*(s.begin() for s in sessions))  # an init that timed out would raise EnvError here
        spans = []
        for s in sessions:
            began, ended = re.findall(r"\d+\.\d+", await _sh(s, "cat /root/began /root/ended"))
            spans.append((float(began), float(ended)))
        spans.sort()
        assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:])), spans  # one after another
        assert spans[-1][1] - spans[0][0] >= 5.0
    finally:
        for s in sessions:
            await s.close()
        await env.close()


def test_the_os_environment_keeps_64_sandboxes_and_a_few_busy_ones_by_default() -> None:
    env = OSEnvironment(options={})
    assert env.capacity == sandboxes_within_host(env.limits, 64, SPARE_MACHINES)[0]  # 64 where the host's memory holds them
    assert env.script_concurrency == max(8, 8 * (os.cpu_count() or 1))


def test_live_sandboxes_are_held_under_a_share_of_the_hosts_memory_in_one_line() -> None:
    """64 sandboxes of 1,088 MiB each (processes, disk and /dev/shm) on a 24 GiB host: 14 (with the 2 made ahead,
    16 x 1,088 MiB <= 75% of 24,105 MiB), said in one line; 64 small ones fit."""
    allowed, line = sandboxes_within_host(Limits(), 64, 2, host_mb=24_105)
    assert allowed == 14 and line is not None and "\n" not in line and "14 sandboxes at once, not 64" in line
    assert "1,088 MiB" in line and "os.memory_mb" in line
    assert sandboxes_within_host(Limits(memory_mb=128, disk_mb=128, shm_mb=16), 64, 2, host_mb=24_105) == (64, None)
    assert sandboxes_within_host(Limits(), 64, 2, host_mb=1_000)[0] == 1  # never none
