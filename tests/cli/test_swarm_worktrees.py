"""Members that write, each in a git worktree of its own, landed one at a time: ``zero swarm run`` on real
git repositories, with scripted models and real tools."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import ZERO, lines, scripted, write_script, zero
from support.git import git
from support.git import repository as made_repository
from support.sandbox import needs_sandbox

from zero.sessions import FileSessionStore, short_id

APP = "def first():\n    return 1\n\n\ndef middle():\n    return 0\n\n\ndef last():\n    return 2\n"


def repository(tmp_path: Path, files: dict[str, str]) -> Path:
    return made_repository(tmp_path / "repo", files)


def turns(name: str, *calls: dict[str, Any], delay: float = 0.0) -> list[dict[str, Any]]:
    """A member's two scripted calls: its tool calls, then (``delay`` seconds later) its report."""
    who = f'You are "{name}"'
    return [
        {"match": {"system": who, "turn": 1}, "tool_calls": list(calls)},
        {"match": {"system": who, "turn": 2}, "text": f"{name} done", "delay": delay},
    ]


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def member(name: str, prompt: str = "Do it.", specialist: str = "worker", **keys: Any) -> str:
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
    return f'[[members]]\nname = "{name}"\nspecialist = "{specialist}"\nprompt = "{prompt}"\n{extra}'


def run(
    tmp_path: Path, repo: Path, team: str, script: list[dict[str, Any]], *flags: str
) -> tuple[int, list[dict[str, Any]], str]:
    team_path = write_script(tmp_path / "team.toml", team)
    script_path = write_script(tmp_path / "script.json", json.dumps({"turns": script}))
    done = zero("swarm", "run", str(team_path), *scripted(script_path, repo), *flags)
    return (
        done.returncode,
        lines(done.stdout) if any("json" in flag for flag in flags) else [],
        done.stdout + done.stderr,
    )


def worktree_list(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


FIVE = (
    'name = "five"\n[scheduler]\nmax_concurrency = 5\n[land]\n'
    """check = 'grep -q "def first" app.py && echo checked $(ls | tr "\\n" " ")'\n"""
    + member("top")
    + member("bottom")
    + member("clash")
    + member("docs")
    + member("notes")
)


def five_script() -> list[dict[str, Any]]:
    return (
        turns("top", call("edit_file", path="app.py", old_text="return 1", new_text="return 10"), delay=0.3)
        + turns("bottom", call("edit_file", path="app.py", old_text="return 2", new_text="return 20"))
        + turns("clash", call("edit_file", path="app.py", old_text="return 1", new_text="return 11"))
        + turns("docs", call("write_file", path="docs.md", content="# Docs\n"))
        + turns("notes", call("bash", command="echo 'a note' > notes.md"))
    )


def test_five_writers_at_once_lose_nothing_and_land_one_at_a_time(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    start = git(repo, "rev-parse", "HEAD")
    code, out, _ = run(tmp_path, repo, FIVE, five_script(), "--output-format", "json")
    assert code == 0
    result = out[-1]
    land = result["land"]
    states = {name: m["state"] for name, m in land["members"].items()}
    assert states == {"top": "landed", "bottom": "landed", "clash": "conflict", "docs": "landed", "notes": "landed"}
    # The check ran on each tree it landed, after the ones before it had landed
    checks = {name: m["check"] for name, m in land["members"].items()}
    assert checks == {
        "top": "checked app.py",
        "bottom": "checked app.py",
        "clash": None,
        "docs": "checked app.py docs.md",
        "notes": "checked app.py docs.md notes.md",
    }
    [conflict] = land["members"]["clash"]["conflicts"]
    assert conflict["path"] == "app.py"
    assert "return 10" in conflict["landed"] and "return 20" in conflict["landed"]
    assert "return 11" in conflict["member"] and "return 2\n" in conflict["member"]
    assert land["members"]["top"]["diffStat"] == {"files": 1, "added": 1, "removed": 1}
    # No write lost: four on the integration branch, the fifth on its branch; the user's checkout as it was
    branch = land["branch"]
    root = branch.split("/")[1]
    assert (
        git(repo, "show", f"{branch}:app.py")
        == APP.replace("return 1", "return 10").replace("return 2", "return 20").strip()
    )
    assert git(repo, "show", f"{branch}:docs.md") == "# Docs"
    assert git(repo, "show", f"{branch}:notes.md") == "a note"
    assert "return 11" in git(repo, "show", f"zero/{root}/clash:app.py")
    log = git(repo, "log", "-1", "--format=%B", f"zero/{root}/clash")
    assert log.startswith(f"clash: what session {result['members'][2]['sessionId']} changed (it ended completed)")
    assert git(repo, "rev-parse", "HEAD") == start and git(repo, "status", "--porcelain") == ""
    assert (repo / "app.py").read_text() == APP
    assert land["mergeCommand"] == f"git merge {branch}"
    # Only the kept branch and the integration branch are left; no worktree is
    assert sorted(git(repo, "branch", "--list", "zero/*", "--format=%(refname:short)").split()) == [
        f"zero/{root}/clash",
        branch,
    ]
    assert worktree_list(repo) == [f"worktree {repo}"]


def test_the_summary_and_the_stream_say_how_each_member_landed(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    code, _, text = run(tmp_path, repo, FIVE, five_script())
    assert code == 0
    root = next(line for line in text.splitlines() if line.startswith("landing onto ")).split("/")[1]
    assert "  top: landed · 1 commit · +1 −1 in 1 file · check passed" in text
    assert f"  clash: conflict: app.py · +1 −1 in 1 file · zero/{root}/clash kept" in text
    assert f"    app.py on zero/{root}/land:" in text and f"    app.py on zero/{root}/clash:" in text
    assert f"Bring it into your branch with: git merge zero/{root}/land" in text
    assert f"zero swarm diff {root}; once a branch is fixed, land it with: zero swarm land {root}" in text
    other = tmp_path / "other"
    other.mkdir()
    code, events, _ = run(
        other, repository(other, {"app.py": APP}), FIVE, five_script(), "--output-format", "stream-json"
    )
    land = [e for e in events if e["type"] == "land"]
    committed = {e["member"] for e in land if e["state"] == "committed"}
    assert committed == {"top", "bottom", "clash", "docs", "notes"}
    clash = next(e for e in land if e["member"] == "clash" and e["state"] != "committed")
    assert clash["state"] == "conflict" and clash["conflicts"] == ["app.py"]
    assert clash["diffStat"] == {"files": 1, "added": 1, "removed": 1}
    assert clash["branch"].endswith("/clash")


def test_a_member_starts_from_what_the_caller_sees_and_after_its_dependency_landed(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"README.md": "# Demo\n"})
    git(repo, "update-ref", "refs/remotes/origin/HEAD", git(repo, "rev-parse", "HEAD"))  # a stale origin/HEAD
    (repo / "second.txt").write_text("committed after origin\n")
    git(repo, "add", "second.txt")
    git(repo, "commit", "-q", "-m", "second")
    (repo / "README.md").write_text("# Demo\nnot committed yet\n")
    (repo / "draft.txt").write_text("untracked\n")
    team = 'name = "chain"\n' + member("writer") + member("reader", depends_on=["writer"])
    script = turns("writer", call("bash", command="cat README.md second.txt draft.txt > seen.txt")) + turns(
        "reader", call("bash", command="cat seen.txt > reader-saw.txt")
    )
    code, out, _ = run(tmp_path, repo, team, script, "--output-format", "json")
    assert code == 0
    land = out[-1]["land"]
    assert {n: m["state"] for n, m in land["members"].items()} == {"writer": "landed", "reader": "landed"}
    seen = "# Demo\nnot committed yet\ncommitted after origin\nuntracked"
    assert git(repo, "show", f"{land['branch']}:seen.txt") == seen
    assert git(repo, "show", f"{land['branch']}:reader-saw.txt") == seen
    # The user's edits stay theirs: what landed is picked onto them, never merged with the snapshot
    assert land["mergeCommand"].startswith("git cherry-pick ")
    assert (repo / "README.md").read_text() == "# Demo\nnot committed yet\n"


def test_a_member_asking_for_a_worktree_outside_git_is_refused_naming_the_fix(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    team = write_script(tmp_path / "team.toml", 'name = "t"\n' + member("w", isolation="worktree"))
    done = zero("swarm", "validate", str(team), "--cwd", str(folder), env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr == (
        f"zero: error: {team}:6: member 'w': {folder} is not in a git working tree, and member 'w' asks for "
        'isolation = "worktree" (a git worktree for each writer): run `git init` there, or set isolation = "none"\n'
    )
    # Without asking, a writer outside git works in the folder itself
    plain = write_script(tmp_path / "plain.toml", 'name = "t"\n' + member("w"))
    done = zero(
        "swarm", "validate", str(plain), "--cwd", str(folder), "--json", env={"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["members"][0]["isolation"] == "none"


@needs_sandbox
def test_a_member_cannot_write_the_main_checkout_from_its_worktree(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both where the sandbox shows them (it hides the temp folders): the checkout, and ZERO_HOME (read-only
    # but for the member's worktree in it)
    repo = repository(outside, {"app.py": APP})
    monkeypatch.setenv("ZERO_HOME", str(outside / "zero-home"))
    start = git(repo, "rev-parse", "HEAD")
    main = str(repo)
    script = turns(
        "intruder",
        call("write_file", path=f"{main}/abs.txt", content="escaped"),
        call("bash", command=f"git -C {main} commit -q --allow-empty -m escaped; echo status $?"),
        call("bash", command=f"cd {main} && echo x > f; echo status $?"),
        call("bash", command=f"ln -s {main} link && echo inside > inside.txt && echo x > ../record.json; echo $?"),
        call("write_file", path="link/linked.txt", content="escaped"),
        call("bash", command="echo x > link/via-bash; echo status $?"),
    )
    team = f'name = "escape"\n[land]\ncheck = "touch {main}/leak; true"\n' + member("intruder")  # (a sandboxed check)
    code, events, _ = run(tmp_path, repo, team, script, "--output-format", "stream-json")
    assert code == 0
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["status"] for r in results] == ["error", "ok", "ok", "ok", "error", "ok"]
    worktree = Path(os.environ["ZERO_HOME"]).resolve() / "worktrees" / short_id(events[0]["sessionId"]) / "intruder"
    refused = "is outside the workspace ({}); only paths inside it can be read or written"
    assert results[0]["output"] == f"Error: '{main}/abs.txt' " + refused.format(worktree)
    assert results[1]["output"] == (
        f"fatal: Unable to create '{main}/.git/index.lock': Read-only file system\nstatus 128\n\n[exit code 0]"
    )
    assert results[2]["output"] == "bash: line 1: f: Read-only file system\nstatus 1\n\n[exit code 0]"
    # It writes its worktree, never the rest of ZERO_HOME (the record of the run's worktrees beside it)
    assert results[3]["output"] == "bash: line 1: ../record.json: Read-only file system\n1\n\n[exit code 0]"
    assert results[4]["output"] == "Error: 'link/linked.txt' " + refused.format(worktree)
    assert results[5]["output"] == "bash: line 1: link/via-bash: Read-only file system\nstatus 1\n\n[exit code 0]"
    # The main checkout is as it was; what the member wrote in its own worktree landed
    assert git(repo, "rev-parse", "HEAD") == start and git(repo, "status", "--porcelain", "--ignored") == ""
    assert sorted(p.name for p in repo.iterdir()) == [".git", "app.py"]
    land = next(e for e in events if e["type"] == "land" and e["state"] != "committed")
    assert land["state"] == "landed"
    branch = land["branch"].rsplit("/", 1)[0] + "/land"
    assert git(repo, "show", f"{branch}:inside.txt") == "inside"


@pytest.mark.parametrize("mode", ["end", "eager"])
def test_a_failing_check_keeps_the_branch_and_skips_its_dependents(tmp_path: Path, mode: str) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    team = (
        f'name = "checked"\n[land]\nmode = "{mode}"\ncheck = "test ! -e BROKEN || (echo found BROKEN; exit 1)"\n'
        + member("breaker")
        + member("after", depends_on=["breaker"])
        + member("fine")
    )
    script = turns("breaker", call("write_file", path="BROKEN", content="x")) + turns(
        "fine", call("write_file", path="fine.txt", content="fine")
    )
    code, out, _ = run(tmp_path, repo, team, script, "--output-format", "json")
    result = out[-1]
    land = result["land"]
    assert {n: m["state"] for n, m in land["members"].items()} == {"breaker": "check_failed", "fine": "landed"}
    assert "found BROKEN" in land["members"]["breaker"]["tail"]
    after = next(m for m in result["members"] if m["name"] == "after")
    assert after["status"] == "skipped"
    assert after["reason"] == "dependency 'breaker' did not land (its check failed)"
    assert code == result["exitCode"]
    root = land["branch"].split("/")[1]
    assert git(repo, "show", f"zero/{root}/breaker:BROKEN") == "x"
    assert worktree_list(repo) == [f"worktree {repo}"]


def test_swarm_diff_shows_each_member_and_swarm_land_lands_a_fixed_branch(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    code, out, _ = run(tmp_path, repo, FIVE, five_script(), "--output-format", "json")
    team_id = out[-1]["sessionId"]
    root = short_id(team_id)
    shown = " ".join(zero("sessions", "tree", team_id).stdout.replace("│", "").split())  # (as the tree wraps it)
    assert f"· completed · zero/{root}/clash +1 −1 in 1 file · conflict: app.py" in shown
    assert f"· completed · zero/{root}/top +1 −1 in 1 file · landed" in shown
    done = zero("swarm", "diff", team_id, "clash")
    assert done.returncode == 0
    header, *diff = done.stdout.splitlines()
    assert header == f"# clash: not landed, on zero/{root}/clash · +1 −1 in 1 file"
    assert "-    return 1" in diff and "+    return 11" in diff
    done = zero("swarm", "diff", team_id)
    headers = [line for line in done.stdout.splitlines() if line.startswith("# ")]
    assert headers[0] == f"# top: landed on zero/{root}/land · +1 −1 in 1 file"
    assert len(headers) == 5
    assert zero("swarm", "diff", team_id, "nobody").stderr == (
        f"zero: error: team {root} has no isolated member 'nobody' (it has: top, bottom, clash, docs, notes)\n"
    )
    # Still conflicting: landing again reports it, and exits 1
    done = zero("swarm", "land", team_id)
    assert (
        done.returncode == 1 and f"  clash: conflict: app.py · +1 −1 in 1 file · zero/{root}/clash kept" in done.stdout
    )
    # The user fixes the branch (here: makes it change another line), and lands it
    git(repo, "checkout", "-q", f"zero/{root}/clash")
    (repo / "app.py").write_text(APP.replace("return 0", "return 5"))
    git(repo, "commit", "-q", "-a", "--amend", "-m", "clash, fixed")
    git(repo, "checkout", "-q", "main")
    done = zero("swarm", "land", team_id, "--json")
    assert done.returncode == 0
    report = json.loads(done.stdout)
    assert (
        report["members"]["clash"]["state"] == "landed"
        and report["members"]["clash"]["check"] == "checked app.py docs.md notes.md"
    )
    assert git(repo, "show", f"zero/{root}/land:app.py") == (
        APP.replace("return 1", "return 10").replace("return 2", "return 20").replace("return 0", "return 5").strip()
    )
    assert git(repo, "branch", "--list", "zero/*", "--format=%(refname:short)") == f"zero/{root}/land"
    assert worktree_list(repo) == [f"worktree {repo}"]
    shown = " ".join(zero("sessions", "tree", team_id).stdout.replace("│", "").split())  # the team's log has it
    assert f"· completed · zero/{root}/clash +1 −1 in 1 file · landed" in shown
    assert zero("swarm", "land", team_id).stdout == (
        f"Nothing to land: every isolated member of team {root} landed or changed nothing.\n"
    )


def test_a_team_killed_while_two_members_write_is_resumed_in_their_worktrees(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"README.md": "# Demo\n"})
    team = write_script(tmp_path / "team.toml", 'name = "killed"\n' + member("a") + member("b"))
    script: list[dict[str, Any]] = []
    for name in ("a", "b"):
        who = f'You are "{name}"'
        script += [
            {"match": {"system": who, "last": "resumed now"}, "text": f"{name} finished after the resume"},
            {"match": {"system": who, "turn": 1}, "tool_calls": [call("write_file", path=f"{name}.txt", content=name)]},
            {"match": {"system": who, "turn": 2}, "tool_calls": [call("bash", command="sleep 60")]},
        ]
    path = write_script(tmp_path / "script.json", json.dumps({"turns": script}))
    flags = [*scripted(path, repo), "--output-format", "stream-json"]
    process = subprocess.Popen(
        [ZERO, "swarm", "run", str(team), *flags], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stdout is not None
    sleeping, first = set(), None
    for line in process.stdout:  # until both members wrote their file and sleep in bash
        event = json.loads(line)
        first = first or event
        if event["type"] == "tool_call" and event["name"] == "bash":
            sleeping.add(event["sessionId"])
            if len(sleeping) == 2:
                break
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    process.stdout.close()
    assert first is not None
    team_id = first["sessionId"]
    folder = Path(os.environ["ZERO_HOME"]) / "worktrees" / short_id(team_id)
    assert (folder / "a" / "a.txt").read_text() == "a" and (folder / "b" / "b.txt").read_text() == "b"
    done = zero("swarm", "resume", team_id, *flags)
    assert done.returncode == 0
    events = lines(done.stdout)
    land = {e["member"]: e["state"] for e in events if e["type"] == "land" and e["state"] != "committed"}
    assert land == {"a": "landed", "b": "landed"}
    branch = f"zero/{short_id(team_id)}/land"
    assert git(repo, "show", f"{branch}:a.txt") == "a" and git(repo, "show", f"{branch}:b.txt") == "b"
    log = git(repo, "log", "--format=%s", branch).splitlines()
    assert [line.split(":")[0] for line in log] == ["b", "a", "start"]
    assert worktree_list(repo) == [f"worktree {repo}"]


REPO = Path(__file__).resolve().parents[2]


def test_the_documented_example_runs_as_docs_teams_says(tmp_path: Path) -> None:
    docs = (REPO / "docs" / "TEAMS.md").read_text()
    example = docs[docs.index("### Example: two land, one conflicts") :]
    commands = example[example.index("```sh\n") + 6 :].split("```", 1)[0].replace("\\\n", " ").splitlines()
    expected = example[example.index("```text\n") + 8 :].split("```", 1)[0]
    demo = tmp_path / "demo"
    demo.mkdir()
    setup = [line.replace("demo=$(mktemp -d) && ", "") for line in commands if not line.startswith("zero ")]
    subprocess.run(["bash", "-c", "\n".join(["set -e", *setup])], env={**os.environ, "demo": str(demo)}, check=True)
    [run_line] = [line for line in commands if line.startswith("zero ")]
    argv = shlex.split(run_line.replace('"$demo"', str(demo)))[1:]
    done = zero(*argv, cwd=REPO)
    assert done.returncode == 0
    shown = done.stdout[done.stdout.index("landing onto ") :]
    root = shown.split("/")[1]

    def plain(text: str) -> list[str]:
        return [line.rstrip(" ─") for line in text.splitlines()]

    assert plain(shown) == plain(expected.replace("5eb8453e", root))
    assert worktree_list(demo) == [f"worktree {demo}"]


def test_a_run_that_changes_nothing_leaves_no_branch_and_into_current_moves_a_clean_branch(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    start = git(repo, "rev-parse", "HEAD")
    idle = 'name = "idle"\n' + member("looker")
    code, out, _ = run(
        tmp_path, repo, idle, turns("looker", call("read_file", path="app.py")), "--output-format", "json"
    )
    assert code == 0
    assert out[-1]["land"]["members"]["looker"]["state"] == "nothing_to_land"
    assert out[-1]["land"]["mergeCommand"] is None
    assert git(repo, "branch", "--list", "zero/*") == "" and worktree_list(repo) == [f"worktree {repo}"]
    into = 'name = "into"\n[land]\ninto = "current"\n' + member("docs") + member("notes")
    script = turns("docs", call("write_file", path="docs.md", content="# Docs\n")) + turns(
        "notes", call("write_file", path="notes.md", content="notes\n")
    )
    code, out, _ = run(tmp_path, repo, into, script, "--output-format", "json")
    land = out[-1]["land"]
    assert code == 0 and land["merged"] is True and land["mergeCommand"] is None
    assert git(repo, "log", "--format=%s", "main").splitlines()[2:] == ["start"]
    assert git(repo, "rev-parse", "HEAD") != start and (repo / "docs.md").read_text() == "# Docs\n"
    assert git(repo, "status", "--porcelain") == ""


def test_a_check_out_of_time_fails_and_a_member_that_stopped_short_keeps_its_work_on_its_branch(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    team = (
        'name = "short"\n[land]\ncheck = "sleep 30"\ntimeout_seconds = 0.5\n'
        + member("slow")
        + member("capped", max_turns=1)
    )
    script = turns("slow", call("write_file", path="slow.txt", content="slow")) + turns(
        "capped", call("write_file", path="capped.txt", content="capped")
    )
    code, out, text = run(tmp_path, repo, team, script, "--output-format", "json")
    result = out[-1]
    assert code == result["exitCode"] == 4  # (the member that stopped short)
    land = result["land"]
    assert list(land["members"]) == ["slow"]
    slow = land["members"]["slow"]
    assert slow["state"] == "check_failed" and slow["timedOut"] is True
    assert slow["tail"].endswith("[killed after 0.5 s timeout]")
    root = land["branch"].split("/")[1]
    assert git(repo, "show", f"zero/{root}/capped:capped.txt") == "capped"
    subject = git(repo, "log", "-1", "--format=%s", f"zero/{root}/capped")
    assert subject.startswith("capped: what session member_") and subject.endswith("changed (it ended max_turns)")
    assert worktree_list(repo) == [f"worktree {repo}"]


def test_isolation_comes_from_the_member_the_defaults_the_manifest_then_the_tools(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    mine = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"
    mine.mkdir(parents=True)
    (mine / "in-place.toml").write_text('name = "in-place"\nextends = "worker"\nisolation = "none"\n')
    (mine / "in-place-too.toml").write_text('name = "in-place-too"\nextends = "in-place"\n')
    team = write_script(
        tmp_path / "team.toml",
        'name = "where"\n'
        + member("writer")
        + member("reader", specialist="explorer")
        + member("manifest", specialist="in-place")
        + member("inherited", specialist="in-place-too")
        + member("asked", specialist="in-place", isolation="worktree"),
    )
    done = zero("swarm", "validate", str(team), "--cwd", str(repo), "--json")
    assert done.returncode == 0, done.stderr
    shown = {m["name"]: m["isolation"] for m in json.loads(done.stdout)["members"]}
    assert shown == {
        "writer": "worktree",
        "reader": "none",
        "manifest": "none",
        "inherited": "none",
        "asked": "worktree",
    }
    (mine / "in-place.toml").write_text('name = "in-place"\nextends = "worker"\nisolation = "sideways"\n')
    done = zero("specialists", "validate", str(mine / "in-place.toml"))
    assert done.returncode == 2
    path = mine / "in-place.toml"
    assert done.stdout == f"invalid  {path}:3: isolation: Input should be 'worktree' or 'none'\n"


def test_a_member_resumed_alone_works_in_its_worktree_and_leaves_its_work_on_its_branch(tmp_path: Path) -> None:
    repo = repository(tmp_path, {"app.py": APP})
    team = 'name = "alone"\n' + member("capped", max_turns=1)
    who = 'You are "capped"'
    script: list[dict[str, Any]] = [
        {"match": {"system": who, "turn": 1}, "tool_calls": [call("write_file", path="first.txt", content="1")]},
        {"match": {"system": who, "turn": 2}, "tool_calls": [call("write_file", path="more.txt", content="2")]},
        {"match": {"system": who, "turn": 3}, "text": "capped done"},
    ]
    code, out, _ = run(tmp_path, repo, team, script, "--output-format", "json")
    assert code == 4
    team_id, member_id = out[-1]["sessionId"], out[-1]["members"][0]["sessionId"]
    root = short_id(team_id)

    done = zero(
        "sessions",
        "resume",
        member_id,
        "finish it",
        *scripted(tmp_path / "script.json", repo),
        "--output-format",
        "stream-json",
    )

    assert done.returncode == 0, done.stderr
    land = [e for e in lines(done.stdout) if e["type"] == "land"]
    assert [(e["member"], e["state"], e["branch"], e["diffStat"]["files"]) for e in land] == [
        ("capped", "committed", f"zero/{root}/capped", 2)
    ]
    assert not (repo / "more.txt").exists() and not (repo / "first.txt").exists()  # never the main checkout
    assert git(repo, "show", f"zero/{root}/capped:more.txt") == "2"
    assert git(repo, "status", "--porcelain") == ""
    assert worktree_list(repo) == [f"worktree {repo}"]
    shown = " ".join(zero("sessions", "tree", team_id).stdout.replace("│", "").split())
    assert f"zero/{root}/capped +2 −0 in 2 files · not landed yet" in shown
    assert zero("swarm", "land", team_id).returncode == 0
    assert git(repo, "show", f"zero/{root}/land:more.txt") == "2"
    # resumed again, it changes nothing: nothing to land (it said committed, and every view "not landed yet")
    idle = tmp_path / "idle.json"
    reads = {
        "match": {"system": who, "prompt": "anything left?", "turn": 1},
        "tool_calls": [call("read_file", path="more.txt")],
    }
    idle.write_text(
        json.dumps({"turns": [reads, {"match": {"system": who, "prompt": "anything left?"}, "text": "no"}]})
    )
    again = zero(
        "sessions", "resume", member_id, "anything left?", *scripted(idle, repo), "--output-format", "stream-json"
    )
    assert again.returncode == 0, again.stderr
    assert [e["state"] for e in lines(again.stdout) if e["type"] == "land"] == ["nothing_to_land"]
    read = next(e for e in lines(again.stdout) if e["type"] == "tool_result")  # its landed work, where it left it
    assert read["status"] == "ok" and "2" in read["output"]  # (it went on from the snapshot, without it)
    assert "not landed yet" not in zero("sessions", "tree", team_id).stdout
    forked = zero("sessions", "fork", member_id)  # (its fork works in the checkout itself: said, not silent)
    assert forked.returncode == 0 and "worked in a worktree of its team's run" in forked.stderr
    assert f"the fork works in {repo} itself, not in a worktree" in forked.stderr


def test_a_signal_during_the_landing_check_stops_it_at_once_and_leaves_the_branch_as_it_was(tmp_path: Path) -> None:
    # (Ctrl-C and SIGTERM waited for the check, up to its 30 minutes, and the team exited 0)
    repo = repository(tmp_path, {"app.py": APP})
    mark = f"3600.{os.getpid()}"  # the check's own argument, to find it among the processes
    team = write_script(tmp_path / "team.toml", f'name = "t"\n[land]\ncheck = "exec sleep {mark}"\n' + member("w1"))
    script = write_script(
        tmp_path / "s.json",
        json.dumps({"turns": turns("w1", call("write_file", path="new.txt", content="hello\n"))}),
    )

    def checks() -> list[int]:
        found = []
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if proc.name.isdigit() and (proc / "cmdline").read_bytes() == f"sleep\0{mark}\0".encode():
                    found.append(int(proc.name))
        return found

    command = [ZERO, "swarm", "run", str(team), *scripted(script, repo), "--output-format", "json"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not checks():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    member_branch = next(b for b in git(repo, "branch", "--format=%(refname:short)").split() if b.endswith("/w1"))
    before = git(repo, "rev-parse", member_branch)
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()  # (if it never ended: not left behind)
        survivors = checks()
        for left in survivors:
            os.kill(left, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert survivors == []  # the check is gone, with its process group
    result = json.loads(out.splitlines()[-1])
    assert result["status"] == "interrupted" and result["land"]["stopped"] == ["w1"]
    assert git(repo, "rev-parse", member_branch) == before  # its work, as it was, for zero swarm land
    assert git(repo, "show", f"{member_branch}:new.txt") == "hello"


def test_a_writer_whose_name_cannot_name_its_worktree_is_refused_before_any_model_call(tmp_path: Path) -> None:
    # (validate said "in a worktree", then the run failed the member: its branch would be the land branch)
    repo = repository(tmp_path, {"app.py": APP})
    team = write_script(tmp_path / "team.toml", 'name = "t"\n' + member("land"))
    for argv in (["validate", str(team)], ["run", str(team), "--provider", "scripted", "--script", str(team)]):
        done = zero("swarm", *argv, "--cwd", str(repo))
        assert done.returncode == 2, (argv, done)
        assert f"{team}:3: member 'land': member name 'land' cannot name a worktree" in done.stderr, done.stderr
        assert 'or set isolation = "none" for it' in done.stderr
    alone = write_script(tmp_path / "alone.toml", 'name = "t"\n' + member("land", isolation="none"))
    assert zero("swarm", "validate", str(alone), "--cwd", str(repo)).returncode == 0


def test_a_member_done_when_the_run_is_stopped_is_named_as_not_landed_for_swarm_land(tmp_path: Path) -> None:
    # (it said "not landed (it did not complete)" of a member that had completed)
    repo = repository(tmp_path, {"app.py": APP})
    team = write_script(tmp_path / "team.toml", 'name = "t"\n' + member("w1") + member("w2"))
    script = write_script(
        tmp_path / "s.json",
        json.dumps(
            {
                "turns": turns("w1", call("write_file", path="one.txt", content="1\n"))
                + [{"match": {"system": 'You are "w2"'}, "text": "late", "delay": 60}]
            }
        ),
    )
    command = [ZERO, "swarm", "run", str(team), *scripted(script, repo), "--output-format", "json"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    deadline = time.monotonic() + 30
    while not any(m.member_name == "w1" and m.status == "completed" for m in store.list()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert json.loads(out.splitlines()[-1])["land"]["stopped"] == ["w1"]
