"""The shell as users of Claude Code, aider and Codex expect it, in a pseudo-terminal: after a team run,
``@specialist`` answers in the conversation, a bar that agrees with /cost, children whose clocks move,
a command menu, single-key answers, failed calls said once, and reopening where the session left off."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from support.cli import write_script, zero
from support.terminal import Terminal

from zero.sessions import FileSessionStore, messages_from_events, short_id

SCRIPT = """
[[turns]]
match = { system = "You are the tester", turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "sleep 1.2" } }]
[[turns]]
match = { system = "You are the tester", turn = 2 }
text = "Sessions are written by sessions/_writer.py."
[[turns]]
match = { last = "What did it find" }
text = "It found the writer."
[[turns]]
match = { last = "Fail now" }
error = { kind = "auth" }
[[turns]]
match = { last = "Summarize this conversation" }
error = { kind = "bad_request" }
[[turns]]
match = { system = 'You are "solo"' }
text = "solo done"
times = 0
"""
TEAM = 'name = "t"\n[[members]]\nname = "solo"\nspecialist = "explorer"\nprompt = "Go."\n'


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def shell(workspace: Path, *args: str) -> Terminal:
    return Terminal(*args, cwd=workspace)


def elapsed(screen: str) -> float | None:
    found = re.search(r"tester · [^·\n]*· (\d+\.\d)s", screen)
    return float(found.group(1)) if found else None


def test_the_shell_habits(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", SCRIPT)
    flags = ("--provider", "scripted", "--script", str(script))
    # the state the quickstart leaves: a team run is the newest session of the folder
    team = zero("swarm", "run", str(write_script(tmp_path / "team.toml", TEAM)), *flags, "--cwd", str(workspace))
    assert team.returncode == 0, team.stderr
    team_id = next(m.session_id for m in store().list() if m.session_kind == "team")
    for args, says in (
        (("--continue",), f"its newest session, {team_id}, is a team run"),
        (("--resume", team_id), f"session {team_id} is a team run, not a conversation: continue it with zero swarm"),
    ):
        term = shell(workspace, *flags, *args)
        try:
            assert term.wait_exit() == 2
            assert says in term.text().replace("\n", ""), term.text()
        finally:
            term.close()
    term = shell(workspace, *flags, "--model", "m1")
    try:
        term.wait_prompt()
        term.type("/", enter=False)  # the menu of commands opens as "/" is typed
        term.wait_until(lambda menu: all(c in menu for c in ("/compact", "/agents", "/resume")), "the menu")
        term.type("\x7f", enter=False)
        # @specialist: its answer joins the conversation; the file attached is confirmed
        term.type("@tester Where are sessions written? @README.md")
        term.wait_for("attached @README.md (", everything=True)
        seen: list[float] = []
        deadline = time.monotonic() + 10
        while len(set(seen)) < 2:  # the running child's clock moves between its events
            assert time.monotonic() < deadline, term.screen()
            term.pump(0.1)
            if (value := elapsed(term.screen())) is not None:
                seen.append(value)
        term.wait_for("Sessions are written by sessions/_writer.py.")
        term.wait_prompt()
        term.type("/cost")
        term.wait_for("with children")
        cost = term.wait_prompt()  # all of it, and the bar under the prompt
        total = re.findall(r"with children ([\d,]+) tokens", cost)[-1]
        assert f" {total} tokens ·" in term.screen()  # the bar counts this session once, children included
        term.type("What did it find?")
        term.wait_for("It found the writer.")
        # a failed call is said once; /compact failing leaves the shell at its prompt
        before = term.text().count("scripted auth error")
        term.type("Fail now")
        term.wait_prompt()
        assert term.text().count("scripted auth error") - before == 1, term.text()
        term.type("/compact")
        term.wait_for("/compact failed:")
        term.wait_prompt()
        term.type("/exit")
        assert term.wait_exit() == 0
    finally:
        term.close()
    session_id = next(m.session_id for m in store().list() if m.title.startswith("@tester"))
    history = messages_from_events(e.event for e in store().events(session_id))
    task = next(m for m in history if m.role == "tool" and m.name == "Task")
    assert "Sessions are written by sessions/_writer.py." in task.content  # what the child found, for later turns
    # --continue: the session's own provider and model, and where it left off
    term = shell(workspace, "--continue", "--script", str(script))
    try:
        header = re.sub(r"\s+", " ", term.wait_prompt())
        assert f"scripted/m1 · auto · resumed session {session_id}" in header
        assert "› What did it find?" in header and "It found the writer." in header
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.close()
    # --resume without an id: a list of this folder's conversations to pick from
    term = shell(workspace, *flags, "--resume")
    try:
        term.wait_for("resume which?")
        listed = term.screen()
        assert short_id(session_id) in listed and short_id(team_id) not in listed
        assert "@tester Where are sessions written? @README.md" in listed  # titled by its first message
        term.type("1")
        assert f"resumed session {session_id}" in re.sub(r"\s+", " ", term.wait_prompt())
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.close()


def test_help_and_version_are_commands() -> None:
    assert zero("help").stdout.startswith("usage: zero")
    assert zero("version").stdout.startswith("zero ")
