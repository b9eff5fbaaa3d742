"""The sandbox's root filesystem: built for the purpose, never a view of the host's.

By default it is a Debian bookworm ``minbase`` root with the package set of AgentBench's ``local-os/default``
image (spec §8: python3, pip, git, vim, curl, wget, unzip, zip, tree, with their recommends as ``apt
install`` gives them, plus procps; apt lists kept; no sudo), built once with ``mmdebstrap`` from the
Debian mirror the host's apt uses and cached under the user's cache directory in a folder named by the
hash of its recipe. The packages the official tasks ``apt install`` (``OFFLINE``) wait as ``.deb`` files in
``/var/cache/apt/archives`` (not installed, as in that image), so the task's ``apt install`` installs them
with no network (``apt update`` fails to reach the mirror, warns and keeps the lists); ``offline.txt``
beside the root lists them. The tree is unpacked once and only ever used as the read-only lower layer of each
episode's overlay. ``rootfs=DIR`` uses a prepared root directory as is; ``rootfs=TAR`` (e.g. ``docker
export``) is unpacked once into the cache, keyed by the archive's path, size and modification time.

Host data mmdebstrap would copy in (``/etc/hostname``, ``/etc/hosts``, ``/etc/resolv.conf``) is replaced by
neutral files while building.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import unquote

from ...environment import EnvUnavailableError

PACKAGES = ("python3", "python3-pip", "git", "vim", "curl", "wget", "unzip", "zip", "tree", "procps")
# What official os tasks `apt install` (std-006-new-00005/00006's init, 00008's example after its init's
# `apt remove sudo`), downloaded into the root's apt cache but not installed: AgentBench's image has no sudo,
# and an installed sudo would make 00008's init `apt remove sudo` (no -y) ask, read end of file and fail
OFFLINE = ("sudo",)
# the sandbox has no network: a task's `apt update` fails at once instead of retrying for ~10 s (it then
# warns, keeps the lists and exits 0, as with a mirror that is down)
_NO_RETRIES = (
    "printf '# agentbench: the sandbox has no network, retrying a download only waits\\nAcquire::Retries \"0\";\\n' "
    '> "$1/etc/apt/apt.conf.d/99agentbench-no-network"'
)
DEFAULT_MIRROR = "http://deb.debian.org/debian"
_HOSTNAME = "agentbench"
# Run inside the new root at the end of the build (mmdebstrap customize hook; $1 is the root).
_CUSTOMIZE = (
    f'echo {_HOSTNAME} > "$1/etc/hostname"; '
    f'printf "127.0.0.1\\tlocalhost\\n127.0.1.1\\t{_HOSTNAME}\\n::1\\tlocalhost ip6-localhost ip6-loopback\\n" > "$1/etc/hosts"; '
    'rm -f "$1/etc/resolv.conf"; : > "$1/etc/resolv.conf"; '
    'rm -f "$1/etc/machine-id" "$1/var/lib/dbus/machine-id"; '
    # Debian's bash recommends bash-completion; Ubuntu's docker image (AgentBench's base) has bash without
    # it and its `apt install` does not add it, and it costs every login shell ~8 ms
    'chroot "$1" dpkg --purge bash-completion'
)
_REQUIRED_INSIDE = ("bin/bash", "usr/bin/env", "usr/bin/setpriv", "usr/bin/setsid")
Report = Callable[[str], None]


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the built root; its hash names the cache folder."""

    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = PACKAGES
    offline: tuple[str, ...] = OFFLINE  # .debs (and missing dependencies) in /var/cache/apt/archives
    recommends: bool = True  # `apt install` in AgentBench's Dockerfile installs recommends
    keep_apt_lists: bool = True
    mirror: str = DEFAULT_MIRROR
    customize: str = field(default=_CUSTOMIZE, repr=False)

    def key(self) -> str:
        """The recipe's fields and the command they make (hooks written in code, not fields, count too)."""
        blob = json.dumps({**asdict(self), "argv": self.argv(Path("/root"))}, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def argv(self, target: Path) -> list[str]:
        argv = [
            "mmdebstrap", f"--variant={self.variant}", "--include=" + ",".join(self.packages),
            f"--aptopt=APT::Install-Recommends \"{'true' if self.recommends else 'false'}\"",
        ]  # fmt: skip
        if self.offline:  # before the customize hook empties resolv.conf; only these .debs stay in the cache
            argv += [
                '--customize-hook=chroot "$1" apt-get clean && chroot "$1" apt-get install --download-only --yes '
                + " ".join(self.offline) + ' && rm -f "$1"/var/cache/apt/*.bin && ' + _NO_RETRIES,
                "--skip=cleanup/apt/cache",
            ]
        argv.append(f"--customize-hook={self.customize}")
        if self.keep_apt_lists:
            argv.append("--skip=cleanup/apt/lists")
        return [*argv, self.suite, str(target), self.mirror]


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/agentbench-async/os-rootfs`` (``~/.cache/...`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentbench-async" / "os-rootfs"


def host_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror the host's apt uses (first non-security ``debian`` URI), else deb.debian.org."""
    files = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*.list"))]
    files += sorted((sources_dir / "sources.list.d").glob("*.sources"))
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if path.suffix == ".sources":
            uris = re.findall(r"^URIs:\s*(.+)$", text, re.MULTILINE)
            candidates = [u for line in uris for u in line.split()]
        else:
            candidates = re.findall(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text, re.MULTILINE)
        for uri in candidates:
            if uri.rstrip("/").endswith("/debian") and uri.startswith(("http://", "https://")):
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def default_recipe(mirror: str | None = None) -> Recipe:
    return Recipe(mirror=(mirror or host_mirror()).rstrip("/"))


def check_root(root: Path, what: str) -> None:
    """Raise ``EnvUnavailableError`` unless ``root`` holds what the sandbox runs inside it."""
    missing = [p for p in _REQUIRED_INSIDE if not (root / p).exists() and not (root / p).is_symlink()]
    if missing:
        raise EnvUnavailableError(
            f"os: {what} is not a usable root filesystem (missing {', '.join('/' + m for m in missing)}; "
            "it needs bash, coreutils and util-linux, as Debian/Ubuntu images have)"
        )


def _stderr_report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Lock:
    """An exclusive ``flock`` on a file in the cache (one build at a time across processes)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def acquire(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _mounted_under(path: Path) -> bool:
    prefix = str(path.resolve()) + "/"
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            if (line.split()[4] + "/").startswith(prefix):
                return True
    return False


def _remove_partial(cache: Path) -> None:
    """Delete what a killed build left behind (we hold the lock, so no build is running)."""
    for stale in cache.glob(".build-*"):
        if not _mounted_under(stale):
            shutil.rmtree(stale, ignore_errors=True)


async def _locked(cache: Path) -> _Lock:
    lock = _Lock(cache / ".lock")
    await asyncio.to_thread(lock.acquire)
    return lock


async def _cached(cache: Path, final: Path, make: Callable[[Path], Awaitable[None]]) -> Path:
    """``final/root``, made once by ``make(build_dir)`` under the cache lock and renamed into place."""
    if (final / "root").is_dir():
        return final / "root"
    lock = await _locked(cache)
    try:
        if (final / "root").is_dir():  # another process made it while we waited
            return final / "root"
        _remove_partial(cache)
        build = cache / f".build-{final.name}-{os.getpid()}"
        (build / "root").mkdir(parents=True, mode=0o755)
        try:
            await make(build)
        except BaseException:
            if not _mounted_under(build):
                shutil.rmtree(build, ignore_errors=True)
            raise
        build.rename(final)
    finally:
        lock.release()
    return final / "root"


async def ensure_built(recipe: Recipe, *, cache: Path | None = None, report: Report = _stderr_report) -> Path:
    """The root directory for ``recipe``: from the cache, or built now (once, with progress lines)."""
    cache = cache or cache_root()
    final = cache / f"{recipe.suite}-{recipe.key()}"
    if not (final / "root").is_dir() and shutil.which("mmdebstrap") is None:
        raise EnvUnavailableError(
            "os: the sandbox root filesystem is built with mmdebstrap, which is not installed "
            "(apt-get install mmdebstrap), or give a root of your own with --env-option os.rootfs=DIR|TAR"
        )

    async def build(folder: Path) -> None:
        await _run_mmdebstrap(recipe, folder, report)
        (folder / "recipe.json").write_text(json.dumps(asdict(recipe), indent=2, sort_keys=True) + "\n")
        await _write_manifest(folder)
        if os.geteuid() != 0:  # built in the user's subordinate range (mmdebstrap --mode=unshare)
            _write_idmap(folder, _owner_base(folder / "root"))

    return await _cached(cache, final, build)


async def _run_mmdebstrap(recipe: Recipe, build: Path, report: Report) -> None:
    root = build / "root"
    report(
        f"os: building the sandbox's root filesystem once (Debian {recipe.suite} {recipe.variant} + "
        f"{', '.join(recipe.packages)}, {', '.join(recipe.offline) or 'nothing'} for offline `apt install`, "
        f"from {recipe.mirror}; about a minute); cached in {build.parent}"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "TMPDIR": str(build), "LC_ALL": "C.UTF-8"}
    for var in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        if var in os.environ:
            env[var] = os.environ[var]
    # a private mount namespace: the chroot's /proc, /dev, ... mounts vanish with the build process
    if os.geteuid() == 0:
        argv = ["unshare", "--mount", "--propagation", "private", "--", *recipe.argv(root)]
    else:  # mmdebstrap maps the user's /etc/subuid range itself: the tree comes out owned by that range
        argv = [*recipe.argv(root)[:1], "--mode=unshare", *recipe.argv(root)[1:]]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    t0 = time.monotonic()
    tail: list[str] = []
    try:
        async for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            if not line:
                continue
            tail = (tail + [line])[-12:]
            if line.startswith("I: ") and "hook" not in line:
                report(f"os: [{time.monotonic() - t0:3.0f} s] {line[3:][:100]}")
        code = await proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        raise
    if code != 0:
        detail = " | ".join(ln for ln in tail if not ln.startswith("I: "))[-600:] or f"exit {code}"
        raise EnvUnavailableError(
            f"os: building the sandbox root with mmdebstrap failed ({detail}); check that {recipe.mirror} is "
            "reachable (option os.mirror=URL picks another Debian mirror), or give os.rootfs=DIR|TAR"
        )
    report(f"os: sandbox root filesystem ready in {time.monotonic() - t0:.0f} s")


async def _write_manifest(build: Path) -> None:
    """``packages.txt``: every installed package and version (what the root holds, for the record);
    ``offline.txt``: every ``.deb`` waiting in its apt cache (package, version, architecture, sha256)."""
    proc = await asyncio.create_subprocess_exec(
        "dpkg-query", f"--admindir={build / 'root' / 'var/lib/dpkg'}", "-W", "-f", "${Package} ${Version}\\n",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await proc.communicate()
    (build / "packages.txt").write_bytes(out)
    (build / OFFLINE_MANIFEST).write_text("".join(f"{' '.join(deb)}\n" for deb in offline_debs(build / "root")))


OFFLINE_MANIFEST = "offline.txt"


def offline_debs(root: Path) -> list[tuple[str, str, str, str]]:
    """(package, version, architecture, sha256) of each ``.deb`` in ``root``'s apt cache, by file name."""
    out = []
    for deb in sorted((root / "var/cache/apt/archives").glob("*.deb")):
        name, version, arch = (unquote(part) for part in deb.stem.split("_", 2))
        out.append((name, version, arch, hashlib.sha256(deb.read_bytes()).hexdigest()))
    return out


async def ensure_unpacked(archive: Path, *, cache: Path | None = None, report: Report = _stderr_report) -> Path:
    """The root directory unpacked (once) from a user's tar archive of a root filesystem."""
    cache = cache or cache_root()
    st = archive.stat()
    key = hashlib.sha256(f"{archive.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:16]
    final = cache / f"tar-{key}"

    async def unpack(folder: Path) -> None:
        report(f"os: unpacking {archive} once into {final}")
        proc = await asyncio.create_subprocess_exec(
            "tar", "-x", "--numeric-owner", "-p", "-f", str(archive), "-C", str(folder / "root"),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await proc.communicate()
        if proc.returncode != 0:
            msg = " ".join(err.decode(errors="replace").split())[-300:]
            raise EnvUnavailableError(f"os: option rootfs={archive}: tar cannot unpack it ({msg})")
        (folder / "source.json").write_text(json.dumps({"archive": str(archive.resolve()), "size": st.st_size}) + "\n")
        if os.geteuid() != 0:  # tar cannot set owners for an ordinary user: everything is the user's
            _write_idmap(folder, (os.geteuid(), os.getegid()))

    return await _cached(cache, final, unpack)


_IDMAP_FILE = "idmap.json"
_ID_COUNT = 65536


def _shift_tree(root: Path, old: tuple[int, int], new: tuple[int, int], count: int) -> int:
    """Move owners and groups under ``root`` (links not followed) from the id range starting at ``old``
    (uid, gid) to the one starting at ``new``; ids outside the old range stay. Keeps set-id bits (chown
    clears them). Returns how many entries changed."""
    changed = 0

    def move(path: str) -> None:
        nonlocal changed
        st = os.lstat(path)
        uid = st.st_uid - old[0] + new[0] if old[0] <= st.st_uid < old[0] + count else st.st_uid
        gid = st.st_gid - old[1] + new[1] if old[1] <= st.st_gid < old[1] + count else st.st_gid
        if (uid, gid) == (st.st_uid, st.st_gid):
            return
        os.lchown(path, uid, gid)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o6000:
            os.chmod(path, stat.S_IMODE(st.st_mode))
        changed += 1

    move(str(root))
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            move(os.path.join(dirpath, name))
    return changed


def _write_idmap(folder: Path, base: tuple[int, int]) -> None:
    (folder / _IDMAP_FILE).write_text(json.dumps({"uid_base": base[0], "gid_base": base[1]}) + "\n")


def _owner_base(root: Path) -> tuple[int, int]:
    """The owner and group of the tree's top: root's ids in whatever range it was built in."""
    st = os.lstat(root)
    return st.st_uid, st.st_gid


def _private(cache: Path) -> None:
    """The cache folder reachable by its owner alone: the images' setuid files (owned by the sandbox's ids,
    an ordinary user's subordinate range among them) are not reachable by other users of the host."""
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
        if cache.stat().st_mode & 0o077:
            cache.chmod(0o700)


async def ensure_shifted(root: Path, uid_base: int, gid_base: int, *, cache: Path | None = None, report: Report = _stderr_report) -> Path:
    """``root`` with its ownership moved into the sandbox's id range (sandbox id N = host id base+N), so
    that root inside the user namespace owns the image's files and no host account does.

    A root in the cache (built or unpacked) is shifted in place once (``idmap.json`` beside it records the
    range); a directory of the user's (``rootfs=DIR``) is copied into the cache first and never changed.
    Moving owners needs root: an ordinary user's roots are made in its range to begin with (mmdebstrap
    ``--mode=unshare``; a tar archive or directory of its own under a single-id map)."""
    cache = cache or cache_root()
    _private(cache)
    if os.geteuid() != 0:
        return _check_unprivileged_root(root, cache, uid_base, gid_base)
    if root.parent.parent != cache:
        key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
        final = cache / f"dir-{key}"

        async def copy(folder: Path) -> None:
            report(f"os: copying {root} once into {final} (its owners are moved into the sandbox's id range)")
            proc = await asyncio.create_subprocess_exec(
                "cp", "-a", "--reflink=auto", f"{root}/.", str(folder / "root"),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await proc.communicate()
            if proc.returncode != 0:
                raise EnvUnavailableError(f"os: cannot copy {root} into the cache ({' '.join(err.decode(errors='replace').split())[-300:]})")
            (folder / _IDMAP_FILE).write_text(json.dumps({"uid_base": 0, "gid_base": 0, "source": str(root)}) + "\n")

        root = await _cached(cache, final, copy)
    marker = root.parent / _IDMAP_FILE
    wanted = {"uid_base": uid_base, "gid_base": gid_base}

    def current() -> dict[str, int]:
        try:
            data = json.loads(marker.read_text())
            return {"uid_base": int(data["uid_base"]), "gid_base": int(data["gid_base"])}
        except (OSError, ValueError, KeyError, TypeError):
            return {"uid_base": 0, "gid_base": 0}

    if current() == wanted:
        return root
    lock = await _locked(cache)
    try:
        have = current()
        if have != wanted:
            report(f"os: moving the sandbox root's owners into the id range {uid_base}.. (once)")
            old = (have["uid_base"], have["gid_base"])
            await asyncio.to_thread(_shift_tree, root, old, (uid_base, gid_base), _ID_COUNT)
            marker.write_text(json.dumps(wanted) + "\n")
    finally:
        lock.release()
    return root


def _check_unprivileged_root(root: Path, cache: Path, uid_base: int, gid_base: int) -> Path:
    """An ordinary user's root must already be owned by its sandbox range (nothing can move owners)."""
    have = _owner_base(root)
    if have == (uid_base, gid_base):
        return root
    if root.parent.parent == cache and not (root.parent / _IDMAP_FILE).exists():
        have_text = "built or unpacked by root"
    else:
        have_text = f"owned by {have[0]}:{have[1]}"
    raise EnvUnavailableError(
        f"os: the sandbox root {root} is {have_text}, but this user's sandboxes map root to {uid_base}:{gid_base}; "
        "let agentbench build its own root as this user (no os.rootfs; needs an /etc/subuid range), give a tar "
        "archive (os.rootfs=TAR) when this user has no /etc/subuid range, or run as root"
    )


async def resolve(rootfs: str | None, mirror: str | None = None, *, report: Report = _stderr_report) -> Path:
    """The lower layer for every sandbox: the built default root, or the user's ``rootfs`` (DIR or TAR)."""
    if not rootfs:
        root = await ensure_built(default_recipe(mirror), report=report)
        check_root(root, f"the built root {root}")
        return root
    path = Path(rootfs).expanduser()
    if path.is_dir():
        check_root(path, f"option rootfs={rootfs!r}")
        return path.resolve()
    if path.is_file():
        root = await ensure_unpacked(path, report=report)
        check_root(root, f"option rootfs={rootfs!r}")
        return root
    raise EnvUnavailableError(f"os: option rootfs={rootfs!r} is neither a directory nor a tar archive")
