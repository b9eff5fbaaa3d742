"""The sandbox's spawn helper (``_spawn.c``), compiled once per machine with the host's C compiler.

The warden starts the agent's shell, the task's init scripts and bubblewrap through it: a ``posix_spawn`` (a
vfork) of this small program, which sets up the process (cgroups, session, the sandbox's mount namespace,
limits, capabilities, seccomp) and execs, instead of a fork of the warden's Python process and the same steps in
Python (measured in docs/performance.md, "The spawn path"). It is built the first time a sandbox starts, into the
user's cache folder next to the sandbox's root (named by a hash of its source, so a changed source is built
again), statically linked where the C library allows. Without a C compiler (``cc``, or ``$CC``) the warden forks
as before, and a note says so once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .rootfs import cache_root

SOURCE = Path(__file__).with_name("_spawn.c")
_lock = threading.Lock()
_built: dict[str, str | None] = {}


def spawn_helper() -> str | None:
    """The helper's path, built now if it is not yet (blocking: call off the event loop), else None (no compiler)."""
    with _lock:
        if "path" not in _built:
            _built["path"] = _build(SOURCE, cache_root().parent / "os-spawn")
        return _built["path"]


def _compiler() -> list[str] | None:
    if os.environ.get("CC"):
        return shlex.split(os.environ["CC"])
    found = shutil.which("cc") or shutil.which("gcc")
    return [found] if found else None


def _build(source: Path, folder: Path) -> str | None:
    code = source.read_bytes()
    target = folder / f"agentbench-spawn-{platform.machine()}-{hashlib.sha256(code).hexdigest()[:16]}"
    if target.is_file() and os.access(target, os.X_OK):
        return str(target)
    cc = _compiler()
    why = "no C compiler (cc) was found"
    if cc is not None:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".agentbench-spawn-", dir=folder)
        os.close(fd)
        try:
            for static in (["-static"], []):  # static: no dynamic loader at each start
                try:
                    done = subprocess.run([*cc, "-O2", *static, "-o", tmp, str(source)], capture_output=True, timeout=120)
                except (OSError, subprocess.TimeoutExpired) as exc:
                    why = f"{cc[0]} failed ({exc})"
                    break
                if done.returncode == 0:
                    os.chmod(tmp, 0o755)
                    os.replace(tmp, target)  # atomic: another engine building it at once writes the same file
                    return str(target)
                why = f"{cc[0]} failed: " + " ".join(done.stderr.decode(errors="replace").split())[-300:]
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    print(
        f"note: os: the sandbox's spawn helper was not built ({why}); processes in sandboxes start by a fork of the "
        "warden's Python instead, ~2 ms more CPU each (install gcc, or set CC)",
        file=sys.stderr,
        flush=True,
    )
    return None

