"""Ownership: the files a member may write, as globs (``owns = ["src/api/**", "tests/api/**"]``).

A glob is a path relative to the workspace, anchored at its top, ``/`` between folders: ``*`` is any
run of characters within one name, ``?`` one character, ``[a-z]`` / ``[!a-z]`` a character in (or not
in) a set, ``**`` as a whole name any number of folders (none included), ``\\`` makes the next
character plain. A glob that matches a folder owns everything in it (``src/api`` is ``src/api/**``).

Two members' globs overlap when some path is owned by both; ``overlaps`` decides it exactly (no path
is tried: the globs are compared), so the scheduler never runs such members at the same time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Owns", "overlaps"]

_STAR = "**"


@dataclass(frozen=True)
class _Chars:
    """A set of characters: ``ranges`` (inclusive code points), or all but those when ``negated``."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def meets(self, other: _Chars) -> bool:
        """Whether some character is in both sets (the alphabet is infinite: two negations always meet)."""
        if self.negated and other.negated:
            return True
        if not self.negated and not other.negated:
            return any(a <= d and c <= b for a, b in self.ranges for c, d in other.ranges)
        plain, holes = (other, self) if self.negated else (self, other)
        return any(not _covered(lo, hi, holes.ranges) for lo, hi in plain.ranges)


_ANY = _Chars((), negated=True)


def _covered(lo: int, hi: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    """Whether ``[lo, hi]`` lies wholly inside the union of ``ranges``."""
    for a, b in sorted(ranges):
        if a > lo:
            return False
        if b >= lo:
            lo = b + 1
            if lo > hi:
                return True
    return lo > hi


_Token = _Chars | None  # None: ``*``


def _tokens(name: str, glob: str) -> tuple[_Token, ...]:
    """One name of a glob as tokens: a character set for each character, ``None`` for ``*``."""
    found: list[_Token] = []
    i = 0
    while i < len(name):
        char = name[i]
        if char == "*":
            if not found or found[-1] is not None:  # ``**`` inside a name is ``*``
                found.append(None)
        elif char == "?":
            found.append(_ANY)
        elif char == "\\" and i + 1 < len(name):
            i += 1
            found.append(_Chars(((ord(name[i]), ord(name[i])),)))
        elif char == "[":
            chars, i = _bracket(name, i, glob)
            found.append(chars)
        else:
            found.append(_Chars(((ord(char), ord(char)),)))
        i += 1
    return tuple(found)


def _bracket(name: str, start: int, glob: str) -> tuple[_Chars, int]:
    """The set ``[...]`` opening at ``start``, and the index of its ``]``."""
    i = start + 1
    negated = i < len(name) and name[i] in "!^"
    i += negated
    ranges: list[tuple[int, int]] = []
    first = True
    while i < len(name) and (name[i] != "]" or first):
        first = False
        lo = name[i]
        if i + 2 < len(name) and name[i + 1] == "-" and name[i + 2] != "]":
            hi = name[i + 2]
            if ord(hi) < ord(lo):
                raise ValueError(f"owns glob {glob!r}: the range {lo}-{hi} is backwards (write {hi}-{lo})")
            ranges.append((ord(lo), ord(hi)))
            i += 3
        else:
            ranges.append((ord(lo), ord(lo)))
            i += 1
    if i >= len(name):
        raise ValueError(f"owns glob {glob!r}: '[' is not closed by ']' (write \\[ for a plain '[')")
    return _Chars(tuple(ranges), negated), i


def _names_meet(a: tuple[_Token, ...], b: tuple[_Token, ...]) -> bool:
    """Whether some file name matches both token strings."""

    @functools.cache
    def meet(i: int, j: int) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] is None and meet(i + 1, j):
            return True
        if j < len(b) and b[j] is None and meet(i, j + 1):
            return True
        if i == len(a) or j == len(b):
            return False
        x, y = a[i], b[j]
        if x is None and y is None:  # two stars taking a character would come back here: the moves above do
            return False
        if not (x or _ANY).meets(y or _ANY):
            return False
        # A ``*`` stays where it is after taking the character; a set moves on.
        return meet(i if x is None else i + 1, j if y is None else j + 1)

    return meet(0, 0)


def _name_regex(tokens: tuple[_Token, ...]) -> re.Pattern[str]:
    parts = []
    for token in tokens:
        if token is None:
            parts.append("[^/]*")
        else:
            body = "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in token.ranges)
            parts.append(f"[^/{body}]" if token.negated else f"[{body}]")
    return re.compile("".join(parts))


@dataclass(frozen=True, kw_only=True)
class _Glob:
    text: str
    names: tuple[tuple[_Token, ...] | None, ...]  # None: ``**``
    regexes: tuple[re.Pattern[str] | None, ...]

    @classmethod
    def parse(cls, text: str) -> _Glob:
        clean = text.strip().rstrip("/")
        if not clean:
            raise ValueError(f'owns glob {text!r} is empty: remove it, or name files ("src/api/**")')
        if clean.startswith("/") or any(part == ".." for part in clean.split("/")):
            raise ValueError(f"owns glob {text!r} must be a path inside the workspace (relative, without '..')")
        parts = [part for part in clean.split("/") if part not in ("", ".")]
        names = tuple(None if part == _STAR else _tokens(part, text) for part in parts)
        regexes = tuple(None if name is None else _name_regex(name) for name in names)
        return cls(text=text, names=names, regexes=regexes)

    def owns(self, path: Sequence[str]) -> bool:
        @functools.cache
        def match(i: int, k: int) -> bool:
            if i == len(self.names):
                return True  # a folder the glob matches owns everything in it
            if self.names[i] is None:
                return match(i + 1, k) or (k < len(path) and match(i, k + 1))
            regex = self.regexes[i]
            return k < len(path) and regex is not None and regex.fullmatch(path[k]) is not None and match(i + 1, k + 1)

        return match(0, 0)

    def meets(self, other: _Glob) -> bool:
        a, b = self.names, other.names

        @functools.cache
        def meet(i: int, j: int) -> bool:
            if i == len(a) or j == len(b):
                return True  # one glob owns a folder whose insides the other can still match
            x, y = a[i], b[j]
            if x is None and (meet(i + 1, j) or meet(i, j + 1)):
                return True
            if y is None and (meet(i, j + 1) or meet(i + 1, j)):
                return True
            return x is not None and y is not None and _names_meet(x, y) and meet(i + 1, j + 1)

        return meet(0, 0)


class Owns:
    """A member's ``owns`` globs (``ValueError`` naming a glob that cannot be one)."""

    def __init__(self, globs: Iterable[str]):
        self._globs = tuple(_Glob.parse(glob) for glob in globs)
        self.globs = tuple(glob.text for glob in self._globs)

    def owns(self, path: str) -> bool:
        """Whether ``path`` (relative to the workspace, ``/`` between folders) is owned; a path leading
        out of the workspace never is."""
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if path.startswith("/") or ".." in parts:
            return False
        return any(glob.owns(tuple(parts)) for glob in self._globs)

    def overlaps(self, other: Owns) -> list[tuple[str, str]]:
        """Each pair of globs (this one's, the other's) that own a path in common."""
        return [(a.text, b.text) for a in self._globs for b in other._globs if a.meets(b)]


def overlaps(a: Iterable[str], b: Iterable[str]) -> list[tuple[str, str]]:
    """Each pair of globs, one of ``a`` and one of ``b``, that own a path in common."""
    return Owns(a).overlaps(Owns(b))
