/* agentbench-spawn: the last step of starting a process in an episode's sandbox, in C.

   The episode's warden (_warden.py) starts it with posix_spawn (a vfork: no copy of the warden's Python
   process, whose pages a fork would mark copy-on-write and the child would copy as it ran), its file
   descriptors already in place (posix_spawn's file actions: 0-2 stdio, 3.. the extra ones, the control ones
   below from CTL_BASE). It does what a process of the sandbox gets before it execs, in the order the
   warden's Python child does it (Warden._child): every signal at its default, moves itself into the cgroups
   whose cgroup.procs files it holds (the episode's or its checks'), leads its own process group or (a
   terminal) its own session with the terminal as its controlling one, enters the mount namespace it holds
   (the sandbox's, or the one the warden built for a check), changes folder, marks every other descriptor
   close-on-exec, sets the resource limits, drops to the sandbox's capabilities, sets no_new_privs, loads the
   seccomp filter and execs. It is not dumpable from its first instruction (its /proc entries stay the
   warden's to read, as a forked child of the non-dumpable warden's were). What fails is written to the error
   descriptor as one line and it exits 127; a successful exec closes that descriptor (close-on-exec).

   Usage: agentbench-spawn [cg=N] [pgrp] [tty] [mnt] [cwd=PATH] keep=K [rlimit=RES:VALUE]... [caps=MASK:LAST]
   [seccomp=BYTES] -- PROGRAM ARG...   (the environment is the program's) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CTL_BASE 100 /* keep in step with _warden.SPAWN_CTL */
#define ERR_FD (CTL_BASE + 0)
#define MNT_FD (CTL_BASE + 1)
#define SECCOMP_FD (CTL_BASE + 2)
#define MASTER_FD (CTL_BASE + 3)
#define CG_FD (CTL_BASE + 4)
#ifndef TIOCGPTPEER
#define TIOCGPTPEER 0x5441
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static void fail(const char *what) {
    char line[512];
    int n = snprintf(line, sizeof line, "%s: %s", what, strerror(errno));
    if (n > 0) {
        ssize_t ignored = write(ERR_FD, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)ignored;
    }
    _exit(127);
}

static void ok(long result, const char *what) {
    if (result < 0) fail(what);
}

static unsigned long long number(const char *text, const char *what) {
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || (*end && *end != ':')) {
        errno = EINVAL;
        fail(what);
    }
    return value;
}

/* every descriptor from `first` on close-on-exec (close_range, Linux 5.11; else one by one up to the limit) */
static void cloexec_from(int first) {
    if (syscall(SYS_close_range, (unsigned)first, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
    struct rlimit lim;
    long top = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? (long)lim.rlim_cur : 65536;
    for (long fd = first; fd < top; fd++) fcntl((int)fd, F_SETFD, FD_CLOEXEC);
}

static void drop_capabilities(unsigned long long keep, int last) {
    for (int cap = 0; cap <= last; cap++)
        if (!(keep & (1ULL << cap))) ok(prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "prctl PR_CAPBSET_DROP");
    ok(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl PR_CAP_AMBIENT");
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    for (int i = 0; i < 2; i++) {
        unsigned part = (unsigned)(keep >> (32 * i));
        data[i].effective = data[i].permitted = data[i].inheritable = part;
    }
    ok(syscall(SYS_capset, &header, data), "capset");
}

static void load_seccomp(size_t size) {
    static struct sock_filter program[BPF_MAXINSNS];
    if (size == 0 || size % sizeof(struct sock_filter) || size > sizeof program) {
        errno = EINVAL;
        fail("seccomp program");
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(SECCOMP_FD, (char *)program + got, size - got, (off_t)got);
        if (n <= 0) {
            if (n == 0) errno = EIO;
            fail("reading the seccomp program");
        }
        got += (size_t)n;
    }
    struct sock_fprog prog = {(unsigned short)(size / sizeof(struct sock_filter)), program};
    ok(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl PR_SET_NO_NEW_PRIVS");
    ok(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), "seccomp");
}

/* every signal at its default: posix_spawn leaves the C library's own two (32, 33) ignored, which an exec keeps
   (the kernel's sigaction, as the library's refuses them) */
static void default_signals(void) {
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } action = {SIG_DFL, 0, NULL, 0};
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP) syscall(SYS_rt_sigaction, sig, &action, NULL, sizeof action.mask);
}

int main(int argc, char **argv) {
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    default_signals();
    int cgroups = 0, pgrp = 0, tty = 0, mnt = 0, keep = 3, has_caps = 0, last_cap = 0, i;
    unsigned long long caps = 0;
    size_t seccomp = 0;
    const char *cwd = NULL;
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "cg=", 3)) cgroups = (int)number(a + 3, "cg");
        else if (!strcmp(a, "pgrp")) pgrp = 1;
        else if (!strcmp(a, "tty")) tty = 1;
        else if (!strcmp(a, "mnt")) mnt = 1;
        else if (!strncmp(a, "cwd=", 4)) cwd = a + 4;
        else if (!strncmp(a, "keep=", 5)) keep = (int)number(a + 5, "keep");
        else if (!strncmp(a, "seccomp=", 8)) seccomp = (size_t)number(a + 8, "seccomp");
        else if (!strncmp(a, "caps=", 5)) {
            const char *colon = strchr(a + 5, ':');
            if (!colon) { errno = EINVAL; fail("caps"); }
            caps = number(a + 5, "caps");
            last_cap = (int)number(colon + 1, "caps");
            has_caps = 1;
        } else if (!strncmp(a, "rlimit=", 7)) {
            continue; /* set below, once in the sandbox's mount namespace (as the Python child does) */
        } else {
            errno = EINVAL;
            fail(a);
        }
    }
    if (i >= argc - 1) {
        errno = EINVAL;
        fail("no program to run");
    }
    char **program = argv + i + 1;

    for (int c = 0; c < cgroups; c++) ok(write(CG_FD + c, "0", 1), "joining the cgroup");
    if (tty) {
        ok(setsid(), "setsid");
        int slave = ioctl(MASTER_FD, TIOCGPTPEER, O_RDWR | O_NOCTTY);
        ok(slave, "TIOCGPTPEER");
        ok(ioctl(slave, TIOCSCTTY, 0), "TIOCSCTTY");
        for (int fd = 0; fd < 3; fd++) ok(dup2(slave, fd), "dup2");
        if (slave > 2) close(slave);
    } else if (pgrp) {
        ok(setpgid(0, 0), "setpgid");
    }
    if (mnt) ok(setns(MNT_FD, CLONE_NEWNS), "setns");
    if (cwd && chdir(cwd) < 0) fail(cwd);
    cloexec_from(keep);
    for (int r = 1; r < i; r++) {
        if (strncmp(argv[r], "rlimit=", 7)) continue;
        const char *colon = strchr(argv[r] + 7, ':');
        if (!colon) { errno = EINVAL; fail("rlimit"); }
        int resource = (int)number(argv[r] + 7, "rlimit");
        rlim_t value = (rlim_t)number(colon + 1, "rlimit");
        struct rlimit lim;
        ok(getrlimit(resource, &lim), "getrlimit");
        if (lim.rlim_max != RLIM_INFINITY && value > lim.rlim_max) value = lim.rlim_max;
        struct rlimit want = {value, value};
        if (setrlimit(resource, &want) < 0) {
            want.rlim_cur = want.rlim_max = lim.rlim_max;
            ok(setrlimit(resource, &want), "setrlimit");
        }
    }
    if (has_caps) drop_capabilities(caps, last_cap);
    if (seccomp) load_seccomp(seccomp);
    execve(program[0], program, environ);
    fail(program[0]);
    return 127;
}
