"""What confines a shell command (see ``_sandbox_run``): its view of the system, its capabilities, Landlock.

- ``private_view``, in the new mount namespace: its own /proc; ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are the
  run's private folders (subfolders of a host folder Zero made for the run); ``/run``, ``/var/run`` and
  ``$XDG_RUNTIME_DIR`` are empty; ``/dev`` is minimal, as bubblewrap's ``--dev``: null, zero, full, random,
  urandom, tty (as root, nodes of its own: ``own_devices``), a new devpts (ptmx), the private shm and the
  fd/stdin/stdout/stderr links. Every mount is read-only (Landlock does not cover chmod, chown, utimes or
  xattrs, and the command's root owns root's files) but copies of the workspace roots and the private folders,
  taken before, and the ``/dev/null`` node (a read-only mount refuses writing a device too); the private folders
  are opened without following a link and refused unless Zero made them. A workspace root beneath a covered
  folder is bound back at its own path; a protected folder (Zero's data and config folders) that is still
  visible is bound read-only, and every folder or link a lookup of its path passes in a workspace root is
  *pinned*, bound onto itself: a mount point cannot be renamed, removed or replaced (EBUSY), so the path goes on
  leading to the folder made read-only (else moving its parent away would move the read-only folder with it, and
  a new one could be made in its place).
- ``drop_privileges``, in the command's process: the command is root in its user namespace by uid
  only, with no capability and none to regain (securebits locked, bounding and ambient sets empty,
  no_new_privs), so it cannot unmount what covers the host's folders.
- ``confine``: Landlock lets it write only beneath the workspace roots, the private folders and the
  nodes of the minimal /dev, refuses TCP, and keeps abstract unix sockets and signals inside.

Standard library only (it runs in the sandbox's ``python -I -S``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

__all__ = ["confine", "drop_privileges", "own_devices", "private_view", "writable_inside"]

libc = ctypes.CDLL(None, use_errno=True)

_WRITE_RIGHTS = {
    1: 0b1_1111_1111_0010,  # write_file, remove_dir/file, make_char/dir/reg/sock/fifo/block/sym
    2: 0b11_1111_1111_0010,  # + refer
    3: 0b111_1111_1111_0010,  # + truncate
}
_FILE_RIGHTS = 0b100_0000_0000_0010  # of those, what a rule on a file (not a folder) may hold: write_file, truncate
_ACCESS_NET_BIND_TCP, _ACCESS_NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2
_RULE_PATH_BENEATH = 1
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_SET_NO_NEW_PRIVS = 24, 28, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# noroot, no_setuid_fixup, keep_caps off and no_cap_ambient_raise, each locked
_SECUREBITS = 0b1110_1111
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_OPEN_TREE_CLONE, _AT_EMPTY_PATH, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 1, 0x1000, 0x8000, 1
_MOUNT_ATTR_NODEV = 4
_MOVE_MOUNT_F_EMPTY_PATH, _MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40

PRIVATE = {"/tmp": "tmp", "/var/tmp": "var-tmp", "/dev/shm": "shm"}  # inside -> subfolder of --private
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}
_CLONE_NEWNS, _MNT_DETACH = 0x00020000, 2
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _MountAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("set", "clear", "propagation", "userns_fd")]


def _fail(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


def confine(writable: list[str]) -> None:
    """Landlock: from now on this process and its children may write only beneath ``writable`` (or, for a
    file, to it), may not open or accept TCP connections (ABI 4 and later), and may not reach abstract unix
    sockets or signal processes outside the sandbox (ABI 6 and later)."""
    abi = libc.syscall(_SYS_CREATE, None, 0, 1)
    if abi < 1:
        raise OSError(ctypes.get_errno(), "Landlock is not available")
    rights = _WRITE_RIGHTS[min(abi, 3)]
    net = (_ACCESS_NET_BIND_TCP | _ACCESS_NET_CONNECT_TCP) if abi >= 4 else 0
    attr = _RulesetAttr(rights, net, (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    for path in writable:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        folder = stat.S_ISDIR(os.fstat(fd).st_mode)
        rule = _PathBeneath(rights if folder else rights & _FILE_RIGHTS, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
            raise _fail(f"landlock_add_rule {path}")
        os.close(fd)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 or libc.syscall(_SYS_RESTRICT, ruleset, 0) < 0:
        raise _fail("landlock_restrict_self")
    os.close(ruleset)


def drop_privileges() -> None:
    """No capability left, none to regain: the command is root in its user namespace only by uid."""
    if libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0) < 0:
        raise _fail("PR_SET_SECUREBITS")
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            raise _fail(f"PR_CAPBSET_DROP {cap}")
    if libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0:
        raise _fail("PR_CAP_AMBIENT_CLEAR_ALL")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.capset(header, (ctypes.c_uint32 * 6)()) < 0:
        raise _fail("capset")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
        raise _fail("PR_SET_NO_NEW_PRIVS")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def b(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    if libc.mount(b(source), b(target), b(fstype), ctypes.c_ulong(flags), b(data)) < 0:
        raise _fail(f"mount {target}")


def _clone(source: int) -> int:
    """A detached copy of the tree at ``source`` (a descriptor opened before anything was covered), each mount
    in it as it is now (read-only or not)."""
    tree = libc.syscall(_SYS_OPEN_TREE, source, b"", _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_EMPTY_PATH | _AT_RECURSIVE)
    if tree < 0:
        raise _fail("open_tree")
    return int(tree)


def _read_only(tree: int) -> None:
    """Make every mount of ``tree`` (a descriptor of a mount) read-only."""
    _set(tree, _MOUNT_ATTR_RDONLY)


def _no_devices(tree: int) -> int:
    """Make every mount of ``tree`` ignore device nodes (one left in the workspace by a command run outside the
    sandbox, or by the host, opens nothing); ``tree``."""
    _set(tree, _MOUNT_ATTR_NODEV)
    return tree


def _set(tree: int, flag: int) -> None:
    attr = _MountAttr(flag, 0, 0, 0)
    if libc.syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH | _AT_RECURSIVE, ctypes.byref(attr), 32) < 0:
        raise _fail("mount_setattr")


def _attach(tree: int, target: int, *, read_only: bool = False) -> None:
    """Mount the detached ``tree`` (``_clone``; closed here) onto ``target`` (the descriptor of its mount point),
    read-only if asked."""
    try:
        if read_only:
            _read_only(tree)
        onto = _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH
        if libc.syscall(_SYS_MOVE_MOUNT, tree, b"", target, b"", onto) < 0:
            raise _fail("move_mount")
    finally:
        os.close(tree)


def _bind(source: int, target: int, *, read_only: bool = False) -> None:
    """Bind the tree at ``source`` onto ``target``, read-only if asked."""
    _attach(_clone(source), target, read_only=read_only)


def _open(path: str, flags: int = 0) -> int | None:
    try:
        return os.open(path, os.O_PATH | os.O_CLOEXEC | flags)
    except OSError:
        return None


def _open_real(path: str) -> int | None:
    """The folder at the real path ``path``, each step opened without following a link (None: not there, or a
    link in the way)."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in filter(None, path.split("/")):
            step = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = step
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise NotADirectoryError(path)
    except OSError:
        os.close(fd)
        return None
    return fd


def _same(a: int, b: int) -> bool:
    here, there = os.fstat(a), os.fstat(b)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _mount_point(path: str) -> int:
    """The folder ``path``, made where it is missing, each step without following a link (a command may have
    left links in the private folders, where a covered workspace root gets its mount point)."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in path.strip("/").split("/"):
        try:
            step = _made(
                part, fd, 0o755, os.O_PATH, f"{path}: not a folder in the run's temp folders (a command left a link?)"
            )
        finally:
            os.close(fd)
        fd = step
    return fd


def _lookup(path: str, roots: list[str]) -> tuple[list[tuple[str, int]], str | None]:
    """Follow ``path`` as a lookup does, link by link: the entries it passes that lie in a folder beneath a
    workspace root (a command could rename or replace those), each with a descriptor of what it is now, and
    the real path it leads to (None: not to a folder)."""
    entries: list[tuple[str, int]] = []
    here, todo, links = "/", path.split("/")[::-1], 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            here = os.path.dirname(here)
            continue
        entry = os.path.join(here, name)
        fd = _open(entry, os.O_NOFOLLOW)
        if fd is None:
            return entries, None
        mode = os.fstat(fd).st_mode
        target = os.readlink("", dir_fd=fd) if stat.S_ISLNK(mode) else None
        if any(here == root or here.startswith(f"{root}/") for root in roots):
            entries.append((entry, fd))
        else:
            os.close(fd)
        if target is not None and links < 40:
            links += 1
            todo += target.split("/")[::-1]
            here = "/" if target.startswith("/") else here
        elif stat.S_ISDIR(mode):
            here = entry
        else:
            return entries, None
    return entries, here


def _pin(entries: list[tuple[str, int]]) -> list[int]:
    """Bind each entry onto itself, parents first (each is looked up again, through the pins above it)."""
    opened = []
    for entry, fd in sorted(dict(entries).items(), key=lambda item: len(item[0])):
        seen = _open(entry, os.O_NOFOLLOW)
        if seen is None or not _same(seen, fd):
            raise OSError(errno.EBUSY, f"{entry}: changed while the sandbox started")
        _bind(seen, seen)
        opened.append(seen)
    return opened + [fd for _, fd in entries]


def _private_folders(private: str) -> dict[str, int]:
    """The run's private folders (``PRIVATE``: made where missing, mode 1777), each opened without following a
    link; refused where one is not what Zero made (a link, a mount, another user's): the folder lies outside
    every workspace root, yet an earlier Zero may have put it in one, where a command could change it."""
    top = os.open(private, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mine = os.fstat(top)
        if mine.st_uid != os.getuid() or mine.st_mode & 0o077:
            raise OSError(errno.EPERM, f"{private}: not the run's temp folder Zero made (owner or mode changed)")
        found = {}
        for inside, name in PRIVATE.items():
            fd = _made(name, top, 0o700, os.O_RDONLY, f"{private}/{name}: not a folder Zero made (a link?)")
            sub = os.fstat(fd)
            if sub.st_uid != os.getuid() or sub.st_dev != mine.st_dev:
                os.close(fd)
                raise OSError(errno.EPERM, f"{private}/{name}: not a folder Zero made (another owner or file system)")
            os.chmod(fd, 0o1777)
            found[inside] = fd
        return found
    finally:
        os.close(top)


def own_devices(private: str) -> str:
    """As root, where the kernel lets it, the nodes of the minimal /dev made anew on a tmpfs in a mount
    namespace of their own, before the command's user namespace (where no node can be made): the /dev/null a
    command may write is then not the host's, whose mode, owner and times the command's root could change.
    The folder the nodes are in: ``dev`` in the run's private folder ``private``, or the host's /dev (a
    command of another user cannot change the host's nodes)."""
    if os.getuid() != 0 or libc.unshare(_CLONE_NEWNS) < 0:
        return "/dev"
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    top = os.open(private, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        folder = _made("dev", top, 0o700, os.O_PATH, f"{private}/dev: not a folder Zero made (a link?)")
    finally:
        os.close(top)
    try:
        _mount("tmpfs", f"/proc/self/fd/{folder}", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=0700")
    finally:
        os.close(folder)
    nodes = f"{private}/dev"
    try:
        for name, (major, minor) in DEVICES.items():
            os.mknod(f"{nodes}/{name}", stat.S_IFCHR | 0o666, os.makedev(major, minor))
            os.chmod(f"{nodes}/{name}", 0o666)
    except PermissionError:  # no CAP_MKNOD (a container may drop it): the host's nodes, then
        if libc.umount2(nodes.encode(), _MNT_DETACH) < 0:
            raise _fail(f"umount {nodes}") from None
        return "/dev"
    return nodes


def private_view(private: str, roots: list[str], protected: list[str], empty: list[str], node_folder: str) -> list[str]:
    """Cover the host's temp folders, runtime folders and /dev (see the module docstring), make every mount
    read-only but the workspace roots and the private folders, then pin the way to each protected folder and
    make those still visible read-only. The real paths of the protected folders."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    ways = [_lookup(path, roots) for path in protected]
    entries = [entry for way, _ in ways for entry in way]
    # a protected file (a repository's .git/config) is the last entry of its way, a regular file
    files = [way[-1] for way, real in ways if real is None and way and stat.S_ISREG(os.fstat(way[-1][1]).st_mode)]
    protected = list(dict.fromkeys(real for _, real in ways if real is not None))
    # A root as it was checked (by its real path): each step opened without following a link, which a run whose
    # workspace holds this one's may have swapped in since
    kept = {path: fd for path in roots if (fd := _open_real(path)) is not None}
    kept |= {path: fd for path in protected if path not in kept and (fd := _open(path, os.O_DIRECTORY)) is not None}
    temp = _private_folders(private)
    devices = {name: fd for name in DEVICES if (fd := _open(f"{node_folder}/{name}", os.O_NOFOLLOW)) is not None}
    opened = [*kept.values(), *temp.values(), *devices.values()]
    # Copies, taken while they are as the host has them, of what stays writable: the rest is made read-only
    # (Landlock does not cover chmod, chown, utimes and xattrs, and the command's root owns root's files)
    writable = {path: _no_devices(_clone(kept[path])) for path in sorted(roots, key=len) if path in kept}
    temps = {inside: _no_devices(_clone(fd)) for inside, fd in temp.items()}
    nodes = {name: _clone(fd) for name, fd in devices.items()}
    everything = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    _read_only(everything)
    os.close(everything)
    for inside in ("/tmp", "/var/tmp"):
        opened.append(os.open(inside, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        _attach(temps[inside], opened[-1])
    covered: list[str] = []
    for path in sorted(empty):  # parents first: $XDG_RUNTIME_DIR may lie in /run
        if not os.path.isdir(path) and not any(path.startswith(f"{c}/") for c in covered):
            continue
        os.makedirs(path, exist_ok=True)  # in a tmpfs just made
        _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
        covered.append(path)
    _mount("tmpfs", "/dev", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
    for name, tree in nodes.items():
        os.close(os.open(f"/dev/{name}", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o666))
        opened.append(os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC))
        # not to be chmodded (the host's, where ``node_folder`` is /dev); a device is still written through a
        # read-only mount (these are sinks: null, zero, full, urandom)
        _attach(tree, opened[-1], read_only=name != "null")
    os.mkdir("/dev/pts")
    _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    os.symlink("pts/ptmx", "/dev/ptmx")
    os.mkdir("/dev/shm")
    opened.append(os.open("/dev/shm", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
    _attach(temps["/dev/shm"], opened[-1])
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"/dev/{name}")
    # A root beneath a protected folder (a member's worktree in $ZERO_HOME/worktrees) is attached after that
    # folder is made read-only: attached before, the folder's read-only copy would cover it.
    beneath = [path for path in writable if any(path.startswith(f"{folder}/") for folder in protected)]
    for path, tree in writable.items():  # parents first
        if path not in beneath:
            opened += _attach_writable(path, tree, kept[path])
    opened += _pin(entries)
    for entry, fd in files:  # read-only where it is (pinned: it cannot be renamed, removed or replaced)
        seen = _open(entry, os.O_NOFOLLOW)
        if seen is not None and _same(seen, fd):
            _bind(seen, seen, read_only=True)
        opened += [seen] if seen is not None else []
    for path in protected:
        seen = _open(path, os.O_DIRECTORY)
        if path in kept and seen is not None and _same(seen, kept[path]):
            _bind(kept[path], seen, read_only=True)
        opened += [seen] if seen is not None else []
    for path in beneath:
        opened += _attach_writable(path, writable[path], kept[path])
    for fd in opened:
        os.close(fd)
    try:
        os.chdir(os.getcwd())  # the workspace in this view: from the host's, '..' would lead to the host's /tmp
    except OSError:
        os.chdir("/")
    return protected


def _attach_writable(path: str, tree: int, kept: int) -> list[int]:
    """Attach the writable copy ``tree`` of the workspace root ``path`` (``kept``: the root as the host has
    it) at its own path, or at a mount point made for it where a covered folder hides it; the descriptors
    opened, to close."""
    opened = []
    seen = _open(path, os.O_DIRECTORY)
    if seen is None or not _same(seen, kept):
        opened += [seen] if seen is not None else []
        seen = _mount_point(path)  # in the private folder that covers it
    opened.append(seen)
    _attach(tree, seen)
    return opened


def writable_inside(roots: list[str]) -> list[str]:
    """What a confined command may write, once its view is built: the workspace roots, the private folders,
    the new devpts and the device nodes."""
    return [*roots, *PRIVATE, "/dev/pts", *(f"/dev/{name}" for name in DEVICES)]


def _made(name: str, dir_fd: int, mode: int, how: int, why: str) -> int:
    """The folder ``name`` in ``dir_fd``, made (``mode``) where it is missing, opened (``how``) without
    following a link: else ``why``."""
    try:
        os.mkdir(name, mode, dir_fd=dir_fd)
    except FileExistsError:
        pass
    try:
        return os.open(name, how | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        raise OSError(e.errno, why) from e
