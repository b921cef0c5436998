"""Strict files: manifests, team files, scripts and config read one way.

A file is read as UTF-8 TOML (or JSON) and checked against a pydantic model whose unknown
keys are errors. Every problem of the file is reported at once, each with the file, the
line of the key, and a "did you mean" for a misspelt key; nothing is ever half-loaded.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from zero.errors import ConfigError, did_you_mean

__all__ = [
    "MAX_FILE",
    "NAME_PATTERN",
    "NAME_RULE",
    "FileError",
    "KeyLines",
    "NotAFile",
    "Problem",
    "load_model",
    "place",
    "spare_file",
    "open_file",
    "parse_data",
    "read_data",
    "read_file",
    "validate_model",
    "write_file",
]

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,63}$"
"""Names of specialists, teams and members."""
NAME_RULE = "use lowercase letters, digits and dashes, starting with a letter (at most 64)"

M = TypeVar("M", bound=BaseModel)
Loc = tuple[str | int, ...]


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong with a file: where (file, line, key, what it is about) and what."""

    path: str
    message: str
    line: int | None = None
    key: str | None = None
    subject: str | None = None  # e.g. "member 'reviewer'"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.subject + ': ' if self.subject else ''}{self.message}"


class FileError(ConfigError):
    """A file with problems; ``problems`` lists every one of them."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


MAX_FILE = 1024 * 1024  # a config, manifest or team file is a few kB; a larger one is not one of them


def read_data(path: Path, raw: bytes | None = None) -> tuple[dict[str, Any], str]:
    """The file's data and text: JSON for ``.json``, else TOML (``raw``: its bytes, read already). Raises
    ``FileError`` saying what is wrong."""
    raw = _read_file(path) if raw is None else raw
    if len(raw) > MAX_FILE:
        raise FileError(
            [Problem(path=str(path), message=f"is over {MAX_FILE // 1024:,} kB: not a config, manifest or team file")]
        )
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")  # (the byte-order mark some editors begin a file with)
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise FileError(
            [Problem(path=str(path), message=f"is not UTF-8 text (byte {raw[e.start]:#04x})", line=line)]
        ) from None
    return parse_data(text, path), text


class NotAFile(OSError):
    """The path names a folder, a FIFO, a device or a socket where a regular file was expected."""


def open_file(path: Path, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of the regular file at ``path``, opened (``flags``, ``mode``) without ever waiting: a FIFO
    or a device in its place (a link to /dev/zero, which a repository can ship or a command can plant) is
    refused with ``NotAFile``, never waited on or read."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, mode)
    st_mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(st_mode) else "a FIFO, a device or a socket"
        raise NotAFile(errno.EINVAL, f"is {kind}, not a file", str(path))
    os.set_blocking(fd, True)
    return fd


def read_file(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (see ``open_file``): all of them, or at most ``limit``."""
    with os.fdopen(open_file(path), "rb", buffering=0) as f:
        if limit is None:
            return f.read()
        chunks, size = [], 0
        while size < limit and (chunk := f.read(limit - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)


def write_file(path: Path, data: bytes, *, force: bool = False) -> None:
    """Make ``path`` a regular file holding ``data``, whole or not at all (a spare file beside it, renamed into
    place). Refused (an ``OSError`` whose ``strerror`` says why): a link at ``path`` (never followed: it may
    lead to /dev/stdout or your ~/.bashrc), a folder, FIFO, device or socket (as root a rename would replace
    /dev/null), and an existing file unless ``force``. A new file gets the usual mode (0644 less the umask),
    an overwritten one keeps its own."""
    _replaceable(path, force=force)
    with spare_file(path, data) as spare:
        place(spare, path, force=force)


@contextlib.contextmanager
def spare_file(path: Path, data: bytes) -> Iterator[Path]:
    """A new file beside ``path`` holding ``data`` (never one that is there: a link by that name could lead
    anywhere), removed on the way out unless ``place`` made it ``path``."""
    spare = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield spare
    finally:
        spare.unlink(missing_ok=True)


def place(spare: Path, path: Path, *, force: bool = False) -> None:
    """Make the ``spare_file`` ``path``, refused as ``write_file`` refuses (checked again now: what is at ``path``
    may have changed since)."""
    st = _replaceable(path, force=force)
    if st is None:
        os.link(spare, path)  # (fails if a file came there meanwhile: a new file never replaces one)
    else:
        os.chmod(spare, stat.S_IMODE(st.st_mode))  # an overwritten file keeps its mode
        os.replace(spare, path)


def _replaceable(path: Path, *, force: bool) -> os.stat_result | None:
    """What is at ``path``, if it is a regular file ``write_file`` may replace (None: nothing is there)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise NotAFile(errno.ELOOP, "is a link: give the file itself, or a new name", str(path))
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO, a device or a socket"
        raise NotAFile(errno.EINVAL, f"is {kind}, not a file", str(path))
    if not force:
        raise FileExistsError(errno.EEXIST, "already exists; pass --force to overwrite it", str(path))
    return st


def _read_file(path: Path) -> bytes:
    """A config file's bytes, at most ``MAX_FILE`` and one more (so that a bigger one is known to be)."""
    try:
        return read_file(path, MAX_FILE + 1)
    except IsADirectoryError:
        raise FileError([Problem(path=str(path), message="is a folder, not a file")]) from None
    except NotAFile as e:
        raise FileError([Problem(path=str(path), message=str(e.strerror))]) from None
    except OSError as e:
        raise FileError([Problem(path=str(path), message=f"cannot read: {e.strerror or e}")]) from e


def parse_data(text: str, path: Path) -> dict[str, Any]:
    """The data of a file's text: JSON for ``.json``, else TOML."""
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        found = re.search(r"line (\d+)", str(e))
        raise FileError(
            [Problem(path=str(path), message=f"not valid TOML: {e}", line=int(found.group(1)) if found else None)]
        ) from None
    except json.JSONDecodeError as e:
        raise FileError([Problem(path=str(path), message=f"not valid JSON: {e.msg}", line=e.lineno)]) from None
    except RecursionError:
        raise FileError([Problem(path=str(path), message="is nested too deeply to read")]) from None
    if not isinstance(data, dict):
        raise FileError([Problem(path=str(path), message="must hold a table of keys, not a list or a value")])
    return data


Subject = Callable[[Loc, dict[str, Any]], tuple[str | None, Loc]]
"""Given an error's location and the data, what it is about (e.g. "member 'b'") and the location to show."""


def validate_model(
    model: type[M],
    data: dict[str, Any],
    path: Path,
    text: str,
    *,
    subject: Subject | None = None,
    drop_unknown: bool = False,
) -> tuple[M | None, list[Problem]]:
    """Check ``data`` against ``model``: the model (or None) and every problem found.

    With ``drop_unknown``, unknown keys are reported and set aside so that the rest can still
    be checked and used (a team file is then planned and every other problem found too).
    """
    lines = KeyLines(text)
    try:
        return model.model_validate(data), []
    except ValidationError as e:
        problems = _by_line([_problem(model, path, lines, data, dict(err), subject) for err in e.errors()])
        unknown = [tuple(err["loc"]) for err in e.errors() if err["type"] == "extra_forbidden"]
        if not drop_unknown or len(unknown) < len(problems):
            return None, problems
    for loc in unknown:
        node: Any = data
        for part in loc[:-1]:
            node = node[part]
        node.pop(loc[-1], None)
    try:
        return model.model_validate(data), problems
    except ValidationError as e:
        more = [_problem(model, path, lines, data, dict(err), subject) for err in e.errors()]
        return None, _by_line(problems + more)


def _by_line(problems: list[Problem]) -> list[Problem]:
    """Problems in the order of the file (those without a line last)."""
    return sorted(problems, key=lambda p: p.line if p.line is not None else float("inf"))


def load_model(model: type[M], path: Path, *, subject: Subject | None = None) -> M:
    """Read and check a file; raise ``FileError`` listing every problem."""
    data, text = read_data(path)
    loaded, problems = validate_model(model, data, path, text, subject=subject)
    if loaded is None or problems:
        raise FileError(problems)
    return loaded


def _problem(
    model: type[BaseModel],
    path: Path,
    lines: KeyLines,
    data: dict[str, Any],
    err: dict[str, Any],
    subject: Subject | None,
) -> Problem:
    loc: Loc = tuple(err["loc"])
    about, shown = subject(loc, data) if subject else (None, loc)
    key = ".".join(str(p) for p in shown)
    line = lines.line_of(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        hint = did_you_mean(str(loc[-1]), _fields_at(model, loc[:-1]))
        return Problem(path=str(path), message=f"unknown key {key!r}{hint}", line=line, key=key, subject=about)
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == NAME_PATTERN:
        return Problem(
            path=str(path),
            message=f"{key} {err['input']!r} is not a valid name: {NAME_RULE}",
            line=line,
            key=key,
            subject=about,
        )
    if kind == "missing":
        return Problem(path=str(path), message=f"{key} is required", line=line, key=key, subject=about)
    if kind == "value_error":  # a validator's own words, without pydantic's "Value error, "
        return Problem(path=str(path), message=f"{key}: {err['ctx']['error']}", line=line, key=key, subject=about)
    return Problem(path=str(path), message=f"{key}: {err['msg']}", line=line, key=key, subject=about)


def _fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """The keys the model allows at ``loc`` (for "did you mean")."""
    current: Any = model
    for part in loc:
        current = _inner(current)
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            if typing.get_origin(current) in (list, tuple, dict):
                current = typing.get_args(current)[-1]
                continue
            return []
        field = current.model_fields.get(part)
        if field is None:
            return []
        current = field.annotation
    current = _inner(current)
    if typing.get_origin(current) in (list, tuple, dict):
        current = _inner(typing.get_args(current)[-1])
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _inner(annotation: Any) -> Any:
    """``X`` of ``X | None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


_KEY = r'(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')'
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_ARRAY_TABLE = re.compile(rf"^\s*\[\[\s*({_DOTTED})\s*\]\]")
_TABLE = re.compile(rf"^\s*\[\s*({_DOTTED})\s*\]")
_ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=")


def _parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(_KEY, dotted)]


class KeyLines:
    """Which line of a TOML text sets which key: ``("members", 1, "prompt")`` -> 14."""

    def __init__(self, text: str):
        self._lines: dict[Loc, int] = {}
        table: Loc = ()
        counts: dict[Loc, int] = {}
        quote: str | None = None
        for number, line in enumerate(text.splitlines(), 1):
            if quote is not None:  # inside a multi-line string
                if line.count(quote) % 2:
                    quote = None
                continue
            if match := _ARRAY_TABLE.match(line):
                base = tuple(_parts(match.group(1)))
                index = counts.get(base, 0)
                counts[base] = index + 1
                table = (*base, index)
                self._lines.setdefault(base, number)
                self._lines[table] = number
            elif match := _TABLE.match(line):
                named: Loc = tuple(_parts(match.group(1)))
                for array in sorted(counts, key=len, reverse=True):  # [members.x] is x of the last [[members]]
                    if named[: len(array)] == array and len(named) > len(array):
                        named = (*array, counts[array] - 1, *named[len(array) :])
                        break
                table = named
                self._lines.setdefault(table, number)
            elif match := _ASSIGN.match(line):
                self._lines.setdefault((*table, *_parts(match.group(1))), number)
                rest = line[match.end() :]
                for mark in ('"""', "'''"):
                    if rest.count(mark) % 2:
                        quote = mark
                        break

    def line_of(self, loc: Iterable[str | int]) -> int | None:
        """The line of ``loc``, or of its nearest enclosing key that has one."""
        path = tuple(loc)
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None
