"""Official os dev 0-2 start a background writer by typing a tab-indented ``python3 -c`` into the interactive shell
(issue 36). AgentBench v0.2 sends ``start`` the same way (``Container.execute``: the bytes and a newline into
``bash --login`` run by ``docker exec`` with a terminal; THUDM/AgentBench src/server/tasks/os_interaction/task.py,
commit 02cf61380204ffdecb103986b287bd55e4029011). Reproducing that mechanism here (a ``bash --login`` on a pty fed the
same bytes) shows readline taking each tab for completion: the program loses its indentation and exits at once. This
project's shell does the same, and the episode's details say so."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import time
from pathlib import Path

from support import OFFICIAL_DATA, require

from agentbench_async.envs import make_env
from agentbench_async.envs.base import EpisodeContext
from agentbench_async.envs.os_interaction import START_TABS_NOTE, UNSOLVABLE_START
from agentbench_async.types import ModelReply


def _start(index: int) -> str:
    require(OFFICIAL_DATA.is_dir(), f"the official AgentBench data is not at {OFFICIAL_DATA}")
    tasks = json.loads((OFFICIAL_DATA / "os_interaction" / "data" / "dev.json").read_text(encoding="utf-8"))
    return str(tasks[index]["start"])


def _read(fd: int, seconds: float) -> bytes:
    out, end = b"", time.monotonic() + seconds
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


def test_upstream_s_mechanism_eats_the_tabs(tmp_path: Path) -> None:
    """AgentBench's way, reproduced: ``bash --login`` on a terminal in a directory of a few entries (the container's
    ``/``), TERM=xterm as docker exec gives it, the start command's bytes and a newline typed in."""
    start = _start(0)
    assert "\n\twith open" in start and "\n\t\tf.write" in start  # the program's body is indented with tabs
    log = tmp_path / "root" / "log"
    log.parent.mkdir()
    typed = start.replace("/root/log", str(log))
    home = tmp_path / "home"
    home.mkdir()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the login shell
        os.chdir(tmp_path)
        os.execve("/bin/bash", ["bash", "--login"], {"TERM": "xterm", "HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"})
    try:
        _read(fd, 1.0)
        os.write(fd, typed.encode() + b"\n")
        echoed = _read(fd, 3.0)
        os.write(fd, b"jobs -l\n")
        jobs = _read(fd, 1.5).decode(errors="replace")
    finally:
        os.write(fd, b"kill %1 2>/dev/null; exit\n")
        _read(fd, 0.5)
        os.close(fd)
        os.waitpid(pid, 0)
    assert b"\x07" in echoed  # readline rang the bell: the tab was a completion, not a character
    assert b"IndentationError" in echoed
    assert "Exit 1" in jobs and "\nwith open(" in jobs.replace("\r", "")  # the job ran with its tabs gone
    assert not log.exists()  # the writer never wrote


async def test_this_project_s_shell_does_the_same_and_says_so() -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    _start(0)
    env = make_env("os", data_dir=OFFICIAL_DATA)
    await env.start()
    try:
        session = await env.open_session(env.get_task("dev", "dev-001-dev-00000"), EpisodeContext(episode_id="tabs"))
        await session.begin()
        step = await session.step(ModelReply(content="Think: look.\n\nAct: bash\n\n```bash\nsleep 1; ls /root/log\n```"))
        seen = str(step.observation[0]["content"])
        assert "IndentationError" in seen and "Exit 1" in seen and "\nwith open(" in seen  # as upstream's first output
        assert "No such file or directory" in seen  # the writer never wrote
        done = await session.step(ModelReply(content="Think: done.\n\nAct: answer(1)"))
        assert done.outcome is not None and done.outcome.details["start_note"] == START_TABS_NOTE
        assert done.outcome.details["unsolvable_as_shipped"] == UNSOLVABLE_START  # every report names the task and why
        await session.close()
    finally:
        await env.close()
