"""Where shell commands run: in a sandbox where the system has one, else unconfined; and with what.

The sandbox is Linux's own: new user, PID, mount and network namespaces, so the command has no
network and everything it starts ends with it, even when Zero is killed; its own /tmp, /var/tmp and
/dev/shm (a private folder of the run outside the workspace, removed with it), an empty /run and
$XDG_RUNTIME_DIR and a minimal /dev, so it sees none of the host's sockets and devices; every other
mount read-only; no capability; Landlock, so it may write only inside the workspace and those
private folders; and a seccomp filter that refuses connecting to a unix socket outside them. Zero's
data and config folders are never writable. Its first process is ``_sandbox_init`` (see there).
Unconfined, that first process still ends everything the command started when the run ends; run by
root, in a PID namespace of its own.

In every mode a command gets Zero's environment without its secrets: the variables the redaction
rule calls secret (the provider keys among them) and those that lead to a socket of the host
(``TMUX``, ``SSH_AUTH_SOCK``, ...), unless the user's ``[shell] env_passthrough`` names them. Nor
can it read them in Zero's process (``hide_own_secrets``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import re
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from zero.tools.redact import secret_name

__all__ = [
    "INIT",
    "SOCKET_ENV",
    "PrivateTemp",
    "workspace_problem",
    "available",
    "command_env",
    "command_line",
    "hide_own_secrets",
    "unavailable_reason",
]

INIT = str(Path(__file__).with_name("_sandbox_init.py"))

SOCKET_ENV = frozenset(
    {
        "TMUX",
        "TMUX_PANE",
        "STY",
        "ZELLIJ",
        "ZELLIJ_SESSION_NAME",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "AT_SPI_BUS_ADDRESS",
        "DOCKER_HOST",
        "CONTAINER_HOST",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "WAYLAND_SOCKET",
        "XAUTHORITY",
        "SWAYSOCK",
        "I3SOCK",
        "HYPRLAND_INSTANCE_SIGNATURE",
        "PULSE_SERVER",
        "NOTIFY_SOCKET",
        "KITTY_LISTEN_ON",
        "WEZTERM_UNIX_SOCKET",
        "NVIM",
        "NVIM_LISTEN_ADDRESS",
        "VSCODE_IPC_HOOK_CLI",
        "VSCODE_GIT_IPC_HANDLE",
    }
)
"""Variables that name a socket (or a helper talking to one) of the host: an editor, a terminal
multiplexer, an agent, a bus, a display, a container engine."""


@functools.cache
def unavailable_reason() -> str | None:
    """Why shell commands cannot be sandboxed here (None: they can). Asked once: it starts a sandbox."""
    if not sys.platform.startswith("linux"):
        return "sandboxing needs Linux"
    try:
        private = PrivateTemp()
    except OSError as e:
        return f"no temp folder for the sandbox: {e}"
    status_r, status_w = os.pipe()
    hold_r, hold_w = os.pipe()
    try:
        argv = command_line(
            "true", confined=True, writable=[], status_fd=status_w, hold_fd=hold_r, private=private.path
        )
        probe = subprocess.run(
            argv, capture_output=True, timeout=10, pass_fds=(status_w, hold_r), stdin=subprocess.DEVNULL
        )
        os.close(status_w)
        status_w = -1
        status = os.read(status_r, 64)
    except (OSError, subprocess.SubprocessError) as e:
        return f"the sandbox does not start here: {e}"
    finally:
        for fd in (status_r, status_w, hold_r, hold_w):
            if fd >= 0:
                os.close(fd)
        private.remove()
    if probe.returncode != 0 or not status.startswith(b"0 "):
        error = probe.stderr.decode(errors="replace").strip().splitlines()
        why = error[-1] if error else f"exit code {probe.returncode}"
        return f"user namespaces or Landlock are not available here ({why})"
    return None


def available() -> bool:
    return unavailable_reason() is None


class PrivateTemp:
    """The host folder (mode 0700) whose subfolders are a run's /tmp, /var/tmp and /dev/shm in the sandbox;
    it lasts until the run ends (a ``Background`` of the run). Its run holds a lease on it (a lock the kernel
    drops when the process dies), so that the folder of a run whose Zero was killed is removed by the next.
    ``left`` says what of those could not be removed (the run goes on, and the next tries again)."""

    def __init__(self, roots: Sequence[str] = ()) -> None:
        self.path = tempfile.mkdtemp(prefix=_PREFIX, dir=_temp_outside(roots))
        # Locked before another run can find it by its name (a run's start removes the folders whose lease is free)
        made = os.path.join(self.path, f"{_LEASE}.new")
        self.lease = os.open(made, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.lease, fcntl.LOCK_EX)
        os.rename(made, os.path.join(self.path, _LEASE))
        self.left = _remove_abandoned(os.path.dirname(self.path))

    def remove(self) -> None:
        _remove(self.path)  # what cannot go now, the next run's start tries again
        os.close(self.lease)

    async def aclose(self) -> None:
        self.remove()


_PREFIX, _LEASE = "zero-run-", "lease"
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _temp_outside(roots: Sequence[str]) -> str:
    """Where a run's private folder is made: in /tmp, /var/tmp or /dev/shm itself (the one ``TMPDIR`` lies in
    first), outside every workspace root. The sandbox covers those three (a command sees its own /tmp, /var/tmp
    and /dev/shm instead), so no command sees another run's folder beside its own: one made in a ``TMPDIR``
    elsewhere would be in view, readable by the commands of the user's other runs, and one made in a folder
    within them (a ``TMPDIR`` of /tmp/x) is where another run's workspace may be, its commands able to read it
    or to swap the folder for a link between its making and its use. A private folder in a workspace could be
    changed by its commands (its /tmp made a link to a folder outside)."""
    real = [os.path.realpath(root) for root in roots]
    covered = [os.path.realpath(folder) for folder in TEMP_PARENTS]
    chosen = os.path.realpath(tempfile.gettempdir())
    for place in sorted(covered, key=lambda temp: not _beneath(chosen, temp)):
        if os.path.isdir(place) and not any(_beneath(place, root) for root in real):
            return place
    raise OSError(f"no temp folder lies outside the workspace: {', '.join(TEMP_PARENTS)} are all in it")


def workspace_problem(roots: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """Why no command runs sandboxed in a workspace of ``roots`` (None: they may): a root that is, or holds, a
    folder the sandbox covers with one of its own (the host's temp folders, where every run's private folder
    is; its devices; its runtime folders and their sockets; its processes), at its own path or through a mount
    that shows it, or a part of it, there (``mount --bind /tmp ws/t``, a bind of one socket of /run or of a
    tmpfs mounted in /tmp, a procfs, a workspace that is itself a bind of a folder of /run), would show that
    folder as the host has it, since a workspace is shown as it is. An overlay in view is refused as well: the
    paths its layers are named by are those of when it was mounted. (Not told apart: a FUSE, NFS, 9p or
    virtiofs file system that shows one, bindfs say, since the kernel does not say what they show.)"""
    folders = ("/dev", "/proc", *empty_folders(environ), *COVERED_TEMP)
    covered = {folder: real for folder in folders if os.path.exists(real := os.path.realpath(folder))}
    mounts = _mounts()
    try:  # each covered folder's place, and each file system mounted in one (a tmpfs of /tmp/.X11-unix)
        places = [_Covered(name=folder, path=real, place=_place(real, mounts)) for folder, real in covered.items()]
    except OSError as e:
        return f"the sandbox cannot tell which file systems are where ({e}): no command runs sandboxed"
    inside = [m for m in mounts if any(_beneath(m.point, c) for c in covered.values())]  # (hidden, stacked ones too)
    places += [_Covered(name=m.point, path=m.point, place=m, mounted=True) for m in inside]
    # and what a mount on a covered folder hides of the file system beneath it (left there before it came)
    parents = {m.id: m for m in mounts}
    for m in inside:
        if m.point in covered.values() and (under := parents.get(m.parent)) and _beneath(m.point, under.point):
            hidden = replace(under, top=_top(under, under.point, m.point))
            places.append(_Covered(name=m.point, path=m.point, place=hidden))
    for root in roots:
        try:
            real = os.path.realpath(root, strict=True)
            own = _place(real, mounts)  # the file system it lies in, from where in it (the mount it is reached by)
        except OSError as e:
            return f"the workspace {root} cannot be found as it is ({e.strerror or e}): no command runs sandboxed in it"
        for folder, covered_real in covered.items():
            if _beneath(covered_real, real):
                return _refused(root, f"{'is' if covered_real == real else 'holds'} {folder}")
        if (why := _shows(real, own, mounts, places)) is not None:
            return _refused(root, why)
    return None


@dataclass(frozen=True, kw_only=True)
class _Covered:
    """A covered folder, or a file system ``mounted`` in one: its name, its path, its place."""

    name: str
    path: str
    place: _Mount
    mounted: bool = False


def _shows(real: str, own: _Mount, mounts: Sequence[_Mount], places: Sequence[_Covered]) -> str | None:
    """Which covered folder (or part of one) the workspace at ``real``, reached by the mount ``own``, shows: what
    lies beneath it, and all that each mount in view within it shows (a part of a covered folder is the host's
    too), unless that part is of the workspace itself. A workspace that lies in a covered folder (a project in
    /tmp) may lie in it if it shows what that folder's file system has at its path, yet holds none of them."""
    theirs = [c for c in places if not _beneath(c.path, real)]  # (one in the workspace: the workspace's)
    others = [c for c in theirs if not (c.mounted and c.place.id == own.id)]  # (one mounted as the workspace: its own)
    itself = any(
        _beneath(real, c.path) and own.device == c.place.device and own.top == _top(c.place, c.path, real)
        for c in others
    )
    for mount in [own, *_within(own, real, mounts)]:
        if mount.kind in HOST_ONLY:
            return f"shows the host's {mount.kind} (the mount at {mount.point})"
        if mount.kind == "overlay" and mount.point != "/":  # (a container's root: its layers are out of view)
            return f"shows an overlay (the mount at {mount.point}), whose layers the sandbox cannot tell"
        if mount is own:
            shown = _covers(own, others, whole=not itself)
        else:
            mine = mount.device == own.device and _beneath(mount.top, own.top)
            shown = _covers(mount, theirs, whole=not mine)
        if shown is not None:
            return f"shows {shown} (the mount at {mount.point})"
    return None


def _covers(view: _Mount, places: Sequence[_Covered], *, whole: bool) -> str | None:
    """The covered folder of ``places`` that ``view`` (a mount, a path's place) shows: holds, or with ``whole``
    (all it shows is in view) lies in."""
    for covered in places:
        place = covered.place
        if place.device == view.device and (_beneath(place.top, view.top) or whole and _beneath(view.top, place.top)):
            return covered.name
    return None


def _within(own: _Mount, real: str, mounts: Sequence[_Mount]) -> list[_Mount]:
    """The mounts in view beneath the workspace at ``real``, reached by ``own``: those on its tree at a point in it,
    and those on theirs (one hidden among them too); not one on another tree that ``own`` hides."""
    children: dict[str, list[_Mount]] = {}
    for mount in mounts:
        children.setdefault(mount.parent, []).append(mount)
    found, todo, seen = [], [own.id], {own.id}
    while todo:
        for mount in children.get(todo.pop(), []):
            if mount.id not in seen and _beneath(mount.point, real):
                seen.add(mount.id)
                found.append(mount)
                todo.append(mount.id)
    return found


def _refused(root: str, why: str) -> str:
    return (
        f"the workspace {root} {why}, which the sandbox replaces with the run's own (the host's devices, sockets "
        "and every run's temp folders are there): no command runs sandboxed in it. Work in a folder of its own (a "
        "project's), or run the command with outside_sandbox = true (the user approves that)"
    )


HOST_ONLY = frozenset(
    ("proc", "sysfs", "devtmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
     "bpf", "configfs", "fusectl", "hugetlbfs", "pstore", "efivarfs", "binfmt_misc", "nsfs", "selinuxfs",
     "rpc_pipefs", "autofs", "resctrl", "nfsd")
)  # fmt: skip
"""File systems of the host's processes, devices and kernel: none is shown in the sandbox."""


@dataclass(frozen=True, kw_only=True)
class _Mount:
    id: str  # the mount's number
    parent: str  # the number of the mount it is mounted on
    device: str  # its file system (major:minor)
    top: str  # the folder of that file system it shows (or, from ``_place``, the one a path is)
    point: str  # where it is mounted
    kind: str  # the file system's type


def _mounts() -> list[_Mount]:
    """The mounts this process sees, hidden ones (mounted on or beneath a later one's point) among them. Its fields
    are parted by single spaces (the kernel escapes a space, tab, newline and backslash in a path, but no other
    blank: a no-break space in a name is one, which ``str.split`` took for a break)."""
    mounts = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            fields = [_unescaped(os.fsdecode(field)) for field in line.rstrip(b"\n").split(b" ")]
            top, point, kind = fields[3], fields[4], fields[fields.index("-", 6) + 1]  # (after the optional ones)
            mounts.append(_Mount(id=fields[0], parent=fields[1], device=fields[2], top=top, point=point, kind=kind))
    return mounts


def _unescaped(field: str) -> str:
    """A path of mountinfo, its blanks and backslashes as they are (written there as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def _place(path: str, mounts: Sequence[_Mount]) -> _Mount:
    """The mount ``path`` is reached by, as the kernel says of it (a mount on a shorter point made later than one
    on a longer may hide it), with ``top`` the folder of its file system that ``path`` is."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
            number = next((line.split()[1] for line in f if line.startswith("mnt_id:")), "")
    finally:
        os.close(fd)
    mount = next((m for m in mounts if m.id == number and _beneath(path, m.point)), None)
    if mount is None:
        raise OSError(f"{path} lies in no mount this process sees")
    return replace(mount, top=_top(mount, mount.point, path))


def _top(mount: _Mount, at: str, path: str) -> str:
    """The folder of ``mount``'s file system that ``path`` is, ``mount`` showing its ``top`` at ``at``."""
    inside = path[len(at) :].lstrip("/")
    return os.path.join(mount.top, inside) if inside else mount.top


COVERED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")
"""The host's temp folders, each covered in the sandbox by the run's own."""
TEMP_PARENTS = COVERED_TEMP
"""Where runs' private folders are made (a test makes its own in a tmpfs of its own, which the sandbox covers too:
it lies in /tmp)."""


def _beneath(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies in it (both real paths)."""
    return path == folder or path.startswith(f"{folder.rstrip('/')}/")


def _remove(path: str) -> str | None:
    """Remove the folder ``path`` and all in it, without recursion (a command may leave a tree thousands deep)
    and with one descriptor open at a time, never following a link (a link is removed, not what it leads to)
    nor entering another file system. What could not be removed, and why (None: all went)."""
    parent, name = os.path.split(path.rstrip("/"))
    left: list[str] = []
    try:
        fd = os.open(parent or "/", _FOLDER)
    except OSError as e:
        return f"{path}: {e.strerror}"
    device = os.fstat(fd).st_dev
    todo, above = [name], []  # the subfolders of this folder still to remove; of the folders above, the same
    try:
        while True:
            if todo:
                sub = todo.pop()
                child = _enter(fd, sub, device, left)
                if child is not None:
                    above.append((sub, os.fstat(fd), todo))
                    os.close(fd)
                    fd, todo = child, _clear(child, left, keep=_LEASE if len(above) == 1 else "")
                continue
            if not above:
                break
            if len(above) == 1 and not left:  # the lease last: a folder that cannot all go keeps it, to be tried again
                _unlink(fd, _LEASE, left)
            sub, identity, todo = above.pop()
            up = os.open("..", _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = up
            if not os.path.samestat(os.fstat(fd), identity):
                left.append(f"{sub}: moved while it was being removed")
                break
            try:
                os.rmdir(sub, dir_fd=fd)
            except OSError as e:
                left.append(f"{sub}: {e.strerror}")
    except OSError as e:
        left.append(f"{e.filename or path}: {e.strerror}")
    finally:
        os.close(fd)
    return f"{path}: {left[0]}" + (f" (and {len(left) - 1} more)" if len(left) > 1 else "") if left else None


def _enter(fd: int, name: str, device: int, left: list[str]) -> int | None:
    """The subfolder ``name`` of ``fd``, opened (made enterable: a command may have left it mode 000); None if
    it is no folder (it is removed then) or lies on another file system (left)."""
    try:
        found = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError:  # a link, or a file put in its place: the name goes, what it leads to stays
        _unlink(fd, name, left)
        return None
    try:
        if os.fstat(found).st_dev != device:
            left.append(f"{name}: another file system is mounted there")
            return None
        with contextlib.suppress(OSError):
            os.chmod(f"/proc/self/fd/{found}", 0o700)  # the folder itself, whatever its name leads to now
        return os.open(f"/proc/self/fd/{found}", _FOLDER)
    finally:
        os.close(found)


def _clear(fd: int, left: list[str], keep: str = "") -> list[str]:
    """Remove what is in the folder ``fd`` but its subfolders (and ``keep``), and name those."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            elif entry.name != keep:
                _unlink(fd, entry.name, left)
    return folders


def _unlink(fd: int, name: str, left: list[str]) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except OSError as e:
        left.append(f"{name}: {e.strerror}")


def _remove_abandoned(temp: str) -> str | None:
    """Remove the private folders in ``temp`` whose run is gone (its lease is free); what could not be removed."""
    left = []
    try:
        names = os.listdir(temp)
    except OSError as e:
        return f"{temp}: {e.strerror}"
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        lease = _own_lease(temp, name)
        if lease is None:
            continue  # another user's, or one just being made
        try:
            fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # its run goes on
        else:
            left += [problem] if (problem := _remove(os.path.join(temp, name))) else []
        finally:
            os.close(lease)
    return "; ".join(left) or None


def _own_lease(temp: str, name: str) -> int | None:
    """The lease of the private folder ``name`` in ``temp`` if this user made both (a folder of mode 0700 it owns,
    a regular file in it), opened without waiting; None for anything else. Another user's folder is never
    touched: its lease could hold a file lease that makes an open wait 45 s, or a name made to be printed."""
    try:
        folder = os.open(os.path.join(temp, name), _FOLDER | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        mine = os.fstat(folder)
        if mine.st_uid != os.geteuid() or stat.S_IMODE(mine.st_mode) != 0o700:
            return None
        lease = os.open(_LEASE, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    found = os.fstat(lease)
    if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid():
        return lease
    os.close(lease)
    return None


def empty_folders(environ: Mapping[str, str]) -> list[str]:
    """The host's runtime folders, shown empty in the sandbox: where its services keep their sockets."""
    folders = ["/run"]
    if os.path.isdir("/var/run") and os.path.realpath("/var/run") != "/run":
        folders.append("/var/run")
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        folders.append(os.path.realpath(runtime))
    return folders


def command_env(environ: Mapping[str, str], passthrough: Sequence[str] = (), *, confined: bool) -> dict[str, str]:
    """The environment of a shell command: ``environ`` without secrets and host sockets (but with what
    ``passthrough`` names); confined, its temp folder is the sandbox's own /tmp."""
    keep = set(passthrough)
    env = {k: v for k, v in environ.items() if k in keep or not (secret_name(k) or k in SOCKET_ENV)}
    if confined:
        env["TMPDIR"] = "/tmp"
    return env


@functools.cache
def hide_own_secrets() -> None:
    """Keep this process's secrets (``command_env``'s rule) from the commands it runs unconfined, which can read
    other processes where they have no PID namespace of their own (see ``_sandbox_run``); Linux only. Zero's
    own process calls it before its first run starts (once: later calls do nothing).

    - The block of memory that ``/proc/PID/environ`` shows, the environment the process started with, has
      its secrets zeroed; ``os.environ`` keeps them, and the C library's copy (``putenv``), which children
      inherit, moves to its heap. That block is readable even by root without CAP_SYS_PTRACE, as in a
      default container, and by any process of the same user.
    - The process becomes non-dumpable: reading its memory (``/proc/PID/mem``) or tracing it then needs
      CAP_SYS_PTRACE (no core dump of Zero either; a debugger or py-spy attached to it needs root)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start and env_end: fields 50 and 51 of proc(5)
    offset = 0
    for entry in ctypes.string_at(start, end - start).split(b"\0"):
        name = os.fsdecode(entry.partition(b"=")[0])
        if secret_name(name) and name in os.environ:
            os.environ[name] = os.environ[name]  # putenv: the copy children inherit is now on the heap
            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1


def command_line(
    command: str,
    *,
    confined: bool,
    writable: list[str],
    status_fd: int,
    hold_fd: int,
    private: str = "",
    protected: Sequence[str] = (),
) -> list[str]:
    """The argv that runs ``bash -c command``: inside the sandbox when ``confined``, with ``private`` (a
    ``PrivateTemp``'s folder) as its temp folders and ``protected`` folders never writable."""
    init = [sys.executable, "-I", "-S", INIT, "--status-fd", str(status_fd), "--hold-fd", str(hold_fd)]
    bash = ["--", "bash", "-c", command]
    if not confined:
        return [*init, *bash]
    paths = [arg for path in writable for arg in ("--write", path)]
    paths += [arg for path in protected for arg in ("--protect", path)]
    paths += [arg for path in empty_folders(os.environ) for arg in ("--empty", path)]
    return [*init, "--confine", "--private", private, *paths, *bash]
