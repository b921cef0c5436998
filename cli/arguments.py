"""The arguments of each ``zero`` command: built only for the command that runs (``zero --help`` needs
none of them, and every line here costs start-up)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from zero.cli._choices import PERMISSION_MODES, PROVIDERS

__all__ = ["ARGUMENTS", "NO_LIMIT", "common", "count", "options_of", "shell_parser"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    from zero.cli.options import Command

    T = TypeVar("T")


def count(limit: int, low: int = 1) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= limit:
            raise argparse.ArgumentTypeError(f"{text} is out of range: give a number from {low} to {limit:,}")
        return value

    return parse


def _amount(limit: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (0 < value <= limit):  # also refuses nan and inf
            raise argparse.ArgumentTypeError(f"{text} is out of range: give a number above 0 and at most {limit:g}")
        return value

    return parse


NO_LIMIT = "none"


def _or_none(parse: Callable[[str], T]) -> Callable[[str], T | str]:
    """A limit that may also be lifted: ``none`` removes the team file's value."""

    def parse_limit(text: str) -> T | str:
        return NO_LIMIT if text.strip().lower() == NO_LIMIT else parse(text)

    return parse_limit


def common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model and workspace")
    group.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="model provider (default: ZERO_PROVIDER, config, or the first API key found)",
    )
    group.add_argument("--model", help="model name (default: ZERO_MODEL, config, or the provider's default)")
    group.add_argument(
        "--base-url", help="API base URL; alone, selects an OpenAI-compatible server (Ollama, vLLM, LM Studio)"
    )
    group.add_argument(
        "--max-output-tokens",
        type=count(10_000_000),
        help="output cap of each model call, sent to the server and held by budgets "
        "(default: the model's; the smallest of this, config, manifest and team file wins)",
    )
    group.add_argument("--script", help="script of model turns for --provider scripted (TOML or JSON)")
    network = parser.add_argument_group("retries and timeouts (default: config, else the value shown)")
    network.add_argument("--retries", type=count(100, low=0), help="retries of a failed model call (3)")
    network.add_argument(
        "--retry-max-delay", type=_amount(86_400), help="longest wait between retries, in seconds (60)"
    )
    network.add_argument("--connect-timeout", type=_amount(86_400), help="seconds to connect to the server (5)")
    network.add_argument(
        "--read-timeout", type=_amount(86_400), help="seconds to wait for the server's next bytes (600)"
    )
    group.add_argument("--cwd", help="workspace folder (default: the current folder)")
    group.add_argument(
        "--permission-mode", choices=PERMISSION_MODES, help="what tools may do without approval (default: auto)"
    )
    group.add_argument("--debug", action="store_true", help="show tracebacks")


def _exec(exec_: argparse.ArgumentParser) -> None:
    exec_.description = "Run one task headless and print the answer (text), one JSON object, or stream-json events."
    exec_.add_argument("prompt", nargs="?", help="the task (default: --file, or standard input)")
    exec_.add_argument("--file", "-f", help="read the prompt (or stream-json input) from this file")
    exec_.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
    exec_.add_argument("--input-format", choices=("text", "stream-json"), default="text")
    exec_.add_argument("--max-turns", type=count(10_000), help="stop after this many model calls (default 50)")
    common(exec_)


def _specialists(specialists: argparse.ArgumentParser) -> None:
    specialists.description = (
        "Specialists are sub-agents declared in TOML. A project manifest (.zero/specialists/) "
        "overrides a user one (~/.config/zero/specialists/), which overrides a built-in one."
    )
    sp = specialists.add_subparsers(dest="specialists_command", metavar="ACTION", required=True)
    sp_list = sp.add_parser("list", help="every specialist, and the manifest files that failed to load")
    sp_show = sp.add_parser("show", help="one specialist, resolved (extends merged, tools expanded)")
    sp_show.add_argument("name")
    sp_new = sp.add_parser("new", help="write a new manifest")
    sp_new.add_argument("name")
    where = sp_new.add_mutually_exclusive_group()
    where.add_argument("--project", action="store_true", help="in <workspace>/.zero/specialists/ (default)")
    where.add_argument("--user", action="store_true", help="in ~/.config/zero/specialists/")
    sp_new.add_argument("--tools", nargs="+", help="categories or tool ids (default: read-only)")
    sp_new.add_argument("--description")
    sp_new.add_argument("--prompt")
    sp_new.add_argument("--extends")
    sp_new.add_argument("--model")
    sp_new.add_argument("--force", action="store_true", help="overwrite an existing manifest")
    sp_import = sp.add_parser(
        "import",
        help="write manifests from other tools' agents: Claude Code (.claude/agents/*.md), Codex "
        "(.codex/agents/*.toml), upstream Zero (*.md)",
    )
    sp_import.add_argument("files", nargs="+", metavar="PATH", help="agent files, or folders of them")
    where = sp_import.add_mutually_exclusive_group()
    where.add_argument("--project", action="store_true", help="in <workspace>/.zero/specialists/ (default)")
    where.add_argument("--user", action="store_true", help="in ~/.config/zero/specialists/")
    sp_import.add_argument("--dry-run", action="store_true", help="print the manifests; write nothing")
    sp_import.add_argument("--force", action="store_true", help="overwrite existing manifests")
    sp_validate = sp.add_parser("validate", help="check manifest files; exit 2 if any is invalid")
    sp_validate.add_argument("files", nargs="+", metavar="FILE")
    sp_trust = sp.add_parser(
        "trust",
        help="let a project's specialist run as written: its tools, model and provider (until its file changes)",
    )
    sp_trust.add_argument("name")
    sp_trust.add_argument("--yes", "-y", action="store_true", help="do not ask (for scripts)")
    for sub in (sp_list, sp_show, sp_new, sp_import, sp_validate, sp_trust):
        sub.add_argument("--json", action="store_true", help="print JSON")
        sub.add_argument("--cwd", help="workspace folder (default: the current folder)")


def _swarm(swarm: argparse.ArgumentParser) -> None:
    sw = swarm.add_subparsers(dest="swarm_command", metavar="ACTION", required=True)
    sw_run = sw.add_parser(
        "run",
        help="run a team file",
        description="Run the members of a team file as their dependencies complete, under the team's shared budget.",
    )
    sw_validate = sw.add_parser("validate", help="check a team file and print its plan (exit 2 if invalid)")
    sw_resume = sw.add_parser(
        "resume",
        help="run a stopped team again: completed members keep their work, the others go on",
        description="Run a team again in its own sessions, with the team it recorded when it first ran. "
        "Members that completed keep their output; the others continue their history; tokens, cost, model "
        "calls and retries already spent count against the same budget (wall time is per run).",
    )
    sw_resume.add_argument("session_id", metavar="TEAM_ID", help="the team session (an id, a prefix, or last)")
    sw_resume.add_argument("--team", metavar="FILE", help="an edited team file with the same members")
    sw_resume.add_argument("--here", action="store_true", help="'last' means the newest team of this folder")
    for sub in (sw_run, sw_validate):
        sub.add_argument("team", metavar="TEAM.toml")
    for sub in (sw_run, sw_validate, sw_resume):
        sub.add_argument(
            "--max-concurrency", type=count(10_000), help="members running at once (overrides [scheduler])"
        )
        sub.add_argument(
            "--budget-tokens",
            type=_or_none(count(10**12)),
            help="team token limit (overrides [budget]; none: no limit)",
        )
        sub.add_argument("--budget-cost", type=_or_none(_amount(1e6)), help="team cost limit in US dollars (or none)")
        sub.add_argument(
            "--budget-seconds", type=_or_none(_amount(1e7)), help="team wall-clock limit in seconds (or none)"
        )
        sub.add_argument("--goal", help="replace the team's goal")
        sub.add_argument(
            "--executor", choices=("local", "ray"), help="where members run (overrides [scheduler] executor)"
        )
        sub.add_argument(
            "--ray-address", metavar="ADDR", help="the Ray cluster of --executor ray (default: auto, ray start's)"
        )
        common(sub)
    for sub in (sw_run, sw_resume):
        sub.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
        sub.add_argument("--no-live", action="store_true", help="plain progress lines instead of the live view")
    sw_run.add_argument("--dry-run", action="store_true", help="validate and print the plan; run nothing")
    sw_run.add_argument(
        "--reuse",
        metavar="TEAM_ID",
        help="take the output of each member whose inputs are unchanged since that run of the team; run the rest",
    )
    sw_run.add_argument(
        "--replay",
        metavar="TEAM_ID|SCRIPT",
        help="run the team offline on the model calls of that run (or of its exported script: a file ending in "
        ".toml or .json, or holding a /) and report where it diverges from it (exit 1)",
    )
    sw_run.add_argument(
        "--accept-estimate",
        action="store_true",
        help="run even when the estimate's expected tokens, calls or cost exceed the team budget",
    )
    sw_validate.add_argument("--json", action="store_true", help="print JSON")
    _swarm_plan(sw)
    sw_watch = sw.add_parser("watch", help="follow a team run in progress (from another terminal)")
    sw_watch.add_argument("session_id", metavar="TEAM_ID", help="the team session (an id, a prefix, or last)")
    sw_watch.add_argument("--here", action="store_true", help="'last' means the newest team of this folder")
    sw_watch.add_argument("--cwd", help="the folder --here means (default: the current folder)")
    sw_diff = sw.add_parser(
        "diff",
        help="what a team's isolated members changed: what each landed, else what its branch holds",
    )
    sw_land = sw.add_parser(
        "land",
        help="land again the branches of a team's members that did not land (after you fixed them)",
        description="Land, one at a time and in dependency order, each isolated member of the team whose branch "
        "holds work not on the integration branch: rebased onto it, checked with the team's [land] check, "
        "fast-forwarded. Exit 1 if one still does not land.",
    )
    sw_land.add_argument("--json", action="store_true", help="print JSON")
    for sub in (sw_diff, sw_land):
        sub.add_argument("session_id", metavar="TEAM_ID", help="the team session (an id, a prefix, or last)")
        sub.add_argument("--here", action="store_true", help="'last' means the newest team of this folder")
        sub.add_argument("--cwd", help="the folder --here means (default: the current folder)")
    sw_diff.add_argument("member", nargs="?", metavar="MEMBER", help="only this member")
    _swarm_control(sw)


def _swarm_plan(sw: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``zero swarm plan GOAL``: a team file the planner specialist designs for a goal."""
    sw_plan = sw.add_parser(
        "plan",
        help="have the planner specialist write a team file for a goal (checked as validate checks it)",
        description="The planner specialist reads the workspace and designs a team for GOAL. The team is checked "
        "as zero swarm validate checks a file (an invalid one goes back to the planner once, with what is wrong), "
        "printed with its estimate, and written for you to edit: to -o FILE, else to <team name>.toml in the "
        "workspace. --run runs it after you say yes.",
    )
    sw_plan.add_argument("goal", metavar="GOAL", help="what the team is to do")
    sw_plan.add_argument("--output", "-o", metavar="FILE", help="where to write the team (default: NAME.toml)")
    sw_plan.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    sw_plan.add_argument("--run", dest="then_run", action="store_true", help="then run the team (asks first)")
    sw_plan.add_argument("--yes", "-y", action="store_true", help="run without asking (needed without a terminal)")
    sw_plan.add_argument("--no-live", action="store_true", help="plain progress lines instead of the live view")
    common(sw_plan)


def _swarm_control(sw: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``zero swarm stop|send|pause|continue``: a request to a running team, through its control socket."""
    sw_stop = sw.add_parser(
        "stop",
        help="stop one member of a running team (it ends cancelled, keeping its output; its dependents "
        "follow on_failure)",
    )
    sw_send = sw.add_parser(
        "send", help="send a member of a running team a message it reads before its next model call"
    )
    sw_pause = sw.add_parser(
        "pause", help="a member of a running team (or every member) waits before its next model call"
    )
    sw_continue = sw.add_parser("continue", help="a paused member (or every paused member) goes on")
    for sub in (sw_stop, sw_send, sw_pause, sw_continue):
        sub.add_argument("session_id", metavar="TEAM_ID", help="the team session (an id, a prefix, or last)")
    for sub in (sw_stop, sw_send):
        sub.add_argument("member", metavar="MEMBER")
    for sub in (sw_pause, sw_continue):
        sub.add_argument("member", nargs="?", metavar="MEMBER", help="this member only (default: every member)")
    sw_send.add_argument("text", metavar="TEXT", help="the message (- reads it from standard input)")


def _sessions(sessions: argparse.ArgumentParser) -> None:
    sessions.description = (
        "Every run is a session on disk. ID is a session id, a unique prefix of it or of its "
        "last part (as the tree shows it), or 'last' (the newest top-level session; of this folder with --here)."
    )
    ss = sessions.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    ss_list = ss.add_parser("list", help="sessions, newest first, each under its root")
    ss_list.add_argument("--kind", choices=("root", "team", "member", "child"), help="only sessions of this kind")
    ss_list.add_argument("--status", help="only sessions with this status (e.g. interrupted)")
    ss_list.add_argument("--root", metavar="ID", help="only this session and its descendants")
    ss_list.add_argument("--here", action="store_true", help="only sessions of this folder (or --cwd)")
    ss_list.add_argument("--tree", action="store_true", help="indent children under their parent")
    ss_list.add_argument("--limit", type=count(10**9, low=0), default=50, help="rows to show (0: all; default 50)")
    ss_list.add_argument("--cwd", help="the folder --here means (default: the current folder)")
    ss_show = ss.add_parser("show", help="a session's transcript: messages, tool calls and results, usage")
    ss_show.add_argument("session_id", metavar="ID")
    ss_show.add_argument("--children", action="store_true", help="nest the transcripts of its children")
    ss_show.add_argument("--full", action="store_true", help="tool results and messages whole, not trimmed")
    ss_tree = ss.add_parser("tree", help="a session and its children, with own and subtree usage")
    ss_tree.add_argument("session_id", metavar="ID")
    ss_tree.add_argument("--svg", metavar="FILE", help="also save the tree as an SVG picture")
    ss_lineage = ss.add_parser("lineage", help="the chain from the root session to this one")
    ss_lineage.add_argument("session_id", metavar="ID")
    ss_resume = ss.add_parser(
        "resume",
        help="continue a session (root or child) with its history",
        description="Continue a session with its whole history, as the agent it was (a specialist keeps its "
        "tools and prompt). The session's workspace must be this folder, or the one --cwd names.",
    )
    ss_resume.add_argument("session_id", metavar="ID")
    ss_resume.add_argument("prompt", nargs="?", help="what to do next (default: --file, or standard input)")
    ss_resume.add_argument("--file", "-f", help="read the prompt from this file")
    ss_resume.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
    ss_resume.add_argument("--max-turns", type=count(10_000), help="stop after this many model calls (default 50)")
    common(ss_resume)
    ss_fork = ss.add_parser("fork", help="a new session with the history of ID (up to --at), to resume apart")
    ss_fork.add_argument("session_id", metavar="ID")
    ss_fork.add_argument("--at", type=count(10**9), metavar="SEQ", help="keep the events up to this sequence")
    ss_export = ss.add_parser("export", help="a session as Markdown or as its JSONL log")
    ss_export.add_argument("session_id", metavar="ID")
    ss_export.add_argument("--format", choices=("md", "jsonl"), default="md")
    ss_export.add_argument("--children", action="store_true", help="with its children")
    ss_export.add_argument(
        "--as-script",
        action="store_true",
        help="the whole run under ID as a script of the scripted provider, which zero replay runs again offline",
    )
    ss_export.add_argument(
        "-o", "--out", metavar="FILE", help="with --as-script: write the script to FILE (.json: as JSON), not to stdout"
    )
    ss_export.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    ss_rm = ss.add_parser("rm", help="remove a session and its subtree (asks first in a terminal)")
    ss_rm.add_argument("session_id", metavar="ID")
    ss_rm.add_argument("--yes", "-y", action="store_true", help="do not ask")
    ss_prune = ss.add_parser("prune", help="remove finished sessions older than a given age")
    ss_prune.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 30d, 12h, 90m")
    ss_prune.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    for sub in (ss_list, ss_show, ss_tree, ss_lineage, ss_fork, ss_rm, ss_prune):
        sub.add_argument("--json", action="store_true", help="print JSON")
    for sub in (ss_show, ss_tree, ss_lineage, ss_resume, ss_fork, ss_export, ss_rm):
        sub.add_argument("--here", action="store_true", help="'last' means the newest session of this folder")
    for sub in (ss_show, ss_tree, ss_lineage, ss_fork, ss_export, ss_rm):
        sub.add_argument("--cwd", help="the folder --here means (default: the current folder)")


def _mcp(mcp: argparse.ArgumentParser) -> None:
    mc = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    mc_list = mc.add_parser("list", help="the configured servers: whether each starts, and its tools")
    mc_list.add_argument("--json", action="store_true", help="print JSON")
    mc_add = mc.add_parser(
        "add",
        help="add a server to your config (--project: to the project's)",
        description="zero mcp add NAME -- COMMAND [ARGS...]  (stdio), or zero mcp add NAME --url URL (HTTP)",
    )
    mc_add.add_argument("name")
    mc_add.add_argument("--url", help="a streamable HTTP server")
    mc_add.add_argument("--env", "-e", action="append", metavar="KEY=VALUE", help="environment ($VAR takes yours)")
    mc_add.add_argument("--header", action="append", metavar="KEY=VALUE", help="an HTTP header ($VAR takes yours)")
    mc_add.add_argument("--trust", action="store_true", help="its tools run without asking")
    mc_remove = mc.add_parser("remove", help="remove a server from your config (--project: the project's)")
    mc_remove.add_argument("name")
    for sub in (mc_add, mc_remove):
        sub.add_argument("--project", action="store_true", help="<workspace>/.zero/config.toml")
    mc_trust = mc.add_parser("trust", help="let a project's server start, or a server's tools run without asking")
    mc_trust.add_argument("name")
    mc_trust.add_argument("--yes", "-y", action="store_true", help="do not ask (for scripts)")
    for sub in (mc_list, mc_add, mc_remove, mc_trust):
        sub.add_argument("--cwd", help="workspace folder (default: the current folder)")
    mc_serve = mc.add_parser(
        "serve",
        help="serve Zero's specialists and teams to other agents over MCP (stdio)",
        description="Zero as an MCP server on stdio: a tool per specialist, run_team, session_tree and "
        "session_show. --permission-mode is the ceiling of every run.",
    )
    common(mc_serve)


def _acp(acp: argparse.ArgumentParser) -> None:
    acp.description = (
        "Zero as an ACP agent on stdio, for editors (Zed, JetBrains IDEs). Each session's workspace "
        "is the cwd the editor sends; --permission-mode is the ceiling of every session."
    )
    common(acp)


def _replay(replay: argparse.ArgumentParser) -> None:
    replay.description = (
        "Run a recorded run again offline: its model calls come from the recording (a session id, or the script "
        "zero sessions export --as-script wrote), its tools run for real. Reports each tool result that differs, "
        "each model call the recording does not have and each it has that was never made. Exit 0: no divergence; "
        "1: it diverged."
    )
    replay.add_argument(
        "source",
        metavar="ID|SCRIPT",
        help="a script file (it ends in .toml or .json, or holds a /) or else a session (an id, a prefix, or last)",
    )
    replay.add_argument("--output-format", "--output", choices=("text", "json"), default="text")
    replay.add_argument(
        "--workspace", "--cwd", dest="cwd", metavar="DIR", help="run it in this folder (default: the current one)"
    )
    replay.add_argument(
        "--permission-mode", choices=PERMISSION_MODES, help="what tools may do without approval (default: auto)"
    )
    replay.add_argument("--debug", action="store_true", help="show tracebacks")


def shell_parser() -> argparse.ArgumentParser:
    """``zero [PROMPT]``: the interactive shell (no command given)."""
    parser = argparse.ArgumentParser(
        prog="zero",
        description="Zero's interactive shell: chat with an agent in this folder; it delegates to specialists. "
        "Commands (zero exec, swarm, sessions, specialists) run headless: zero --help lists them.",
    )
    parser.add_argument("prompt", nargs="?", help="a first message to send")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--continue", "-c", dest="continue_", action="store_true", help="reopen this folder's latest session"
    )
    which.add_argument(
        "--resume",
        "-r",
        metavar="ID",
        nargs="?",
        const="",
        help="reopen a session (an id, a unique prefix, or last); without ID, pick one from a list",
    )
    parser.add_argument("--max-turns", type=count(10_000), help="model calls a message may take (default 50)")
    common(parser)
    return parser


ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "exec": _exec,
    "specialists": _specialists,
    "swarm": _swarm,
    "sessions": _sessions,
    "mcp": _mcp,
    "acp": _acp,
    "replay": _replay,
}


def options_of(namespace: argparse.Namespace, server_command: list[str] | None = None) -> Command:
    """The typed record of a parsed command line (``server_command``: the words after ``zero mcp add ... --``).
    Every argument lands in a field of its record: one without a field is a bug, said here."""
    from dataclasses import fields  # (here, not above: ``zero CMD --help`` does without them)

    from zero.cli import options

    records: dict[str | None, type[Command]] = {
        None: options.ShellOptions,
        "exec": options.ExecOptions,
        "specialists": options.SpecialistsOptions,
        "swarm": options.SwarmOptions,
        "sessions": options.SessionsOptions,
        "mcp": options.McpOptions,
        "acp": options.AcpOptions,
        "replay": options.ReplayOptions,
    }
    values = dict(vars(namespace))
    command = values.pop("command", None)
    record = records[command]
    action = values.pop(f"{command}_command", None)
    if record is options.SessionsOptions and action == "resume":
        record = options.ResumeOptions
    elif action is not None:
        values["action"] = action
    if record is options.McpOptions:
        values["server_command"] = list(server_command or [])
    own = {f.name for f in fields(record)}  # (``specialists new --model`` is the manifest's, not a run's)
    run_fields = {f.name for f in fields(options.RunOptions)} & set(values) - own
    run = options.RunOptions(**{name: values.pop(name) for name in run_fields})
    unknown = set(values) - own
    if unknown:
        raise AssertionError(f"{record.__name__} has no field for the arguments {', '.join(sorted(unknown))}")
    return record(run=run, **{name: value for name, value in values.items() if value is not None})  # None: not given
