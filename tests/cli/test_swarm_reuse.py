"""``zero swarm run --reuse TEAM_ID``: only the members whose inputs changed, and their dependents, run
again; the others' outputs are taken from the earlier run, linked to it. Model calls are counted at the
server."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from support.cli import write_script, zero
from support.llm_server import LLMServer, Reply, openai_reply

from zero.sessions import FileSessionStore

FIVE = """
name = "five"
[defaults]
model = "gpt-4.1-mini"
[[members]]
name = "a"
specialist = "explorer"
prompt = "Read the README."
[[members]]
name = "b"
specialist = "explorer"
prompt = "Find the Python files."
[[members]]
name = "c"
specialist = "code-review"
depends_on = ["a"]
prompt = "{c_prompt} {{{{ a.output }}}}"
[[members]]
name = "d"
specialist = "explorer"
depends_on = ["b"]
prompt = "Search what b found: {{{{ b.output }}}}"
[[members]]
name = "e"
specialist = "planner"
depends_on = ["c", "d"]
prompt = "Plan from {{{{ c.output }}}} and {{{{ d.output }}}}"
"""
READS: dict[str, tuple[str, dict[str, Any]]] = {
    "a": ("read_file", {"path": "README.md"}),
    "b": ("glob", {"pattern": "**/*.py"}),
    "c": ("grep", {"pattern": "TODO"}),
    "d": ("list_directory", {"path": "src"}),
}


def who(request: dict[str, Any]) -> str:
    match = re.search(r'You are "([a-z]+)", a member', request["messages"][0]["content"])
    return match.group(1) if match else "?"


def respond(request: dict[str, Any]) -> Reply:
    """Each member reads once (e does not), then answers with its name."""
    name = who(request)
    if name in READS and not any(m["role"] == "assistant" for m in request["messages"]):
        tool, arguments = READS[name]
        return openai_reply("", [(f"call_{name}", tool, arguments)])
    return openai_reply(f"{name.upper()}-OUT")


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


class Team:
    def __init__(self, tmp_path: Path, workspace: Path, server: LLMServer):
        self.path, self.workspace, self.server = tmp_path / "team.toml", workspace, server
        self.write()

    def write(self, c_prompt: str = "Review what a read:") -> None:
        write_script(self.path, FIVE.format(c_prompt=c_prompt))

    def zero(self, *args: str) -> tuple[dict[str, Any], Counter[str]]:
        """The JSON ``zero swarm run`` prints, and each member's model calls."""
        before = len(self.server.requests)
        done = zero(
            "swarm", "run", str(self.path), "--base-url", self.server.url, "--cwd", str(self.workspace),
            "--output-format", "json", *args,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout), Counter(who(r) for r in self.server.requests[before:])


def test_only_the_changed_member_and_its_dependents_run_again(workspace: Path, tmp_path: Path) -> None:
    with LLMServer(respond) as server:
        team = Team(tmp_path, workspace, server)
        first, calls = team.zero()
        assert first["status"] == "completed" and calls == {"a": 2, "b": 2, "c": 2, "d": 2, "e": 1}
        sessions = {m["name"]: m["sessionId"] for m in first["members"]}

        team.write(c_prompt="Review, strictly, what a read:")
        second, calls = team.zero("--reuse", first["sessionId"])
        assert calls == {"c": 2, "e": 1}  # a, b and d make no model call
        members = {m["name"]: m for m in second["members"]}
        for name in ("a", "b", "d"):
            assert members[name]["status"] == "completed" and members[name]["output"] == f"{name.upper()}-OUT"
            assert members[name]["reusedFrom"] == sessions[name] and members[name]["usage"]["calls"] == 0
            meta = store().metadata(members[name]["sessionId"])
            assert meta.reused_from == sessions[name] and meta.status == "completed"  # linked to its origin
            assert meta.parent_session_id == second["sessionId"]
        assert members["c"]["reusedFrom"] is None and members["e"]["reusedFrom"] is None
        assert second["usage"]["calls"] == 3

        # a file b's glob saw: b runs again, and d and e after it; a reused member reused again keeps its origin
        (workspace / "src" / "extra.py").write_text("x = 1\n")
        third, calls = team.zero("--reuse", second["sessionId"])
        assert calls == {"b": 2, "d": 2, "e": 1}
        members = {m["name"]: m for m in third["members"]}
        assert members["a"]["reusedFrom"] == sessions["a"] and members["a"]["output"] == "A-OUT"
        assert members["c"]["reusedFrom"] == second["members"][2]["sessionId"]

        # nothing changed: nothing runs, every output is the earlier one
        fourth, calls = team.zero("--reuse", third["sessionId"])
        assert calls == {} and fourth["status"] == "completed"
        # a reused member's session did no work: a later estimate is drawn from the runs that did
        estimate = {m["name"]: m for m in team.zero("--dry-run")[0]["estimate"]["members"]}
        spent = first["members"][0]["usage"]["totalTokens"]
        assert (estimate["a"]["source"], estimate["a"]["runs"], estimate["a"]["tokens"]["expected"]) == (
            "team history",
            1,
            spent,
        )
        assert {m["name"]: m["output"] for m in fourth["members"]} == {n: f"{n.upper()}-OUT" for n in "abcde"}


def test_dry_run_says_which_would_run_and_why(workspace: Path, tmp_path: Path) -> None:
    with LLMServer(respond) as server:
        team = Team(tmp_path, workspace, server)
        first, _ = team.zero()
        run_id = first["sessionId"]
        (workspace / "README.md").write_text("# Demo\nThe answer is 43.\n")
        team.write(c_prompt="Review what a read:")
        text = team.path.read_text().replace('name = "d"\nspecialist = "explorer"', 'name = "d"\nspecialist = "tester"')
        team.path.write_text(text)
        before = len(server.requests)
        dry = zero(
            "swarm", "run", str(team.path), "--base-url", server.url, "--cwd", str(workspace), "--dry-run",
            "--reuse", run_id[-12:], "--output-format", "json",
        )  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        assert len(server.requests) == before  # a dry run calls no model
        plan = json.loads(dry.stdout)
        assert plan["reuse"]["from"] == run_id
        assert [(v["name"], v["reused"], v["reason"]) for v in plan["reuse"]["members"]] == [
            ("a", False, 'what it read changed: read_file {"path": "README.md"}'),
            ("b", True, f"its inputs are unchanged since {run_id}"),
            ("c", False, "its dependency a runs again"),
            ("d", False, "its specialist, model or settings changed"),
            ("e", False, "its dependencies c, d run again"),
        ]
        assert plan["reuse"]["members"][1]["from"] == first["members"][1]["sessionId"]
        assert [m["source"] for m in plan["estimate"]["members"]][1] == "reused"
        assert plan["estimate"]["members"][1]["tokens"] == {"low": 0, "expected": 0, "high": 0}
        text_plan = zero(
            "swarm", "run", str(team.path), "--base-url", server.url, "--cwd", str(workspace), "--dry-run",
            "--reuse", run_id,
        ).stdout  # fmt: skip
        assert f"Reuse of {run_id}:\n" in text_plan
        assert f"  b                reused: its inputs are unchanged since {run_id}\n" in text_plan
        assert "  e                runs: its dependencies c, d run again\n" in text_plan


def test_a_member_that_ran_a_command_runs_again_and_a_wrong_run_is_refused(workspace: Path, tmp_path: Path) -> None:
    body = 'name = "solo"\n[defaults]\nmodel = "gpt-4.1-mini"\n[[members]]\nname = "t"\nspecialist = "tester"\n'
    team = write_script(tmp_path / "solo.toml", body + 'prompt = "Count the files."\nisolation = "none"\n')

    def counting(request: dict[str, Any]) -> Reply:
        if not any(m["role"] == "assistant" for m in request["messages"]):
            return openai_reply("", [("call_t", "bash", {"command": "ls | wc -l"})])
        return openai_reply("T-OUT")

    with LLMServer(counting) as server:
        flags = ("--base-url", server.url, "--cwd", str(workspace), "--permission-mode", "unsafe")
        done = zero("swarm", "run", str(team), *flags, "--output-format", "json")
        assert done.returncode == 0, done.stderr
        run_id = json.loads(done.stdout)["sessionId"]
        dry = zero("swarm", "run", str(team), *flags, "--dry-run", "--reuse", run_id, "--output-format", "json")
        verdict = json.loads(dry.stdout)["reuse"]["members"][0]
        assert (verdict["reused"], verdict["reason"]) == (False, "it called bash, which a reuse cannot replay")
        other = write_script(tmp_path / "other.toml", body.replace('"solo"', '"other"') + 'prompt = "Count."\n')
        wrong = zero("swarm", "run", str(other), *flags, "--dry-run", "--reuse", run_id)
        assert wrong.returncode == 2 and wrong.stderr == (
            f"zero: error: --reuse {run_id}: {run_id} is a run of team 'solo', not 'other'; name a run of this "
            "team (zero sessions list --kind team)\n"
        )
        member = json.loads(done.stdout)["members"][0]["sessionId"]
        not_a_team = zero("swarm", "run", str(team), *flags, "--dry-run", "--reuse", member)
        assert not_a_team.returncode == 2 and not_a_team.stderr == (
            f"zero: error: --reuse {member}: {member} is not a team run; name a run of this team "
            "(zero sessions list --kind team)\n"
        )


def test_a_changed_specialist_manifest_runs_its_member_again(workspace: Path, tmp_path: Path) -> None:
    mine = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"
    mine.mkdir(parents=True)
    manifest = 'name = "scout"\ndescription = "Looks."\ntools = ["read-only"]\nprompt = "You scout."\n'
    write_script(mine / "scout.toml", manifest)
    body = 'name = "scouts"\n[defaults]\nmodel = "gpt-4.1-mini"\n[[members]]\nname = "s"\nspecialist = "scout"\n'
    team = write_script(tmp_path / "scouts.toml", body + 'prompt = "Scout."\n')
    with LLMServer(lambda request: openai_reply("S-OUT")) as server:
        flags = ("--base-url", server.url, "--cwd", str(workspace), "--output-format", "json")
        done = zero("swarm", "run", str(team), *flags)
        assert done.returncode == 0, done.stderr
        run_id = json.loads(done.stdout)["sessionId"]

        def verdict() -> tuple[bool, str]:
            dry = zero("swarm", "run", str(team), *flags, "--dry-run", "--reuse", run_id)
            found = json.loads(dry.stdout)["reuse"]["members"][0]
            return found["reused"], found["reason"]

        assert verdict() == (True, f"its inputs are unchanged since {run_id}")
        write_script(mine / "scout.toml", manifest.replace("You scout.", "You scout, carefully."))
        assert verdict() == (False, "its specialist, model or settings changed")
        write_script(mine / "scout.toml", manifest.replace('["read-only"]', '["read-only", "plan"]'))
        assert verdict() == (False, "its specialist, model or settings changed")
        write_script(mine / "scout.toml", manifest)
        assert verdict() == (True, f"its inputs are unchanged since {run_id}") and len(server.requests) == 1


TYPED = """
name = "typed"
[defaults]
model = "gpt-4.1-mini"
[[members]]
name = "a"
specialist = "explorer"
prompt = "Count."
output_schema = "json"
[[members]]
name = "b"
specialist = "explorer"
depends_on = ["a"]
prompt = "{verb} {{{{ a.output.n }}}} things."
"""


def test_a_typed_result_is_reused_and_reaches_a_dependents_placeholder(workspace: Path, tmp_path: Path) -> None:
    def typed(request: dict[str, Any]) -> Reply:
        if who(request) == "a":
            return openai_reply("", [("call_a", "submit_result", {"result": {"n": 7}})])
        return openai_reply("B-OUT")

    team = tmp_path / "typed.toml"
    with LLMServer(typed) as server:
        flags = ("--base-url", server.url, "--cwd", str(workspace), "--output-format", "json")
        write_script(team, TYPED.format(verb="Use"))
        first = zero("swarm", "run", str(team), *flags)
        assert first.returncode == 0, first.stderr
        run_id = json.loads(first.stdout)["sessionId"]
        write_script(team, TYPED.format(verb="Name"))
        before = len(server.requests)
        again = zero("swarm", "run", str(team), *flags, "--reuse", run_id)
        assert again.returncode == 0, again.stderr
        asked = server.requests[before:]
    assert [who(r) for r in asked] == ["b"] and "Name 7 things." in asked[0]["messages"][1]["content"]
    members = {m["name"]: m for m in json.loads(again.stdout)["members"]}
    assert members["a"]["reusedFrom"] and members["a"]["structuredOutput"] == {"n": 7}
