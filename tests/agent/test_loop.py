"""The agent loop, driven by the shipped ScriptedProvider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from zero.agent import (
    STORED,
    AgentConfig,
    AgentRun,
    Approval,
    ApprovalRequest,
    CallPermit,
    Event,
    Message,
    ModelRequest,
    PermissionRequested,
    Price,
    PriceTable,
    RetryPolicy,
    ScriptedProvider,
    ScriptMatch,
    ScriptToolCall,
    ScriptTurn,
    Usage,
    visible_specs,
)
from zero.agent.loop import RESTARTED
from zero.agent.providers.scripted import ScriptError
from zero.errors import ToolError
from zero.sessions import messages_from_events
from zero.tools import (
    ArgsModel,
    BuiltinTool,
    Owns,
    PermissionMode,
    Redactor,
    SideEffect,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    Workspace,
    builtin_tools,
    plan_edit,
)
from zero.tools.builtin import WriteFile

pytestmark = pytest.mark.anyio


def turn(n: int, text: str = "", *calls: tuple[str, dict[str, Any]], **kw: Any) -> ScriptTurn:
    return ScriptTurn(
        match=ScriptMatch(turn=n),
        text=text,
        tool_calls=[ScriptToolCall(name=name, arguments=args) for name, args in calls],
        **kw,
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.kind == kind]


def make_run(
    workspace: Path,
    turns: list[ScriptTurn],
    *,
    mode: PermissionMode = "auto",
    tools: list[Any] | None = None,
    max_turns: int = 10,
    owns: list[str] | None = None,
    **kw: Any,
) -> tuple[AgentRun, Recorder, ScriptedProvider]:
    provider = ScriptedProvider(turns)
    kw.setdefault("model", "gpt-4.1-mini")
    config = AgentConfig(
        provider=provider,
        tools=ToolRegistry(tools or builtin_tools()),
        workspace=Workspace([workspace], owns=Owns(owns), owner="member 'api'") if owns else Workspace([workspace]),
        permission_mode=mode,
        max_turns=max_turns,
        retry=RetryPolicy(retries=2, base_delay=0.001, max_delay=0.002),
        **kw,
    )
    rec = Recorder()
    return AgentRun(config, "s1", [Message(role="system", content="You are a test agent.")], rec), rec, provider


async def test_runs_tools_until_the_model_answers(workspace: Path) -> None:
    run, rec, provider = make_run(
        workspace,
        [
            turn(1, "Reading.", ("read_file", {"path": "README.md"})),
            turn(2, "The answer is 42."),
        ],
    )
    result = await run.run("What is the answer?")
    assert result.status == "completed" and result.output == "The answer is 42." and result.turns == 2
    provider.assert_consumed()
    tool_message = provider.calls[1].messages[-1]
    assert tool_message.role == "tool" and "The answer is 42." in tool_message.content
    assert rec.kinds()[0] == "run_start" and rec.kinds()[-1] == "run_end"
    # the log reads in causal order: the answer that asked for the call, the call, its result
    stored = [k for k in rec.kinds() if k not in ("text", "reasoning")]
    assert stored[1:9] == ["message", "message", "message", "usage", "tool_call", "tool_result", "message", "usage"]
    # priced from the table (gpt-4.1-mini: $0.40 in / $1.60 out per million)
    expected = sum(c.prompt_tokens * 0.4 + c.completion_tokens * 1.6 for c in (e.usage for e in rec.of("usage"))) / 1e6
    assert result.usage.cost_usd == pytest.approx(expected) and result.usage.calls == 2


async def test_max_turns_ends_the_run_as_max_turns_not_success(workspace: Path) -> None:
    loop = ScriptTurn(text="Still looking.", tool_calls=[ScriptToolCall(name="list_directory")], times=0)
    run, _, provider = make_run(workspace, [loop], max_turns=3)
    result = await run.run("Loop forever")
    assert result.status == "max_turns" and result.turns == 3 and len(provider.calls) == 3
    assert result.output == "Still looking."  # the partial output is kept


class Rendezvous(ArgsModel):
    name: str


class MeetTool(BuiltinTool[Rendezvous]):
    """Two calls of this read tool finish only if they run at the same time."""

    name = "meet"
    description = "Wait for the other call."
    side_effect = "read"
    args = Rendezvous

    def __init__(self) -> None:
        self.arrived: dict[str, anyio.Event] = {"a": anyio.Event(), "b": anyio.Event()}

    async def run(self, args: Rendezvous, ctx: ToolContext) -> ToolOutput:
        self.arrived[args.name].set()
        other = "b" if args.name == "a" else "a"
        with anyio.fail_after(5):
            await self.arrived[other].wait()
        return ToolOutput(text=f"{args.name} met {other}")


class LogWrite(BuiltinTool[Rendezvous]):
    name = "log_write"
    description = "Append to a log, slowly."
    side_effect = "write"
    args = Rendezvous
    log: list[str] = []

    async def run(self, args: Rendezvous, ctx: ToolContext) -> ToolOutput:
        self.log.append(f"start {args.name}")
        await anyio.sleep(0.01)
        self.log.append(f"end {args.name}")
        return ToolOutput(text="ok")


async def test_read_calls_of_one_turn_run_concurrently(workspace: Path) -> None:
    meet = MeetTool()
    run, rec, _ = make_run(
        workspace,
        [
            turn(1, "", ("meet", {"name": "a"}), ("meet", {"name": "b"})),
            turn(2, "Both met."),
        ],
        tools=[meet],
    )
    result = await run.run("meet")
    assert result.status == "completed"
    assert [e.output for e in rec.of("tool_result")] in (["a met b", "b met a"], ["b met a", "a met b"])


async def test_writes_run_one_at_a_time_in_order(workspace: Path) -> None:
    LogWrite.log = []
    run, _, provider = make_run(
        workspace,
        [
            turn(1, "", ("log_write", {"name": "1"}), ("log_write", {"name": "2"}), ("log_write", {"name": "3"})),
            turn(2, "Done."),
        ],
        tools=[LogWrite()],
    )
    await run.run("write")
    assert LogWrite.log == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]
    results = [m for m in provider.calls[1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["call_1_1", "call_1_2", "call_1_3"]


async def test_headless_ask_mode_denies_writes_and_tells_the_model(workspace: Path) -> None:
    run, rec, provider = make_run(
        workspace,
        [
            turn(1, "", ("write_file", {"path": "x.txt", "content": "x"})),
            turn(2, "I could not write."),
        ],
        mode="ask",
    )
    await run.run("write x")
    assert not (workspace / "x.txt").exists()
    assert rec.kinds().index("permission_request") < rec.kinds().index("tool_result")
    denied = rec.of("tool_result")[0]
    assert denied.status == "denied"
    assert denied.output == (
        "Permission denied: write_file needs approval in ask mode and this run has no one "
        "to approve it. Continue without it, or say what you would have done."
    )
    assert provider.calls[1].messages[-1].is_error


async def test_an_approver_grants_and_the_decision_is_an_event(workspace: Path) -> None:
    asked: list[PermissionRequested] = []

    async def approve(request: ApprovalRequest) -> Approval:
        asked.append(request.shown)
        return Approval(granted=request.arguments.get("path") == "x.txt", note="only x.txt, please")

    run, rec, _ = make_run(
        workspace,
        [
            turn(1, "", ("write_file", {"path": "x.txt", "content": "hello"})),
            turn(2, "", ("write_file", {"path": "y.txt", "content": "no"})),
            turn(3, "Written."),
        ],
        mode="ask",
        approver=approve,
    )
    await run.run("write x")
    assert (workspace / "x.txt").read_text() == "hello" and not (workspace / "y.txt").exists()
    assert asked[0].name == "write_file" and asked[0].side_effect == "write"
    assert asked[0].arguments == {"path": "x.txt", "content": "hello"}  # the user sees what it would do
    decisions = rec.of("permission_decision")
    assert [d.granted for d in decisions] == [True, False]
    assert decisions[1].reason == "denied by the user: only x.txt, please"
    told = [r.output for r in rec.of("tool_result")][1]
    assert told == "Permission denied: the user refused write_file. The user said: only x.txt, please"


OUTSIDE_API = (
    "src/web/app.py is outside the files member 'api' owns (src/api/**, tests/api/**); "
    "write only those, and leave this change to the member that owns it"
)


@pytest.mark.parametrize("mode", ["auto", "unsafe"])
async def test_a_write_outside_what_a_member_owns_is_denied_naming_its_globs(
    workspace: Path, mode: PermissionMode
) -> None:
    (workspace / "src" / "web").mkdir(parents=True)
    (workspace / "src" / "web" / "app.py").write_text("a = 1\n")
    (workspace / "src" / "api").symlink_to("web")  # a name it owns leads to one it does not: the file counts
    run, rec, _ = make_run(
        workspace,
        [
            turn(1, "", ("write_file", {"path": "src/web/app.py", "content": "x"})),
            turn(2, "", ("edit_file", {"path": "src/api/app.py", "old_text": "a", "new_text": "b"})),
            turn(3, "", ("write_file", {"path": "tests/api/test_app.py", "content": "t"})),
            turn(4, "", ("write_file", {"path": "src/new/app.py", "content": "x"})),
            turn(5, "Done."),
        ],
        mode=mode,
        owns=["src/api/**", "tests/api/**"],
    )
    await run.run("write")
    results = rec.of("tool_result")
    assert [r.status for r in results] == ["denied", "denied", "ok", "denied"]
    assert results[0].output == f"Permission denied: {OUTSIDE_API}."
    assert results[1].output == results[0].output
    assert results[3].output == f"Permission denied: {OUTSIDE_API.replace('src/web', 'src/new', 1)}."
    assert (workspace / "src/web/app.py").read_text() == "a = 1\n"
    assert (workspace / "tests/api/test_app.py").read_text() == "t"
    assert not (workspace / "src/new").exists()  # refused before a folder was made for it


async def test_in_ask_mode_a_write_outside_what_a_member_owns_is_asked_saying_so(workspace: Path) -> None:
    asked: list[PermissionRequested] = []

    async def approve(request: ApprovalRequest) -> Approval:
        asked.append(request.shown)
        preview = plan_edit(Workspace([workspace]), request.shown.name, request.arguments)
        return Approval(granted=True, pin=preview.pin if preview else None)

    run, rec, _ = make_run(
        workspace,
        [turn(1, "", ("write_file", {"path": "src/web/app.py", "content": "x"})), turn(2, "Done.")],
        mode="ask",
        owns=["src/api/**", "tests/api/**"],
        approver=approve,
    )
    await run.run("write")
    assert asked[0].reason == f"Writes a file it does not own: {OUTSIDE_API}."
    assert [r.status for r in rec.of("tool_result")] == ["ok"]
    assert (workspace / "src/web/app.py").read_text() == "x"


async def test_the_write_tool_itself_refuses_a_file_not_owned(workspace: Path) -> None:
    """The write asks again, unless an approval pinned it: a tool called by another way than the loop writes
    nothing a member does not own either."""
    ws = Workspace([workspace], owns=Owns(["src/api/**", "tests/api/**"]), owner="member 'api'")
    with pytest.raises(ToolError) as caught:
        await WriteFile().call({"path": "src/web/app.py", "content": "x"}, ToolContext(workspace=ws))
    assert str(caught.value) == f"{OUTSIDE_API}; nothing was written"
    assert not (workspace / "src/web").exists()


async def test_the_approver_judges_the_call_as_it_runs_and_the_user_sees_its_syntax(workspace: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval(granted=False)

    command = "git ls-remote https://deploy:tok3n;touch${IFS}pwned;@host/repo"
    run, rec, _ = make_run(
        workspace,
        [turn(1, "", ("bash", {"command": command})), turn(2, "No.")],
        mode="ask",
        approver=approve,
        redactor=Redactor({}),
    )
    await run.run("list")
    assert asked[0].arguments == {"command": command}  # what would run: for the rule, never shown
    shown = asked[0].shown.arguments["command"]
    assert "tok3n" not in shown and shown.count(";") == command.count(";") and "${" in shown and asked[0].hidden
    logged = rec.of("tool_call")[0].arguments["command"]
    assert logged == shown  # the log records what ran, redacted the same way


async def test_read_only_mode_hides_write_and_shell_tools(workspace: Path) -> None:
    run, _, provider = make_run(workspace, [turn(1, "ok")], mode="read-only")
    await run.run("look")
    assert sorted(t.name for t in provider.calls[0].tools) == [
        "glob",
        "grep",
        "list_directory",
        "read_file",
        "update_plan",
    ]


async def test_unknown_tools_and_bad_arguments_are_tool_errors_not_crashes(workspace: Path) -> None:
    run, rec, _ = make_run(
        workspace,
        [
            turn(1, "", ("delete_everything", {}), ("read_file", {"paht": "README.md"})),
            turn(2, "Sorry."),
        ],
    )
    result = await run.run("go")
    assert result.status == "completed"
    unknown, bad = rec.of("tool_result")
    assert unknown.status == "error" and unknown.output.startswith("Error: there is no tool named 'delete_everything'")
    assert bad.status == "error" and "paht: Extra inputs are not permitted" in bad.output
    assert "path: Field required" in bad.output


async def test_retryable_errors_are_retried_and_recorded(workspace: Path) -> None:
    run, rec, _ = make_run(
        workspace,
        [
            turn(1, error=ScriptError(kind="rate_limit", retry_after=0.001)),
            turn(1, "Fine now."),
        ],
    )
    result = await run.run("hi")
    assert result.status == "completed" and [e.code for e in rec.of("retry")] == ["rate_limited"]


async def test_a_dropped_stream_restarts_the_answer_after_a_marker(workspace: Path) -> None:
    run, rec, _ = make_run(
        workspace,
        [
            turn(1, "Hello there, this is", error=ScriptError(kind="stream_dropped")),
            turn(1, "A different answer this time."),
        ],
    )
    result = await run.run("hi")
    restart = [i for i, e in enumerate(rec.events) if e.kind == "warning" and e.code == RESTARTED]
    assert len(restart) == 1
    assert "".join(e.delta for e in rec.events[: restart[0]] if e.kind == "text") == "Hello there, this is"
    assert "".join(e.delta for e in rec.events[restart[0] :] if e.kind == "text") == "A different answer this time."
    assert result.output == "A different answer this time."


async def test_an_empty_answer_is_asked_again_once_then_fails_the_run(workspace: Path) -> None:
    run, rec, provider = make_run(workspace, [turn(1), turn(1, reasoning="Thinking, but saying nothing.")])
    result = await run.run("hi")
    assert result.status == "failed" and result.error_code == "empty_answer" and result.turns == 2
    assert result.error == "the model returned nothing (no text and no tool call), twice"
    assert len(provider.calls) == 2 and provider.calls[0].messages == provider.calls[1].messages
    warning = rec.of("warning")[0]
    assert (warning.code, warning.message) == (
        "empty_answer",
        "the model returned nothing (no text and no tool call); asking it once more",
    )
    assert len(rec.of("usage")) == 2  # both calls are counted, as any call is
    assert rec.of("error")[0].code == "empty_answer" and rec.of("run_end")[0].status == "failed"


async def test_an_answer_after_an_empty_one_completes_the_run(workspace: Path) -> None:
    run, rec, provider = make_run(workspace, [turn(1), turn(1, "Here it is.")])
    result = await run.run("hi")
    assert result.status == "completed" and result.output == "Here it is." and result.turns == 2
    provider.assert_consumed()
    assert [m.role for m in run.messages] == ["system", "user", "assistant"]  # nothing empty in the history


async def test_a_permanent_provider_error_fails_the_run(workspace: Path) -> None:
    run, rec, _ = make_run(workspace, [turn(1, error=ScriptError(kind="auth", message="bad key"))])
    result = await run.run("hi")
    assert result.status == "failed" and result.error_code == "auth_error" and result.error == "bad key"
    assert rec.of("error")[0].message == "bad key" and rec.of("run_end")[0].status == "failed"


async def test_cancellation_ends_the_run_cancelled_and_keeps_partial_output(workspace: Path) -> None:
    run, rec, _ = make_run(
        workspace,
        [
            turn(1, "First I will look around.", ("bash", {"command": "sleep 30"})),
        ],
    )
    with anyio.move_on_after(0.5):
        await run.run("work slowly")
    assert run.status == "cancelled"
    finished = rec.of("run_end")[0]
    assert finished.status == "cancelled" and finished.output == "First I will look around."
    # the history stays valid: the interrupted call has a result, in the conversation and in the events
    assert run.messages[-1].role == "tool" and run.messages[-1].content == "cancelled before it finished"
    assert rec.of("message")[-1].content == "First I will look around."
    assert rec.kinds()[-3:] == ["tool_call", "tool_result", "run_end"]
    assert rec.of("tool_result")[-1].output == "cancelled before it finished"


async def test_a_second_run_continues_the_same_conversation(workspace: Path) -> None:
    run, rec, provider = make_run(
        workspace,
        [
            ScriptTurn(match=ScriptMatch(last="first"), text="One."),
            ScriptTurn(match=ScriptMatch(last="second"), text="Two."),
        ],
    )
    await run.run("first")
    result = await run.run("second")
    assert result.output == "Two."
    assert [m.content for m in provider.calls[1].messages] == ["You are a test agent.", "first", "One.", "second"]
    second_run = rec.kinds()[rec.kinds().index("run_start", 1) :]
    assert second_run[:2] == ["run_start", "message"] and rec.of("message")[-2].content == "second"


class SilentEnd:
    """A provider whose stream ends without saying the model finished."""

    name = "silent"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: Any) -> Any:
        from zero.agent.stream import Finish, TextDelta

        self.calls += 1
        yield TextDelta("partial")
        if self.calls > 1:
            yield Finish("stop")

    async def aclose(self) -> None:
        return None


async def test_a_stream_that_ends_without_finishing_is_retried_as_dropped(workspace: Path) -> None:
    provider = SilentEnd()
    config = AgentConfig(
        provider=provider,
        model="m",
        tools=ToolRegistry(),
        workspace=Workspace([workspace]),
        retry=RetryPolicy(retries=1, base_delay=0.001, max_delay=0.001),
    )
    rec = Recorder()
    result = await AgentRun(config, "s1", [], rec).run("hi")
    assert [e.code for e in rec.of("retry")] == ["stream_dropped"]
    assert provider.calls == 2 and result.output == "partial"


async def test_an_answer_cut_at_the_output_cap_ends_output_capped(workspace: Path) -> None:
    run, rec, provider = make_run(
        workspace,
        [
            turn(1, "Reading.", ("read_file", {"path": "README.md"}), finish="length"),
            turn(2, "The ans", finish="length"),
        ],
        max_output_tokens=20,
    )
    result = await run.run("What is the answer?")
    assert all(c.max_output_tokens == 20 for c in provider.calls)  # the cap reaches every request
    # a cut turn whose tool calls are whole still runs them; a cut final answer ends the run
    assert rec.of("tool_result")[0].status == "ok"
    assert result.status == "output_capped" and result.output == "The ans"
    assert "output cap of 20 tokens" in (result.error or "") and "--max-output-tokens" in (result.error or "")
    assert [w.code for w in rec.of("warning")] == ["output_capped", "output_capped"]
    assert rec.of("run_end")[0].status == "output_capped"


class Lowers:
    """A guard that, like a budget near its limit, leaves room for fewer output tokens than the cap."""

    def __init__(self, cap: int):
        self.cap = cap

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit:
        return CallPermit(max_output_tokens=self.cap)

    async def before_retry(self, permit: CallPermit | None) -> None:
        return None

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None:
        return None


async def test_a_guard_lowers_the_output_cap_and_an_answer_cut_there_ends_budget_exhausted(workspace: Path) -> None:
    run, rec, provider = make_run(
        workspace,
        [turn(1, "Reading.", ("read_file", {"path": "README.md"})), turn(2, "The ans", finish="length")],
        max_output_tokens=2000,
        guards=(Lowers(1200), Lowers(1500)),
    )
    result = await run.run("What is the answer?")
    assert [c.max_output_tokens for c in provider.calls] == [1200, 1200]  # the lowest a guard allows is sent
    assert result.status == "budget_exhausted" and result.output == "The ans"
    assert result.error == (
        "the answer was cut: the model reached the output cap of 1200 tokens before it finished: all the budget "
        "had room for in this call (the cap is 2000 otherwise)"
    )
    assert rec.of("warning")[0].code == "output_capped"


async def test_the_output_cap_defaults_to_the_models(workspace: Path) -> None:
    run, _, provider = make_run(workspace, [turn(1, "hi")])
    await run.run("x")
    assert provider.calls[0].max_output_tokens == 8192  # gpt-4.1-mini's max_output in prices.toml
    run, _, provider = make_run(workspace, [turn(1, "hi")], model="local-llm")
    await run.run("x")
    assert provider.calls[0].max_output_tokens == 4096  # a model Zero does not know


async def test_an_unpriced_models_run_costs_unknown_on_every_path(workspace: Path) -> None:
    failing = turn(1, error=ScriptError(kind="bad_request"))
    run, rec, _ = make_run(workspace, [failing], model="local-llm")
    result = await run.run("x")
    assert result.status == "failed" and result.usage.cost_usd is None  # no call completed: still unknown, not $0
    assert rec.of("run_end")[0].usage.cost_usd is None


async def test_a_conversation_near_the_context_window_is_compacted_and_recorded(workspace: Path) -> None:
    (workspace / "big.txt").write_text("data " * 3000)  # ~5,000 tokens as Zero estimates them
    prices = PriceTable.builtin().with_overrides({"small-model": Price(input=1.0, output=1.0, context=6_000)})
    run, rec, provider = make_run(
        workspace,
        [
            turn(1, "Reading.", ("read_file", {"path": "big.txt"})),
            ScriptTurn(match=ScriptMatch(last="Summarize this conversation"), text="Read big.txt: it is all data."),
            ScriptTurn(match=ScriptMatch(last="all data"), text="It holds nothing but data."),
        ],
        model="small-model",
        prices=prices,
    )
    result = await run.run("What is in big.txt?")
    assert result.status == "completed" and result.output == "It holds nothing but data."
    after = provider.calls[-1].messages  # the call after the compaction saw the summary, not the file
    assert [m.role for m in after] == ["system", "user"] and after[1].content.endswith("it is all data.")
    compacted = rec.of("compaction")
    assert len(compacted) == 1 and compacted[0].replaced == 3  # the prompt, the answer, the tool result
    assert [w.code for w in rec.of("warning")] == ["compacted"]
    # a resumed session continues from the same history
    stored = [e for e in rec.events if e.kind in STORED]
    assert messages_from_events(stored)[:2] == list(after)


def test_a_tools_definition_is_made_once_for_every_run_and_anew_when_its_schema_is_new() -> None:
    """Each member's run sends its tools' definitions, whose size is estimated by serialising their schemas: a
    built-in tool's (one schema object, made once) is made once for all; a tool whose schema is a new object
    each time (an MCP server listed again) gets a definition of that schema."""
    first, again = visible_specs(builtin_tools(), "auto"), visible_specs(builtin_tools(), "auto")
    assert [s.name for s in first] == [t.name for t in builtin_tools()]
    assert all(a is b for a, b in zip(first, again, strict=True))

    class Listed:
        name, description = "mcp__docs__search", "Searches the docs."
        side_effect: SideEffect = "read"

        async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            raise NotImplementedError

        def __init__(self, fields: int) -> None:
            self.parameters = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(fields)}}

    small, large = visible_specs([Listed(1)], "auto")[0], visible_specs([Listed(40)], "auto")[0]
    assert large.parameters == Listed(40).parameters and large.tokens > small.tokens + 100
