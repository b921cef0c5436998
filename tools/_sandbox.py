"""Where shell commands run: in a sandbox where the system has one, else unconfined; and with what.

The sandbox is Linux's own: new user, PID, mount and network namespaces, so the command has no
network and everything it starts ends with it, even when Zero is killed; its own /tmp, /var/tmp and
/dev/shm (a private folder of the run, removed with it), an empty /run and $XDG_RUNTIME_DIR and a
minimal /dev, so it sees none of the host's sockets and devices; no capability; Landlock, so it
may write only inside the workspace and those private folders; and a seccomp filter that refuses
connecting to a unix socket outside them. Zero's data and config folders are never writable. Its
first process is ``_sandbox_init`` (see there). Unconfined, that first process still ends
everything the command started when the run ends.

In every mode a command gets Zero's environment without its secrets: the variables the redaction
rule calls secret (the provider keys among them) and those that lead to a socket of the host
(``TMUX``, ``SSH_AUTH_SOCK``, ...), unless the user's ``[shell] env_passthrough`` names them.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from zero.tools.redact import secret_name

__all__ = ["INIT", "SOCKET_ENV", "PrivateTemp", "available", "command_env", "command_line", "unavailable_reason"]

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
    drops when the process dies), so that the folder of a run whose Zero was killed is removed by the next."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix=_PREFIX)
        self.lease = os.open(os.path.join(self.path, _LEASE), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.lease, fcntl.LOCK_EX)
        _remove_abandoned(os.path.dirname(self.path))

    def remove(self) -> None:
        _remove(self.path)
        os.close(self.lease)

    async def aclose(self) -> None:
        self.remove()


_PREFIX, _LEASE = "zero-run-", "lease"


def _remove(path: str) -> None:
    for folder, subfolders, _ in os.walk(path):  # a command may have left folders it cannot enter
        for name in subfolders:
            if not os.path.islink(sub := os.path.join(folder, name)):
                os.chmod(sub, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def _remove_abandoned(temp: str) -> None:
    """Remove the private folders in ``temp`` whose run is gone (its lease is free)."""
    for name in os.listdir(temp):
        if not name.startswith(_PREFIX):
            continue
        try:
            lease = os.open(os.path.join(temp, name, _LEASE), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # another user's, or one just being made
        try:
            fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # its run goes on
        else:
            _remove(os.path.join(temp, name))
        finally:
            os.close(lease)


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
