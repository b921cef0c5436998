"""Secret redaction, applied before text reaches the model, the terminal, a pipe or the disk.

Two kinds of secrets are masked: the token formats of the major services (below), and the
values of environment variables whose names say they are secret (``*_KEY``, ``*_TOKEN``,
``*_SECRET``, ``*PASSWORD``, ``*CREDENTIALS``, ...) and are at least 8 characters long.
Redaction applies to values, never to the keys or the structure of a record (``values``),
and text that arrives in pieces goes through a ``StreamRedactor``, so that a secret split
across two pieces is masked too. A mask never hides shell syntax: within a match, only the runs of
characters a secret is made of are masked, so ``https://u:tok;rm -rf x;@host`` still shows its ``;``
and spaces (``hides_syntax`` says whether a text's secrets held any, for an approval to warn).
"""

from __future__ import annotations

import base64
import bisect
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MASK",
    "Redactor",
    "StreamRedactor",
    "hides_syntax",
    "mask_across",
    "redact",
    "redact_values",
    "secret_name",
]

MASK = "[REDACTED]"
# What a shell reads as syntax: a mask keeps these visible, so redaction never hides a command's structure.
_SYNTAX_CHARS = r"""\s;&|<>()$`'"{}\[\]*?#\\"""
_SYNTAX = re.compile(f"[{_SYNTAX_CHARS}]")
_NOT_SYNTAX = re.compile(f"[^{_SYNTAX_CHARS}]+")
# What a mask may not hide from an approval: shell syntax, and a path's way up (``..``), which would put a
# write shown inside the workspace somewhere else.
_HIDING = re.compile(f"[{_SYNTAX_CHARS}]|\\.\\.")


@dataclass(frozen=True, kw_only=True)
class _Format:
    """A token format: its pattern, the group holding the secret (0: all of it), and the lowercase
    strings one of which a text must hold for the pattern to have a chance (a quick check first)."""

    name: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]
    group: int = 0
    exact: bool = False  # the triggers are matched as written, not against the lowercased text
    valid: Callable[[str], bool] | None = None  # a check of what matched, where a pattern cannot say enough

    def secrets(self, text: str) -> Iterator[re.Match[str]]:
        """The matches in ``text`` that are secrets."""
        for match in self.pattern.finditer(text):
            if self.valid is None or self.valid(match.group(self.group)):
                yield match


def _f(
    name: str,
    pattern: str,
    *triggers: str,
    group: int = 0,
    exact: bool = False,
    valid: Callable[[str], bool] | None = None,
) -> _Format:
    return _Format(name=name, pattern=re.compile(pattern), triggers=triggers, group=group, exact=exact, valid=valid)


def _basic_credentials(value: str) -> bool:
    """Base64 of ``user:password`` (not a word that follows "Basic" in prose)."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError:
        return False
    return b":" in decoded and decoded.isascii() and decoded.decode().isprintable()


def _mixed(value: str) -> bool:
    """Upper and lower case letters and a digit: a random key, not a word or a hex digest."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)


_PEM_BODY = r"[A-Za-z0-9+/=\s:,.\\-]"  # what the body of a PEM block holds (also JSON-encoded: \n)
# Also inside JSON-encoded text (key\": \"value). Each run of spaces is bounded, so that a stream knows how far
# back an opener can start (``_OPENER_REACH``): 32 is wider than any alignment of a config file's columns.
_SEP = r"""\\?["']?\s{0,32}[:=]\s{0,32}\\?["']?"""
FORMATS: tuple[_Format, ...] = (
    _f("openai and anthropic", r"sk-[A-Za-z0-9_-]{20,}", "sk-"),
    _f("stripe", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", "_live_", "_test_"),
    _f("github", r"\bgh[pousr]_[A-Za-z0-9]{30,}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _f("github fine-grained", r"github_pat_[A-Za-z0-9_]{22,}", "github_pat_"),
    _f(
        "gitlab",
        r"\bgl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_-]{20,}",
        "glpat-",
        "gldt-",
        "glrt-",
        "glptt-",
        "glcbt-",
        "glsoat-",
    ),
    _f(
        "aws secret access key after its key id",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b[^A-Za-z0-9/+=]{1,40}+(?:[^\n]{0,80}?[^A-Za-z0-9/+=])?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        "AKIA",
        "ASIA",
        group=1,
        exact=True,
        valid=_mixed,
    ),
    _f(
        "aws access key id",
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
        *("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
        exact=True,
    ),
    _f(
        "aws secret access key",
        rf"(?i)\b(aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)({_SEP})([A-Za-z0-9/+=]{{40}})(?![A-Za-z0-9/+=])",
        "secret",
        group=3,
    ),
    _f("slack", r"\bxox[abprse]-[A-Za-z0-9-]{10,}", "xox"),
    _f("slack webhook", r"hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}", "hooks.slack.com"),
    _f("google api key", r"AIza[0-9A-Za-z_-]{35}", "aiza"),
    _f("google oauth", r"\bya29\.[0-9A-Za-z_-]{20,}", "ya29."),
    _f("npm", r"\bnpm_[A-Za-z0-9]{36}\b", "npm_"),
    _f("hugging face", r"\bhf_[A-Za-z0-9]{30,}", "hf_"),
    _f("pypi", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", "pypi-"),
    _f("sendgrid", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{20,}", "sg."),
    _f("mailgun", r"\bkey-[0-9a-f]{32}\b", "key-"),
    _f("digitalocean", r"\bdo[opr]_v1_[a-f0-9]{64}\b", "_v1_"),
    _f("shopify", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", "shp"),
    _f("databricks", r"\bdapi[a-f0-9]{32}\b", "dapi"),
    _f("docker hub", r"\bdckr_pat_[A-Za-z0-9_-]{20,}", "dckr_pat_"),
    _f("linear", r"\blin_api_[A-Za-z0-9]{32,}", "lin_api_"),
    _f("telegram bot", r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b", ":aa"),
    _f("discord webhook", r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}", "discord"),
    _f("azure storage", r"(?i)\b(accountkey)(=)([A-Za-z0-9+/=]{40,})", "accountkey=", group=3),
    _f("age", r"\bAGE-SECRET-KEY-1[A-Z0-9]{50,}", "age-secret-key-"),
    _f("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyj"),
    _f(
        "private key",
        # The body is what a key block is made of (base64, its headers, line breaks), so a "block" holding
        # anything else (a command between two echoed marker lines) is not masked whole; a body ends at the
        # next "-----", so that many BEGIN lines with no END cost one pass, not one each.
        rf"-----BEGIN [A-Z ]{{0,40}}PRIVATE KEY-----(?:(?!-----){_PEM_BODY}){{0,16384}}"
        r"-----END [A-Z ]{0,40}PRIVATE KEY-----",
        "private key",
    ),
    _f("bearer", r"(?i)(\bbearer\s{1,32})([A-Za-z0-9._~+/-]{16,}=*)", "bearer", group=2),
    _f(
        "http basic header",
        r"(?i)(authorization\s{0,32}:\s{0,32}basic\s{1,32})([A-Za-z0-9+/]{8,}={0,2})",
        "basic",
        group=2,
    ),
    _f(
        "basic credentials",
        r"\b(Basic\s{1,32})([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
        "basic",
        group=2,
        valid=_basic_credentials,
    ),
    # Every part bounded, and a scheme only where a word starts: a long run of letters costs one pass, not
    # one per letter (which made 160 kB of output take minutes).
    _f(
        "credentials in a url",
        r"(?i)((?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://[^/\s:@]{1,256}:)([^/\s@]{1,1024})(@)",
        "://",
        group=2,
    ),
    _f(
        "assigned secret",
        r"(?i)\b(api[_-]?key|apikey|access[_-]?token|auth[_-]?token|secret[_-]?key|client[_-]?secret|password|passwd)"
        rf"({_SEP})(?=[A-Za-z0-9._~+/=-]{{0,256}}\d)([A-Za-z0-9._~+/=-]{{12,}})",  # (a digit in its first 256)
        "key",
        "token",
        "secret",
        "pass",
        group=3,
    ),
)


def _trie(words: Iterable[str]) -> str:
    """A pattern matching any of ``words``, their common starts written once (``sk-|sg.`` as ``s(?:k-|g\\.)``):
    Python's ``re`` tries every branch of an alternation at every position, so 49 flat branches cost ~0.5 us a
    character, where a trie costs one branch a position."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + pattern(rest) for char, rest in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and "" not in node else f"(?:{'|'.join(branches)})"
        return body + "?" if "" in node else body  # (greedy: the longest word first)

    return pattern(tree)


# Any trigger of any format, in text folded as ``_fold`` does (a superset of the exact ones), so most text is
# let through after a single scan instead of one per trigger. Case-sensitive on folded text: ``re.IGNORECASE``
# makes every position cost ten times as much.
_ANY_TRIGGER = re.compile(_trie(sorted({t.lower() for fmt in FORMATS for t in fmt.triggers})))
# The characters besides a letter's own cases that ``re.IGNORECASE`` takes for an ASCII letter (the (?i) formats
# match them): dotted and dotless I, the long s, the Kelvin sign.
_FOLDS = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _fold(text: str) -> str:
    """``text`` lowercased, with every character ``re.IGNORECASE`` matches to an ASCII letter made that letter: a
    trigger is found in it wherever a (?i) format could match."""
    if not text.isascii():
        for odd, letter in _FOLDS:  # (four searches: str.translate looks up every character)
            if odd in text:
                text = text.replace(odd, letter)
    return text.lower()


_Found = tuple[int, int, int, int, bool]  # a secret's start and end, its match's, whether it is masked whole
# The texts kept as clean: how long each at most, and how many characters in all (a system prompt, a tool's
# output or a file read again is written to a log after it was shown: each is scanned once).
_CLEAN_LENGTH, _CLEAN_CHARS = 65536, 1 << 20
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|SECRETS|PASSWORD|PASSWD|PASS|PWD|CREDENTIAL|CREDENTIALS|AUTH)$", re.I)
_NOT_SECRET_ENV = {"PWD", "OLDPWD", "XAUTHORITY"}


def secret_name(name: str) -> bool:
    """Does the environment variable ``name`` say its value is a secret (``*_KEY``, ``*_TOKEN``, ...)?"""
    return bool(_SECRET_ENV.search(name)) and name.upper() not in _NOT_SECRET_ENV


class Redactor:
    """Masks well-known token formats and the values of secret-looking environment variables."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, values: Iterable[str] = ()):
        """The secrets of ``environ`` (this process's environment if None), and ``values`` (at least 8
        characters long: shorter ones would mask common words) whatever their names."""
        env = os.environ if environ is None else environ
        values = {v for v in values if len(v) >= 8} | {v for k, v in env.items() if secret_name(k) and len(v) >= 8}
        # Longest first, so a value containing another is masked whole.
        self.literals = sorted(values, key=len, reverse=True)
        self._clean: dict[str, None] = {}  # texts found clean (redaction is a function of the text alone)
        self._clean_chars = 0

    def __call__(self, text: str) -> str:
        if text in self._clean:  # a text seen clean before (a session id, a status, a system prompt): clean still
            return text
        out = self._redact(text)
        if out is text and len(text) <= _CLEAN_LENGTH:
            if self._clean_chars + len(text) > _CLEAN_CHARS:
                self._clean.clear()
                self._clean_chars = 0
            self._clean[text] = None
            self._clean_chars += len(text)
        return out

    def _redact(self, text: str) -> str:
        # Every secret is found in the text as it came, and their union masked at once: masking one format's
        # matches before looking for the next would let a mask break a later match (a key block holding what
        # looks like a Google key, a URL after a Basic value) and show the rest of its secret.
        found = self._found(text)
        if not found:
            return text
        out, at = [], 0
        for start, end, whole in _union(found):
            out.append(text[at:start])
            # A literal and a key block are masked whole; elsewhere only what a secret is made of, so that
            # the syntax stays visible.
            out.append(MASK if whole else _NOT_SYNTAX.sub(MASK, text[start:end]))
            at = end
        out.append(text[at:])
        return "".join(out)

    def values(self, value: Any) -> Any:
        """``value`` (a JSON-like structure) with every string in it redacted; keys are left alone."""
        return redact_values(self, value)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where in ``text`` there are secrets to mask: (start, end) of each."""
        return [(start, end) for start, end, _, _, _ in self._found(text)]

    def matches(self, text: str) -> list[tuple[int, int]]:
        """Where in ``text`` the matches holding secrets are, their openers included (``password = ``, a key
        id): (start, end) of each."""
        return [(start, end) for _, _, start, end, _ in self._found(text)]

    def _found(self, text: str) -> list[_Found]:
        """Each secret in ``text``: (start, end) of the secret, then of its match, and whether it is masked
        whole (a literal, a key block)."""
        found = []
        for value in self.literals:
            start = text.find(value)
            while start >= 0:
                found.append((start, start + len(value), start, start + len(value), True))
                start = text.find(value, start + 1)
        folded = _fold(text)
        if not _ANY_TRIGGER.search(folded):  # one scan for the common case: no format can match
            return found
        for fmt in _triggered(text, folded):
            for m in fmt.secrets(text):
                if m.start(fmt.group) < m.end(fmt.group):
                    found.append((*m.span(fmt.group), *m.span(), fmt.name == "private key"))
        return found


def _triggered(text: str, folded: str) -> list[_Format]:
    """The formats whose triggers ``text`` holds (``folded``: as ``_fold`` makes it): the only ones that can
    match in it."""
    return [fmt for fmt in FORMATS if any(t in (text if fmt.exact else folded) for t in fmt.triggers)]


def hides_syntax(redact: Callable[[str], str], value: Any) -> bool:
    """Does a secret ``redact`` finds in ``value`` (a string, or the strings of a JSON-like structure) hold
    shell syntax (``;``, ``$``, a space, ...) or a path's way up (``..``)? Then its redacted form is not the
    whole truth of what would run, and an approval of it must say so."""
    if isinstance(value, dict | list | tuple):
        return any(hides_syntax(redact, v) for v in (value.values() if isinstance(value, dict) else value))
    if not isinstance(value, str):
        return False
    spans = getattr(redact, "spans", None) or _shared().spans
    return any(_HIDING.search(value, start, end) for start, end in spans(value))


def mask_across(pieces: list[str], redact: Callable[[str], str]) -> list[str]:
    """``pieces`` (the parts of one text, such as a tool result's content items) with each secret that spans
    two or more of them masked in every piece it touches; each piece is still to be redacted on its own."""
    spans = getattr(redact, "spans", None) or _shared().spans
    joined = "".join(pieces)
    ends = list(itertools.accumulate(len(p) for p in pieces))
    crossing = [(a, b) for a, b in spans(joined) if any(a < end < b for end in ends)]
    if not crossing:
        return pieces
    out = []
    for start, piece in zip([0, *ends], pieces, strict=False):
        cut = [(max(a, start) - start, min(b, start + len(piece)) - start) for a, b in crossing]
        for a, b in sorted((c for c in cut if c[0] < c[1]), reverse=True):
            piece = piece[:a] + MASK + piece[b:]
        out.append(piece)
    return out


def redact_values(redact: Callable[[str], str], value: Any) -> Any:
    """``value`` (a JSON-like structure) with every string in it redacted, never its keys or shape."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_values(redact, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(redact, v) for v in value]
    return value


def _union(found: list[_Found]) -> list[tuple[int, int, bool]]:
    """The secrets of ``found`` (see ``Redactor._found``) merged where they overlap or touch: (start, end, and
    whether to mask it whole: a literal or a key block is part of it)."""
    merged: list[tuple[int, int, bool]] = []
    for start, end, _, _, whole in sorted(found):
        if merged and start <= merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2] or whole)
        else:
            merged.append((start, end, whole))
    return merged


# A secret may follow these across a space: "Bearer <token>", "password: <value>", a private key. Written
# backwards, to be matched at the start of the folded text before a space read backwards (anchored, so a hostile
# stream of openers costs one short match a space, not a search of every start). Each run of spaces is taken
# whole (``*+``), and what may stand between a key and its value (quotes, backslashes, ``:``, ``=``, spaces: more
# than a format allows) as one run: written as optional runs around the quote and the ``=``, 80 spaces of
# indentation took 9 ms to try every way of splitting them.
_OPENER_BACKWARDS = re.compile(
    r"""(\s*+)(?:reraeb|cisab|[\s:]*+noitazirohtua|[\s"'\\:=]*+(?:yek[_-]?ipa|yekipa|nekot[_-]?ssecca|nekot[_-]?htua|"""
    r"""yek[_-]?terces|terces[_-]?tneilc|drowssap|dwssap|yek_?ssecca_?terces))"""
)
# A key id: the secret access key that ``FORMATS`` finds after one starts within this many characters of its end.
_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_KEY_ID_REACH = 121
# A key block still coming: its first line so far, or that line and a body so far.
_PEM_OPEN = re.compile(rf"-----BEGIN(?:[A-Z -]{{0,57}}|[A-Z ]{{0,41}}PRIVATE KEY-----{_PEM_BODY}*)$")
# How far back from a space an opener is looked for: the longest (``aws_secret_access_key\": `` with 32 spaces on
# each side of its ``:``) is 84 characters, and the secret after a key id starts at most 121 after its end.
_OPENER_REACH = 144
_MAX_HELD = 32_768  # a word this long is cut anyway, keeping its last 8 kB held back
_KEEP = 8_192
_LONGEST = 16_384 + 160  # the longest match worth holding whole: a key block, its body of 16 kB and two lines
_SPACE = (" ", "\n", "\t", "\r")
_WHITESPACE = re.compile("[ \n\t\r]")


class StreamRedactor:
    """Redacts text that arrives in pieces (a model's streamed answer): what it returns never holds
    a secret, not even one split across pieces. It holds back the end of the text that could still
    be the start of a secret (the last word, or a word such as ``Bearer`` and what follows it) until
    more text shows where it ends; ``flush`` returns the rest."""

    def __init__(self, redact: Callable[[str], str]):
        self.redact = redact
        self.pending = ""
        literals = getattr(redact, "literals", [])
        self._spaced = [v for v in literals if any(s in v for s in _SPACE)]
        # The starts of those that end at a space (a cut after it may split the value), by their last 8
        # characters or less: a space is looked up, not compared with every start of every value.
        self._starts: dict[str, list[str]] = {}
        for value in self._spaced:
            for i in (i for i, char in enumerate(value[:-1]) if char in _SPACE):
                self._starts.setdefault(value[max(0, i - 7) : i + 1], []).append(value[: i + 1])
        self._tails = sorted({len(tail) for tail in self._starts})
        # Whether a secret can continue past a space depends only on the text before it: so each space is
        # judged once (those before ``_checked`` in ``pending`` were judged unsafe), against the end of
        # what was let through (``_context``), and a hostile stream costs a linear walk, not a quadratic one.
        self._window = max([_OPENER_REACH, *map(len, self._spaced)])
        self._context = ""
        self._checked = 0

    def feed(self, piece: str) -> str:
        self.pending += piece
        cut = self._safe_cut(self.pending)
        head, self.pending = self.pending[:cut], self.pending[cut:]
        self._checked -= cut
        if not head:
            return ""
        self._context = (self._context + head)[-self._window :]
        return self.redact(head)

    def flush(self) -> str:
        rest, self.pending, self._checked = self.pending, "", 0
        self._context = (self._context + rest)[-self._window :]
        return self.redact(rest) if rest else ""

    def _safe_cut(self, text: str) -> int:
        """The end of the longest start of ``text`` after which no secret can continue; every space after it
        is judged unsafe from then on (``_checked``)."""
        seen = self._context + text  # (the end of the text let through, then ``text``)
        base, end = len(self._context), len(text)
        # Folded once, from the reach of the first space still to judge: each space's window is a slice of it (a
        # fold keeps every character's place).
        start = max(0, base + self._checked - _OPENER_REACH)
        window = seen[start:]
        folded = _fold(window)
        ids = [start + m.end() for m in _KEY_ID.finditer(window)] if "AKIA" in window or "ASIA" in window else []
        begin = text.rfind("-----BEGIN")
        opened = end  # the spaces from here on follow an opener (found at a space after them, the run between)
        for cut in reversed([m.start() for m in _WHITESPACE.finditer(text, self._checked)]):
            if cut >= min(end, opened):  # inside a key block (below), or after an opener
                continue
            stop = base + cut + 1  # the cut, in ``seen``
            if ids and _within(ids, stop, _KEY_ID_REACH):
                continue
            if opener := _OPENER_BACKWARDS.match(folded[max(0, stop - _OPENER_REACH - start) : stop - start][::-1]):
                opened = cut + 1 - opener.end(1)  # (each space of its run is after the opener too: not tried again)
                continue
            if self._starts and self._splits_literal(seen, stop):
                continue
            while begin > cut:
                begin = text.rfind("-----BEGIN", 0, begin)
            if begin >= 0 and _PEM_OPEN.match(text, begin, cut + 1):  # a key block still open here is open
                end, begin = begin, text.rfind("-----BEGIN", 0, begin)  # at every space since its first line
                continue
            self._checked = len(text)
            return cut + 1
        self._checked = len(text)
        return self._outside_secrets(text, len(text) - _KEEP) if len(text) > _MAX_HELD else 0

    def _splits_literal(self, seen: str, stop: int) -> bool:
        """Does ``seen`` end at ``stop`` with the start of a secret value that holds a space?"""
        for tail in self._tails:
            for start in self._starts.get(seen[max(0, stop - tail) : stop], ()):
                if stop >= len(start) and seen.startswith(start, stop - len(start)):
                    return True
        return False

    def _outside_secrets(self, text: str, cut: int) -> int:
        """``cut`` moved back to the start of a match it would split (cutting a word too long to hold), its
        opener included (``password = ``, a key id), and of a key block still open there: the first part would
        be masked, but what follows the cut would not be recognised as a secret."""
        matches = getattr(self.redact, "matches", None) or getattr(self.redact, "spans", None)
        found = matches(text) if matches else []
        begin = text.rfind("-----BEGIN", 0, cut + len("-----BEGIN") - 1)  # (its first line perhaps cut too)
        if 0 <= begin < cut and _PEM_OPEN.match(text, begin):  # a key block open to the end: across the cut
            found.append((begin, len(text)))
        # Back at most as far as the longest key block (``FORMATS``: a body of 16 kB): what goes out is still 7 kB
        # or more, and a "secret" longer than that is split too, so that a hostile stream costs a linear walk.
        for start, end in sorted(found, reverse=True):
            if start < cut < end and start >= cut - _LONGEST:
                cut = start
        return cut


def _within(ends: list[int], stop: int, reach: int) -> bool:
    """Does one of ``ends`` (ascending) lie at most ``reach`` characters before ``stop``?"""
    i = bisect.bisect_right(ends, stop)
    return i > 0 and ends[i - 1] >= stop - reach


_default: Redactor | None = None


def _shared() -> Redactor:
    global _default
    if _default is None:
        _default = Redactor()
    return _default


def redact(text: str) -> str:
    """Redact ``text`` with a redactor built once from this process's environment."""
    return _shared()(text)
