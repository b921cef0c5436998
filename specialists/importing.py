"""Agents written for other tools, read as Zero specialist manifests (``zero specialists import``).

Three formats are read: Claude Code subagents (``.claude/agents/*.md``: YAML front matter ``name``,
``description``, ``tools``, ``model``, then the prompt), Codex custom agents (``.codex/agents/*.toml``:
``name``, ``description``, ``developer_instructions``, ``model``, ``model_reasoning_effort``,
``sandbox_mode``) and upstream Zero's specialists (markdown with ``name``, ``description``, ``extends``,
``model``, ``reasoningEffort``, ``tools``). Each becomes the keys of a Zero manifest, with a note for
everything that did not map as it was (a tool Zero lacks, a model alias, a key Zero has no use for) and
what was chosen instead.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zero.agent.pricing import PriceTable
from zero.specialists.manifest import KNOWN_TOOLS
from zero.strictfile import MAX_FILE, NAME_PATTERN

__all__ = ["AgentFileError", "Imported", "read_agent", "read_agents"]

ALL_TOOLS = ["read-only", "edit", "execute", "plan"]  # what an agent that lists no tools gets elsewhere
_CATEGORIES = {"read-only", "edit", "execute", "plan"}

# Claude Code's tool names, and upstream Zero's, as Zero's (None: Zero has no such tool)
_TOOLS: dict[str, str | None] = {
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Glob": "glob",
    "Grep": "grep",
    "LS": "list_directory",
    "Bash": "bash",
    "BashOutput": "bash",
    "KillBash": "bash",
    "KillShell": "bash",
    "TodoWrite": "update_plan",
    "read_minified_file": "read_file",
    "apply_patch": "edit_file",
    "exec_command": "bash",
    "write_stdin": "bash",
    **dict.fromkeys(("WebFetch", "WebSearch", "web_fetch", "web_search"), None),
    **dict.fromkeys(("NotebookRead", "NotebookEdit", "view_image", "lsp_navigate", "skill", "Skill"), None),
    **dict.fromkeys(("ask_user", "request_permissions", "AskUserQuestion", "SlashCommand"), None),
    **dict.fromkeys(("Task", "TaskOutput", "TaskStop", "GenerateSpecialist"), None),
}
_WHY_NOT = {
    "WebFetch": "Zero's tools do not reach the network",
    "WebSearch": "Zero's tools do not reach the network",
    "web_fetch": "Zero's tools do not reach the network",
    "web_search": "Zero's tools do not reach the network",
    "Task": "a specialist's Task tools come from its caller",
    "TaskOutput": "a specialist's Task tools come from its caller",
    "TaskStop": "a specialist's Task tools come from its caller",
}
# Claude Code's model aliases
_ALIASES = {"sonnet": "claude-sonnet-4-6", "opus": "claude-opus-4-5", "haiku": "claude-haiku-4-5"}
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# Codex's sandbox modes, as the tools that can do what each allows
_SANDBOX = {
    "read-only": ["read-only", "plan"],
    "workspace-write": ALL_TOOLS,
    "danger-full-access": ALL_TOOLS,
}


class AgentFileError(Exception):
    """A file that could not be read as an agent of any tool: what is wrong, where."""


@dataclass(kw_only=True)
class Imported:
    """An agent read from ``source`` (``kind``: ``claude``, ``codex`` or ``zero-md``), as the keys of a Zero
    manifest (``data``), with what did not map as it was (``notes``)."""

    source: Path
    kind: str
    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.data["name"])


def read_agents(paths: Iterable[Path]) -> tuple[list[Imported], list[AgentFileError]]:
    """The agents in ``paths`` (files, or folders of ``.md`` and ``.toml`` files), and the files that could
    not be read, each error naming its file."""
    found: list[Imported] = []
    errors: list[AgentFileError] = []
    for path in paths:
        files = sorted(p for p in path.iterdir() if p.suffix in (".md", ".toml")) if path.is_dir() else [path]
        if path.is_dir() and not files:
            errors.append(AgentFileError(f"{path}: no agent files (.md or .toml) in this folder"))
        for file in files:
            try:
                found.append(read_agent(file))
            except AgentFileError as e:
                errors.append(e)
    return found, errors


def read_agent(path: Path) -> Imported:
    """The agent in the file ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)  # (a FIFO must not block the import)
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise AgentFileError(f"{path}: not a regular file (a device, a FIFO...), so not an agent file")
            raw = file.read(MAX_FILE + 1)
        if len(raw) > MAX_FILE:
            raise AgentFileError(f"{path}: larger than {MAX_FILE // 1024} KB, so not an agent file")
        text = raw.decode("utf-8").replace("\r\n", "\n")
    except (OSError, UnicodeDecodeError) as e:
        raise AgentFileError(f"{path}: cannot be read ({e})") from None
    if path.suffix == ".toml":
        return _codex(path, text)
    return _markdown(path, text)


# -- the formats ------------------------------------------------------------------------------


def _markdown(path: Path, text: str) -> Imported:
    """A Claude Code subagent or an upstream Zero specialist: front matter between ``---`` lines, then the
    prompt."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise AgentFileError(f"{path}:1: no front matter: the file must start with a '---' line")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise AgentFileError(f"{path}: the front matter opened on line 1 is not closed by a '---' line")
    import yaml  # (only here: nothing else needs it)

    front = "\n".join(lines[1:end])
    lenient = None
    try:
        meta = yaml.load(front, Loader=_loader()) or {}
    except yaml.YAMLError as e:
        # Hand-written front matter often has a plain value with ': ' in it ("description: Reviews: ..."),
        # which YAML refuses: such lines are read as 'key: the rest of the line'.
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 2}" if mark is not None else ""
        problem = getattr(e, "problem", None) or e
        if (lenient := _key_lines(front)) is None:
            raise AgentFileError(f"{path}{where}: the front matter is not valid YAML ({problem})") from None
        meta = lenient
    if not isinstance(meta, dict):
        raise AgentFileError(f"{path}:2: the front matter must be 'key: value' lines")
    body = "\n".join(lines[end + 1 :]).strip()
    if ".claude" in path.parts:
        upstream = False
    else:
        upstream = ".zero" in path.parts or "reasoningEffort" in meta or "extends" in meta
        upstream = upstream or _upstream_tools(meta.get("tools"))
    agent = Imported(source=path, kind="zero-md" if upstream else "claude", data={})
    if lenient is not None:
        agent.notes.append("its front matter is not valid YAML: each line was read as 'key: the rest of the line'")
    _name(agent, meta.get("name"), path)
    _text(agent, "description", meta.get("description"))
    if meta.get("extends") is not None:
        agent.data["extends"] = str(meta["extends"])
    _model(agent, meta.get("model"))
    _effort(agent, meta.get("reasoningEffort"), "reasoningEffort")
    _tools(agent, meta.get("tools"))
    agent.data["prompt"] = body or str(agent.data.get("description", ""))
    if not body:
        agent.notes.append("the file has no prompt after its front matter: its description is the prompt")
    known = {"name", "description", "extends", "model", "reasoningEffort", "tools"}
    _unmapped(agent, [k for k in meta if k not in known])
    return agent


def _codex(path: Path, text: str) -> Imported:
    """A Codex custom agent."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise AgentFileError(f"{path}: not valid TOML ({e})") from None
    if "developer_instructions" not in data:
        what = "a Zero manifest already (zero specialists validate checks it)" if "prompt" in data else "no agent"
        raise AgentFileError(f"{path}: no developer_instructions, so not a Codex agent: it is {what}")
    agent = Imported(source=path, kind="codex", data={})
    _name(agent, data.get("name"), path)
    _text(agent, "description", data.get("description"))
    _model(agent, data.get("model"))
    _effort(agent, data.get("model_reasoning_effort"), "model_reasoning_effort")
    mode = data.get("sandbox_mode")
    tools = _SANDBOX.get(str(mode)) if mode is not None else None
    if tools is None:
        tools = ["read-only", "plan"]
        said = f"sandbox_mode {mode!r} is not one Codex has" if mode is not None else "no sandbox_mode"
        agent.notes.append(f"{said}: it gets read-only tools (add edit and execute to its tools if it writes)")
    elif mode == "danger-full-access":
        agent.notes.append(
            "sandbox_mode 'danger-full-access' has no match: it gets edit and execute tools, within the run's "
            "permission mode"
        )
    agent.data["tools"] = tools
    agent.data["prompt"] = str(data["developer_instructions"]).strip()
    known = {"name", "description", "developer_instructions", "model", "model_reasoning_effort", "sandbox_mode"}
    _unmapped(agent, [k for k in data if k not in known])
    return agent


# -- the keys ---------------------------------------------------------------------------------


def _name(agent: Imported, value: object, path: Path) -> None:
    raw = str(value).strip() if value is not None else path.stem
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")[:64]
    if not re.fullmatch(NAME_PATTERN, name):
        raise AgentFileError(f"{path}: name {raw!r} cannot be a specialist's name (lowercase letters, digits, '-')")
    if value is None:
        agent.notes.append(f"no name: it is named after its file, {name!r}")
    elif name != raw:
        agent.notes.append(f"name {raw!r} is {name!r} here (a specialist's name is lowercase letters, digits, '-')")
    agent.data["name"] = name


def _text(agent: Imported, key: str, value: object) -> None:
    if value is not None and str(value).strip():
        agent.data[key] = str(value).strip()


def _model(agent: Imported, value: object) -> None:
    if value is None or str(value).strip() in ("", "inherit"):
        return
    model = str(value).strip()
    if model in _ALIASES:
        agent.data["model"], agent.data["provider"] = _ALIASES[model], "anthropic"
        agent.notes.append(f"model {model!r} is {_ALIASES[model]!r} on the anthropic provider")
        return
    agent.data["model"] = model
    if PriceTable.builtin().price(model) is None:
        agent.notes.append(f"model {model!r} is not one Zero prices: its cost shows as unknown until you price it")


def _effort(agent: Imported, value: object, key: str) -> None:
    if value is None:
        return
    effort = str(value).strip().lower()
    if effort in _EFFORTS:
        agent.data["reasoning_effort"] = effort
    elif effort in ("max", "ultra"):
        agent.data["reasoning_effort"] = "xhigh"
        agent.notes.append(f"{key} {effort!r} is 'xhigh', the most Zero asks for")
    else:
        agent.notes.append(f"{key} {effort!r} is not one Zero knows: the model's default is used")


def _tools(agent: Imported, value: object) -> None:
    if value is None:  # Claude Code gives such an agent every tool; upstream Zero, read-only ones
        agent.data["tools"] = ALL_TOOLS if agent.kind == "claude" else ["read-only"]
        if agent.kind == "claude":
            agent.notes.append("no tools listed, so all of them: read-only, edit, execute and plan")
        return
    names = [t.strip() for t in (value if isinstance(value, list) else str(value).split(",")) if str(t).strip()]
    tools: list[str] = []
    for item in map(str, names):
        mapped = item if item in _CATEGORIES or item in KNOWN_TOOLS else _TOOLS.get(item)
        if mapped is None:
            why = _WHY_NOT.get(item, "Zero has no such tool")
            if item.startswith("mcp__"):
                why = "MCP tools come from the run's MCP servers (zero mcp add)"
            agent.notes.append(f"tool {item} not mapped: {why}")
            continue
        if mapped != item:
            agent.notes.append(f"tool {item} is {mapped}")
        if mapped not in tools:
            tools.append(mapped)
    if not tools:
        agent.notes.append("none of its tools maps to one of Zero's: it gets read-only tools")
        tools = ["read-only"]
    agent.data["tools"] = tools


def _unmapped(agent: Imported, keys: list[str]) -> None:
    if keys:
        agent.notes.append(f"not mapped (Zero has no use for them): {', '.join(keys)}")


def _loader() -> Any:
    """YAML's safe loader, refusing aliases: nine lines of them expand to gigabytes (a "billion laughs")."""
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not read here", event.start_mark)
            return super().compose_node(parent, index)

    return Loader


def _key_lines(text: str) -> dict[str, Any] | None:
    """Front matter read line by line: ``key: value`` (the value is the rest of the line), indented lines
    continuing the value before (``- item`` lines making it a list); None: some line is neither, or a value
    is YAML's own syntax (``[``, ``{``, ``|``...), which only YAML can read."""
    meta: dict[str, Any] = {}
    key = None
    for line in text.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if found := re.fullmatch(r"([A-Za-z_][\w-]*):(?:\s+(.*))?", line.rstrip()):
            key, value = found[1], (found[2] or "").strip()
            if value[:1] in ("[", "{", "|", ">", "&", "*", "!"):
                return None
            quoted = len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]
            meta[key] = value[1:-1] if quoted else value
        elif key is not None and line[:1].isspace():
            item = line.strip()
            if item.startswith("- "):
                meta[key] = [*(meta[key] if isinstance(meta[key], list) else []), item[2:].strip()]
            elif isinstance(meta[key], str):
                meta[key] = f"{meta[key]} {item}".strip()
            else:
                return None
        else:
            return None
    return meta


def _upstream_tools(tools: object) -> bool:
    """Whether a tool list names tools as upstream Zero does (categories, snake_case ids), not Claude Code."""
    items = tools if isinstance(tools, list) else []
    return bool(items) and all(isinstance(t, str) and (t in _CATEGORIES or t.islower()) for t in items)
