"""The bash tool: a command in the workspace, sandboxed where the system allows it, with a timeout.

In ``auto`` and ``ask`` mode a command runs in the sandbox (see ``tools._sandbox``): no network, no
host sockets or devices, the run's own temp folders, and writes only inside the workspace and those.
``outside_sandbox`` asks to run it without one, which counts as reaching the network: the user must
approve it (``unsafe`` mode runs every command unconfined). Where no sandbox is available, commands
run unconfined and the run says so once. In every mode a command's environment has no secrets.

A command returns when its foreground part ends; a job it left in the background goes on until the
run ends (or Zero dies), and is then stopped with everything it started, in every mode.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import anyio
from pydantic import Field

from zero.errors import ToolError
from zero.tools import _sandbox
from zero.tools.base import ArgsModel, BuiltinTool, SideEffect, ToolContext, ToolOutput

__all__ = ["Bash"]

MAX_CAPTURE = 512_000  # bytes kept from each end of a very long output
BLOCKED_HINTS = (
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
    "getaddrinfo",
)


class BashArgs(ArgsModel):
    command: str = Field(description="The bash command to run in the workspace root.")
    timeout_seconds: float = Field(120, gt=0, le=1800, description="Kill the command after this long.")
    outside_sandbox: bool = Field(
        False,
        description="Run it without the sandbox (network, writes outside the workspace). Needs the user's "
        "approval: ask only when the sandbox stopped the command.",
    )


class Bash(BuiltinTool[BashArgs]):
    name = "bash"
    description = (
        "Run a bash command in the workspace root and return its combined stdout and stderr with the exit "
        "code. It runs in a sandbox: no network, writes only in the workspace and /tmp (private to this run: "
        "files there last until the run ends). The command and everything it started are killed at the timeout; "
        "jobs left in the background run until the end."
    )
    side_effect = "shell"
    args = BashArgs

    def side_effect_of(self, arguments: dict[str, Any]) -> SideEffect:
        return "network" if arguments.get("outside_sandbox") is True else "shell"

    async def run(self, args: BashArgs, ctx: ToolContext) -> ToolOutput:
        wants_sandbox = ctx.permission_mode in ("auto", "ask") and not args.outside_sandbox
        confined = wants_sandbox and _sandbox.available()
        warning = None
        if wants_sandbox and not confined:
            warning = (
                "unconfined_shell",
                f"shell commands run unconfined (network on, writes anywhere): {_sandbox.unavailable_reason()}",
            )
        roots = [str(root) for root in ctx.workspace.roots]
        if confined and (problem := _sandbox.workspace_problem(roots, os.environ)) is not None:
            raise ToolError(problem)
        private, protected = (_private_temp(ctx), _protected(ctx, roots)) if confined else (None, [])
        if private is not None and private.left:
            warning = ("temp_cleanup", f"could not remove what an earlier run left in the temp folder: {private.left}")
        env = _sandbox.command_env(os.environ, ctx.shell.env_passthrough, confined=confined)
        status_r, status_w = os.pipe()
        hold_r, hold_w = os.pipe()
        argv = _sandbox.command_line(
            args.command,
            confined=confined,
            writable=roots,
            status_fd=status_w,
            hold_fd=hold_r,
            private=private.path if private is not None else "",
            protected=protected,
        )
        try:
            process = await anyio.open_process(
                argv,
                cwd=ctx.workspace.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(status_w, hold_r),
                start_new_session=True,  # killing Zero's process group (a CI timeout) leaves it to end the command
            )
        finally:
            os.close(status_w)
            os.close(hold_r)
        head, tail, dropped = bytearray(), bytearray(), 0
        status = b""
        kept = False
        try:
            with anyio.move_on_after(args.timeout_seconds) as scope:
                assert process.stdout is not None
                async for chunk in process.stdout:
                    room = MAX_CAPTURE - len(head)
                    if room > 0:
                        head.extend(chunk[:room])
                        chunk = chunk[room:]
                    tail.extend(chunk)
                    if len(tail) > MAX_CAPTURE:
                        dropped += len(tail) - MAX_CAPTURE
                        del tail[: len(tail) - MAX_CAPTURE]
                await anyio.wait_readable(status_r)
                status = os.read(status_r, 64)
            timed_out = scope.cancelled_caught
            code, background = _parse(status)
            if background and not timed_out:  # a job it started goes on until the run ends
                ctx.background.append(_Job(process, hold_w))
                kept = True
        finally:
            os.close(status_r)
            if not kept:
                os.close(hold_w)  # the sandbox ends, and everything in it
                with anyio.CancelScope(shield=True):
                    await process.wait()
        text = head.decode("utf-8", "replace")
        if dropped:
            text += f"\n[... {dropped} bytes cut ...]\n"
        text += tail.decode("utf-8", "replace")
        if timed_out:
            return ToolOutput(
                text=f"{text}\n[killed after {args.timeout_seconds:g} s timeout]", is_error=True, warning=warning
            )
        notes = f"\n[exit code {code}]"
        if background:
            notes += "\n[a job it started runs on in the background until the run ends]"
        if confined and code != 0 and any(hint in text for hint in BLOCKED_HINTS):
            notes += (
                "\n[it ran in the sandbox: no network, no socket or device of the host, writes only in the workspace "
                "and the run's own /tmp. If that is what stopped it, run it again with outside_sandbox = true: the "
                "user must approve that]"
            )
        return ToolOutput(text=(text + notes) if text else notes.lstrip("\n"), is_error=code != 0, warning=warning)


def _private_temp(ctx: ToolContext) -> _sandbox.PrivateTemp:
    """The run's private temp folder (outside the workspace), made by its first confined command and
    removed when the run ends."""
    for job in ctx.background:
        if isinstance(job, _sandbox.PrivateTemp):
            return job
    try:
        private = _sandbox.PrivateTemp([str(root) for root in ctx.workspace.roots])
    except OSError as e:
        raise ToolError(f"cannot make the sandbox's temp folder: {e}") from e
    ctx.background.append(private)
    return private


def _protected(ctx: ToolContext, roots: list[str]) -> list[str]:
    """Zero's own folders, never writable from the sandbox, as Zero's next start will look them up (links
    and all: the sandbox pins the way). One in the workspace is made now if missing, so that it exists (and
    is covered) before a command could make it."""
    folders = []
    for folder in ctx.shell.protected:
        real = os.path.realpath(folder)
        if not os.path.exists(real) and any(real.startswith(root.rstrip("/") + "/") for root in roots):
            os.makedirs(real, 0o700, exist_ok=True)
        folders.append(os.path.join(os.getcwd(), folder))
    zeros = [os.path.realpath(folder) for folder in ctx.shell.protected]
    for root in roots:
        # The project's own Zero folder: its specialists and config are what Zero reads next (the write tools ask
        # about each write there; a command is not asked, so it may not write there at all). Not in a member's
        # worktree (beneath $ZERO_HOME, attached over it): what it writes there lands only as a diff, shown.
        project = os.path.join(root, ".zero")
        if not any(os.path.realpath(root).startswith(f"{zero}/") for zero in zeros):
            if not os.path.lexists(project):
                os.makedirs(project, 0o755, exist_ok=True)
            if link := _link_in(project):  # its read-only view would not cover where a link leads
                raise ToolError(
                    f"the project's .zero folder holds a link ({os.path.relpath(link, root)}): a command could write "
                    "Zero's config or specialists where it leads, so none runs here; replace the link with the file "
                    "or folder itself"
                )
            folders.append(project)
        # What git runs by itself: a hook, or a program the config names (a filter's clean command, a merge
        # driver), would run unconfined, at your next commit or Zero's next snapshot.
        git = os.path.join(root, ".git")
        if os.path.isdir(git) and not os.path.islink(git):
            hooks = os.path.join(git, "hooks")
            if not os.path.lexists(hooks):
                os.makedirs(hooks, 0o755, exist_ok=True)
            folders.append(hooks)
            if os.path.isfile(os.path.join(git, "config")):
                folders.append(os.path.join(git, "config"))
    return folders


def _link_in(folder: str) -> str | None:
    """The first symbolic link at or beneath ``folder`` (not followed), if any."""
    if os.path.islink(folder):
        return folder
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            if os.path.islink(path := os.path.join(top, name)):
                return path
    return None


def _parse(status: bytes) -> tuple[int, bool]:
    """The exit code and whether jobs run on, from the sandbox's status line (killed: 137, none)."""
    try:
        code, background = status.split()
        return int(code), background == b"1"
    except ValueError:
        return 137, False


class _Job:
    """A command whose background jobs run until the run ends: closing its hold pipe ends them."""

    def __init__(self, process: Any, hold_fd: int):
        self.process = process
        self.hold_fd = hold_fd

    async def aclose(self) -> None:
        os.close(self.hold_fd)
        with anyio.CancelScope(shield=True):
            await self.process.wait()
