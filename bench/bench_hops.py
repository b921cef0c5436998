"""The two journeys of ARCHITECTURE.md, counted: what a ``Task`` call and a team member's event cross.

A scripted run (no network, nothing but this process) is traced with ``sys.setprofile``, and each of
Zero's own functions called on the way is counted once:

- the Task call: from the model's ``Task`` call to its report, the child's own agent loop left out
  (what the delegation machinery costs: open, wire, run, finish, report);
- a child's event: from the moment the child's agent loop emits its answer until every consumer has it
  (the recorders, the relays, the hubs, the front end's stream);
- a member's event: the same, for the answer of a team member;
- a member's Task child's event: the same, for the answer of a Task child a team member started.

Each journey prints its count of modules and functions, its hubs (the ``emit`` functions it passes through)
and the functions themselves: ``python bench/bench_hops.py`` (``--list`` to see every function).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import anyio

from zero.agent import Event, PriceTable, ScriptedProvider, ScriptMatch, ScriptToolCall, ScriptTurn
from zero.orchestrator import TeamRunner, build_plan
from zero.sessions import FileSessionStore
from zero.specialists import AgentContext, SpecialistRegistry, open_agent
from zero.tools import Workspace

Journey = Counter[str]  # the calls of each function
TASK = "a Task call (the delegation, the child's own turn left out)"


def _name(frame: FrameType) -> str:
    return f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_qualname}"


def _is(frame: FrameType, module: str, qualname: str) -> bool:
    return frame.f_code.co_qualname == qualname and frame.f_globals.get("__name__") == module


class Tracer:
    """Zero's functions called inside the journeys, by journey. ``follow(event)`` names the journey of an
    answer an agent loop emits (None: not one to follow)."""

    def __init__(self, follow: Callable[[Any], str | None], *, tasks: bool = True) -> None:
        self.follow = follow
        self.tasks = tasks  # follow the Task calls too
        self.journeys: dict[str, Journey] = {}
        self._frames: set[FrameType] = set()  # a coroutine resumed is the same call again

    def __call__(self, frame: FrameType, what: str, arg: Any) -> None:
        if what != "call" or not frame.f_globals.get("__name__", "").startswith("zero."):
            return
        name = _name(frame)
        if "<" in name or frame in self._frames:  # a comprehension, a dataclass's __init__: part of its caller
            return
        self._frames.add(frame)
        for journey in filter(None, (self._in_task(frame) if self.tasks else None, self._in_emit(frame))):
            self.journeys.setdefault(journey, Counter())[name] += 1

    def _in_task(self, frame: FrameType) -> str | None:
        """While a ``Task.run`` is on the stack, and no agent loop above it (the child's own)."""
        f: FrameType | None = frame
        while f is not None:
            if _is(f, "zero.agent.loop", "AgentRun.run"):
                return None
            if _is(f, "zero.specialists.tools", "Task.run"):
                return TASK
            f = f.f_back
        return None

    def _in_emit(self, frame: FrameType) -> str | None:
        """While the delivery of an event an agent loop emits is on the stack."""
        f: FrameType | None = frame
        while f is not None:
            caller = f.f_back
            if (
                f.f_code.co_name == "emit"
                and caller is not None
                and caller.f_globals.get("__name__") == "zero.agent.loop"
            ):
                return self.follow(f.f_locals.get("event"))
            f = caller
        return None


def _turn(system: str, n: int, text: str = "", *calls: ScriptToolCall) -> ScriptTurn:
    return ScriptTurn(match=ScriptMatch(system=system, turn=n), text=text, tool_calls=list(calls))


def _context(workspace: Path, turns: list[ScriptTurn], user: Path | None = None) -> AgentContext:
    provider = ScriptedProvider(turns)
    return AgentContext(
        store=FileSessionStore(workspace.parent / "sessions"),  # its writer thread (durability) is not traced
        registry=SpecialistRegistry.load(workspace, user=user),
        workspace=Workspace([workspace]),
        provider=provider,
        model="scripted",
        providers=lambda name: provider,
    )


async def _consume(stream: Any, seen: list[Event]) -> None:
    async with stream:
        async for event in stream:
            seen.append(event)


async def task_call(workspace: Path) -> Tracer:
    """A top-level agent delegating one task to the explorer, its events read as ``zero exec`` reads them."""
    task = ScriptToolCall(name="Task", arguments={"name": "explorer", "prompt": "Map src.", "description": "map"})
    turns = [
        _turn("You are Zero", 1, "", task),
        _turn("You are the explorer", 1, "src is empty."),
        _turn("You are Zero", 2, "ok"),
    ]
    ctx = _context(workspace, turns)
    session = await open_agent(ctx, title="t", system_prompt="You are Zero.", permission_mode="auto", max_turns=5)

    def child_answer(event: Any) -> str | None:
        child = event.kind == "message" and event.role == "assistant" and event.session_id.startswith("child")
        return "a child's event" if child else None

    tracer = Tracer(child_answer)
    seen: list[Event] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_consume, session.events(), seen)
        async with session:
            sys.setprofile(tracer)
            try:
                await session.send("Map the project.")
            finally:
                sys.setprofile(None)
    assert [e.kind for e in seen].count("child_end") == 1, "the child did not end once"
    return tracer


async def member_event(workspace: Path, tmp: Path) -> Tracer:
    """A team of two members, one of which delegates a task, its events read as ``zero swarm run`` reads them."""
    user = tmp / "user-specialists"  # a user's specialist may delegate (no built-in one does)
    user.mkdir()
    (user / "lead.toml").write_text(
        'name = "lead"\ndescription = "Leads."\ntools = ["read-only", "delegate"]\nprompt = "You lead."\n'
    )
    team = tmp / "team.toml"
    team.write_text(
        'name = "t"\n[[members]]\nname = "a"\nspecialist = "explorer"\nprompt = "Map src."\n'
        '[[members]]\nname = "b"\nspecialist = "lead"\nprompt = "Have src mapped."\n'
    )
    task = ScriptToolCall(name="Task", arguments={"name": "explorer", "prompt": "Map src.", "description": "map"})
    turns = [
        ScriptTurn(match=ScriptMatch(system='You are "a"'), text="src is empty."),
        _turn('You are "b"', 1, "", task),
        _turn('You are "b"', 2, "done"),
        _turn("You are the explorer", 1, "src is empty."),
    ]
    ctx = _context(workspace, turns, user)
    plan = build_plan(
        team, ctx.registry, provider="scripted", model="scripted", permission_mode="auto", prices=PriceTable.builtin()
    )
    runner = TeamRunner(plan, ctx)
    member = runner.members["a"].session_id

    def answer(event: Any) -> str | None:
        if event.kind != "message" or event.role != "assistant":
            return None
        if event.session_id == member:
            return "a member's event"
        return "a member's Task child's event" if event.session_id.startswith("child") else None

    tracer = Tracer(answer, tasks=False)
    seen: list[Event] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_consume, runner.events(), seen)
        sys.setprofile(tracer)
        try:
            await runner.run()
        finally:
            sys.setprofile(None)
    assert [e.kind for e in seen].count("team_end") == 1, "the team did not end once"
    return tracer


def report(journeys: dict[str, Journey], show: bool) -> None:
    for name, calls in journeys.items():
        modules = {_module(f) for f in calls}
        emits = {f: n for f, n in calls.items() if f.endswith(".emit")}
        print(f"{name}: {len(modules)} modules, {len(calls)} functions, {calls.total()} calls")
        if name != TASK:
            print(f"  emit calls: {sum(emits.values())} ({', '.join(f'{f} x{n}' for f, n in sorted(emits.items()))})")
        if show:
            for function, n in sorted(calls.items()):
                print(f"    {function}" + (f" x{n}" if n > 1 else ""))


def _module(function: str) -> str:
    """The module of ``zero.pkg.mod.Class.method``: the longest prefix that is a loaded module."""
    parts = function.split(".")
    for end in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:end]) in sys.modules:
            return ".".join(parts[:end])
    return function


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every function of each journey")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        (workspace / "src").mkdir(parents=True)
        journeys = anyio.run(task_call, workspace).journeys
        journeys.update(anyio.run(member_event, workspace, Path(tmp)).journeys)
        report(journeys, args.list)


if __name__ == "__main__":
    main()
