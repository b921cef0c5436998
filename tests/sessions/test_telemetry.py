"""OpenTelemetry traces of a run: the span tree of a team whose member starts a Task child that calls a
tool, names, parents and attributes as the GenAI conventions have them; the same spans through OTLP/HTTP
to a receiver; and with telemetry off, OpenTelemetry is never imported."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.cli import scripted, write_script, zero
from support.teams import run_team

from zero.agent import ScriptedProvider
from zero.sessions import RunTree
from zero.sessions.telemetry import start_tracing

pytestmark = pytest.mark.anyio

TEAM = """
name = "traced"
[[members]]
name = "lead"
specialist = "coordinator"
prompt = "Lead."
[[members]]
name = "solo"
specialist = "explorer"
prompt = "Alone."
"""
SCRIPT = """
[[turns]]
match = { system = 'You are "lead"', turn = 1 }
tool_calls = [{ name = "Task", arguments = { name = "explorer", description = "map", prompt = "Map it." } }]
[[turns]]
match = { system = 'You are "lead"', turn = 2 }
text = "The child mapped it."
[[turns]]
match = { system = 'You are "solo"', turn = 1 }
text = "Solo done."
[[turns]]
match = { system = "You are the explorer", turn = 1 }
tool_calls = [{ name = "glob", arguments = { pattern = "**/*.py" } }]
[[turns]]
match = { system = "You are the explorer", turn = 2 }
text = "src/app.py"
"""
# (name, parent's name) of each span, as the conventions have them: the child under the Task call
TREE = {
    ("invoke_workflow traced", None),
    ("invoke_agent lead", "invoke_workflow traced"),
    ("invoke_agent solo", "invoke_workflow traced"),
    ("chat", "invoke_agent lead"),
    ("chat", "invoke_agent solo"),
    ("execute_tool Task", "invoke_agent lead"),
    ("invoke_agent explorer", "execute_tool Task"),
    ("chat", "invoke_agent explorer"),
    ("execute_tool glob", "invoke_agent explorer"),
}


def shape(spans: list[tuple[str, str | None]]) -> set[tuple[str, str | None]]:
    """The spans' (name, parent's name), a chat's model left out (``chat MODEL``: the run's model)."""

    def bare(name: str) -> str:
        return "chat" if name.startswith("chat ") else name

    return {(bare(name), bare(parent) if parent else None) for name, parent in spans}


@pytest.fixture(autouse=True)
def coordinator() -> None:
    """A user's specialist that may delegate (the lead member runs as it)."""
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "coordinator.toml").write_text(
        'name = "coordinator"\ndescription = "Hands work on."\ntools = ["read-only", "delegate"]\n'
        'prompt = "You coordinate."\n'
    )


async def test_a_team_with_a_task_child_makes_the_span_tree_of_the_conventions(workspace: Path, tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    tree = RunTree()
    stop = start_tracing(tree, processor=SimpleSpanProcessor(exporter))
    turns = ScriptedProvider.from_file(write_script(tmp_path / "s.toml", SCRIPT)).turns
    result, runner, _, _ = await run_team(workspace, tmp_path, TEAM, turns, context={"tree": tree})
    stop()
    assert result.status == "completed"
    spans: list[Any] = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans}
    named = [(s.name, by_id[s.parent.span_id].name if s.parent else None) for s in spans]
    assert shape(named) == TREE and len(spans) == 11  # (lead and explorer make two chat calls each)
    assert len({s.context.trace_id for s in spans}) == 1

    def one(name: str) -> Any:
        return next(s for s in spans if s.name == name)

    team, lead, child = one("invoke_workflow traced"), one("invoke_agent lead"), one("invoke_agent explorer")
    members = {m.name: m.session_id for m in result.members}
    assert dict(team.attributes) == {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.conversation.id": runner.session_id,
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "gpt-4.1-mini",
        "zero.team.name": "traced",
        "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": result.usage.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "zero.cost_usd": result.usage.cost_usd,
        "zero.status": "completed",
    }
    assert lead.attributes["gen_ai.agent.id"] == members["lead"]
    assert lead.attributes["gen_ai.conversation.id"] == runner.session_id == child.attributes["gen_ai.conversation.id"]
    assert child.attributes["gen_ai.agent.name"] == "explorer" and child.attributes["zero.status"] == "completed"
    chat = next(s for s in spans if s.name.startswith("chat ") and s.parent.span_id == child.context.span_id)
    assert chat.attributes["gen_ai.operation.name"] == "chat" and chat.attributes["zero.retries"] == 0
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and "gen_ai.output.messages" not in chat.attributes
    glob = one("execute_tool glob")
    assert glob.attributes["gen_ai.tool.name"] == "glob" and "gen_ai.tool.call.arguments" not in glob.attributes
    assert chat.start_time <= chat.end_time <= glob.start_time  # the call, then the tool it asked for


class Receiver:
    """An OTLP/HTTP collector on loopback: the spans of every export it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                request = ExportTraceServiceRequest()
                request.ParseFromString(self.rfile.read(int(self.headers["content-length"])))
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        receiver.spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()
    found.server.server_close()


def test_otlp_over_http_gets_the_same_spans(workspace: Path, tmp_path: Path, receiver: Receiver) -> None:
    team = write_script(tmp_path / "team.toml", TEAM)
    script = write_script(tmp_path / "s.toml", SCRIPT)
    done = zero(
        "swarm", "run", str(team), *scripted(script, workspace), env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    )
    assert done.returncode == 0, done.stderr
    by_id = {s.span_id: s for s in receiver.spans}
    named = [(s.name, by_id[s.parent_span_id].name if s.parent_span_id else None) for s in receiver.spans]
    assert shape(named) == TREE and len(named) == 11


def test_a_project_cannot_turn_telemetry_on_and_off_it_is_never_imported(workspace: Path) -> None:
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "config.toml").write_text('[telemetry]\nenabled = true\nendpoint = "http://x"\n')
    code = (
        "import sys; from zero.cli.main import main; "
        f"main(['exec', 'hi', '--provider', 'scripted', '--cwd', {str(workspace)!r}]); "
        "print('opentelemetry' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr
    assert "a project may not send traces of your runs anywhere" in done.stderr


async def test_content_is_captured_only_when_asked_and_redacted(workspace: Path, tmp_path: Path) -> None:
    secret = "sk-proj-" + "a1B2c3D4" * 5
    script = SCRIPT.replace('pattern = "**/*.py"', f'pattern = "{secret}/*.py"')
    exporter = InMemorySpanExporter()
    tree = RunTree()
    stop = start_tracing(tree, processor=SimpleSpanProcessor(exporter), capture_content=True)
    turns = ScriptedProvider.from_file(write_script(tmp_path / "s.toml", script)).turns
    result, _, _, _ = await run_team(workspace, tmp_path, TEAM, turns, context={"tree": tree})
    stop()
    assert result.status == "completed"
    spans: list[Any] = list(exporter.get_finished_spans())
    glob = next(s for s in spans if s.name == "execute_tool glob")
    assert glob.attributes["gen_ai.tool.call.arguments"] == '{"pattern": "[REDACTED]/*.py"}'
    assert glob.attributes["gen_ai.tool.call.result"] == "no files match '[REDACTED]/*.py' under ."
    said = [s.attributes.get("gen_ai.output.messages", "") for s in spans if s.name.startswith("chat ")]
    assert '[{"role": "assistant", "parts": [{"type": "text", "content": "Solo done."}]}]' in said
    assert not any(secret in str(dict(s.attributes)) for s in spans)


async def test_a_retried_call_is_one_chat_span_counting_its_retries(workspace: Path, tmp_path: Path) -> None:
    flaky = '[[turns]]\nmatch = { system = \'You are "solo"\', turn = 1 }\ntimes = 1\nerror = { kind = "connection" }\n'
    exporter = InMemorySpanExporter()
    tree = RunTree()
    stop = start_tracing(tree, processor=SimpleSpanProcessor(exporter))
    turns = ScriptedProvider.from_file(write_script(tmp_path / "s.toml", flaky + SCRIPT)).turns
    result, _, _, _ = await run_team(workspace, tmp_path, TEAM, turns, context={"tree": tree})
    stop()
    assert result.status == "completed"
    spans: list[Any] = list(exporter.get_finished_spans())
    solo = next(s for s in spans if s.name == "invoke_agent solo")
    [chat] = [s for s in spans if s.name.startswith("chat ") and s.parent.span_id == solo.context.span_id]
    assert chat.attributes["zero.retries"] == 1  # (a connection error is retried; a rate limit is waited for)
    assert all(s.attributes["zero.retries"] == 0 for s in spans if s.name.startswith("chat ") and s is not chat)
