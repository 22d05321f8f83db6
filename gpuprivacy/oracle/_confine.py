"""Kernel confinement of the sandbox worker: Landlock, seccomp, no_new_privs, rlimits, an unprivileged uid.

The worker that traces an analyst's oracle runs the analyst's Python. Python
is not a boundary, and neither is a child process of the same user, so the
worker is confined by the Linux kernel *before* any analyst code is imported:

* **file system** (Landlock, ``landlock_create_ruleset(2)``): read and execute
  access to the Python installation and the package directories the worker
  imports from, read/write access to one private temporary directory, and
  nothing else: no data file, no home directory, no ``/proc`` (so no other
  process's memory, command line or environment), no write to any package;
* **network** (Landlock ABI >= 4): no TCP bind or connect; and (seccomp) no
  socket of any family: the only channel is the pipe the worker inherited;
* **scopes** (Landlock ABI >= 6): no signal to, and no abstract Unix socket
  of, a process outside the worker's domain; Landlock also refuses ptrace of
  any process outside it;
* **system calls** (seccomp): ``ptrace``, ``process_vm_readv/writev``,
  ``execve``, new namespaces, mounts, BPF, perf, io_uring, keyrings, kernel
  modules are refused; once the template has started, no new process
  (``fork``, or ``clone`` without ``CLONE_THREAD``) either;
* **process**: ``PR_SET_NO_NEW_PRIVS``; root drops to ``nobody`` (no
  capabilities); rlimits on CPU time, address space, file size, open files
  and processes; ``PR_SET_PDEATHSIG`` so the worker dies with its parent.

This module uses only the standard library (ctypes over the raw system calls,
no new dependency): the worker loads it by file path before importing NumPy
or JAX. :func:`features` reports what this kernel offers (``gpuprivacy
doctor``).

References: landlock(7), seccomp(2), prctl(2), setrlimit(2) in the Linux
man-pages; Landlock ABI levels from Documentation/userspace-api/landlock.rst.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct
import sys

# The worker's environment, set by the engine: the parent's pid (the worker dies with it), the seconds a child
# may trace, and the switch that starts it without confinement (the documented opt-in, and the tests' controls).
PARENT_ENV = "GPUPRIVACY_SANDBOX_PARENT"
TIMEOUT_ENV = "GPUPRIVACY_SANDBOX_TIMEOUT"
UNCONFINED_ENV = "GPUPRIVACY_SANDBOX_UNCONFINED"
PACKAGE_ENV = "GPUPRIVACY_SANDBOX_PACKAGE"  # gpuprivacy's own directory: readable, so oracles may import it

# --- system call numbers (x86_64; the unified numbers 424+ are the same on every architecture) ----------------

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock file-system rights, and the ABI that introduced each.
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_ABI1 = (1 << 13) - 1
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39
_SECCOMP_SET_MODE_FILTER = 1
_SYS_SECCOMP = 317
_AUDIT_ARCH_X86_64 = 0xC000003E
_CLONE_THREAD = 0x00010000
_CLONE_NEWUSER = 0x10000000
_SYS_CAPSET = 126
_CAPABILITY_VERSION_3 = 0x20080522

_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000


def _ret_errno(code: int) -> int:
    return 0x00050000 | code


# Refused at every stage (x86_64 numbers). EPERM, except clone3 (ENOSYS: glibc then falls back to clone,
# whose flags a filter can read).
_DENIED_ALWAYS = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53, "accept4": 288,
    "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249, "pidfd_open": 434,
    "pidfd_getfd": 438, "kcmp": 312, "process_madvise": 440, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "personality": 135, "acct": 163,
    "swapon": 167, "swapoff": 168, "quotactl": 179, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "setsid": 112, "setpgid": 109,
}
_CLONE, _CLONE3, _FORK, _VFORK = 56, 435, 57, 58


class ConfinementUnavailable(OSError):
    """This machine's kernel lacks a feature the sandbox needs (named in the message)."""


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _fail(what: str) -> ConfinementUnavailable:
    code = ctypes.get_errno()
    return ConfinementUnavailable(f"{what} failed: {os.strerror(code) if code else 'unknown error'}")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: Landlock absent or disabled)."""
    if sys.platform != "linux":
        return 0
    version = _libc().syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                              ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def features() -> dict:
    """What this machine offers the sandbox, and what is missing.

    Returns:
      ``{"platform", "machine", "landlock_abi", "landlock_fs", "landlock_net", "landlock_scopes", "seccomp",
      "no_new_privs", "uid", "missing": [...]}``; the sandbox confines a worker only when ``missing`` is
      empty.
    """
    machine = platform.machine()
    abi = landlock_abi()
    seccomp = False
    if sys.platform == "linux":
        try:
            with open("/proc/self/status", encoding="ascii", errors="replace") as status:
                seccomp = any(line.startswith("Seccomp:") for line in status)
        except OSError:
            pass
    missing = []
    if sys.platform != "linux":
        missing.append(f"Linux (this is {sys.platform})")
    if machine not in ("x86_64", "AMD64"):
        missing.append(f"an x86_64 seccomp table (this machine is {machine})")
    if abi < 1:
        missing.append("Landlock file-system rules (kernel >= 5.13 with Landlock enabled)")
    if abi < 4:
        missing.append("Landlock TCP rules (Landlock ABI >= 4, kernel >= 6.7)")
    if abi < 6:
        missing.append("Landlock signal and abstract-socket scopes (Landlock ABI >= 6, kernel >= 6.12)")
    if not seccomp:
        missing.append("seccomp filters")
    return {"platform": sys.platform, "machine": machine, "landlock_abi": abi, "landlock_fs": abi >= 1,
            "landlock_net": abi >= 4, "landlock_scopes": abi >= 6, "seccomp": bool(seccomp),
            "no_new_privs": sys.platform == "linux", "uid": os.getuid() if hasattr(os, "getuid") else None,
            "missing": missing}


# --- process --------------------------------------------------------------------------------------------------

def die_with_parent(parent_pid: int) -> None:
    """SIGKILL when the parent exits (and now, if it already has)."""
    libc = _libc()
    if libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)


def no_new_privileges() -> None:
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")


def drop_root() -> None:
    """Root leaves root behind: a new user namespace with no uid mapping, and no capabilities in it.

    In that namespace the process is ``nobody`` (the overflow uid) and holds no capability over any file or
    process of the machine's namespace; it can still read what root's uid owns (the Python installation may
    live in root's home), which Landlock then narrows to the paths the worker needs.
    """
    if os.getuid() != 0 and os.geteuid() != 0:
        return
    libc = _libc()
    if libc.unshare(_CLONE_NEWUSER) != 0:
        raise _fail("unshare(CLONE_NEWUSER) (root must drop its privileges)")
    header = struct.pack("=Ii", _CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two (effective, permitted, inheritable) triples, all empty
    if libc.syscall(_SYS_CAPSET, ctypes.create_string_buffer(header, 8), ctypes.create_string_buffer(data, 24)) != 0:
        raise _fail("capset (dropping every capability)")


def set_limits(*, cpu_seconds: int | None, address_space: int, file_size: int, open_files: int,
               processes: int) -> None:
    """Hard rlimits (the worker cannot raise them again)."""
    wanted = [(resource.RLIMIT_AS, address_space), (resource.RLIMIT_FSIZE, file_size),
              (resource.RLIMIT_NOFILE, open_files), (resource.RLIMIT_CORE, 0)]
    if cpu_seconds is not None:
        wanted.append((resource.RLIMIT_CPU, int(cpu_seconds)))
    if os.getuid() != 0:  # RLIMIT_NPROC counts the uid's processes (threads included); root is exempt
        wanted.append((resource.RLIMIT_NPROC, processes))
    for kind, value in wanted:
        soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))


# --- Landlock -------------------------------------------------------------------------------------------------

def landlock(read_only: list[str], read_write: list[str], *, abi: int | None = None) -> None:
    """Restricts this thread (and everything it starts later) to the listed paths, no TCP, scoped signals.

    Must run before the process starts threads: Landlock confines the calling thread and its descendants.
    """
    abi = landlock_abi() if abi is None else abi
    if abi < 6:
        raise ConfinementUnavailable(f"Landlock ABI {abi} < 6 (file system, TCP and scopes are all needed)")
    fs = _FS_ALL_ABI1 | _FS_REFER | _FS_TRUNCATE | _FS_IOCTL_DEV
    attr = struct.pack("=QQQ", fs, _NET_BIND_TCP | _NET_CONNECT_TCP, _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL)
    libc = _libc()
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
        write = fs & ~_FS_EXECUTE & ~(1 << 6) & ~(1 << 11)  # no device nodes
        for paths, access in ((read_only, read), (read_write, read | write)):
            for path in paths:
                _add_path_rule(libc, ruleset, path, access)
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)


def _add_path_rule(libc, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist grants nothing
    try:
        if not os.path.isdir(path):
            access &= _FS_EXECUTE | _FS_READ_FILE | _FS_WRITE_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
        rule = struct.pack("=Qi", access, fd)
        buffer = ctypes.create_string_buffer(rule, len(rule))
        if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                        buffer, ctypes.c_uint32(0)) != 0:
            raise _fail(f"landlock_add_rule({path!r})")
    finally:
        os.close(fd)


# --- seccomp --------------------------------------------------------------------------------------------------

def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06


def seccomp_program(*, allow_processes: bool) -> bytes:
    """The filter: kill a foreign architecture or an x32 call, refuse the listed calls, allow the rest.

    ``allow_processes=False`` also refuses ``fork``, ``vfork`` and ``clone`` without ``CLONE_THREAD``
    (threads stay allowed); ``clone3`` is always refused with ENOSYS so that glibc uses ``clone``.
    """
    denied = sorted(set(_DENIED_ALWAYS.values()) | ({_FORK, _VFORK} if not allow_processes else set()))
    prog = [_bpf(_LD_W_ABS, 0, 0, 4),                                  # arch
            _bpf(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
            _bpf(_RET_K, 0, 0, _RET_KILL_PROCESS),
            _bpf(_LD_W_ABS, 0, 0, 0),                                  # nr
            _bpf(_JGE_K, 0, 1, 0x40000000),                            # x32 ABI
            _bpf(_RET_K, 0, 0, _RET_KILL_PROCESS),
            _bpf(_JEQ_K, 0, 1, _CLONE3),
            _bpf(_RET_K, 0, 0, _ret_errno(errno.ENOSYS))]
    if not allow_processes:
        prog += [_bpf(_JEQ_K, 0, 4, _CLONE),
                 _bpf(_LD_W_ABS, 0, 0, 16),                            # args[0] low word: clone flags
                 _bpf(_JSET_K, 1, 0, _CLONE_THREAD),
                 _bpf(_RET_K, 0, 0, _ret_errno(errno.EPERM)),
                 _bpf(_RET_K, 0, 0, _RET_ALLOW)]
    for nr in denied:
        prog += [_bpf(_JEQ_K, 0, 1, nr), _bpf(_RET_K, 0, 0, _ret_errno(errno.EPERM))]
    prog.append(_bpf(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(prog)


def seccomp(*, allow_processes: bool) -> None:
    """Installs :func:`seccomp_program` on this thread (needs no_new_privs first)."""
    program = seccomp_program(allow_processes=allow_processes)
    count = len(program) // 8
    filters = ctypes.create_string_buffer(program, len(program))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(count, ctypes.cast(filters, ctypes.c_void_p))
    if _libc().syscall(_SYS_SECCOMP, _SECCOMP_SET_MODE_FILTER, 0, ctypes.byref(prog)) != 0:
        raise _fail("seccomp(SECCOMP_SET_MODE_FILTER)")


# --- the whole confinement ------------------------------------------------------------------------------------

def readable_roots() -> list[str]:
    """Directories the worker must read to import Python, NumPy and JAX: the interpreter and its packages."""
    roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    for entry in sys.path:
        if entry and os.path.isdir(entry) and ("site-packages" in entry or "dist-packages" in entry
                                              or entry.startswith(sys.base_prefix)):
            roots.add(entry)
    roots |= {os.path.realpath(p) for p in roots}
    # Shared libraries the extension modules load lazily (the dynamic loader, libstdc++, ...).
    roots |= {"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache"}
    return sorted(roots)


# Limits of the template and of each tracing child: room for Python, NumPy and JAX (about 0.5 GiB of address
# space after an import), not for the machine.
_ADDRESS_SPACE = 16 << 30
_FILE_SIZE = 64 << 20
_OPEN_FILES = 256
_PROCESSES = 4096


def _paths(private: str) -> tuple[list[str], list[str]]:
    package = os.environ.get(PACKAGE_ENV)
    return readable_roots() + ["/dev/urandom"] + ([package] if package else []), [private, "/dev/null"]


def confine(*, private_dir: str, parent_pid: int, allow_processes: bool) -> None:
    """Confines this (single-threaded) process; raises :class:`ConfinementUnavailable` if it cannot.

    Order matters: the parent-death signal first; then root leaves root behind (a user namespace needs a
    single-threaded process); then rlimits, no_new_privs, Landlock and seccomp, which only ever narrow.
    """
    missing = features()["missing"]
    if missing:
        raise ConfinementUnavailable("this machine lacks " + "; ".join(missing))
    die_with_parent(parent_pid)
    drop_root()
    set_limits(cpu_seconds=None, address_space=_ADDRESS_SPACE, file_size=_FILE_SIZE, open_files=_OPEN_FILES,
               processes=_PROCESSES)
    no_new_privileges()
    landlock(*_paths(private_dir))
    seccomp(allow_processes=allow_processes)


def confine_child(*, parent_pid: int, cpu_seconds: int, scratch: str) -> None:
    """Narrows a forked child before it loads analyst code: dies with the template, a CPU budget, no new
    process, and a nested Landlock domain that writes only ``scratch`` and cannot signal the template."""
    die_with_parent(parent_pid)
    set_limits(cpu_seconds=cpu_seconds, address_space=_ADDRESS_SPACE, file_size=_FILE_SIZE, open_files=64,
               processes=_PROCESSES)
    landlock(*_paths(scratch))
    seccomp(allow_processes=False)
