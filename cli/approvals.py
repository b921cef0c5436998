"""What the shell and the editor show of a call that asks for approval, and what "allow for this
session" covers: one answer for both front ends (``judge``).

An approval covers exactly what the user saw. The rule is computed from the call as it will run (never
from its redacted form), and it is narrow: a shell command covers itself, except a command of a known
read-only family (``git status``, ``ls``, ``grep`` ...), which covers the same family; a command that
chains, pipes, redirects, substitutes, globs, comments, sets variables or wraps another program (``sh -c``,
``env``, ``find -exec``, ``python -m``) covers only itself, as written; so does a command holding any
character outside printable ASCII, space and tab (a letter of another alphabet, which may look like one of
ours), which bash and a shell-words parser may read differently; a command holding a character a terminal
does not print (a carriage return, a form feed, a no-break space, a zero-width or bidirectional mark), which
can hide what it says, is shown with it escaped and is never covered; a sandboxed approval never covers a
run outside the sandbox. A file write covers the file it lands in (its real path, links followed as the tool
follows them), never one in ``.git``, ``.zero``, ``.husky``, ``.vscode``, ``.github``, ``.envrc`` ...
(``PROTECTED``: what git, Zero, an editor, direnv or CI runs by itself). An edit is shown as the write tool
computes it (``plan_edit``), and the approval pins what was shown, so the tool writes nothing else. A request
whose shown form hides shell syntax behind a mask, or whose change a mask hides, or whose change cannot be
shown, is never covered by a session allow. A file a tool saves whole (``CreateSpecialist``'s manifest, in
``.zero``) is shown as the diff its tool computes, and asked about every time.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zero.agent import ApprovalRequest
from zero.errors import ToolError
from zero.tools import PREVIEW_BYTES, EditPlan, Pin, Workspace, plan_edit

__all__ = [
    "CHANGE_HIDDEN",
    "HIDDEN_WARNING",
    "PROTECTED",
    "UNSEEN_WARNING",
    "Judgement",
    "Preview",
    "SessionRule",
    "call_text",
    "judge",
    "preview_of",
]

HIDDEN_WARNING = (
    "a secret in this call holds shell syntax, so what is shown is not all of what would run; "
    "it can be allowed once, never for the session"
)
UNSEEN_WARNING = (
    "this command holds characters a terminal does not show as they are ({}), escaped here; "
    "it can be allowed once, never for the session"
)
CHANGE_HIDDEN = (
    "a change in this edit is inside a secret, so the diff, masked, does not show it; "
    "it can be allowed once, never for the session"
)
# Folders and files that something runs without being asked (git its hooks and config, Zero a project's
# config, husky's hooks, an editor's tasks, direnv an .envrc, CI its workflows with the repository's
# secrets, pre-commit its hooks): a write there is asked about every time.
PROTECTED = (
    *(".git", ".zero", ".husky", ".vscode", ".idea", ".devcontainer", ".github", ".direnv"),
    *(".envrc", ".gitlab-ci.yml", ".pre-commit-config.yaml"),
)
# What makes more than one simple command of a shell line, lets the shell rewrite its words, or starts a
# comment (which a shell-words parser reads as a word).
_COMPOUND = re.compile(r"[;&|<>`$()\n\\#]")
_GLOB = re.compile(r"[*?\[\]{}~]")
# What bash and shlex read alike: printable ASCII, space and tab. Anything else may split words in one
# and not the other (shlex splits at a carriage return, bash does not) or look like what it is not.
_PLAIN = re.compile(r"[\x20-\x7e\t]*")
# Read-only command families: allowing one for the session allows the family (its first words). Options
# that make one of them write or run a program are refused from the family.
_READ_ONLY: dict[tuple[str, ...], tuple[str, ...]] = {
    **{(word,): () for word in ("cat", "head", "tail", "wc", "ls", "pwd", "stat", "du", "df", "grep", "echo")},
    ("rg",): ("--pre", "--hostname-bin", "--search-zip", "-z"),  # each runs a program: a filter, a decompressor
    **{("git", sub): ("--output", "--ext-diff", "--textconv") for sub in ("status", "log", "diff", "show", "blame")},
}


@dataclass(frozen=True)
class SessionRule:
    """What "allow for this session" covers: ``key`` matches later calls (from their arguments as they
    run); ``label`` says it to the user (from what was shown)."""

    key: str
    label: str


@dataclass(frozen=True, kw_only=True)
class Preview:
    """A write or edit as the user judges it: the file (as the workspace names it), its text before (None:
    a new file) and after, masked as everything shown is; or ``note`` in their place (the write fails, or its
    change cannot be shown)."""

    path: str
    file: str  # its real path (or, when it cannot be resolved, the path given, beneath the root)
    via: str = ""  # the path the call names, when it leads elsewhere (through a link)
    before: str | None = None
    after: str | None = None
    note: str = ""
    hidden: bool = False  # a change is inside a secret: the masked diff does not show it

    @property
    def shown(self) -> bool:
        return self.after is not None


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """How to ask about a request: what "for the session" would cover (None: it may only be allowed once),
    why not (``once``: said with the question), the edit's preview, and the pin an approval of it gives the
    tool."""

    rule: SessionRule | None
    once: tuple[str, ...] = ()
    preview: Preview | None = None
    pin: Pin | None = None


def judge(request: ApprovalRequest, workspace: Workspace, redact: Callable[[str], str]) -> Judgement:
    """How ``request`` is asked about, and what its answers cover."""
    plan = request.plan or plan_edit(workspace, request.shown.name, request.arguments)
    preview = None if plan is None else _preview(plan, workspace, redact)
    once = [HIDDEN_WARNING] if request.hidden else []
    if preview is not None and preview.hidden:
        once.append(CHANGE_HIDDEN)
    rule = None
    if plan is not None:
        rule, why = _edit_rule(plan, preview, workspace)
        once += [why] if why else []
    elif request.shown.name == "bash":
        rule = _command_rule(request)
        unseen = _unseen(request.arguments.get("command"))
        once += [UNSEEN_WARNING.format(unseen)] if unseen else []
    else:  # another tool (an MCP server's): the allow covers the tool, whatever its arguments, and says so
        rule = SessionRule(f"tool: {request.shown.name}", f"`{request.shown.name}` calls with any arguments")
    pin = None if plan is None else plan.pin
    return Judgement(rule=None if once else rule, once=tuple(once), preview=preview, pin=pin)


def preview_of(
    name: str, arguments: dict[str, Any], workspace: Workspace, redact: Callable[[str], str]
) -> Preview | None:
    """What a write or edit with ``arguments`` would change now (None: ``name`` is not a write tool)."""
    plan = plan_edit(workspace, name, arguments)
    return None if plan is None else _preview(plan, workspace, redact)


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """A call that is not an edit as the user judges it, whole: a command as it runs (escaped as ``visible``
    escapes it), any other call's arguments as JSON (every character outside printable ASCII escaped)."""
    command = arguments.get("command")
    if name == "bash" and isinstance(command, str):
        return visible(command)
    return json.dumps(arguments, indent=2, ensure_ascii=True, default=str)


# -- shell commands -------------------------------------------------------------------------------------


def _command_rule(request: ApprovalRequest) -> SessionRule | None:
    command, label = request.arguments.get("command"), request.shown.arguments.get("command")
    if not isinstance(command, str) or not isinstance(label, str):
        return None
    where = "outside the sandbox" if request.arguments.get("outside_sandbox") is True else "in the sandbox"
    family = _family(command) if where == "in the sandbox" else None
    if family is not None:
        return SessionRule(f"bash {where}: family {family}", f"`{family}` commands {where}")
    one_line = "\n" not in label.strip() and len(label) <= 60
    return SessionRule(
        f"bash {where}: {_exact(command)}",
        f"`{visible(label.strip())}` {where}" if one_line else f"this command {where}",
    )


def _family(command: str) -> str | None:
    """The read-only family ``command`` belongs to (``git status``), if it is a simple command of one."""
    if not _PLAIN.fullmatch(command) or _COMPOUND.search(command) or _GLOB.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for size in (2, 1):
        family = tuple(words[:size])
        if len(family) == size and family in _READ_ONLY:
            refused = _READ_ONLY[family]
            if refused and any(_refused(word, refused) for word in words[size:]):
                return None
            return " ".join(family)
    return None


def _refused(word: str, options: tuple[str, ...]) -> bool:
    """Is ``word`` one of ``options`` (``--pre``, ``--pre=x``), or a cluster of short ones holding one of them
    (``-iz`` holds ``-z``)?"""
    if word.startswith(tuple(o for o in options if o.startswith("--"))):
        return True
    short = {o[1] for o in options if len(o) == 2 and o[0] == "-" and o[1] != "-"}
    return word.startswith("-") and not word.startswith("--") and any(letter in short for letter in word[1:])


def _exact(command: str) -> str:
    """``command`` as one rule: its words (so spacing does not matter but quoting does), or, for a line the
    shell would split, rewrite or expand, or that a shell-words parser may read otherwise, the line itself,
    byte for byte."""
    if _PLAIN.fullmatch(command) and not _COMPOUND.search(command) and not _GLOB.search(command):
        try:
            return f"words {json.dumps(shlex.split(command))}"
        except ValueError:
            pass
    return f"line {json.dumps(command)}"


def _unseen(command: object) -> str:
    """The characters of ``command`` a terminal does not print as they are (newlines and tabs aside), escaped
    and listed once each (``\\r, \\u200b``); empty when there are none."""
    if not isinstance(command, str):
        return ""
    found = dict.fromkeys(c for c in command if c not in "\n\t" and not c.isprintable())
    return ", ".join(visible(c) for c in found)


def visible(text: str) -> str:
    """``text`` with each character bash and a reader may take otherwise (a carriage return, a no-break space,
    a letter of another alphabet) written as its escape (``\\r``, ``\\xa0``, ``\\u0455``); lines kept."""
    return "".join(c if c == "\n" or _PLAIN.fullmatch(c) else c.encode("unicode_escape").decode() for c in text)


# -- writes and edits -----------------------------------------------------------------------------------


def _edit_rule(plan: EditPlan, preview: Preview | None, workspace: Workspace) -> tuple[SessionRule | None, str]:
    """The rule of a write (the real path it lands at), or why it has none."""
    if plan.real is None:
        return None, ""
    if preview is None or (not preview.shown and not plan.error):
        return None, "a change that cannot be shown can be allowed once, never for the session"
    shown = _shown(plan.real, workspace)
    parts = Path(shown).parts if not Path(shown).is_absolute() else Path(plan.real).parts
    at = next((i for i, p in enumerate(parts) if p.casefold() in PROTECTED), None)
    if at is not None:
        place = parts[at].casefold() + ("/" if at < len(parts) - 1 else "")
        return None, f"a write in {place} is asked about every time (what is there runs by itself)"
    return SessionRule(f"edit: {plan.real}", f"edits of {visible(shown)}"), ""


def _shown(real: str, workspace: Workspace) -> str:
    """The real path ``real`` as the user names it: relative to the root it is in."""
    path = Path(real)
    for root in workspace.roots:
        if path == root or path.is_relative_to(root):
            relative = str(path.relative_to(root))
            return relative if root == workspace.root else str(root / relative)
    return real


def _preview(plan: EditPlan, workspace: Workspace, redact: Callable[[str], str]) -> Preview:
    """``plan`` as the user sees it: the texts before and after, masked, or why they are not shown."""
    path = _shown(plan.real, workspace) if plan.real is not None else plan.path
    file = plan.real or str(workspace.root / plan.path)
    via = plan.path if plan.real is not None and _named(plan.path, workspace) != path else ""
    if plan.error:
        return Preview(path=path, file=file, via=via, note=f"this call fails: {plan.error}")
    if plan.too_big:
        note = f"not shown: {path} is {plan.too_big:,} bytes, past {PREVIEW_BYTES:,}"
        return Preview(path=path, file=file, via=via, note=note)
    assert plan.after is not None
    try:
        before = None if plan.before is None else _text(plan.before)
        after = _text(plan.after)
    except ValueError as e:
        return Preview(path=path, file=file, via=via, note=f"not shown: {path} {e}")
    shown_before, shown_after = (None if before is None else redact(before)), redact(after)
    hidden = _masked_change(before or "", after, redact)
    return Preview(path=path, file=file, via=via, before=shown_before, after=shown_after, hidden=hidden)


def _named(path: str, workspace: Workspace) -> str:
    """``path`` tidied as written (``a/../b`` is ``b``), links not followed."""
    try:
        return workspace.shown(path)
    except ToolError:
        return path


def _text(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ValueError("is a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None


def _masked_change(before: str, after: str, redact: Callable[[str], str]) -> bool:
    """Is a change from ``before`` to ``after`` invisible once both are masked (inside a secret)?"""
    if before == after:
        return False
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    chunks = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    return redact(before) == redact(after) or any(
        redact("".join(old[a:b])) == redact("".join(new[c:d])) for tag, a, b, c, d in chunks if tag != "equal"
    )
