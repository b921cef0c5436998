"""``CreateSpecialist``: an agent drafts a specialist, saved in the project's folder as the user approved it.

The draft is a manifest's keys as the call's arguments (a JSON object, which tool-call APIs check and
constrain, where TOML inside a string leaves a model to escape a whole prompt by hand), written as the
TOML ``zero specialists new`` writes and checked by the manifest loader, so a bad draft is an error naming
the key and the fix. It is never wider than its caller: its tools (its categories expanded, and what it
extends) are tools the caller has itself; a manifest cannot set a permission mode or a depth (a specialist
runs in its caller's mode, below the run's ``max_depth``).

Its side effect is ``config``: asked about in every mode that asks, ``auto`` too (the shell and ACP show
the file's diff; no "allow for this session"), made unasked only in ``unsafe``, refused headless. A draft
whose text the redactor would mask is refused: what the user is shown must be all that is saved. Once
saved (whole or not at all), the run's registry is read again, so ``Task`` can start it at once; a draft the
user approved is trusted as approved (its tools and model as written, within the caller's).
"""

from __future__ import annotations

import copy
import functools
import posixpath
import re
import unicodedata
from collections.abc import Set
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import tomli_w

from zero.agent.output_schema import ANY_JSON
from zero.errors import ToolError
from zero.specialists.context import DELEGATE_TOOLS, AgentContext
from zero.specialists.manifest import NAME_PATTERN, Manifest, ManifestError, ManifestFile, Specialist
from zero.specialists.registry import builtin_dir
from zero.strictfile import MAX_FILE
from zero.tools import (
    EditPlan,
    SideEffect,
    ToolContext,
    ToolOutput,
    Workspace,
    pinned,
    plan_replace,
    replace_file,
)

__all__ = ["CreateSpecialist"]

FOLDER = ".zero/specialists"  # the project's folder, relative to its workspace
_NOT_MANIFEST = {  # what a draft cannot set, and why
    "permission_mode": "a specialist runs in its caller's permission mode",
    "max_depth": "a specialist delegates no deeper than the run's max_depth",
    "depth": "a specialist delegates no deeper than the run's max_depth",
    # What the user approves is all the specialist is: a base's tools, model and prompt would not be shown.
    "extends": "a drafted specialist is whole (what the user approves is all it is): write its own prompt and tools",
}
_DESCRIPTIONS = {
    "name": "The specialist's name: lowercase letters, digits and dashes, starting with a letter (at most 64).",
    "description": "One line: what it is for (the Task tool lists it to every agent).",
    "prompt": "Its system prompt: how it works and what its report must contain.",
    "tools": 'Categories ("read-only", "edit", "execute", "plan", "delegate") or tool names; at most your own '
    'tools. Default: ["read-only"].',
}


@dataclass(frozen=True, kw_only=True)
class _Draft:
    path: str  # in the workspace: .zero/specialists/NAME.toml
    text: str
    spec: Specialist  # as it resolves once written (before a project's narrowing)


class CreateSpecialist:
    """The tool; ``caller_tools``: those of the agent that holds it (the most a draft may have)."""

    name = "CreateSpecialist"
    description = (
        "Create a specialist (or change one of this project's): a new agent with its own prompt and tools, "
        "saved in .zero/specialists/ once the user approves the file, then available to Task at once. Give "
        "the manifest's keys; it can have at most your own tools."
    )
    side_effect: SideEffect = "config"
    approval_hint = "Saving a specialist always asks; run with --permission-mode unsafe to save it unasked."

    def __init__(self, ctx: AgentContext, *, caller_tools: Set[str]):
        self.ctx = ctx
        self.caller_tools = caller_tools
        root = ctx.registry.workspace or ctx.workspace.root  # the run's project, also for a child in a worktree
        self.workspace = Workspace([root])

    @property
    def parameters(self) -> dict[str, Any]:
        return _schema()

    def planned(self, arguments: dict[str, Any]) -> EditPlan:
        """What the call would save: the file's diff, or why it cannot be saved (asked before its approval)."""
        try:
            draft = self._draft(arguments)
        except ToolError as e:
            return EditPlan(path=_path(arguments), real=None, error=str(e))
        return plan_replace(self.workspace, draft.path, draft.text.encode())

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        draft = await anyio.to_thread.run_sync(self._draft, arguments)
        pin = pinned.get()  # set when the user approved this file (None: unasked, in unsafe)
        existed = await anyio.to_thread.run_sync(replace_file, self.workspace, draft.path, draft.text.encode(), pin)
        name, fingerprint = draft.spec.name, draft.spec.fingerprint
        if pin is not None and self.ctx.trust is not None:
            await anyio.to_thread.run_sync(self.ctx.trust, name, fingerprint)
        registry = self.ctx.registry
        await anyio.to_thread.run_sync(registry.reload, {name: fingerprint} if pin is not None else None)
        verb = "Replaced" if existed else "Created"
        spec = registry.specialists.get(name)
        if spec is None:
            problems = "; ".join(p.message for e in registry.errors for p in e.problems if p.path.endswith(draft.path))
            return ToolOutput(text=f"{verb} {draft.path}, but it does not load: {problems or 'it changed since'}")
        lines = [f"{verb} {draft.path}: the specialist {name!r} is ready; start it with Task (name {name!r})."]
        lines.append(f"tools: {', '.join(spec.tools)}")
        if pin is None:
            lines.append(f"Saved unasked, so not trusted: zero specialists trust {name} grants what it asks for.")
        lines += [f"narrowed: {note}" for note in spec.narrowed]
        return ToolOutput(text="\n".join(lines), changed_files=(draft.path,))

    def _draft(self, arguments: dict[str, Any]) -> _Draft:
        """The manifest ``arguments`` make, checked: a ``ToolError`` says what to change."""
        for key, why in _NOT_MANIFEST.items():
            if key in arguments:
                raise ToolError(f"{key}: {why}, so a draft cannot set it; drop {key} and call again")
        name = arguments.get("name")
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            raise ToolError(
                f"name: {name!r} is not a specialist's name; use lowercase letters, digits and dashes, starting "
                "with a letter (at most 64)"
            )
        if (builtin_dir() / f"{name}.toml").is_file():  # (one the user's own file replaces is built in too)
            raise ToolError(
                f"name: {name!r} is a built-in specialist, which a project's file of that name would replace for "
                "every Task and team here; choose another name"
            )
        schema = arguments.get("output_schema")
        if isinstance(schema, str) and schema != ANY_JSON:
            raise ToolError(
                'output_schema: give the schema itself (an object), or "json": a file it names would not be shown '
                "to the user who approves this one"
            )
        path = posixpath.join(FOLDER, f"{name}.toml")
        text = _toml(arguments)
        if hidden := sorted({f"U+{ord(c):04X}" for c in _strings(arguments) if _unshown(c)}):
            raise ToolError(
                f"the manifest holds characters a terminal does not show as they are ({', '.join(hidden[:5])}): "
                "the user would not see what is saved; take them out"
            )
        if len(text.encode()) > MAX_FILE:
            raise ToolError(f"the manifest is larger than {MAX_FILE // 1024} KiB; make its prompt shorter")
        if self.ctx.redactor(text) != text:
            raise ToolError(
                "the manifest holds text that looks like a secret (a key, a token, a password), which the user "
                "would be shown masked, so not what is saved; a manifest holds no secrets: take it out"
            )
        try:
            loaded = ManifestFile.parse(text, self.workspace.root / path, "project")
            spec = self.ctx.registry.resolve_draft(loaded)
        except ManifestError as e:
            problems = "; ".join(_problem(p.key, p.message) for p in e.problems)
            raise ToolError(f"the draft is not a valid manifest: {problems}. Fix it and call again") from None
        self._within(spec)
        return _Draft(path=path, text=text, spec=spec)

    def _within(self, spec: Specialist) -> None:
        """Refuse tools the caller does not have. (Its mode needs no check: a read-only caller cannot save one,
        and a specialist runs in its caller's mode, whatever its tools.)"""
        mine = set(self.caller_tools) | set(DELEGATE_TOOLS)
        wider = [t for t in spec.tools if not (self._mcp_within(t) if t.startswith("mcp") else t in mine)]
        inherited = f" (some from {spec.bases[0]}, which it extends)" if spec.bases else ""
        if wider:
            raise ToolError(
                f"tools: {', '.join(wider)}{inherited} would be more than you have yourself "
                f"({', '.join(sorted(self.caller_tools)) or 'none'}): a specialist you create gets at most your "
                "tools; drop them and call again"
            )

    def _mcp_within(self, item: str) -> bool:
        """Whether the caller has every MCP tool ``item`` names (``mcp:SERVER`` or ``mcp__SERVER__TOOL``)."""
        every = [t for tools in self.ctx.mcp.values() for t in tools]
        if item.startswith("mcp:"):
            named = list(self.ctx.mcp.get(item[4:], []))
        else:
            named = [t for t in every if item in (t.name, getattr(t, "full_name", t.name))]
        return bool(named) and all(t.name in self.caller_tools for t in named)


def _toml(arguments: dict[str, Any]) -> str:
    """The manifest's text: its keys in the manifest's order (unknown ones after, for the loader to name), the
    prompt last of the plain keys; a null is a key not set."""
    order = [*(k for k in Manifest.model_fields if k != "prompt"), "prompt"]
    rank = {key: at for at, key in enumerate(order)}
    keys = sorted((k for k, v in arguments.items() if v is not None), key=lambda k: rank.get(k, len(order)))
    try:
        return tomli_w.dumps({k: arguments[k] for k in keys}, multiline_strings=True)
    except (TypeError, ValueError) as e:
        raise ToolError(f"the draft cannot be written as TOML ({e}): give strings, numbers, lists, objects") from None
    except RecursionError:
        raise ToolError("the draft is nested too deeply to be written; flatten it") from None


def _strings(value: Any) -> str:
    """Every string in ``value`` (keys too), run together."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "".join(_strings(k) + _strings(v) for k, v in value.items())
    return "".join(_strings(v) for v in value) if isinstance(value, list) else ""


_BLANKS = frozenset("\u115f\u1160\u2800\u3164\uffa0")  # fillers and blanks that print as nothing


def _unshown(c: str) -> bool:
    """A character a terminal does not show as it is: a control one (an escape, a carriage return), a format one
    (bidi, zero-width), a line or paragraph separator, a private, unassigned or surrogate code point, a
    variation selector, or a blank filler."""
    if c in "\n\t":
        return False
    code = ord(c)
    return (
        unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs")
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or c in _BLANKS
    )


def _problem(key: str | None, message: str) -> str:
    return message if key is None or message.startswith(f"{key}:") else f"{key}: {message}"


def _path(arguments: dict[str, Any]) -> str:
    name = arguments.get("name")
    return posixpath.join(FOLDER, f"{name}.toml") if isinstance(name, str) else FOLDER


@functools.cache
def _schema() -> dict[str, Any]:
    """The manifest's keys as a JSON schema, with what a model needs to fill them (and nothing it does not:
    every agent that can delegate sends it with each call)."""
    schema: dict[str, Any] = _lean(copy.deepcopy(Manifest.model_json_schema()))
    schema.pop("description", None)
    for key, prop in schema["properties"].items():
        if key in _DESCRIPTIONS:
            prop["description"] = _DESCRIPTIONS[key]
    schema["required"] = ["name", "description", "prompt"]
    return schema


def _lean(node: Any) -> Any:
    """``node`` without pydantic's titles and null defaults."""
    if isinstance(node, dict):
        return {k: _lean(v) for k, v in node.items() if k != "title" and not (k == "default" and v is None)}
    return [_lean(v) for v in node] if isinstance(node, list) else node
