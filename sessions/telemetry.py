"""OpenTelemetry traces of a run, from its events (docs/TELEMETRY.md).

A ``Tracing`` listens to the whole run tree and turns its events into spans named and attributed as the
OpenTelemetry GenAI semantic conventions say (the attribute names of ``opentelemetry-semantic-conventions``
0.66b2; those conventions are still "Development"): ``invoke_workflow {team}`` for a team,
``invoke_agent {name}`` for each run of a session (a member, a ``Task`` child, a shell turn), ``chat
{model}`` for each model call (its retries inside it, counted), ``execute_tool {tool}`` for each tool call.
Parents follow the run tree: a member's span sits under its team's, a ``Task`` child's under the
``execute_tool Task`` span of the call that started it. Message content is left out unless asked for,
and then redacted again, as every other channel is.

This module imports OpenTelemetry; only a run with telemetry on imports this module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, Status, StatusCode, Tracer

import zero
from zero.agent import (
    ChildStarted,
    Event,
    MessageAdded,
    RetryScheduled,
    RunFinished,
    RunStarted,
    TeamFinished,
    TeamStarted,
    ToolCallStarted,
    ToolFinished,
    Usage,
    UsageUpdated,
)
from zero.sessions.run_tree import RunTree
from zero.tools import Redactor

__all__ = ["Tracing", "start_tracing"]


def start_tracing(
    tree: RunTree,
    *,
    endpoint: str | None = None,
    protocol: str = "http/protobuf",
    headers: dict[str, str] | None = None,
    capture_content: bool = False,
    processor: SpanProcessor | None = None,
) -> Callable[[], None]:
    """Trace ``tree``'s run to an OTLP ``endpoint`` over ``protocol`` (``http/protobuf`` or ``grpc``; None:
    where the ``OTEL_EXPORTER_OTLP_*`` variables say), or to ``processor``; ``capture_content``: messages and
    tool arguments and results on the spans, redacted. What to call once the run has ended (it ends the spans
    left open and sends what is not sent yet)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "zero", "service.version": zero.__version__}))
    if processor is None:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

            processor = BatchSpanProcessor(Grpc(endpoint=endpoint, headers=headers))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

            if endpoint and not endpoint.rstrip("/").endswith("/v1/traces"):  # a collector's base URL
                endpoint = endpoint.rstrip("/") + "/v1/traces"
            processor = BatchSpanProcessor(Http(endpoint=endpoint, headers=headers))
    provider.add_span_processor(processor)
    tracing = Tracing(tree, provider.get_tracer("zero", zero.__version__), capture_content=capture_content)
    tree.listen(tracing)

    def stop() -> None:
        tracing.close()
        provider.shutdown()

    return stop


class Tracing:
    """Spans from the events of one run (a listener of its run tree: it hears each event as it is emitted)."""

    def __init__(self, tree: RunTree, tracer: Tracer, *, capture_content: bool = False):
        self.tree = tree
        self.tracer = tracer
        self.capture = capture_content
        self.redact = Redactor()
        self.agents: dict[str, Span] = {}  # session id: its run's span (invoke_agent, or invoke_workflow)
        self.tools: dict[tuple[str, str], Span] = {}  # (session id, call id): execute_tool
        self.parents: dict[str, Span] = {}  # a child's session id: the span it sits under
        self.names: dict[str, str] = {}  # a child's session id: its agent's name (member, or specialist)
        self.models: dict[str, tuple[str, str]] = {}  # session id: (provider, model) of its run
        self.step: dict[str, int] = {}  # session id: when its next model call began (ns)
        self.retries: dict[str, int] = {}
        self.said: dict[str, str] = {}  # session id: its last answer's text, for its chat span

    def __call__(self, event: Event) -> None:
        now = time.time_ns()
        sid = event.session_id
        match event:
            case TeamStarted():
                self.agents[sid] = self._start(
                    f"invoke_workflow {event.team}",
                    None,
                    now,
                    {
                        "gen_ai.operation.name": "invoke_workflow",
                        "gen_ai.conversation.id": self._root(sid),
                        "gen_ai.provider.name": event.provider,
                        "gen_ai.request.model": event.model,
                        "zero.team.name": event.team,
                    },
                )
            case TeamFinished():
                if (span := self.agents.pop(sid, None)) is not None:
                    self._usage(span, event.usage)
                    self._end(span, now, event.status, event.reason)
            case ChildStarted():
                parent = self.tools.get((sid, event.tool_call_id)) or self.agents.get(sid)
                if parent is not None:
                    self.parents[event.child_session_id] = parent
                self.names[event.child_session_id] = event.member or event.specialist or event.name
            case RunStarted():
                node = self.tree.nodes.get(sid)
                name = self.names.get(sid) or (node.member_name if node is not None else "") or "zero"
                parent = self.parents.get(sid) or (
                    self.agents.get(node.parent.session_id) if node and node.parent else None
                )
                self.models[sid] = (event.provider, event.model)
                self.step[sid], self.retries[sid] = now, 0
                self.agents[sid] = self._start(
                    f"invoke_agent {name}",
                    parent,
                    now,
                    {
                        "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": name,
                        "gen_ai.agent.id": sid,
                        "gen_ai.conversation.id": self._root(sid),
                        "gen_ai.provider.name": event.provider,
                        "gen_ai.request.model": event.model,
                    },
                )
            case RunFinished():
                if (span := self.agents.pop(sid, None)) is not None:
                    self._usage(span, event.usage)
                    span.set_attribute("zero.turns", event.turns)
                    self._end(span, now, event.status, "")
            case MessageAdded() if event.role == "assistant" and self.capture:
                self.said[sid] = event.content
            case RetryScheduled():
                self.retries[sid] = self.retries.get(sid, 0) + 1
            case UsageUpdated():
                provider, model = self.models.get(sid, ("", event.model))
                attributes: dict[str, Any] = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": provider,
                    "gen_ai.request.model": event.model or model,
                    "gen_ai.usage.input_tokens": event.prompt_tokens,
                    "gen_ai.usage.output_tokens": event.completion_tokens,
                    "gen_ai.usage.cache_read.input_tokens": event.cached_tokens,
                    "zero.retries": self.retries.get(sid, 0),
                    "zero.usage.estimated": event.estimated,
                }
                if event.cost_usd is not None:
                    attributes["zero.cost_usd"] = event.cost_usd
                if sid in self.said:
                    attributes["gen_ai.output.messages"] = self._content(
                        [{"role": "assistant", "parts": [{"type": "text", "content": self.said.pop(sid)}]}]
                    )
                span = self._start(
                    f"chat {event.model or model}", self.agents.get(sid), self.step.get(sid, now), attributes
                )
                span.end(end_time=now)
                self.step[sid], self.retries[sid] = now, 0
            case ToolCallStarted():
                attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.name,
                              "gen_ai.tool.call.id": event.id}  # fmt: skip
                if self.capture:
                    attributes["gen_ai.tool.call.arguments"] = self._content(event.arguments)
                self.tools[sid, event.id] = self._start(
                    f"execute_tool {event.name}", self.agents.get(sid), now, attributes
                )
            case ToolFinished():
                if (span := self.tools.pop((sid, event.tool_call_id), None)) is not None:
                    if self.capture:
                        span.set_attribute("gen_ai.tool.call.result", self.redact(event.output))
                    span.set_attribute("zero.tool.status", event.status)
                    if event.status != "ok":
                        span.set_status(Status(StatusCode.ERROR, event.status))
                    span.end(end_time=now)
                self.step[sid] = now  # its next model call starts once its tools are done
            case _:
                pass

    def close(self) -> None:
        """The run is over: a span still open (a run that never said it ended) ends now, marked so."""
        now = time.time_ns()
        for span in [*self.tools.values(), *self.agents.values()]:
            span.set_status(Status(StatusCode.ERROR, "the run ended before this did"))
            span.end(end_time=now)
        self.tools.clear()
        self.agents.clear()

    # -- helpers ----------------------------------------------------------------------

    def _start(self, name: str, parent: Span | None, at: int, attributes: dict[str, Any]) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        kind = trace.SpanKind.CLIENT if attributes["gen_ai.operation.name"] == "chat" else trace.SpanKind.INTERNAL
        return self.tracer.start_span(name, context=context, kind=kind, start_time=at, attributes=attributes)

    def _end(self, span: Span, at: int, status: str, reason: str) -> None:
        span.set_attribute("zero.status", status)
        if status != "completed":
            span.set_status(Status(StatusCode.ERROR, reason or status))
        span.end(end_time=at)

    def _usage(self, span: Span, usage: Usage) -> None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens)
        if usage.cost_usd is not None:
            span.set_attribute("zero.cost_usd", usage.cost_usd)

    def _root(self, session_id: str) -> str:
        node = self.tree.nodes.get(session_id)
        return node.root_session_id if node is not None else session_id

    def _content(self, value: object) -> str:
        return self.redact(json.dumps(value, ensure_ascii=False))
