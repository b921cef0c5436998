"""The first process of a shell command's sandbox (run as ``python -I -S _sandbox_init.py ...``).

With ``--namespace`` it enters new user, mount, PID and network namespaces (no network; everything
it starts lives and dies in its PID namespace) and becomes that namespace's first process; with
``--confine`` it confines itself with Landlock (writes only beneath the given folders; TCP refused).
It starts ``bash -c COMMAND`` and passes its output on. When the command's foreground part ends it
hands over the exit code, and keeps draining the output of whatever the command left running in
the background until Zero closes the *hold* pipe (the run ended, a timeout, Zero died): then it
exits, and with it goes everything else in its PID namespace (or, unconfined, its process group).

Standard library only, and no ``zero`` imports: it starts without site packages, in ~15 ms.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys

_WRITE_RIGHTS = {
    1: 0b1_1111_1111_0010,  # write_file, remove_dir/file, make_char/dir/reg/sock/fifo/block/sym
    2: 0b11_1111_1111_0010,  # + refer
    3: 0b111_1111_1111_0010,  # + truncate
}
_ACCESS_NET_BIND_TCP, _ACCESS_NET_CONNECT_TCP = 1, 2
_RULE_PATH_BENEATH = 1
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
_MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x4000, 0x40000, 0x2, 0x4, 0x8


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine(writable: list[str]) -> None:
    """Landlock: from now on this process and its children may write only beneath ``writable``,
    and may not open or accept TCP connections (ABI 4 and later)."""
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(_SYS_CREATE, None, 0, 1)
    if abi < 1:
        raise OSError(ctypes.get_errno(), "Landlock is not available")
    rights = _WRITE_RIGHTS[min(abi, 3)]
    attr = _RulesetAttr(rights, (_ACCESS_NET_BIND_TCP | _ACCESS_NET_CONNECT_TCP) if abi >= 4 else 0, 0)
    size = ctypes.sizeof(attr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    for path in writable:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        rule = _PathBeneath(rights, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        os.close(fd)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 or libc.syscall(_SYS_RESTRICT, ruleset, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(ruleset)


def enter_namespaces() -> None:
    """New user, mount, PID and network namespaces; then fork: the parent waits (holding nothing open,
    so that the output pipe ends when the namespace does) and the child goes on as its first process."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET) < 0:
        raise OSError(ctypes.get_errno(), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    child = os.fork()
    if child:
        os.closerange(0, 1 << 16)
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) < 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
    if libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) < 0:
        raise OSError(ctypes.get_errno(), "mount /proc")


def _others_running(own: int) -> bool:
    """Does anything but this process still run in the PID namespace (a job left in the background)?"""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True
    return any(pid not in (own, 1) for pid in pids)


def main(argv: list[str]) -> int:
    sep = argv.index("--")
    options, command = argv[:sep], argv[sep + 1 :]
    writable = [options[i + 1] for i, o in enumerate(options) if o == "--write"]
    status_fd = int(options[options.index("--status-fd") + 1])
    hold_fd = int(options[options.index("--hold-fd") + 1])
    namespace = "--namespace" in options
    if namespace:
        enter_namespaces()
    if "--confine" in options:
        confine(writable)
    out_r, out_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.setsid()
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        for fd in (out_r, out_w, status_fd, hold_fd):
            os.close(fd)
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    os.close(out_w)
    pidfd = os.pidfd_open(child)
    code: int | None = None
    background = False
    out_open = True
    while True:
        watched = [hold_fd] + ([out_r] if out_open else []) + ([pidfd] if code is None else [])
        readable, _, _ = select.select(watched, [], [])
        if hold_fd in readable and not os.read(hold_fd, 1):
            break  # Zero is done with us (the run ended, a timeout), or Zero died
        if out_r in readable:
            data = os.read(out_r, 65536)
            if not data:
                out_open = False
                os.close(out_r)
            elif code is None:
                os.write(1, data)  # after the foreground part, background output is drained, not passed on
        if pidfd in readable:
            _, status = os.waitpid(child, 0)
            code = os.waitstatus_to_exitcode(status)
            while out_open and select.select([out_r], [], [], 0)[0]:  # what it wrote before it ended
                data = os.read(out_r, 65536)
                if not data:
                    out_open = False
                    os.close(out_r)
                    break
                os.write(1, data)
            _reap()
            background = _others_running(os.getpid()) if namespace else _group_alive(child)
            os.write(status_fd, f"{code} {int(background)}\n".encode())
            os.close(status_fd)
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)  # let go of Zero's output pipe (stderr is the same pipe): its reader sees the end
            os.dup2(quiet, 2)
            os.close(quiet)
            if not background:
                break
        if code is not None:
            _reap()
    if not namespace:  # no PID namespace to take them along: end the command's process group
        try:
            os.killpg(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 0


def _reap() -> None:
    """Collect what ended in the background (as the first process of a namespace, orphans are ours)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
