"""Interactive ``zero``: a chat in the terminal, on one ``AgentSession``, that delegates to specialists.

``zero`` opens a session in this folder (``zero "PROMPT"`` sends a first prompt; ``--continue``
reopens the folder's latest session, ``--resume ID`` any). Each message is a turn: its events are
drawn by ``TurnView`` as they happen; Ctrl-C cancels the turn and comes back to the prompt; Ctrl-C
twice at an empty prompt, or Ctrl-D, leaves (the session stays resumable). Permission requests of
the agent and of its children are asked here. ``/help`` lists the slash commands.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import secrets
import signal
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.markdown import Markdown
from rich.text import Text

from zero.agent import Approval, ApprovalRequest, PermissionRequested, ToolCall, Usage, format_cost
from zero.agent.prompts import default_system_prompt
from zero.agent.providers import LazyProvider
from zero.cli._console import Console
from zero.cli.approvals import Judgement, Preview, call_text, judge
from zero.cli.common import (
    Streams,
    open_context,
    print_error,
    print_warnings,
    session_store,
    settings_from,
    workspace_from,
)
from zero.cli.config import RunSettings
from zero.cli.options import ShellOptions
from zero.cli.session_ids import resolve_session_id
from zero.cli.shell_view import TurnView
from zero.errors import UsageError, ZeroError
from zero.sessions import (
    AgentSession,
    FileSessionStore,
    SessionMetadata,
    default_data_dir,
    same_folder,
    session_tree,
    session_workspace,
    short_id,
    subtree_usage,
)
from zero.sessions.index import Row
from zero.specialists import open_agent, resume_agent
from zero.tools import PERMISSION_MODES, PermissionMode, within
from zero.tools.describe import printable

__all__ = ["run_shell"]

COMMANDS = {
    "help": "this list",
    "specialists": "the specialists you can delegate to (@name at the start of a message sends it to one)",
    "agents": "this session's children: status, tokens, cost and id",
    "tree": "this session and its children as a tree",
    "sessions": "the sessions of this folder",
    "resume": "/resume ID: continue another session of this folder",
    "model": "/model NAME: the model of the next turns",
    "permission": "/permission MODE: read-only, ask, auto or unsafe (never above the mode zero started with)",
    "cost": "tokens and cost of this session, own and with its children",
    "compact": "summarize the conversation so far, to free the context window",
    "init": "draft an AGENTS.md for this repository",
    "clear": "start a new session",
    "exit": "leave (the session stays resumable: zero --continue)",
}
T = TypeVar("T")
PICK = ""  # --resume with no id: pick from a list
RECAP_TURNS, RECAP_LINES = 3, 12  # of a reopened session: its last exchanges, each answer's first lines
PICKER_ROWS = 10
ATTACH_BYTES = 200_000  # of a file attached with @path
INIT_PROMPT = (
    "Draft an AGENTS.md at the workspace root for coding agents working in this repository: what the project "
    "is, how it is laid out, how to build and test it (the exact commands), and the conventions its code "
    "follows. Read the README, the build files and a few source files first; keep it short and factual."
)


def run_shell(args: ShellOptions, streams: Streams) -> int:
    if not (streams.stdin.isatty() and streams.stdout.isatty()):
        print_error(
            'zero without a command is an interactive shell and needs a terminal; headless, use zero exec "PROMPT" '
            "(it reads the prompt from standard input too)",
            streams.stderr,
        )
        return 2
    try:
        workspace = workspace_from(args)
        session_store(writable=True)  # before the prompt: a session that cannot be recorded does not start
        resume = _session_to_open(args, workspace, streams)
        settings = _settings(args, workspace, resume, streams)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code
    print_warnings(settings.warnings, streams.stderr)
    return anyio.run(Shell(args=args, streams=streams, workspace=workspace, settings=settings, resume_id=resume).main)


def _session_to_open(args: ShellOptions, workspace: Path, streams: Streams) -> str | None:
    """The session to reopen: ``--continue``'s (the folder's newest one the shell can hold), ``--resume ID``'s,
    or the one picked from a list (``--resume`` alone); None for a new one."""
    if args.resume is not None and args.continue_:
        raise UsageError("give --continue or --resume ID, not both")
    store = session_store()
    if args.continue_:
        return _newest_here(store, workspace)
    if args.resume == PICK:
        return _pick(store, workspace, streams)
    if args.resume is None:
        return None
    return _session_here(store, args.resume, workspace)


def _session_here(store: FileSessionStore, text: str, workspace: Path) -> str:
    """The session ``text`` names (an id, a prefix, ``last``), if the shell can hold it in ``workspace``."""
    session_id = _newest_here(store, workspace) if text == "last" else resolve_session_id(store, text, here=workspace)
    meta = store.metadata(session_id)
    _conversation(meta)
    session_workspace(meta, workspace)
    return session_id


def _conversation(meta: SessionMetadata) -> None:
    """``UsageError`` saying why the shell cannot hold ``meta``'s session, if it cannot (a team run, a
    member or a child: they continue with their run)."""
    sid = meta.session_id
    if meta.session_kind == "team":
        raise UsageError(f"session {sid} is a team run, not a conversation: continue it with zero swarm resume {sid}")
    if meta.parent_session_id or meta.session_kind in ("member", "child"):
        root = meta.root_session_id or meta.parent_session_id
        raise UsageError(
            f"session {sid} is a {meta.session_kind or 'child'} of {root}: continue it on its own with "
            f"zero sessions resume {sid} PROMPT, or open {root}"
        )


def _holdable_here(store: FileSessionStore, workspace: Path) -> list[Row]:
    """The sessions of ``workspace`` the shell can hold (conversations, not team runs), newest first."""
    return [
        r
        for r in store.rows()
        if not r.get("parentSessionId")
        and r.get("sessionKind") not in ("team", "member", "child")
        and same_folder(str(r.get("cwd") or ""), workspace)
    ]


def _newest_here(store: FileSessionStore, workspace: Path) -> str:
    rows = _holdable_here(store, workspace)
    if rows:
        return str(rows[0]["sessionId"])
    team = next((r for r in store.rows() if same_folder(str(r.get("cwd") or ""), workspace)), None)
    if team is not None:
        sid = team["sessionId"]
        raise UsageError(f"no conversation of {workspace} to continue: its newest session, {sid}, is a team run "
                         f"(continue it with zero swarm resume {sid}); zero alone opens a new one")  # fmt: skip
    raise UsageError(f"there is no session of {workspace} to continue yet; zero alone opens a new one")


def _pick(store: FileSessionStore, workspace: Path, streams: Streams) -> str | None:
    """``--resume`` with no id: the folder's recent conversations, numbered, and the one the user picks."""
    rows = _holdable_here(store, workspace)[:PICKER_ROWS]
    if not rows:
        streams.stdout.write(f"no session of {workspace} to resume yet: a new one\n")
        return None
    for number, row in enumerate(rows, 1):
        when = str(row.get("updatedAt") or "")[:16].replace("T", " ")
        title = printable(str(row.get("title") or ""))[:60]
        streams.stdout.write(
            f"  {number:>2}  {short_id(str(row['sessionId']))}  {row.get('status', ''):<12} {when}  {title}\n"
        )
    streams.stdout.flush()
    from prompt_toolkit import prompt

    while True:
        try:
            answer = prompt(f"resume which? [1-{len(rows)}, Enter for a new session] ").strip()
        except (KeyboardInterrupt, EOFError):
            return None
        if not answer:
            return None
        if answer.isdigit() and 1 <= int(answer) <= len(rows):
            return str(rows[int(answer) - 1]["sessionId"])


def _settings(args: ShellOptions, workspace: Path, resume: str | None, streams: Streams) -> RunSettings:
    """The run's settings; a reopened session keeps the provider and model it ran on, unless flags say
    otherwise (or its provider cannot be set up here: then the usual one, with a warning)."""
    meta = (
        session_store().metadata(resume) if resume is not None and not (args.run.provider or args.run.model) else None
    )
    if meta is None or not meta.provider:
        return settings_from(args.run, workspace)
    try:
        return settings_from(replace(args.run, provider=meta.provider, model=meta.model_id or None), workspace)
    except ZeroError as e:
        settings = settings_from(args.run, workspace)
        streams.stderr.write(
            f"zero: warning: session {resume} ran on {meta.provider}/{meta.model_id}, which cannot be used here "
            f"({e}); it continues on {settings.provider}/{settings.model}\n"
        )
        return settings


@dataclass(kw_only=True)
class Shell:
    args: ShellOptions
    streams: Streams
    workspace: Path
    settings: RunSettings
    resume_id: str | None
    console: Console = field(init=False)
    session: AgentSession | None = None
    view: TurnView | None = None
    mode: PermissionMode = "auto"
    allowed: set[str] = field(default_factory=set)  # "allow for this session" answers
    spent: Usage = field(default_factory=Usage)  # the session's usage, children included, as /cost says it
    interrupts: int = 0

    def __post_init__(self) -> None:
        self.console = Console(file=self.streams.stdout, highlight=False)
        self.mode = self.settings.permission_mode
        self._asking = anyio.Lock()
        self.choosers: dict[str, PromptSession[str]] = {}
        history = default_data_dir() / "history"
        history.parent.mkdir(parents=True, exist_ok=True)
        self.prompt: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=_Completer(self),
            key_bindings=_keys(),
            bottom_toolbar=self._toolbar,
            # the menu of commands opens as "/" is typed; paths and specialists complete with Tab
            complete_while_typing=Condition(lambda: _typing_command(self.prompt.default_buffer.text)),
        )

    # -- the loop --------------------------------------------------------------

    async def main(self) -> int:
        async with open_context(
            self.args.run, self.settings, self.workspace, self.streams, approver=self._approve
        ) as ctx:
            self.ctx = ctx
            async with anyio.create_task_group() as tg:
                await self._open(self.resume_id)
                tg.start_soon(self._warm)
                try:
                    await self._loop()
                finally:
                    await self._close()  # (not under a shield: it leaves the scope the session's tools entered)
                    tg.cancel_scope.cancel()
        return 0

    async def _warm(self) -> None:
        """Make the provider (import its SDK) while the user types the first message."""
        provider = self.ctx.provider
        if isinstance(provider, LazyProvider):
            with contextlib.suppress(Exception):  # a failure shows on the first call, with its message
                await anyio.to_thread.run_sync(provider.warm)

    async def _loop(self) -> None:
        first = self.args.prompt
        while True:
            text = first if first is not None else await self._read()
            first = None
            if text is None:
                return
            if not text.strip():
                continue
            if text.strip().startswith("/"):
                if not await self._command(text.strip()):
                    return
                continue
            await self._turn(text)

    async def _read(self) -> str | None:
        while True:
            try:
                text = await self.prompt.prompt_async("› ")
            except KeyboardInterrupt:
                self.interrupts += 1
                if self.interrupts >= 2:
                    return None
                self.console.print("[dim](Ctrl-C again, or Ctrl-D, to leave)[/dim]")
                continue
            except EOFError:
                return None
            self.interrupts = 0
            return text

    async def _turn(self, text: str) -> None:
        assert self.session is not None
        session = self.session
        message, specialist, task = self._message(text)
        call = None
        if specialist is not None:  # ``@name task``: a Task call of this session, made for the user
            if session.delegator is None:
                self.console.print("[red]this session cannot delegate (no specialists, or max_depth is 0)[/red]")
                return
            arguments = {"name": specialist, "prompt": task, "description": task[:60]}
            call = ToolCall(id=f"user_{secrets.token_hex(6)}", name="Task", arguments=arguments)
        self.view = view = TurnView(self.console, session.session_id)
        async with anyio.create_task_group() as tg:
            tg.start_soon(view.consume, session.events())

            async def watch() -> None:
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        session.cancel("cancelled")  # the turn ends, its children too; back to the prompt
                        return

            tg.start_soon(watch)
            result = await session.send(message, call=call)
            with anyio.move_on_after(5):
                await view.done.wait()  # everything the turn did is on the screen
            if call is not None and result.output:
                self.console.print(Markdown(printable(result.output)))
            if result.status == "cancelled":
                self.console.print(Text("[cancelled] the turn was stopped; what it did is kept", style="yellow"))
            elif result.status != "completed" and not view.errors:  # (an error the view showed is said once)
                reason = result.error or result.status
                self.console.print(Text(f"[{result.status}] {printable(reason)}", style="red"))
            tg.cancel_scope.cancel()
        self.view = None
        self.spent = await self._recorded(subtree_usage, self.ctx.store, session.session_id)

    def _message(self, text: str) -> tuple[str, str | None, str]:
        """The message to send, with the files its ``@path`` words name attached; the specialist its leading
        ``@name`` names (if any), and the task for it (the message without the name)."""
        specialist = None
        match = re.match(r"@([A-Za-z0-9][\w-]*)\s+(.*)", text.strip(), re.DOTALL)
        if match and match.group(1) in self.ctx.registry.specialists:
            specialist = match.group(1)
        attached = []
        for word in re.findall(r"(?<!\S)@([^\s@]+)", text):
            if not (self.workspace / word).is_file():
                continue
            try:  # through the workspace: a path (or link) that leads outside it is not read
                fd = self.ctx.workspace.open(word)
                with os.fdopen(fd, "rb") as f:
                    content = f.read(ATTACH_BYTES).decode("utf-8", errors="replace")
            except (OSError, ZeroError) as e:
                self.console.print(f"[yellow]@{printable(word)} not attached: {printable(str(e))}[/yellow]")
                continue
            attached.append(f'<file path="{word}">\n{content}\n</file>')
            self.console.print(Text(f"attached @{printable(word)} ({len(content):,} characters)", style="dim"))
        message = "\n\n".join([text, *attached]) if attached else text
        task = "\n\n".join([match.group(2), *attached]) if specialist and match else message
        return message, specialist, task

    # -- sessions ----------------------------------------------------------------

    async def _open(self, session_id: str | None) -> None:
        if session_id is None:
            self.session = await open_agent(
                self.ctx,
                title="",  # its first message names it
                system_prompt=default_system_prompt(str(self.workspace)),
                permission_mode=self.mode,
                max_turns=self.settings.max_turns,
            )
        else:
            self.session = await resume_agent(
                self.ctx, session_id, permission_mode=self.mode, max_turns=self.settings.max_turns
            )
        self.spent = await self._recorded(subtree_usage, self.ctx.store, self.session.session_id)
        await self.session.__aenter__()
        self._header(resumed=session_id is not None)
        if session_id is not None:
            self._recap()

    async def _close(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            await session.aclose()
            self.console.print(f"[dim]session {session.session_id} · resume it with: zero --continue[/dim]")

    def _header(self, *, resumed: bool) -> None:
        assert self.session is not None
        s = self.settings
        what = "resumed" if resumed else "new"
        self.console.print(
            Text.assemble(
                ("zero", "bold"),
                f" · {printable(str(self.workspace))} · {s.provider}/{self.session.agent.config.model} · ",
                (self.mode, "cyan"),
                f" · {what} session {self.session.session_id}",
            )
        )
        self.console.print("[dim]/help for commands, @name to delegate, Ctrl-C stops a turn, Ctrl-D leaves[/dim]")

    def _recap(self) -> None:
        """The last exchanges of a reopened session, so the user sees where it left off."""
        assert self.session is not None
        messages = [m for m in self.session.agent.messages if m.role in ("user", "assistant")]
        starts = [i for i, m in enumerate(messages) if m.role == "user"][-RECAP_TURNS:]
        for start, end in zip(starts, [*starts[1:], len(messages)], strict=True):
            asked = messages[start].content.strip().splitlines() or [""]
            self.console.print(Text(f"› {printable(asked[0])[:200]}" + (" …" if len(asked) > 1 else ""), style="dim"))
            answer = next((m.content for m in reversed(messages[start + 1 : end]) if m.content.strip()), "")
            lines = answer.strip().splitlines()
            if lines:
                shown = "\n".join(lines[:RECAP_LINES]) + (
                    f"\n\n… {len(lines) - RECAP_LINES} more lines" if len(lines) > RECAP_LINES else ""
                )
                self.console.print(Markdown(printable(shown)))
        if starts:
            self.console.print(Text("(the conversation goes on from here)", style="dim"))

    def _toolbar(self) -> str:
        if self.session is None:
            return ""
        model = self.session.agent.config.model
        return (
            f" {model} · {self.mode} · {short_id(self.session.session_id)} · "
            f"{self.spent.total_tokens:,} tokens · {format_cost(self.spent)} "
        )

    # -- approvals ---------------------------------------------------------------

    async def _approve(self, request: ApprovalRequest) -> Approval:
        judged = await anyio.to_thread.run_sync(judge, request, self.ctx.workspace, self.ctx.redactor)
        if judged.rule is not None and judged.rule.key in self.allowed:
            return Approval(granted=True, note="allowed for this session", pin=judged.pin)
        async with self._asking:  # children ask one at a time
            view = self.view
            if view is not None:
                view.pause()
            try:
                return await self._ask(request, judged)
            finally:
                if view is not None:
                    view.resume()

    async def _ask(self, request: ApprovalRequest, judged: Judgement) -> Approval:
        assert self.session is not None
        shown, rule = request.shown, judged.rule
        who = "" if shown.session_id == self.session.session_id else f" ({self._child_name(shown.session_id)})"
        head = [Text(f"? {shown.name}{who} needs approval: {shown.reason}", style="bold yellow")]
        head += [Text(f"! {why}", style="bold red") for why in judged.once]
        for line in head:
            self.console.print(line)
        always = f"  [a] always for {printable(rule.label)} this session" if rule is not None else ""
        rows = _rows(self.console, _preview(shown, judged.preview))
        # A page is what fits between the question's head and the note and question under it: nothing is
        # passed over unseen (nor pushed off the screen by what follows it).
        longest = Text(f"allow? [y] once{always}  [n] no  [m] more: ")
        page = max(3, self.console.size.height - len(_rows(self.console, [*head, longest])) - 1)
        shown_rows = min(len(rows), page)
        for row in rows[:shown_rows]:
            self.console.print(row)
        while True:
            more = len(rows) - shown_rows
            if more:
                self.console.print(Text(f"  ... {more:,} more lines not shown: [m] shows the next", style="dim"))
            question = f"allow? [y] once{always}  [n] no{'  [m] more' if more else ''}: "
            keys = "yn" + ("a" if rule is not None else "") + ("m" if more else "")
            answer = await _choose(self.choosers, question, keys)
            if answer in ("m", "more") and more:
                for row in rows[shown_rows : shown_rows + page]:
                    self.console.print(row)
                shown_rows = min(len(rows), shown_rows + page)
            elif answer in ("y", "yes"):
                return Approval(granted=True, pin=judged.pin)
            elif answer in ("a", "always") and rule is not None:
                self.allowed.add(rule.key)
                return Approval(granted=True, note="allowed for this session", pin=judged.pin)
            elif answer in ("n", "no"):
                try:
                    note = await self.prompt.prompt_async("a note for the model (Enter for none): ")
                except (KeyboardInterrupt, EOFError):
                    note = ""
                return Approval(granted=False, note=note.strip())

    def _child_name(self, session_id: str) -> str:
        if self.view is not None and session_id in self.view.names:
            return self.view.names[session_id]
        return short_id(session_id)

    # -- slash commands --------------------------------------------------------

    async def _command(self, line: str) -> bool:
        """Run a slash command; False to leave."""
        name, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        if name not in COMMANDS:
            close = difflib.get_close_matches(name, COMMANDS, n=1)
            hint = f" (did you mean /{close[0]}?)" if close else ""
            self.console.print(f"[red]no command /{printable(name)}{hint}; /help lists them[/red]")
            return True
        assert self.session is not None
        match name:
            case "exit":
                return False
            case "help":
                for command, text in COMMANDS.items():
                    self.console.print(f"  /{command:<12} {text}")
            case "specialists":
                for spec in self.ctx.registry.specialists.values():
                    self.console.print(f"  @{spec.name:<14} {printable(spec.description)}")
            case "agents":
                await self._agents()
            case "tree":
                await self._tree()
            case "sessions":
                await self._sessions()
            case "resume":
                await self._switch(rest)
            case "clear":
                await self._close()
                await self._open(None)
            case "model":
                if not rest:
                    self.console.print(f"model: {self.session.agent.config.model}")
                else:
                    self.session.agent.switch_model(rest)
                    self.console.print(f"model: {printable(rest)} from the next turn")
            case "permission":
                self._permission(rest)
            case "cost":
                await self._cost()
            case "compact":
                try:
                    done = await self.session.agent.compact()
                except ZeroError as e:  # a failed model call is a message; the prompt comes back
                    self.console.print(Text(f"/compact failed: {printable(str(e))}", style="red"))
                else:
                    self.console.print("compacted" if done else "nothing to compact yet")
            case "init":
                await self._turn(INIT_PROMPT)
        return True

    def _permission(self, wanted: str) -> None:
        assert self.session is not None
        if wanted not in PERMISSION_MODES:
            self.console.print(f"permission mode: {self.mode} (at most {self.settings.ceiling}); /permission MODE")
            return
        mode, narrowed = within(self.settings.ceiling, wanted, "/permission")
        self.mode = mode
        self.session.set_permission_mode(mode)
        self.console.print(f"[yellow]{narrowed}[/yellow]" if narrowed else f"permission mode: {mode}")

    async def _recorded(self, read: Callable[..., T], *args: object) -> T:
        """``read(*args)`` (in a thread) once everything recorded so far is on disk."""
        await anyio.to_thread.run_sync(self.ctx.store.flush)
        return await anyio.to_thread.run_sync(read, *args)

    async def _agents(self) -> None:
        assert self.session is not None
        tree = await self._recorded(session_tree, self.ctx.store, self.session.session_id)
        if not tree.children:
            self.console.print("no children yet")
        for node in tree.walk()[1:]:
            m = node.meta
            usage = node.subtree_usage
            self.console.print(
                f"  {'  ' * (m.depth - 1)}{m.specialist or m.agent_name:<14} {m.status:<10} "
                f"{usage.total_tokens:>8,} tokens {format_cost(usage):>10}  {m.session_id}"
            )

    async def _tree(self) -> None:
        assert self.session is not None
        from zero.orchestrator.live import tree_from_store
        from zero.orchestrator.view import render_tree

        tree = await self._recorded(tree_from_store, self.ctx.store, self.session.session_id)
        self.console.print(render_tree(tree, ids=True))

    async def _cost(self) -> None:
        assert self.session is not None
        tree = await self._recorded(session_tree, self.ctx.store, self.session.session_id)
        own, total = tree.meta.usage.to_usage(), tree.subtree_usage
        self.spent = total
        self.console.print(
            f"own {own.total_tokens:,} tokens, {format_cost(own)} · "
            f"with children {total.total_tokens:,} tokens, {format_cost(total)}"
        )

    async def _sessions(self) -> None:
        rows = await anyio.to_thread.run_sync(session_store().rows)
        mine = [
            r for r in rows if not r.get("parentSessionId") and same_folder(str(r.get("cwd") or ""), self.workspace)
        ]
        for row in mine[:20]:
            self.console.print(
                f"  {short_id(row['sessionId'])}  {row.get('status', ''):<12} {row.get('updatedAt', '')[:19]}  "
                f"{printable(str(row.get('title', ''))[:60])}"
            )
        if not mine:
            self.console.print("no sessions in this folder yet")

    async def _switch(self, text: str) -> None:
        if not text:
            self.console.print("/resume ID (see /sessions)")
            return
        try:
            session_id = _session_here(session_store(), text, self.workspace)
        except ZeroError as e:
            self.console.print(f"[red]{printable(str(e))}[/red]")
            return
        await self._close()
        await self._open(session_id)


def _preview(request: PermissionRequested, edit: Preview | None) -> list[Text]:
    """The call as the user should judge it: an edit as the diff of what the tool would write (line ends
    and all), a command as it would run."""
    args = request.arguments
    if edit is not None:
        path = printable(edit.path)
        via = [Text(f"  {printable(edit.via)} leads to {path}", style="bold")] if edit.via else []
        if edit.after is None:
            return [*via, Text(f"  {path}: {printable(edit.note)}", style="yellow")]
        styles = {"+": "green", "-": "red", "@": "cyan"}
        shown = []
        diff = difflib.unified_diff(
            _lines(edit.before or ""), _lines(edit.after), f"a/{path}", f"b/{path}", lineterm=""
        )
        for at, line in enumerate(diff):
            shown.append(Text(printable(line.removesuffix("\n")), style=styles.get(line[:1], "")))
            if at > 1 and line[:1] in "+- " and not line.endswith("\n"):  # past the two file lines
                shown.append(Text("\\ no newline at end of file", style="dim"))
        return via + (shown or [Text(f"  {path}: (no change shows)")])
    text = call_text(request.name, args)
    return _folded(text, "  $ " if request.name == "bash" else "  ", "    " if request.name == "bash" else "  ")


def _folded(text: str, first: str, rest: str) -> list[Text]:
    """``text``'s lines (the first after ``first``, the others after ``rest``), each run of two or more blank
    lines one line saying how many: a run of them cannot push what comes before off the screen."""
    lines: list[Text] = []
    blank = 0
    for at, line in enumerate([*text.split("\n"), None]):
        if line is not None and not line.strip() and at:
            blank += 1
            continue
        if blank:
            lines += [Text(rest)] if blank == 1 else [Text(f"{rest}({blank:,} blank lines)", style="dim")]
            blank = 0
        if line is not None:
            lines.append(Text(f"{first if not at else rest}{printable(line)}"))
    return lines


def _rows(console: Console, lines: list[Text]) -> list[Text]:
    """``lines`` as the screen rows they take (a long line wraps)."""
    return [row for line in lines for row in line.wrap(console, console.width)]


def _lines(text: str) -> list[str]:
    """``text``'s lines, each with its end (split at newlines only: a carriage return or a form feed stays in
    its line, shown as its escape)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


async def _choose(choosers: dict[str, PromptSession[str]], question: str, keys: str) -> str:
    """One of ``keys``, answered with a single key press (a word and Enter works too); Ctrl-C or Ctrl-D is
    "n". The prompt for a set of keys is made once and kept in ``choosers``: making one loads every key
    binding it has, which costs more than the question it asks."""
    if keys not in choosers:
        choosers[keys] = _chooser(keys)
    try:
        return (await choosers[keys].prompt_async(question)).strip().lower()
    except (KeyboardInterrupt, EOFError):
        return "n"


def _chooser(keys: str) -> PromptSession[str]:
    bindings = KeyBindings()
    for key in keys:
        bindings.add(key)(lambda event, key=key: event.app.exit(result=key))
    for key in ("c-c", "c-d"):
        bindings.add(key)(lambda event: event.app.exit(result="n"))
    return PromptSession(key_bindings=bindings)


def _typing_command(text: str) -> bool:
    return text.startswith("/") and " " not in text


class _Completer(Completer):
    """``/commands``, ``@specialists`` at the start of a message, and ``@paths`` of the workspace."""

    def __init__(self, shell: Shell):
        self.shell = shell
        self.paths = PathCompleter(get_paths=lambda: [str(shell.workspace)])

    def get_completions(self, document: Document, complete_event: object):  # type: ignore[no-untyped-def]
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for name in COMMANDS:
                if name.startswith(text[1:]):
                    yield Completion(f"/{name}", start_position=-len(text), display_meta=COMMANDS[name][:50])
            return
        word = text.split()[-1] if text.split() and not text.endswith(" ") else ""
        if not word.startswith("@"):
            return
        if text.strip() == word:  # the first word: a specialist
            ctx = getattr(self.shell, "ctx", None)
            names = list(ctx.registry.specialists) if ctx is not None else []
            for name in names:
                if name.startswith(word[1:]):
                    yield Completion(f"@{name}", start_position=-len(word), display_meta="specialist")
        inner = Document(word[1:], len(word) - 1)
        yield from self.paths.get_completions(inner, complete_event)  # type: ignore[arg-type]


def _keys() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("escape", "enter")
    def _newline(event) -> None:  # type: ignore[no-untyped-def]
        """Esc+Enter: a new line in the message."""
        event.current_buffer.insert_text("\n")

    @keys.add("enter")
    def _submit(event) -> None:  # type: ignore[no-untyped-def]
        """Enter sends the message; after a trailing backslash it continues on the next line."""
        buffer = event.current_buffer
        if buffer.text.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return keys
