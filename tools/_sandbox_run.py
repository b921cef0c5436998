"""The first process of a shell command, confined or not (started by ``_sandbox_init``).

It starts ``bash -c COMMAND``, passes its output on, hands over the exit code when the command's
foreground part ends, and keeps draining the output of what the command left in the background
until Zero closes the *hold* pipe (the run ended, a timeout, Zero died). Then nothing the command
started is left: in a PID namespace (confined always; unconfined where the kernel gives one without
a user namespace: as root) everything in it ends with this process, its first, which nothing inside
can kill; else this process is a child subreaper (a ``setsid`` job or a double fork is reparented to
it) and kills every descendant until none is left (a command that kills this process first escapes
that). A parent-death signal does the same should Zero die without the pipe telling. Zero starts it
in a session of its own, so that killing Zero's process group (as a CI timeout does) leaves it to
end the command.

Confined (``--confine``), it first enters new user (uid mapped to itself), mount, PID and
network namespaces (no network; it is the PID namespace's first process) and builds the command's
view of the system (``_sandbox_confine``); in the command's process, before it runs, it drops every
capability, applies Landlock and installs the seccomp filter of ``_sandbox_seccomp``, whose calls it
then answers. Unconfined, the PID namespace comes with a mount namespace whose only change is
``/proc``: the host's (and any other ``proc`` mount) is detached and one of the new PID namespace
mounted, so that ``ps``, ``kill`` and ``/proc/$$`` agree and no process outside can be seen or read,
Zero's environment with the provider keys included, not even by unmounting ``/proc`` (mounts in it
are private: what the command mounts stays in it, and what the host mounts later stays out; a ``proc``
mount that cannot be detached, hidden beneath a later mount, stops the command). A user namespace would
confine more (setuid programs such as sudo stop working), so another user than root gets none.

Standard library only (it runs in ``python -I -S``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import signal
from collections.abc import Callable

__all__ = ["main"]

libc = ctypes.CDLL(None, use_errno=True)

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 4, 36
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE, _MNT_DETACH = 0x2, 0x4, 0x8, 0x4000, 0x40000, 2
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
_CLONE_NEWIPC = 0x08000000  # SysV shared memory, semaphores and message queues, POSIX queues: its own


def _fail(what: str) -> OSError:
    number = ctypes.get_errno()
    return OSError(number, f"{what}: {os.strerror(number)}")


def _on_parent_death(parent: int, then: Callable[[], object]) -> None:
    """Run ``then`` when Zero (``parent``) dies, should the hold pipe not tell first. A parent-death signal
    also comes when the thread that started us ends, so it counts only once we have a new parent."""

    def handler(signum: int, frame: object) -> None:
        if os.getppid() != parent:
            then()
            os._exit(137)

    signal.signal(signal.SIGTERM, handler)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) < 0:
        raise _fail("PR_SET_PDEATHSIG")
    if os.getppid() != parent:  # it died before we asked
        handler(signal.SIGTERM, None)


def enter_namespaces(flags: int) -> None:
    """New namespaces (``flags``; in a new user namespace the uid is mapped to itself); then fork: the parent
    waits (holding nothing open, so that the output pipe ends when the namespace does) and the child goes
    on as the first process of the new PID namespace."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(flags) < 0:
        raise _fail("unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        if flags & _CLONE_NEWUSER:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    child = os.fork()
    if child:
        os.closerange(0, 1 << 16)
        _on_parent_death(os.getppid(), lambda: os.kill(child, signal.SIGKILL))
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) < 0:  # the waiting parent went: so do we all
        raise _fail("PR_SET_PDEATHSIG")


def main(argv: list[str]) -> int:
    sep = argv.index("--")
    options, command = argv[:sep], argv[sep + 1 :]

    def values(flag: str) -> list[str]:
        return [options[i + 1] for i, o in enumerate(options) if o == flag]

    roots = values("--write")
    status_fd = int(options[options.index("--status-fd") + 1])
    hold_fd = int(options[options.index("--hold-fd") + 1])
    confined = namespaced = "--confine" in options
    try:
        if confined:
            from zero.tools import _sandbox_confine as confinement
            from zero.tools import _sandbox_seccomp as seccomp

            private = values("--private")[0]
            nodes = confinement.own_devices(private)
            enter_namespaces(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC)
            protected = confinement.private_view(private, roots, values("--protect"), values("--empty"), nodes)
            sockets = seccomp.Supervisor(roots, list(confinement.PRIVATE), protected)
        else:
            namespaced = _own_pid_namespace()
        if not namespaced:  # no PID namespace to end them all: what the command starts stays ours, even orphaned
            if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0:
                raise _fail("PR_SET_CHILD_SUBREAPER")
            _on_parent_death(os.getppid(), _end_descendants)
    except OSError as e:
        os.write(2, f"zero: the sandbox did not start: {e}\n".encode())
        os.write(status_fd, b"126 0\n")
        return 126
    out_r, out_w = os.pipe()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            for fd in (out_r, out_w, status_fd, hold_fd, ready_r, go_w):
                os.close(fd)
            listener = -1
            if confined:
                confinement.drop_privileges()
                confinement.confine(confinement.writable_inside(roots))
                listener = seccomp.install()
            os.write(ready_w, f"{listener}\n".encode())
            os.read(go_r, 1)  # the listener is the sandbox's now: the command must not hold it
            if listener >= 0:
                os.close(listener)
            os.execvp(command[0], command)
        except OSError as e:
            os.write(2, f"zero sandbox: {e}\n".encode())
        finally:
            os._exit(127)
    for fd in (out_w, ready_w, go_r):
        os.close(fd)
    pidfd = os.pidfd_open(child)
    listener = int(os.read(ready_r, 32) or b"-1")
    os.close(ready_r)
    if confined:
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing in the sandbox may look into this process
        if listener >= 0:
            sockets.serve(seccomp.take_fd(pidfd, listener))
    try:
        os.write(go_w, b"x")
    except BrokenPipeError:
        pass  # it failed before it could wait for us; its exit code says so
    os.close(go_w)
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
            background = _reap()
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
    if not namespaced:  # else the PID namespace ends with this process, and everything in it
        _end_descendants()
    return 0


def _own_pid_namespace() -> bool:
    """An unconfined command's PID namespace and its own ``/proc`` (see the module docstring); False where the
    kernel gives none without a user namespace (another user than root; root without CAP_SYS_ADMIN, as in a
    default container). Where mounting is refused (a security module), the host's ``/proc`` stays."""
    try:
        enter_namespaces(_CLONE_NEWNS | _CLONE_NEWPID)
    except OSError:
        return False
    # Private: a procfs the host mounts later, in a shared folder, does not come into view.
    if libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) == 0 and _mount_proc():
        for target in _proc_mounts():  # ours just made on /proc among them: every proc mount, stacked ones too
            while libc.umount2(target, _MNT_DETACH) == 0:
                pass
        if not _mount_proc():
            raise _fail("mount /proc")
        if left := [target for target in _proc_mounts() if target != b"/proc"]:  # (beneath a later mount: no path)
            raise OSError(
                errno.EBUSY, f"a procfs of the host at {os.fsdecode(left[0])} could not be unmounted (a later mount "
                "hides it): the command would see every process",
            )  # fmt: skip
    return True


def _mount_proc() -> bool:
    """Mount a ``proc`` of this PID namespace on ``/proc``; did it work?"""
    flags = ctypes.c_ulong(_MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    return bool(libc.mount(b"proc", b"/proc", b"proc", flags, None) == 0)


def _proc_mounts() -> list[bytes]:
    """Where a ``proc`` file system is mounted (as ``/proc/self/mountinfo`` says)."""
    found = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            fields = line.rstrip(b"\n").split(b" ")  # (single spaces: a vertical tab in a name is part of it)
            if fields[fields.index(b"-", 6) + 1] == b"proc":
                target = fields[4]
                for escaped, char in ((b"\\040", b" "), (b"\\011", b"\t"), (b"\\012", b"\n"), (b"\\134", b"\\")):
                    target = target.replace(escaped, char)  # the kernel's escapes; a backslash last
                found.append(target)
    return found


def _reap() -> bool:
    """Collect what ended; is anything left? Whatever the command started that outlived its parent is our
    child now (we are the first process of its PID namespace, or a subreaper), so no child: nothing left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _descendants() -> list[int]:
    """The live processes below this one."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _end_descendants() -> None:
    """Kill everything below this process until nothing is left (what forks meanwhile is orphaned to us,
    and found the next time round)."""
    while _reap():  # without a child there is nothing below us: its orphans would be our children
        for pid in _descendants():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
