"""Running specialists as child agents: the Task machinery of one agent.

A ``Delegator`` belongs to one agent session (its depth and permission mode) and gives it
the Task, TaskOutput and TaskStop tools, and CreateSpecialist (``zero.specialists.creating``).
Every child is an ``AgentSession`` of its own, a node of the run tree below its parent's, run
in-process on the same event loop. The parent's
log records ``child_start`` and ``child_end`` between the tool call that started the child and
its result; the child's events reach whoever listens to the parent through the tree.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from zero.agent import ChildFinished, ChildMode, ChildStarted, Event, ToolCallStarted, ToolFinished
from zero.agent.output_schema import ANY_JSON, OutputSchema, schema_problem
from zero.errors import ToolError, UsageError, ZeroError
from zero.sessions import AgentSession, SessionMetadata, lineage, new_session_id, same_folder, validate_session_id
from zero.specialists.context import AgentContext
from zero.specialists.creating import CreateSpecialist
from zero.specialists.envelope import envelope
from zero.specialists.isolation import ChildWorktree, HandedBack, bring_back, open_worktree, reopen_worktree
from zero.specialists.registry import Specialist
from zero.specialists.tools import Isolation, Task, TaskOutput, TaskStop
from zero.tools import PermissionMode, Tool, ToolOutput, Workspace
from zero.tools.base import Background
from zero.tools.describe import describe_call

__all__ = ["ChildFactory", "Delegator"]


class ChildFactory(Protocol):
    async def __call__(
        self,
        delegator: Delegator,
        spec: Specialist,
        *,
        session_id: str,
        description: str,
        resume: bool,
        workspace: Workspace | None = None,
        output_schema: OutputSchema | None = None,
    ) -> AgentSession:
        """A child session of ``delegator``'s agent working as ``spec``: new, or resumed from its log;
        ``workspace``: where it works instead of its caller's workspace (its worktree); ``output_schema``: the
        result it must end with (None: its manifest's)."""
        ...


@dataclass(kw_only=True)
class _Child:
    session: AgentSession
    specialist: Specialist
    description: str
    started: float = field(default_factory=time.monotonic)
    done: anyio.Event = field(default_factory=anyio.Event)
    tools_used: list[str] = field(default_factory=list)
    files_changed: set[str] = field(default_factory=set)
    activity: str = "starting"
    background: bool = False
    worktree: ChildWorktree | None = None  # isolation = "worktree": where it works
    handed: HandedBack | None = None  # what its worktree left, once it ended

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def follow(self, event: Event) -> None:
        """What TaskOutput reports of a running child: the tools it used and what it does now (it hears the
        child's own events only)."""
        if isinstance(event, ToolCallStarted):
            self.tools_used.append(event.name)
            self.activity = describe_call(event.name, event.arguments)
        elif isinstance(event, ToolFinished):
            self.files_changed.update(event.changed_files)
            self.activity = "thinking..."

    def envelope(self) -> ToolOutput:
        result = self.session.result
        assert result is not None
        text = envelope(
            session_id=self.session_id,
            status=result.status,
            specialist=self.specialist.name,
            output=result.output,
            usage=result.usage,
            turns=result.turns,
            duration_ms=result.duration_ms,
            tools_used=self.tools_used,
            files_changed=self.files_changed,
            error=result.error,
            worktree=self.handed.lines() if self.handed is not None else (),
            typed=self.session.agent.config.output_schema is not None,
        )
        return ToolOutput(
            text=text, is_error=result.status != "completed", changed_files=tuple(sorted(self.files_changed))
        )


class _RunJob:
    """A background child as a job of the run that started it, like a shell job left running: the run's end
    stops it (``cancelled``, or the status the whole run is stopping with) and waits until its end is recorded."""

    def __init__(self, child: _Child):
        self.child = child

    async def aclose(self) -> None:
        if not self.child.done.is_set():
            session = self.child.session
            session.cancel(session.tree.why(session.node))
            await self.child.done.wait()


class Delegator:
    """The Task machinery of one agent session. ``opened()`` is its tool set. A background child is
    stopped when the run that started it ends (before that run's end is recorded); leaving ``opened()``
    cancels any still running all the same."""

    def __init__(
        self,
        ctx: AgentContext,
        parent: AgentSession,
        *,
        permission_mode: PermissionMode,
        caller_tools: frozenset[str],
        open_child: ChildFactory,
    ):
        self.ctx = ctx
        self.parent = parent
        self.permission_mode = permission_mode
        self.caller_tools = caller_tools
        self.children: dict[str, _Child] = {}
        self._open_child = open_child
        self._limiter = anyio.CapacityLimiter(ctx.max_concurrency)
        self._tg: TaskGroup | None = None

    @property
    def session_id(self) -> str:
        return self.parent.session_id

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[Sequence[Tool]]:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                create = CreateSpecialist(self.ctx, caller_tools=self.caller_tools)
                yield [Task(self, self.ctx.registry.names), TaskOutput(self), TaskStop(self), create]
            finally:
                for child in self.children.values():
                    if child.background and not child.done.is_set():
                        child.session.cancel(self.ctx.tree.why(child.session.node))

    # -- the Task tool ------------------------------------------------------------

    async def task(
        self,
        *,
        name: str | None,
        prompt: str,
        description: str | None,
        background: bool,
        resume: str | None,
        call_id: str,
        jobs: list[Background] | None = None,
        isolation: Isolation | None = None,
        output_schema: dict[str, Any] | str | None = None,
    ) -> ToolOutput:
        """Run a child (``background``: start it and return its task id; it joins ``jobs``, the background jobs
        of the run that started it, so that run's end stops it and records its end before its own);
        ``isolation``: ``worktree`` runs it in a git worktree of its own (None: as its manifest says, else not);
        ``output_schema``: the JSON Schema its result must match, or ``"json"`` (None: as its manifest says)."""
        typed = _typed(output_schema)
        if resume:
            if background:
                raise ToolError("a resumed task runs in the foreground: drop run_in_background")
            if isolation == "worktree":
                raise ToolError("a resumed task works where it worked before: drop isolation")
            child = await self._resume(resume, name, typed)
            mode: ChildMode = "resume"
        else:
            if not name:
                raise ToolError("Task needs a specialist name (or resume with a session id)")
            child = await self._start(name, description, background, isolation, typed)
            mode = "background" if background else "foreground"
        self.parent.emit(
            ChildStarted(
                session_id=self.session_id,
                child_session_id=child.session_id,
                specialist=child.specialist.name,
                agent_name=child.specialist.name,
                mode=mode,
                tool_call_id=call_id,
                description=child.description,
                root_session_id=self.parent.node.root_session_id,
            )
        )
        if background:
            assert self._tg is not None
            self._tg.start_soon(self._execute, child, prompt)
            if jobs is not None:
                jobs.append(_RunJob(child))
            return ToolOutput(
                text=f"task_id: {child.session_id}\nstatus: running\nspecialist: {child.specialist.name}\n"
                f"description: {child.description}\n\n"
                f'Use TaskOutput with task_id "{child.session_id}" to check on it or wait for it, '
                f"and TaskStop to stop it."
            )
        await self._execute(child, prompt)
        return child.envelope()

    async def _start(
        self,
        name: str,
        description: str | None,
        background: bool,
        isolation: Isolation | None,
        typed: dict[str, Any] | None,
    ) -> _Child:
        spec = self.ctx.registry.specialists.get(name)
        if spec is None:
            available = ", ".join(self.ctx.registry.names()) or "none"
            raise ToolError(
                f"there is no specialist named {name!r}. Available: {available}. "
                "Pick the one whose description fits the task."
            )
        text = description or spec.description
        session_id = new_session_id("child")
        worktree = None
        if (isolation or spec.isolation or "none") == "worktree":
            try:
                worktree = await anyio.to_thread.run_sync(open_worktree, self.ctx.workspace, session_id, spec.name)
            except ZeroError as e:
                raise ToolError(f"cannot start {spec.name} in a worktree of its own: {e}") from e
        output = OutputSchema.of(typed, spec.output_retries)
        session = await self._open(spec, session_id, text, resume=False, worktree=worktree, output=output)
        child = _Child(session=session, specialist=spec, description=text, background=background, worktree=worktree)
        return self._keep(child)

    async def _resume(self, session_id: str, name: str | None, typed: dict[str, Any] | None) -> _Child:
        try:
            validate_session_id(session_id)
        except UsageError as e:
            raise ToolError(str(e)) from e
        if session_id in self.children and not self.children[session_id].done.is_set():
            raise ToolError(f"task {session_id} is still running; wait for it with TaskOutput or stop it first")
        try:
            meta: SessionMetadata = await anyio.to_thread.run_sync(self.ctx.store.metadata, session_id)
            chain = await anyio.to_thread.run_sync(lineage, self.ctx.store, session_id)
        except ZeroError:
            chain = []
        if self.session_id not in [m.session_id for m in chain[:-1]]:
            # Another run's session (maybe another project's) is not this agent's to read or write;
            # the message is the same whether it exists or not.
            raise ToolError(
                f"cannot resume {session_id}: Task resumes only sessions this agent (or one of its "
                "tasks) started; start a new task instead"
            )
        if meta.session_kind != "child" or not meta.specialist:
            raise ToolError(f"session {session_id} is not a specialist's session, so Task cannot resume it")
        if name and name != meta.specialist:
            raise ToolError(f"session {session_id} belongs to specialist {meta.specialist!r}, not {name!r}")
        spec = self.ctx.registry.specialists.get(meta.specialist)
        if spec is None:
            raise ToolError(f"the specialist {meta.specialist!r} of session {session_id} no longer exists")
        worktree = None
        if not same_folder(meta.cwd, self.ctx.workspace.root):  # the one workspace check every resume makes
            try:  # else a child that worked in a worktree of its own: made again from its branch
                worktree = await anyio.to_thread.run_sync(reopen_worktree, session_id, spec.name)
            except ZeroError as e:
                raise ToolError(f"cannot open the worktree of {session_id} again: {e}") from e
            if worktree is None or not same_folder(meta.cwd, worktree.tree.workspace):
                raise ToolError(f"session {session_id} worked in another folder ({meta.cwd}); start a new task")
        output = OutputSchema.of(typed, spec.output_retries)
        session = await self._open(spec, session_id, meta.title, resume=True, worktree=worktree, output=output)
        return self._keep(_Child(session=session, specialist=spec, description=meta.title, worktree=worktree))

    async def _open(
        self,
        spec: Specialist,
        session_id: str,
        description: str,
        *,
        resume: bool,
        worktree: ChildWorktree | None,
        output: OutputSchema | None,
    ) -> AgentSession:
        """The child's session, working in ``worktree`` if it has one (handed back, if the child cannot start)."""
        workspace = worktree.workspace(self.ctx.workspace) if worktree is not None else None
        try:
            return await self._open_child(
                self,
                spec,
                session_id=session_id,
                description=description,
                resume=resume,
                workspace=workspace,
                output_schema=output,
            )
        except BaseException as e:
            if worktree is not None:  # it never ran this time: what it holds is kept on its branch, or dropped
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(bring_back, worktree, session_id, "failed")
            if isinstance(e, ZeroError):
                raise ToolError(f"cannot start {spec.name}: {e}") from e
            raise

    def _keep(self, child: _Child) -> _Child:
        self.ctx.tree.attach(child.session.node, child.follow)
        self.children[child.session_id] = child
        return child

    async def _execute(self, child: _Child, prompt: str) -> None:
        """Run the child to a final status; the parent's log and usage learn of it exactly once."""
        started = time.monotonic()
        try:
            async with self._limiter:
                async with anyio.create_task_group() as tg:
                    if child.specialist.timeout_seconds:
                        tg.start_soon(self._watchdog, child, child.specialist.timeout_seconds)
                    async with child.session:
                        await child.session.send(prompt)
                    tg.cancel_scope.cancel()
        finally:
            if child.worktree is not None:  # its work is committed on its branch before its end is told
                with anyio.CancelScope(shield=True):
                    status = child.session.result.status if child.session.result else "interrupted"
                    child.handed = await anyio.to_thread.run_sync(bring_back, child.worktree, child.session_id, status)
            self._finish(child, started)

    async def _watchdog(self, child: _Child, seconds: float) -> None:
        await anyio.sleep(seconds)
        child.session.cancel("timed_out")

    def _finish(self, child: _Child, started: float) -> None:
        result = child.session.result
        if result is None:  # stopped before it could start: still give it a final status
            result = child.session.end_unstarted()
        usage = child.session.run_usage
        self.parent.emit(
            ChildFinished(
                session_id=self.session_id,
                child_session_id=child.session_id,
                specialist=child.specialist.name,
                status=result.status,
                usage=usage,
                duration_ms=int((time.monotonic() - started) * 1000),
                branch=child.handed.branch if child.handed else None,
                diff_stat=str(child.handed.stat) if child.handed and child.handed.stat else None,
            )
        )
        child.done.set()

    # -- TaskOutput / TaskStop ------------------------------------------------------

    def _find(self, task_id: str) -> _Child:
        child = self.children.get(task_id)
        if child is None:
            known = ", ".join(self.children) or "none"
            raise ToolError(f"no task {task_id!r} was started by this agent; known tasks: {known}")
        return child

    async def output(self, task_id: str, block: bool, wait_seconds: float) -> ToolOutput:
        child = self._find(task_id)
        if block and not child.done.is_set():
            with anyio.move_on_after(wait_seconds):
                await child.done.wait()
        if child.done.is_set():
            return child.envelope()
        agent = child.session.agent
        partial = agent.output.strip() or "(nothing yet)"
        elapsed = time.monotonic() - child.started
        return ToolOutput(
            text=f"task_id: {task_id}\nstatus: running\nspecialist: {child.specialist.name}\n"
            f"elapsed: {elapsed:.1f} s · turns: {agent.turns} · tokens: {agent.usage.total_tokens}\n"
            f"now: {child.activity}\ntools used: {', '.join(sorted(set(child.tools_used))) or 'none'}\n"
            f"---\nlatest output: {partial}"
        )

    async def stop(self, task_id: str) -> ToolOutput:
        child = self._find(task_id)
        if not child.done.is_set():
            child.session.cancel("cancelled")
            await child.done.wait()
        return child.envelope()


def _typed(output_schema: dict[str, Any] | str | None) -> dict[str, Any] | None:
    """The schema a Task's ``output_schema`` argument asks for (None: none); a ``ToolError`` for a bad one."""
    if output_schema is None:
        return None
    if output_schema == ANY_JSON:
        return {}
    problem = schema_problem(output_schema)
    if problem is not None:
        raise ToolError(f'output_schema: {problem}; give a JSON Schema object, or "json" for any JSON value')
    assert isinstance(output_schema, dict)
    return output_schema
