"""What a sandboxed command run as root cannot reach: the host's unix sockets (tmux, an agent...), devices, temp
folders, Zero's own folders, secrets in the environment, and capabilities to undo any of it; and jobs it starts
are gone when the run ends or Zero is killed, confined or not; and unconfined, it finds no provider key in any
process (as root, and as root in a default container)."""

from __future__ import annotations

import base64
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from support.cli import ZERO, lines, scripted, write_script, zero
from support.mounts import mounted
from support.package import ROOT, pyproject
from support.sandbox import bash, in_a_container, needs_root, needs_sandbox, running

from zero.agent.providers import PROVIDER_INFO
from zero.errors import ToolError
from zero.tools import ShellSettings, ToolContext, Workspace, _sandbox
from zero.tools.builtin import Bash

pytestmark = needs_sandbox

CLIENT = r"""
import socket, sys
for kind, target in (arg.split("=", 1) for arg in sys.argv[1:]):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if kind == "connect" else socket.SOCK_DGRAM)
    try:
        if kind == "connect":
            s.connect(target)
        elif kind == "sendto":
            s.sendto(b"forged", target)
        else:
            s.sendmsg([b"forged"], [], 0, target)
        print(kind, target, "REACHED")
    except OSError as e:
        print(kind, target, e.strerror)
"""


@pytest.fixture
def servers(host_tmp: Path, outside: Path) -> Iterator[dict[str, socket.socket]]:
    """Unix sockets listening outside the workspace: in the host's /tmp, and in a folder the sandbox shows."""
    made = {}
    for name, kind in (("hidden.sock", socket.SOCK_STREAM), ("visible.sock", socket.SOCK_STREAM)):
        made[name] = socket.socket(socket.AF_UNIX, kind)
    made["visible.dgram"] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    for name, server in made.items():
        server.bind(str((host_tmp if name.startswith("hidden") else outside) / name))
        server.setblocking(False)
        if server.type == socket.SOCK_STREAM:
            server.listen(4096)
    yield made
    for server in made.values():
        server.close()


def reached(server: socket.socket) -> bool:
    """Did anyone connect to ``server``, or send it a datagram?"""
    try:
        if server.type == socket.SOCK_STREAM:
            server.accept()[0].close()
        else:
            server.recv(100)
    except BlockingIOError:
        return False
    return True


def test_a_sandboxed_command_reaches_no_unix_socket_outside(
    workspace: Path, host_tmp: Path, outside: Path, servers: dict[str, socket.socket]
) -> None:
    (workspace / "client.py").write_text(CLIENT)
    (workspace / "link.sock").symlink_to(outside / "visible.sock")  # in the workspace, the socket is not
    hidden, visible, dgram = host_tmp / "hidden.sock", outside / "visible.sock", outside / "visible.dgram"
    [out] = bash(
        workspace,
        f"python3 client.py connect={hidden} connect={visible} connect=link.sock sendto={dgram} sendmsg={dgram}",
    )
    assert out.splitlines()[:5] == [
        f"connect {hidden} No such file or directory",  # the host's /tmp is not the sandbox's
        f"connect {visible} Permission denied",  # seen, but not beneath the workspace or the private folders
        "connect link.sock Permission denied",
        f"sendto {dgram} Permission denied",
        f"sendmsg {dgram} Permission denied",
    ]
    assert not any(reached(server) for server in servers.values())
    [unconfined] = bash(workspace, f"python3 client.py connect={visible}", mode="unsafe")
    assert unconfined.startswith(f"connect {visible} REACHED")  # the test can tell


RACE = r"""
import ctypes, json, socket, sys, threading
inside, outside = (b"\x01\x00" + p.encode() + b"\0" for p in sys.argv[1:3])
address = ctypes.create_string_buffer(max(len(inside), len(outside)))
libc = ctypes.CDLL(None, use_errno=True)
done = False
def flip():
    while not done:
        for a in (inside, outside):
            ctypes.memmove(address, a, len(a))
threading.Thread(target=flip, daemon=True).start()
results = {}
for _ in range(int(sys.argv[3])):
    s = socket.socket(socket.AF_UNIX)
    error = ctypes.get_errno() if libc.connect(s.fileno(), address, len(address)) else 0
    results[error] = results.get(error, 0) + 1
    s.close()
done = True
print(json.dumps(results))
"""


def test_a_thread_rewriting_the_address_meanwhile_never_reaches_a_socket_outside(
    workspace: Path, outside: Path, servers: dict[str, socket.socket]
) -> None:
    inside = socket.socket(socket.AF_UNIX)
    inside.bind(str(workspace / "inside.sock"))
    inside.listen(4096)
    (workspace / "race.py").write_text(RACE)
    try:
        [out] = bash(workspace, f"python3 race.py {workspace / 'inside.sock'} {outside / 'visible.sock'} 1500")
    finally:
        inside.close()
    results = json.loads(out.splitlines()[0])
    # connected inside, refused, or a path torn mid-write that leads nowhere (or is no path: EINVAL)
    assert results.get("0", 0) > 0 and results.get("13", 0) > 0 and set(results) <= {"0", "13", "2", "20", "22"}
    assert not reached(servers["visible.sock"])


def test_tmux_outside_cannot_be_driven_from_the_sandbox(
    workspace: Path, host_tmp: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not shutil.which("tmux"):
        pytest.skip("no tmux here")
    sockets = [host_tmp / "tmux.sock", outside / "tmux.sock"]  # the default place (hidden) and one in view
    for path in sockets:
        subprocess.run(["tmux", "-S", str(path), "new-session", "-d", "sleep 600"], check=True)
    try:
        monkeypatch.setenv("TMUX", f"{sockets[0]},1,0")  # as in a shell inside that tmux
        marker = outside / "ran-outside"
        [out] = bash(
            workspace,
            f"echo TMUX=$TMUX; tmux run-shell 'touch {marker}'; "
            f"tmux -S {sockets[0]} run-shell 'touch {marker}'; tmux -S {sockets[1]} run-shell 'touch {marker}'",
        )
    finally:
        for path in sockets:
            subprocess.run(["tmux", "-S", str(path), "kill-server"], check=False)
    assert out.startswith("TMUX=\n")
    assert f"error connecting to {sockets[0]} (No such file or directory)" in out
    assert f"error connecting to {sockets[1]} (Permission denied)" in out
    assert not marker.exists()


AROUND = r"""
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
ring = libc.syscall(425, 1, ctypes.create_string_buffer(120))  # io_uring_setup: its calls skip seccomp
print("io_uring", ring if ring >= 0 else ctypes.get_errno())
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).connect((2, 9999))  # the host, from a VM
except OSError as e:
    print("vsock", e.errno)
"""


def test_calls_that_would_go_around_the_filter_or_the_namespace_are_refused(workspace: Path) -> None:
    (workspace / "around.py").write_text(AROUND)
    [unconfined] = bash(workspace, "python3 around.py", mode="unsafe")
    if unconfined.startswith("io_uring 38"):  # ENOSYS
        pytest.skip("no io_uring here")
    [out] = bash(workspace, "python3 around.py")
    assert out.startswith("io_uring 38\n")
    if "vsock 97" not in unconfined:  # EAFNOSUPPORT: no vsock here
        assert "vsock 13\n" in out and "vsock 13" not in unconfined  # EACCES, which it is not outside


OWN = r"""
import os, socket
for path in ("/tmp/s", "/var/tmp/s", "/dev/shm/s", "s"):  # its /tmp, and the workspace
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    client.sendall(path.encode())
    print(server.accept()[0].recv(100).decode(), end=" ")
    os.unlink(path)
server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
server.bind("/tmp/d")
client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
client.sendto(b"sendto", "/tmp/d")
client.sendmsg([b"sendmsg"], [], 0, "/tmp/d")
client.connect("/tmp/d")
client.send(b"send")
print(*(server.recv(100).decode() for _ in range(3)), end=" ")
import ctypes
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_char_p), ("len", ctypes.c_size_t)]
class MsgHdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(IoVec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", MsgHdr), ("len", ctypes.c_uint32)]
parts = [IoVec(b"mm1", 3), IoVec(b"mmsg2", 5)]
messages = (MMsgHdr * 2)(*(MMsgHdr(MsgHdr(None, 0, ctypes.pointer(part), 1, None, 0, 0)) for part in parts))
server.settimeout(5)
sent = ctypes.CDLL(None).sendmmsg(client.fileno(), messages, 2, 0)
print("sendmmsg", sent, *(m.len for m in messages), *(server.recv(100).decode() for _ in range(2)), end=" ")
a, b = socket.socketpair()
r, w = os.pipe()
os.write(w, b"SCM_RIGHTS")
socket.send_fds(a, [b"fd"], [r])
_, fds, _, _ = socket.recv_fds(b, 10, 1)
print(os.read(fds[0], 20).decode(), end=" ")
server = socket.socket(socket.AF_UNIX)
server.bind("\0abstract")
server.listen()
socket.socket(socket.AF_UNIX).connect("\0abstract")
print("abstract")
"""


def test_a_command_still_talks_to_the_sockets_it_made(workspace: Path) -> None:
    (workspace / "own.py").write_text(OWN)
    [out] = bash(workspace, "python3 own.py")
    assert out.splitlines()[0] == (
        "/tmp/s /var/tmp/s /dev/shm/s s sendto sendmsg send sendmmsg 2 3 5 mm1 mmsg2 SCM_RIGHTS abstract"
    )


STUCK = r"""
import os, socket, threading, time
full = socket.socket(socket.AF_UNIX)
full.bind("/tmp/full")
full.listen(0)
r, w = os.pipe()
def stuck():
    socket.socket(socket.AF_UNIX).connect("/tmp/full")  # takes the backlog's one place
    os.write(w, b"%d" % threading.get_native_id())
    socket.socket(socket.AF_UNIX).connect("/tmp/full")  # waits for an accept that never comes
threading.Thread(target=stuck, daemon=True).start()
tid = int(os.read(r, 20))
while not open(f"/proc/self/task/{tid}/syscall").read().startswith("42 "):  # it is in connect()
    time.sleep(0.01)
time.sleep(0.2)  # and its call reached the supervisor
other = socket.socket(socket.AF_UNIX)
other.bind("/tmp/other")
other.listen()
socket.socket(socket.AF_UNIX).connect("/tmp/other")
print("not held up")
"""


def test_a_connect_that_blocks_holds_up_no_other(workspace: Path) -> None:
    (workspace / "stuck.py").write_text(STUCK)
    [out] = bash(workspace, "python3 stuck.py", timeout_seconds=10)
    assert out.startswith("not held up\n")


def test_the_hosts_runtime_folders_are_empty(workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = outside / "run-user"  # as /run/user/UID, where a desktop's sockets are
    runtime.mkdir()
    (runtime / "bus").touch()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    [out] = bash(workspace, 'for d in /run /var/run "$XDG_RUNTIME_DIR"; do echo "$d $(ls -A $d | wc -l)"; done')
    assert out.startswith(f"/run 0\n/var/run 0\n{runtime} 0\n")
    assert os.listdir("/run")  # the host's is not


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    """A loop device over a small file (never a real disk)."""
    image = tmp_path / "disk.img"
    image.write_bytes(bytes(1 << 20))
    made = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"no loop device here: {made.stderr.strip()}")
    yield made.stdout.strip()
    subprocess.run(["losetup", "-d", made.stdout.strip()], check=True)


def test_the_sandbox_has_a_minimal_dev_and_no_device_of_the_host(
    workspace: Path, tmp_path: Path, loop_device: str
) -> None:
    [out] = bash(
        workspace,
        f"ls -A /dev | tr '\\n' ' '; echo; ls {loop_device}; echo forged > {loop_device} || echo WRITE-FAILED; "
        "echo ok > /dev/null && head -c 4 /dev/zero | wc -c && "
        "python3 -c 'import os, pty; print(os.ttyname(pty.openpty()[1]))'",
    )
    assert out.splitlines()[0] == "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "
    assert f"ls: cannot access '{loop_device}': No such file or directory" in out and "WRITE-FAILED" in out
    assert "\n4\n/dev/pts/0\n" in out  # what programs need of /dev works
    assert (tmp_path / "disk.img").read_bytes() == bytes(1 << 20)


def test_temp_folders_are_the_runs_own_and_gone_with_it(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tmp_path / "host-temp"  # where the run's private folder is made
    host.mkdir()
    monkeypatch.setattr(_sandbox, "TEMP_PARENTS", (str(host),))
    name = f"zero-test-{os.getpid()}-{tmp_path.name}"
    files = [f"/tmp/{name}", f"/var/tmp/{name}", f"/dev/shm/{name}"]
    first, second = bash(workspace, f"echo kept | tee {' '.join(files)} >/dev/null; echo $TMPDIR", f"cat {files[0]}")
    assert first.startswith("/tmp\n") and second.startswith("kept\n")  # the run's commands share them
    assert not any(os.path.exists(f) for f in files)  # the host's are not those
    assert list(host.iterdir()) == []  # and they went with the run
    [later] = bash(workspace, f"cat {files[0]}")
    assert f"cat: /tmp/{name}: No such file or directory" in later


def test_another_runs_temp_folder_is_out_of_sight_wherever_tmpdir_is(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = Path(tempfile.mkdtemp(prefix="zero-tmpdir-", dir=Path.home()))  # not in /tmp, /var/tmp, /dev/shm
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    other = _sandbox.PrivateTemp()  # a live run of the same user, its /tmp holding a file
    try:
        (Path(other.path) / "tmp").mkdir()
        (Path(other.path) / "tmp" / "notes").write_text("the other run's notes\n")
        [out] = bash(workspace, f"cat {other.path}/tmp/notes; ls -A {os.path.dirname(other.path)}")
        assert "the other run's notes" not in out and "No such file or directory" in out
        assert not Path(other.path).is_relative_to(elsewhere)  # made where the sandbox covers the host's folder
        assert list(elsewhere.iterdir()) == []
    finally:
        other.remove()
        shutil.rmtree(elsewhere)


def test_a_tmpdir_in_another_runs_workspace_holds_no_private_folder(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TMPDIR in /tmp, in a folder another run works in: that run's commands could read the private folder made
    there, or swap the folder for a link between its making and its use. It is made in /tmp itself."""
    theirs = tmp_path / "theirs"
    (theirs / "x").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(theirs / "x"))
    mine = _sandbox.PrivateTemp([str(workspace)])
    try:
        (Path(mine.path) / "tmp").mkdir()
        (Path(mine.path) / "tmp" / "notes").write_text("this run's notes\n")
        assert os.path.dirname(mine.path) in [os.path.realpath(folder) for folder in _sandbox.COVERED_TEMP]
        [out] = bash(theirs, "ls -AR x; cat x/*/tmp/notes")  # a command of the other run
        assert "zero-run" not in out and "this run's notes" not in out
    finally:
        mine.remove()


@pytest.mark.parametrize("where", ["/", "/tmp", "/var", "/var/tmp", "/dev", "/dev/shm", "/run", "/proc", "link"])
def test_a_workspace_that_holds_a_folder_the_sandbox_covers_runs_no_command(tmp_path: Path, where: str) -> None:
    """A workspace is shown as it is: one that is (or holds) the host's /tmp, /dev, /run... would show them as
    the host has them, every run's private folder, the devices and the services' sockets with them."""
    workspace = Path(where)
    if where == "link":
        workspace = tmp_path / "link"
        workspace.symlink_to("/tmp")
    with pytest.raises(ToolError, match="no command runs sandboxed in it"):
        bash(workspace, f"touch {tmp_path}/ran; ls /dev")
    assert not (tmp_path / "ran").exists()


def _shown(workspace: Path, tmp_path: Path, what: str) -> list[list[str]]:
    """The mounts that put ``what`` at ``workspace/mounted`` (the host's /tmp, a part of it...)."""
    point = workspace / "mounted"
    point.mkdir()
    beside = tmp_path / "beside"  # a folder of the host's /tmp beside the workspace: another run's, a socket's
    for folder in ("upper", "lower", "x11"):
        (beside / folder).mkdir(parents=True)
    (workspace / "l1").mkdir()
    (workspace / "l2").mkdir()
    if what == "a file of /dev/shm":  # (a socket's file, as of /run/docker.sock)
        point.rmdir()
        point.touch()
        shm = Path("/dev/shm") / f"zero-test-{tmp_path.name}"
        shm.write_text("the host's\n")
    overlay = ["-t", "overlay", "overlay", "-o"]
    return {
        "/tmp": [["--bind", "/tmp", str(point)]],
        "/run": [["--bind", "/run", str(point)]],
        "a procfs": [["-t", "proc", "proc", str(point)]],
        "a folder of /tmp": [["--bind", str(beside), str(point)]],
        "a file of /dev/shm": [["--bind", f"/dev/shm/zero-test-{tmp_path.name}", str(point)]],
        "a tmpfs mounted in /tmp": [
            ["-t", "tmpfs", "x11", str(beside / "x11")],
            ["--bind", str(beside / "x11"), str(point)],
        ],
        # (the paths an overlay's layers are named by are those of its mounting: a link, a mount since gone)
        "an overlay on /tmp": [[*overlay, f"lowerdir={beside}/upper:{beside}/lower", str(point)]],
        "an overlay of its own folders": [[*overlay, f"lowerdir={workspace}/l1:{workspace}/l2", str(point)]],
    }[what]


SHOWN = ["/tmp", "/run", "a procfs", "a folder of /tmp", "a file of /dev/shm", "a tmpfs mounted in /tmp",
         "an overlay on /tmp", "an overlay of its own folders"]  # fmt: skip


@needs_root
@pytest.mark.parametrize("what", SHOWN)
def test_a_workspace_that_shows_a_covered_folder_through_a_mount_runs_no_command(
    workspace: Path, tmp_path: Path, what: str
) -> None:
    """A mount in the workspace (the host's doing: a container's volumes) of /tmp, /run, a procfs, a part of one
    (a folder of /tmp, one socket's file, a tmpfs of /tmp/.X11-unix), an overlay of folders in /tmp: the sandbox
    would show it as the host has it, every run's private folder, every process, the services' sockets."""
    try:
        with mounted(*_shown(workspace, tmp_path, what)):
            with pytest.raises(ToolError, match="the .* at .*mounted.* no command runs sandboxed in it"):
                bash(workspace, f"touch {tmp_path}/ran")
        assert not (tmp_path / "ran").exists()
    finally:
        Path("/dev/shm", f"zero-test-{tmp_path.name}").unlink(missing_ok=True)


@needs_root
@pytest.mark.parametrize(("where", "of"), [("outside", "/tmp"), ("outside", "/run"), ("in /tmp", "/run")])
def test_a_workspace_that_is_a_view_of_a_covered_folder_runs_no_command(
    tmp_path: Path, outside: Path, where: str, of: str
) -> None:
    """A workspace that is a bind of a folder in /tmp (another run's private folder) or /run (a service's socket
    folder), whether it lies outside them or in /tmp itself, shows that folder as the host has it."""
    theirs = Path(of) / f"zero-test-{tmp_path.name}"
    ws = (outside if where == "outside" else tmp_path) / "ws"
    for folder in (theirs / "tmp", ws):
        folder.mkdir(parents=True)
    try:
        with mounted(["--bind", str(theirs), str(ws)]):
            with pytest.raises(ToolError, match=f"the workspace {ws} shows {of} .* no command runs sandboxed"):
                bash(ws, f"touch {tmp_path}/ran")
    finally:
        shutil.rmtree(theirs)
    assert not (tmp_path / "ran").exists()


@needs_root
@pytest.mark.parametrize("how", ["bound from the workspace", "stacked", "hidden beneath its mount"])
def test_a_workspace_that_shows_a_runtime_folders_file_system_runs_no_command(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The runtime folder (covered, as /tmp and /run are) is a bind of a folder of a workspace in /tmp; or the
    workspace is a bind of the file system a later one was stacked on at the runtime folder; or a bind of the
    folder beneath it, whose runtime folder a mount hides: each shows a covered folder's files as the host
    has them (sockets bound there before stay reachable)."""
    runtime, ws = outside / "run", outside / "ws"
    for folder in (runtime, ws, workspace / "sockets"):
        folder.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    mounts = {
        "bound from the workspace": [["--bind", str(workspace / "sockets"), str(runtime)]],
        "stacked": [["-t", "tmpfs", "lower", str(runtime)], ["--bind", str(runtime), str(ws)],
                    ["-t", "tmpfs", "upper", str(runtime)]],
        "hidden beneath its mount": [["-t", "tmpfs", "over", str(runtime)], ["--bind", str(outside), str(ws)]],
    }[how]  # fmt: skip
    root = workspace if how == "bound from the workspace" else ws
    with mounted(*mounts), pytest.raises(ToolError, match=f"the workspace {root} shows .* no command runs sandboxed"):
        bash(root, f"touch {outside}/ran")
    assert not (outside / "ran").exists()


@needs_root
def test_a_mount_point_whose_name_holds_blanks_is_read_whole(tmp_path: Path) -> None:
    """Blanks the kernel does not escape in its mount table (a no-break space, a vertical tab) are part of a name:
    a procfs at "p - tmpfs" (no-break spaces) is a procfs, a mount in "my project" is in it, and a workspace
    that is a tmpfs at "a b" lies in a mount."""
    ws = tmp_path / "my\u00a0pro\x0bject"
    (ws / "p\u00a0-\u00a0tmpfs").mkdir(parents=True)
    (tmp_path / "a\u00a0b").mkdir()
    with mounted(
        ["-t", "proc", "proc", str(ws / "p\u00a0-\u00a0tmpfs")], ["-t", "tmpfs", "t", str(tmp_path / "a\u00a0b")]
    ):
        with pytest.raises(ToolError, match="shows the host's proc .* no command runs sandboxed in it"):
            bash(ws, f"touch {tmp_path}/ran")
        assert bash(tmp_path / "a\u00a0b", "true") == ["[exit code 0]"]
    assert not (tmp_path / "ran").exists()


@needs_root
def test_a_workspace_hidden_beneath_a_later_mount_is_read_as_it_is_reached(tmp_path: Path) -> None:
    """A clean tmpfs at w/tmp, then the host's / bound at w (it hides the tmpfs): a workspace w/tmp is the host's
    /tmp, though the mount on the longest point that holds it is the clean one."""
    if os.stat("/tmp").st_dev != os.stat("/").st_dev:
        pytest.skip("the host's /tmp is a file system of its own: a bind of / does not show it")
    w = tmp_path / "w"
    (w / "tmp").mkdir(parents=True)
    with mounted(["-t", "tmpfs", "clean", str(w / "tmp")], ["--bind", "/", str(w)]):
        with pytest.raises(ToolError, match=f"the workspace {w}/tmp shows /tmp .* no command runs sandboxed in it"):
            bash(w / "tmp", f"touch {tmp_path}/ran")
    assert not (tmp_path / "ran").exists()


@needs_root
def test_mounts_that_show_only_the_workspace_and_file_systems_of_its_own_run_commands(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No refusal where nothing covered is in view: a tmpfs in the workspace, a bind of a folder of its own, the
    workspace bound on itself; a workspace that is (or lies in) a tmpfs mounted in /tmp; a bind of /tmp that a
    tmpfs mounted on the workspace since hides; a runtime folder that is not there."""
    for folder in ("disk", "again", "hidden"):
        (workspace / folder).mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(workspace / "run"))
    with mounted(["--bind", "/tmp", str(workspace / "hidden")], ["-t", "tmpfs", "zero-test", str(workspace)]):
        [out] = bash(workspace, "ls -A")
        assert out.endswith("[exit code 0]") and "hidden" not in out, out  # (the tmpfs is all it shows)
    with mounted(
        ["--bind", str(workspace), str(workspace)],
        ["-t", "tmpfs", "zero-test", str(workspace / "disk")],
        ["--bind", str(workspace / "src"), str(workspace / "again")],
    ):
        [out] = bash(workspace, "ls again; touch disk/made && echo MADE")
        assert out.split() == ["app.py", "MADE", "[exit", "code", "0]"], out
    (tmp_path / "disk").mkdir()
    with mounted(["-t", "tmpfs", "zero-test", str(tmp_path / "disk")]):
        (tmp_path / "disk" / "ws").mkdir()
        assert bash(tmp_path / "disk" / "ws", "true") == ["[exit code 0]"]  # (a folder of a tmpfs in /tmp)


@needs_root
def test_a_device_node_in_the_workspace_opens_nothing(workspace: Path) -> None:
    """A device node left in the workspace (by a command run outside the sandbox, or by the host): the sandbox
    cannot make one, but one there would open the device (a disk, /dev/kvm). Here the host's /dev/zero."""
    os.mknod(workspace / "zero-node", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    [out] = bash(workspace, "head -c 4 zero-node | od -An -tx1; head -c 4 /dev/zero | od -An -tx1")
    assert "'zero-node' for reading: Permission denied" in out
    assert out.count("00 00 00 00") == 1, out  # (the sandbox's own /dev/zero works)


def test_a_workspace_root_swapped_for_a_link_after_its_check_is_not_made_writable(outside: Path) -> None:
    """A run whose workspace holds this one's swaps this root for a link between the bash tool's check of it (by
    its real path) and the sandbox's making: the sandbox opens each root without following a link, so where the
    link leads is not made writable."""
    target = outside / "target"  # (outside the temp folders: a folder the sandbox shows read-only)
    target.mkdir()
    root = outside / "root"
    root.symlink_to(target)  # (the swap, done)
    private = _sandbox.PrivateTemp([str(root)])
    status_r, status_w = os.pipe()
    hold_r, hold_w = os.pipe()
    argv = _sandbox.command_line(
        f"touch {root}/planted", confined=True, writable=[str(root)], status_fd=status_w, hold_fd=hold_r,
        private=private.path,
    )  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, pass_fds=(status_w, hold_r))
    finally:
        for fd in (status_r, status_w, hold_r, hold_w):
            os.close(fd)
        private.remove()
    assert "Read-only file system" in done.stdout + done.stderr
    assert list(target.iterdir()) == []


DEEP = r"""
import os, sys
outside = sys.argv[1]
os.chdir("/tmp")
os.symlink(outside, "folder-outside")
os.symlink(f"{outside}/kept.txt", "file-outside")
for depth in range(1200):  # deeper than Python recurses
    os.mkdir("d")
    os.chdir("d")
os.symlink(outside, "deep-link")
os.mkdir("locked")
os.chmod("locked", 0)
os.chmod(".", 0o500)
print("deep", depth + 1)
"""


@pytest.fixture
def host_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The host's temp folder, where a run makes its private one: a tmpfs (deep trees are quick to make there)."""
    host = tmp_path / "host-temp"
    host.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "zero-test", str(host)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    monkeypatch.setattr(_sandbox, "TEMP_PARENTS", (str(host),))
    yield host
    subprocess.run(["umount", "--recursive", "--lazy", str(host)], check=True)


def test_a_tree_thousands_deep_in_the_runs_temp_folder_goes_with_the_run(
    workspace: Path, outside: Path, host_temp: Path
) -> None:
    (outside / "kept.txt").write_text("kept")
    (workspace / "deep.py").write_text(DEEP)
    first, second = bash(workspace, f"python3 deep.py {outside}", "echo next")
    assert first.startswith("deep 1200\n") and second.startswith("next\n")
    assert list(host_temp.iterdir()) == []  # all of it went, links and all...
    assert (outside / "kept.txt").read_text() == "kept"  # ...and nothing they led to


def deep_tree(top: Path, depth: int) -> None:
    """A folder ``depth`` levels deep in ``top`` (made one level at a time: its path is longer than PATH_MAX)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)


def test_what_a_killed_run_left_in_the_temp_folder_never_stops_the_next(
    workspace: Path, tmp_path: Path, outside: Path, host_temp: Path
) -> None:
    deep, mounted = host_temp / "zero-run-deep", host_temp / "zero-run-mounted"  # two runs' folders, leases free
    for folder in (deep, mounted / "shm"):
        folder.mkdir(parents=True)
    for folder in (deep, mounted):
        folder.chmod(0o700)  # as a run makes them
        (folder / "lease").touch()
    deep_tree(deep, 5000)
    (outside / "kept.txt").write_text("kept")
    (deep / "folder-outside").symlink_to(outside)
    (deep / "file-outside").symlink_to(outside / "kept.txt")
    subprocess.run(["mount", "-t", "tmpfs", "zero-test", str(mounted / "shm")], check=True)
    (mounted / "shm" / "other-fs.txt").write_text("kept")
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
match = { turn = 1 }
tool_calls = [
  { name = "bash", arguments = { command = "echo ran" } },
  { name = "bash", arguments = { command = "echo again" } },
]
[[turns]]
match = { turn = 2 }
text = "Done."
""",
    )
    done = zero("exec", "go", *scripted(script, workspace), "--output-format", "stream-json")
    events = lines(done.stdout)
    assert done.returncode == 0, done.stderr
    outputs = [e["output"] for e in events if e["type"] == "tool_result"]
    assert outputs == ["ran\n\n[exit code 0]", "again\n\n[exit code 0]"]
    assert [(e["code"], e["message"]) for e in events if e["type"] == "warning"] == [
        (
            "temp_cleanup",
            f"could not remove what an earlier run left in the temp folder: {mounted}: shm: another file system "
            "is mounted there (and 1 more)",
        )
    ]
    assert sorted(host_temp.iterdir()) == [mounted]  # the deep one went, the one it could not remove stays...
    assert (mounted / "shm" / "other-fs.txt").read_text() == "kept"  # ...whole, with the other file system
    assert (outside / "kept.txt").read_text() == "kept" and list(outside.iterdir()) == [outside / "kept.txt"]
    assert (mounted / "lease").exists()  # ...and its lease, so that a later run's start tries again
    subprocess.run(["umount", str(mounted / "shm")], check=True)
    _sandbox.PrivateTemp().remove()
    assert list(host_temp.iterdir()) == []


def test_zero_home_and_the_config_folder_are_never_writable(workspace: Path, tmp_path: Path) -> None:
    forge = (
        "for log in {home}/sessions/*/events.jsonl; do echo '{{\\\"forged\\\": 1}}' >> $log; done; "
        "mkdir -p {config} && echo 'permission_mode = \\\"unsafe\\\"' > {config}/config.toml"
    )
    script = tmp_path / "s.toml"
    run = ["exec", "go", *scripted(script, workspace), "--output-format", "stream-json"]
    inside = {"ZERO_HOME": str(workspace / ".zero-home"), "XDG_CONFIG_HOME": str(workspace / ".config")}
    for env in ({}, inside):  # under /tmp (the tests' own), and in the workspace
        home = Path(env.get("ZERO_HOME", tmp_path / "zero-home"))
        config = Path(env.get("XDG_CONFIG_HOME", tmp_path / "config")) / "zero"
        write_script(
            script,
            f"""
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "{forge.format(home=home, config=config)}" }} }}]
[[turns]]
match = {{ turn = 2 }}
text = "Done."
""",
        )
        done = zero(*run, env=env)
        [result] = [e["output"] for e in lines(done.stdout) if e["type"] == "tool_result"]
        assert done.returncode == 0 and "Done." in done.stdout, done.stderr
        [log] = home.glob("sessions/*/events.jsonl")
        assert '{"forged": 1}' not in log.read_text().splitlines()
        assert not (config / "config.toml").exists()
        if env:
            assert result.count("Read-only file system") == 2, result


MOVE = r"""
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(what, call):
    try:
        call()
        print(what, "DONE")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) < 0:  # RENAME_EXCHANGE
        raise OSError(ctypes.get_errno(), a)
def plant(folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.toml"), "w") as f:
        f.write('permission_mode = "unsafe"\n')
targets, folders = sys.argv[1].split(","), sys.argv[2].split(",")
for path in targets:  # the protected folders and every folder (or link) between them and the workspace root
    other = path + ".other"  # one of its kind beside it
    os.symlink(".", other) if os.path.islink(path) else os.mkdir(other)
    attempt(f"rename {path}", lambda: os.rename(path, path + ".moved"))
    attempt(f"remove {path}", lambda: os.unlink(path) if os.path.islink(path) else os.rmdir(path))
    attempt(f"exchange {path}", lambda: exchange(path, other))
    attempt(f"replace {path}", lambda: os.rename(other, path))
    os.unlink(other) if os.path.islink(other) else os.rmdir(other)
for folder in folders:
    attempt(f"plant {folder}", lambda: plant(folder))
"""

LAYOUTS = {  # ZERO_HOME and XDG_CONFIG_HOME (beneath the workspace), and what lies between them and its root
    "1 level": ({"ZERO_HOME": "zero-home", "XDG_CONFIG_HOME": "."}, ["zero-home", "zero"]),
    "2 levels": ({"ZERO_HOME": "h1/zero-home", "XDG_CONFIG_HOME": "c1"}, ["h1/zero-home", "h1", "c1/zero", "c1"]),
    "3 levels": (
        {"ZERO_HOME": "h1/h2/zero-home", "XDG_CONFIG_HOME": "c1/c2"},
        ["h1/h2/zero-home", "h1/h2", "h1", "c1/c2/zero", "c1/c2", "c1"],
    ),
    "through a link": (
        {"ZERO_HOME": "link/zero-home", "XDG_CONFIG_HOME": "link"},
        ["link", "real/zero-home", "real/zero", "real"],
    ),
    "the workspace is HOME": (  # ZERO_HOME and XDG_CONFIG_HOME elsewhere: the default folders are Zero's too
        {"HOME": "."},
        [".config/zero", ".config", ".local/share/zero", ".local/share", ".local"],
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_zero_home_and_the_config_folder_cannot_be_moved_from_beneath_the_workspace(
    workspace: Path, tmp_path: Path, layout: str
) -> None:
    names, targets = LAYOUTS[layout]
    env = {name: str(workspace / value) for name, value in names.items()}
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to("real")
    (workspace / "move.py").write_text(MOVE)
    folders = [t for t in targets if t.endswith("zero-home") or t.endswith("zero")]  # the protected ones
    command = f"python3 move.py {','.join(targets)} {','.join(folders)}"
    script = write_script(
        tmp_path / "s.toml",
        f"""
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "{command}" }} }}]
[[turns]]
match = {{ turn = 2 }}
text = "Done."
""",
    )
    done = zero("exec", "go", *scripted(script, workspace), "--output-format", "stream-json", env=env)
    assert done.returncode == 0 and lines(done.stdout)[-1]["status"] == "success", done.stderr
    [result] = [e["output"] for e in lines(done.stdout) if e["type"] == "tool_result"]
    expected = [f"{what} {path} EBUSY" for path in targets for what in ("rename", "remove", "exchange", "replace")]
    assert result.splitlines()[: len(expected) + len(folders)] == expected + [f"plant {f} EROFS" for f in folders]
    assert not list(workspace.rglob("*.moved")) and not list(workspace.rglob("config.toml"))
    [log] = Path(env.get("ZERO_HOME", tmp_path / "zero-home")).glob("sessions/*/events.jsonl")
    events = [json.loads(line)["type"] for line in log.read_text().splitlines()]  # the run's log, whole
    assert events.count("tool_result") == 1 and events[-1] == "run_end", events


SECRETS = {
    "OPENAI_API_KEY": "fake-openai-key-0123456789",
    "ANTHROPIC_API_KEY": "fake-anthropic-key-0123456789",
    "GITHUB_TOKEN": "fake-github-token-0123456789",
    "DB_PASSWORD": "fake-password-0123456789",
    "TMUX": "/tmp/tmux-0/default,1,0",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
    "DISPLAY": ":0",
}


def encoded(value: str) -> str:
    return base64.b64encode(f"{value}\n".encode()).decode()


@pytest.mark.parametrize("mode", ["auto", "unsafe"])
def test_commands_get_no_secret_and_no_socket_from_the_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    [out] = bash(workspace, "env; echo $OPENAI_API_KEY | base64; echo $GITHUB_TOKEN | base64", mode=mode)
    assert not any(f"{name}=" in out for name in SECRETS)
    assert encoded("") in out and encoded(SECRETS["OPENAI_API_KEY"]) not in out
    assert "HOME=" in out and "PATH=" in out  # the rest of it is there
    passing = ShellSettings(env_passthrough=("GITHUB_TOKEN",))
    [through] = bash(workspace, "echo $GITHUB_TOKEN | base64", mode=mode, shell=passing)
    assert through.startswith(encoded(SECRETS["GITHUB_TOKEN"]))


def test_every_provider_key_is_kept_from_commands() -> None:
    keys = {info.key_env: "x" for info in PROVIDER_INFO.values() if info.key_env}
    assert keys and _sandbox.command_env(keys, confined=False) == {}


def test_env_passthrough_is_the_users_to_set_not_a_projects(workspace: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
match = { turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "echo $GITHUB_TOKEN | base64" } }]
[[turns]]
match = { turn = 2 }
text = "Done."
""",
    )
    run = ["exec", "go", *scripted(script, workspace), "--output-format", "stream-json"]
    env = {"GITHUB_TOKEN": SECRETS["GITHUB_TOKEN"]}
    (workspace / ".zero").mkdir()
    project = workspace / ".zero" / "config.toml"
    project.write_text('[shell]\nenv_passthrough = ["GITHUB_TOKEN"]\n')
    done = zero(*run, env=env)
    assert done.stderr == (
        f"zero: warning: {project}: 'shell.env_passthrough' ignored: a project may not hand your secrets to its "
        f"commands; set it in {tmp_path / 'config' / 'zero' / 'config.toml'}\n"
    )
    [result] = [e["output"] for e in lines(done.stdout) if e["type"] == "tool_result"]
    assert result.startswith(encoded(""))
    (tmp_path / "config" / "zero").mkdir(parents=True)
    (tmp_path / "config" / "zero" / "config.toml").write_text('[shell]\nenv_passthrough = ["GITHUB_TOKEN"]\n')
    project.unlink()
    done = zero(*run, env=env)
    [result] = [e["output"] for e in lines(done.stdout) if e["type"] == "tool_result"]
    assert result.startswith(encoded(SECRETS["GITHUB_TOKEN"]))


def test_a_sandboxed_command_has_no_capability_and_cannot_uncover_the_host(workspace: Path, host_tmp: Path) -> None:
    marker = host_tmp / "host-only"  # in the host's /tmp
    marker.write_text("host")
    relative = os.path.relpath(marker, workspace)
    try:
        [out] = bash(
            workspace,
            "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; "
            "umount /tmp && echo UNCOVERED; umount -l /tmp && echo UNCOVERED; umount /dev && echo UNCOVERED; "
            "mount -t tmpfs none /tmp && echo MOUNTED; unshare -Um umount /tmp && echo UNCOVERED; "
            "readlink /proc/1/fd/3 && echo PEEKED; cat /proc/1/environ >/dev/null && echo PEEKED; "  # its init
            f"cat {marker} {relative}",
        )
    finally:
        marker.unlink()
    assert [line.split()[1] for line in out.splitlines()[:5]] == ["0000000000000000"] * 5
    assert not any(word in out for word in ("UNCOVERED", "MOUNTED", "PEEKED"))
    assert f"cat: {marker}: No such file or directory\ncat: {relative}: No such file or directory" in out


XATTR = """
import os, sys
try:
    os.setxattr(sys.argv[1], "user.planted", b"sandbox")
except OSError as e:
    print("setxattr:", e.strerror)
"""


def metadata(path: Path) -> tuple[int, int, int, int, list[str]]:
    """Mode, owner, time and xattrs (of a device, its mode and owner: other programs use it meanwhile)."""
    seen = path.stat()
    if path.parent == Path("/dev"):
        return seen.st_mode, seen.st_uid, seen.st_gid, 0, []
    return seen.st_mode, seen.st_uid, seen.st_gid, seen.st_mtime_ns, os.listxattr(path)


def test_a_command_changes_no_mode_owner_time_or_xattr_outside_the_workspace(workspace: Path, outside: Path) -> None:
    victim, program = outside / "victim", outside / "true"  # root's files, as the command's root owns them
    victim.write_text("x")
    victim.chmod(0o644)
    shutil.copy("/bin/true", program)
    (workspace / "xattr.py").write_text(XATTR)
    files = (victim, program, Path("/dev/full"), Path("/dev/zero"), Path("/dev/null"))
    before = [metadata(f) for f in files]
    [out] = bash(
        workspace,
        f"chmod 777 {victim}; chmod 4755 {program}; touch -d 2001-01-01 {victim}; chown 1:1 {victim}; "
        f"python3 -S xattr.py {victim}; chmod 600 /dev/full /dev/zero; "
        "chmod 600 /dev/null && touch -d 2001-01-01 /dev/null && chown 1 /dev/null; "  # its own /dev/null
        "echo ok > /dev/null && head -c 3 /dev/zero | wc -c; "
        "echo f > mine && chmod 700 mine && touch -d 2001-01-01 mine && python3 -S xattr.py mine && echo WORKSPACE-OK; "
        "echo t > /tmp/t && chmod 700 /tmp/t && echo TMP-OK",
    )
    assert [metadata(f) for f in files] == before
    assert out == (
        f"chmod: changing permissions of '{victim}': Read-only file system\n"
        f"chmod: changing permissions of '{program}': Read-only file system\n"
        f"touch: cannot touch '{victim}': Read-only file system\n"
        f"chown: changing ownership of '{victim}': Read-only file system\n"
        "setxattr: Read-only file system\n"
        "chmod: changing permissions of '/dev/full': Read-only file system\n"
        "chmod: changing permissions of '/dev/zero': Read-only file system\n"
        "chown: changing ownership of '/dev/null': Invalid argument\n"
        "3\nWORKSPACE-OK\nTMP-OK\n\n[exit code 0]"  # /dev/null written; the workspace and /tmp as before
    )
    assert (workspace / "mine").stat().st_mode & 0o777 == 0o700 and os.getxattr(workspace / "mine", "user.planted")


def test_the_runs_temp_folder_is_never_made_in_the_workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inside = workspace / "tmp"
    inside.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(inside))  # TMPDIR in the workspace
    first, second = bash(workspace, "ls -A tmp; echo kept > /tmp/mine && echo MADE", "cat /tmp/mine")
    assert first == "MADE\n\n[exit code 0]"  # no folder of the run for a command to change
    assert second.startswith("kept\n")


def test_a_link_in_place_of_a_private_folder_is_refused(workspace: Path, outside: Path) -> None:
    outside.chmod(0o755)
    private = _sandbox.PrivateTemp([str(workspace)])
    tmp = Path(private.path) / "tmp"
    tmp.symlink_to(outside)  # as a command could once leave where the private folder lay in the workspace

    async def run() -> str:
        ctx = ToolContext(workspace=Workspace([workspace]), permission_mode="auto")
        ctx.background.append(private)
        try:
            return (await Bash().call({"command": "echo RAN"}, ctx)).text
        finally:
            await ctx.end_background()

    out = anyio.run(run)
    assert (
        out == f"zero: the sandbox did not start: [Errno 20] {tmp}: not a folder Zero made (a link?)\n\n[exit code 126]"
    )
    assert outside.stat().st_mode & 0o7777 == 0o755 and list(outside.iterdir()) == []


def test_a_link_a_command_leaves_where_the_next_puts_the_workspace_is_not_followed(
    workspace: Path, tmp_path: Path, outside: Path
) -> None:
    if tmp_path.parts[1] != "tmp":
        pytest.skip("the workspace is not under /tmp")
    top = f"/tmp/{tmp_path.parts[2]}"  # the first folder of the workspace's mount point in the run's /tmp
    first, second = bash(workspace, f"mv {top} /tmp/moved && ln -s {outside} {top} && echo LINKED", "echo RAN")
    assert first.startswith("LINKED\n")
    assert second == (
        f"zero: the sandbox did not start: [Errno 20] {workspace}: not a folder in the run's temp folders "
        "(a command left a link?)\n\n[exit code 126]"
    )
    assert list(outside.iterdir()) == []  # nothing made, nothing bound there


@pytest.mark.parametrize(
    ("mode", "ending"),
    [
        ("auto", "run-ends"),
        ("auto", "zero-killed"),
        pytest.param("unsafe", "run-ends", marks=needs_root),
        pytest.param("unsafe", "zero-killed", marks=needs_root),
        pytest.param("container", "run-ends", marks=needs_root),
        pytest.param("container", "zero-killed", marks=needs_root),
        pytest.param("container", "group-killed", marks=needs_root),
    ],
)
def test_no_job_a_command_starts_outlives_the_run_or_a_killed_zero(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, ending: str
) -> None:
    n = 6000 + os.getpid() % 1000
    jobs = [f"sleep {n}1.5", f"sleep {n}2.5"]
    start = f"setsid {jobs[0]} & (setsid sh -c '{jobs[1]} & exit' &);"  # a new session, and a double fork of one
    if mode != "container":  # its first process is that of its PID namespace: nothing inside can kill it
        start += " kill -9 $PPID;"  # (in a container, unconfined, it has no PID namespace: the README says so)
    script = write_script(
        tmp_path / "s.toml",
        f"""
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "{start} echo started" }} }}]
[[turns]]
match = {{ turn = 2 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "while [ ! -e go ]; do sleep 0.02; done" }} }}]
[[turns]]
match = {{ turn = 3 }}
text = "Done."
""",
    )
    run = [
        ZERO,
        "exec",
        "go",
        *scripted(script, workspace),
        "--permission-mode",
        "auto" if mode == "auto" else "unsafe",
    ]
    proc = subprocess.Popen(
        in_a_container(run) if mode == "container" else run,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a process group of its own, to kill as a CI timeout does
    )
    jobs = [f"^{job}$" for job in jobs]  # the jobs themselves, not a command line that names them
    try:
        deadline = time.monotonic() + 15
        while not all(running(job) for job in jobs):  # both jobs run while the run does
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        # the run's private temp folder: the one whose lease Zero holds open
        leases = [os.readlink(fd) for fd in Path(f"/proc/{proc.pid}/fd").iterdir()]
        private = [Path(lease).parent for lease in leases if re.search(r"/zero-run-[^/]+/lease$", lease)]
        assert len(private) == (mode == "auto")
        if ending == "zero-killed":
            proc.send_signal(signal.SIGKILL)
        elif ending == "group-killed":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            (workspace / "go").touch()
        proc.wait(timeout=15)
        deadline = time.monotonic() + 5
        while any(running(job) for job in jobs) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [running(job) for job in jobs] == [[], []]
        if mode == "auto" and ending == "zero-killed":  # it could not remove the run's temp folder...
            assert private[0].exists()
            _sandbox.PrivateTemp().remove()  # ...the next run does
        assert not any(folder.exists() for folder in private)
    finally:
        proc.kill()
        for pid in (pid for job in jobs for pid in running(job)):  # what a failure left
            os.kill(int(pid), signal.SIGKILL)


PEEK = r'''
"""Look for a key (base64) in every process environment it can read (in /proc and the other proc mounts named),
and in the memory of its ancestors."""
import base64, os, subprocess, sys

key = base64.b64decode(sys.argv[1])


def parent(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except OSError:
        return 0


def look(pid, what, proc="/proc"):
    try:
        with open(f"{proc}/{pid}/{what}", "rb") as f:
            data = f.read() if what == "environ" else b"".join(regions(pid, f))
    except OSError as e:
        return e.strerror
    return "key found" if key in data else "no key"


def regions(pid, mem):
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            if perms.startswith("rw"):
                low, high = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(low)
                    yield mem.read(high - low)
                except OSError:
                    pass


def everyone():
    procs = ["/proc", *sys.argv[2:]]
    return sum(look(pid, "environ", proc) == "key found" for proc in procs for pid in os.listdir(proc) if pid.isdigit())


pid = os.getppid()
while pid > 0:
    print(f"ancestor {pid}: environ {look(pid, 'environ')}, memory {look(pid, 'mem')}")
    pid = parent(pid)
print("environments with the key:", everyone())
print("umount /proc:", subprocess.run(["umount", "/proc"], capture_output=True).returncode)
print("environments with the key:", everyone())
'''


def _unconfined(
    workspace: Path, tmp_path: Path, command: str, keys: dict[str, str], *, container: bool = False
) -> tuple[subprocess.Popen[str], str, str]:
    """``command`` run by ``zero exec`` unconfined (``--permission-mode unsafe``), as root on the host or in a
    container, under a parent holding ``keys``: the process, its tool's output and its standard error."""
    script = write_script(
        tmp_path / "s.toml",
        f"""
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "bash", arguments = {{ command = {json.dumps(command)} }} }}]
[[turns]]
match = {{ turn = 2 }}
text = "Done."
""",
    )
    run = [
        ZERO,
        "exec",
        "go",
        *scripted(script, workspace),
        "--permission-mode",
        "unsafe",
        "--output-format",
        "stream-json",
    ]
    proc = subprocess.Popen(
        in_a_container(run) if container else ["sh", "-c", '"$@"; exit $?', "sh", *run],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **keys},
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    [result] = [e["output"] for e in lines(out) if e["type"] == "tool_result"]
    return proc, result, err


def _keys() -> dict[str, str]:
    unique = os.urandom(8).hex()  # no other process here holds these, a test running meanwhile included
    return {name: f"{value}-{unique}" for name, value in SECRETS.items() if name.endswith("_API_KEY")}


def _peek(workspace: Path, keys: dict[str, str], *procs: Path) -> str:
    (workspace / "peek.py").write_text(PEEK)
    return " ".join(["python3 peek.py", base64.b64encode(keys["OPENAI_API_KEY"].encode()).decode(), *map(str, procs)])


@needs_root
@pytest.mark.parametrize("where", ["root", "container"])
def test_an_unconfined_command_finds_no_provider_key_in_any_process(
    workspace: Path, tmp_path: Path, where: str
) -> None:
    """As root, an unconfined command's PID namespace shows it no process outside, not even once it unmounts
    /proc: neither Zero nor Zero's parent, which holds the keys (as a CI runner does), nor through another procfs
    of the host (whatever blank its mount point's name holds). Root in a container has no such namespace: the
    command sees Zero, whose environment it reads without the keys, and whose memory it may not read."""
    keys = _keys()
    other = tmp_path / "chroot\x0b1" / "proc"  # another proc mount of the host, as a chroot has (a blank in a name)
    other.mkdir(parents=True)
    if where == "root":  # (in a container, without CAP_SYS_ADMIN, nobody mounts one)
        subprocess.run(["mount", "-t", "proc", "proc", str(other)], check=True)
    try:
        proc, result, _ = _unconfined(
            workspace, tmp_path, _peek(workspace, keys, *[other] * (where == "root")), keys, container=where != "root"
        )
    finally:
        subprocess.run(["umount", "-l", str(other)], capture_output=True)
    assert "key found" not in result
    assert result.count("environments with the key: 0\n") == 2
    if where == "root":  # its only ancestor is its PID namespace's first process
        assert result.startswith("ancestor 1: environ no key, memory no key\nenvironments")
    else:
        assert f"ancestor {proc.pid}: environ no key, memory Permission denied\n" in result


@needs_root
def test_an_unconfined_command_runs_not_where_a_procfs_of_the_host_is_hidden_beneath_a_later_mount(
    workspace: Path, tmp_path: Path
) -> None:
    """A procfs at a/p, then a tmpfs at a: no path reaches the procfs to unmount it, yet a command as root may
    unmount a and read every process there. It does not run; the tool says why."""
    (tmp_path / "a" / "p").mkdir(parents=True)
    keys = _keys()
    with mounted(["-t", "proc", "proc", str(tmp_path / "a" / "p")], ["-t", "tmpfs", "hiding", str(tmp_path / "a")]):
        _, result, _ = _unconfined(
            workspace, tmp_path, f"umount {tmp_path}/a; {_peek(workspace, keys, tmp_path / 'a' / 'p')}", keys
        )
    assert "key found" not in result and "environments with the key" not in result
    assert (
        f"the sandbox did not start: [Errno 16] a procfs of the host at {tmp_path}/a/p could not be unmounted" in result
    )


@needs_root
def test_a_procfs_the_host_mounts_after_an_unconfined_command_started_stays_out_of_its_view(
    workspace: Path, tmp_path: Path
) -> None:
    """In a folder the host shares (systemd's default), a procfs mounted once the command runs would come into
    its view, every process's environment with it: its mounts are private."""
    shared = tmp_path / "shared"
    shared.mkdir()
    keys = _keys()
    command = f"touch {workspace}/started; while [ ! -e {shared}/go ]; do sleep 0.05; done; ls {shared}/p | head -3"
    with mounted(["-t", "tmpfs", "shared", str(shared)]):
        subprocess.run(["mount", "--make-shared", str(shared)], check=True)
        (shared / "p").mkdir()

        def host() -> None:  # once the command runs: the host mounts a procfs there
            while not (workspace / "started").exists():
                time.sleep(0.02)
            with mounted(["-t", "proc", "proc", str(shared / "p")]):
                (shared / "go").touch()
                time.sleep(1)

        mounting = threading.Thread(target=host)
        mounting.start()
        try:
            _, result, _ = _unconfined(workspace, tmp_path, command, keys)
        finally:
            mounting.join()
    assert result.strip() == "[exit code 0]", result  # the folder as it was when the command started: empty


HOST_IPC = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
segment = libc.shmget(int(sys.argv[1]), 0, 0)  # the host's SysV segment, by its key
print("shm", segment if segment >= 0 else ctypes.get_errno())
keyring = libc.syscall({"x86_64": 250, "aarch64": 219}[__import__("os").uname().machine], 0, -3, 0)  # keyctl: session
print("keyring", "found" if keyring >= 0 else ctypes.get_errno())
"""


def test_the_hosts_ipc_objects_and_keyrings_are_out_of_reach(workspace: Path) -> None:
    """A sandboxed command read and wrote a host SysV segment and queue, and read the login's session keyring."""
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x5A7A0000 + os.getpid() % 0xFFFF
    segment = libc.shmget(key, 1024, 0o1600)  # IPC_CREAT | 0600
    assert segment >= 0, ctypes.get_errno()
    try:
        (workspace / "ipc.py").write_text(HOST_IPC)
        [unconfined] = bash(workspace, f"python3 ipc.py {key}", mode="unsafe")
        [out] = bash(workspace, f"python3 ipc.py {key}")
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID
    assert unconfined.startswith(f"shm {segment}\nkeyring found\n")  # the test can tell
    assert out.startswith("shm 2\nkeyring 1\n")  # ENOENT: an IPC namespace of its own; EPERM: no keyring calls


def test_zeros_own_code_is_never_writable_when_the_workspace_holds_it(tmp_path: Path) -> None:
    """Working on Zero with Zero (an editable install, its checkout the workspace): a command edited
    tools/_sandbox_run.py and the next one ran unconfined."""
    source = Path(_sandbox.__file__).parent  # (zero.tools)
    probe = source / f".zero-probe-{os.getpid()}"
    script = write_script(
        tmp_path / "s.toml",
        "[[turns]]\nmatch = { turn = 1 }\n"
        f'tool_calls = [{{ name = "bash", arguments = {{ command = "touch {probe}" }} }}]\n'
        '[[turns]]\nmatch = { turn = 2 }\ntext = "Done."\n',
    )
    try:
        done = zero("exec", "go", *scripted(script, source.parent), "--output-format", "stream-json")
        [result] = [e["output"] for e in lines(done.stdout) if e["type"] == "tool_result"]
        assert not probe.exists() and "Read-only file system" in result, result
    finally:
        probe.unlink(missing_ok=True)


def test_every_folder_of_zeros_code_is_protected_imported_or_not() -> None:
    """A ``zero exec`` imports no orchestrator and reads the built-in manifests as data: a command edited
    orchestrator/__init__.py and the next ``zero swarm`` ran it unconfined. Asked in a fresh process, where
    they are not imported, every package's folder (pyproject.toml's package-dir) is among the protected ones."""
    shown = subprocess.run(
        [sys.executable, "-c", "from zero.cli.common import _source_folders as f; print('\\n'.join(map(str, f())))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    folders = {name: ROOT / folder for name, folder in pyproject()["tool"]["setuptools"]["package-dir"].items()}
    assert {str(folder) for folder in folders.values()} <= set(shown), sorted(
        set(map(str, folders.values())) - set(shown)
    )


def test_a_command_commits_but_leaves_no_hook_for_gits_next_run(workspace: Path) -> None:
    """A hook a sandboxed command put in .git/hooks would run at the user's next commit, unconfined."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    [out] = bash(
        workspace,
        "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; "
        "export GIT_AUTHOR_NAME=z GIT_AUTHOR_EMAIL=z@z GIT_COMMITTER_NAME=z GIT_COMMITTER_EMAIL=z@z; "
        "git add -A && git commit -qm x && echo COMMITTED",
    )
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert "pre-commit: Read-only file system" in out and "COMMITTED" in out, out


@pytest.mark.parametrize("there", [False, True])
def test_a_command_writes_nothing_in_the_projects_zero_folder(workspace: Path, there: bool) -> None:
    """A specialist or config planted in .zero/ is what Zero reads next: the write tools ask about each write
    there, and a command, which is not asked, may not write there at all (made read-only, made if missing)."""
    if there:
        (workspace / ".zero" / "specialists").mkdir(parents=True)
    [out] = bash(
        workspace,
        "mkdir -p .zero/specialists; printf 'name = \"base\"\\n' > .zero/specialists/base.toml; "
        "echo x > .zero/config.toml; ls -a .zero",
    )
    assert not (workspace / ".zero" / "specialists" / "base.toml").exists()
    assert not (workspace / ".zero" / "config.toml").exists()
    assert "Read-only file system" in out, out


@pytest.mark.parametrize("link", [".zero", ".zero/specialists"])
def test_no_command_runs_where_the_projects_zero_folder_holds_a_link(workspace: Path, link: str) -> None:
    """A repository's .zero (or a folder in it) that is a link to a folder of the workspace: the read-only view
    covers the link, not where it leads, so a command could write Zero's specialists there."""
    (workspace / "elsewhere").mkdir()
    (workspace / ".zero").mkdir(exist_ok=link != ".zero")
    if link == ".zero":
        (workspace / ".zero").rmdir()
    (workspace / link).symlink_to(workspace / "elsewhere")
    with pytest.raises(ToolError, match=rf"^the project's .zero folder holds a link \({link}\): a command could write"):
        bash(workspace, "echo planted > elsewhere/planted.toml")
    assert not (workspace / "elsewhere" / "planted.toml").exists()


def test_a_command_cannot_name_a_program_in_the_repositorys_config(workspace: Path) -> None:
    """A filter's clean command in .git/config (with a .gitattributes naming it) would run unconfined at the
    user's next git add, or Zero's next snapshot of the workspace."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    config = workspace / ".git" / "config"
    before = config.read_bytes()
    [out] = bash(
        workspace,
        "git config filter.x.clean 'touch /tmp/pwned'; echo '[filter \"x\"] clean = evil' >> .git/config; "
        "mv .git/config .git/config.old; echo '* filter=x' > .gitattributes && echo ATTRIBUTES",
    )
    assert config.read_bytes() == before and not (workspace / ".git" / "config.old").exists()
    assert ".git/config: Read-only file system" in out and "ATTRIBUTES" in out, out


def test_a_run_starting_beside_another_never_loses_its_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run's start removes the folders of runs that are gone (their lease free): a folder whose lease could
    be found before it was locked was removed under the run that was making it (two suites at once)."""
    monkeypatch.setattr(_sandbox, "TEMP_PARENTS", (str(tmp_path),))
    done = False
    lost: list[str] = []

    def sweep() -> None:
        while not done:
            _sandbox._remove_abandoned(str(tmp_path))

    sweeper = threading.Thread(target=sweep)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns as often as they can
    sweeper.start()
    try:
        for _ in range(400):
            private = _sandbox.PrivateTemp()
            if not os.path.isdir(private.path):
                lost.append(private.path)
            private.remove()
    finally:
        done = True
        sweeper.join()
        sys.setswitchinterval(interval)
    assert lost == []


@needs_root
def test_a_run_sweeps_only_its_users_private_folders_without_waiting(tmp_path: Path) -> None:
    """Another user's folder, even with a free lease, is not removed (nor opened: a file lease on it made each
    run's start wait 45 s), nor a folder not made as Zero makes them (mode 0700)."""
    theirs, loose, gone = (tmp_path / f"zero-run-{name}" for name in ("theirs", "loose", "gone"))
    for folder in (theirs, loose, gone):
        folder.mkdir(mode=0o700)
        (folder / "lease").write_text("")
        (folder / "kept.txt").write_text("kept")
    os.chown(theirs, 65534, 65534)
    os.chown(theirs / "lease", 65534, 65534)
    loose.chmod(0o755)
    assert _sandbox._remove_abandoned(str(tmp_path)) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zero-run-loose", "zero-run-theirs"]  # ours, abandoned: gone
    assert (theirs / "kept.txt").read_text() == (loose / "kept.txt").read_text() == "kept"


def test_a_warning_printed_on_a_terminal_shows_its_control_characters_escaped() -> None:
    from zero.agent import WarningRaised
    from zero.cli._warnings import WarningLog

    log = WarningLog()
    log.items.append(WarningRaised(session_id="s", code="temp_cleanup", message="/tmp/zero-run-\x1b]0;PWNED\x07: busy"))
    assert log.lines() == ["zero: warning: /tmp/zero-run-\\x1b]0;PWNED\\x07: busy (temp_cleanup)"]
