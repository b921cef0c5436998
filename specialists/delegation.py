"""Running specialists as child agents: sessions, limits, background tasks, roll-up.

A ``Delegator`` belongs to one agent (its session, depth and permission mode) and
gives that agent the Task, TaskOutput and TaskStop tools. Every child is an
in-process ``AgentRun`` on the same event loop, with its own session linked to its
parent and root. Its events go to its own session and, tagged with its session id,
to the shared event stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from zero.agent import (
    AgentConfig,
    AgentRun,
    EventSink,
    Message,
    Provider,
    RunEvent,
    RunResult,
    RunStatus,
    SubagentFinished,
    SubagentStarted,
    Usage,
)
from zero.errors import ToolError, UsageError, ZeroError
from zero.sessions import (
    SessionMetadata,
    SessionRecorder,
    add_children_usage,
    messages_from_events,
    new_session_id,
    set_status,
    validate_session_id,
)
from zero.specialists._context import (
    DELEGATE_TOOLS,
    AgentContext,
    InvocationBudget,
    child_system_prompt,
    specialists_prompt,
)
from zero.specialists.envelope import envelope
from zero.specialists.registry import Specialist
from zero.tools import PermissionMode, Tool, ToolOutput, ToolRegistry, builtin_tools
from zero.tools.describe import describe_call

__all__ = ["Delegator", "delegating_agent", "specialist_agent"]


@dataclass
class _Child:
    session_id: str
    specialist: Specialist
    description: str
    run: AgentRun
    delegator: Delegator | None
    started: float = field(default_factory=time.monotonic)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)  # may be cancelled before it starts
    tools_used: list[str] = field(default_factory=list)
    files_changed: set[str] = field(default_factory=set)
    activity: str = "starting"
    background: bool = False

    def result_text(self) -> str:
        result = self.run.result
        assert result is not None
        return envelope(
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
        )


def specialist_agent(
    ctx: AgentContext,
    spec: Specialist,
    *,
    session_id: str,
    root_session_id: str,
    depth: int,
    provider: Provider,
    model: str,
    permission_mode: PermissionMode,
    caller_tools: set[str],
    sink: EventSink,
    history: list[Message] | None = None,
    recorded: int = 0,
    max_turns: int | None = None,
    extra_tools: tuple[Tool, ...] = (),
    role: str | None = None,
) -> tuple[AgentRun, Delegator | None]:
    """An agent that works as ``spec``: its manifest's tools narrowed to the caller's, the caller's
    permission mode, its limits, and Task tools of its own while ``depth`` allows."""
    allowed = [t for t in spec.tools if t in caller_tools or t in DELEGATE_TOOLS]
    tools: list[Tool] = [t for t in builtin_tools() if t.name in allowed] + list(extra_tools)
    wants_delegate = any(t in DELEGATE_TOOLS for t in allowed)
    delegator = None
    unavailable: dict[str, str] = {}
    if wants_delegate and depth < ctx.max_depth:
        delegator = Delegator(
            ctx,
            session_id=session_id,
            root_session_id=root_session_id,
            depth=depth,
            permission_mode=permission_mode,
            caller_tools={t.name for t in tools},
        )
        tools += delegator.tools()
    elif wants_delegate:
        reason = f"this agent is at depth {depth} and max_depth is {ctx.max_depth}; do the work yourself"
        unavailable = dict.fromkeys(DELEGATE_TOOLS, reason)
    guards = ctx.guards
    if spec.budget_tokens is not None or spec.budget_cost_usd is not None:
        guards = (*guards, InvocationBudget(spec.budget_tokens, spec.budget_cost_usd))
    config = AgentConfig(
        provider=provider,
        model=model,
        tools=ToolRegistry(tools),
        workspace=ctx.workspace,
        permission_mode=permission_mode,  # never wider than the caller's
        max_turns=max_turns or spec.max_turns or ctx.default_max_turns,
        reasoning_effort=spec.reasoning_effort,
        prices=ctx.prices,
        retry=ctx.retry,
        guards=guards,
        unavailable=unavailable,
    )
    if not history:
        cwd = str(ctx.workspace.root)
        history = [Message("system", child_system_prompt(spec, cwd, delegator is not None, ctx.registry, role))]
    return AgentRun(config, session_id, history, sink, recorded=recorded), delegator


class Delegator:
    """The Task machinery of one agent. Use as ``async with``: leaving it cancels its
    still-running background children, which are recorded ``cancelled``."""

    def __init__(
        self,
        ctx: AgentContext,
        *,
        session_id: str,
        root_session_id: str,
        depth: int,
        permission_mode: PermissionMode,
        caller_tools: set[str],
    ):
        self.ctx = ctx
        self.session_id = session_id
        self.root_session_id = root_session_id
        self.depth = depth
        self.permission_mode = permission_mode
        self.caller_tools = caller_tools
        self.children: dict[str, _Child] = {}
        self._limiter = anyio.CapacityLimiter(ctx.max_concurrency)
        self._tg: TaskGroup | None = None
        self.stopping: RunStatus | None = None  # set when the whole run is being stopped, and why

    async def __aenter__(self) -> Delegator:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        assert self._tg is not None
        for child in self.children.values():
            if child.background and not child.done.is_set():
                self._cancel(child, self.stopping or "cancelled")
        return await self._tg.__aexit__(*exc)  # type: ignore[arg-type]

    @property
    def can_delegate(self) -> bool:
        return self.depth < self.ctx.max_depth

    def tools(self) -> list[Tool]:
        from zero.specialists.tools import Task, TaskOutput, TaskStop

        return [Task(self), TaskOutput(self), TaskStop(self)] if self.can_delegate else []

    def mark_stopping(self, status: RunStatus) -> None:
        """The whole run is stopping (Ctrl-C, a spent budget): every running descendant ends ``status``."""
        self.stopping = status
        for child in self.children.values():
            if not child.done.is_set():
                child.run.cancel_status = status
                if child.delegator is not None:
                    child.delegator.mark_stopping(status)

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
    ) -> ToolOutput:
        if not self.can_delegate:
            raise ToolError(
                f"Task is not available at depth {self.depth} (max_depth is {self.ctx.max_depth}); do the work yourself"
            )
        if resume:
            if background:
                raise ToolError("a resumed task runs in the foreground: drop run_in_background")
            child = await self._resume(resume, name, call_id)
        else:
            if not name:
                raise ToolError("Task needs a specialist name (or resume with a session id)")
            child = await self._start(name, description, call_id, background)
        if background:
            assert self._tg is not None
            self._tg.start_soon(self._execute, child, prompt)
            return ToolOutput(
                f"task_id: {child.session_id}\nstatus: running\nspecialist: {child.specialist.name}\n"
                f"description: {child.description}\n\n"
                f'Use TaskOutput with task_id "{child.session_id}" to check on it or wait for it, '
                f"and TaskStop to stop it."
            )
        await self._execute(child, prompt)
        return self._envelope(child)

    async def _start(self, name: str, description: str | None, call_id: str, background: bool) -> _Child:
        spec = self.ctx.registry.specialists.get(name)
        if spec is None:
            available = ", ".join(self.ctx.registry.names()) or "none"
            raise ToolError(
                f"there is no specialist named {name!r}. Available: {available}. "
                "Pick the one whose description fits the task."
            )
        session_id = new_session_id("child")
        child = self._child(session_id, spec, description or spec.description, [], 0, background)
        meta = SessionMetadata(
            session_id=session_id,
            session_kind="child",
            title=(description or spec.description)[:80],
            cwd=str(self.ctx.workspace.root),
            provider=child.run.config.provider.name,
            model_id=child.run.config.model,
            parent_session_id=self.session_id,
            root_session_id=self.root_session_id,
            agent_name=spec.name,
            specialist=spec.name,
            depth=self.depth + 1,
        )
        await anyio.to_thread.run_sync(self.ctx.store.create, meta)
        self._record_start(session_id, spec.name, description, call_id, "background" if background else "foreground")
        return child

    async def _resume(self, session_id: str, name: str | None, call_id: str) -> _Child:
        try:
            validate_session_id(session_id)
        except UsageError as e:
            raise ToolError(str(e)) from e
        if session_id in self.children and not self.children[session_id].done.is_set():
            raise ToolError(f"task {session_id} is still running; wait for it with TaskOutput or stop it first")
        try:
            meta = await anyio.to_thread.run_sync(self.ctx.store.metadata, session_id)
            events = await anyio.to_thread.run_sync(self.ctx.store.events, session_id)
        except ZeroError as e:
            raise ToolError(f"cannot resume {session_id}: {e}") from e
        if meta.session_kind != "child" or not meta.specialist:
            raise ToolError(f"session {session_id} is not a specialist's session, so Task cannot resume it")
        if name and name != meta.specialist:
            raise ToolError(f"session {session_id} belongs to specialist {meta.specialist!r}, not {name!r}")
        spec = self.ctx.registry.specialists.get(meta.specialist)
        if spec is None:
            raise ToolError(f"the specialist {meta.specialist!r} of session {session_id} no longer exists")
        history = messages_from_events(events)
        child = self._child(session_id, spec, meta.title, history, len(history), False)
        self._record_start(session_id, spec.name, meta.title, call_id, "resume")
        return child

    def _model_for(self, spec: Specialist) -> tuple[str, str]:
        provider = spec.provider or self.ctx.provider.name
        if spec.model:
            return provider, spec.model
        if provider != self.ctx.provider.name:
            from zero.agent.providers import DEFAULT_MODELS

            return provider, DEFAULT_MODELS.get(provider, self.ctx.model)
        return provider, self.ctx.model

    def _child(
        self,
        session_id: str,
        spec: Specialist,
        description: str,
        history: list[Message],
        recorded: int,
        background: bool,
    ) -> _Child:
        provider_name, model = self._model_for(spec)
        try:
            provider = (
                self.ctx.provider if provider_name == self.ctx.provider.name else self.ctx.providers(provider_name)
            )
        except ZeroError as e:
            raise ToolError(f"cannot start {spec.name}: {e}") from e
        child: _Child
        recorder = SessionRecorder(self.ctx.store, session_id)

        async def sink(event: RunEvent) -> None:
            if event.session_id == session_id:
                if event.kind == "tool_call":
                    child.tools_used.append(event.call.name)
                    child.activity = describe_call(event.call.name, event.call.arguments)
                elif event.kind == "tool_result":
                    child.files_changed.update(event.changed_files)
                    child.activity = "thinking..."
                await recorder(event)
            await self.ctx.sink(event)

        run, child_delegator = specialist_agent(
            self.ctx,
            spec,
            session_id=session_id,
            root_session_id=self.root_session_id,
            depth=self.depth + 1,
            provider=provider,
            model=model,
            permission_mode=self.permission_mode,
            caller_tools=self.caller_tools,
            sink=sink,
            history=history,
            recorded=recorded,
        )
        child = _Child(session_id, spec, description, run, child_delegator, background=background)
        if self.stopping:
            run.cancel_status = self.stopping
        self.children[session_id] = child
        return child

    async def _execute(self, child: _Child, prompt: str) -> None:
        """Run the child to a final status; the parent's log and usage learn of it exactly once."""
        before = await anyio.to_thread.run_sync(self.ctx.store.metadata, child.session_id)
        started = time.monotonic()
        crashed = True
        try:
            async with self._limiter:
                await self.ctx.sink(
                    SubagentStarted(
                        child.session_id,
                        self.session_id,
                        self.root_session_id,
                        child.specialist.name,
                        child.specialist.name,
                        description=child.description,
                    )
                )
                with child.scope:
                    async with anyio.create_task_group() as tg:
                        if child.specialist.timeout_seconds:
                            tg.start_soon(self._watchdog, child, child.specialist.timeout_seconds)
                        if child.delegator is not None:
                            async with child.delegator:
                                await child.run.run(prompt)
                        else:
                            await child.run.run(prompt)
                        tg.cancel_scope.cancel()
            crashed = False
        except anyio.get_cancelled_exc_class():
            crashed = False
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._finish(child, before, started, crashed)

    async def _watchdog(self, child: _Child, seconds: float) -> None:
        await anyio.sleep(seconds)
        self._cancel(child, "timed_out")

    def _cancel(self, child: _Child, status: RunStatus) -> None:
        child.run.cancel_status = status
        child.scope.cancel()

    async def _finish(self, child: _Child, before: SessionMetadata, started: float, crashed: bool) -> None:
        result = child.run.result
        if result is None:  # stopped before it could start, or broke: still give it a final status
            status: RunStatus = "failed" if crashed else child.run.cancel_status
            result = RunResult(status, "", Usage(), 0, 0)
            child.run.result = result
            self.ctx.store.submit(child.session_id, (), set_status(status))
        after = await anyio.to_thread.run_sync(self.ctx.store.metadata, child.session_id)
        delta = after.subtree_usage - before.subtree_usage
        duration = int((time.monotonic() - started) * 1000)
        payload = {
            "childSessionId": child.session_id,
            "specialist": child.specialist.name,
            "status": result.status,
            "usage": delta.to_json(),
            "costUsd": delta.to_json()["costUsd"],
            "durationMs": duration,
        }

        self.ctx.store.submit(self.session_id, [("child_end", payload)], add_children_usage(delta))
        child.done.set()
        await self.ctx.sink(SubagentFinished(child.session_id, result.status, delta, duration))

    def _record_start(self, session_id: str, specialist: str, description: str | None, call_id: str, mode: str) -> None:
        payload: dict[str, Any] = {
            "childSessionId": session_id,
            "specialist": specialist,
            "mode": mode,
            "toolCallId": call_id,
        }
        if description:
            payload["description"] = description
        self.ctx.store.submit(self.session_id, [("child_start", payload)])

    def _envelope(self, child: _Child) -> ToolOutput:
        result = child.run.result
        assert result is not None
        return ToolOutput(
            child.result_text(), is_error=result.status != "completed", changed_files=tuple(sorted(child.files_changed))
        )

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
            return self._envelope(child)
        run = child.run
        partial = run.output.strip() or "(nothing yet)"
        elapsed = time.monotonic() - child.started
        return ToolOutput(
            f"task_id: {task_id}\nstatus: running\nspecialist: {child.specialist.name}\n"
            f"elapsed: {elapsed:.1f} s · turns: {run.turns} · tokens: {run.usage.total_tokens}\n"
            f"now: {child.activity}\ntools used: {', '.join(sorted(set(child.tools_used))) or 'none'}\n"
            f"---\nlatest output: {partial}"
        )

    async def stop(self, task_id: str) -> ToolOutput:
        child = self._find(task_id)
        if child.done.is_set():
            return self._envelope(child)
        self._cancel(child, "cancelled")
        await child.done.wait()
        return self._envelope(child)


def delegating_agent(
    ctx: AgentContext,
    *,
    session_id: str,
    system_prompt: str,
    permission_mode: PermissionMode,
    max_turns: int | None,
    sink: EventSink,
    root_session_id: str | None = None,
    depth: int = 0,
) -> tuple[AgentRun, Delegator]:
    """A top-level agent with every built-in tool, plus Task tools when there are specialists.

    Run it inside ``async with delegator:`` so its background children end with it.
    """
    tools = builtin_tools()
    delegator = Delegator(
        ctx,
        session_id=session_id,
        root_session_id=root_session_id or session_id,
        depth=depth,
        permission_mode=permission_mode,
        caller_tools={t.name for t in tools},
    )
    if ctx.registry.specialists and delegator.can_delegate:
        tools += delegator.tools()
        system_prompt += "\n\n" + specialists_prompt(ctx.registry)
    config = AgentConfig(
        provider=ctx.provider,
        model=ctx.model,
        tools=ToolRegistry(tools),
        workspace=ctx.workspace,
        permission_mode=permission_mode,
        max_turns=max_turns,
        prices=ctx.prices,
        retry=ctx.retry,
        guards=ctx.guards,
    )
    return AgentRun(config, session_id, [Message("system", system_prompt)], sink), delegator
