"""``zero swarm run --executor ray`` on a real local Ray cluster: a head and two worker nodes on 127.0.0.1,
started once for the module and shut down after it (no process left)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import lines, scripted, write_script, zero

from zero.sessions import FileSessionStore

# Every node, and the driver, on the loopback address only (Ray takes 127.0.0.1 for this machine's address else),
# read as Ray is imported.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")

LOCAL = "127.0.0.1"

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
    made = Cluster(
        initialize_head=True,
        head_node_args={
            **common,
            "include_dashboard": False,
            "resources": {"head": 1},
            "env_vars": {"ZERO_NODE": "head"},
        },
    )
    try:
        made.add_node(**common, resources={"node_a": 1}, env_vars={"ZERO_NODE": "a"})
        made.add_node(**common, resources={"node_b": 1}, env_vars={"ZERO_NODE": "b"})
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


def run(team: Path, script: Path, workspace: Path, *extra: str) -> dict[str, Any]:
    done = zero("swarm", "run", str(team), *scripted(script, workspace), "--output-format", "json", *extra)
    assert done.returncode in (0, 4), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


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
    here = run(team, script, workspace)
    there = run(team, script, workspace, "--executor", "ray", "--ray-address", cluster.address)
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
