"""Members on a Ray cluster (``--executor ray``): the executor seam's verbs, with the members on other nodes.

The driver (``zero swarm run`` or ``resume``) makes two kinds of actor:

* one **session writer**, on the driver's node, owns the session store: every write of every session of the
  run, the driver's own included, goes through it (``RayStore``, each process's requests in their order) and
  is acknowledged, so "a tool with a side effect runs only once its call is written" holds on every node,
  and the sessions live on the driver's machine (``zero sessions ...``, ``zero swarm watch`` read them
  there, unchanged). Its process holds the **ledger** too: the team's budget ledger and each member's grant
  of it. Every reservation and booking of every member and its Task children goes through it (a hold and a
  booking a model call; what a host's members ask while its last trip is under way goes in one), so the
  overshoot bound of docs/TEAMS.md holds across nodes and a trip refuses every member's next call;
* one **member host** per placement (the ``resources`` and ``node_labels`` members declare): an async actor
  that runs many members on its event loop, as ``InProcessExecutor`` does here. A member's events stream to
  the driver's run tree (a streaming generator); its stop goes through a concurrency group of its own.

Every actor has ``max_restarts = 0`` and ``max_task_retries = 0``: Ray never repeats a model call. When a
host's node dies, its members end ``interrupted`` and are resumed from their logs on a new host, which Ray
places on a node that still has their resources, at most ``[scheduler] node_retries`` times.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import pickle
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from zero.agent import (
    CallPermit,
    ChildStarted,
    Event,
    ModelRequest,
    PriceTable,
    RunResult,
    RunStatus,
    StatusChanged,
    Usage,
)
from zero.agent.prompts import NODE_RESUMED
from zero.errors import ConfigError, ToolError
from zero.heap import settle_collector
from zero.orchestrator.control import ControlGuard, Controls
from zero.orchestrator.executor import InProcessExecutor, MemberOutcome, MemberTask
from zero.orchestrator.ledger import BudgetGuard, Ledger, Trip, _Account
from zero.orchestrator.plan import MemberPlan, TeamPlan
from zero.orchestrator.team import MemberBudget, TeamBudget, TeamError, TeamProblem
from zero.sessions import FileSessionStore, SessionMetadata, SessionStore, StoredEvent, default_data_dir
from zero.sessions.index import Row
from zero.specialists import AgentContext
from zero.tools import SideEffect, Tool, ToolContext, ToolOutput, Workspace
from zero.tools.clones import NodeClones, NodeTree

__all__ = ["ContextOpener", "RayExecutor", "RayStore", "check_placement", "connect", "start_writer"]

T = TypeVar("T")

ContextOpener = Callable[[SessionStore], AbstractAsyncContextManager[AgentContext]]
"""How a node's member host makes the context its members share (providers, specialists, workspace), with the
session store given: picklable, so Ray takes it to every node (the CLI's ``NodeContext``)."""

NODE_DIED = "its Ray node died (or its member host did)"
_ACTOR = {"max_restarts": 0, "max_task_retries": 0, "num_cpus": 0}


# -- the cluster ---------------------------------------------------------------------------------------


def connect(address: str) -> None:
    """Join the cluster at ``address`` (``auto``: the one ``ray start`` made on this machine), or a
    ``ConfigError`` saying how to start one."""
    if ray.is_initialized():
        return
    host, _, port = address.rpartition(":")
    if host and port.isdigit() and "://" not in address:  # (Ray retries an address that is not there for minutes)
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as e:
            raise ConfigError(_no_cluster(address, e.strerror or type(e).__name__)) from None
    _cluster_news_to_stderr()
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(_no_cluster(address, first)) from None


def _cluster_news_to_stderr() -> None:
    """What the cluster tells a driver (a node that died, a worker killed) Ray prints on standard output, which
    holds a run's JSON: it goes to standard error instead."""
    import ray._private.worker as worker

    printer = worker.print_to_stdstream
    if getattr(printer, "zero", False):
        return

    def to_stderr(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        printer({**data, "is_err": True}, *args, **kwargs)

    to_stderr.zero = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def _no_cluster(address: str, why: str) -> str:
    return (
        f"no Ray cluster answers at {address} ({why}): start one with `ray start --head` on this machine "
        "(and `ray start --address HEAD_IP:6379` on each other one), or pass --ray-address HOST:PORT"
    )


def check_placement(plan: TeamPlan) -> None:
    """A ``TeamError`` naming each member no live node of the cluster can run (Ray would leave it pending
    forever) and the resource or label that is missing."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    problems = [
        TeamProblem(path=str(plan.path), message=why, key="members.resources", subject=f"member {m.name!r}")
        for m in plan.members.values()
        if (why := _unplaceable(m, nodes)) is not None
    ]
    if problems:
        raise TeamError(problems)


def _unplaceable(member: MemberPlan, nodes: Sequence[Mapping[str, Any]]) -> str | None:
    def fits(node: Mapping[str, Any]) -> bool:
        have, labels = node.get("Resources", {}), node.get("Labels", {}) or {}
        return all(have.get(k, 0) >= v for k, v in member.resources.items()) and all(
            labels.get(k) == v for k, v in member.node_labels.items()
        )

    if any(fits(n) for n in nodes):
        return None
    for name, amount in member.resources.items():
        most = max((n.get("Resources", {}).get(name, 0.0) for n in nodes), default=0.0)
        if most < amount:
            had = f"at most {most:g} on one node" if most else "none has it"
            return (
                f"needs resource {name} = {amount:g}, which no node of the Ray cluster has ({had}): start a "
                f"node with `ray start --resources '{{\"{name}\": {amount:g}}}'`, or change its resources"
            )
    for key, value in member.node_labels.items():
        if not any((n.get("Labels", {}) or {}).get(key) == value for n in nodes):
            return (
                f"needs node label {key} = {value!r}, which no node of the Ray cluster carries: start a node "
                f"with `ray start --labels {key}={value}`, or change its node_labels"
            )
    wanted = ", ".join([*(f"{k} = {v:g}" for k, v in member.resources.items()), *member.node_labels])
    return f"needs {wanted} on one node, and no node of the Ray cluster has all of them"


def _actor(cls: type, **options: Any) -> Any:
    """``cls`` as a Ray actor class (``options``: its defaults)."""
    remote: Any = ray.remote  # (its stubs know few of an actor's options)
    return remote(**_ACTOR, **options)(cls)


def _on_this_node() -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def _unwrapped(error: ray.exceptions.RayTaskError) -> BaseException:
    """The error an actor's method raised (a ``BudgetExhaustedError``, a ``SessionError``), as it was."""
    cause = error.cause
    return cause if isinstance(cause, BaseException) else error


def _get(ref: ray.ObjectRef[T]) -> T:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        raise _unwrapped(e) from None


def _packed(value: object) -> bytes:
    """``value`` pickled by the C pickler: Ray's own (cloudpickle, a Python hook called for every object) took
    a third of a member host's CPU on the events it sends. Every class of an event is importable by name."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


async def _await(ref: ray.ObjectRef[T]) -> T:
    try:
        return await ref
    except ray.exceptions.RayTaskError as e:
        raise _unwrapped(e) from None


# -- the session writer ----------------------------------------------------------------------------------


SEND_EVERY = 0.02
"""Seconds the batches an event loop submits gather before they go to the session writer together."""


class RayStore:
    """A ``SessionStore`` whose every request goes to the run's session writer, in order. ``submit`` and
    ``release`` do not wait: what an event loop submits within ``SEND_EVERY`` goes together (one round trip; any
    other request sends it first, and ``written`` goes with it), and its acknowledgement (or the failure it
    carries) is read by the next ``check`` or ``flush``."""

    def __init__(self, writer: Any):
        self.writer = writer
        self._sender = uuid.uuid4().hex  # (the writer runs each sender's requests in the order of their numbers)
        self._numbers = itertools.count()
        self._queue: list[tuple[str, list[Event], bool, bool]] = []  # submitted (or released), not yet sent
        self._sending = False  # a send is scheduled on this thread's event loop
        self._acks: list[Any] = []  # sent, not yet acknowledged
        self._failed: dict[str, BaseException] = {}
        self._lock = threading.Lock()  # (a run calls it from its event loop and from worker threads)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayStore, (self.writer,))

    def _send(self, written: str | None = None) -> Any:
        """Send what is queued (and ``written``: ask for that session's to be written); the request, if one went."""
        with self._lock:
            batches, self._queue, self._sending = self._queue, [], False
            if not batches and written is None:
                return None
            packed = _packed(batches)  # (before it takes a number: one taken and never sent holds up the rest)
            ref = self.writer.submit.remote(self._sender, next(self._numbers), packed, written)
            self._acks.append(ref)
            return ref

    def _call(self, name: str, *args: Any) -> Any:
        self._send()  # (what was submitted before goes first)
        request = _packed((name, args))
        with self._lock:
            ref = self.writer.call.remote(self._sender, next(self._numbers), request)
        return _get(ref)

    def _settle(self, *, wait: bool) -> None:
        if wait:
            self._send()
        with self._lock:
            pending = list(self._acks)
        if not pending:
            return
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=None if wait else 0)
        with self._lock:
            self._acks = [ref for ref in self._acks if ref not in ready]
        for ref in ready:
            for session_id, error in _get(ref).items():
                self._failed.setdefault(session_id, error)

    def _raise(self, session_id: str) -> None:
        if (error := self._failed.get(session_id)) is not None:
            raise error

    def create(self, meta: SessionMetadata) -> SessionMetadata:
        return self.create_all([meta])[0]

    def create_all(self, metas: Sequence[SessionMetadata]) -> list[SessionMetadata]:
        result: list[SessionMetadata] = self._call("create_all", list(metas))
        return result

    def append(self, session_id: str, events: Sequence[Event]) -> SessionMetadata:
        result: SessionMetadata = self._call("append", session_id, list(events))
        return result

    def submit(self, session_id: str, events: Sequence[Event], *, final: bool = False) -> None:
        self._raise(session_id)
        self._enqueue((session_id, list(events), final, False))

    def _enqueue(self, entry: tuple[str, list[Event], bool, bool]) -> None:
        with self._lock:
            self._queue.append(entry)
            if self._sending:
                return
            try:
                asyncio.get_running_loop().call_later(SEND_EVERY, self._send)
                self._sending = True
                return
            except RuntimeError:  # no event loop in this thread: at once
                pass
        self._send()

    def flush(self, session_id: str | None = None) -> None:
        self._settle(wait=True)
        self._call("flush", session_id)

    def written(self, session_id: str) -> None:
        self._raise(session_id)
        ray.wait([self._send(written=session_id)], timeout=None)  # with every batch this process queued
        self._settle(wait=False)
        self._raise(session_id)

    async def awritten(self, session_id: str) -> None:
        self._raise(session_id)
        sent = asyncio.wrap_future(self._send(written=session_id).future())
        await asyncio.wait([sent])  # ready, as ray.wait says (a failure it carries is read next)
        self._settle(wait=False)
        self._raise(session_id)

    def check(self, session_id: str) -> None:
        self._settle(wait=False)
        self._raise(session_id)

    def acquire(self, session_id: str) -> None:
        self._call("acquire", session_id)

    def release(self, session_id: str) -> None:
        self._enqueue((session_id, [], False, True))

    def held(self, session_id: str) -> bool:
        result: bool = self._call("held", session_id)
        return result

    def exists(self, session_id: str) -> bool:
        result: bool = self._call("exists", session_id)
        return result

    def metadata(self, session_id: str) -> SessionMetadata:
        result: SessionMetadata = self._call("metadata", session_id)
        return result

    def events(self, session_id: str) -> list[StoredEvent]:
        result: list[StoredEvent] = self._call("events", session_id)
        return result

    def events_since(self, session_id: str, cursor: int) -> tuple[list[StoredEvent], int]:
        result: tuple[list[StoredEvent], int] = self._call("events_since", session_id, cursor)
        return result

    def rows(self, tree: str | None = None) -> list[Row]:
        result: list[Row] = self._call("rows", tree)
        return result

    def list(self) -> list[SessionMetadata]:
        result: list[SessionMetadata] = self._call("list")
        return result


# -- the team's tools, which run on the driver ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    side_effect: SideEffect


class _Relay:
    """Calls of the team's tools (``send_message``, ``read_inbox``) by members on nodes: the driver reads them as a
    stream (``asked``) and runs each on the team's own mailbox, so a message reaches every member wherever it
    runs, exactly as in one process."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.pending: list[tuple[int, str, str, dict[str, Any]]] = []
        self.more: anyio.Event | None = None  # (made on the actor's loop)
        self.waiting: dict[int, anyio.Event] = {}
        self.answers: dict[int, tuple[bool, Any]] = {}

    def _more(self) -> anyio.Event:
        if self.more is None:
            self.more = anyio.Event()
        return self.more

    async def call_tool(self, session_id: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        """Run ``tool`` of member ``session_id`` on the driver: (True, its output) or (False, its error)."""
        number = next(self.ids)
        self.waiting[number] = done = anyio.Event()
        self.pending.append((number, session_id, tool, arguments))
        self._more().set()
        await done.wait()
        return self.answers.pop(number)

    async def asked(self) -> AsyncIterator[bytes]:
        while True:
            if not self.pending:
                await self._more().wait()
            batch, self.pending, self.more = self.pending, [], anyio.Event()
            yield _packed(batch)

    def answer(self, number: int, ok: bool, value: Any) -> None:
        self.answers[number] = (ok, value)
        self.waiting.pop(number).set()


class _Relayed:
    """A team tool as a member on a node sees it: each call runs on the driver, through the relay."""

    def __init__(self, spec: _ToolSpec, relay: Any, session_id: str):
        self.spec, self.relay, self.session_id = spec, relay, session_id

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def side_effect(self) -> SideEffect:
        return self.spec.side_effect

    @property
    def parameters(self) -> dict[str, Any]:
        return self.spec.parameters

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        ok, value = await _await(self.relay.call_tool.remote(self.session_id, self.spec.name, arguments))
        if not ok:
            raise ToolError(value)
        output: ToolOutput = value
        return output


# -- the ledger --------------------------------------------------------------------------------------------


class _LedgerHost(_Relay):
    """The team's budget ledger and each member's grant of it; each member's guard a ``BudgetGuard`` here. The
    relay of the team's tools too. The session writer's process holds it (``_Writer``)."""

    def __init__(self) -> None:
        super().__init__()
        self.team = Ledger(TeamBudget(), name="team")  # (``open`` gives it the run's limits, before any grant)
        self.prices = PriceTable({})  # (``open`` gives it the run's)
        self.guards: dict[str, BudgetGuard] = {}
        self.permits: dict[int, tuple[str, str, CallPermit]] = {}  # a call under way: its guard, its host
        self.ids = itertools.count(1)
        self.parked: dict[int, asyncio.Future[CallPermit]] = {}  # holds waiting for calls in flight to settle
        self.round_trips = 0  # calls of this actor by hosts (each a round trip)
        self.requests = 0  # the holds, settles and retries they carried

    def open(self, limits: TeamBudget, used: _Account, prices: PriceTable) -> None:
        """The team's limits, what it has spent already (a resumed run's) and the run's prices."""
        self.team = Ledger(limits, name="team")
        self.team.used = used
        self.prices = prices

    def grant(self, key: str, limits: MemberBudget | None, name: str) -> None:
        """The guard of ``key`` (a member with a grant of its own, else the team's)."""
        if key not in self.guards:
            ledger = self.team if limits is None else Ledger(limits, parent=self.team, name=name)
            self.guards[key] = BudgetGuard(ledger, self.prices)

    async def ask(self, host: str, requests: list[tuple[Any, ...]]) -> list[tuple[bool, Any]]:
        """The requests ``host``'s members made while its last trip was under way, in their order: ("hold", key,
        model, estimate, output, session_id), ("settle", key, number, usage) or ("retry", key). Each answer is
        (True, what it gives) or (False, the error it raised); a hold that must wait for calls in flight to settle
        answers ``_Parked`` (its member claims it; the others of the trip do not wait for it)."""
        self.round_trips += 1
        answers: list[tuple[bool, Any]] = [(True, None)] * len(requests)
        holds: list[tuple[int, asyncio.Future[CallPermit]]] = []
        for i, (verb, key, *args) in enumerate(requests):
            self.requests += 1
            if verb == "hold":
                holds.append((i, asyncio.ensure_future(self._hold(key, host, *args))))
            elif verb == "settle":
                await self._settle(key, *args)
            else:
                await self.guards[key].before_retry(None)
        if holds:
            await asyncio.sleep(0)  # (a hold that fits now has its permit after one turn of the loop)
        for i, hold in holds:
            if not hold.done():
                self.parked[number := next(self.ids)] = hold
                answers[i] = (True, _Parked(number))
            elif (error := hold.exception()) is not None:
                answers[i] = (False, error)
            else:
                answers[i] = (True, hold.result())
        return answers

    async def claim(self, number: int) -> CallPermit:
        """The permit of a parked hold, once the calls it waited for settled."""
        self.round_trips += 1
        return await self.parked.pop(number)

    async def _hold(self, key: str, host: str, model: str, estimate: int, output: int, session_id: str) -> CallPermit:
        permit = await self.guards[key].hold(model, estimate, output, session_id)
        number = next(self.ids)
        self.permits[number] = (key, host, permit)
        return CallPermit(token=number, note=permit.note, max_output_tokens=permit.max_output_tokens)

    async def _settle(self, key: str, number: int, usage: Usage | None) -> None:
        if (held := self.permits.pop(number, None)) is not None:
            await self.guards[key].after_call(held[2], usage)

    async def abandon(self, host: str) -> None:
        """Release what the calls under way on ``host`` hold: it died with them (what they used is unknown, as
        it is to their sessions, which never recorded an answer)."""
        for number, (key, on, permit) in list(self.permits.items()):
            if on == host:
                del self.permits[number]
                await self.guards[key].after_call(permit, None)

    def state(self, key: str) -> tuple[tuple[_Account, Trip | None], tuple[_Account, Trip | None]]:
        """What the team and ``key``'s ledger have used, and their trips."""
        own = self.guards[key].ledger if key in self.guards else self.team
        return (self.team.used, self.team.trip), (own.used, own.trip)

    def stats(self) -> dict[str, int]:
        return {"roundTrips": self.round_trips, "requests": self.requests}


class _Writer(_LedgerHost):
    """The run's session store and its budget ledger, in one process on the driver's node (a process of Ray's
    takes about a second of CPU to start, and the ledger's was on the way of every member's first call). The
    store's requests run one at a time, in the order each process sent them, on a thread of their own (a write
    that waits for the disk does not hold up the ledger)."""

    def __init__(self, root: str, redactor: Callable[[str], str]):
        super().__init__()
        settle_collector()  # (each actor is a process of Zero's own)
        self.store = FileSessionStore(Path(root), redactor=redactor)
        self.turns: dict[str, int] = {}  # each sender's next request, by its number
        self.moved: asyncio.Event | None = None  # set (and replaced) when a request has run (on the store's loop)

    async def _turn(self, sender: str, number: int) -> None:
        """Wait for every request ``sender`` sent before this one to run (Ray may start an async actor's tasks
        out of order: one whose arguments it fetches from another node waits while a later one starts)."""
        while self.turns.get(sender, 0) != number:
            if self.moved is None:
                self.moved = asyncio.Event()
            await self.moved.wait()

    def _ran(self, sender: str, number: int) -> None:
        self.turns[sender] = number + 1
        if self.moved is not None:
            self.moved.set()
            self.moved = None

    @ray.method(concurrency_group="store")
    async def call(self, sender: str, number: int, request: bytes) -> Any:
        """A call of the store: ``request`` its method's name and arguments, pickled."""
        await self._turn(sender, number)
        try:
            name, args = pickle.loads(request)
            return getattr(self.store, name)(*args)
        finally:
            self._ran(sender, number)

    @ray.method(concurrency_group="store")
    async def submit(self, sender: str, number: int, packed: bytes, written: str | None = None) -> dict[str, Exception]:
        """Queue batches and releases, in order, then (``written``) wait until that session's are written; the
        acknowledgement: why each session that cannot be written cannot be."""
        await self._turn(sender, number)
        try:
            return self._submit(packed, written)
        finally:
            self._ran(sender, number)

    def _submit(self, packed: bytes, written: str | None) -> dict[str, Exception]:
        failed: dict[str, Exception] = {}
        batches: list[tuple[str, list[Event], bool, bool]] = pickle.loads(packed)
        for session_id, events, final, release in batches:
            try:
                if events or final:
                    self.store.submit(session_id, events, final=final)
                    self.store.check(session_id)
                if release:
                    self.store.release(session_id)
            except Exception as e:  # noqa: BLE001 (that session's next check raises it)
                failed.setdefault(session_id, e)
        if written is not None and written not in failed:
            try:
                self.store.written(written)
            except Exception as e:  # noqa: BLE001
                failed[written] = e
        return failed


def start_writer(root: Path, redactor: Callable[[str], str]) -> RayStore:
    """The run's session writer (and its ledger) on this (the driver's) node, writing the sessions under
    ``root``."""
    options = {"max_concurrency": 100_000, "concurrency_groups": {"store": 100_000}}
    writer = _actor(_Writer, scheduling_strategy=_on_this_node(), **options).remote(str(root), redactor)
    return RayStore(writer)


@dataclass(frozen=True)
class _Parked:
    """A hold's answer when it must wait: the number its member claims it by."""

    number: int


class _LedgerLink:
    """A host's way to the ledger actor: what its members ask while a trip is under way goes in the next, together
    (a call of an actor costs about half a millisecond of CPU at each end: a host of a hundred members made two a
    model call, the most of the host's and the ledger's work)."""

    def __init__(self, ledger: Any, host: str):
        self.ledger = ledger
        self.host = host
        self.queue: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        self.sender: asyncio.Task[None] | None = None

    async def ask(self, *request: Any) -> Any:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queue.append((request, answer))
        if self.sender is None:
            self.sender = asyncio.ensure_future(self._send())
        value = await answer
        if isinstance(value, _Parked):
            value = await _await(self.ledger.claim.remote(value.number))
        return value

    async def _send(self) -> None:
        try:
            while self.queue:
                batch, self.queue = self.queue, []
                try:
                    answers = await _await(self.ledger.ask.remote(self.host, [request for request, _ in batch]))
                except Exception as e:  # noqa: BLE001 (the ledger is gone: each asker raises it)
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(e)
                    continue
                for (request, answer), (ok, value) in zip(batch, answers, strict=True):
                    if answer.cancelled():
                        if request[0] == "hold" and isinstance(value, CallPermit):  # (its asker stopped: release it)
                            self.queue.append((("settle", request[1], value.token, None), asyncio.Future()))
                    elif ok:
                        answer.set_result(value)
                    else:
                        answer.set_exception(value)
        finally:
            self.sender = None


class _RemoteBudget:
    """A member's call guard on a node: its ``BudgetGuard`` is in the ledger actor (reserve before, book after)."""

    def __init__(self, link: _LedgerLink, key: str):
        self.link = link
        self.key = key

    async def before_call(self, request: ModelRequest, run_usage: Usage) -> CallPermit:
        model, estimate, output = request.model, request.estimated_prompt_tokens(), request.max_output_tokens or 0
        permit: CallPermit = await self.link.ask(
            "hold", self.key, model, estimate, output, request.metadata.get("session_id", "")
        )
        return permit

    async def before_retry(self, permit: CallPermit | None) -> None:
        await self.link.ask("retry", self.key)

    async def after_call(self, permit: CallPermit | None, usage: Usage | None) -> None:
        if permit is not None:
            await self.link.ask("settle", self.key, permit.token, usage)


# -- the member host ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Work:
    """One member's run, as a host gets it."""

    plan: MemberPlan
    session_id: str
    place: SessionMetadata  # where its session sits in the run (the driver's node of it: no trip to ask the store)
    prompt: str
    role: str
    resume: bool
    workspace: tuple[str, ...] | None  # its worktree's roots, if not the run's workspace
    tree: NodeTree | None  # the worktree the host makes for it from the team's repository ([workspace] repo)
    ledger: Any  # the ledger actor
    guard: str  # the ledger key its calls spend from
    tools: tuple[_ToolSpec, ...] = ()  # the team's tools for it, which run on the driver (messaging)
    relay: Any = None  # the actor its calls of them go through
    controlled: bool = False  # zero swarm pause and send reach it (through its host's Controls)
    paused: bool = False  # paused before it started
    inbox: tuple[str, ...] = ()  # what the user sent it before it started


class _Host:
    """Many members on one event loop of one node, each a node of this host's run tree."""

    def __init__(self, name: str, opener: ContextOpener, store: RayStore):
        settle_collector()
        self.name = name
        self.opener = opener
        self.store = store
        self.stack = AsyncExitStack()
        self.ctx: AgentContext | None = None
        self.opening = anyio.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.outbox: list[Event] = []  # every member's events, not yet sent to the driver
        self.queued = 0  # events put in the outbox, ever (the driver has all of a member's once it has this many)
        self.more: anyio.Event | None = None  # set when the outbox has something (made on the host's loop)
        self.stops: dict[str, tuple[RunStatus, bool]] = {}  # stops that came before their member's run
        self.controls: Controls | None = None  # its members' pauses and the user's messages (made on its loop)
        self.early: list[tuple[str, list[str], str]] = []  # control that came before its loop ran
        self.early_lock = threading.Lock()  # (control comes on a thread of its own)
        self.clones: NodeClones | None = None  # this node's clones of team repositories, made at the first use
        self.link: _LedgerLink | None = None  # its members' way to the ledger (made on its loop)

    async def _context(self) -> AgentContext:
        async with self.opening:
            if self.ctx is None:
                self.loop = asyncio.get_running_loop()
                self.ctx = await self.stack.enter_async_context(self.opener(self.store))
            return self.ctx

    def _forward(self, event: Event) -> None:
        self.outbox.append(event)
        self.queued += 1
        if self.more is not None:
            self.more.set()

    async def run(self, work: _Work) -> tuple[MemberOutcome, int]:
        """Run one member to its end (its events go to ``events``' stream meanwhile); its outcome, and how many
        events the host had queued once it had queued the member's last."""
        ctx = await self._context()
        node = ctx.tree.recorded(work.place)
        ctx.tree.listen(self._forward, under=node)
        if (stop := self.stops.pop(work.session_id, None)) is not None:
            ctx.tree.stop(stop[0], under=node, cancel=stop[1])
        if self.link is None:  # (every work of a host has the one ledger actor of its run)
            self.link = _LedgerLink(work.ledger, self.name)
        link = self.link
        executor = InProcessExecutor(ctx, guard=lambda task: _RemoteBudget(link, work.guard))
        guards: tuple[ControlGuard, ...] = ()
        with self.early_lock:
            early, self.early = self.early, []
        for change in early:
            self._apply(*change)
        if work.controlled:
            controls = self._controls()
            if work.paused:
                controls.pause([work.plan.name])
            for text in work.inbox:
                controls.post(work.plan.name, text)
            guards = (ControlGuard(controls, work.plan.name, work.session_id, ctx.tree.emit),)
        workspace = Workspace([Path(p) for p in work.workspace]) if work.workspace is not None else None
        if work.tree is not None:
            workspace = Workspace([await anyio.to_thread.run_sync(self._clones().open, work.tree)])
        task = MemberTask(
            plan=work.plan,
            node=node,
            prompt=work.prompt,
            role=work.role,
            ledger=None,
            tools=[_Relayed(spec, work.relay, work.session_id) for spec in work.tools],
            resume=work.resume,
            workspace=workspace,
            guards=guards,
        )
        run = executor.start(task)
        try:
            outcome = await run.outcome()
        finally:
            ctx.tree.close(node)
        if work.tree is not None:  # what it did goes back to the driver (any status: its edits are work too)
            status = outcome.result.status
            with anyio.CancelScope(shield=True):
                bundle = await anyio.to_thread.run_sync(self._clones().finish, work.tree, work.session_id, status)
            outcome = replace(outcome, bundle=bundle)
        return outcome, self.queued

    def _clones(self) -> NodeClones:
        """This node's clones and member worktrees: ``$ZERO_HOME/ray/<node>`` (nodes on one machine apart)."""
        if self.clones is None:
            node = ray.get_runtime_context().get_node_id()
            self.clones = NodeClones(default_data_dir() / "ray" / node[:12])
        return self.clones

    async def events(self) -> AsyncIterator[bytes]:
        """Every member's events (and their Task children's), as long as the host lives: each batch what the
        members emitted within ``SEND_EVERY``, with the count of events queued so far after it."""
        self.more = anyio.Event()
        sent = 0
        while True:
            if not self.outbox:
                await self.more.wait()
            await anyio.sleep(SEND_EVERY)  # (what more comes meanwhile goes in the same batch: one item)
            batch, self.outbox, self.more = self.outbox, [], anyio.Event()
            sent += len(batch)
            yield _packed((sent, batch))

    async def warm(self) -> None:
        """Make the context its members share now (the imports and providers: a second or two), so the first
        member need not wait for it."""
        await self._context()

    def _controls(self) -> Controls:
        if self.controls is None:
            self.controls = Controls()
        return self.controls

    @ray.method(concurrency_group="control")
    async def control(self, action: str, names: list[str], text: str) -> None:
        """``zero swarm pause``, ``continue`` or ``send`` for members of this host (``Controls.mirror``)."""
        with self.early_lock:
            if self.loop is None:  # (no member has begun here: the first to begin applies it)
                self.early.append((action, names, text))
                return
            applied = asyncio.run_coroutine_threadsafe(self._applied(action, names, text), self.loop)
        await asyncio.wrap_future(applied)  # answered once its members' guards see it

    async def _applied(self, action: str, names: list[str], text: str) -> None:
        self._apply(action, names, text)

    def _apply(self, action: str, names: list[str], text: str) -> None:
        controls = self._controls()
        if action == "pause":
            controls.pause(names)
        elif action == "resume":
            controls.resume(names)
        else:
            controls.post(names[0], text)

    @ray.method(concurrency_group="control")
    async def stop(self, session_id: str, status: RunStatus, cancel: bool) -> None:
        """Stop a member (and what it started): it ends ``status``, now or (``cancel`` False) at its next call."""
        ctx, loop = self.ctx, self.loop
        if ctx is None or loop is None or session_id not in ctx.tree.nodes:
            self.stops[session_id] = (status, cancel)
            return
        node = ctx.tree.nodes[session_id]
        loop.call_soon_threadsafe(lambda: ctx.tree.stop(status, under=node, cancel=cancel))

    async def close(self) -> None:
        await self.stack.aclose()


_HOST = _actor(_Host, max_concurrency=100_000, concurrency_groups={"control": 16})


# -- the executor --------------------------------------------------------------------------------------------


class RayExecutor:
    """Members on the cluster ``connect`` joined, their sessions through ``store`` (the run's session writer);
    ``node_retries``: how often a member whose node died is resumed on another."""

    remote = True

    def __init__(self, ctx: AgentContext, opener: ContextOpener, store: RayStore, *, node_retries: int = 1):
        self.ctx = ctx
        self.opener = opener
        self.store = store
        self.node_retries = node_retries
        self.hosts: dict[tuple[Any, ...], tuple[str, Any]] = {}  # each placement's host: its name, its actor
        self.made = itertools.count(1)
        self.ledger: Any = None
        self.granted: dict[str, anyio.Event] = {}  # the ledger keys the actor has, once it has them
        self.opened: anyio.Event | None = None  # set once the actor has the team's limits
        self.delivered: dict[str, _Delivered] = {}  # each host's events the driver's tree has, by the host's name
        self._pumps: anyio.abc.TaskGroup | None = None
        self.serving = False  # the team tools members on nodes call are served (through the ledger actor)
        self.tools: dict[tuple[str, str], Tool] = {}  # each member's team tools, by its session id and their name
        self.controls: Controls | None = None  # the runner's, mirrored to the hosts
        self.placed: dict[str, Any] = {}  # the host each running member is on, by its name
        self.held: dict[str, tuple[bool, list[str]]] = {}  # members not on a host yet: paused, messages

    async def __aenter__(self) -> RayExecutor:
        self._pumps = await anyio.create_task_group().__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.close()
        finally:
            assert self._pumps is not None
            self._pumps.cancel_scope.cancel()
            await self._pumps.__aexit__(None, None, None)

    def start(self, task: MemberTask) -> _RayRun:
        return _RayRun(self, task)

    def warm(self, plan: TeamPlan) -> None:
        """Start the ledger actor and the member hosts ``plan``'s members are placed on now, each host making its
        context, while the run sets itself up (their processes take a second or two to start)."""
        self._ledger_actor()
        for member in plan.members.values():
            self.host(member)
        for _, host in self.hosts.values():  # (once each: a call of an actor is not free)
            host.warm.remote()

    def _relay(self) -> Any:
        """The actor that relays the team tools' calls (the ledger's), served from the first call of this."""
        assert self.ledger is not None and self._pumps is not None, "use the executor as `async with RayExecutor`"
        if not self.serving:
            self.serving = True
            self._pumps.start_soon(self._serve_tools, self.ledger)
        return self.ledger

    async def _serve_tools(self, relay: Any) -> None:
        """Run the team tools members on nodes call, each as it is asked, and answer it."""
        async with anyio.create_task_group() as tg:
            try:
                async for ref in relay.asked.options(num_returns="streaming").remote():
                    for number, session_id, name, arguments in pickle.loads(await ref):
                        tg.start_soon(self._run_tool, relay, number, session_id, name, arguments)
            except ray.exceptions.RayActorError:
                tg.cancel_scope.cancel()  # the run is over (its actor ended)

    async def _run_tool(self, relay: Any, number: int, session_id: str, name: str, arguments: dict[str, Any]) -> None:
        tool = self.tools.get((session_id, name))
        try:
            if tool is None:
                raise ToolError(f"{name} is not a tool of this member")
            output = await tool.call(arguments, ToolContext(workspace=self.ctx.workspace, session_id=session_id))
            relay.answer.remote(number, True, output)
        except ToolError as e:
            relay.answer.remote(number, False, str(e))

    def _control(self, guards: Sequence[Any]) -> bool:
        """Whether ``zero swarm pause`` and ``send`` reach the member of ``guards``: the runner's ``Controls`` is
        mirrored to the hosts (the first member's tells which it is)."""
        control = next((g for g in guards if isinstance(g, ControlGuard)), None)
        if control is None:
            return False
        if self.controls is None:
            self.controls = control.controls
            self.controls.mirror = self._mirror
        return True

    def _mirror(self, action: str, names: list[str], text: str) -> list[Awaitable[object]]:
        sent: list[Awaitable[object]] = []
        for name in names:
            if (host := self.placed.get(name)) is not None:
                sent.append(host.control.remote(action, [name], text))  # (its answer: the host has applied it)
                continue
            paused, inbox = self.held.get(name, (False, []))
            if action == "post":
                inbox.append(text)
            self.held[name] = (action == "pause" or (paused and action != "resume"), inbox)
        return sent

    async def _pump(self, name: str, host: Any) -> None:
        """A host's events into the driver's tree (a Task child's node added as it starts), until the host ends."""
        tree, delivered = self.ctx.tree, self.delivered[name]
        try:
            async for ref in host.events.options(num_returns="streaming").remote():
                count, batch = pickle.loads(await ref)
                for event in batch:
                    parent = tree.nodes.get(event.session_id) if isinstance(event, ChildStarted) else None
                    if isinstance(event, ChildStarted) and parent and event.child_session_id not in tree.nodes:
                        tree.add(event.child_session_id, kind="child", under=parent, title=event.description)
                    tree.emit(event)
                delivered.advance(count)
        except ray.exceptions.RayActorError:
            pass  # its node died: its runs say so
        finally:
            delivered.end()

    async def _ledger(self, ledger: Ledger | None) -> tuple[Any, str]:
        """The ledger actor (made at the first member, with what the team has spent: a resumed run's too),
        and the key of ``ledger`` in it."""
        assert ledger is not None  # the scheduler gives every member its ledger
        team = ledger
        while team.parent is not None:
            team = team.parent
        actor = self._ledger_actor()
        if self.opened is None:
            self.opened = opened = anyio.Event()
            assert isinstance(team.limits, TeamBudget)
            await _await(actor.open.remote(team.limits, team.used, self.ctx.prices))
            opened.set()
        await self.opened.wait()
        key = "team" if ledger is team else ledger.name
        if key not in self.granted:  # (before any host spends from it: hosts' calls come in their own order)
            self.granted[key] = granted = anyio.Event()
            limits = ledger.limits if ledger is not team else None
            assert limits is None or isinstance(limits, MemberBudget)
            await _await(self.ledger.grant.remote(key, limits, ledger.name))
            granted.set()
        await self.granted[key].wait()
        return self.ledger, key

    def _ledger_actor(self) -> Any:
        if self.ledger is None:
            self.ledger = self.store.writer  # (the session writer's process holds the ledger)
        return self.ledger

    def host(self, plan: MemberPlan) -> tuple[str, Any]:
        """The member host of ``plan``'s placement (made at its first member: Ray puts it on a node that has
        what the placement names)."""
        key = (tuple(sorted(plan.resources.items())), tuple(sorted(plan.node_labels.items())))
        if key not in self.hosts:
            options: dict[str, Any] = {"resources": dict(plan.resources)}
            if plan.node_labels:
                options["label_selector"] = dict(plan.node_labels)
            name = f"host-{next(self.made)}"
            host = _HOST.options(**options).remote(name, self.opener, self.store)
            self.hosts[key] = (name, host)
            self.delivered[name] = _Delivered()
            assert self._pumps is not None, "use the executor as `async with RayExecutor(...)`"
            self._pumps.start_soon(self._pump, name, host)
        return self.hosts[key]

    async def forget(self, name: str) -> None:
        """A host whose node died: the ledger releases what its calls held, and its placement gets a new one."""
        if any(n == name for n, _ in self.hosts.values()):
            self.hosts = {k: (n, h) for k, (n, h) in self.hosts.items() if n != name}
            await _await(self.ledger.abandon.remote(name))

    async def ledger_stats(self) -> dict[str, int]:
        """The ledger's round trips so far (calls of its actor) and the requests they carried (the bench's
        figures)."""
        if self.ledger is None:
            return {"roundTrips": 0, "requests": 0}
        stats: dict[str, int] = await _await(self.ledger.stats.remote())
        return stats

    async def close(self) -> None:
        """Close every host (its providers), then end the actors (not the session writer: the store's owner
        flushes it)."""
        with anyio.CancelScope(shield=True):
            for _, host in self.hosts.values():
                try:
                    await _await(host.close.remote())
                except ray.exceptions.RayActorError:
                    pass  # its node is gone
                ray.kill(host)
        self.hosts, self.ledger = {}, None  # (the ledger's process is the session writer's: the store's owner's)


class _Delivered:
    """How many of a host's events the driver's tree has had (``reach`` waits for a count; a host gone ends every
    wait)."""

    def __init__(self) -> None:
        self.count = 0
        self.ended = False
        self._moved = anyio.Event()

    def advance(self, count: int) -> None:
        self.count = count
        self._moved.set()
        self._moved = anyio.Event()

    def end(self) -> None:
        self.ended = True
        self._moved.set()

    async def reach(self, count: int) -> None:
        while self.count < count and not self.ended:
            await self._moved.wait()


def _conversed(store: SessionStore, session_id: str) -> bool:
    """Whether the session's log holds a message (a resumed run goes on with its conversation)."""
    return any(e.event.kind == "message" for e in store.events(session_id))


class _RayRun:
    def __init__(self, executor: RayExecutor, task: MemberTask):
        self.executor = executor
        self.task = task
        self.session_id = task.node.session_id
        self.result: MemberOutcome | None = None

    async def outcome(self) -> MemberOutcome:
        executor, task = self.executor, self.task
        ledger, key = await executor._ledger(task.ledger)
        node = task.node
        place = SessionMetadata(
            session_id=node.session_id,
            session_kind=node.kind,
            parent_session_id=node.parent_session_id,
            root_session_id=node.root_session_id,
            depth=node.depth,
            title=node.title,
            team_name=node.team_name,
            member_name=node.member_name,
        )
        work = _Work(
            plan=task.plan,
            session_id=self.session_id,
            place=place,
            prompt=task.prompt,
            role=task.role,
            resume=task.resume,
            workspace=tuple(str(r) for r in task.workspace.roots) if task.workspace is not None else None,
            tree=task.tree,
            ledger=ledger,
            guard=key,
            controlled=executor._control(task.guards),
        )
        if task.tools:
            for tool in task.tools:
                executor.tools[(self.session_id, tool.name)] = tool
            specs = tuple(_ToolSpec(name=t.name, description=t.description, parameters=t.parameters,
                                    side_effect=t.side_effect) for t in task.tools)  # fmt: skip
            work = replace(work, tools=specs, relay=executor._relay())
        tree, node = task.node.tree, task.node
        member = task.plan.name
        for attempt in itertools.count():
            name, host = executor.host(task.plan)
            paused, inbox = executor.held.pop(member, (False, []))
            work = replace(work, paused=paused, inbox=tuple(inbox))
            executor.placed[member] = host
            try:
                self.result = await self._attempt(host, work, executor.delivered[name])
            finally:
                executor.placed.pop(member, None)
            if self.result is not None:
                break
            await executor.forget(name)  # its node died
            status: RunStatus = "interrupted"
            last = attempt >= executor.node_retries or node.status is not None
            event = StatusChanged(session_id=self.session_id, status=status, reason=NODE_DIED)
            executor.store.submit(self.session_id, [event], final=last)
            tree.emit(event)
            if last:
                result = RunResult(status=status, output="", usage=Usage(), turns=0, duration_ms=0, error=NODE_DIED)
                self.result = MemberOutcome(result=result, usage=Usage())
                break
            # (a member whose node died before its first message was written is given its task again)
            conversed = await anyio.to_thread.run_sync(_conversed, executor.store, self.session_id)
            work = replace(work, resume=True, prompt=NODE_RESUMED if conversed else task.prompt)
        await self._adopt(ledger, key)
        assert self.result is not None
        return self.result

    async def _attempt(self, host: Any, work: _Work, delivered: _Delivered) -> MemberOutcome | None:
        """The member's run on ``host``, once the driver's tree has all its events (None: the host died, with its
        node)."""
        node = self.task.node
        ref = host.run.remote(work)
        ended: tuple[MemberOutcome, int] | None = None
        try:
            with node.scope:  # a stop of the member's subtree: the host stops it, and it ends as it says
                ended = await _await(ref)
            if ended is None:
                host.stop.remote(work.session_id, node.tree.why(node), True)
                with anyio.CancelScope(shield=True):
                    ended = await _await(ref)
        except ray.exceptions.RayActorError:
            return None
        finally:
            node.next_run()
        assert ended is not None  # (the shielded wait has the host's answer)
        outcome, count = ended
        await delivered.reach(count)
        return outcome if delivered.count >= count else None

    async def _adopt(self, ledger: Any, key: str) -> None:
        """The driver's ledgers take what the ledger actor holds (its trip stops the members not started)."""
        (team_used, team_trip), (own_used, own_trip) = await _await(ledger.state.remote(key))
        mine = self.task.ledger
        assert mine is not None
        team = mine
        while team.parent is not None:
            team = team.parent
        if mine is not team:
            mine.adopt(own_used, own_trip)
        team.adopt(team_used, team_trip)

    def current(self) -> MemberOutcome | None:
        return self.result
