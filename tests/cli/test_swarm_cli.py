"""`zero swarm run` and `zero swarm validate` end to end, as a user runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import ZERO, lines, scripted, write_script, zero
from support.llm_server import LLMServer, Reply, error_reply, openai_reply
from support.teams import CHAIN

from zero.sessions import FileSessionStore

REPO = Path(__file__).resolve().parents[2]

DIAMOND = """
name = "diamond"
goal = "Answer the question."
[defaults]
model = "gpt-4.1-mini"
[[members]]
name = "a"
specialist = "explorer"
prompt = "Start here."
[[members]]
name = "b"
specialist = "explorer"
depends_on = ["a"]
prompt = "Left side of {{ a.output }}"
[[members]]
name = "c"
specialist = "code-review"
depends_on = ["a"]
prompt = "Right side of {{ a.output }}"
[[members]]
name = "d"
specialist = "planner"
depends_on = ["b", "c"]
prompt = "Join {{ b.output }} with {{ c.output }}"
"""


def sessions() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def who(request: dict[str, Any]) -> str:
    match = re.search(r'You are "([a-z0-9-]+)", a member', request["messages"][0]["content"])
    return match.group(1) if match else "?"


def test_a_diamond_against_the_openai_wire_format(workspace: Path, tmp_path: Path) -> None:
    team = write_script(tmp_path / "team.toml", DIAMOND)

    def respond(request: dict[str, Any]) -> Reply:
        name = who(request)
        if sum(m["role"] == "assistant" for m in request["messages"]) == 0:
            reply = openai_reply("", [(f"call_{name}", "list_directory", {})])
        else:
            reply = openai_reply(f"{name.upper()}-OUT")
        reply.delay = 0.2 if name in ("b", "c") else 0.0
        return reply

    with LLMServer(respond) as server:
        done = zero(
            "swarm",
            "run",
            str(team),
            "--base-url",
            server.url,
            "--cwd",
            str(workspace),
            "--output-format",
            "stream-json",
        )
        d_task = [r for r in server.requests if who(r) == "d"][0]["messages"][1]["content"]
    assert done.returncode == 0, done.stderr
    events = lines(done.stdout)
    assert events[0]["type"] == "run_start" and events[-1] == {**events[-1], "type": "run_end", "status": "success"}
    team_id = events[0]["sessionId"]
    names = {e["sessionId"]: e["member"] for e in events if e["type"] == "subagent_start"}
    life = [(e["type"], names[e["sessionId"]]) for e in events if e["type"] in ("subagent_start", "subagent_end")]
    assert life.index(("subagent_start", "c")) < life.index(("subagent_end", "b"))  # b and c overlap
    assert life.index(("subagent_start", "b")) < life.index(("subagent_end", "c"))
    assert life[-2:] == [("subagent_start", "d"), ("subagent_end", "d")]
    assert "Join B-OUT with C-OUT" in d_task
    tree = json.loads(zero("sessions", "tree", team_id, "--json").stdout)
    assert tree["sessionKind"] == "team" and tree["status"] == "completed"
    assert sorted(c["memberName"] for c in tree["children"]) == ["a", "b", "c", "d"]
    assert all(c["parentSessionId"] == team_id and c["rootSessionId"] == team_id for c in tree["children"])


LOOPERS = """
name = "loopers"
[defaults]
model = "gpt-4.1-mini"
[budget]
{budget}
[[members]]
name = "one"
specialist = "explorer"
prompt = "loop"
[[members]]
name = "two"
specialist = "explorer"
prompt = "loop"
[[members]]
name = "three"
specialist = "explorer"
prompt = "loop"
"""
LOOP_SCRIPT = """
[[turns]]
times = 0
text = "working"
tool_calls = [{ name = "list_directory" }]
usage = { prompt_tokens = 3000, completion_tokens = 1000 }
"""


def test_token_budget_exhaustion_exits_4_and_names_the_limit(workspace: Path, tmp_path: Path) -> None:
    team = write_script(tmp_path / "team.toml", LOOPERS.format(budget="tokens = 40_000"))
    script = write_script(tmp_path / "s.toml", LOOP_SCRIPT)
    done = zero(
        "swarm",
        "run",
        str(team),
        *scripted(script, workspace),
        "--output-format",
        "json",
        "--accept-estimate",  # (its expected 41,460 tokens is over the limit: the ledger is the subject here)
    )
    assert done.returncode == 4, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "budget_exhausted"
    assert [m["status"] for m in result["members"]] == ["budget_exhausted"] * 3
    tripped = result["budget"]["tripped"]
    assert tripped["limit"] == "tokens" and tripped["message"].startswith("tokens limit reached:")
    # refused, with nothing in flight, because what was used and the next call would not fit
    assert tripped["used"] <= 40_000 < tripped["used"] + tripped["requested"]
    assert result["budget"]["used"]["tokens"] <= 40_000
    text = zero(
        "swarm",
        "run",
        str(team),
        *scripted(script, workspace),
        "--budget-tokens",
        "20000",
        "--accept-estimate",
    )
    assert text.returncode == 4
    assert "Budget exhausted: tokens limit reached" in text.stdout and "of 20000 tokens" in text.stdout


def test_a_flaky_member_with_and_without_retries(workspace: Path, tmp_path: Path) -> None:
    body = """
name = "flaky"
[defaults]
model = "gpt-4.1-mini"
[scheduler]
retries = {retries}
[[members]]
name = "flaky"
specialist = "explorer"
prompt = "x"
[[members]]
name = "after"
specialist = "explorer"
depends_on = ["flaky"]
prompt = "y"
[[members]]
name = "alone"
specialist = "explorer"
prompt = "z"
"""
    for retries, code in ((2, 0), (0, 3)):  # a member failed on a provider error: 3, as one agent
        team = write_script(tmp_path / f"team{retries}.toml", body.format(retries=retries))
        failures = {"flaky": 2}

        def respond(request: dict[str, Any], failures: dict[str, int] = failures) -> Reply:
            name = who(request)
            if failures.get(name, 0) > 0:
                failures[name] -= 1  # a transient 500 names its request: not the same failure again
                message = f"The server had an error (request ID req_{failures[name]})"
                return error_reply(500, message, "server_error", {"retry-after": "0"})
            return openai_reply(f"{name} ok")

        with LLMServer(respond) as server:
            done = zero(
                "swarm", "run", str(team), "--base-url", server.url, "--cwd", str(workspace), "--output-format", "json"
            )
        assert done.returncode == code, done.stderr
        members = {m["name"]: m for m in json.loads(done.stdout)["members"]}
        assert members["alone"]["status"] == "completed"
        if retries:
            assert members["flaky"]["status"] == members["after"]["status"] == "completed"
            events = [e.event for e in sessions().events(members["flaky"]["sessionId"])]
            assert [e.code for e in events if e.kind == "retry"] == ["server_error", "server_error"]
        else:
            assert members["flaky"]["status"] == "failed" and members["after"]["status"] == "skipped"
            assert members["after"]["reason"] == "dependency 'flaky' ended failed"


def test_sigint_interrupts_the_whole_team(workspace: Path, tmp_path: Path) -> None:
    # workers may run bash (an explorer may not: its refused calls would run into max_turns at once)
    team = write_script(tmp_path / "team.toml", LOOPERS.format(budget="").replace('"explorer"', '"worker"'))
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
times = 0
text = "working"
tool_calls = [{ name = "bash", arguments = { command = "sleep 30" } }]
""",
    )
    proc = subprocess.Popen(
        [
            ZERO,
            "swarm",
            "run",
            str(team),
            *scripted(script, workspace),
            "--output-format",
            "stream-json",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    running = 0
    for line in proc.stdout:
        if json.loads(line)["type"] == "tool_call":
            running += 1
            if running == 3:
                break
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    rest, _ = proc.communicate(timeout=10)
    assert proc.returncode == 130 and time.monotonic() - started < 5  # (a bound on a hang: it waits for no command)
    assert lines(rest)[-1]["status"] == "interrupted"
    store = sessions()
    all_sessions = store.list()
    assert len(all_sessions) == 4
    for meta in all_sessions:
        events = store.events(meta.session_id)  # a valid log, readable to the end
        assert meta.status == "interrupted", (meta.status, meta.member_name, [e.event.kind for e in events])


def test_validate_lists_every_problem_and_calls_no_model(tmp_path: Path) -> None:
    team = write_script(
        tmp_path / "bad.toml",
        """
name = "bad"
[scheduler]
max_concurency = 3
[[members]]
name = "a"
specialist = "explorer"
prompt = "x {{ c.output }}"
depends_on = ["b"]
[[members]]
name = "b"
specialist = "reviewer"
prompt = "y"
depends_on = ["a"]
[[members]]
name = "c"
specialist = "explorer"
prompt = "z"
depends_on = ["a", "a"]
""",
    )
    with LLMServer() as server:
        done = zero("swarm", "validate", str(team), "--base-url", server.url)
        run = zero("swarm", "run", str(team), "--base-url", server.url)
        assert server.requests == []
    assert done.returncode == 2 and run.returncode == 2
    assert "is not a valid team file (5 problems)" in done.stderr
    said = f"{team}:19: member 'c': depends_on names 'a' more than once: name each member it depends on once"
    assert said in done.stderr, done.stderr  # (it was let through)
    assert f"{team}:4: unknown key 'scheduler.max_concurency' (did you mean \"max_concurrency\"?)" in done.stderr
    assert f"{team}:12: member 'b': unknown specialist 'reviewer' (did you mean \"code-review\"?)" in done.stderr
    assert f"{team}:6: member 'a': dependency cycle: a -> b -> a" in done.stderr
    assert f"{team}:8: member 'a': prompt uses {{{{ c.output }}}} but 'c' is not in its depends_on" in done.stderr
    data = json.loads(zero("swarm", "validate", str(team), "--json").stdout)
    assert data["valid"] is False and len(data["problems"]) == 5


@pytest.mark.parametrize(
    ("repo", "why"),
    [
        ("src/project", "it is a relative path: give an absolute one (every node reads it) or a URL"),
        ("ext::sh -c 'touch /tmp/owned'", "it names a git transport helper ('::'), which Zero does not run"),
        ("--upload-pack=touch /tmp/owned", "it starts with '-' (git would read it as an option)"),
        ("gopher://example.com/p.git", "its scheme is not one of https, http, ssh, git or file"),
        (
            "ssh://h%24%28touch%20%2Ftmp%2Fowned%29/p.git",  # ssh's ProxyCommand %h would expand it in a shell
            "its host is not a plain name (letters, digits, '.', '-'; a user before '@', a port after ':')",
        ),
        ("a@-oProxyCommand=x:p.git", "its host is not a plain name (letters, digits, '.', '-'; a user before '@')"),
        ("host:-u", "its path starts with '-' (git would read it as an option)"),
    ],
)
def test_a_workspace_repository_the_nodes_could_not_clone_safely_is_refused(
    tmp_path: Path, repo: str, why: str
) -> None:
    team = write_script(
        tmp_path / "t.toml",
        f'name = "t"\n[workspace]\nrepo = {json.dumps(repo)}\n'
        '[[members]]\nname = "a"\nspecialist = "worker"\nprompt = "x"\n',
    )
    done = zero("swarm", "validate", str(team))
    assert done.returncode == 2
    assert done.stderr == (
        f"zero: error: {team}:3: workspace.repo: {why} "
        '(e.g. repo = "https://github.com/you/project.git" or "/srv/git/project.git")\n'
    )
    for fine in ("https://github.com/you/p.git", "git@github.com:you/p.git", "/srv/git/p.git", "file:///srv/p"):
        write_script(team, team.read_text().replace(json.dumps(repo), json.dumps(fine)))
        assert zero("swarm", "validate", str(team)).returncode == 0, fine
        repo = fine


def test_a_prompt_of_braces_and_spaces_is_read_in_linear_time(tmp_path: Path) -> None:
    # "{{" and 20,000 spaces: the old placeholder pattern backtracked in cubic time (4,000 took 91 s, the
    # interpreter held, Ctrl-C ignored), so a team file, a planner's or a replay's, hung validate. In a process
    # of its own, bounded: a hang is a failure, not a stuck suite.
    team = write_script(
        tmp_path / "t.toml",
        'name = "t"\n[[members]]\nname = "a"\nspecialist = "explorer"\nprompt = "{{' + " " * 20_000 + '"\n',
    )
    done = subprocess.run(
        [ZERO, "swarm", "validate", str(team)], capture_output=True, text=True, timeout=30, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Team t: 1 members in 1 waves")


def test_validate_prints_each_member_on_one_line_whatever_its_owns_hold(tmp_path: Path) -> None:
    # A planner's glob with a newline faked a line (permission_mode = "unsafe") in the plan shown before "Run?".
    team = write_script(
        tmp_path / "t.toml",
        'name = "t"\n[[members]]\nname = "a"\nspecialist = "worker"\nprompt = "x"\n'
        'owns = ["src/**\\npermission_mode = \\"unsafe\\"\\u001b8m"]\n',
    )
    done = zero("swarm", "validate", str(team))
    [line] = [line for line in done.stdout.splitlines() if "owns" in line]
    assert line.endswith('owns src/**\\npermission_mode = "unsafe"\\x1b8m')
    assert not any(line.startswith("permission_mode") for line in done.stdout.splitlines())


def test_validate_prints_the_plan() -> None:
    done = zero("swarm", "validate", str(REPO / "manifests/teams/repo-review.toml"), "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["waves"] == [["mapper"], ["reviewer", "tester"], ["reporter"]]
    assert plan["budget"]["tokens"] == 400_000 and plan["members"][0]["model"] == "gpt-4.1-mini"
    text = zero("swarm", "validate", str(REPO / "manifests/teams/repo-review.toml")).stdout
    assert "Wave 2:" in text and "reviewer" in text and "after mapper" in text


def test_validate_prints_the_members_whose_owns_overlap(tmp_path: Path) -> None:
    team = write_script(
        tmp_path / "owners.toml",
        """
name = "owners"
[[members]]
name = "api"
specialist = "worker"
prompt = "API."
owns = ["src/api/**", "docs/api.md"]
[[members]]
name = "web"
specialist = "worker"
prompt = "Web."
owns = ["src/web/**"]
[[members]]
name = "tests"
specialist = "worker"
prompt = "Tests."
owns = ["tests/**", "src/*/models.py", "docs/[a-c]*.md"]
[[members]]
name = "docs"
specialist = "worker"
prompt = "Docs."
depends_on = ["tests"]
owns = ["docs/**"]
""",
    )
    text = zero("swarm", "validate", str(team))
    assert text.returncode == 0, text.stderr
    assert "  tests            worker · " in text.stdout
    assert "owns tests/**, src/*/models.py, docs/[a-c]*.md · not beside api, web\n" in text.stdout
    assert (
        "Owns that overlap (these members never run at the same time):\n"
        "  api, then tests (file order): src/api/** and src/*/models.py; docs/api.md and docs/[a-c]*.md\n"
        "  api, then docs (file order): docs/api.md and docs/**\n"
        "  web, then tests (file order): src/web/** and src/*/models.py\n"
        "  tests, then docs (depends_on): docs/[a-c]*.md and docs/**\n"
    ) in text.stdout
    data = json.loads(zero("swarm", "validate", str(team), "--json").stdout)
    assert data["members"][0]["owns"] == ["src/api/**", "docs/api.md"]
    assert data["overlaps"][1] == {
        "first": "api",
        "then": "docs",
        "globs": [["docs/api.md", "docs/**"]],
        "by": "file order",
    }
    assert [(o["first"], o["then"]) for o in data["overlaps"]] == [
        ("api", "tests"),
        ("api", "docs"),
        ("web", "tests"),
        ("tests", "docs"),
    ]


def test_the_readme_main_command_runs_the_demo_team_offline() -> None:
    readme = (REPO / "README.md").read_text()
    command = re.search(r"^pip install -e \. && (zero swarm run .+)$", readme, re.MULTILINE)
    assert command is not None, "the README's quickstart runs the demo team"
    args = command.group(1).split()[1:]
    done = zero(*args, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "team repo-review · completed" in done.stdout
    assert re.search(r"Totals: tokens [\d,]+ of 400,000 · cost \$0\.\d{4} of \$1\.00", done.stdout)


PIPE_TEAM = """
name = "chatty"
[defaults]
model = "gpt-4.1-mini"
[[members]]
name = "left"
specialist = "explorer"
prompt = "Talk."
[[members]]
name = "right"
specialist = "explorer"
prompt = "Talk."
[[members]]
name = "last"
specialist = "explorer"
depends_on = ["left", "right"]
prompt = "Talk last."
"""


def test_a_reader_that_does_not_read_never_slows_the_team(workspace: Path, tmp_path: Path) -> None:
    team = write_script(tmp_path / "team.toml", PIPE_TEAM)
    last_call = threading.Event()
    answer = "word " * 4000  # 20 kB an answer, in 400 deltas: far more than a pipe holds

    def respond(request: dict[str, Any]) -> Reply:
        name = who(request)
        if sum(m["role"] == "assistant" for m in request["messages"]) == 0:
            return openai_reply(f"{name} first: {answer}", [(f"call_{name}", "list_directory", {})], pieces=400)
        if name == "last":
            last_call.set()  # the last member's last model call has reached the server
        return openai_reply(f"{name}: {answer}", pieces=400)

    with LLMServer(respond) as server:
        proc = subprocess.Popen(
            [ZERO, "swarm", "run", str(team), "--base-url", server.url, "--cwd", str(workspace)]
            + ["--output-format", "stream-json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            # Nobody reads the pipe until the last call has been made: the agents must not wait for a reader.
            assert last_call.wait(timeout=30), "the team stalled behind a full pipe"
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    events = lines(out.decode())
    assert len(out) > 3 * 65536
    assert [e["type"] for e in events][-1] == "run_end" and events[-1]["status"] == "success"
    assert sum(e["type"] == "subagent_end" for e in events) == 3
    by_session: dict[str, str] = {}
    for e in events:
        if e["type"] == "text":
            by_session[e["sessionId"]] = by_session.get(e["sessionId"], "") + e["delta"]
    store = sessions()
    for member in [m for m in store.list() if m.session_kind == "member"]:  # and in the sessions, whole
        said = [e.event for e in store.events(member.session_id) if e.event.kind == "message"]
        texts = [m.content for m in said if m.kind == "message" and m.role == "assistant"]
        assert texts == [f"{member.member_name} first: {answer}", f"{member.member_name}: {answer}"]
        assert by_session[member.session_id] == "".join(texts)


def test_a_members_warning_is_said_in_text_and_in_json(workspace: Path, tmp_path: Path) -> None:
    team = write_script(
        tmp_path / "team.toml", 'name = "t"\n[[members]]\nname = "solo"\nspecialist = "explorer"\nprompt = "Go."\n'
    )
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
match = { system = 'You are "solo"' }
text = "Half an answer that"
error = { kind = "stream_dropped" }
[[turns]]
match = { system = 'You are "solo"' }
text = "A whole answer."
""",
    )
    text = zero("swarm", "run", str(team), *scripted(script, workspace), "--retry-max-delay", "0.01")
    assert text.returncode == 0, text.stderr
    assert re.search(r"solo\s+warning: .*\(stream_restarted\)", text.stderr), text.stderr
    done = zero(
        "swarm", "run", str(team), *scripted(script, workspace), "--retry-max-delay", "0.01", "--output-format", "json"
    )
    assert [w["code"] for w in json.loads(done.stdout)["warnings"]] == ["stream_restarted"]


def test_every_view_of_a_run_exits_with_its_worst_members_code(workspace: Path, tmp_path: Path) -> None:
    # a capped member and its skipped dependent exited 1, a capped and a completed one 4: both are 4 now,
    # and a provider error is 3, in the exit code, the JSON result, stream-json's run_end and swarm watch
    team = write_script(tmp_path / "team.toml", CHAIN)
    capped = '[[turns]]\nmatch = { system = \'You are "writer"\' }\ntext = "cut"\nfinish = "length"\n'
    for other, code in (('text = "fine"', 4), ('error = { kind = "auth" }', 3)):
        script = write_script(
            tmp_path / f"s{code}.toml", f"{capped}[[turns]]\nmatch = {{ system = 'You are \"other\"' }}\n{other}\n"
        )
        done = zero("swarm", "run", str(team), *scripted(script, workspace), "--output-format", "json")
        result = json.loads(done.stdout)
        assert (done.returncode, result["exitCode"]) == (code, code), done.stderr
        assert [m["status"] for m in result["members"]][:2] == ["output_capped", "skipped"]
        stream = zero("swarm", "run", str(team), *scripted(script, workspace), "--output-format", "stream-json")
        end = json.loads(stream.stdout.splitlines()[-1])
        assert (stream.returncode, end["type"], end["exitCode"]) == (code, "run_end", code)
        watched = zero("swarm", "watch", result["sessionId"])
        assert watched.returncode == code, watched.stderr
