"""``CreateSpecialist`` in the shell, driven as a user drives it (a pseudo-terminal read through a screen
emulator): the draft is shown as the file's diff and asked about each time (no "for the session"); approved,
it is saved, trusted as shown, listed and run by ``Task``; denied, nothing is written; a draft wider than its
caller is refused without a question."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli import write_script
from support.drafts import CREATE_THEN_TASK, listed, narrow_caller
from support.terminal import Terminal

from zero.sessions import FileSessionStore

SHARPER = (
    '{ name = "reviewer", description = "Reviews diffs for bugs and risks.", tools = ["read-only"], '
    'prompt = "You review the diff you are given.\\nReport each bug with its file and line." }'
)
WRITER = '{ name = "w", description = "W", tools = ["edit"], prompt = "W" }'
SCRIPT = (
    CREATE_THEN_TASK
    + f"""
[[turns]]
match = {{ last = "Sharpen the reviewer", turn = 1 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {SHARPER} }}]
[[turns]]
match = {{ last = "Permission denied: the user refused CreateSpecialist", turn = 2 }}
text = "Left as it was."

[[turns]]
match = {{ last = "Sharpen it now", turn = 1 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {SHARPER} }}]
[[turns]]
match = {{ last = "Replaced .zero/specialists/reviewer.toml", turn = 2 }}
text = "Sharpened."

[[turns]]
match = {{ last = "Ask the scout", turn = 1 }}
tool_calls = [{{ name = "Task", arguments = {{ name = "scout", prompt = "Make a writer." }} }}]
[[turns]]
match = {{ system = "You are the scout", turn = 1 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {WRITER} }}]
[[turns]]
match = {{ system = "You are the scout", turn = 2 }}
text = "I may not make a writer."
[[turns]]
match = {{ last = "I may not make a writer", turn = 2 }}
text = "The scout could not."
"""
)


def answer(term: Terminal, key: str) -> str:
    """Press ``key`` once the shell asks; the screen it was asked on."""
    asked = term.wait_until(lambda _: term.cursor_line().startswith("allow? "), "the question")
    term.type(key, enter=False)
    return asked


@pytest.mark.timeout(300)  # paced by the screen: on a loaded machine it may take minutes
def test_create_specialist_in_the_shell(workspace: Path, tmp_path: Path) -> None:
    narrow_caller(tmp_path / "config" / "zero")
    manifest = workspace / ".zero" / "specialists" / "reviewer.toml"
    script = write_script(tmp_path / "s.toml", SCRIPT)
    term = Terminal("--provider", "scripted", "--script", str(script), cwd=workspace)
    try:
        term.wait_prompt()
        # approved: the new file shown whole, as a diff, asked about in auto mode, with no "for the session"
        term.type("Make a reviewer")
        asked = answer(term, "y")
        assert (
            "? CreateSpecialist needs approval: Saves a specialist: an agent's prompt and tools, which later runs"
            in asked
        )
        for line in (
            "+++ b/.zero/specialists/reviewer.toml",
            '+name = "reviewer"',
            '+description = "Reviews diffs for bugs."',
            '+    "read-only",',
            '+Report each bug with its file and line."""',
        ):
            assert line in asked, line
        assert "! a write in .zero/ is asked about every time (what is there runs by itself)" in asked
        assert "allow? [y] once  [n] no:\n" in asked and "[a]" not in asked
        term.wait_for("The reviewer found no bugs.")  # Task ran it in the same session
        assert manifest.read_text().startswith('name = "reviewer"\ndescription = "Reviews diffs for bugs."\n')
        spec = listed(workspace)["reviewer"]
        assert (spec["location"], spec["trusted"]) == ("project", True)  # trusted as the user saw it
        assert spec["tools"] == ["read_file", "list_directory", "glob", "grep"]
        # denied: the change to the existing file shown against it, and nothing written
        term.type("Sharpen the reviewer")
        asked = answer(term, "n")
        assert '-description = "Reviews diffs for bugs."' in asked
        assert '+description = "Reviews diffs for bugs and risks."' in asked
        term.wait_for("a note for the model")
        term.type("")
        term.wait_for("Left as it was.")
        assert 'description = "Reviews diffs for bugs."\n' in manifest.read_text()
        # asked again (no rule was made), approved this time: replaced, trusted as it is now
        term.type("Sharpen it now")
        answer(term, "y")
        term.wait_for("Sharpened.")
        assert 'description = "Reviews diffs for bugs and risks."\n' in manifest.read_text()
        assert listed(workspace)["reviewer"]["trusted"] is True
        # wider than its caller (the scout reads and delegates): refused with the reason, nobody asked
        asked_before = term.text().count("needs approval")
        term.type("Ask the scout")
        term.wait_for("The scout could not.")
        assert term.text().count("needs approval") == asked_before
        assert not (workspace / ".zero" / "specialists" / "w.toml").exists()
        term.type("/exit")
        assert term.wait_exit() == 0
    finally:
        term.close()
    sessions = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    (scout,) = [m for m in sessions.list() if m.specialist == "scout"]
    (refused,) = [e.event.output for e in sessions.events(scout.session_id) if e.event.kind == "tool_result"]
    assert refused == (
        "Error: tools: write_file, edit_file would be more than you have yourself (glob, grep, list_directory, "
        "read_file): a specialist you create gets at most your tools; drop them and call again"
    )
