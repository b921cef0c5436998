"""The agent loop: stream the model, run the tools it asks for, repeat until an answer."""

from __future__ import annotations

import json
import math
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import anyio
import anyio.to_thread

from zero.agent.events import (
    AssistantText,
    Compacted,
    ErrorRaised,
    Event,
    MessageAdded,
    ModelStreaming,
    PermissionDecided,
    PermissionRequested,
    RateLimitWait,
    Reasoning,
    RetryScheduled,
    RunFinished,
    RunResult,
    RunStarted,
    ToolCallStarted,
    ToolFinished,
    UsageUpdated,
    WarningRaised,
    compact_history,
)
from zero.agent.governor import COOLDOWN, RateGovernor, Slot
from zero.agent.messages import Message, ModelRequest, ToolCall, ToolSpec, Usage
from zero.agent.output_schema import CALL_SUBMIT, SUBMIT_RESULT, OutputSchema, SubmitResult, dump_result, typed_prompt
from zero.agent.pricing import PriceTable
from zero.agent.provider import Provider
from zero.agent.retry import RetryPolicy
from zero.agent.status import RunStatus
from zero.agent.stream import ReasoningDelta, TextDelta, ToolCallDelta
from zero.errors import (
    BudgetExhaustedError,
    EmptyAnswerError,
    InternalError,
    InvalidOutputError,
    OutputCappedError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    StreamDroppedError,
    ToolError,
    ZeroError,
)
from zero.tools import (
    EditPlan,
    PermissionMode,
    Pin,
    ShellSettings,
    StreamRedactor,
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    Workspace,
    budget_output,
    decide,
    hides_syntax,
    pinned,
    redact,
    redact_values,
    unowned_call,
)
from zero.tools.base import current_call_id, side_effect_of
from zero.tools.budget import DEFAULT_MAX_CHARS
from zero.tools.permissions import REASONS

__all__ = [
    "RESTARTED",
    "AgentConfig",
    "AgentRun",
    "Approval",
    "Approver",
    "CallGuard",
    "CallPermit",
    "Emit",
    "visible_specs",
]


def visible_specs(tools: Iterable[Tool], mode: PermissionMode) -> tuple[ToolSpec, ...]:
    """The tool definitions a call sends in ``mode``: a tool the mode always refuses is not shown, so the
    model does not plan around it."""
    return tuple(_spec(t) for t in tools if decide(mode, t.side_effect) != "deny")


_SPECS: dict[tuple[str, str, int], tuple[dict[str, Any], ToolSpec]] = {}
_SPECS_KEPT = 4096


def _spec(tool: Tool) -> ToolSpec:
    """The tool's definition: one for every run of an agent with the same tool (its size is estimated by
    serialising its schema, and a built-in tool's schema is one object, made once: ``tools.base._schema``). The
    schema is kept with it, so its id names no other while it is here."""
    parameters = tool.parameters
    key = (tool.name, tool.description, id(parameters))
    kept = _SPECS.get(key)
    if kept is not None and kept[0] is parameters:
        return kept[1]
    if len(_SPECS) >= _SPECS_KEPT:  # (MCP servers' schemas are new objects each listing)
        _SPECS.clear()
    spec = ToolSpec(name=tool.name, description=tool.description, parameters=parameters)
    _SPECS[key] = (parameters, spec)
    return spec


COMPACT_AT = 0.8
"""Past this share of the model's context window, older turns are compacted into a summary."""
SUMMARIZE = (
    "Summarize this conversation so far for yourself, so that you can continue the work from the summary "
    "alone: the task and the user's requests, what has been done (files read and changed, commands run and "
    "their results), decisions taken and why, and what is left to do. Be complete on facts (paths, names, "
    "numbers, errors) and brief on prose. Answer with the summary only."
)

_EMPTY = "the model returned nothing (no text and no tool call); asking it once more"

RESTARTED = "stream_restarted"
GOVERNED = 8
"""How many times one call may be turned back by the server's rate limit (429, overloaded) and wait its turn
again through the governor, none of them a retry."""
BROKE_OFF = (
    "the answer broke off and the model is asked again; the text shown so far is discarded and the new answer "
    "follows in full"
)
"""The code of the warning that marks a model's answer starting over (after a retry, or after text that
was a tool call written as text): the text deltas after the last such marker add up to the answer."""

WROTE_CALL = "the text so far is a tool call the model wrote as text: it runs as that call, and is not the answer"

Emit = Callable[[Event], None]
_STREAMED = (TextDelta, ReasoningDelta, ToolCallDelta)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallPermit:
    """A guard's leave for one model call: ``note`` is shown to the model before it; ``max_output_tokens``
    is a lower output cap the call must be sent with (a budget with room for no more)."""

    token: object = None
    note: str | None = None
    max_output_tokens: int | None = None


class CallGuard(Protocol):
    """Checks every model call of a run, e.g. against a budget.

    ``before_call`` raises ``BudgetExhaustedError`` to stop the run before the call
    starts, or returns a permit; ``before_retry`` may raise it to stop a retry of the call;
    ``after_call`` gets the permit back with the call's priced usage, or ``None`` when the
    call failed or was cancelled.
    """

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit | None: ...

    async def before_retry(self, permit: CallPermit | None) -> None: ...

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None: ...


Permits = list[tuple[CallGuard, CallPermit | None]]  # of one call, from each guard in turn


def _within(request: ModelRequest, permits: Permits) -> ModelRequest:
    """``request`` with the lowest output cap a permit asks for."""
    caps = [p.max_output_tokens for _, p in permits if p is not None and p.max_output_tokens is not None]
    if not caps or min(caps) >= (request.max_output_tokens or math.inf):
        return request
    return replace(request, max_output_tokens=min(caps))


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """A user's answer to a permission request; ``note`` reaches the model with it. ``pin``: what the user saw
    of a write (where it lands, the bytes there), which the tool then holds the file to."""

    granted: bool
    note: str = ""
    pin: Pin | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """What an approver is asked. ``shown`` is the request as the user sees it and the log keeps it
    (redacted); ``arguments`` are the call's as they will run, never shown or stored: what "allow for this
    session" is computed from. ``hidden``: a secret in them held shell syntax, so what is shown is not the
    whole truth (warn, and never allow it for the session)."""

    shown: PermissionRequested
    arguments: dict[str, Any]
    hidden: bool = False
    plan: EditPlan | None = None  # what the call would write, as a tool that saves a file (``planned``) says


Approver = Callable[[ApprovalRequest], Awaitable[Approval]]
ToolStatus = Literal["ok", "error", "denied"]


@dataclass(slots=True, kw_only=True)
class AgentConfig:
    """Everything one agent needs to run, fixed for the run."""

    provider: Provider
    model: str
    tools: ToolRegistry
    workspace: Workspace
    permission_mode: PermissionMode = "auto"
    max_turns: int | None = 50
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    prices: PriceTable = field(default_factory=PriceTable.builtin)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    approver: Approver | None = None
    redactor: Callable[[str], str] = redact
    max_output_chars: int = DEFAULT_MAX_CHARS
    guards: tuple[CallGuard, ...] = ()
    unavailable: dict[str, str] = field(default_factory=dict)  # tool name -> why this agent may not use it
    shell: ShellSettings = field(default_factory=ShellSettings)
    beat_seconds: float = 30.0  # how often a streaming call says so (ModelStreaming), for views of silence
    governor: RateGovernor | None = None  # the provider's rate governor, shared by every agent of the run
    output_schema: OutputSchema | None = None  # a typed result: the run ends by calling submit_result


@dataclass(slots=True, kw_only=True)
class _Turn:
    """What one model call produced, kept while it streams so a cancel loses nothing."""

    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, Message] = field(default_factory=dict)
    answered: bool = False  # the assistant message is in the conversation
    closed: bool = False  # every call has its result in the conversation
    permits: Permits = field(default_factory=list)
    usage: Usage | None = None
    finish: str | None = None  # why the model stopped: stop, tool_calls, length (the output cap)
    cap: int | None = None  # the output cap the call was sent with


async def _release(permits: Permits, usage: Usage | None) -> None:
    """Give the permits back with the call's usage (``None``: no call was made), even when cancelled."""
    with anyio.CancelScope(shield=True):
        for guard, permit in permits:
            await guard.after_call(permit, usage)


def _ignore(event: Event) -> None:
    return None


class AgentRun:
    """Runs of an agent over one conversation.

    ``messages`` is the history so far (a system message first for a new session);
    ``run(prompt)`` appends the prompt and works until the model answers without
    calling a tool, a limit is reached, or the run is cancelled. Every step is emitted
    as an event the moment it happens, so a log of them reads in causal order. The
    state stays readable afterwards, including after a cancellation.
    """

    def __init__(
        self,
        config: AgentConfig,
        session_id: str,
        messages: list[Message] | None = None,
        emit: Emit = _ignore,
        *,
        recorded: int = 0,
        checkpoint: Callable[[], Awaitable[None]] | None = None,
        stop_reason: Callable[[], RunStatus] = lambda: "cancelled",
    ):
        self.config = config
        self.session_id = session_id
        self.messages: list[Message] = list(messages or [])
        self.emit = emit
        self.ctx = ToolContext(
            workspace=config.workspace,
            session_id=session_id,
            permission_mode=config.permission_mode,
            shell=config.shell,
        )
        self._warned: set[str] = set()  # warnings already given this run
        # One output cap a call: what the server is asked for and what a budget reserves.
        self._output_cap = config.max_output_tokens or config.prices.output_cap(config.model)
        self.usage = self._no_usage()
        self.turns = 0
        self.output = ""
        self.status: RunStatus | None = None
        self.result: RunResult | None = None  # set when the run ends, cancelled runs included
        # What a cancellation means, asked when it comes: a parent's stop ("cancelled"), Ctrl-C/SIGTERM
        # ("interrupted"), a spent team budget... (the run tree holds it: zero.sessions.run_tree)
        self._stop_reason = stop_reason
        self._recorded = recorded  # how many of ``messages`` are already in the session
        self._checkpoint = checkpoint  # awaited before a tool with a side effect runs: its call is on record
        self._specs: tuple[ToolSpec, ...] = ()
        self.structured_output: Any = None  # a typed run's result, once submit_result accepted it
        self._submit: SubmitResult | None = None
        if config.output_schema is not None:
            self._submit = SubmitResult(config.output_schema)
            config.tools.add(self._submit)

    def _no_usage(self) -> Usage:
        """A run's usage before its first call: nothing, at a cost unknown if the model has no price."""
        return Usage() if self.config.prices.price(self.config.model) is not None else Usage(cost_usd=None)

    def _visible_specs(self) -> tuple[ToolSpec, ...]:
        return visible_specs(self.config.tools, self.config.permission_mode)

    def _add(self, message: Message) -> None:
        self.messages.append(message)
        self._recorded = len(self.messages)
        self.emit(MessageAdded(session_id=self.session_id, role=message.role, content=message.content))

    async def run(self, prompt: str | None, *, call: ToolCall | None = None) -> RunResult:
        """Work on ``prompt``; ``max_turns``, turns and usage count this run only. With ``call`` (the user
        called a tool, as an ``@specialist`` message calls ``Task``), the run makes that call as if the model
        had asked for it (the same checks, the same record) instead of calling the model, and its result is
        the run's output: the conversation holds it, so a later turn knows what the call found."""
        started = time.monotonic()
        self.turns, self.usage, self.output, self.result = 0, self._no_usage(), "", None
        self.structured_output = None
        submit = None if call is not None else self._submit
        if submit is not None:
            submit.reset()
        self._warned = set()
        self._specs = self._visible_specs()  # tool sets may have joined since the last run
        config = self.config
        self.emit(
            RunStarted(
                session_id=self.session_id,
                provider=config.provider.name,
                model=config.model,
                cwd=str(config.workspace.root),
            )
        )
        for message in self.messages[self._recorded :]:  # a new session's system prompt
            self.emit(MessageAdded(session_id=self.session_id, role=message.role, content=message.content))
        self._recorded = len(self.messages)
        if prompt is not None:
            self._add(Message(role="user", content=prompt if submit is None else typed_prompt(prompt)))
        error: ZeroError | None = None
        turn = _Turn()
        empty = 0  # answers in a row with nothing in them
        invalid = 0  # typed results refused (or answers without one) this run
        try:
            status: RunStatus = "max_turns"
            if call is not None:
                turn = _Turn(calls=[call])
                self._answer(turn)
                await self._run_tools(turn)
                self._close(turn)
                self.output, status = turn.results[call.id].content, "completed"
            while call is None and (config.max_turns is None or self.turns < config.max_turns):
                turn = _Turn()
                if self._request().estimated_prompt_tokens() > COMPACT_AT * config.prices.context_window(config.model):
                    await self.compact(automatic=True)
                request = await self._permitted_request(turn)
                self.turns += 1
                try:
                    await self._call_model(turn, request)
                finally:
                    await _release(turn.permits, turn.usage)
                self._answer(turn)
                if turn.usage is not None:
                    self.emit(UsageUpdated.of(self.session_id, config.model, turn.usage))
                if turn.finish == "length":
                    capped = self._capped(turn.cap)
                    self.emit(WarningRaised(session_id=self.session_id, code="output_capped", message=capped))
                    if not turn.calls and (turn.cap or 0) < self._output_cap:  # the budget's cap, not the user's
                        raise BudgetExhaustedError(f"the answer was cut: {capped}")
                    if not turn.calls:
                        raise OutputCappedError(f"the answer was cut: {capped}")
                if not turn.calls and not "".join(turn.text).strip():  # neither text nor a call: ask once more
                    empty += 1
                    if empty > 1:
                        raise EmptyAnswerError("the model returned nothing (no text and no tool call), twice")
                    self.emit(WarningRaised(session_id=self.session_id, code="empty_answer", message=_EMPTY))
                    continue
                empty = 0
                if not turn.calls and submit is not None:  # an answer, not the result: one invalid attempt
                    invalid = self._refused(invalid, "it answered in text without calling submit_result")
                    self._add(Message(role="user", content=CALL_SUBMIT))
                    continue
                if not turn.calls:
                    if self._checkpoint is not None:
                        await self._checkpoint()  # an answer the log lost is not a completed run
                    status = "completed"
                    break
                await self._run_tools(turn)
                self._close(turn)
                submitted = [c for c in turn.calls if c.name == SUBMIT_RESULT]
                if submit is not None and submit.accepted:
                    # Redacted as a text answer is: what the log keeps and dependents read holds no secret.
                    self.structured_output = redact_values(self.config.redactor, submit.value)
                    self.output = dump_result(self.structured_output)
                    if self._checkpoint is not None:
                        await self._checkpoint()
                    status = "completed"
                    break
                if submitted:
                    self.output = self.config.redactor(json.dumps(submitted[-1].arguments, ensure_ascii=False))
                    invalid = self._refused(invalid, turn.results[submitted[-1].id].content.removeprefix("Error: "))
        except ProviderError as e:
            status, error = "failed", e
            self._answer(turn)
        except BudgetExhaustedError as e:
            status, error = "budget_exhausted", e
            self._answer(turn)
        except OutputCappedError as e:
            status, error = "output_capped", e
        except InvalidOutputError as e:
            status, error = "invalid_output", e
        except ZeroError as e:
            status, error = "failed", e
            self._answer(turn)
        except anyio.get_cancelled_exc_class():
            self._answer(turn)
            self._close(turn)
            with anyio.CancelScope(shield=True):
                await self.ctx.end_background()
            self._finish(self._stop_reason(), started, None)
            raise
        except Exception as e:  # a bug: it ends this agent's run, recorded with its traceback; others go on
            status = "failed"
            error = InternalError(
                f"internal error (a bug in Zero; please report it): {type(e).__name__}: {e}",
                detail=traceback.format_exc(),
            )
            self._answer(turn)
            self._close(turn)
        await self.ctx.end_background()
        return self._finish(status, started, error)

    def _finish(self, status: RunStatus, started: float, error: ZeroError | None) -> RunResult:
        self.status = status
        message = self.config.redactor(str(error)) if error else None
        result = RunResult(
            status=status,
            output=self.output,
            usage=self.usage,
            turns=self.turns,
            duration_ms=int((time.monotonic() - started) * 1000),
            error_code=error.code if error else None,
            error=message,
            structured_output=self.structured_output if status == "completed" else None,
        )
        self.result = result
        if error is not None and message is not None:
            detail = self.config.redactor(error.detail) if isinstance(error, InternalError) else ""
            self.emit(ErrorRaised(session_id=self.session_id, code=error.code, message=message, detail=detail))
        self.emit(
            RunFinished(
                session_id=self.session_id,
                status=status,
                turns=result.turns,
                duration_ms=result.duration_ms,
                usage=result.usage,
                output=result.output,
                structured_output=result.structured_output,
            )
        )
        return result

    def _refused(self, invalid: int, why: str) -> int:
        """Count one invalid attempt at a typed result; past the retries, the run ends ``invalid_output``."""
        invalid += 1
        schema = self.config.output_schema
        if schema is not None and invalid > schema.retries:
            raise InvalidOutputError(
                f"the result did not match its output schema in {invalid} attempt{'' if invalid == 1 else 's'} "
                f"({schema.retries} retr{'y' if schema.retries == 1 else 'ies'}); the last: {why}"
            )
        return invalid

    def _answer(self, turn: _Turn) -> None:
        """Put the model's answer (or what streamed of it before a failure) into the conversation, once."""
        if turn.answered or not (turn.text or turn.calls):
            return
        turn.answered = True
        text = self.config.redactor("".join(turn.text))
        if text.strip():
            self.output = text
        self.messages.append(Message(role="assistant", content=text, tool_calls=tuple(turn.calls)))
        self._recorded = len(self.messages)
        shown = tuple(
            ToolCall(
                id=c.id,
                name=c.name,
                arguments=redact_values(self.config.redactor, c.arguments),
                parse_error=c.parse_error,
            )
            for c in turn.calls
        )
        self.emit(MessageAdded(session_id=self.session_id, role="assistant", content=text, tool_calls=shown))

    def _close(self, turn: _Turn) -> None:
        """Put every call's result into the conversation, in call order, once. A call left without
        a result (a cancel) gets one saying so, so the history always pairs calls and results."""
        if turn.closed or not turn.answered:
            return
        turn.closed = True
        for call in turn.calls:
            result = turn.results.get(call.id)
            if result is None:
                text = "cancelled before it finished"
                result = Message(role="tool", content=text, tool_call_id=call.id, name=call.name, is_error=True)
                self.emit(
                    ToolFinished(
                        session_id=self.session_id, tool_call_id=call.id, name=call.name, status="error", output=text
                    )
                )
            self.messages.append(result)
        self._recorded = len(self.messages)

    async def _permitted_request(self, turn: _Turn) -> ModelRequest:
        """Ask every guard for leave to call the model; a guard's note joins the conversation first."""
        request = self._request()
        turn.permits = await self._permits(request)
        notes = [permit.note for _, permit in turn.permits if permit is not None and permit.note]
        for note in notes:
            self._add(Message(role="user", content=note))
        request = _within(self._request() if notes else request, turn.permits)
        turn.cap = request.max_output_tokens
        return request

    async def _permits(self, request: ModelRequest) -> Permits:
        """Every guard's permit for ``request``; if one refuses, those already given go back unused."""
        permits: Permits = []
        for guard in self.config.guards:
            try:
                permits.append((guard, await guard.before_call(request, self.usage)))
            except BaseException:
                await _release(permits, None)
                raise
        return permits

    def switch_model(self, model: str) -> None:
        """Use ``model`` from the next call on (its output cap too, unless one was set)."""
        self.config.model = model
        self._output_cap = self.config.max_output_tokens or self.config.prices.output_cap(model)

    def set_permission_mode(self, mode: PermissionMode) -> None:
        """Use ``mode`` from the next run on (the caller keeps it within the ceiling)."""
        self.config.permission_mode = mode
        self.ctx.permission_mode = mode

    async def compact(self, *, automatic: bool = False) -> bool:
        """Replace the conversation so far (but the system prompt) with a summary the model writes, and
        record it, so a resumed session continues from it too. False if there was nothing to compact."""
        if sum(1 for m in self.messages if m.role != "system") < 2:
            return False
        request = ModelRequest(
            model=self.config.model,
            messages=(*self.messages, Message(role="user", content=SUMMARIZE)),
            max_output_tokens=self._output_cap,
            metadata={"session_id": self.session_id},
        )
        permits = await self._permits(request)  # a summary is a model call like any other: budgets see it
        request = _within(request, permits)
        parts: list[str] = []
        usage: Usage | None = None
        try:
            async for event in self.config.provider.stream(request):
                if event.kind == "text":
                    parts.append(event.text)
                elif event.kind == "usage":
                    usage = event.usage
        finally:
            await _release(permits, usage)
        summary = self.config.redactor("".join(parts).strip())
        if usage is not None:
            priced = self.config.prices.priced(self.config.model, replace(usage, calls=1))
            self.usage = self.usage + priced
            self.emit(UsageUpdated.of(self.session_id, self.config.model, priced))
        if not summary:
            self.emit(
                WarningRaised(session_id=self.session_id, code="compaction", message="the summary came back empty")
            )
            return False
        replaced = len(self.messages) - 1
        self.messages = compact_history(self.messages, summary)
        self._recorded = len(self.messages)
        why = "the conversation neared the context window" if automatic else "asked for"
        self.emit(Compacted(session_id=self.session_id, summary=summary, replaced=replaced))
        self.emit(
            WarningRaised(
                session_id=self.session_id,
                code="compacted",
                message=f"{replaced} messages were summarized ({why})",
            )
        )
        return True

    def _capped(self, cap: int | None = None) -> str:
        if cap is not None and cap < self._output_cap:
            return (
                f"the model reached the output cap of {cap} tokens before it finished: all the budget had room "
                f"for in this call (the cap is {self._output_cap} otherwise)"
            )
        return (
            f"the model reached the output cap of {self._output_cap} tokens a call before it finished. "
            "Raise it with --max-output-tokens, or max_output_tokens in config.toml, the manifest or the team file"
        )

    def _request(self) -> ModelRequest:
        return ModelRequest(
            model=self.config.model,
            messages=tuple(self.messages),
            tools=self._specs,
            max_output_tokens=self._output_cap,
            reasoning_effort=self.config.reasoning_effort,
            metadata={"session_id": self.session_id},
        )

    async def _call_model(self, turn: _Turn, request: ModelRequest) -> None:
        attempt = 0
        shown = False  # text of this call reached the screen: a retry must say the answer starts over
        finish: str | None = None
        usage: Usage | None = None
        failures: dict[tuple[str, str], int] = {}  # attempts that failed, by error code and message
        governor, governed, told = self.config.governor, 0, None
        while True:
            attempt += 1
            turn.text.clear()
            turn.calls.clear()
            slot = None if governor is None else await self._governed(governor, request, told)
            told = None
            # Redacted as it streams, holding back what could be the start of a secret split across chunks.
            text = StreamRedactor(self.config.redactor)
            reasoning = StreamRedactor(self.config.redactor)
            finish = None
            usage = None
            beat, received = time.monotonic(), 0
            try:
                async for event in self.config.provider.stream(request):
                    if slot is not None and not slot.accepted and governor is not None:  # the server took it
                        governor.accept(slot, event.limits if event.kind == "limits" else None)
                        if event.kind == "limits":
                            continue
                    if isinstance(event, _STREAMED):  # the answer arrives: say so now and then, shown or not
                        received += len(event.arguments if isinstance(event, ToolCallDelta) else event.text)
                        if (now := time.monotonic()) - beat >= self.config.beat_seconds:
                            beat = now
                            self.emit(ModelStreaming(session_id=self.session_id, received=received))
                    if event.kind == "text":
                        turn.text.append(event.text)
                        if out := text.feed(event.text):
                            shown = True
                            self.emit(AssistantText(session_id=self.session_id, delta=out))
                    elif event.kind == "reasoning":
                        if out := reasoning.feed(event.text):
                            self.emit(Reasoning(session_id=self.session_id, delta=out))
                    elif event.kind == "tool_call_done":
                        turn.calls.append(event.call)
                    elif event.kind == "usage":
                        usage = event.usage
                    elif event.kind == "finish":
                        finish = event.reason
                    elif event.kind == "text_retracted":  # a tool call the model wrote as text: not an answer
                        turn.text.clear()
                        text = StreamRedactor(self.config.redactor)  # what it held back is dropped too
                        if shown:
                            shown = False
                            self.emit(WarningRaised(session_id=self.session_id, code=RESTARTED, message=WROTE_CALL))
                    elif event.kind == "limits":
                        if governor is not None:
                            governor.observe(event.limits)
                    elif event.kind == "notice" and (said := f"{event.code}: {event.message}") not in self._warned:
                        self._warned.add(said)  # (two notices of one code, e.g. two tool modes, are both said)
                        self.emit(WarningRaised(session_id=self.session_id, code=event.code, message=event.message))
                if finish is None:
                    raise StreamDroppedError("the response stream ended before the model finished")
            except ProviderError as e:
                self._flush(text, reasoning)
                if governor is not None and slot is not None:
                    governable = isinstance(e, RateLimitError | OverloadedError) and e.retryable
                    governable = governable and bool(self.config.retry.retries) and governed < GOVERNED
                    wait = governor.limited(e.retry_after, slot) if governable else 0.0  # (while it is under way)
                    governor.release(slot, None)
                    slot = None
                    if governable:
                        # The key is cooled down and fewer calls go at once: this call waits its turn again
                        # (acquire says so), which is not a retry and spends none of them.
                        governed += 1
                        attempt -= 1
                        message = self.config.redactor(str(e))
                        self.emit(
                            RateLimitWait(session_id=self.session_id, reason=message, wait_seconds=round(wait, 1))
                        )
                        told = COOLDOWN
                        if shown or turn.text:
                            shown = False
                            self.emit(WarningRaised(session_id=self.session_id, code=RESTARTED, message=BROKE_OFF))
                        continue
                same = failures[e.code, str(e)] = failures.get((e.code, str(e)), 0) + 1
                if not self.config.retry.should_retry(e, attempt, same):
                    raise
                for guard, permit in turn.permits:  # a budget may allow no more retries
                    await guard.before_retry(permit)
                delay = self.config.retry.delay(e, attempt)
                self.emit(
                    RetryScheduled(
                        session_id=self.session_id,
                        attempt=attempt,
                        delay_seconds=round(delay, 3),
                        code=e.code,
                        message=self.config.redactor(str(e)),
                    )
                )
                if shown or turn.text:
                    # A sampling model does not repeat itself: what streamed is dropped, and the new
                    # answer is shown whole after this marker.
                    shown = False
                    self.emit(WarningRaised(session_id=self.session_id, code=RESTARTED, message=BROKE_OFF))
                await anyio.sleep(delay)
                continue
            except BaseException as e:
                self._flush(text, reasoning)
                if governor is not None and slot is not None:
                    governor.release(slot, None)
                if isinstance(e, anyio.get_cancelled_exc_class()):  # the server worked on it until the cancel
                    charged = self._charge(turn, request, usage)
                    self.emit(UsageUpdated.of(self.session_id, self.config.model, charged))
                raise
            self._flush(text, reasoning)
            if governor is not None and slot is not None:
                spent = (
                    None
                    if usage is None
                    else {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
                )
                governor.release(slot, spent)
            break
        turn.finish = finish
        if finish == "length":  # a call whose arguments broke off is not run with half of them
            cut = (
                f"this call was cut at the output cap ({request.max_output_tokens} tokens) before its arguments were "
                "complete, so it was not run; do the work in smaller steps (e.g. write a long file in parts)"
            )
            turn.calls[:] = [replace(c, parse_error=cut) if c.parse_error else c for c in turn.calls]
        self._charge(turn, request, usage)

    async def _governed(self, governor: RateGovernor, request: ModelRequest, told: str | None) -> Slot:
        """The governor's leave for this call, saying (a ``rate_limit`` event) why it waits, if it does."""

        def waiting(reason: str, seconds: float | None) -> None:
            self.emit(RateLimitWait(session_id=self.session_id, reason=reason, wait_seconds=seconds))

        prompt = request.estimated_prompt_tokens() if governor.counts_tokens else 0
        return await governor.acquire(prompt, request.max_output_tokens or 0, waiting, told)

    def _charge(self, turn: _Turn, request: ModelRequest, usage: Usage | None) -> Usage:
        """Count the call into the run: the usage the server reported, else an estimate, said to be one, of
        the request and of the answer so far (no more than the output cap: the server stopped there)."""
        if usage is None:
            answer = Message(role="assistant", content="".join(turn.text), tool_calls=tuple(turn.calls))
            completion = min(answer.tokens, request.max_output_tokens or answer.tokens)
            usage = Usage(prompt_tokens=request.estimated_prompt_tokens(), completion_tokens=completion, estimated=True)
        priced = self.config.prices.priced(self.config.model, replace(usage, calls=1))
        self.usage = self.usage + priced
        turn.usage = priced
        return priced

    def _flush(self, text: StreamRedactor, reasoning: StreamRedactor) -> None:
        """Show what the redactors held back at the end of a model call (or of an attempt at one)."""
        if rest := reasoning.flush():
            self.emit(Reasoning(session_id=self.session_id, delta=rest))
        if rest := text.flush():
            self.emit(AssistantText(session_id=self.session_id, delta=rest))

    async def _run_tools(self, turn: _Turn) -> None:
        """Run the turn's tool calls: reads side by side, anything else one at a time, in order."""
        group: list[ToolCall] = []

        async def flush() -> None:
            if len(group) == 1:
                turn.results[group[0].id] = await self._run_tool(group[0])
            elif group:
                async with anyio.create_task_group() as tg:
                    for call in group:
                        tg.start_soon(self._store, call, turn.results)
            group.clear()

        for call in turn.calls:
            tool = self.config.tools.get(call.name)
            if tool is not None and tool.side_effect == "read":
                group.append(call)
                continue
            await flush()
            turn.results[call.id] = await self._run_tool(call)
        await flush()

    async def _store(self, call: ToolCall, results: dict[str, Message]) -> None:
        results[call.id] = await self._run_tool(call)

    async def _run_tool(self, call: ToolCall) -> Message:
        started = time.monotonic()
        tool = self.config.tools.get(call.name)
        side_effect = side_effect_of(tool, call.arguments) if tool else "read"
        self.emit(
            ToolCallStarted(
                session_id=self.session_id,
                id=call.id,
                name=call.name,
                arguments=redact_values(self.config.redactor, call.arguments),
                side_effect=side_effect,
            )
        )
        current_call_id.set(call.id)
        if side_effect != "read" and self._checkpoint is not None:
            await self._checkpoint()  # write-ahead: after a kill, the log still says what may have happened
        status, output = await self._execute(call, tool)
        if output.warning is not None and output.warning[0] not in self._warned:
            self._warned.add(output.warning[0])
            code, message = output.warning
            self.emit(WarningRaised(session_id=self.session_id, code=code, message=message))
        text, truncated = budget_output(self.config.redactor(output.text), self.config.max_output_chars)
        self.emit(
            ToolFinished(
                session_id=self.session_id,
                tool_call_id=call.id,
                name=call.name,
                status=status,
                output=text,
                truncated=truncated,
                changed_files=output.changed_files,
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        )
        return Message(role="tool", content=text, tool_call_id=call.id, name=call.name, is_error=status != "ok")

    async def _execute(self, call: ToolCall, tool: Tool | None) -> tuple[ToolStatus, ToolOutput]:
        if tool is None and call.name in self.config.unavailable:
            return "error", ToolOutput(
                text=f"Error: {call.name} is not available here: {self.config.unavailable[call.name]}"
            )
        if tool is None:
            names = ", ".join(self.config.tools.names()) or "none"
            return "error", ToolOutput(text=f"Error: there is no tool named {call.name!r}. Available tools: {names}")
        if call.parse_error:
            return "error", ToolOutput(text=f"Error: {call.name}: {call.parse_error}")
        mode = self.config.permission_mode
        side_effect = side_effect_of(tool, call.arguments)
        decision = decide(mode, side_effect)
        approved: Pin | None = None
        if decision == "deny":
            return "denied", ToolOutput(text=f"Permission denied: {call.name} is not allowed in {mode} mode.")
        # A write outside what a team member owns: never made unasked, asked about where writes are.
        unowned = unowned_call(self.ctx.workspace, call.name, call.arguments)
        if unowned is not None and (decision == "allow" or self.config.approver is None):
            return "denied", ToolOutput(text=f"Permission denied: {unowned}.")
        plan = None
        if decision == "prompt" and callable(planned := getattr(tool, "planned", None)):
            try:
                plan = await anyio.to_thread.run_sync(planned, call.arguments)
            except Exception as e:  # a broken tool must not end the run (as its call's failure, below)
                return "error", ToolOutput(text=f"Error: {call.name} failed unexpectedly: {type(e).__name__}: {e}")
            if plan.error:  # a call that cannot succeed is not asked about: the model hears why, and may retry
                return "error", ToolOutput(text=f"Error: {plan.error}")
        if decision == "prompt":
            request = PermissionRequested(
                session_id=self.session_id,
                id=call.id,
                name=call.name,
                side_effect=side_effect,
                permission_mode=mode,
                reason=REASONS[side_effect] if unowned is None else f"Writes a file it does not own: {unowned}.",
                arguments=redact_values(self.config.redactor, call.arguments),
            )
            self.emit(request)
            if self.config.approver is None:
                hint = getattr(tool, "approval_hint", "")
                return "denied", ToolOutput(
                    text=f"Permission denied: {call.name} needs approval in {mode} mode and this run has "
                    "no one to approve it. Continue without it, or say what you would have done."
                    + (f" {hint}" if hint else "")
                )
            approval = await self.config.approver(
                ApprovalRequest(
                    shown=request,
                    arguments=call.arguments,
                    hidden=hides_syntax(self.config.redactor, call.arguments),
                    plan=plan,
                )
            )
            reason = ("approved" if approval.granted else "denied by the user") + (
                f": {approval.note}" if approval.note else ""
            )
            self.emit(
                PermissionDecided(
                    session_id=self.session_id, id=call.id, name=call.name, granted=approval.granted, reason=reason
                )
            )
            if not approval.granted:
                note = f" The user said: {approval.note}" if approval.note else ""
                return "denied", ToolOutput(text=f"Permission denied: the user refused {call.name}.{note}")
            approved = approval.pin
        held = pinned.set(approved)  # a write tool holds the file to what the approval showed
        try:
            output = await tool.call(call.arguments, self.ctx)
        except ToolError as e:
            return "error", ToolOutput(text=f"Error: {e}")
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as e:  # a broken tool must not end the run; the model hears about it
            return "error", ToolOutput(text=f"Error: {call.name} failed unexpectedly: {type(e).__name__}: {e}")
        finally:
            pinned.reset(held)
        return ("error" if output.is_error else "ok"), output
