"""Running init/check scripts in the sandbox and grading an episode (spec §2.3 and §5).

A script is a process the episode's warden starts inside the sandbox (root, cwd ``/``, stdin at end of
file, stdout and stderr one pipe). Its parameters (the agent's answer, earlier checks' outputs) travel
through a pipe on fd 3, never argv: an answer of any length or content reaches the check, where upstream's
``docker exec`` argv would fail (E2BIG over 128 KiB, a NUL byte). Python scripts see them as
``sys.argv[1:]`` exactly; bash scripts as ``$1``... (bash cannot hold NUL bytes: they are dropped there).

The comparison checks (``check/integer-match.py`` and the other named ``check/*.py`` files: functions of the
answer and the example's output alone) are evaluated by the engine (:func:`.scripts.compare`), without a
process. An answer task's example (the ``null`` check step: what the answer is compared with) runs before the
model's first turn, on the state the task set up (:func:`run_example`): what the model does to the files cannot
change the expected answer. Before the first check that is a process, every process of the episode is frozen as a
group (:meth:`.Sandbox.stop_model`: a cgroup freezer, which no process inside can undo and which stops every
thread; they are still there to be counted, as upstream's checks ran beside the agent's shell); the checks run in
a sibling cgroup with a budget of their own, and what one leaves running is killed before the next. Checks run with
the pristine image's tools — executables, libraries, the loader's files, NSS, Python's standard library and site, shell
start-up files (``_warden.TOOL_DIRS``) — over the episode's state, always: replacing ``bash``, ``python3``,
libc, ``sitecustomize``, an NSS module or anything on ``PATH`` does not change a verdict. A check that does
not finish (a timeout), or that the episode's state keeps from starting, fails the episode (the model's
failure, score 0, the reason stored), never ``env_error``: also when the sandbox ended during the model's turns
(its pid 1 is gone). ``env_error`` is left for what happens before the first turn or to the host (the warden).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from typing import Any

from ...errors import EnvError
from .process import off_loop
from .sandbox import Sandbox
from .scripts import compare

MAX_OUTPUT = 4 << 20
# bash: "$@" from fd 3 (NUL-terminated strings), then fd 3 closed; builtins only
_BASH_PARAMS = (
    '__ab_p=(); while IFS= read -r -d "" __ab_x <&3; do __ab_p+=("$__ab_x"); done; exec 3<&-; '
    'set -- "${__ab_p[@]}"; unset __ab_p __ab_x\n'
)
# python: the code, then the parameters, each as ``<length>:<UTF-8 bytes>`` on fd 3; read with builtins only
# (no ``import json``: it pulls in re, enum and functools, 12 ms of a 27 ms check); the code runs as
# ``python3 -c code params...`` would run it
_PY_WRAPPER = (
    "import sys\n"
    "def _ab_load():\n"
    "    with open(3, 'rb') as f:\n"
    "        data = f.read()\n"
    "    items, i = [], 0\n"
    "    while i < len(data):\n"
    "        j = data.index(b':', i)\n"
    "        end = j + 1 + int(data[i:j])\n"
    "        items.append(data[j + 1 : end].decode('utf-8', 'surrogatepass'))\n"
    "        i = end\n"
    "    sys.argv[:] = ['-c', *items[1:]]\n"
    "    return items[0]\n"
    "_ab_code = _ab_load()\n"
    "del _ab_load\n"
    "exec(compile(_ab_code, '<string>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})\n"
)


def _py_payload(items: list[str]) -> bytes:
    """``items`` for :data:`_PY_WRAPPER`: each as its length, a colon and its UTF-8 bytes (lone surrogates kept)."""
    out = bytearray()
    for item in items:
        data = item.encode("utf-8", errors="surrogatepass")
        out += b"%d:" % len(data) + data
    return bytes(out)


def _command(script: dict[str, str], params: list[str], check: bool) -> tuple[list[str], bytes]:
    """(argv, what goes to fd 3) for one script."""
    if script["language"] == "python":
        flags = ["-I", "-S"] if check else []
        return ["/usr/bin/python3", *flags, "-c", _PY_WRAPPER], _py_payload([script["code"], *params])
    payload = b"".join(p.replace("\0", "").encode("utf-8", errors="surrogateescape") + b"\0" for p in params)
    return ["/bin/bash", "-c", _BASH_PARAMS + script["code"], "--"], payload


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the script ended without reading its parameters
    finally:
        os.close(fd)


def _write_now(fd: int, data: bytes) -> bytes:
    """Write what the pipe takes at once (all of it, for the usual parameters: a pipe holds 64 KiB) and close ``fd``
    once all is written; the rest, if any, is left for :func:`_write_all` (``fd`` blocking again)."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BlockingIOError:
        os.set_blocking(fd, True)
        return bytes(view)
    except OSError:
        pass  # the script ended without reading its parameters
    os.close(fd)
    return b""


async def run_script(
    sandbox: Sandbox, script: dict[str, str], params: list[str], timeout: float, *, check: bool = False
) -> tuple[int, str]:
    """Run one script as its own process in the sandbox (``check``: with the pristine image's tools, in the checks'
    cgroup, and whatever it leaves running is killed once it ends). Returns
    (exit code, combined stdout+stderr); -1 when it did not finish within ``timeout`` (then its whole process
    group is killed).

    Waits for the process, not for its output to close, so background jobs an init leaves behind
    (``(sleep 60) &``) do not hold it up."""
    argv, payload = _command(script, params, check)
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    par_r, par_w = os.pipe()
    os.close(in_w)  # stdin: at end of file at once
    try:
        proc, _ = await sandbox.spawn(argv, check=check, stdio=(in_r, out_w, out_w), extra_fds=(par_r,))
    except BaseException:
        for fd in (out_r, par_w):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, par_r):
            with contextlib.suppress(OSError):
                os.close(fd)
    rest = _write_now(par_w, payload)  # no thread for what the pipe takes at once
    writer = asyncio.ensure_future(off_loop(_write_all, par_w, rest)) if rest else None
    output = bytearray()
    loop = asyncio.get_running_loop()
    os.set_blocking(out_r, False)
    eof = asyncio.Event()

    def readable() -> bool:
        """Read what is there; False once nothing more is (for now)."""
        try:
            chunk = os.read(out_r, 65536)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            eof.set()
            loop.remove_reader(out_r)
            return False
        if len(output) < MAX_OUTPUT:
            output.extend(chunk[: MAX_OUTPUT - len(output)])
        return True

    loop.add_reader(out_r, readable)
    try:
        try:
            code = await asyncio.wait_for(proc.wait(), timeout=timeout)
        except asyncio.TimeoutError:
            await sandbox.kill_group(proc.pid)
            code = -1
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(eof.wait(), timeout=0.05)  # background jobs may hold the pipe open
        drained = 0
        while not eof.is_set() and drained < MAX_OUTPUT and readable():
            drained += 65536
    finally:
        with contextlib.suppress(Exception):
            loop.remove_reader(out_r)
        os.close(out_r)
        if writer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer, timeout=5)
        if check and sandbox.running():  # what the check left running goes before anything else starts
            await sandbox.clear_checks(proc.pid)
    return code, bytes(output).decode("utf-8", errors="replace")


def match_answer(spec: dict[str, Any], answer: str | None) -> bool:
    if answer is None:
        return False
    if spec.get("strip", True):
        answer = answer.strip()
    if "answer" in spec:
        return answer == spec["answer"]
    return re.search(spec["regex"], answer) is not None


def needs_example(data: dict[str, Any]) -> bool:
    """Whether grading the task compares with its example's output (a ``null`` check step)."""
    return "check" in data and None in data["check"]


async def run_example(sandbox: Sandbox, data: dict[str, Any], timeout: float) -> tuple[int, str]:
    """The task's example on the state its init and ``start`` set up, before the model's first turn, run as a check
    (the image's tools, the checks' cgroup): (exit code, output), what the ``null`` check steps compare with.
    Upstream ran it after the agent, on what the agent left (a model that deletes the files it is asked to count
    and answers 0 passed); no official example reads its parameters, so it gets none."""
    return await run_script(sandbox, data["example"], [], timeout, check=True)


def _stopped_early(sandbox: Sandbox, exc: EnvError) -> str:
    """Why a check could not run in a sandbox that is gone or failing; raises ``exc`` when that is the host's doing
    (its warden ended, not its pid 1)."""
    if sandbox.running():
        return str(exc)[:400]  # the warden is there: the episode's state kept the check from starting
    if sandbox.ended_by_episode():
        return "the sandbox ended (its pid 1 exited) before the checks"
    raise exc


async def grade(
    sandbox: Sandbox | None, data: dict[str, Any], answer: str | None, timeout: float, *, expected: tuple[int, str] | None = None
) -> tuple[bool, dict[str, Any]]:
    """The task's verdict for ``answer`` (``None`` after ``finish``), plus details for the store. A ``match``
    task needs no sandbox. ``expected``: what :func:`run_example` gave before the first turn (the ``null`` steps
    use it; without it the example runs now, as upstream's did). Raises ``EnvError`` only for what the model cannot
    cause (the sandbox's warden is gone)."""
    if "match" in data:
        return match_answer(data["match"], answer), {}
    if sandbox is None:
        raise EnvError("os: the episode's checks need its sandbox, which was never started")
    stopped: list[bool] = []
    try:
        return await _run_checks(sandbox, data, str(answer), timeout, expected, stopped)
    finally:
        if stopped and sandbox.running():
            await sandbox.resume_model()  # the verdict is in: a session that goes on (tests) finds its processes running


async def _run_checks(
    sandbox: Sandbox, data: dict[str, Any], answer: str, timeout: float, expected: tuple[int, str] | None, stopped: list[bool]
) -> tuple[bool, dict[str, Any]]:
    params = [answer]
    details: dict[str, Any] = {}
    for i, step in enumerate(data["check"]):
        if step is None and expected is not None:
            code, output = expected
            if code != 0:
                return False, {**details, "failed_check": i, "reason": f"the example exited {code} before the first turn", "check_output": output[-400:]}
            params.append(output)
            continue
        script = data["example"] if step is None else step
        if script["language"] == "compare":  # a pure function of the parameters: decided here, no process
            if not compare(script["code"], params):
                return False, {**details, "failed_check": i, "check_output": ""}
            params.append("")  # what the script prints: nothing
            continue
        try:
            if not stopped:  # the model's turns are over: its processes frozen as a group (or killed) before any check
                stopped.append(True)
                why = await sandbox.stop_model()
                if why is not None:
                    return False, {**details, "failed_check": i, "reason": why}
            code, output = await run_script(sandbox, script, params, timeout, check=True)
        except EnvError as exc:
            return False, {**details, "failed_check": i, "reason": _stopped_early(sandbox, exc)}
        if code == -1:
            return False, {**details, "failed_check": i, "reason": f"check {i} did not finish within {timeout:g} s", "check_output": output[-400:]}
        if code != 0:
            return False, {**details, "failed_check": i, "check_output": output[-400:]}
        params.append(output)
    return True, details
