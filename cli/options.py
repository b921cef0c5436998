"""What each ``zero`` command was asked to do, typed: one record per command, built once from the parsed
arguments by ``zero.cli.arguments.options_of``. Past that point no module sees the argparse namespace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from zero.tools import PermissionMode

__all__ = [
    "AcpOptions",
    "Command",
    "ExecOptions",
    "McpOptions",
    "Options",
    "OutputFormat",
    "ReplayOptions",
    "ResumeOptions",
    "RunOptions",
    "SessionsOptions",
    "ShellOptions",
    "SpecialistsOptions",
    "SwarmOptions",
]

OutputFormat = Literal["text", "json", "stream-json"]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """The model, network and permission flags of a command that runs agents (None: not given)."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    max_output_tokens: int | None = None
    max_turns: int | None = None
    script: str | None = None
    retries: int | None = None
    retry_max_delay: float | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    permission_mode: PermissionMode | None = None
    replay_of: str | None = None  # (no flag) the session ``zero replay`` runs again: its new root links to it


@dataclass(frozen=True, kw_only=True)
class Options:
    """What every command has: the workspace folder (``--cwd``) and whether to show tracebacks."""

    cwd: str | None = None
    debug: bool = False
    run: RunOptions = field(default_factory=RunOptions)


@dataclass(frozen=True, kw_only=True)
class ShellOptions(Options):
    """``zero [PROMPT]``: the interactive shell; ``resume`` "" means: pick a session from a list."""

    prompt: str | None = None
    continue_: bool = False
    resume: str | None = None


@dataclass(frozen=True, kw_only=True)
class ExecOptions(Options):
    """``zero exec``: one task, headless."""

    prompt: str | None = None
    file: str | None = None
    output_format: OutputFormat = "text"
    input_format: Literal["text", "stream-json"] = "text"


@dataclass(frozen=True, kw_only=True)
class ResumeOptions(ExecOptions):
    """``zero sessions resume ID``: a task that continues a recorded session."""

    session_id: str
    here: bool = False


@dataclass(frozen=True, kw_only=True)
class SessionsOptions(Options):
    """``zero sessions ACTION`` (all but resume): reading and removing recorded sessions."""

    action: Literal["list", "show", "tree", "lineage", "fork", "export", "rm", "prune"]
    session_id: str = ""
    json: bool = False
    here: bool = False
    kind: Literal["root", "team", "member", "child"] | None = None
    status: str | None = None
    root: str | None = None
    tree: bool = False
    limit: int = 50
    children: bool = False
    full: bool = False
    svg: str | None = None
    at: int | None = None
    format: Literal["md", "jsonl"] = "md"
    as_script: bool = False
    out: str | None = None
    force: bool = False
    yes: bool = False
    older_than: str = ""
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class SpecialistsOptions(Options):
    """``zero specialists ACTION``."""

    action: Literal["list", "show", "new", "import", "validate", "trust"]
    name: str = ""
    json: bool = False
    project: bool = False
    user: bool = False
    tools: list[str] | None = None
    description: str | None = None
    prompt: str | None = None
    extends: str | None = None
    model: str | None = None
    force: bool = False
    files: list[str] = field(default_factory=list)
    yes: bool = False
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class SwarmOptions(Options):
    """``zero swarm ACTION``: a team file run, checked, resumed or watched; a budget flag's ``"none"`` lifts
    the team file's limit."""

    action: Literal["run", "validate", "resume", "watch", "diff", "land", "stop", "send", "pause", "continue", "plan"]
    team: str | None = None
    member: str | None = None
    text: str | None = None  # send's message
    session_id: str = ""
    here: bool = False
    max_concurrency: int | None = None
    budget_tokens: int | str | None = None
    budget_cost: float | str | None = None
    budget_seconds: float | str | None = None
    goal: str | None = None
    output_format: OutputFormat = "text"
    no_live: bool = False
    dry_run: bool = False
    accept_estimate: bool = False
    reuse: str | None = None
    replay: str | None = None
    json: bool = False
    executor: Literal["local", "ray"] | None = None  # None: the team file's [scheduler] executor
    ray_address: str = "auto"
    output: str | None = None  # plan's -o FILE (None: the team's name, in the workspace)
    force: bool = False  # plan: overwrite FILE
    then_run: bool = False  # plan --run
    yes: bool = False  # plan --run without asking


@dataclass(frozen=True, kw_only=True)
class McpOptions(Options):
    """``zero mcp ACTION``; ``server_command``: the words after ``--`` of ``zero mcp add``."""

    action: Literal["list", "add", "remove", "trust", "serve"]
    name: str = ""
    json: bool = False
    url: str | None = None
    env: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    trust: bool = False
    project: bool = False
    yes: bool = False
    server_command: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class AcpOptions(Options):
    """``zero acp``: an editor's agent on stdio."""


@dataclass(frozen=True, kw_only=True)
class ReplayOptions(Options):
    """``zero replay ID|SCRIPT``: a recorded run again, offline, on the script of its model calls; ``cwd`` is
    ``--workspace`` (None: the current folder, never the recorded one)."""

    source: str
    output_format: Literal["text", "json"] = "text"


Command = (
    ShellOptions
    | ExecOptions
    | ResumeOptions
    | SessionsOptions
    | SpecialistsOptions
    | SwarmOptions
    | McpOptions
    | AcpOptions
    | ReplayOptions
)
