"""Which MCP servers a run starts: the user's ``[mcp.servers]``, and the project's once approved.

A project's config comes with a repository, so its servers are code someone else wrote: each starts only
after the user approved it (``zero mcp trust NAME``, which shows what it runs), and then its tools run as
a trusted server's do. The approval is remembered per workspace in ``$ZERO_HOME/mcp-approved.json`` with
a fingerprint of the entry and of the code it runs from the repository: every file beneath each folder it
runs from, all the way down, since what a script imports sits beside it (a ``json.py`` put next to a
server shadows Python's own). Those folders are the folder of each file or link its entry names (its
command, the interpreter of its command's ``#!`` line, its arguments and their words, the parts of its
``env`` values such as ``PYTHONPATH = "vendor"`` or ``NODE_OPTIONS = "--require ./hook.js"``), each folder
it names, and its ``cwd`` for ``-m`` (and Python's ``-c``); one inside a virtual environment (a folder
with a ``pyvenv.cfg``, whose ``site-packages`` runs any ``.pth`` at start) stands for that whole
environment, and ``uv run``, ``poetry run``, ``pipenv run`` and ``pdm run`` add the project's ``.venv``
(in its ``cwd`` or a folder above, in the workspace). So an edited entry, or any file added, edited or
removed there, asks again; the entry cannot say how far it is trusted. The walk skips ``.git``, which no
server runs, but not ``__pycache__`` (Python runs a planted ``.pyc`` whose header matches its source); a
project's server runs in the workspace (or its ``cwd`` there) with ``PYTHONDONTWRITEBYTECODE``, so its own
start changes nothing there. What the approval does not cover: code outside the workspace (a system
interpreter, a virtual environment elsewhere, what ``npx`` or ``uvx`` download), and what the server
reads or runs by a path that its entry does not name (a script it opens itself). ``add``, ``remove`` and
``trust`` edit a config file's text table by table, so the rest of the file, comments included, stays as
it was.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import io
import json
import os
import posixpath
import re
import shlex
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zero.agent.mcpconfig import McpServer
from zero.cli.config import Configs, McpServerEntry, user_config_dir
from zero.cli.trust import approved
from zero.errors import ToolError, UsageError
from zero.strictfile import read_file, write_file
from zero.tools import Workspace

__all__ = [
    "MAX_CODE_BYTES",
    "MAX_CODE_FILES",
    "RepositoryCode",
    "configured_servers",
    "edit_table",
    "fingerprint",
    "repository_code",
    "run_servers",
    "server_cwd",
    "server_table",
    "set_flag",
]


MAX_CODE_FILES = 2_000  # entries of the folders a project's server runs from that an approval covers
MAX_CODE_BYTES = 20_000_000  # and their bytes; past either, it cannot be approved as a project's
_SKIPPED = ".git"  # git's own store, which no server runs
# What a project's server is started with: Python writes no bytecode of the repository's files (which
# would change what the approval covers at every first start).
_NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


@dataclass(frozen=True, kw_only=True)
class RepositoryCode:
    """What a project's server runs from the repository: the folders it runs from (as the workspace names
    them), every entry beneath them with a hash of its content (a link: where it leads, and what it leads to
    if that is inside), their bytes, and why they are too much to approve (``too_much``), if they are."""

    folders: tuple[str, ...]
    files: dict[str, str]
    size: int = 0
    too_much: str = ""
    environments: tuple[str, ...] = ()  # those of the folders that are virtual environments

    def described(self) -> str:
        """The folders as ``zero mcp trust`` shows them, with how much they hold."""
        if not self.folders:
            return "none"
        named = ", ".join(
            "the whole workspace"
            if f == "."
            else f"the virtual environment {f}/"
            if f in self.environments
            else f"{f}/"
            for f in self.folders
        )
        if self.too_much:
            return f"{named} ({self.too_much})"
        count = len(self.files)
        return f"{named} ({count:,} {'file' if count == 1 else 'files'}, {self.size:,} bytes)"


class _TooMuch(Exception):
    pass


def fingerprint(entry: McpServerEntry, code: RepositoryCode) -> str:
    """What the approval of a project's server covers: how it is started, then the code it runs from the
    repository (``code``, which must not be too much)."""
    started = entry.model_dump(include={"command", "args", "env", "cwd", "url", "headers"})
    return f"{_digest(started)}.{_digest([code.folders, code.files])}"


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def user_server_cwd(entry: McpServerEntry) -> Path:
    """Where a server of yours runs: its ``cwd``, else your config folder, never the workspace, where a
    sandboxed command could put code in its way (``npx`` runs ``node_modules/.bin`` of its folder, ``python -m``
    a module there, ``uvx`` reads its ``pyproject.toml``) for it to run unconfined, with the secrets its
    ``env`` gives it."""
    return Path(entry.cwd).expanduser() if entry.cwd else user_config_dir()


def server_cwd(entry: McpServerEntry, workspace: Path) -> Path:
    """Where a project's server runs: its ``cwd`` in the workspace, else the workspace."""
    return workspace / entry.cwd if entry.cwd else workspace


def repository_code(entry: McpServerEntry, workspace: Path) -> RepositoryCode:
    """The code of ``workspace`` a server runs (see the module's docstring): each folder it runs from, each
    walked to the bottom (links followed only inside the workspace); at most ``MAX_CODE_FILES`` entries and
    ``MAX_CODE_BYTES`` bytes."""
    here, cwd = Workspace([workspace]), server_cwd(entry, workspace)
    named = {found for path in _named(entry, here, cwd) for found in _folders_of(here, path)}
    if _NODE.fullmatch(posixpath.basename(entry.command or "")):  # node resolves a require in each folder above
        named |= {up for folder in set(named) for up in _node_modules(here, folder)}
    environments = {env for folder in named if (env := _environment(here, folder)) is not None}
    if _runner(entry):  # it runs the project's environment: the .venv where it starts, or above
        starts = named | _folders_of(here, str(cwd))
        for start in starts:
            environments.update(env for up in _upwards(start) if _is_environment(here, env := _join(up, ".venv")))
    folders = named | environments
    # a folder inside another is walked with it
    top = tuple(sorted(f for f in folders if not any(_within(f, g) for g in folders if g != f)))
    kept = tuple(f for f in top if f in environments)
    files: dict[str, str] = {}
    walk = _Walk(here=here, files=files)
    try:
        for folder in top:
            walk.folder(folder)
    except _TooMuch as e:
        return RepositoryCode(folders=top, files={}, size=walk.size, too_much=str(e), environments=kept)
    return RepositoryCode(folders=top, files=files, size=walk.size, environments=kept)


def _named(entry: McpServerEntry, here: Workspace, cwd: Path) -> list[str]:
    """Every path a server's entry names (as run in ``cwd``): its command if that is a path, and the
    interpreter its first line names; its arguments, and each word of one (``sh -c "..."``); the parts of
    each value of its environment (a list like ``PYTHONPATH``, where an empty part is the folder it runs in,
    or options like ``NODE_OPTIONS``' ``--require X``); its ``cwd`` if it runs a module or code (``-m``,
    Python's ``-c``)."""
    items = [entry.command, *_shebang(here, str(cwd / entry.command))] if entry.command and "/" in entry.command else []
    python = bool(entry.command and _PYTHON.fullmatch(posixpath.basename(entry.command)))
    for arg in entry.args:
        items += ["."] if arg == "-m" or (python and _runs_code(arg)) else [arg, *_words(arg)]
    for value in entry.env.values():
        expanded = os.path.expandvars(value)  # as the server gets it
        parts = expanded.split(os.pathsep)
        items += [part or "." for part in parts] if len(parts) > 1 else parts  # in a list, '' is the folder
        items += _words(expanded)
    return [str(cwd / item) for item in items if item]  # an absolute item stays itself


def _runs_code(arg: str) -> bool:
    """Does Python's option ``arg`` run a module or code from its folder: ``-m`` or ``-c``, glued to its value
    (``-msrv``) or after flags in a cluster (``-Im srv``)?"""
    if not arg.startswith("-") or arg.startswith("--"):
        return False
    for letter in arg[1:]:
        if letter in "mc":
            return True
        if letter in "WX":  # the rest is this option's value
            return False
    return False


def _words(text: str) -> list[str]:
    """The paths a command line or option list may name: its words, without an option's ``--name=``, split
    into the parts of a path list."""
    try:
        words = shlex.split(text)
    except ValueError:  # an unmatched quote: its words as the shell would roughly see them
        words = text.split()
    if len(words) < 2 and os.pathsep not in text:
        return []
    return [part for word in words for part in _OPTION.sub("", word).split(os.pathsep) if part]


_OPTION = re.compile(r"^--?[A-Za-z][\w-]*=")
_PYTHON = re.compile(r"python[0-9.]*")
# Who run a project's own environment (its .venv): ``uv run``, ``poetry run``, ``pipenv run``, ``pdm run``.
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "pdm"})


def _runner(entry: McpServerEntry) -> bool:
    return posixpath.basename(entry.command or "") in _RUNNERS and "run" in entry.args


def _shebang(here: Workspace, path: str) -> list[str]:
    """The words of the ``#!`` line of ``path`` if it is the repository's: the interpreter it runs."""
    try:
        head = here.read_regular(path, 256)[:256]
    except ToolError:
        return []
    first = head.split(b"\n", 1)[0]
    return first[2:].decode(errors="replace").split() if first.startswith(b"#!") else []


_NODE = re.compile(r"node|nodejs|npx|bun|bunx|deno|tsx|ts-node")


def _node_modules(here: Workspace, folder: str) -> list[str]:
    """The ``node_modules`` folders of the workspace a ``require`` in ``folder`` may load from: in it and in
    each folder above it, to the workspace's root."""
    found = []
    for up in _upwards(folder):
        modules = _join(up, "node_modules")
        if _folders_of(here, modules) == {here.shown(modules)}:
            found.append(here.shown(modules))
    return found


def _folders_of(here: Workspace, path: str) -> set[str]:
    """The folders of the workspace ``path`` makes a server run from: itself if a folder, else the folder it
    is in, if it is a file there or a link there (even one leading out, which could be replaced), and, for a
    file reached through links, the folder it really is in (where Python looks for what it imports); none if
    it is not the workspace's."""
    if "\x00" in path:
        return set()
    try:
        fd = here.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except ToolError:  # not there, not the repository's, or a link leading out
        return {f for f in [_folder_of_link(here, path)] if f is not None}
    try:
        kind = os.fstat(fd).st_mode
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = ""
    finally:
        os.close(fd)
    shown = here.shown(path)
    if stat.S_ISDIR(kind):
        return {shown}
    if not stat.S_ISREG(kind):
        return set()
    folders = {posixpath.dirname(shown) or "."}
    if real:
        with contextlib.suppress(ToolError):
            folders.add(posixpath.dirname(here.shown(real)) or ".")
    return folders


def _folder_of_link(here: Workspace, path: str) -> str | None:
    parent, name = posixpath.split(posixpath.normpath(path))
    try:
        fd = here.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    except ToolError:
        return None
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return None
    finally:
        os.close(fd)
    return here.shown(parent) if is_link else None


def _environment(here: Workspace, folder: str) -> str | None:
    """The virtual environment (a folder with a ``pyvenv.cfg``) ``folder`` is in, if there is one."""
    return next((up for up in _upwards(folder) if _is_environment(here, up)), None)


def _is_environment(here: Workspace, folder: str) -> bool:
    try:
        here.read_regular(_join(folder, "pyvenv.cfg"), 0)
    except ToolError:
        return False
    return True


def _upwards(folder: str) -> list[str]:
    """``folder`` (as the workspace names it) and each folder above it, up to the workspace."""
    found = [folder]
    while found[-1] != ".":
        found.append(posixpath.dirname(found[-1]) or ".")
    return found


def _join(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


def _within(folder: str, other: str) -> bool:
    return other == "." or folder.startswith(other + "/")


@dataclass(kw_only=True)
class _Walk:
    """A walk of folders beneath the workspace, hashing each entry into ``files``."""

    here: Workspace
    files: dict[str, str]
    size: int = 0

    def __post_init__(self) -> None:
        self._seen: set[tuple[int, int]] = set()

    def folder(self, folder: str) -> None:
        fd = self.here.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) in self._seen:  # a link back to a folder walked already
                return
            self._seen.add((st.st_dev, st.st_ino))
            with os.scandir(fd) as entries:
                names = sorted(e.name for e in entries)
            for name in names:
                self._entry(fd, name, name if folder == "." else f"{folder}/{name}")
        finally:
            os.close(fd)

    def _entry(self, fd: int, name: str, path: str) -> None:
        if len(self.files) >= MAX_CODE_FILES:
            raise _TooMuch(f"more than {MAX_CODE_FILES:,} files")
        try:
            self._read(fd, name, path)
        except (OSError, ToolError) as e:  # changed while it was read, or not readable: as such, it is covered
            self.files[path] = f"unreadable: {e.strerror if isinstance(e, OSError) else e}"

    def _read(self, fd: int, name: str, path: str) -> None:
        kind = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        if stat.S_ISDIR(kind):
            if name != _SKIPPED:
                self.files[path] = "folder"
                self.folder(path)
        elif stat.S_ISLNK(kind):
            self.files[path] = f"link to {os.readlink(name, dir_fd=fd)}"
            try:  # what it leads to, if that is inside
                target = self.here.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except ToolError:
                return
            mode = os.fstat(target).st_mode
            if stat.S_ISREG(mode):
                with os.fdopen(target, "rb") as f:
                    self.files[path] += f": {self._hash(f)}"
                return
            os.close(target)
            if stat.S_ISDIR(mode):
                self.folder(path)
        elif stat.S_ISREG(kind):
            with os.fdopen(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped since
                    raise OSError(errno.EAGAIN, "it changed while it was read")
                self.files[path] = self._hash(f) + (" executable" if kind & 0o111 else "")
        else:  # a FIFO, a socket or a device: never opened
            self.files[path] = f"special file {stat.S_IFMT(kind):o}"

    def _hash(self, f: io.BufferedReader) -> str:
        self.size += os.fstat(f.fileno()).st_size
        if self.size > MAX_CODE_BYTES:
            raise _TooMuch(f"more than {MAX_CODE_BYTES:,} bytes")
        return hashlib.file_digest(f, "sha256").hexdigest()[:16]


def configured_servers(configs: Configs) -> dict[str, tuple[McpServerEntry, str]]:
    """Every configured server by name, with where it is configured (``user`` or ``project``)."""
    found = {name: (entry, "user") for name, entry in configs.user.mcp.servers.items()}
    for name, entry in configs.project.mcp.servers.items():
        found.setdefault(name, (entry, "project"))
    return found


def run_servers(configs: Configs, workspace: Path) -> tuple[list[McpServer], list[str]]:
    """The servers a run in ``workspace`` starts, and warnings about the ones it does not."""
    servers, warnings = [], []
    allowed = approved("mcp", workspace)
    project_file = workspace / ".zero" / "config.toml"
    for name, (entry, where) in configured_servers(configs).items():
        if not entry.enabled:
            continue
        if where == "project" and name in configs.user.mcp.servers:
            continue
        if where == "project" and (why := _unapproved(allowed.get(name), entry, workspace)):
            warnings.append(
                f"MCP server {name!r} of {project_file} not started: {why}; zero mcp trust {name} shows what it "
                "runs and asks"
            )
            continue
        servers.append(
            McpServer(
                name=name,
                command=entry.command,
                args=tuple(entry.args),
                env={**entry.env, **(_NO_BYTECODE if where == "project" else {})},
                cwd=str(server_cwd(entry, workspace) if where == "project" else user_server_cwd(entry)),
                url=entry.url,
                headers=dict(entry.headers),
                timeout_seconds=entry.timeout_seconds,
                call_timeout_seconds=entry.call_timeout_seconds,
                trusted=entry.trust or where == "project",  # a project's: approved, or it would not start
                side_effect=entry.side_effect if where == "user" else "network",
                config_path=str(user_config_dir() / "config.toml" if where == "user" else project_file),
            )
        )
    return servers, warnings


def _unapproved(approval: str | None, entry: McpServerEntry, workspace: Path) -> str:
    """Why a project's server may not start (its approval is missing or out of date), or ''."""
    if approval is None:
        return "a project's servers start once you approve them"
    code = repository_code(entry, workspace)
    if code.too_much:
        return f"the code it runs from the repository ({code.described()}) is more than an approval covers"
    now = fingerprint(entry, code)
    if approval == now:
        return ""
    if approval.split(".")[0] != now.split(".")[0]:
        return "its entry changed since you approved it"
    return f"the code it runs from the repository ({code.described()}) changed since you approved it"


_TABLE = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")


def edit_table(path: Path, table: str, body: str | None, *, new: bool = False, within: Path | None = None) -> bool:
    """Replace (or add, or with ``body`` None remove) the TOML table ``[table]`` in ``path`` with its sub-tables
    (``[table.env]``), leaving the other lines as they are; False if there was nothing to remove. ``new``: a
    table that is there already is a ``UsageError``. The edit is checked by reading the file back: a table
    written another way (inline in its parent, or keys of it elsewhere) is refused, not doubled, and the file
    is written whole or not at all: through a link to it (your dotfiles checkout), but never out of ``within``
    (a project's file: a cloned repository's link could lead to any file of yours)."""
    key = tuple(table.split("."))
    target, text = _config_text(path, within)
    before = _parsed(text, path)
    if new and _lookup(before, key) is not None:
        raise UsageError(f"{path} has [{table}] already: remove it first (zero mcp remove {key[-1]}), or another name")
    if body is None and _lookup(before, key) is None:
        return False
    lines, newline = _lines(text)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    ours = [
        (i, end) for i, end in _blocks(lines) if (name := _header(lines[i])) is not None and name[: len(key)] == key
    ]
    if ours:  # the blank lines and comments after the last of them stay: they lead into what follows
        last, end = ours[-1]
        while end > last + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        ours[-1] = (last, end)
    dropped = {n for i, end in ours for n in range(i, end)}
    at = ours[0][0] if ours else len(lines)
    head = [line for n, line in enumerate(lines[:at]) if n not in dropped]
    tail = [line for n, line in enumerate(lines[at:], at) if n not in dropped]
    replacement = [] if body is None else [f"[{table}]", *body.splitlines()]
    gap = [newline] if replacement and not ours and head and head[-1].strip() else []
    if not replacement and (not head or not head[-1].strip()):  # (no blank line doubled, none left on top)
        while tail and not tail[0].strip():
            tail.pop(0)
    while not replacement and not tail and head and not head[-1].strip():  # (nor left at the end)
        head.pop()
    result = "".join([*head, *gap, *(line + newline for line in replacement), *tail])
    _write_checked(
        path, table, target, result, _with(before, key, None if body is None else _parsed(f"[{table}]\n{body}\n", path))
    )
    return True


def set_flag(path: Path, table: str, name: str) -> None:
    """Set ``name = true`` in the TOML table ``[table]`` of ``path``, changing that one line (or adding it at the
    end of the table's own keys) and nothing else of the file: its comments, its sub-tables and how each value
    is written stay as they are. Written as ``edit_table`` writes, checked the same way."""
    target, text = _config_text(path, None)
    before = _parsed(text, path)
    key = tuple(table.split("."))
    found = _lookup(before, key)
    if not isinstance(found, dict):
        raise UsageError(f"{path} has no [{table}] table to set {name} in")
    if found.get(name) is True:
        return
    lines, newline = _lines(text)
    block = next(((i, end) for i, end in _blocks(lines) if _header(lines[i]) == key), None)
    if block is None:  # inline in its parent table
        raise _not_rewritten(path, table)
    start, end = block
    setting = re.compile(rf"^(\s*(?:{re.escape(name)}|\"{re.escape(name)}\")\s*=\s*)(true|false)(\s*(?:#.*)?)$")
    at = next((n for n in range(start + 1, end) if setting.match(lines[n].rstrip("\r\n"))), None)
    if at is not None:  # (its value alone: a comment after it stays)
        line = lines[at].rstrip("\r\n")
        lines[at] = setting.sub(r"\1true\3", line) + lines[at][len(line) :]
    else:
        last = max(n for n in range(start, end) if lines[n].strip() and not lines[n].lstrip().startswith("#"))
        if not lines[last].endswith("\n"):  # the file's last line, without its newline
            lines[last] += newline
        lines.insert(last + 1, f"{name} = true{newline}")
    expected = copy.deepcopy(before)
    node = _lookup(expected, key)
    assert isinstance(node, dict)
    node[name] = True
    _write_checked(path, table, target, "".join(lines), expected)


def _config_text(path: Path, within: Path | None) -> tuple[Path, str]:
    """The file a config's path leads to (through a link, never out of ``within``) and its text ("": none yet)."""
    target = Path(os.path.realpath(path))  # (a config file that is a link to a dotfiles checkout: the file itself)
    if within is not None and not target.is_relative_to(os.path.realpath(within)):
        raise UsageError(f"{path} leads out of {within} through a link (to {target}): not touched")
    try:
        return target, read_file(target).decode("utf-8")
    except FileNotFoundError:
        return target, ""
    except (OSError, UnicodeDecodeError) as e:  # (a FIFO or a device in its place is never waited on or read)
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


def _not_rewritten(path: Path, table: str) -> UsageError:
    return UsageError(
        f"{path}: [{table}] is written in a way zero mcp does not rewrite (inline in its parent table, or keys of "
        "it elsewhere in the file): edit the file by hand"
    )


def _lines(text: str) -> tuple[list[str], str]:
    """A file's lines, each as it ends (a Windows file keeps its line ends), and the end its lines have."""
    lines = text.splitlines(keepends=True)
    return lines, "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """Each table of a file's lines: its header's line and the line of the next header (or the end)."""
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("[")]
    return list(zip(starts, [*starts[1:], len(lines)][: len(starts)], strict=True))


def _write_checked(path: Path, table: str, target: Path, result: str, expected: dict[str, Any]) -> None:
    """Write ``result`` to ``target`` whole, once it reads back as ``expected``; else a ``UsageError`` and the file
    as it was."""
    try:
        after: object = tomllib.loads(result)
    except tomllib.TOMLDecodeError:
        after = None
    if after is None or _pruned(after) != _pruned(expected):
        raise _not_rewritten(path, table)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_file(target, result.encode("utf-8"), force=True)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def _header(line: str) -> tuple[str, ...] | None:
    """The key of a table header (``[a."b c".d]``) as TOML reads it; None for an array of tables or a line that
    is not a header."""
    match = _TABLE.match(line)
    if match is None:
        return None
    try:
        data: object = tomllib.loads(f"[{match.group(1)}]")
    except tomllib.TOMLDecodeError:
        return None
    key = []
    while isinstance(data, dict) and len(data) == 1:
        ((name, data),) = data.items()
        key.append(name)
    return tuple(key)


def _parsed(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML ({e}): mend it first") from None


def _lookup(data: dict[str, Any], key: tuple[str, ...]) -> object:
    for part in key:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _with(data: dict[str, Any], key: tuple[str, ...], table: dict[str, Any] | None) -> dict[str, Any]:
    """``data`` with the value at ``key`` set to the one ``table`` holds there (None: removed)."""
    out = copy.deepcopy(data)
    node = out
    for part in key[:-1]:
        node = node.setdefault(part, {})
    if table is None:
        del node[key[-1]]
    else:
        node[key[-1]] = _lookup(table, key)
    return out


def _pruned(data: object) -> object:
    """``data`` without its empty tables (``[mcp.servers]`` with nothing under it means nothing)."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in ((k, _pruned(v)) for k, v in data.items()) if v != {}}


def server_table(entry: McpServerEntry) -> str:
    """The lines of a ``[mcp.servers.NAME]`` table for ``entry`` (the keys that differ from the defaults)."""
    data = entry.model_dump(exclude_defaults=True)
    lines = []
    for key, value in data.items():
        lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    raise UsageError(f"cannot write {value!r} to TOML")


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string: every character as it is but the quote, the backslash and the controls
    TOML forbids there (JSON's escapes are not all TOML's: ``\\ud83d`` pairs, a raw DEL)."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif (code < 0x20 and char != "\t") or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:  # (a byte that was not UTF-8, as Python hands it over)
            raise UsageError(f"{text!r} is not UTF-8 text: give the value as UTF-8")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
