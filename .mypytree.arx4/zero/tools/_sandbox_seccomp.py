"""The seccomp filter of a confined shell command, and the supervisor that answers it (see ``_sandbox_init``).

Hiding the host's sockets (a private /tmp, empty /run, no socket-bearing variables) is the root
measure; this one refuses connecting to a unix socket that is still visible outside the workspace.
A classic BPF filter, installed in the command's process before it runs (with no_new_privs):

- refuses ``io_uring_setup`` (its calls would bypass the filter), x32 calls and foreign
  architectures (ENOSYS; a foreign audit architecture kills the process);
- hands ``connect``, ``sendto`` with a destination (the pointer is a register: checking it here is
  race-free), ``sendmsg`` and ``sendmmsg`` to a user-notification listener; everything else runs.

The supervisor, in the sandbox's first process, answers each call in a thread of its own (a
blocking connect holds up nothing else) and never lets the kernel go on with a call it judged from
the command's memory or descriptors, which another thread may change after the check: it
*emulates* every call. It takes the socket with ``pidfd_getfd``, reads the destination (and the
data) once, and makes the call itself on that socket, answering with its result:

- a unix socket path is opened with O_PATH (relative to the command's working directory); it must
  be a socket whose real path is beneath the workspace roots or the private temp folders, and not
  beneath Zero's data or config folder, else EACCES; the call then goes to ``/proc/self/fd/N`` of
  that descriptor, so the socket checked is the one reached (and paths longer than 108 bytes work);
- abstract and unnamed unix addresses, IPv4, IPv6 and netlink go as they are (the network namespace
  has neither network nor other processes' abstract sockets); other families (vsock reaches the
  host) get EACCES;
- ``sendmsg``'s descriptors (SCM_RIGHTS) are taken from the command and passed on; credentials
  (SCM_CREDENTIALS) are refused with EPERM, as the supervisor's own would be checked;
- a peer sees the supervisor as the connecting process (SO_PEERCRED: pid 1 of the sandbox, same uid).

Standard library only (it runs in the sandbox's ``python -I -S``).
"""

from __future__ import annotations

import _thread
import ctypes
import errno
import os
import signal
import stat
import sys
from collections.abc import Callable

__all__ = ["Supervisor", "install", "libc", "program", "take_fd"]

libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
for _name in ("process_vm_readv", "process_vm_writev"):
    getattr(libc, _name).argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    getattr(libc, _name).restype = ctypes.c_ssize_t
libc.sendmsg.restype = libc.sendto.restype = ctypes.c_ssize_t

# machine: audit architecture, seccomp's syscall number, the calls routed to the supervisor, the x32 bit
_ARCHES = {
    "x86_64": (0xC000003E, 317, {"connect": 42, "sendto": 44, "sendmsg": 46, "sendmmsg": 307}, 0x40000000),
    "aarch64": (0xC00000B7, 277, {"connect": 203, "sendto": 206, "sendmsg": 211, "sendmmsg": 269}, 0),
}
_IO_URING = (425, 426, 427)  # setup, enter, register: the same numbers everywhere
# add_key, request_key, keyctl: the session keyring a login gives is the host's (Kerberos tickets, secrets)
_KEYRING = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}
_SYS_PIDFD_GETFD = 438
_LD, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_NOTIFY, _RET_KILL, _RET_ERRNO = 0x7FFF0000, 0x7FC00000, 0x80000000, 0x00050000
_NEW_LISTENER, _WAIT_KILLABLE_RECV = 1 << 3, 1 << 5
_RECV, _SEND, _ID_VALID = 0xC0502100, 0xC0182101, 0x40082102
_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_SOL_SOCKET, _SO_TYPE, _SO_DOMAIN, _SCM_RIGHTS, _SCM_CREDENTIALS = 1, 3, 39, 1, 2
_SOCK_STREAM, _MSG_NOSIGNAL = 1, 0x4000
_MAX_DATA, _MAX_CONTROL, _MAX_IOV, _MAX_ADDR = 1 << 22, 1 << 16, 1024, 128


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


class _Data(ctypes.Structure):
    _fields_ = [("nr", ctypes.c_int), ("arch", ctypes.c_uint32), ("ip", ctypes.c_uint64), ("args", ctypes.c_uint64 * 6)]


class _Notification(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("pid", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("data", _Data)]


class _Response(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("val", ctypes.c_int64), ("error", ctypes.c_int32), ("flags", ctypes.c_uint32)]


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.c_void_p),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", _MsgHdr), ("len", ctypes.c_uint32)]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine``, as (code, jump if true, jump if false, k) instructions."""
    arch, _, calls, x32 = _ARCHES[machine]
    returns = {
        "allow": _RET_ALLOW,
        "notify": _RET_NOTIFY,
        "enosys": _RET_ERRNO | errno.ENOSYS,
        "eperm": _RET_ERRNO | errno.EPERM,
        "kill": _RET_KILL,
    }
    destination = 16 + 8 * 4  # sendto's fifth argument: its low half, then its high half
    body: list[tuple[int, str, str, int]] = [(_LD, "", "", 4), (_JEQ, "", "kill", arch), (_LD, "", "", 0)]
    if x32:
        body.append((_JGE, "enosys", "", x32))
    body += [(_JEQ, "enosys", "", nr) for nr in _IO_URING]
    body += [(_JEQ, "eperm", "", nr) for nr in _KEYRING[machine]]
    body += [(_JEQ, "notify", "", calls[name]) for name in ("connect", "sendmsg", "sendmmsg")]
    body += [(_JEQ, "", "allow", calls["sendto"]), (_LD, "", "", destination), (_JEQ, "", "notify", 0)]
    body += [(_LD, "", "", destination + 4), (_JEQ, "allow", "notify", 0)]
    at = {name: len(body) + i for i, name in enumerate(returns)}
    code = [
        (op, at[jt] - pc - 1 if jt else 0, at[jf] - pc - 1 if jf else 0, k) for pc, (op, jt, jf, k) in enumerate(body)
    ]
    return code + [(_RET, 0, 0, value) for value in returns.values()]


def install() -> int:
    """Put the filter on this process (no_new_privs set): the listener's descriptor, or -1 where the
    architecture or the kernel has no way to do it."""
    machine = os.uname().machine
    if machine not in _ARCHES or sys.byteorder != "little":
        return -1
    code = program(machine)
    prog = _Program(len(code), (_Filter * len(code))(*(_Filter(*c) for c in code)))
    for flags in (_NEW_LISTENER | _WAIT_KILLABLE_RECV, _NEW_LISTENER):
        fd = int(libc.syscall(_ARCHES[machine][1], 1, flags, ctypes.byref(prog)))
        if fd >= 0:
            return fd
        if ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS):
            raise _error("seccomp")
    return -1


def take_fd(pidfd: int, fd: int) -> int:
    """A copy of descriptor ``fd`` of the process ``pidfd`` (close-on-exec)."""
    copy = int(libc.syscall(_SYS_PIDFD_GETFD, pidfd, ctypes.c_int(fd), 0))
    if copy < 0:
        raise _error("pidfd_getfd")
    return copy


def _error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def _read(pid: int, address: int | None, size: int) -> bytes:
    """``size`` bytes of process ``pid``'s memory at ``address``, read once."""
    if size == 0:
        return b""
    buf = ctypes.create_string_buffer(size)
    local, remote = _IoVec(ctypes.addressof(buf), size), _IoVec(address, size)
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) != size:
        raise OSError(errno.EFAULT, "bad address")
    return buf.raw


def _write(pid: int, address: int, data: bytes) -> None:
    buf = ctypes.create_string_buffer(data, len(data))
    local, remote = _IoVec(ctypes.addressof(buf), len(data)), _IoVec(address, len(data))
    if libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) != len(data):
        raise OSError(errno.EFAULT, "bad address")


def _sockopt(fd: int, option: int) -> int:
    value, size = ctypes.c_int(), ctypes.c_uint32(4)
    if libc.getsockopt(fd, _SOL_SOCKET, option, ctypes.byref(value), ctypes.byref(size)) < 0:
        raise _error("getsockopt")
    return value.value


def _beneath(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


class Supervisor:
    """Answers the filter's calls for a sandbox whose command may reach unix sockets beneath ``allowed``
    (its workspace roots and private folders) but not beneath ``protected``."""

    def __init__(self, roots: list[str], private: list[str], protected: list[str]):
        self.allowed = roots + private
        self.protected = protected
        calls = _ARCHES.get(os.uname().machine, (0, 0, {}, 0))[2]
        handlers = {
            "connect": self._connect,
            "sendto": self._sendto,
            "sendmsg": self._sendmsg,
            "sendmmsg": self._sendmmsg,
        }
        self.handlers: dict[int, Callable[[int, int, int, list[int], list[int]], int]] = {
            nr: handlers[name] for name, nr in calls.items()
        }

    def serve(self, listener: int) -> None:
        _thread.start_new_thread(self._receive, (listener,))

    def _receive(self, listener: int) -> None:
        while True:
            notification = _Notification()
            if libc.ioctl(listener, _RECV, ctypes.byref(notification)) < 0:
                if ctypes.get_errno() in (errno.EINTR, errno.ENOENT):  # ENOENT: the caller went meanwhile
                    continue
                return
            try:
                _thread.start_new_thread(self._answer, (listener, notification))
            except RuntimeError:  # no thread to be had: that call fails, the next may not
                response = _Response(notification.id, 0, -errno.EAGAIN, 0)
                libc.ioctl(listener, _SEND, ctypes.byref(response))

    def _answer(self, listener: int, notification: _Notification) -> None:
        response = _Response(notification.id, 0, 0, 0)
        opened: list[int] = []
        try:
            pidfd = _pidfd(notification.pid)
            opened.append(pidfd)
            if libc.ioctl(listener, _ID_VALID, ctypes.byref(ctypes.c_uint64(notification.id))) < 0:
                return  # that pid is not the caller any more
            args = list(notification.data.args)
            sock = take_fd(pidfd, args[0] & 0xFFFFFFFF)
            opened.append(sock)
            response.val = self.handlers[notification.data.nr](notification.pid, pidfd, sock, args, opened)
        except OSError as e:
            response.error = -(e.errno or errno.EPERM)
        except Exception:  # a bug here must refuse the call, never let it through
            response.error = -errno.EPERM
        finally:
            for fd in opened:
                os.close(fd)
        libc.ioctl(listener, _SEND, ctypes.byref(response))  # ENOENT: the caller went meanwhile

    def _destination(self, pid: int, sock: int, address: bytes, opened: list[int]) -> bytes:
        """The address to use for ``address`` (a path: its checked socket's ``/proc/self/fd/N``)."""
        family = _sockopt(sock, _SO_DOMAIN)
        if family not in (_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK):
            raise OSError(errno.EACCES, "this socket family reaches outside the sandbox")
        if family != _AF_UNIX or len(address) <= 2 or address[:2] != b"\x01\x00" or address[2] == 0:
            return address  # abstract, unnamed, or not a unix socket: the network namespace isolates it
        path = address[2:].split(b"\0", 1)[0]
        cwd = os.open(f"/proc/{pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC, dir_fd=cwd)
        finally:
            os.close(cwd)
        opened.append(target)
        if not stat.S_ISSOCK(os.fstat(target).st_mode):
            raise OSError(errno.ECONNREFUSED, "not a socket")
        real = os.readlink(f"/proc/self/fd/{target}")
        if not _beneath(real, self.allowed) or _beneath(real, self.protected):
            raise OSError(errno.EACCES, "a socket outside the sandbox")
        return b"\x01\x00" + f"/proc/self/fd/{target}".encode() + b"\0"

    def _address(self, pid: int, sock: int, pointer: int, size: int, opened: list[int]) -> bytes:
        if size > _MAX_ADDR:
            raise OSError(errno.EINVAL, "address too long")
        return self._destination(pid, sock, _read(pid, pointer, size), opened) if pointer and size else b""

    def _connect(self, pid: int, pidfd: int, sock: int, args: list[int], opened: list[int]) -> int:
        address = self._address(pid, sock, args[1], args[2] & 0xFFFFFFFF, opened)
        if libc.connect(sock, address, len(address)) < 0:
            raise _error("connect")
        return 0

    def _sendto(self, pid: int, pidfd: int, sock: int, args: list[int], opened: list[int]) -> int:
        address = self._address(pid, sock, args[4], args[5] & 0xFFFFFFFF, opened)
        if args[2] > _MAX_DATA and _sockopt(sock, _SO_TYPE) != _SOCK_STREAM:
            raise OSError(errno.EMSGSIZE, "message too long")
        data = _read(pid, args[1], min(args[2], _MAX_DATA))
        flags = args[3] & 0xFFFFFFFF
        sent = libc.sendto(sock, data, len(data), flags | _MSG_NOSIGNAL, address or None, len(address))
        return self._sent(pid, sent, flags, "sendto")

    def _sendmsg(self, pid: int, pidfd: int, sock: int, args: list[int], opened: list[int]) -> int:
        flags = args[2] & 0xFFFFFFFF
        return self._sent(pid, self._message(pid, pidfd, sock, args[1], flags, opened), flags, "sendmsg")

    def _sendmmsg(self, pid: int, pidfd: int, sock: int, args: list[int], opened: list[int]) -> int:
        flags, size = args[3] & 0xFFFFFFFF, ctypes.sizeof(_MMsgHdr)
        for i in range(min(args[2] & 0xFFFFFFFF, _MAX_IOV)):
            entry = args[1] + i * size
            try:
                sent = self._sent(pid, self._message(pid, pidfd, sock, entry, flags, opened), flags, "sendmmsg")
            except OSError:
                if i == 0:
                    raise
                return i
            _write(pid, entry + _MMsgHdr.len.offset, sent.to_bytes(4, "little"))
        return min(args[2] & 0xFFFFFFFF, _MAX_IOV)

    def _message(self, pid: int, pidfd: int, sock: int, pointer: int, flags: int, opened: list[int]) -> int:
        """``sendmsg`` of the message at ``pointer`` in the caller's memory, read once."""
        header = _MsgHdr.from_buffer_copy(_read(pid, pointer, ctypes.sizeof(_MsgHdr)))
        address = self._address(pid, sock, header.name or 0, header.namelen, opened)
        if header.iovlen > _MAX_IOV:
            raise OSError(errno.EMSGSIZE, "too many buffers")
        vectors = (_IoVec * header.iovlen).from_buffer_copy(_read(pid, header.iov, 16 * header.iovlen))
        total = sum(v.len for v in vectors)
        if total > _MAX_DATA and _sockopt(sock, _SO_TYPE) != _SOCK_STREAM:
            raise OSError(errno.EMSGSIZE, "message too long")
        parts, room = [], _MAX_DATA
        for v in vectors:
            parts.append(_read(pid, v.base, min(v.len, room)))
            room -= len(parts[-1])
        data = b"".join(parts)
        if header.controllen > _MAX_CONTROL:
            raise OSError(errno.ENOBUFS, "control data too long")
        control = self._control(pidfd, sock, _read(pid, header.control, header.controllen), opened)
        buffers = [ctypes.create_string_buffer(b, len(b)) for b in (address, data, control)]
        iov = _IoVec(ctypes.addressof(buffers[1]), len(data))
        local = _MsgHdr(
            ctypes.addressof(buffers[0]) if address else None,
            len(address),
            ctypes.addressof(iov),
            1,
            ctypes.addressof(buffers[2]) if control else None,
            len(control),
            0,
        )
        return int(libc.sendmsg(sock, ctypes.byref(local), flags | _MSG_NOSIGNAL))

    def _control(self, pidfd: int, sock: int, control: bytes, opened: list[int]) -> bytes:
        """The control messages with the caller's descriptors replaced by our copies of them."""
        if not control or _sockopt(sock, _SO_DOMAIN) != _AF_UNIX:
            return control
        out, at = bytearray(control), 0
        while at + 16 <= len(control):
            length = int.from_bytes(control[at : at + 8], "little")
            level, kind = (int.from_bytes(control[at + o : at + o + 4], "little") for o in (8, 12))
            if length < 16 or at + length > len(control):
                raise OSError(errno.EINVAL, "bad control message")
            if level == _SOL_SOCKET and kind == _SCM_CREDENTIALS:
                raise OSError(errno.EPERM, "credentials are not passed from the sandbox")
            if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
                for o in range(at + 16, at + length - 3, 4):
                    copy = take_fd(pidfd, int.from_bytes(control[o : o + 4], "little", signed=True))
                    opened.append(copy)
                    out[o : o + 4] = copy.to_bytes(4, "little")
            at += (length + 7) & ~7
        return bytes(out)

    def _sent(self, pid: int, sent: int, flags: int, what: str) -> int:
        """The result of a send made for ``pid``: a broken pipe signals the caller, as its own send would have."""
        if sent < 0:
            error = _error(what)
            if error.errno == errno.EPIPE and not flags & _MSG_NOSIGNAL:
                os.kill(pid, signal.SIGPIPE)
            raise error
        return sent


def _pidfd(pid: int) -> int:
    """A pidfd of the process that thread ``pid`` belongs to."""
    try:
        return os.pidfd_open(pid)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOENT):  # a thread that does not lead its process (or gone)
            raise
    with open(f"/proc/{pid}/status") as f:
        tgid = next(int(line.split()[1]) for line in f if line.startswith("Tgid:"))
    return os.pidfd_open(tgid)
