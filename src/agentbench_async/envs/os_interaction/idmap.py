"""Which host ids a sandbox's ids map onto (its user namespace), and who writes the map.

Root: the sandbox's ids 0..65535 are host ids from :data:`ROOT_ID_BASE`, which no account owns (checked at
start). An ordinary user: its ``/etc/subuid``/``/etc/subgid`` range through ``newuidmap``/``newgidmap``, else its
own id alone (a single-id sandbox: tasks with several users cannot run).
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

from ...environment import EnvError

ROOT_ID_BASE = 0x70000000
ID_COUNT = 65536
# root: the owner of each episode's user namespace on the host is OWNER_BASE + its warden's pid (pids stay
# below 2**22), ids right after the sandboxes' own that no account owns (checked): the kernel counts its
# per-user quotas (inotify, message queues, pending signals, ...) per owner, so per episode
OWNER_BASE = ROOT_ID_BASE + ID_COUNT
OWNER_COUNT = 1 << 22


@dataclass(frozen=True)
class IdMap:
    """How the sandbox's ids 0..count-1 map onto host ids, and who writes the map."""

    uid_base: int
    gid_base: int
    count: int
    helper: bool = False  # newuidmap/newgidmap (an ordinary user's /etc/subuid range)

    @property
    def setgroups(self) -> bool:
        """Whether the namespace may call setgroups (not with a single-id map an ordinary user wrote)."""
        return self.count > 1 or os.geteuid() == 0

    @property
    def several_users(self) -> bool:
        return self.count > 1

    def write(self, pid: int) -> None:
        """Write the id maps of process ``pid``'s new user namespace from this process (the host's namespace): as root,
        or an ordinary user's single id (with setgroups denied), as the warden asks once it has made the namespace. Not
        a subordinate range (ValueError): newuidmap's, which the warden's mapper writes. Raises OSError."""
        if self.helper:
            raise ValueError("a subordinate id range is written through newuidmap/newgidmap")
        if not self.setgroups:
            Path(f"/proc/{pid}/setgroups").write_text("deny")
        for name, base in (("uid_map", self.uid_base), ("gid_map", self.gid_base)):
            Path(f"/proc/{pid}/{name}").write_text(f"0 {base} {self.count}\n")

    def config(self) -> dict[str, object]:
        """What the warden needs to write the maps itself (the host's helper tools by absolute path)."""
        out: dict[str, object] = {"uid_base": self.uid_base, "gid_base": self.gid_base, "count": self.count,
                                  "helper": self.helper, "setgroups": self.setgroups}  # fmt: skip
        if self.helper:
            for tool in ("newuidmap", "newgidmap"):
                path = shutil.which(tool)
                if path is None:
                    raise EnvError(f"os: {tool} not found; install the Debian package uidmap (apt-get install uidmap)")
                out[tool] = os.path.realpath(path)
        return out


def _subid_range(path: Path, user: str, uid: int) -> tuple[int, int] | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in (user, str(uid)) and parts[1].isdigit() and parts[2].isdigit():
            return int(parts[1]), int(parts[2])
    return None


def host_idmap(etc: Path = Path("/etc")) -> IdMap:
    """The id range for sandboxes of this process: root's fixed unowned range, an ordinary user's
    ``/etc/subuid``/``/etc/subgid`` range (through newuidmap/newgidmap), else the user's own id alone."""
    uid = os.geteuid()
    if uid == 0:
        return IdMap(ROOT_ID_BASE, ROOT_ID_BASE, ID_COUNT)
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    subuid = _subid_range(etc / "subuid", user, uid)
    subgid = _subid_range(etc / "subgid", user, uid)
    helpers = shutil.which("newuidmap") and shutil.which("newgidmap")
    if subuid and subgid and helpers and min(subuid[1], subgid[1]) >= ID_COUNT:
        return IdMap(subuid[0], subgid[0], ID_COUNT, helper=True)
    return IdMap(uid, os.getegid(), 1)
