"""The warden of one episode's sandbox: builds it, then starts every process inside it.

Run by the engine as ``python -I -S _warden.py`` (standard library only; nothing is ever imported or run
from the sandbox's root by this process) with a SOCK_SEQPACKET unix socket whose fd number is its argument. Messages are JSON
objects, one per packet; file descriptors travel with them (SCM_RIGHTS).

Lifecycle:
1. ``config`` from the engine: the lower layer, the state folder, sizes, cgroup files, the seccomp program,
   the id map. As the engine's user (root, or the user running the engine) the warden opens the
   ``cgroup.procs`` files of the episode's cgroups and of its checks' (it stays in the engine's own: neither
   budget is its), ``unshare``\\s a user and a mount namespace and opens the cached image (``O_PATH``); the id maps
   are written from the host's namespace: by the engine, asked with ``map`` (root's range, or an ordinary user's
   single id), or through ``newuidmap`` by a mapper forked before (an ordinary user's subordinate range).
2. Root of the new user namespace (an unprivileged id range on the host), the warden mounts the episode's
   tmpfs and overlay in its private mount namespace and starts bubblewrap, whose pid 1 (the keeper) runs
   in new pid/net/ipc/uts/cgroup namespaces with the seccomp filter and a reduced capability set. The warden
   joins those namespaces (the pid namespace for its children only) and says ``ready``.
3. ``spawn`` requests start processes inside: the child enters the sandbox's mount namespace, gets the
   stdio the engine sent (pipes, or a terminal of the sandbox's own devpts, opened through a handle taken
   before anything of the episode ran), moves itself into the episode's cgroups (the agent's shell, init
   scripts; bubblewrap and so pid 1 too) or into the checks' (``check``: examples and checks), drops to the
   sandbox's capabilities, sets no_new_privs, loads the seccomp filter and execs. ``check`` children first get
   a private mount namespace in which every *tool* path (:data:`TOOL_DIRS`, :data:`TOOL_FILES`,
   :data:`MASKED_FILES`, :data:`TOP_LINKS`) is the pristine image's; everything else (the task's state) is the episode's. Exits are reported as ``exited``.
4. Grading: the engine freezes the episode's cgroup (every thread of the model's stops, none can thaw it) and the
   warden forks each check into the checks' cgroup: a full pids or memory cgroup of the episode's cannot keep it
   from starting, and the warden, outside both, is never the OOM killer's choice. Where there is no freezer the
   engine has every process of the episode but pid 1 killed instead (``kill_all_but``).

Pid 1 (the keeper) runs shell builtins only (it reads a socket this process never writes to, which no
process of the sandbox can open), and its memory and OOM score are out of reach: ``/proc/1/mem``,
``/proc/1/task/1/mem``, ``/proc/1/oom_score_adj`` and ``oom_adj`` are covered by an unusable device node
(:data:`KEEPER_MASKED`), which the model (no CAP_SYS_ADMIN, no mount calls) cannot remove; ptrace and
``process_vm_writev`` are refused by seccomp. So no process of the model can run code as pid 1 or get it
killed. Where the engine is root, the user namespace of each episode is owned by a host id
of its own (``idmap.OWNER_BASE`` + this process's pid): the kernel's per-user quotas (inotify instances,
message queues, pending signals, ...) are counted per owner, so one episode cannot use up another's or the
host's.

The warden stays in the host's pid namespace: nothing inside the sandbox can see, signal or trace it.
It dies with the engine (PDEATHSIG), and bubblewrap dies with it.
"""

import _signal as signal  # the C modules: no enum, no re (this process starts once per episode)
import _socket
import array
import ctypes
import fcntl
import gc
import marshal
import os
import resource
import select
import stat
import struct
import sys
import termios

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
for _name in ("unshare", "setns", "capset", "ioctl", "umount2"):  # resolved now: nothing is looked up once inside
    getattr(_libc, _name)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
SYS_OPEN_TREE = 428  # the same number on every architecture (the unified syscall table)
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442
SYS_FSOPEN = 430
SYS_FSCONFIG = 431
SYS_FSMOUNT = 432
FSCONFIG_CMD_CREATE = 6
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOVE_MOUNT_T_SYMLINKS = 0x10
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
TIOCGPTPEER = 0x5441
TIOCSPTLCK = 0x40045431
TIOCSCTTY = 0x540E
# what could change pid 1 (the keeper) from inside: its memory, its OOM score (made the OOM killer's first
# choice, the sandbox would end at the model's will)
KEEPER_MASKED = ("mem", "task/1/mem", "oom_score_adj", "oom_adj")
CAP_NUMBERS = {
    "CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
    "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_CHROOT": 18, "MKNOD": 27,
    "AUDIT_WRITE": 29, "SETFCAP": 31,
}  # fmt: skip
# What a check executes or loads comes from the pristine image, always: these paths are bound from it
# over the episode's in the check's own mount namespace. They are the *tools*: executables, libraries, the
# dynamic loader's configuration, Python's standard library, site and sitecustomize, NSS, PAM and sudo
# configuration, shell start-up files, the alternatives. Everything else is the task's *state* and stays the
# episode's: /root, /home, /tmp, /var, /srv, /opt, /usr/local/bin, the files an init writes under /usr, and
# /etc apart from the files below (passwd, group, shadow, sudoers, hosts, ... are what tasks are about).
TOOL_DIRS = (
    "usr/bin", "usr/sbin", "usr/lib", "usr/lib32", "usr/lib64", "usr/libx32", "usr/libexec", "usr/share",
    "usr/local/lib", "etc/alternatives", "etc/ld.so.conf.d", "etc/pam.d", "etc/security", "etc/profile.d",
    "etc/python3", "etc/python3.11", "etc/perl",
)  # fmt: skip
TOOL_FILES = (
    "etc/ld.so.cache", "etc/ld.so.conf", "etc/nsswitch.conf", "etc/bash.bashrc", "etc/profile",
    "etc/environment", "etc/sudo.conf", "etc/inputrc", "etc/gai.conf", "etc/host.conf", "etc/ssl/openssl.cnf",
)  # fmt: skip
# the image's command folders: one the episode removed fails the check (never skipped: the episode's /usr/local
# would serve every command)
_PATH_TOOL_DIRS = ("/usr/sbin", "/usr/bin")
# tool folders in which a check sees the image's files *and* the files the episode added (a package a task
# installs: sudo, its helpers and PAM service for std-006-new-*): the image's layered over the episode's in a
# read-only overlay, so a file the image has is always the image's; new ones are used only when named. Not the
# library folders: Python runs every new .pth file it finds there.
UNION_DIRS = ("usr/sbin", "usr/bin", "usr/libexec", "etc/pam.d")
# A check's PATH is the agent's (checks count its entries), /usr/local first. In a check, the names there and
# the episode's new /usr/sbin files that are commands of the image's are hidden (a layer of whiteouts over them:
# the image's command runs), and so are the files Python reads beside its executable in /usr/bin (see _hidden)
_SHADOWING_DIRS = ("/usr/local/sbin", "/usr/local/bin")
_BESIDE_PYTHON = ("pyvenv.cfg",)  # and every *._pth
# files a tool would read if they existed (absent from the image): an empty file in a check if the episode made one
MASKED_FILES = ("etc/ld.so.preload", "usr/pyvenv.cfg", "etc/sudo.conf", "etc/gitconfig")
# folders a tool would search if they existed (perl's @INC): an empty read-only folder in a check
MASKED_DIRS = ("usr/local/share/perl", "usr/local/share/perl5")
TOP_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
# the spawn helper's descriptors (_spawn.c's CTL_BASE): its error pipe, the mount namespace, the seccomp program, a
# terminal's master, then the cgroups; ours are copied from _SPAWN_HIGH up first (see Warden._posix_spawn)
SPAWN_CTL = 100
_SPAWN_HIGH = 200
# A file of a tool path that the episode changed (its overlay's upper layer holds it) is the episode's in a check where
# its bytes are the image's: its mode, owner, times and extended attributes are the task's state (std-006-new-00003:
# remove the setuid bit the init set on /usr/bin/find), and the same bytes run the same program (checks run with
# no_new_privs: set-id bits and file capabilities grant nothing). The check sees a copy made for it, read-only: the
# episode's file itself can be written while a check runs (by the model's code a check runs, through a hard link or a
# frozen process's /proc/PID/root). Where the bytes differ, or the file is no longer a regular file or is gone, the
# image's stays. A copy that some user the image lets read or run the file could not read or run (chmod -x, another
# owner, an access list) fails the check's start: a tool that does not run could turn a check's verdict.
_OVERLAY_XATTRS = ("trusted.overlay.", "user.overlay.")  # the overlay's own, never seen in the episode's root
_ACL_XATTR = "system.posix_acl_access"
_SCRATCH = "/dev/shm"  # a mount point in every sandbox (the model cannot remove it): the copies are made on a tmpfs there
_MNT_DETACH = 2
# the bytes of changed tool files a check compares and copies at most (each check: ~0.1 s idle); an episode that changed
# more of them fails its checks' start (the model's failure: touching every file of /usr/lib cost each check 30 s)
_COPY_LIMIT = 64 << 20


def _ok(result, what):
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _mount(source, target, fstype, flags, data):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _ok(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {fstype or source} on {target}")


def _unshare(flags):
    _ok(_libc.unshare(flags), "unshare")


def _setns(fd, nstype):
    _ok(_libc.setns(fd, nstype), "setns")


def _prctl(option, arg2=0, arg3=0, arg4=0, arg5=0):
    return _ok(_libc.prctl(option, arg2, arg3, arg4, arg5), f"prctl {option}")


def _open_tree(dirfd, path, flags):
    return _ok(_libc.syscall(SYS_OPEN_TREE, ctypes.c_int(dirfd), path.encode(), ctypes.c_uint(flags)), f"open_tree {path}")


def _move_mount(fd, target, follow=False):
    flags = MOVE_MOUNT_F_EMPTY_PATH | (MOVE_MOUNT_T_SYMLINKS if follow else 0)
    _ok(
        _libc.syscall(SYS_MOVE_MOUNT, ctypes.c_int(fd), b"", ctypes.c_int(AT_FDCWD), target.encode(), ctypes.c_uint(flags)),
        f"move_mount onto {target}",
    )


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _read_only(fd):
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
    _ok(
        _libc.syscall(SYS_MOUNT_SETATTR, ctypes.c_int(fd), b"", ctypes.c_uint(AT_EMPTY_PATH | AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))),
        "mount_setattr",
    )


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(keep, last):
    """Bounding set, ambient set, then effective/permitted/inheritable = ``keep``."""
    for cap in range(last + 1):
        if cap not in keep:
            _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    mask = 0
    for cap in keep:
        mask |= 1 << cap
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    for i in range(2):
        part = (mask >> (32 * i)) & 0xFFFFFFFF
        data[i].effective = data[i].permitted = data[i].inheritable = part
    _ok(_libc.capset(ctypes.byref(header), data), "capset")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_seccomp(program):
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _ok(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "seccomp")


def _send(sock, message, fds=()):
    data = marshal.dumps(message)
    if fds:
        sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        sock.send(data)


def _recv(sock, maxfds=8):
    data, ancdata, _flags, _addr = sock.recvmsg(1 << 22, _socket.CMSG_LEN(maxfds * 4))
    if not data:
        raise EOFError
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return marshal.loads(data), list(fds)


class Warden:
    def __init__(self, sock, config, parent):
        self.sock = sock
        self.parent = parent
        self.cfg = config
        self.program = bytes.fromhex(config["seccomp"])
        self.keep_caps = {CAP_NUMBERS[c] for c in config["caps"]}
        with open("/proc/sys/kernel/cap_last_cap") as f:
            self.last_cap = int(f.read())
        self.children = {}  # pid -> request id
        self.cgroups = {"agent": [], "check": []}  # open cgroup.procs files (see build)
        self.commands = {}  # "usr/sbin", "usr/bin" -> the image's names there (see _read_image_commands)
        self.keeper = 0
        self.bwrap_pid = 0
        self.ns = {}
        self.helper = -1  # the spawn helper (_spawn.c), opened in build(); -1: processes start by a Python fork
        self.seccomp_fd = -1  # the seccomp program, for the helper to read

    # -- 1-2: the sandbox ------------------------------------------------------------------------------
    def build(self):
        cfg = self.cfg
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != self.parent:  # the parent (the zygote) died before PDEATHSIG was set
            os._exit(1)
        # opened as the engine's user, written by each child to move itself in (the kernel checks the opener's
        # rights): the warden stays in the engine's cgroup, outside the episode's budgets and its checks'
        self.cgroups = {
            mode: [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in cfg[key]]
            for mode, key in (("agent", "cgroup_procs"), ("check", "check_procs"))
        }
        _raise_nofile(cfg["nofile"])  # while still the engine's user: a namespace's root cannot raise it
        if cfg.get("spawn_helper"):  # opened while still the engine's user (its cache folder may be the user's alone)
            opened = os.open(cfg["spawn_helper"], os.O_PATH | os.O_CLOEXEC)
            # run as /proc/self/fd/N: N above every number a spawn places a descriptor at (none overwrites it first)
            self.helper = fcntl.fcntl(opened, fcntl.F_DUPFD_CLOEXEC, _SPAWN_HIGH)
            os.close(opened)
            if not stat.S_ISREG(os.fstat(self.helper).st_mode):
                raise RuntimeError(f"the spawn helper {cfg['spawn_helper']} is not a file")
            self.seccomp_fd = os.memfd_create("agentbench-seccomp", os.MFD_CLOEXEC)
            os.write(self.seccomp_fd, self.program)
        # the cached image as the working folder, while still the engine's user on the host (its permissions
        # reach the image): the new mount namespace's copy of it is this namespace's working folder then
        os.chdir(cfg["lower"])
        # newuidmap's range: a mapper forked now stays in the host's namespace to write our id maps; else the engine
        # writes them (no process: a fork of this one cost ~1 ms of CPU a sandbox, the page tables and the faults after)
        mapper, go = _start_mapper(cfg["idmap"]) if cfg["idmap"]["helper"] else (0, -1)
        if cfg.get("owners"):
            # root: the namespace is owned by a host id of this episode's own (idmap.OWNER_BASE + this pid), so the
            # kernel's per-user quotas of everything inside are this episode's; the engine, root, writes the maps
            base, count = cfg["owners"]
            owner = base + os.getpid() % count
            os.setgroups([])
            os.setresgid(owner, owner, owner)
            os.setresuid(owner, owner, owner)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a change of credentials cleared it
            if os.getppid() != self.parent:
                os._exit(1)
        _unshare(CLONE_NEWUSER | CLONE_NEWNS)
        lower = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        os.chdir("/")
        if mapper:
            os.write(go, b"g")
            os.close(go)
            _, status = os.waitpid(mapper, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError("could not write the sandbox's id maps (see the warden's stderr)")
        else:
            _send(self.sock, {"map": True})  # the engine writes them, then answers
            answer, _ = _recv(self.sock)
            if answer.get("error"):
                raise RuntimeError(f"could not write the sandbox's id maps: {answer['error']}")
        os.setresgid(0, 0, 0)
        if cfg["setgroups"]:
            os.setgroups([])
        os.setresuid(0, 0, 0)
        _prctl(PR_SET_DUMPABLE, 0)
        _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        state = cfg["state_dir"]
        _mount("agentbench-os", state, "tmpfs", 0, f"size={cfg['disk_mb']}m,mode=0755")
        for sub in ("u", "w", "root", "pristine"):
            os.mkdir(os.path.join(state, sub))
        # the image, read-only, beside (not inside) the episode's root: the overlay's lower layer and
        # where checks take their interpreters from; nothing can write it through this mount
        tree = _open_tree(lower, "", OPEN_TREE_CLONE | AT_EMPTY_PATH)
        _read_only(tree)
        _move_mount(tree, f"{state}/pristine")
        os.close(tree)
        os.close(lower)
        self.pristine = f"{state}/pristine"
        self.lower = os.open(self.pristine, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.tools = self._tool_paths()
        self.upper = os.open(f"{state}/u", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # what the episode changed
        # relative to the state folder: the sandbox's mountinfo shows these options, not the host's paths
        os.chdir(state)
        options = "lowerdir=pristine,upperdir=u,workdir=w"
        # userxattr first: mounted in a user namespace, overlayfs cannot set its trusted.* xattrs on the
        # tmpfs, and without them removing an image directory fails (EIO) and renaming a new directory into
        # one (dpkg's `x.dpkg-new` -> `x`: every `apt install`) fails (EXDEV); user.* works from Linux 6.6
        try:
            _mount("overlay", f"{state}/root", "overlay", 0, options + ",userxattr")
        except OSError:  # before Linux 5.11
            _mount("overlay", f"{state}/root", "overlay", 0, options)
        os.chdir("/")
        self._start_bwrap()

    def _start_bwrap(self):
        cfg = self.cfg
        state = cfg["state_dir"]
        info_r, info_w = os.pipe()
        ready_r, ready_w = os.pipe()
        # the keeper blocks reading this socket (a builtin: pid 1 never starts a program of the episode's root);
        # the other end stays here, silent: when this process ends, the keeper reads end of file and exits. A
        # socket, not a pipe: /proc/1/fd/N of a socket cannot be opened, so nothing inside can write to it
        hold_r, self.hold = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        hold_r = hold_r.detach()
        seccomp_r, seccomp_w = os.pipe()
        err_r, err_w = os.pipe()
        os.write(seccomp_w, self.program)
        os.close(seccomp_w)
        argv = [
            cfg["bwrap"], "--bind", f"{state}/root", "/", "--proc", "/proc", "--dev", "/dev",
            "--ro-bind-try", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
            # the host's /proc/tty/driver is root's alone: an empty folder, so `find /` reads as under Docker
            "--tmpfs", "/proc/tty/driver",
            "--perms", "1777", "--size", str(cfg["shm_mb"] << 20), "--tmpfs", "/dev/shm",
        ]  # fmt: skip
        argv += [
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", cfg["hostname"], "--die-with-parent", "--clearenv", "--setenv", "HOME", "/root",
            "--setenv", "PATH", cfg["path"], "--chdir", "/", "--cap-drop", "ALL",
        ]  # fmt: skip
        for cap in cfg["caps"]:
            argv += ["--cap-add", "CAP_" + cap]
        passed = {"seccomp": seccomp_r, "info": info_w, "ready": ready_w, "hold": hold_r}
        # the helper places them at 3, 4, 5, 6 (a fork keeps their numbers)
        num = {name: (3 + i if self.helper >= 0 else fd) for i, (name, fd) in enumerate(passed.items())}
        argv += [
            "--seccomp", str(num["seccomp"]), "--info-fd", str(num["info"]), "--as-pid-1", "--",
            "/bin/bash", "-c",
            'printf R >&"$1"; eval "exec $1>&-"; trap "" HUP INT TERM QUIT USR1 USR2; while read -r -u "$2" _; do :; done',
            "keeper", str(num["ready"]), str(num["hold"]),
        ]  # fmt: skip
        if self.helper >= 0:
            null_r, null_w = os.pipe()
            os.close(null_w)
            places = [(null_r, 0), (err_w, 1), (err_w, 2), *((fd, num[name]) for name, fd in passed.items()), (err_w, SPAWN_CTL)]
            try:
                pid = self._posix_spawn([f"cg={len(self.cgroups['agent'])}", "keep=7"], argv, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, places, "agent")
            finally:
                os.close(null_r)
        else:
            pid = os.fork()
        if pid == 0:
            try:
                self._join("agent")
                _default_signals()
                null_r, null_w = os.pipe()
                os.close(null_w)
                os.dup2(null_r, 0)
                os.dup2(err_w, 1)
                os.dup2(err_w, 2)
                for fd in (info_w, ready_w, seccomp_r, hold_r):
                    os.set_inheritable(fd, True)
                os.execve(argv[0], argv, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
            finally:
                os._exit(127)
        self.bwrap_pid = pid
        for fd in (info_w, ready_w, seccomp_r, err_w, hold_r):
            os.close(fd)
        info = _read_until(info_r, lambda d: b"}" in d, 30)
        ready = _read_until(ready_r, lambda d: b"R" in d, 30)
        os.close(info_r)
        os.close(ready_r)
        if b"R" not in ready or _child_pid(info) is None:
            os.set_blocking(err_r, False)
            try:
                err = os.read(err_r, 4000).decode(errors="replace")
            except OSError:
                err = ""
            raise RuntimeError("bubblewrap did not start: " + (" ".join(err.split()) or "no keeper"))
        self.err_r = err_r
        self.keeper = _child_pid(info)
        for name, flag in (("net", CLONE_NEWNET), ("ipc", CLONE_NEWIPC), ("uts", CLONE_NEWUTS), ("cgroup", CLONE_NEWCGROUP)):
            fd = os.open(f"/proc/{self.keeper}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC)
            _setns(fd, flag)
            os.close(fd)
        self.mnt_fd = os.open(f"/proc/{self.keeper}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        # the devpts instance's ptmx, held from before anything of the episode ran: terminals are opened
        # through this handle, never by a path the episode could replace (a /dev/ptmx linked to a host path)
        self.ptmx = os.open(f"/proc/{self.keeper}/root/dev/pts/ptmx", os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        if not stat.S_ISCHR(os.fstat(self.ptmx).st_mode):
            raise RuntimeError("the sandbox's /dev/pts/ptmx is not a terminal multiplexer")
        self._harden()
        pid_fd = os.open(f"/proc/{self.keeper}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        _setns(pid_fd, CLONE_NEWPID)  # our children are born inside
        os.close(pid_fd)
        _send(self.sock, {"ready": True, "keeper": self.keeper, "bwrap": self.bwrap_pid})

    def _harden(self):
        """From the sandbox's mount namespace, then back: the host device nodes bubblewrap bound into /dev
        become read-only mounts (still usable devices, as bubblewrap's own --remount-ro would make them
        unusable with nodev): their modes and times on the host cannot change from inside; and pid 1's
        :data:`KEEPER_MASKED` entries are covered by a device node that cannot be opened (nodev)."""
        outer = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(self.mnt_fd, CLONE_NEWNS)
            try:
                for node in _DEV_NODES:
                    _mount(None, f"/dev/{node}", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, None)
                for entry in KEEPER_MASKED:
                    tree = _open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | os.O_CLOEXEC)
                    _read_only(tree)  # read-only, nodev: opening it fails
                    _move_mount(tree, f"/proc/1/{entry}")
                    os.close(tree)
            finally:
                _setns(outer, CLONE_NEWNS)
        finally:
            os.close(outer)

    # -- 3: processes inside ---------------------------------------------------------------------------
    def spawn(self, req, fds):
        master = -1
        if req.get("tty"):
            master = os.open(f"/proc/self/fd/{self.ptmx}", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
            fcntl.ioctl(master, TIOCSPTLCK, struct.pack("i", 0))
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            # no echo (what `stty -echo` inside would set, without a process to run it): the termios calls on a
            # terminal's master end set its other end's, the one the shell gets
            attrs = termios.tcgetattr(master)
            attrs[3] &= ~termios.ECHO
            termios.tcsetattr(master, termios.TCSANOW, attrs)
        err_r, err_w = os.pipe()  # the child's last words if it cannot exec
        failed = ""
        if self.helper >= 0:
            try:
                pid = self._spawn_native(req, fds, master, err_w)
            except Exception as exc:  # noqa: BLE001 - the check's namespace or the helper's start failed: nothing runs
                pid, failed = 0, f"{type(exc).__name__}: {exc}"[:2000]
        else:  # no helper: a Python fork
            if req.get("mode") == "check":
                self._read_image_commands()
            pid = os.fork()
        if pid == 0 and not failed:
            os.close(err_r)
            try:
                self._child(req, fds, master)
            except BaseException as exc:  # noqa: BLE001 - reported to the engine, never raised here
                try:
                    os.write(err_w, f"{type(exc).__name__}: {exc}".encode()[:2000])
                except OSError:
                    pass
            os._exit(127)
        os.close(err_w)
        for fd in fds:
            os.close(fd)
        os.set_blocking(err_r, True)
        why = b""
        while True:
            chunk = os.read(err_r, 4096)  # closed by a successful exec (CLOEXEC)
            if not chunk:
                break
            why += chunk
        os.close(err_r)
        if pid:
            self.children[pid] = req["id"]
        reply = {"spawned": req["id"], "pid": pid}
        if why or failed:
            reply["error"] = failed or why.decode(errors="replace")
        if master >= 0:
            _send(self.sock, reply, [master])
            os.close(master)
        else:
            _send(self.sock, reply)
        if not pid:  # no process to reap: its end said now
            _send(self.sock, {"exited": req["id"], "pid": 0, "status": 127})

    def _spawn_native(self, req, fds, master, err_w):
        """A process of the sandbox started by the spawn helper (``_spawn.c``: what :meth:`_child` does, in C, after a
        vfork instead of a fork of this process); its host pid."""
        tty = master >= 0
        mode = "check" if req.get("mode") == "check" else "agent"
        stdio, extra = ([], []) if tty else (list(fds[:3]), list(fds[3:]))
        mnt = self._check_namespace() if mode == "check" else self.mnt_fd
        try:
            places = [(fd, i) for i, fd in enumerate(stdio)] + [(fd, 3 + i) for i, fd in enumerate(extra)]
            places += [(err_w, SPAWN_CTL), (mnt, SPAWN_CTL + 1), (self.seccomp_fd, SPAWN_CTL + 2)]
            if tty:
                places.append((master, SPAWN_CTL + 3))
            mask = 0
            for cap in self.keep_caps:
                mask |= 1 << cap
            options = [f"cg={len(self.cgroups[mode])}", "tty" if tty else "pgrp", "mnt", f"cwd={req.get('cwd') or '/'}", f"keep={3 + len(extra)}"]
            options += [f"rlimit={getattr(resource, name)}:{value}" for name, value in req.get("rlimits", {}).items()]
            options += [f"caps={mask}:{self.last_cap}", f"seccomp={len(self.program)}"]
            return self._posix_spawn(options, req["argv"], req["env"], places, mode)
        finally:
            if mnt != self.mnt_fd:  # the check's: its process holds it now
                os.close(mnt)

    def _check_namespace(self):
        """A handle of the mount namespace a check runs in (:meth:`_mount_tools`), built by this process itself rather
        than by a forked child: it enters the sandbox's, builds the check's copy of it there and comes back. While it
        builds, the copy's /proc is this process's own (the host's), so that the ``/proc/self/fd/N`` paths the overlays
        are given name this process's descriptors; it is unmounted before anything runs there, and that the check's
        /proc is then the sandbox's (which cannot name this process) is checked. Whatever fails fails the check's start."""
        self._read_image_commands()
        before = _live_fds()
        ns = -1
        try:
            outer = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            trees = [(_open_tree(self.lower, src, OPEN_TREE_CLONE | os.O_CLOEXEC), target) for src, target in self.tools]
            proc = _open_tree(AT_FDCWD, "/proc", OPEN_TREE_CLONE | os.O_CLOEXEC)
            _setns(self.mnt_fd, CLONE_NEWNS)
            try:
                _unshare(CLONE_NEWNS)
                _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
                _move_mount(proc, "/proc")
                self._mount_tools(trees)  # in a namespace of its own again: the check's
                ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
                _ok(_libc.umount2(b"/proc", _MNT_DETACH), "umount /proc")
                try:
                    os.readlink("/proc/self")
                except OSError:
                    pass  # the sandbox's /proc
                else:
                    raise RuntimeError("the check's /proc is not the sandbox's")
            finally:
                _setns(outer, CLONE_NEWNS)
        except BaseException:
            if ns >= 0:
                os.close(ns)
                ns = -1
            raise
        finally:
            for fd in _live_fds() - before - {ns}:  # the trees, overlays' layers, ...: mounted or no longer needed
                os.close(fd)
        return ns

    def _posix_spawn(self, options, argv, env, places, mode):
        """Start the spawn helper with ``options`` for ``argv``, the descriptors ``places`` ((ours, its number)) and the
        cgroups of ``mode`` in place, every signal at its default. Each of ours is first copied above every number the
        helper's are placed at, so that placing one never overwrites another still to be placed."""
        places = [*places, *((fd, SPAWN_CTL + 4 + i) for i, fd in enumerate(self.cgroups[mode]))]
        high = []
        try:
            for fd, _target in places:
                high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _SPAWN_HIGH))
            actions = [(os.POSIX_SPAWN_DUP2, dup, target) for dup, (_fd, target) in zip(high, places)]
            return os.posix_spawn(
                f"/proc/self/fd/{self.helper}", ["agentbench-spawn", *options, "--", *argv], env,
                file_actions=actions, setsigdef=signal.valid_signals(), setsigmask=(),
            )  # fmt: skip
        finally:
            for fd in high:
                os.close(fd)

    def _join(self, mode):
        """In a child, before anything else: into the episode's cgroups (``agent``) or the checks' (``check``)."""
        for fd in self.cgroups[mode]:
            os.write(fd, b"0")

    def _child(self, req, fds, master):
        self._join("check" if req.get("mode") == "check" else "agent")
        if master >= 0:
            os.setsid()  # a terminal's shell leads its session (the engine lowers that session's scheduling group)
        else:
            os.setpgid(0, 0)  # its own group (the engine kills it as one), in the zygote's session
        signal.set_wakeup_fd(-1)
        _default_signals()
        if master >= 0:
            slave = _ok(_libc.ioctl(master, TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY), "TIOCGPTPEER")
            _ok(_libc.ioctl(slave, TIOCSCTTY, 0), "TIOCSCTTY")
            stdio = [slave, slave, slave]
            extra = []
        else:
            stdio, extra = list(fds[:3]), list(fds[3:])
        check = req.get("mode") == "check"  # a check: the pristine image's tools over the episode's state
        trees = [(_open_tree(self.lower, src, OPEN_TREE_CLONE | os.O_CLOEXEC), target) for src, target in self.tools] if check else []
        _setns(self.mnt_fd, CLONE_NEWNS)  # root and cwd: the sandbox's
        if check:
            self._mount_tools(trees)
        os.chdir(req.get("cwd") or "/")
        for i, fd in enumerate(stdio):
            os.dup2(fd, i)
        for i, fd in enumerate(extra):
            os.dup2(fd, 3 + i)
        keep = set(range(3 + len(extra)))
        for fd in _open_fds():
            if fd not in keep:
                try:
                    os.set_inheritable(fd, False)
                except OSError:
                    pass
        for name, value in req.get("rlimits", {}).items():
            limit = getattr(resource, name)
            hard = resource.getrlimit(limit)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            try:
                resource.setrlimit(limit, (value, value))
            except (OSError, ValueError):
                resource.setrlimit(limit, (hard, hard))
        _drop_capabilities(self.keep_caps, self.last_cap)
        _load_seccomp(self.program)
        argv = req["argv"]
        os.execve(argv[0], argv, req["env"])

    def _tool_paths(self):
        """(source inside the image, target) of every tool path the image has (see TOOL_DIRS), read once from
        the pristine image (never from the episode's root); links (``/bin -> usr/bin``) resolved within it."""
        tools = []
        for rel in TOOL_DIRS + TOOL_FILES:
            try:
                st = os.lstat(os.path.join(self.pristine, rel))
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                tools.append((rel, "/" + rel))
        self.masked = [rel for rel in MASKED_FILES if not os.path.lexists(os.path.join(self.pristine, rel))]
        self.masked_dirs = [rel for rel in MASKED_DIRS if not os.path.lexists(os.path.join(self.pristine, rel))]
        self.links = {}
        for rel in TOP_LINKS:
            try:
                target = os.path.normpath(os.readlink(os.path.join(self.pristine, rel)))
            except OSError:
                continue
            if not target.startswith(("/", "..")) and os.path.isdir(os.path.join(self.pristine, target)):
                self.links[rel] = target
        return tools

    def _read_image_commands(self):
        """Names in the image's /usr/sbin and /usr/bin, read once from the pristine image, by the warden before a
        check's child forks (the child, in the sandbox's root, cannot see the image's path)."""
        for rel in ("usr/sbin", "usr/bin"):
            if rel not in self.commands:
                try:
                    self.commands[rel] = frozenset(os.listdir(os.path.join(self.pristine, rel)))
                except OSError:
                    self.commands[rel] = frozenset()

    def _hidden(self, folder):
        """In a check's child (the sandbox's root): the names of the episode's ``folder`` a check must not see:
        commands that would hide one of the image's on PATH, files the image's python3 would read."""
        sbin, bin_ = self.commands["usr/sbin"], self.commands["usr/bin"]
        if folder in _SHADOWING_DIRS:
            hides = lambda n: n in sbin or n in bin_  # noqa: E731
        elif folder == "/usr/sbin":  # before /usr/bin on PATH
            hides = lambda n: n in bin_ and n not in sbin  # noqa: E731
        elif folder == "/usr/bin":
            hides = lambda n: n not in bin_ and (n in _BESIDE_PYTHON or n.endswith("._pth"))  # noqa: E731
        else:
            return []  # nothing hidden there: not listed (a listing of an overlay's merged folder is not free)
        try:
            return sorted(n for n in os.listdir(folder) if hides(n))
        except OSError:
            return []

    def _overlay(self, target, layers, hide):
        """A read-only overlay on ``target`` of ``layers`` (paths, the first on top), under a layer that hides
        ``hide`` (whiteouts on a detached tmpfs). Raises OSError where the kernel cannot."""
        if hide:
            fs = _ok(_libc.syscall(SYS_FSOPEN, b"tmpfs", ctypes.c_uint(1)), "fsopen tmpfs")
            try:
                _ok(_libc.syscall(SYS_FSCONFIG, ctypes.c_int(fs), ctypes.c_uint(FSCONFIG_CMD_CREATE), None, None, ctypes.c_int(0)), "fsconfig")
                top = _ok(_libc.syscall(SYS_FSMOUNT, ctypes.c_int(fs), ctypes.c_uint(1), ctypes.c_uint(0)), "fsmount")
            finally:
                os.close(fs)
            for name in hide:
                os.mknod(name, stat.S_IFCHR, os.makedev(0, 0), dir_fd=top)  # a whiteout
            layers = [f"/proc/self/fd/{top}", *layers]
        _mount("agentbench-tools", target, "overlay", MS_RDONLY, "lowerdir=" + ":".join(layers))

    def _mount_tools(self, trees):
        """In a check's child, in the sandbox's mount namespace: a private copy of it in which the tools are the
        pristine image's. A tool path the episode removed stays absent; one that cannot be covered (a
        directory turned into a file) fails the start, so such a check fails rather than runs the episode's."""
        _unshare(CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        copies = self._tool_state_copies()  # before the tools cover what it reads
        for folder in _SHADOWING_DIRS:  # the episode's own (state), but its commands that would hide the image's
            hide = self._hidden(folder)
            if hide:
                try:
                    self._overlay(folder, [folder], hide)
                except OSError:
                    raise RuntimeError(f"the episode's {folder}/{hide[0]} would hide the image's {hide[0]} on PATH") from None
        for fd, target in trees:
            if not os.path.exists(target):
                if target in _PATH_TOOL_DIRS:  # else the episode's /usr/local would serve every command
                    raise RuntimeError(f"the episode removed {target}, where a check's commands come from")
                continue
            if target[1:] in UNION_DIRS and os.path.isdir(target):
                hide = self._hidden(target)
                try:
                    self._overlay(target, [f"/proc/self/fd/{fd}", target], hide)
                    continue
                except OSError:
                    pass  # a kernel without overlays in user namespaces: the image's folder alone
            _move_mount(fd, target)
        for rel, target in self.links.items():  # the episode replaced /bin, /lib, ...: they show the image's
            try:
                same = os.readlink("/" + rel) == target
            except OSError:
                same = False
            if not same and os.path.exists("/" + rel):
                # the image's folder as this check sees it (bound above), onto the episode's /bin, or onto the folder
                # its /bin now links to; one that cannot take it (a file) fails the check's start
                _move_mount(_open_tree(AT_FDCWD, "/" + target, OPEN_TREE_CLONE | os.O_CLOEXEC), "/" + rel, follow=True)
        for rel in self.masked:  # absent from the image, made by the episode: empty (the device the sandbox binds)
            if os.path.isdir("/" + rel):
                raise RuntimeError(f"/{rel} is a directory")
            if os.path.exists("/" + rel):
                _move_mount(_open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | os.O_CLOEXEC), "/" + rel)
        for rel in self.masked_dirs:
            if os.path.isdir("/" + rel):
                _mount("agentbench-empty", "/" + rel, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NOEXEC | MS_NODEV, "size=4k,mode=0755")
        for tree, target in copies:  # the episode's metadata on the image's bytes, over the image's file
            _move_mount(tree, target)

    def _tool_state_copies(self):
        """In a check's child, in its own mount namespace: a copy (on a tmpfs over :data:`_SCRATCH`) of every regular
        file of a tool path that the episode's upper layer holds with the image's bytes, with the episode's metadata;
        [(a read-only detached mount of the copy, the path it shows at)]. The trees are walked through handles (the
        upper layer's and the image's), never following a link."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        todo = [rel.rpartition("/")[::2] for rel, _target in self.tools]  # (folder, the name in it, or None: all)
        scratch, made, budget = None, [], _COPY_LIMIT
        while todo:
            rel, only = todo.pop()
            try:
                up = self._open_path(self.upper, rel, flags)
            except OSError:
                continue  # not changed, or no longer a folder (the image's then, as before)
            try:
                img = self._open_path(self.lower, rel, flags)
            except OSError:
                os.close(up)
                continue
            try:
                for name in [only] if only else os.listdir(up):
                    path = f"{rel}/{name}"
                    try:
                        ust = os.stat(name, dir_fd=up, follow_symlinks=False)
                        ist = os.stat(name, dir_fd=img, follow_symlinks=False)
                    except OSError:
                        continue  # new in the episode (not the image's file) or not changed
                    if stat.S_ISDIR(ust.st_mode) and stat.S_ISDIR(ist.st_mode):
                        todo.append((path, None))
                    elif stat.S_ISREG(ust.st_mode) and stat.S_ISREG(ist.st_mode) and ust.st_size == ist.st_size:
                        budget -= ist.st_size
                        if budget < 0:
                            raise RuntimeError(f"the episode changed more than {_COPY_LIMIT >> 20} MiB of the image's tool files (their mode, owner or times; /{path}): a check copies at most that much")
                        if scratch is None:
                            _mount("agentbench-copies", _SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")
                            scratch = os.open(_SCRATCH, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                        if self._copy_if_same(up, img, name, scratch, str(len(made)), path, ist):
                            made.append((str(len(made)), "/" + path))
            finally:
                os.close(up)
                os.close(img)
        if scratch is None:
            return []
        try:
            trees = []
            for copy, target in made:
                tree = _open_tree(scratch, copy, OPEN_TREE_CLONE | os.O_CLOEXEC)
                _read_only(tree)
                trees.append((tree, target))
        finally:
            os.close(scratch)
            _ok(_libc.umount2(_SCRATCH.encode(), _MNT_DETACH), f"umount {_SCRATCH}")
        return trees

    @staticmethod
    def _open_path(base, rel, flags):
        """``rel`` under the directory handle ``base``, one component at a time, no link followed."""
        fd = os.open(".", flags, dir_fd=base)
        for part in filter(None, rel.split("/")):
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            finally:
                os.close(fd)
            fd = nxt
        return fd

    @staticmethod
    def _copy_if_same(up, img, name, scratch, copy, path, ist):
        """Copy the episode's ``name`` (in ``up``) to ``copy`` (in ``scratch``) if its bytes are the image's (in ``img``),
        with its mode, owner, extended attributes and times; False (nothing left) if they differ."""
        opened = []
        try:
            for folder in (up, img):
                opened.append(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder))
            src, orig = opened
            ust = os.fstat(src)
            if not stat.S_ISREG(ust.st_mode):
                return False
            opened.append(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=scratch))
            dst = opened[2]
            offset = 0
            while True:
                mine, theirs = os.pread(src, 1 << 20, offset), os.pread(orig, 1 << 20, offset)
                if mine != theirs or (not mine and offset != ist.st_size):
                    os.unlink(copy, dir_fd=scratch)
                    return False
                if not mine:
                    break
                view = memoryview(mine)
                while view:
                    view = view[os.write(dst, view) :]
                offset += len(mine)
            os.fchown(dst, ust.st_uid, ust.st_gid)
            attrs = {a: os.getxattr(src, a) for a in os.listxattr(src) if not a.startswith(_OVERLAY_XATTRS)}
            if not _keeps_access(ist, ust, attrs.get(_ACL_XATTR)):
                what = f"mode {stat.S_IMODE(ust.st_mode):04o}, owner {ust.st_uid}:{ust.st_gid}" + (", an access list" if _ACL_XATTR in attrs else "")
                raise RuntimeError(f"the episode took the right to read or run /{path} from users the image gives it to ({what}): checks run the image's tools")
            for attr, value in attrs.items():
                os.setxattr(dst, attr, value)
            os.fchmod(dst, stat.S_IMODE(ust.st_mode))
            os.utime(dst, ns=(ust.st_atime_ns, ust.st_mtime_ns))
            return True
        finally:
            for fd in opened:
                os.close(fd)

    def kill(self, pids, sig):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def kill_group(self, pgid, sig):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def sandbox_pids(self):
        """Host pids of the sandbox's processes (its pid namespace), for the engine's clean-up after a fork bomb."""
        try:
            ns = os.readlink(f"/proc/{self.keeper}/ns/pid")
        except OSError:
            return []
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if os.readlink(f"/proc/{entry.name}/ns/pid") == ns:
                        found.append(int(entry.name))
                except OSError:
                    pass
        return found

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.bwrap_pid:
                _send(self.sock, {"sandbox_exited": os.waitstatus_to_exitcode(status)})
                os._exit(0)
            rid = self.children.pop(pid, None)
            if rid is not None:
                _send(self.sock, {"exited": rid, "pid": pid, "status": os.waitstatus_to_exitcode(status)})

    def serve(self):
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.reap()
        while True:
            ready, _, _ = select.select([self.sock, wake_r], [], [])
            if wake_r in ready:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                self.reap()
            if self.sock in ready:
                try:
                    msg, fds = _recv(self.sock)
                except (EOFError, ConnectionError):
                    return
                op = msg.get("op")
                if op == "spawn":
                    self.spawn(msg, fds)
                elif op == "kill":
                    self.kill(msg["pids"], msg.get("signal", signal.SIGKILL))
                elif op == "killpg":
                    self.kill_group(msg["pgid"], msg.get("signal", signal.SIGKILL))
                elif op == "kill_all_but":
                    keep = set(msg["keep"]) | {self.keeper}
                    victims = [p for p in self.sandbox_pids() if p not in keep]
                    self.kill(victims, signal.SIGKILL)
                    _send(self.sock, {"killed": len(victims), "id": msg.get("id")})
                elif op == "exit":
                    return


def _grants(st, acl):
    """The read/execute bits each entry that decides someone's access to a file grants: owner, group and others, or
    with an access list (``system.posix_acl_access``: a version, then tag, permissions, id per entry) every entry,
    the named users' and groups' and the owning group's under its mask."""
    mode = st.st_mode
    if not acl:
        return [(mode >> 6) & 5, (mode >> 3) & 5, mode & 5]
    entries = [struct.unpack_from("<HHI", acl, at) for at in range(4, len(acl) - 7, 8)]
    mask = next((perm for tag, perm, _ in entries if tag == 0x10), 7)
    return [(perm & mask if tag in (0x02, 0x04, 0x08) else perm) & 5 for tag, perm, _ in entries if tag != 0x10]


def _keeps_access(image, episode, acl):
    """Whether everyone who may read or run the image's file (``image``: no access list in an image) may read and run the
    episode's: class by class when its owner and group are the image's, else every entry grants all the image grants."""
    theirs, mine = _grants(image, None), _grants(episode, acl)
    if acl is None and (episode.st_uid, episode.st_gid) == (image.st_uid, image.st_gid):
        return all(m & t == t for m, t in zip(mine, theirs))
    need = theirs[0] | theirs[1] | theirs[2]
    return all(m & need == need for m in mine)


def _start_mapper(idmap):
    """A child that stays in the host's user namespace and writes the warden's id maps once told, through the setuid
    newuidmap/newgidmap (an ordinary user's subordinate range; root's maps and a single id's the engine writes).
    Returns (its pid, the fd to tell it)."""
    go_r, go_w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        os.close(go_r)
        return pid, go_w
    code = 1
    try:
        os.close(go_w)
        os.read(go_r, 1)
        uid, gid, count = idmap["uid_base"], idmap["gid_base"], idmap["count"]
        for tool, base in ((idmap["newuidmap"], uid), (idmap["newgidmap"], gid)):
            child = os.fork()
            if child == 0:
                os.execv(tool, [tool, str(parent), "0", str(base), str(count)])
            _, status = os.waitpid(child, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"{tool} failed")
        code = 0
    except BaseException as exc:  # noqa: BLE001 - the warden reports the failure
        os.write(2, f"writing the id maps: {exc}\n".encode(errors="replace"))
    os._exit(code)


def _raise_nofile(wanted):
    """RLIMIT_NOFILE ``wanted`` soft and hard, as Docker gives a container (std-004-Q09 needs > 123321), where
    the hard limit allows or may be raised; else the hard limit (see ``limits.reachable_nofile``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
    except (OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _default_signals():
    """What Python changed (SIGPIPE and SIGXFSZ ignored, SIGINT handled) back to the default before an exec:
    `ls | head` must end ls quietly, as in any shell."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)


def _open_fds():
    return [int(name) for name in os.listdir("/proc/self/fd") if name.isdigit()]


def _live_fds():
    """This process's open descriptors (not the one that listed them)."""
    live = set()
    for fd in _open_fds():
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            continue
        live.add(fd)
    return live


def _child_pid(info):
    """The keeper's pid from bubblewrap's --info-fd JSON (``{"child-pid": N, ...}``), else None."""
    key = b'"child-pid":'
    if key not in info or b"}" not in info:
        return None
    digits = info.split(key, 1)[1].lstrip().split(b",", 1)[0].split(b"}", 1)[0].strip()
    return int(digits) if digits.isdigit() else None


def _read_until(fd, done, timeout):
    data = b""
    while not done(data):
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def run_warden(sock, parent):
    """One episode's warden on ``sock`` (a child of ``parent``): build the sandbox, then serve."""
    os.set_inheritable(sock.fileno(), False)  # never into bubblewrap or the sandbox
    try:
        config, _ = _recv(sock)
        warden = Warden(sock, config, parent)
        warden.build()
    except BaseException as exc:  # noqa: BLE001 - the engine turns this into its own error
        try:
            _send(sock, {"error": f"{exc}"})
        except OSError:
            pass
        return 1
    warden.serve()
    return 0


def _reap_children(*_):
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def zygote(sock):
    """Forks a warden per request (a SOCK_SEQPACKET end and a stderr fd arrive with it): Python's start-up and
    imports happen once per engine, not once per episode. Exits with the engine (PDEATHSIG) or its socket."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # no cycle collection here or in the wardens (they make no garbage cycles that matter and live for one episode):
    # a collection writes to every object's header, so each forked warden would copy all the pages it shares with
    # this process (a third of a warden's CPU was such copy-on-write faults)
    gc.disable()
    gc.freeze()
    # a warden killed while processes it started in the sandbox still run (the agent's shell, a check) leaves
    # them to be reaped here, not by the host's init (which may never reap them): the sandbox's pid 1 waits
    # for every process of its namespace to be reaped before it can end
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    os.set_inheritable(sock.fileno(), False)
    me = os.getpid()
    signal.signal(signal.SIGCHLD, _reap_children)
    while True:
        try:
            _msg, fds = _recv(sock)
        except (EOFError, ConnectionError):
            return 0
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            _send(sock, {"forked": 0})
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the warden waits for its own children
                sock.close()
                # its own process group: the engine kills it without touching the zygote. Not its own session: the
                # zygote's, whose scheduling group the engine lowered (a session of its own would not be)
                os.setpgid(0, 0)
                os.dup2(fds[1], 2)
                os.close(fds[1])
                code = run_warden(_socket.socket(fileno=fds[0]), me)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        _send(sock, {"forked": pid})


def main():
    if sys.argv[1] == "--zygote":
        return zygote(_socket.socket(fileno=int(sys.argv[2])))
    return run_warden(_socket.socket(fileno=int(sys.argv[1])), os.getppid())


if __name__ == "__main__":
    sys.exit(main())
