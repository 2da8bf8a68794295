"""The seccomp deny-list for local jobs, compiled to BPF with libseccomp (PyPI `pyseccomp`, a ctypes
binding to the system's libseccomp2, so it works in any venv). bubblewrap loads the program from an fd
(`--seccomp FD`). Everything not listed is allowed: the namespaces, cgroups and uid 65534 are the
boundary; this filter removes kernel attack surface that a sandboxed job never needs.

Syscalls of foreign ABIs (i386, x32) are killed by libseccomp's default bad-arch action.
"""

from __future__ import annotations

import errno
import tempfile
import logging
import termios

import pyseccomp

logger = logging.getLogger(__name__)

CLONE_NEWUSER = 0x10000000

DENIED = (
    # debugging / other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # namespaces and mounts (a nested user namespace would give back capabilities)
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr",
    "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree",
    # kernel attack surface
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "quotactl", "swapon",
    "swapoff", "reboot", "acct", "syslog", "personality", "sethostname", "setdomainname", "iopl",
    "ioperm", "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "nfsservctl",
    "uselib", "ustat", "sysfs", "_sysctl", "fanotify_init",
)


def build_filter_bpf() -> bytes:
    """The compiled BPF program (a few hundred bytes)."""
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for name in DENIED:
        try:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        except (ValueError, OSError) as exc:  # a syscall this architecture does not have
            logger.debug("seccomp: skipping %s (%s)", name, exc)
    # clone(CLONE_NEWUSER) is the other way into a user namespace; clone3 hides its flags in memory,
    # so it gets ENOSYS and libc falls back to clone.
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    # TIOCSTI would inject keystrokes into a terminal (there is none, but keep it shut).
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "ioctl", pyseccomp.Arg(1, pyseccomp.EQ, termios.TIOCSTI))
    with tempfile.TemporaryFile() as buffer:  # libseccomp writes to a real fd
        rules.export_bpf(buffer)
        buffer.seek(0)
        return buffer.read()


def docker_profile() -> dict:
    """The same policy as a Docker/OCI seccomp profile (for the docker backend's containers)."""
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [
            {"names": list(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
            {"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM,
             "args": [{"index": 0, "value": CLONE_NEWUSER, "valueTwo": CLONE_NEWUSER, "op": "SCMP_CMP_MASKED_EQ"}]},
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
            {"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM,
             "args": [{"index": 1, "value": termios.TIOCSTI, "op": "SCMP_CMP_EQ"}]},
        ],
    }
