"""The sandbox's seccomp filter, built with the system's libseccomp (Debian's ``libseccomp2``).

In the spirit of Docker's default profile, but as a deny list (the tasks run arbitrary Debian tools, and
an allow list would break the ones Docker's list forgets): the calls that reach past a user namespace or
have a history of kernel escapes fail with EPERM (``clone3`` with ENOSYS, so glibc falls back to ``clone``,
whose namespace flags are then visible to the filter); ``socket(AF_VSOCK)`` (a virtual machine's channel to
its host) fails with EAFNOSUPPORT, as on a kernel without vsock. Calls of another ABI (i386 through ``int 0x80``,
x32) kill the process: libseccomp's bad-architecture action.

The program is exported once per process as classic BPF bytes: bubblewrap loads it for the sandbox's pid 1
(``--seccomp FD``) and the warden (:mod:`._warden`) loads the same bytes into every process it starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os

from ...errors import EnvUnavailableError

# Fail with EPERM. Grouped by why.
DENIED: tuple[str, ...] = (
    # file handles ("shocker": open any inode of a file system by handle), fd theft
    "open_by_handle_at", "name_to_handle_at", "pidfd_getfd",
    # kernel keyrings (not namespaced by everything), eBPF, perf, userfaultfd, io_uring (escape history)
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # kernels and modules
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "get_kernel_syms", "query_module", "uselib",
    # the mount family and root changes
    "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    # other processes' memory, namespaces
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "unshare", "setns",
    # the machine's clock, swap, power, accounting, log, quotas, I/O ports
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime", "swapon", "swapoff", "reboot",
    "acct", "syslog", "quotactl", "quotactl_fd", "nfsservctl", "iopl", "ioperm", "lookup_dcookie", "vhangup",
    "fanotify_init", "_sysctl", "vm86", "vm86old", "bdflush",
)  # fmt: skip
_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
_AF_VSOCK = 40  # sockets to the hypervisor or host of a virtual machine
_TIOCSTI = 0x5412  # typing into a terminal's input queue
_TIOCLINUX = 0x541C

_ALLOW = 0x7FFF0000
_SCMP_CMP_MASKED_EQ = 7
_SCMP_CMP_EQ = 4


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


@functools.cache
def filter_program() -> bytes:
    """The filter as BPF bytes (``struct sock_filter[]``), built once per process."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        raise EnvUnavailableError("os: libseccomp is not installed (apt-get install libseccomp2)") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise EnvUnavailableError("os: libseccomp could not create a filter")
    try:

        def rule(action: int, syscall: str, *conds: tuple[int, int, int, int]) -> None:
            nr = lib.seccomp_syscall_resolve_name(syscall.encode())
            if nr < 0:
                return  # not a call of this architecture
            array = (_ArgCmp * max(1, len(conds)))(*(_ArgCmp(*c) for c in conds))
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(conds), array)
            if rc < 0:
                raise EnvUnavailableError(f"os: libseccomp refused the rule for {syscall} ({os.strerror(-rc)})")

        deny = _errno_action(errno.EPERM)
        for syscall in DENIED:
            rule(deny, syscall)
        rule(_errno_action(errno.ENOSYS), "clone3")
        for flag in _NAMESPACE_FLAGS:
            rule(deny, "clone", (0, _SCMP_CMP_MASKED_EQ, flag, flag))
        rule(_errno_action(errno.EAFNOSUPPORT), "socket", (0, _SCMP_CMP_EQ, _AF_VSOCK, 0))
        for request in (_TIOCSTI, _TIOCLINUX):
            rule(deny, "ioctl", (1, _SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, request))
        read_end, write_end = os.pipe()
        try:
            rc = lib.seccomp_export_bpf(ctx, write_end)
            os.close(write_end)
            write_end = -1
            if rc < 0:
                raise EnvUnavailableError(f"os: libseccomp could not export the filter ({os.strerror(-rc)})")
            chunks = []
            while chunk := os.read(read_end, 65536):
                chunks.append(chunk)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        return b"".join(chunks)
    finally:
        lib.seccomp_release(ctx)
