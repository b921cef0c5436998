"""One total everywhere: after a kill -9, a resume and a fork, every view of a run shows the tokens and cost
its sessions' own logs hold (a parent's log lacks the ``child_end`` of a child the dead run left open)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pyte
from support.cli import ZERO, scripted, write_script, zero
from support.terminal import Terminal

from zero.cli import main

LEAD = """
name = "lead"
description = "Has a worker look around, then reports."
tools = ["read-only", "execute", "delegate"]
prompt = "You are the lead."
"""

TEAM = """
name = "trio"
[defaults]
model = "gpt-4.1-mini"
[budget]
tokens = 100_000
cost_usd = 1.0
[[members]]
name = "a"
specialist = "explorer"
prompt = "Go a."
[[members]]
name = "b"
specialist = "lead"
depends_on = ["a"]
prompt = "Go b."
[[members]]
name = "c"
specialist = "explorer"
depends_on = ["b"]
prompt = "Go c."
"""

LOOK = """tool_calls = [
  { name = "Task", arguments = { name = "worker", description = "look", prompt = "Look around." } },
]
[[turns]]
match = { user = "Look around", turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "echo looked" } }]
[[turns]]
match = { user = "Look around", turn = 2 }
delay = 60
text = "never said: the process is killed while this child waits for its model"
"""
"""A Task child that runs a command (its call, and all before it, is on record before the command runs),
then waits for its model until its process is killed."""

# Each process reads the script afresh: a member's first run and its resumed one ("... resumed now")
# are told apart by the conversation's last message.
SCRIPT = (
    """
[[turns]]
match = { system = 'You are "a"', turn = 1 }
tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]
[[turns]]
match = { system = 'You are "a"', turn = 2 }
text = "a done"
[[turns]]
match = { system = 'You are "b"', last = "Go b" }
"""
    + LOOK
    + """
[[turns]]
match = { system = 'You are "b"', last = "resumed now" }
text = "b done"
[[turns]]
match = { system = 'You are "c"', last = "Go c" }
error = { kind = "bad_request" }
[[turns]]
match = { system = 'You are "c"', last = "resumed now" }
text = "c done"
"""
)


class _Terminal(io.StringIO):
    """Standard output that says it is a terminal: ``zero swarm`` draws its live view into it."""

    def isatty(self) -> bool:
        return True


def _screen(text: str, cols: int = 120, rows: int = 120) -> str:
    screen = pyte.Screen(cols, rows)
    screen.set_mode(pyte.modes.LNM)
    pyte.Stream(screen).feed(text)
    return "\n".join(line.rstrip() for line in screen.display)


def _tokens(text: str) -> int:
    return int(text.replace(",", ""))


def _line_total(text: str, name: str) -> tuple[int, str]:
    """(tokens, cost) of the tree line of ``name`` (a team line: its subtree)."""
    found = re.search(rf"{name}(?: [0-9a-f]{{8}})? · [^\n]*?([\d,]+) tok (\$[\d.]+|unknown)", text)
    assert found, text
    return _tokens(found.group(1)), found.group(2)


def views(session_id: str) -> tuple[int, float | None]:
    """The tokens and cost of ``session_id``'s subtree, checked to be the same in every view of the sessions:
    ``sessions tree`` (text and JSON), ``sessions list`` (text and JSON) and ``swarm watch`` of a team."""
    tree = json.loads(zero("sessions", "tree", session_id, "--json").stdout)
    tokens, cost = tree["subtreeUsage"]["totalTokens"], tree["subtreeUsage"]["costUsd"]
    shown = "unknown" if cost is None else f"${cost:.4f}"
    top = zero("sessions", "tree", session_id).stdout.split(" · completed")[0]
    if tree["sessionKind"] == "team":
        assert _line_total(top, "") == (tokens, shown)
    elif tree["children"]:  # an agent's line: its own, then its subtree's
        assert re.search(rf"\(subtree {tokens:,} tok {re.escape(shown)}\)", top.replace("\n", "")), top
    elif tree["usage"]["calls"]:
        assert _line_total(top, "") == (tokens, shown)
    else:
        assert " tok " not in top  # a session that made no call shows none
    rows = {r["sessionId"]: r for r in json.loads(zero("sessions", "list", "--json", "--limit", "0").stdout)}
    row = rows[session_id]
    assert (row["subtreeUsage"]["totalTokens"], row["subtreeUsage"]["costUsd"]) == (tokens, cost)
    own = row["usage"]["totalTokens"]
    assert own + row["childrenUsage"]["totalTokens"] == tokens
    listed = next(line for line in zero("sessions", "list").stdout.splitlines() if line.startswith(session_id[-12:-4]))
    assert re.search(rf" {own:,}/{tokens:,} +{re.escape(shown)} ", listed), listed
    for child in tree["children"]:  # each member's (or child's) total, in both
        assert rows[child["sessionId"]]["subtreeUsage"] == child["subtreeUsage"]
    if tree["sessionKind"] == "team":
        watched = zero("swarm", "watch", session_id[-12:])  # a short id, as the tree shows it
        assert _line_total(watched.stdout, tree["teamName"]) == (tokens, shown)
    return tokens, cost


def _logged_children(session_id: str) -> int:
    """The tokens the ``child_end`` events of a session's own log add up to (its metadata's childrenUsage)."""
    shown = json.loads(zero("sessions", "show", session_id, "--json").stdout)
    return int(shown["metadata"]["childrenUsage"]["totalTokens"])


def _members(tree: dict[str, Any]) -> dict[str, int]:
    return {c["memberName"]: c["subtreeUsage"]["totalTokens"] for c in tree["children"]}


def test_a_team_killed_resumed_and_forked_shows_one_total_everywhere(workspace: Path, tmp_path: Path) -> None:
    specialists = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"
    specialists.mkdir(parents=True)
    (specialists / "lead.toml").write_text(LEAD)
    team = write_script(tmp_path / "team.toml", TEAM)
    flags = scripted(write_script(tmp_path / "s.toml", SCRIPT), workspace)
    # 1. kill -9 while b's Task child waits for its model: its first call is in its log (a command's call is
    # written before it runs, with everything before it), and so is b's, made before the child's session
    run = subprocess.Popen(
        [ZERO, "swarm", "run", str(team), *flags, "--output-format", "stream-json"], stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    for line in run.stdout:
        event = json.loads(line)
        if event["type"] == "tool_result" and event.get("sessionId", "").startswith("child_"):
            break
    run.kill()
    run.communicate()
    # 2. resumed: b goes on (its child ended interrupted), c fails (the model refuses its call: exit 3); the
    # result says what the logs hold
    first = zero("swarm", "resume", "last", *flags, "--output-format", "json")
    assert first.returncode == 3, first.stderr
    result = json.loads(first.stdout)
    team_id = result["sessionId"]
    tokens, cost = views(team_id)
    assert (result["usage"]["totalTokens"], result["usage"]["costUsd"]) == (tokens, cost)
    assert (result["budget"]["used"]["tokens"], result["budget"]["used"]["costUsd"]) == (tokens, cost)
    tree = json.loads(zero("sessions", "tree", team_id, "--json").stdout)
    assert {m["name"]: m["usage"]["totalTokens"] for m in result["members"]} == _members(tree)
    members = {c["memberName"]: c["sessionId"] for c in tree["children"]}
    b = next(c for c in tree["children"] if c["memberName"] == "b")
    [child] = b["children"]
    assert child["status"] == "interrupted" and child["usage"]["totalTokens"] > 0
    assert b["subtreeUsage"]["totalTokens"] == b["usage"]["totalTokens"] + child["usage"]["totalTokens"]
    # the parents' own logs add up too: the dead run's open children got their child_end
    assert _logged_children(members["b"]) == child["usage"]["totalTokens"]
    assert _logged_children(team_id) == tokens
    done = [line for line in zero("sessions", "tree", team_id).stdout.splitlines() if "✓" in line]
    assert len(done) == 2 and all(line.endswith("· completed") for line in done)  # no reason of a run before
    # 3. resumed again with the live view: a and b stay completed, c runs; its footer is the same fold
    out, err = _Terminal(), io.StringIO()
    os.environ["COLUMNS"] = "120"
    try:
        code = main(["swarm", "resume", team_id[-12:], *flags], stdout=out, stderr=err, stdin=io.StringIO())
    finally:
        del os.environ["COLUMNS"]
    assert code == 0, err.getvalue()
    tokens, cost = views(team_id)
    assert tokens > result["usage"]["totalTokens"]
    screen = _screen(out.getvalue())
    live = screen.split("Totals:")[0]
    assert re.search(rf"tokens [━─]+ +\d+% {tokens:,} / 100,000", live), screen
    assert re.search(rf"cost +[━─]+ +\d+% \${cost:.4f} / \$1\.0000", live), screen
    assert _line_total(live, "trio") == (tokens, f"${cost:.4f}")
    assert re.search(r"── ✓ a · explorer .* · completed\n", live) and "3 completed" in live  # not pending
    done = [line for line in live.splitlines() if "✓" in line]
    assert len(done) == 4 and all(line.endswith("· completed") for line in done)  # no reason of a run before
    assert f"Totals: tokens {tokens:,} of 100,000 · cost ${cost:.4f} of $1.00" in screen
    # 4. forked: a session of its own, pending until it runs; the team's totals stay
    forked = zero("sessions", "fork", members["b"], "--json")
    fork = json.loads(forked.stdout)
    assert forked.returncode == 0 and fork["status"] == "pending"
    assert views(team_id) == (tokens, cost)
    assert views(fork["sessionId"]) == (0, 0.0)
    newest = zero("swarm", "watch", "last")  # the newest team run, though the fork is newer
    assert newest.returncode == 0 and _line_total(newest.stdout, "trio") == (tokens, f"${cost:.4f}")
    listed = zero("sessions", "list", "--status", "pending").stdout
    assert re.search(rf"{fork['sessionId'][-12:-4]}  fork   pending .* 0/0 +\$0\.0000 .* trio: b \(fork\)", listed)


SHELL = (
    """
[[turns]]
match = { last = "Delegate a look", turn = 1 }
"""
    + LOOK
    + """
[[turns]]
match = { last = "And now?" }
text = "All done."
"""
)


BAR = re.compile(r"· ([\d,]+) tokens · (\$[\d.]+|unknown) *$")


def _bar(term: Terminal) -> tuple[int, str]:
    """The tokens and cost the shell's bar (under the prompt) shows."""
    screen = term.wait_until(lambda s: BAR.search(s.rstrip()), "the bar")
    found = BAR.search(screen.rstrip())
    assert found
    return _tokens(found.group(1)), found.group(2)


def _cost(term: Terminal) -> tuple[int, str]:
    """What ``/cost`` says the session and its children spent."""
    term.type("/cost")
    said = term.wait_until(lambda s: re.search(r"with children [\d,]+ tokens, \S+\n", s), "/cost's answer")
    found = re.findall(r"with children ([\d,]+) tokens, (\S+)\n", said)[-1]
    return _tokens(found[0]), found[1]


def test_a_shell_session_killed_with_a_child_open_shows_one_total_everywhere(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", SHELL)
    flags = ("--provider", "scripted", "--script", str(script), "--model", "gpt-4.1-mini")
    term = Terminal(*flags, cwd=workspace)
    try:
        header = re.sub(r"\s+", " ", term.wait_prompt())  # (a long path may wrap the line at any space)
        session_id = re.search(r"new session (zero_\w+)", header).group(1)  # type: ignore[union-attr]
        assert _bar(term) == (0, "$0.0000")
        term.type("Delegate a look")
        # the child ran its command (its call, and all before it, on record) and waits for its model
        term.wait_until(lambda s: re.search(r"worker · .*1 turn .*thinking\.\.\.", s), "the child thinking")
    finally:
        term.close()  # kill -9
    term = Terminal(*flags, "--resume", session_id[-12:], cwd=workspace)
    try:
        term.wait_prompt()
        tokens, cost = views(session_id)
        assert tokens > 0 and _bar(term) == (tokens, f"${cost:.4f}") == _cost(term)
        [child] = json.loads(zero("sessions", "tree", session_id, "--json").stdout)["children"]
        assert child["status"] == "interrupted" and 0 < child["usage"]["totalTokens"] < tokens
        assert _logged_children(session_id) == child["usage"]["totalTokens"]  # its child_end, recorded
        term.type("And now?")
        term.wait_for("All done.")
        term.wait_prompt()
        tokens, cost = views(session_id)
        assert _bar(term) == (tokens, f"${cost:.4f}") == _cost(term)
        term.type("/exit")
        assert term.wait_exit() == 0
    finally:
        term.close()


def test_an_unpriced_model_costs_unknown_in_every_view_calls_or_not(workspace: Path, tmp_path: Path) -> None:
    """A member skipped before it ran, a fork, an empty session: of a model without a price, their cost is
    unknown, never $0.0000 (and so is any total they are part of)."""
    team = write_script(
        tmp_path / "team.toml",
        'name = "pair"\n[[members]]\nname = "a"\nspecialist = "explorer"\nprompt = "Go a."\n'
        '[[members]]\nname = "b"\nspecialist = "explorer"\ndepends_on = ["a"]\nprompt = "Go b."\n',
    )
    script = write_script(tmp_path / "s.toml", '[[turns]]\nerror = { kind = "bad_request" }\n')
    done = zero("swarm", "run", str(team), *scripted(script, workspace), "--output-format", "json")
    result = json.loads(done.stdout)
    assert [(m["name"], m["status"], m["costUsd"]) for m in result["members"]] == [
        ("a", "failed", None),
        ("b", "skipped", None),
    ]
    assert result["costUsd"] is None
    members = {m["name"]: m["sessionId"] for m in result["members"]}
    fork = json.loads(zero("sessions", "fork", members["a"], "--json").stdout)
    for sid in (result["sessionId"], members["b"], fork["sessionId"]):
        assert views(sid)[1] is None, sid
    rows = zero("sessions", "list").stdout.splitlines()[1:]
    assert len(rows) == 4 and all(" unknown " in row for row in rows), rows
    assert "$0.0000" not in zero("sessions", "tree", result["sessionId"]).stdout
