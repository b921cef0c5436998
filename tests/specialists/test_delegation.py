"""Task, TaskOutput and TaskStop: child sessions, concurrency, narrowing, background, resume, roll-up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from zero.agent import Event, Price, PriceTable, RunResult, ScriptedProvider, ScriptMatch, ScriptToolCall, ScriptTurn
from zero.sessions import FileSessionStore, session_tree
from zero.sessions.models import SessionMetadata
from zero.specialists import AgentContext, SpecialistRegistry, open_agent
from zero.tools import PermissionMode, Workspace

pytestmark = pytest.mark.anyio

PARENT = "You are Zero"


def call(tool: str, **args: Any) -> ScriptToolCall:
    return ScriptToolCall(name=tool, arguments=args)


def turn(system: str, n: int, text: str = "", *calls: ScriptToolCall, **kw: Any) -> ScriptTurn:
    return ScriptTurn(match=ScriptMatch(system=system, turn=n), text=text, tool_calls=list(calls), **kw)


class Harness:
    def __init__(self, workspace: Path, tmp_path: Path, turns: list[ScriptTurn], **ctx: Any):
        self.store = FileSessionStore(tmp_path / "sessions")
        self.provider = ScriptedProvider(turns)
        self.events: list[Event] = []
        self.session_id = ""
        prices = PriceTable.builtin().with_overrides({"scripted": Price(input=1.0, output=2.0)})
        self.ctx = AgentContext(
            store=self.store,
            registry=SpecialistRegistry.load(workspace),
            workspace=Workspace([workspace]),
            provider=self.provider,
            model="scripted",
            providers=lambda name: self.provider,
            prices=prices,
            **ctx,
        )

    async def run(self, prompt: str, mode: PermissionMode = "auto") -> RunResult:
        session = await open_agent(
            self.ctx, title=prompt, system_prompt=f"{PARENT}.", permission_mode=mode, max_turns=10
        )
        self.session_id = session.session_id
        session.listen(self.events.append)  # every event of the tree, as it happens
        async with session:
            return await session.send(prompt)

    def of(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [e for e in self.events if e.kind == kind and (session_id is None or e.session_id == session_id)]

    def children(self) -> list[SessionMetadata]:
        return [m for m in self.store.list() if m.parent_session_id == self.session_id]

    def log(self, session_id: str) -> list[Any]:
        return [e.event for e in self.store.events(session_id)]


FANOUT = [
    turn(
        PARENT,
        1,
        "Fanning out.",
        call("Task", name="explorer", description="map", prompt="Map the src folder."),
        call("Task", name="code-review", description="review", prompt="Review src/app.py."),
        call("Task", name="planner", description="plan", prompt="Plan the fix."),
    ),
    turn(PARENT, 2, "All three reported: src/app.py has one TODO; plan ready."),
    turn("You are the explorer", 1, "", call("glob", pattern="src/**"), delay=0.05),
    turn("You are the explorer", 2, "src holds app.py."),
    turn("You are the code reviewer", 1, "", call("grep", pattern="TODO"), delay=0.05),
    turn("You are the code reviewer", 2, "One TODO at src/app.py:2."),
    turn("You are the planner", 1, "", call("read_file", path="src/app.py"), delay=0.05),
    turn("You are the planner", 2, "1. explain the TODO."),
]


async def test_three_tasks_in_one_turn_run_concurrently_in_linked_child_sessions(
    workspace: Path, tmp_path: Path
) -> None:
    h = Harness(workspace, tmp_path, FANOUT)
    result = await h.run("Review the repository.")
    assert result.status == "completed"
    h.provider.assert_consumed()
    kinds = [e.kind for e in h.events if e.kind in ("child_start", "child_end")]
    assert kinds == ["child_start"] * 3 + ["child_end"] * 3  # all three overlap
    children = h.children()
    assert sorted(c.specialist for c in children) == ["code-review", "explorer", "planner"]
    for child in children:
        assert child.session_kind == "child" and child.depth == 1 and child.status == "completed"
        assert child.root_session_id == h.session_id and child.parent_session_id == h.session_id
        assert h.log(child.session_id)[0].kind == "run_start"
    # the parent's model got the three envelopes back, session_id first
    answers = [m for m in h.provider.calls[-1].messages if m.role == "tool"]
    assert [a.content.splitlines()[0].startswith("session_id: child_") for a in answers] == [True] * 3
    assert "One TODO at src/app.py:2." in answers[1].content and "status: completed" in answers[1].content
    parent_log = h.log(h.session_id)
    kinds = [e.kind for e in parent_log]
    assert kinds.count("child_start") == 3 and kinds.count("child_end") == 3
    # in causal order: the answer asking for the tasks, then for each: its call, its child's start and end, its result
    at = {(e.kind, getattr(e, "id", None) or getattr(e, "tool_call_id", None)): i for i, e in enumerate(parent_log)}
    answer = max(i for i, e in enumerate(parent_log) if e.kind == "message" and e.tool_calls)
    for start in (e for e in parent_log if e.kind == "child_start"):
        end = next(
            i
            for i, e in enumerate(parent_log)
            if e.kind == "child_end" and e.child_session_id == start.child_session_id
        )
        call = start.tool_call_id
        assert answer < at[("tool_call", call)] < parent_log.index(start) < end < at[("tool_result", call)]


async def test_usage_rolls_up_exactly_once(workspace: Path, tmp_path: Path) -> None:
    h = Harness(workspace, tmp_path, FANOUT)
    await h.run("Review the repository.")
    root = h.store.metadata(h.session_id)
    children = h.children()
    own = [root.usage.to_usage()] + [c.usage.to_usage() for c in children]
    logged = root.usage.to_usage() + root.children_usage.to_usage()  # what the parent's child_end events say
    tree = session_tree(h.store, h.session_id)  # what the children's own logs say
    assert tree.subtree_usage.total_tokens == logged.total_tokens == sum(u.total_tokens for u in own)
    assert tree.subtree_usage.cost_usd == pytest.approx(sum(u.cost_usd or 0 for u in own))
    assert logged.cost_usd == pytest.approx(sum(u.cost_usd or 0 for u in own))
    assert root.children_usage.calls == 6 and root.usage.calls == 2
    assert sum(n.meta.usage.total_tokens for n in tree.walk()) == tree.subtree_usage.total_tokens
    ends = [e for e in h.log(h.session_id) if e.kind == "child_end"]
    assert sum(e.usage.total_tokens for e in ends) == root.children_usage.total_tokens


@pytest.mark.parametrize(("specialist", "mode"), [("code-review", "unsafe"), ("worker", "read-only")])
async def test_the_narrower_of_manifest_and_caller_always_wins(
    workspace: Path, tmp_path: Path, specialist: str, mode: PermissionMode
) -> None:
    system = "You are the code reviewer" if specialist == "code-review" else "You are the worker"
    h = Harness(
        workspace,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", name=specialist, prompt="Change app.py.")),
            turn(PARENT, 2, "done"),
            turn(
                system,
                1,
                "",
                call("write_file", path="src/app.py", content="hacked"),
                call("bash", command="touch pwned"),
            ),
            turn(system, 2, "I could not."),
        ],
    )
    await h.run("go", mode=mode)
    child = h.children()[0]
    offered = {t.name for t in h.provider.calls[1].tools}
    assert offered.isdisjoint({"write_file", "edit_file", "bash"})
    results = h.of("tool_result", child.session_id)
    assert [r.status for r in results] in (["error", "error"], ["denied", "denied"])
    assert (workspace / "src" / "app.py").read_text().startswith("def main")
    assert not (workspace / "pwned").exists()


async def test_unknown_specialists_and_depth_are_refused_with_clear_errors(workspace: Path, tmp_path: Path) -> None:
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"  # yours: it may delegate
    folder.mkdir(parents=True)
    (folder / "boss.toml").write_text(
        'name = "boss"\ndescription = "delegates"\ntools = ["read-only", "delegate"]\nprompt = "You are the boss."\n'
    )
    h = Harness(
        workspace,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", name="reviewer", prompt="x"), call("Task", name="boss", prompt="y")),
            turn(PARENT, 2, "done"),
            turn("You are the boss", 1, "", call("Task", name="explorer", prompt="z")),
            turn("You are the boss", 2, "cannot"),
        ],
    )
    await h.run("go")
    unknown = h.of("tool_result", h.session_id)[0]
    assert unknown.status == "error"
    assert unknown.output.startswith(
        "Error: there is no specialist named 'reviewer'. Available: boss, code-review, "
        "explorer, planner, tester, worker."
    )
    boss = h.children()[0]
    refused = h.of("tool_result", boss.session_id)[0]
    assert refused.output == (
        "Error: Task is not available here: this agent is at depth 1 and max_depth is 1; do the work yourself"
    )


async def test_a_child_can_delegate_below_max_depth(workspace: Path, tmp_path: Path) -> None:
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"  # yours: it may delegate
    folder.mkdir(parents=True)
    (folder / "boss.toml").write_text(
        'name = "boss"\ndescription = "delegates"\ntools = ["read-only", "delegate"]\nprompt = "You are the boss."\n'
    )
    h = Harness(
        workspace,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", name="boss", prompt="y")),
            turn(PARENT, 2, "done"),
            turn("You are the boss", 1, "", call("Task", name="explorer", prompt="z")),
            turn("You are the boss", 2, "delegated"),
            turn("You are the explorer", 1, "explored"),
        ],
        max_depth=2,
    )
    await h.run("go")
    boss = h.children()[0]
    grandchild = [m for m in h.store.list() if m.parent_session_id == boss.session_id][0]
    assert grandchild.depth == 2 and grandchild.root_session_id == h.session_id
    root = h.store.metadata(h.session_id)
    assert root.children_usage.calls == 3  # the boss's two calls and the explorer's one


SLOW = "You are the explorer"


async def test_background_output_stop_then_resume_with_history(workspace: Path, tmp_path: Path) -> None:
    h = Harness(
        workspace,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", name="explorer", prompt="Map everything slowly.", run_in_background=True)),
            turn(PARENT, 2, "", call("TaskOutput", task_id="{{task_id}}", block=True, timeout=0.5)),
            turn(PARENT, 3, "", call("TaskStop", task_id="{{task_id}}")),
            turn(PARENT, 4, "", call("Task", resume="{{session_id}}", prompt="Finish the map now.")),
            turn(PARENT, 5, "Resumed and finished."),
            turn(SLOW, 1, "I started mapping.", call("list_directory")),
            turn(SLOW, 2, "", delay=30),  # still thinking when it is stopped
            ScriptTurn(match=ScriptMatch(system=SLOW, last="Finish the map now."), text="Map: src/app.py."),
        ],
    )
    result = await h.run("Map it in the background.")
    assert result.status == "completed"
    outputs = [e.output for e in h.of("tool_result", h.session_id)]
    assert outputs[0].startswith("task_id: child_") and "status: running" in outputs[0]
    assert "status: running" in outputs[1] and "latest output: I started mapping." in outputs[1]
    assert "status: cancelled" in outputs[2] and "I started mapping." in outputs[2]
    assert "status: completed" in outputs[3] and outputs[3].endswith("Map: src/app.py.")
    [child] = h.children()
    assert child.status == "completed"
    resumed = h.provider.calls[-2].messages  # the child's resumed call saw its real history
    assert [m.role for m in resumed[:5]] == ["system", "user", "assistant", "tool", "user"]
    assert resumed[1].content == "Map everything slowly." and resumed[4].content == "Finish the map now."
    child_log = [e.kind for e in h.log(child.session_id)]
    assert child_log.count("run_start") == 2 and child_log.count("run_end") == 2
    ends = [e.status for e in h.log(child.session_id) if e.kind == "run_end"]
    assert ends == ["cancelled", "completed"]
    parent_log = [e for e in h.log(h.session_id) if e.kind in ("child_start", "child_end")]
    assert [getattr(e, "mode", None) or e.status for e in parent_log] == [
        "background",
        "cancelled",
        "resume",
        "completed",
    ]
    tree = session_tree(h.store, h.session_id)
    assert len(tree.children) == 1


async def test_children_still_running_when_the_parent_ends_are_cancelled(workspace: Path, tmp_path: Path) -> None:
    h = Harness(
        workspace,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", name="explorer", prompt="slow", run_in_background=True)),
            turn(PARENT, 2, "I will not wait."),
            turn(SLOW, 1, "", delay=30),
        ],
    )
    with anyio.fail_after(10):
        await h.run("go")
    [child] = h.children()
    assert child.status == "cancelled"
    assert h.of("child_end")[0].status == "cancelled"


async def test_a_flag_is_a_json_boolean_not_a_word(workspace: Path, tmp_path: Path) -> None:
    """``block: "yes"`` (or ``"false"``, or ``1``) is refused, saying what to write; it was taken as true."""
    h = Harness(
        workspace,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", name="explorer", prompt="slow", run_in_background="no")),
            turn(PARENT, 2, "", call("Task", name="explorer", prompt="slow", run_in_background=True)),
            turn(PARENT, 3, "", call("TaskOutput", task_id="{{task_id}}", block="yes")),
            turn(PARENT, 4, "", call("TaskOutput", task_id="{{task_id}}", block=1)),
            turn(PARENT, 5, "I will not wait."),
            turn(SLOW, 1, "", delay=30),
        ],
    )
    with anyio.fail_after(10):
        await h.run("go")
    outputs = [e.output for e in h.of("tool_result", h.session_id)]
    assert outputs[0] == (
        'Error: invalid arguments for Task: run_in_background: input should be true or false (a JSON boolean), not "no"'
    )
    assert outputs[2] == (
        'Error: invalid arguments for TaskOutput: block: input should be true or false (a JSON boolean), not "yes"'
    )
    assert outputs[3].endswith("block: input should be true or false (a JSON boolean), not 1")
    [child] = h.children()  # the refused call started nothing
    assert child.status == "cancelled"


async def test_manifest_limits_end_the_child_with_the_matching_status(workspace: Path, tmp_path: Path) -> None:
    folder = workspace / ".zero" / "specialists"
    folder.mkdir(parents=True)
    (folder / "hasty.toml").write_text('name = "hasty"\nextends = "explorer"\ntimeout_seconds = 0.2\n')
    (folder / "thrifty.toml").write_text(
        'name = "thrifty"\nextends = "explorer"\nprompt = "Thrifty."\n[budget]\ntokens = 50\n'
    )
    (folder / "brief.toml").write_text('name = "brief"\nextends = "explorer"\nprompt = "Brief."\nmax_turns = 1\n')
    loop = call("list_directory")
    h = Harness(
        workspace,
        tmp_path,
        [
            turn(
                PARENT,
                1,
                "",
                call("Task", name="hasty", prompt="a"),
                call("Task", name="thrifty", prompt="b"),
                call("Task", name="brief", prompt="c"),
            ),
            turn(PARENT, 2, "done"),
            ScriptTurn(
                match=ScriptMatch(system="Thrifty."),
                text="spent",
                tool_calls=[loop],
                usage={"prompt_tokens": 40, "completion_tokens": 20},
                times=0,
            ),
            ScriptTurn(match=ScriptMatch(system="Brief."), text="more", tool_calls=[loop], times=0),
            ScriptTurn(match=ScriptMatch(system="You are the explorer"), text="", delay=30, times=0),
        ],
    )
    await h.run("go")
    status = {c.specialist: c.status for c in h.children()}
    assert status == {"hasty": "timed_out", "thrifty": "budget_exhausted", "brief": "max_turns"}
    results = {e.output.splitlines()[2]: e.output for e in h.of("tool_result", h.session_id)}
    assert "reason: token budget of this invocation is spent: 60 of 50 tokens" in results["specialist: thrifty"]
    # what the parent's model reads of each stop: the status's own reason
    reasons = {name: text.splitlines()[3] for name, text in results.items()}
    assert reasons["specialist: hasty"] == "reason: its timeout_seconds ran out; partial output below"
    assert reasons["specialist: brief"] == "reason: it reached its max_turns; partial output below"


async def test_task_resumes_only_sessions_this_agent_started(workspace: Path, tmp_path: Path) -> None:
    # Project A: a child session holding A's secrets.
    a = Harness(
        workspace,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", name="explorer", prompt="Read the secret plan.")),
            turn(PARENT, 2, "done"),
            turn("You are the explorer", 1, "The plan of project A is X."),
        ],
    )
    await a.run("go")
    [child] = a.children()
    before = a.store.metadata(child.session_id).event_count
    # Project B, another run on the same machine, learns A's child id somehow and asks to resume it.
    other = tmp_path / "b"
    other.mkdir()
    b = Harness(
        other,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", resume=child.session_id, prompt="Tell me everything.")),
            turn(PARENT, 2, "could not"),
        ],
    )
    await b.run("go")
    refused = b.of("tool_result", b.session_id)[0]
    assert refused.status == "error" and "Task resumes only sessions this agent" in refused.output
    assert a.store.metadata(child.session_id).event_count == before  # nothing appended to A's session
    assert all("project A" not in m.content for c in b.provider.calls for m in c.messages)
    # an id that does not exist gets the very same answer: nothing about other sessions is revealed
    c = Harness(
        other,
        tmp_path,
        [
            turn(PARENT, 1, "", call("Task", resume="child_20990101000000_000000000000", prompt="x")),
            turn(PARENT, 2, "could not"),
        ],
    )
    await c.run("go")
    assert c.of("tool_result", c.session_id)[0].output == refused.output.replace(
        child.session_id, "child_20990101000000_000000000000"
    )


async def test_task_names_its_specialists_in_the_schema(workspace: Path, tmp_path: Path) -> None:
    # grammar-constrained local models only make calls their schema allows: the names are an enum
    h = Harness(workspace, tmp_path, [turn(PARENT, 1, "done")])
    await h.run("x")
    task = next(t for t in h.provider.calls[0].tools if t.name == "Task")
    name = task.parameters["properties"]["name"]
    assert name["type"] == "string" and name["enum"] == h.ctx.registry.names()
    assert {"code-review", "explorer", "planner", "tester", "worker"} <= set(name["enum"])
    assert task.parameters["required"] == ["name", "prompt"]


async def test_a_runs_project_instructions_are_read_once(workspace: Path, tmp_path: Path) -> None:
    (workspace / "AGENTS.md").write_text("Answer in English.")
    turns = [
        turn(PARENT, 1, "", call("Task", name="explorer", prompt="first")),
        turn(PARENT, 2, "", call("write_file", path="AGENTS.md", content="Answer in French.")),
        turn(PARENT, 3, "", call("Task", name="explorer", prompt="second")),
        turn(PARENT, 4, "done"),
        ScriptTurn(match=ScriptMatch(system="You are the explorer"), text="mapped", times=2),
    ]
    h = Harness(workspace, tmp_path, turns)
    await h.run("go")
    assert (workspace / "AGENTS.md").read_text() == "Answer in French."
    children = h.children()
    assert len(children) == 2
    for child in children:  # the second child too: the file is read once a run
        assert "Answer in English." in h.log(child.session_id)[1].content
