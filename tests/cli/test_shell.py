"""The interactive shell, driven as a user drives it: ``zero`` in a pseudo-terminal, read through a
screen emulator."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support.cli import TASK_IN_A_WORKTREE, write_script, zero
from support.git import hermetic_git, make_repo, run_git
from support.llm_server import LLMServer, Reply, _chunk
from support.terminal import Terminal

from zero.sessions import FileSessionStore, short_id

SCRIPT = """
[[turns]]
match = { last = "What is the answer", turn = 1 }
text = "Let me read the README."
tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]
[[turns]]
match = { last = "The answer is 42", turn = 2 }
text = "The answer is **42**."

[[turns]]
match = { last = "Review and map", turn = 1 }
text = "Two specialists at once."
tool_calls = [
  { name = "Task", arguments = { name = "worker", description = "map src", prompt = "Map src." } },
  { name = "Task", arguments = { name = "tester", description = "review src", prompt = "Review src." } },
]
[[turns]]
match = { user = "Map src", turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "until [ -e go ]; do sleep 0.01; done" } }]
[[turns]]
match = { user = "Map src", turn = 2 }
text = "src holds app.py."
[[turns]]
match = { user = "Review src", turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "until [ -e go ]; do sleep 0.01; done" } }]
[[turns]]
match = { user = "Review src", turn = 2 }
text = "One TODO in app.py."
[[turns]]
match = { last = "One TODO", turn = 2 }
text = "Both reported."

[[turns]]
match = { last = "Write the files", turn = 1 }
tool_calls = [{ name = "write_file", arguments = { path = "a.txt", content = "alpha" } }]
[[turns]]
match = { last = "a.txt", turn = 2 }
tool_calls = [{ name = "write_file", arguments = { path = "b.txt", content = "beta" } }]
[[turns]]
match = { last = "not b, please", turn = 3 }
text = "I wrote a.txt only."

[[turns]]
match = { last = "Run the long job", turn = 1 }
text = "Starting it."
tool_calls = [{ name = "bash", arguments = { command = "sleep 31.7" } }]

[[turns]]
match = { last = "Do you remember" }
text = "You asked about the answer: 42."
"""


MORE = """
[[turns]]
match = { last = "<file path=\\"README.md\\">" }
text = "I see the README you attached."

[[turns]]
match = { last = "first line\\nsecond line" }
text = "Two lines received."

[[turns]]
match = { last = "Check twice", turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "echo checking one" } }]
[[turns]]
match = { last = "checking one", turn = 2 }
tool_calls = [{ name = "bash", arguments = { command = "echo checking two" } }]
[[turns]]
match = { last = "checking two", turn = 3 }
text = "Checked twice."

[[turns]]
match = { last = "Ask the worker", turn = 1 }
tool_calls = [{ name = "Task", arguments = { name = "worker", description = "write it", prompt = "Write c.txt." } }]
[[turns]]
match = { system = "You are the worker", turn = 1 }
tool_calls = [{ name = "write_file", arguments = { path = "c.txt", content = "gamma" } }]
[[turns]]
match = { system = "You are the worker", turn = 2 }
text = "c.txt written."
[[turns]]
match = { last = "c.txt written", turn = 2 }
text = "The worker is done."

[[turns]]
match = { last = "Summarize this conversation" }
text = "We talked about the README, git and c.txt."

[[turns]]
match = { last = "Draft an AGENTS.md" }
text = "Here is a draft."
"""


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def shell(workspace: Path, script: Path, *args: str) -> Terminal:
    return Terminal("--provider", "scripted", "--script", str(script), *args, cwd=workspace)


def answer(term: Terminal, key: str) -> str:
    """Press ``key`` once the shell asks (its cursor on the question); the screen it was asked on."""
    asked = term.wait_until(lambda _: term.cursor_line().startswith("allow? "), "the question")
    term.type(key, enter=False)
    return asked


@pytest.mark.timeout(300)  # a long scenario, paced by the screen: on a loaded machine it may take minutes
def test_a_session_in_the_shell(workspace: Path, tmp_path: Path) -> None:
    (workspace / "AGENTS.md").write_text("Always answer in English.")
    script = write_script(tmp_path / "s.toml", SCRIPT + MORE)
    term = shell(workspace, script)
    try:
        header = re.sub(r"\s+", " ", term.wait_prompt())  # (a long path may wrap the line at any space)
        assert re.search(r"scripted/scripted · auto · new session zero_", header)
        term.wait_for("0 tokens · unknown")  # the bar under the prompt: no cost of $0 for an unpriced model
        # a question answered after a file read; the text between tool calls shows too
        term.type("What is the answer?")
        screen = term.wait_for("The answer is 42.")
        assert "Let me read the README." in screen and "→ read_file README.md" in screen
        assert "**42**" not in screen  # Markdown, rendered
        # two Task children in one turn: both on screen at once while they run (each waits for the file "go",
        # made once the screen shows both), then one line each
        term.type("Review and map the code")
        spinning = [re.compile(rf"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] {name} · .*until \[ -e go \]") for name in ("worker", "tester")]
        live = term.wait_until(lambda screen: all(p.search(screen) for p in spinning), "both children running")
        assert "⇠" not in live
        (workspace / "go").touch()
        done = term.wait_for("Both reported.")
        ended = r"⇠ (worker|tester) completed · [\d.]+ s · [\d,]+ tokens · unknown · child_\w+"
        assert set(re.findall(ended, term.text())) == {"tester", "worker"}, done  # (what scrolled away too)
        # ask mode: one write approved, one denied with a note the model reads
        term.type("/permission ask")
        term.wait_for("permission mode: ask")
        term.type("Write the files")
        term.wait_for("allow? [y] once")
        assert "+alpha" in term.screen()  # the write shown as a diff
        answer(term, "y")
        term.wait_for("b/b.txt")
        answer(term, "n")
        term.wait_for("a note for the model")
        term.type("not b, please")
        term.wait_for("I wrote a.txt only.")
        assert (workspace / "a.txt").read_text() == "alpha" and not (workspace / "b.txt").exists()
        # Ctrl-C during a long command: back at the prompt, the turn cancelled, the command gone
        term.type("/permission auto")
        term.wait_for("permission mode: auto")
        term.type("Run the long job")
        term.wait_for("→ bash sleep 31.7")
        term.interrupt()
        term.wait_for("[cancelled]")
        term.wait_prompt()
        assert subprocess.run(["pgrep", "-f", "sleep 31.7"], capture_output=True).stdout == b""
        session_id = re.search(r"new\s+session\s+(zero_\w+)", term.text()).group(1)  # type: ignore[union-attr]
        runs = [e.event for e in store().events(session_id) if e.event.kind == "run_end"]
        assert runs[-1].status == "cancelled" and [r.status for r in runs[:-1]] == ["completed"] * 3
        # /agents and /cost agree with zero sessions tree
        term.type("/cost")
        term.wait_for("with children")
        cost = term.wait_prompt()  # all of it
        own, total = (int(n.replace(",", "")) for n in re.findall(r"([\d,]+) tokens", cost.split("/cost")[-1])[:2])
        term.type("/agents")
        term.wait_for("tester ")
        agents = term.wait_prompt()
        tree = json.loads(zero("sessions", "tree", session_id, "--json").stdout)
        assert tree["usage"]["totalTokens"] == own and tree["subtreeUsage"]["totalTokens"] == total
        for child in tree["children"]:
            assert child["sessionId"] in agents
            assert f"{child['subtreeUsage']['totalTokens']:,} tokens" in agents
        # attachments, multi-line input, "allow for this session", a child's approval, the ceiling
        term.type("/permission ask")
        term.type("Look at @README.md please")
        term.wait_for("I see the README you attached.")
        term.type("first line\\")  # a trailing backslash continues the message on the next line
        term.type("second line")
        term.wait_for("Two lines received.")
        asked_before = term.text().count("needs approval")
        term.type("Check twice")
        term.wait_for("$ echo checking one")
        answer(term, "a")  # always, for `echo checking ...` in this session: the second call is not asked
        term.wait_for("Checked twice.")
        assert term.text().count("needs approval") == asked_before + 1
        term.type("Ask the worker")
        term.wait_for("write_file (worker) needs approval")
        assert "+gamma" in answer(term, "y")  # the child's request, named, with its diff
        term.wait_for("The worker is done.")
        assert (workspace / "c.txt").read_text() == "gamma"
        term.type("/permission unsafe")  # never above the mode the shell started with
        term.wait_for("narrowed to 'auto'")
        term.type("/compact")
        term.wait_for("compacted")
        term.type("/init")
        term.wait_for("Here is a draft.")
        for command, shows in (
            ("/help", "/compact"),
            ("/specialists", "@code-review"),
            ("/tree", "worker"),
            ("/sessions", "completed"),
            ("/model other-model", "model: other-model from the next turn"),
            ("/nope", "no command /nope"),
        ):
            term.type(command)
            term.wait_for(shows)
        term.type("/exit")
        assert term.wait_exit() == 0
    finally:
        term.close()
    log = [e.event for e in store().events(session_id)]
    system = next(e for e in log if e.kind == "message" and e.role == "system")
    assert "Always answer in English." in system.content  # AGENTS.md is part of every system prompt
    decisions = [e for e in log if e.kind == "permission_decision"]
    assert [d.granted for d in decisions] == [True, False, True, True]  # a.txt, b.txt, echo, the worker's...
    assert decisions[2].reason == "approved: allowed for this session"
    assert any(e.kind == "compaction" for e in log)
    # --resume ID continues with the history; --continue picks the same session
    term = shell(workspace, script, "--resume", session_id[-12:])
    try:
        assert f"resumed session {session_id}" in re.sub(r"\s+", " ", term.wait_prompt())
        term.type("Do you remember?")
        term.wait_for("You asked about the answer: 42.")
        term.wait_prompt()  # (a key typed while no prompt reads goes to the terminal's line editing: lost)
        term.child.sendcontrol("d")  # Ctrl-D leaves too
        assert term.wait_exit() == 0
    finally:
        term.close()
    term = shell(workspace, script, "--continue")
    try:
        assert f"resumed session {session_id}" in re.sub(r"\s+", " ", term.wait_prompt())
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.close()


def test_text_streams_onto_the_screen_before_the_message_completes(workspace: Path) -> None:
    words = [f"word{i} " for i in range(20)]
    events: list[tuple[str | None, str]] = [(None, _chunk({"role": "assistant", "content": ""}))]
    events += [(None, _chunk({"content": w})) for w in words]
    events += [(None, _chunk({}, "stop")), (None, "[DONE]")]
    with LLMServer(lambda request: Reply(events=events, pace=0.03)) as server:
        term = Terminal("--base-url", server.url + "/v1", "--model", "local", cwd=workspace)
        try:
            term.wait_prompt()
            term.type("Talk slowly")
            partial = term.wait_for("word5 ")
            assert "word19" not in partial  # shown while it streams, not at the end
            term.wait_for("word19")
            term.type("/exit")
            assert term.wait_exit() == 0
        finally:
            term.close()


DELEGATED = """
[[turns]]
match = { system = "You are the worker", turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "sleep 32.9" } }]
[[turns]]
match = { last = "Still there?" }
text = "Yes."
"""


def test_ctrl_c_during_a_delegation_stops_the_child_and_brings_the_prompt_back(workspace: Path, tmp_path: Path) -> None:
    term = shell(workspace, write_script(tmp_path / "s.toml", DELEGATED), "--permission-mode", "auto")
    try:
        term.wait_prompt()
        term.type("@worker Run the slow build")
        term.wait_until(
            lambda _: b"sleep 32.9" in subprocess.run(["pgrep", "-af", "sleep 32.9"], capture_output=True).stdout,
            "the child's command",
        )
        term.interrupt()
        term.wait_for("[cancelled]")
        term.wait_prompt()  # one Ctrl-C: the turn and its child stop, the shell goes on
        assert subprocess.run(["pgrep", "-f", "sleep 32.9"], capture_output=True).stdout == b""
        term.type("Still there?")
        term.wait_for("Yes.")
        term.wait_prompt()
        term.type("/exit")  # a killed shell may not have written the child's end yet
        assert term.wait_exit() == 0
    finally:
        term.close()
    [child] = [m for m in store().list() if m.session_kind == "child"]
    assert child.status == "cancelled" and child.parent_session_id


def test_sessions_left_through_clear_read_as_what_they_did(workspace: Path, tmp_path: Path) -> None:
    """One that talked reads completed, one never prompted pending: neither as a run that crashed."""
    term = shell(workspace, write_script(tmp_path / "s.toml", DELEGATED))
    try:
        term.wait_prompt()
        term.type("Still there?")
        term.wait_for("Yes.")
        term.wait_prompt()
        term.type("/clear")  # a new session; the first is closed
        term.wait_prompt()
        term.type("/clear")  # and this one never ran
        term.wait_prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.close()
    statuses = sorted(m.status for m in store().list())
    assert statuses == ["completed", "pending", "pending"]  # (the last, open when the shell left, never ran)


def test_without_a_terminal_zero_says_to_use_exec(workspace: Path) -> None:
    done = zero("--cwd", str(workspace), input="hi")
    assert done.returncode == 2 and 'use zero exec "PROMPT"' in done.stderr


def test_a_task_child_in_a_worktree_shows_its_branch_and_diff_stat_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hermetic_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "repo")
    term = shell(repo, write_script(tmp_path / "s.toml", TASK_IN_A_WORKTREE))
    try:
        term.wait_prompt()
        term.type("Add a module aside")
        term.wait_for("It is on a branch.")
        ended = re.search(
            r"⇠ worker completed · .* · (child_\w+)\n\s+branch (zero/\w+/worker) \(\+2 −0 in 1 file\)", term.text()
        )
        assert ended is not None, term.text()
        assert ended.group(2) == f"zero/{short_id(ended.group(1))}/worker"
        assert run_git(repo, "show", f"{ended.group(2)}:d.py") == "d = 1\nd += 1"
        assert not (repo / "d.py").exists()  # its work is on its branch, not in the user's checkout
        term.type("/exit")
        assert term.wait_exit() == 0
    finally:
        term.close()
