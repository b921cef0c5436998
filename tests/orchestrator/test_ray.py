"""``zero swarm run --executor ray`` on a real local Ray cluster: a head and two worker nodes on 127.0.0.1,
started once for the module and shut down after it (no process left)."""

from __future__ import annotations

import itertools
import json
import os
import pickle
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.cli import ZERO, lines, scripted, write_script, zero
from support.git import git, origin_and_clone
from support.llm_server import LLMServer, Reply, openai_reply
from support.running import SCRIPT as CONTROL_SCRIPT
from support.running import TEAM as CONTROL_TEAM
from support.running import Running

from zero.agent import StatusChanged
from zero.sessions import FileSessionStore

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from zero.orchestrator.ray_executor import NODE_DIED  # noqa: E402

# (one worker runs this whole file, `--dist loadfile`: one cluster, not one per worker)
# The cluster's start (a head and two nodes: six processes) counts in its first test's time: with a second
# copy of the suite running beside this one on two cores, it took more than the default 60 s.
pytestmark = pytest.mark.timeout(180)

LOCAL = "127.0.0.1"
HOMES: dict[str, Path] = {}  # each worker node's $ZERO_HOME (as on machines of their own)

TEAM = """
name = "spread"
goal = "Answer the question."
[defaults]
model = "gpt-4.1-mini"
[budget]
tokens = 1_000_000
[[members]]
name = "a"
specialist = "worker"
prompt = "Start here."
resources = { node_a = 1 }
[[members]]
name = "b"
specialist = "worker"
depends_on = ["a"]
prompt = "Left side of {{ a.output }}"
resources = { node_b = 1 }
[[members]]
name = "c"
specialist = "worker"
depends_on = ["a"]
prompt = "Right side of {{ a.output }}"
resources = { node_a = 1 }
[[members]]
name = "d"
specialist = "worker"
depends_on = ["b", "c"]
prompt = "Join {{ b.output }} with {{ c.output }}"
resources = { node_b = 1 }
[[members]]
name = "e"
specialist = "worker"
prompt = "On its own."
[[members]]
name = "f"
specialist = "worker"
depends_on = ["e", "d"]
prompt = "Last: {{ e.output }} and {{ d.output }}"
resources = { node_a = 1 }
"""
NAMES = "abcdef"


def script_of(names: str) -> str:
    """Each member says which node it is on (a shell command), then answers with its name (its turns matched by
    its system prompt, so every node's copy of the script answers it the same)."""
    turns = []
    for name in names:
        turns.append(
            f"[[turns]]\nmatch = {{ system = 'You are \"{name}\"', turn = 1 }}\n"
            'tool_calls = [{ name = "bash", arguments = { command = "echo on-$ZERO_NODE" } }]\n'
            "usage = { prompt_tokens = 900, completion_tokens = 40 }\n"
        )
        turns.append(
            f'[[turns]]\nmatch = {{ system = \'You are "{name}"\', turn = 2 }}\ntext = "{name.upper()}-OUT"\n'
            "usage = { prompt_tokens = 1000, completion_tokens = 10 }\n"
        )
    return "\n".join(turns)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head (driver's node) and nodes ``node_a`` and ``node_b``, on this machine's loopback only."""
    temp = tempfile.mkdtemp(prefix="zray")  # Ray's files, this module's own (short: its socket paths must fit)
    saved = {name: os.environ.get(name) for name in ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED")}
    os.environ.update(RAY_TMPDIR=temp, RAY_USAGE_STATS_ENABLED="0")
    common: dict[str, Any] = {"node_ip_address": LOCAL, "num_cpus": 1}
    # (no coverage in Ray's processes: an actor ends killed, and its data with it; it only slowed them down)
    quiet = {"COVERAGE_PROCESS_START": "", "COVERAGE_PROCESS_CONFIG": ""}
    made = Cluster(
        initialize_head=True,
        head_node_args={
            **common,
            "include_dashboard": False,
            "resources": {"head": 1},
            "env_vars": {"ZERO_NODE": "head", **quiet},
        },
    )
    try:
        for name in "ab":
            HOMES[name] = Path(temp, f"home-{name}")
            env = {"ZERO_NODE": name, "ZERO_HOME": str(HOMES[name]), **quiet}
            made.add_node(**common, resources={f"node_{name}": 1}, env_vars=env)
        made.wait_for_nodes()
        yield made
    finally:
        made.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(temp, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def sessions() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def run(team: Path, *flags: str) -> dict[str, Any]:
    done = zero("swarm", "run", str(team), *flags)
    assert done.returncode in (0, 4), done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run_on(cluster: Cluster, team: Path, server: LLMServer, workspace: Path, *flags: str) -> dict[str, Any]:
    """``zero swarm run`` of ``team`` on ``cluster``, its model ``server``: the result it prints."""
    common = ("--base-url", server.url, "--cwd", str(workspace), "--output-format", "json")
    return run(team, *common, "--executor", "ray", "--ray-address", cluster.address, *flags)


@pytest.fixture
def node_names(tmp_path: Path) -> None:
    """A shell command sees ZERO_NODE, the name of the node it runs on (the user's config lets it through)."""
    config = tmp_path / "config" / "zero"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('[shell]\nenv_passthrough = ["ZERO_NODE"]\n')


def said(store: FileSessionStore, session_id: str) -> list[str]:
    """What the member's shell commands printed."""
    return [e.event.output.splitlines()[0] for e in store.events(session_id) if e.event.kind == "tool_result"]


def test_a_team_spread_over_two_nodes_ends_as_it_does_in_process(
    cluster: Cluster, workspace: Path, tmp_path: Path, node_names: None
) -> None:
    team = write_script(tmp_path / "team.toml", TEAM)
    script = write_script(tmp_path / "script.toml", script_of(NAMES))
    flags = (*scripted(script, workspace), "--output-format", "json")
    here = run(team, *flags)
    there = run(team, *flags, "--executor", "ray", "--ray-address", cluster.address)
    assert there["status"] == here["status"] == "completed"
    assert [(m["name"], m["status"], m["output"]) for m in there["members"]] == [
        (m["name"], m["status"], m["output"]) for m in here["members"]
    ]
    assert [m["output"] for m in there["members"]] == [f"{n.upper()}-OUT" for n in NAMES]
    assert there["budget"]["used"] == {**here["budget"]["used"], "wallSeconds": there["budget"]["used"]["wallSeconds"]}
    assert there["budget"]["used"]["tokens"] == 6 * (940 + 1010)
    store = sessions()
    for member in there["members"]:
        kinds = [e.event.kind for e in store.events(member["sessionId"])]
        assert kinds[0] == "run_start" and kinds[-1] == "run_end", kinds
        assert [e.sequence for e in store.events(member["sessionId"])] == list(range(1, len(kinds) + 1))
        assert store.metadata(member["sessionId"]).status == "completed"
    nodes = {m["name"]: said(store, m["sessionId"]) for m in there["members"]}
    assert {**nodes, "e": []} == {"a": ["on-a"], "b": ["on-b"], "c": ["on-a"], "d": ["on-b"], "e": [], "f": ["on-a"]}
    assert nodes["e"] in (["on-head"], ["on-a"], ["on-b"])  # (placed by Ray where it likes)
    assert {said(store, m["sessionId"])[0] for m in here["members"]} == {"on-"}
    shown = zero("sessions", "show", there["members"][3]["sessionId"])
    assert "Join B-OUT with C-OUT" in shown.stdout


def test_an_unplaceable_member_is_refused_before_any_model_call(
    cluster: Cluster, workspace: Path, tmp_path: Path
) -> None:
    team = write_script(
        tmp_path / "team.toml", TEAM.replace("resources = { node_b = 1 }", "resources = { node_zz = 2 }", 1)
    )
    script = write_script(tmp_path / "script.toml", script_of(NAMES))
    flags = ("--executor", "ray", "--ray-address", cluster.address)
    checked = zero("swarm", "validate", str(team), *flags)
    refused = zero("swarm", "run", str(team), *scripted(script, workspace), *flags)
    why = (
        f"zero: error: {team}: member 'b': needs resource node_zz = 2, which no node of the Ray cluster has "
        "(none has it): start a node with `ray start --resources '{\"node_zz\": 2}'`, or change its resources\n"
    )
    assert (checked.returncode, checked.stderr) == (2, why)
    assert (refused.returncode, refused.stderr, refused.stdout) == (2, why, "")
    assert sessions().list() == []  # nothing ran


def test_no_cluster_is_a_clear_error(workspace: Path, tmp_path: Path) -> None:
    team = write_script(tmp_path / "team.toml", TEAM)
    done = zero("swarm", "validate", str(team), "--executor", "ray", "--ray-address", f"{LOCAL}:1")
    assert done.returncode == 2
    assert done.stderr.startswith(f"zero: error: no Ray cluster answers at {LOCAL}:1 (")
    assert done.stderr.endswith(
        "start one with `ray start --head` on this machine (and `ray start --address HEAD_IP:6379` on each other "
        "one), or pass --ray-address HOST:PORT\n"
    )
    assert lines("") == []


def test_a_team_run_in_process_never_imports_ray(workspace: Path, tmp_path: Path) -> None:
    team = write_script(tmp_path / "team.toml", TEAM)
    script = write_script(tmp_path / "script.toml", script_of(NAMES))
    code = (
        "import sys\nfrom zero.cli import main\n"
        f"assert main(['swarm', 'validate', {str(team)!r}]) == 0\n"
        f"assert main(['swarm', 'run', {str(team)!r}, *{scripted(script, workspace)!r}]) == 0\n"
        "print('ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"


POOL = """
name = "pool"
[defaults]
model = "gpt-4.1-mini"
resources = { pool = 1 }
[[members]]
name = "x"
specialist = "explorer"
prompt = "First."
[[members]]
name = "y"
specialist = "explorer"
prompt = "Second."
[[members]]
name = "z"
specialist = "explorer"
depends_on = ["x"]
prompt = "After {{ x.output }}"
resources = { node_a = 1 }
"""


def who(request: dict[str, Any]) -> str:
    match = re.search(r'You are "([a-z0-9-]+)", a member', request["messages"][0]["content"])
    return match.group(1) if match else "?"


def test_a_dead_nodes_members_resume_on_another_and_the_team_completes(
    cluster: Cluster, workspace: Path, tmp_path: Path
) -> None:
    doomed = cluster.add_node(node_ip_address=LOCAL, num_cpus=1, resources={"pool": 1})
    cluster.wait_for_nodes()
    team = write_script(tmp_path / "team.toml", POOL)
    reached: dict[str, threading.Event] = {"x": threading.Event(), "y": threading.Event()}
    killed = threading.Event()

    def respond(request: dict[str, Any]) -> Reply:
        name, messages = who(request), request["messages"]
        if not any(m["role"] == "assistant" for m in messages):
            return openai_reply("", [(f"call_{name}", "list_directory", {})], usage=(900, 40))
        if name in reached and "resumed on another" not in str(messages[-1]["content"]):
            reached[name].set()
            reply = openai_reply(f"{name.upper()}-LOST", usage=(1000, 10))
            reply.hold = killed  # under way when its node dies (answered once the run is over: to nobody)
            return reply
        return openai_reply(f"{name.upper()}-OUT", usage=(1000, 10))

    with LLMServer(respond) as server:
        # The driver is a process of its own: a node is added and killed from this one's main thread.
        flags = ("--base-url", server.url, "--cwd", str(workspace), "--output-format", "json")
        driver = subprocess.Popen(
            [ZERO, "swarm", "run", str(team), *flags, "--executor", "ray", "--ray-address", cluster.address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert all(event.wait(60) for event in reached.values())  # both on the doomed node, mid-call
            cluster.add_node(node_ip_address=LOCAL, num_cpus=1, resources={"pool": 1})  # where they go on
            cluster.remove_node(doomed, allow_graceful=False)  # its raylet and its workers killed
            out, err = driver.communicate(timeout=120)
        finally:
            killed.set()
            driver.kill()
        assert driver.returncode == 0, err
        result = json.loads(out)
        requests = list(server.requests)
    assert result["status"] == "completed"
    assert [(m["name"], m["status"], m["output"]) for m in result["members"]] == [
        ("x", "completed", "X-OUT"),
        ("y", "completed", "Y-OUT"),
        ("z", "completed", "Z-OUT"),
    ]
    store = sessions()
    for member in result["members"]:
        events = [e.event for e in store.events(member["sessionId"])]
        assert [e.sequence for e in store.events(member["sessionId"])] == list(range(1, len(events) + 1))
        asked = [r for r in requests if who(r) == member["name"]]
        answered = [e for e in events if e.kind == "usage"]  # one a model call the session recorded
        lost = 1 if member["name"] in reached else 0  # the call its node died under
        assert len(answered) == len(asked) - lost
        stops = [e.reason for e in events if isinstance(e, StatusChanged) and e.status == "interrupted"]
        assert stops == ([NODE_DIED] if lost else [])
        calls = [e.call.id for e in events if e.kind == "tool_call"]
        assert calls == [f"call_{member['name']}"]  # its tool ran once, not again on the other node
    assert result["budget"]["used"]["tokens"] == result["usage"]["totalTokens"] == 3 * 940 + 3 * 1010


def on_two_nodes(name: str, tokens: int, first: tuple[str, str], second: tuple[str, str], defaults: str = "") -> str:
    """A team of two explorers (their names and prompts), the first on node_a and the second on node_b, with a
    token budget."""
    members = "".join(
        f'[[members]]\nname = "{member}"\nspecialist = "explorer"\nprompt = "{prompt}"\nresources = {{ {node} = 1 }}\n'
        for (member, prompt), node in ((first, "node_a"), (second, "node_b"))
    )
    return f'name = "{name}"\n[defaults]\nmodel = "gpt-4.1-mini"\n{defaults}[budget]\ntokens = {tokens}\n{members}'


SPENDERS = on_two_nodes("spenders", 20_000, ("spender", "Spend."), ("looper", "Loop."), defaults="max_turns = 1000\n")


def test_a_budget_trip_on_one_node_stops_the_other_nodes_members_within_one_call(
    cluster: Cluster, workspace: Path, tmp_path: Path
) -> None:
    team = write_script(tmp_path / "team.toml", SPENDERS)
    looping = threading.Event()  # the looper is well under way when the spender's big call answers
    arrived: list[tuple[str, datetime]] = []

    def respond(request: dict[str, Any]) -> Reply:
        name = who(request)
        arrived.append((name, datetime.now(UTC)))
        if name == "looper":
            if sum(n == "looper" for n, _ in arrived) == 3:
                looping.set()
            return openai_reply("", [(f"call_{len(arrived)}", "list_directory", {})], usage=(100, 10))
        reply = openai_reply("", [(f"call_{len(arrived)}", "list_directory", {})], usage=(19_000, 10))
        reply.hold = looping
        return reply

    with LLMServer(respond) as server:
        result = run_on(cluster, team, server, workspace, "--max-output-tokens", "1024", "--accept-estimate")
    assert result["status"] == "budget_exhausted"
    assert [(m["name"], m["status"]) for m in result["members"]] == [
        ("spender", "budget_exhausted"),
        ("looper", "budget_exhausted"),
    ]
    assert result["budget"]["tripped"]["limit"] == "tokens"
    # The spender's one call counted 19,000 prompt tokens where its estimate said far less: the overshoot
    # docs/TEAMS.md allows (what calls in flight used beyond what they reserved). How many looper calls were
    # answered before that call was booked depends on the machine's load; what is exact is that every token is
    # on the ledger once, and that no member began a call once the trip was known (below).
    looped = sum(n == "looper" for n, _ in arrived)
    used = result["budget"]["used"]["tokens"]
    assert used == result["usage"]["totalTokens"] and 19_010 + 110 * (looped - 1) <= used <= 19_010 + 110 * looped
    store = sessions()
    ends = [
        datetime.fromisoformat(e.created_at)
        for m in result["members"]
        for e in store.events(m["sessionId"])
        if e.event.kind == "run_end"
    ]
    first_stop = min(ends)  # the first member the trip ended
    for name in ("spender", "looper"):
        after = [at for who_, at in arrived if who_ == name and at > first_stop]
        assert len(after) <= 1, (name, len(after))  # at most the call it had under way
    assert sum(n == "looper" for n, _ in arrived) >= 3


TAKERS = on_two_nodes("takers", 7_000, ("left", "Look."), ("right", "Look."))


def test_a_call_waits_on_the_ledger_for_another_nodes_call_to_settle(
    cluster: Cluster, workspace: Path, tmp_path: Path
) -> None:
    """The budget has room for one call's reservation at a time: each member's hold waits in the ledger (parked,
    while the host's other requests go on) until the other's call is booked, then its call runs."""
    team = write_script(tmp_path / "team.toml", TAKERS)
    calls: list[tuple[float, str]] = []  # when each call came, from whom

    def respond(request: dict[str, Any]) -> Reply:
        calls.append((time.monotonic(), who(request)))
        turn = sum(m["role"] == "assistant" for m in request["messages"])
        if turn == 0:
            reply = openai_reply("", [(f"call_{len(calls)}", "list_directory", {})], usage=(100, 10))
        else:
            reply = openai_reply("Done.", usage=(120, 5))
        reply.delay = 0.3  # (long enough for the other's call to begin, were it let)
        return reply

    with LLMServer(respond) as server:
        result = run_on(cluster, team, server, workspace, "--max-output-tokens", "3000", "--accept-estimate")
    assert [(m["name"], m["status"]) for m in result["members"]] == [("left", "completed"), ("right", "completed")]
    assert sorted(name for _, name in calls) == ["left", "left", "right", "right"]
    starts = sorted(at for at, _ in calls)
    assert all(b - a >= 0.3 for a, b in itertools.pairwise(starts))  # one call at a time: each waited for the last
    assert result["budget"]["used"]["tokens"] == result["usage"]["totalTokens"] == 2 * (110 + 125)


def test_the_session_writer_keeps_each_processs_requests_in_their_order(cluster: Cluster, tmp_path: Path) -> None:
    """A batch too big to go inline (Ray puts it in its object store and the writer fetches it) and a small one
    after it: the log holds them in the order they were sent (Ray starts an async actor's tasks as their
    arguments arrive, so the small one came first)."""
    from zero.agent import MessageAdded, StatusChanged
    from zero.orchestrator.ray_executor import connect, start_writer
    from zero.sessions import SessionMetadata
    from zero.tools import Redactor

    connect(cluster.address)
    try:
        store = start_writer(tmp_path / "sessions", Redactor())
        store.create(SessionMetadata(session_id="s1", title="order"))
        sent: list[str] = []
        for i in range(10):
            big = MessageAdded(session_id="s1", role="user", content=f"big {i} " + "x" * 300_000)
            small = StatusChanged(session_id="s1", status="running", reason=f"small {i}")
            store.submit("s1", [big])  # (no event loop here: each goes at once, a request of its own)
            store.submit("s1", [small])
            sent += [f"big {i}", f"small {i}"]
        store.flush("s1")
        logged = [
            e.event.content.rsplit(" ", 1)[0] if isinstance(e.event, MessageAdded) else getattr(e.event, "reason", "")
            for e in store.events("s1")
        ]
        assert logged == sent
        with pytest.raises((pickle.PicklingError, AttributeError)):
            store.append("s1", [lambda: None])  # type: ignore[list-item]
        assert store.exists("s1")  # the next request runs: the one that could not go took no number in the order
    finally:
        ray.shutdown()


def test_a_hold_whose_member_stopped_before_its_answer_came_is_given_back(cluster: Cluster, tmp_path: Path) -> None:
    """A member stopped (cancelled) while its reservation is on its way to the ledger: what the ledger held for
    it is given back, so a call that needs most of the budget gets its permit at once instead of waiting for a
    call that will never be booked."""
    import anyio

    from zero.agent import PriceTable
    from zero.orchestrator.ledger import _Account
    from zero.orchestrator.ray_executor import _LedgerLink, connect, start_writer
    from zero.orchestrator.team import TeamBudget
    from zero.tools import Redactor

    connect(cluster.address)
    try:
        ledger = start_writer(tmp_path / "sessions", Redactor()).writer
        ray.get(ledger.open.remote(TeamBudget(tokens=6_000), _Account(), PriceTable.builtin()))
        ray.get(ledger.grant.remote("team", None, "team"))

        async def holds() -> Any:
            link = _LedgerLink(ledger, "host-1")
            with anyio.move_on_after(0):  # (stopped once its request is queued: it still goes, in the next trip)
                await link.ask("hold", "team", "gpt-4.1-mini", 1_000, 3_000, "s1")
            # 4,000 tokens each: two do not fit in 6,000, so this one would wait for the first's booking
            with anyio.fail_after(20):
                return await link.ask("hold", "team", "gpt-4.1-mini", 1_000, 3_000, "s2")

        permit = anyio.run(holds)
        assert permit.token == 2  # its permit, at once (the ledger numbers its permits from 1)
    finally:
        ray.shutdown()


def test_a_members_events_stream_to_the_driver_as_they_happen(
    cluster: Cluster, workspace: Path, tmp_path: Path, node_names: None
) -> None:
    team = write_script(
        tmp_path / "team.toml", TEAM.split("[[members]]")[0] + "[[members]]" + TEAM.split("[[members]]")[1]
    )
    script = write_script(tmp_path / "script.toml", script_of("a"))
    flags = (*scripted(script, workspace), "--output-format", "stream-json")
    done = zero("swarm", "run", str(team), *flags, "--executor", "ray", "--ray-address", cluster.address)
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    [member] = [e["sessionId"] for e in events if e["type"] == "subagent_start"]
    seen = [e["type"] for e in events if e.get("sessionId") == member]
    assert seen.index("tool_call") < seen.index("tool_result") < seen.index("subagent_end")
    [result] = [e["output"] for e in events if e["type"] == "tool_result" and e.get("sessionId") == member]
    assert result.startswith("on-a")


def _actor_processes() -> list[int]:
    """The pids of this machine's Zero actors (member hosts, the session writer, the ledger)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if any(name in command for name in (b"ray::_Host", b"ray::_Writer")):
            found.append(int(entry))
    return found


def test_a_team_whose_driver_died_is_continued_by_swarm_resume_on_the_cluster(
    cluster: Cluster, workspace: Path, tmp_path: Path, node_names: None
) -> None:
    team = write_script(tmp_path / "team.toml", POOL.replace("pool = 1", "node_b = 1").replace("explorer", "worker"))
    under_way = threading.Event()  # y's second call has reached the server: the driver dies now
    dead = threading.Event()

    def respond(request: dict[str, Any]) -> Reply:
        name, messages = who(request), request["messages"]
        calls = sum(m["role"] == "assistant" for m in messages)
        if calls == 0:
            return openai_reply("", [(f"call_{name}", "list_directory", {})], usage=(900, 40))
        if name == "y" and not dead.is_set():
            under_way.set()
            reply = openai_reply("Y-LOST", usage=(1000, 10))
            reply.hold = dead  # its driver is killed under it (answered to nobody)
            return reply
        if name == "y" and calls == 1:  # resumed: where does it run now?
            return openai_reply("", [("call_where", "bash", {"command": "echo on-$ZERO_NODE"})], usage=(950, 20))
        return openai_reply(f"{name.upper()}-OUT", usage=(1000, 10))

    with LLMServer(respond) as server:
        flags = ("--base-url", server.url, "--cwd", str(workspace), "--output-format", "json")
        ray_flags = ("--executor", "ray", "--ray-address", cluster.address)
        driver = subprocess.Popen(
            [ZERO, "swarm", "run", str(team), *flags, *ray_flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            assert under_way.wait(60)
            driver.kill()  # kill -9: no clean-up of any kind
            driver.communicate(timeout=30)
        finally:
            dead.set()
            driver.kill()
        # Ray ends the actors a driver owned when it dies: wait for that (the old writer held the sessions).
        for pid in _actor_processes():
            with suppress(ProcessLookupError):
                exited = os.pidfd_open(pid)
                assert select.select([exited], [], [], 60)[0], f"actor {pid} outlived its driver"
                os.close(exited)
        before = len(server.requests)
        [row] = [r for r in sessions().rows() if r.get("sessionKind") == "team"]
        done = zero("swarm", "resume", str(row["sessionId"]), *flags, *ray_flags)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        after = list(server.requests)[before:]
    assert result["status"] == "completed"
    assert [(m["name"], m["status"], m["output"]) for m in result["members"]] == [
        ("x", "completed", "X-OUT"),
        ("y", "completed", "Y-OUT"),
        ("z", "completed", "Z-OUT"),
    ]
    assert sorted({who(r) for r in after}) <= ["y", "z"]  # x had completed: it is not run again
    store = sessions()
    [y] = [m for m in result["members"] if m["name"] == "y"]
    events = [e.event for e in store.events(y["sessionId"])]
    assert [e.sequence for e in store.events(y["sessionId"])] == list(range(1, len(events) + 1))
    assert [e.call.id for e in events if e.kind == "tool_call"] == ["call_y", "call_where"]  # not run again
    assert said(store, y["sessionId"])[-1] == "on-b"  # resumed on the cluster's node_b, not in the driver


TALKERS = """
name = "talkers"
[[members]]
name = "a"
specialist = "worker"
prompt = "Tell b."
resources = { node_a = 1 }
[[members]]
name = "b"
specialist = "worker"
depends_on = ["a"]
prompt = "Listen."
resources = { node_b = 1 }
"""
TALK = """
[[turns]]
match = { system = 'You are "a"', turn = 1 }
tool_calls = [{ name = "send_message", arguments = { to = "b", body = "the key is in the drawer" } }]
[[turns]]
match = { system = 'You are "a"', turn = 2 }
text = "told"
[[turns]]
match = { system = 'You are "b"', turn = 1 }
tool_calls = [{ name = "read_inbox", arguments = {} }, { name = "send_message", arguments = { to = "c", body = "?" } }]
[[turns]]
match = { system = 'You are "b"', turn = 2 }
text = "heard"
"""


def test_members_on_two_nodes_message_each_other_through_the_teams_mailbox(
    cluster: Cluster, workspace: Path, tmp_path: Path
) -> None:
    team = write_script(tmp_path / "team.toml", TALKERS)
    script = write_script(tmp_path / "script.toml", TALK)
    flags = (*scripted(script, workspace), "--output-format", "json")
    result = run(team, *flags, "--executor", "ray", "--ray-address", cluster.address)
    assert [(m["name"], m["status"]) for m in result["members"]] == [("a", "completed"), ("b", "completed")]
    store = sessions()
    [b] = [m for m in result["members"] if m["name"] == "b"]
    results = [e.event.output for e in store.events(b["sessionId"]) if e.event.kind == "tool_result"]
    assert sorted(results) == [  # (in the order they ended: together)
        "Error: there is no member named 'c'; send to one of: a, or 'all'",  # the mailbox's own refusal
        "[1] from a:\nthe key is in the drawer",  # sent on node_a, read on node_b
    ]
    team_log = [e.event for e in store.events(result["sessionId"]) if e.event.kind == "team_message"]
    assert [(m.id, m.sender, m.to, m.body) for m in team_log] == [(1, "a", "b", "the key is in the drawer")]


def test_swarm_send_and_pause_reach_a_member_on_a_node(cluster: Cluster, tmp_path: Path, workspace: Path) -> None:
    team = CONTROL_TEAM.replace('name = "slow"\n', 'name = "slow"\nresources = { node_a = 1 }\n').replace(
        'name = "other"\n', 'name = "other"\nresources = { node_b = 1 }\n'
    )
    running = Running(tmp_path, workspace, team, CONTROL_SCRIPT, "--executor", "ray", "--ray-address", cluster.address)
    try:
        running.tool_call("slow")
        running.tool_call("other")
        sent = zero("swarm", "send", running.team_id, "other", "use blue")
        assert (sent.returncode, sent.stdout) == (0, "message 1 for other: it reads it before its next model call\n")
        assert zero("swarm", "pause", running.team_id, "slow").returncode == 0
        running.go()
        slow, other = running.members["slow"], running.members["other"]
        running.until(lambda e: e["type"] == "pause" and e["sessionId"] == slow and e["paused"])
        running.ended("other")
        assert sum(e["type"] == "usage" and e["sessionId"] == slow for e in running.events) == 1  # held
        assert zero("swarm", "continue", running.team_id).stdout == "continuing slow\n"
        code, events = running.end()
    finally:
        running.close()
    assert code == 0
    assert {e["status"] for e in events if e["type"] == "subagent_end"} == {"completed"}
    texts = [e.event.content for e in sessions().events(other) if e.event.kind == "message"]
    assert texts[-2:] == [
        "A message from the user who runs this team, sent while you work (zero swarm send):\n\nuse blue",
        "blue it is",  # its script's answer to the message, on node_b
    ]


REPO_TEAM = """
name = "cloned"
[workspace]
repo = "{origin}"
[[members]]
name = "top"
specialist = "worker"
prompt = "Raise the last one."
resources = {{ node_a = 1 }}
[[members]]
name = "docs"
specialist = "worker"
prompt = "Write the docs."
resources = {{ node_b = 1 }}
[[members]]
name = "after"
specialist = "worker"
prompt = "Look at what landed."
depends_on = ["top", "docs"]
resources = {{ node_b = 1 }}
"""


def worker_turns(name: str, tool: str, **arguments: str) -> list[dict[str, Any]]:
    """A member's two calls: one tool call, then its report."""
    who = f'You are "{name}"'
    return [
        {"match": {"system": who, "turn": 1}, "tool_calls": [{"name": tool, "arguments": arguments}]},
        {"match": {"system": who, "turn": 2}, "text": f"{name} done"},
    ]


def test_members_on_other_machines_work_in_worktrees_their_nodes_clone_from_the_teams_repository(
    cluster: Cluster, tmp_path: Path, node_names: None
) -> None:
    """``[workspace] repo``: each node clones the repository and makes its members' worktrees there (no folder
    shared with the driver); each sees the caller's tree (its local commit and uncommitted edit, which the
    repository lacks), what it did comes back through git and lands here, and nothing is pushed."""
    app = "def first():\n    return 1\n\n\ndef last():\n    return 2\n"
    origin, work = origin_and_clone(tmp_path, {"app.py": app})
    (work / "local.txt").write_text("committed, not pushed\n")
    git(work, "add", "local.txt")
    git(work, "commit", "-q", "-m", "local")
    (work / "app.py").write_text((work / "app.py").read_text().replace("return 1", "return 50"))  # not committed
    refs = git(origin, "for-each-ref")
    team = write_script(tmp_path / "team.toml", REPO_TEAM.format(origin=origin))
    turns = (
        worker_turns("top", "edit_file", path="app.py", old_text="return 2", new_text="return 20")
        + worker_turns("docs", "write_file", path="docs.md", content="# Docs\n")
        + worker_turns("after", "bash", command="cat docs.md app.py local.txt; pwd")
    )
    script = write_script(tmp_path / "script.json", json.dumps({"turns": turns}))
    flags = ("--output-format", "json", "--executor", "ray", "--ray-address", cluster.address)
    result = run(team, *scripted(script, work), *flags)
    assert result["status"] == "completed", result
    land = result["land"]
    assert {name: m["state"] for name, m in land["members"].items()} == {
        "top": "landed",
        "docs": "landed",
        "after": "nothing_to_land",
    }
    store = sessions()
    after = next(m for m in result["members"] if m["name"] == "after")
    [seen] = [e.event.output for e in store.events(after["sessionId"]) if e.event.kind == "tool_result"]
    assert "# Docs" in seen and "return 20" in seen and "return 50" in seen and "committed, not pushed" in seen
    [where] = [Path(line) for line in seen.splitlines() if line.startswith("/")]
    assert HOMES["b"] in where.parents, where  # made on its node, from its clone
    landed = land["branch"]
    assert git(work, "show", f"{landed}:docs.md") == "# Docs"
    assert "return 20" in git(work, "show", f"{landed}:app.py") and "return 50" in git(work, "show", f"{landed}:app.py")
    assert git(origin, "for-each-ref") == refs  # the nodes only read the repository
    for name in "ab":
        [clone] = (HOMES[name] / "ray").glob("*/clones/*.git")
        assert not list(clone.parent.parent.glob("trees/zero/*/*")), "a node kept a member's worktree"
        assert git(clone, "for-each-ref", "refs/heads/zero/") == ""  # its branches went back to the driver


ATTACK_TEAM = """
name = "cloned"
[workspace]
repo = "{origin}"
[[members]]
name = "worker"
specialist = "worker"
prompt = "Do it."
resources = {{ node_a = 1 }}
"""


def _attack_repo(tmp_path: Path) -> tuple[Path, Path]:
    return origin_and_clone(tmp_path, {"app.py": "x = 1\n"})


def test_attack_a_member_cannot_plant_a_git_folder_whose_filter_runs_on_its_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Attack (F1): the member replaces its node worktree's ``.git`` file by a repository of its own whose config
    names a clean filter; Zero's ``git add -A`` at the member's end must not run it (it would run unconfined)."""
    origin, work = _attack_repo(tmp_path)
    proof = tmp_path / "PWNED"
    command = (
        f"rm -f .git && git init -q . && git config filter.x.clean 'sh -c \"id > {proof}; cat\"' && "
        "echo '* filter=x' > .gitattributes && echo 'x = 2' > app.py && echo planted"
    )
    team = write_script(tmp_path / "team.toml", ATTACK_TEAM.format(origin=origin))
    script = write_script(
        tmp_path / "script.json", json.dumps({"turns": worker_turns("worker", "bash", command=command)})
    )
    flags = ("--output-format", "json", "--executor", "ray", "--ray-address", cluster.address)
    done = zero("swarm", "run", str(team), *scripted(script, work), *flags)
    assert not proof.exists(), f"the planted filter ran outside the sandbox: {proof.read_text()}"
    land = json.loads(done.stdout)["land"]
    assert land["members"]["worker"]["state"] == "landed", land  # on its own branch, not in the planted folder
    assert git(work, "show", f"{land['branch']}:app.py") == "x = 2"


def test_attack_a_member_that_made_a_new_repository_keeps_its_other_work(cluster: Cluster, tmp_path: Path) -> None:
    """Attack (F4): a member that ran ``git init`` in a subfolder (``cargo new``) and edited a file: its edit
    must come back to the driver, and the run must end with a clear message, not a traceback."""
    origin, work = _attack_repo(tmp_path)
    team = write_script(tmp_path / "team.toml", ATTACK_TEAM.format(origin=origin))
    command = "echo 'x = 3' > app.py && git init -q newcrate && echo 'fn main(){}' > newcrate/main.rs && echo ok"
    script = write_script(
        tmp_path / "script.json", json.dumps({"turns": worker_turns("worker", "bash", command=command)})
    )
    flags = ("--output-format", "json", "--executor", "ray", "--ray-address", cluster.address)
    done = zero("swarm", "run", str(team), *scripted(script, work), *flags)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    land = json.loads(done.stdout)["land"]
    assert land["members"]["worker"]["state"] == "landed", land
    assert git(work, "show", f"{land['branch']}:app.py") == "x = 3"  # its edit came back
    message = git(work, "log", "-1", "--format=%B", land["branch"])
    assert "Left out (git cannot add them: a repository of its own with no commit?): newcrate/" in message


def test_attack_a_repository_the_nodes_cannot_clone_is_a_clear_problem(cluster: Cluster, tmp_path: Path) -> None:
    """Attack (probe): ``repo`` names a path no node has: the member fails with the clone's message, once."""
    _, work = _attack_repo(tmp_path)
    team = write_script(tmp_path / "team.toml", ATTACK_TEAM.format(origin=tmp_path / "nowhere.git"))
    script = write_script(
        tmp_path / "script.json", json.dumps({"turns": worker_turns("worker", "bash", command="true")})
    )
    flags = ("--output-format", "json", "--executor", "ray", "--ray-address", cluster.address)
    done = zero("swarm", "run", str(team), *scripted(script, work), *flags)
    [member] = json.loads(done.stdout)["members"]
    assert "Traceback" not in member["reason"] and "cannot be cloned on this node" in member["reason"], member
