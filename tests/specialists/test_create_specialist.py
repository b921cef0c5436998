"""``CreateSpecialist``: an agent drafts a specialist, which is checked by the manifest loader, never wider than
its caller, saved in the project's folder only with approval (``zero exec`` has no one to ask: denied, unless
``unsafe``), whole or not at all, and usable by ``Task`` in the same run."""

from __future__ import annotations

import os
from pathlib import Path

from support.cli import scripted, write_script, zero
from support.drafts import CREATE_THEN_TASK, REVIEWER, listed, narrow_caller

from zero.sessions import FileSessionStore

SAVED = """name = "reviewer"
description = "Reviews diffs for bugs."
tools = [
    "read-only",
]
prompt = \"\"\"
You review the diff you are given.
Report each bug with its file and line.\"\"\"
"""
"""The manifest REVIEWER's draft makes, byte for byte."""

UNSAVED = (
    CREATE_THEN_TASK
    + """
[[turns]]
match = { turn = 2 }
text = "Not saved."
"""
)


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def tool_results() -> list[str]:
    """What the latest top-level agent's tools answered, in order."""
    top = max((m for m in store().list() if m.session_kind == ""), key=lambda m: m.created_at)
    log = [e.event for e in store().events(top.session_id)]
    return [e.output for e in log if e.kind == "tool_result"]


def run(workspace: Path, tmp_path: Path, script: str, prompt: str, *flags: str) -> str:
    done = zero("exec", *scripted(write_script(tmp_path / "s.toml", script), workspace), *flags, prompt)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_exec_denies_it_with_no_one_to_approve(workspace: Path, tmp_path: Path) -> None:
    assert run(workspace, tmp_path, UNSAVED, "Make a reviewer") == "Not saved.\n"
    assert tool_results() == [
        "Permission denied: CreateSpecialist needs approval in auto mode and this run has no one to approve it. "
        "Continue without it, or say what you would have done. Saving a specialist always asks; run with "
        "--permission-mode unsafe to save it unasked."
    ]
    assert not (workspace / ".zero").exists()
    assert "reviewer" not in listed(workspace)


def test_unsafe_saves_it_and_task_runs_it_in_the_same_run(workspace: Path, tmp_path: Path) -> None:
    out = run(workspace, tmp_path, UNSAVED, "Make a reviewer", "--permission-mode", "unsafe")
    assert out == "The reviewer found no bugs.\n"
    assert (workspace / ".zero" / "specialists" / "reviewer.toml").read_text() == SAVED
    created = tool_results()[0]
    assert created == (
        "Created .zero/specialists/reviewer.toml: the specialist 'reviewer' is ready; start it with Task (name "
        "'reviewer').\ntools: read_file, list_directory, glob, grep\n"
        "Saved unasked, so not trusted: zero specialists trust reviewer grants what it asks for."
    )
    (child,) = [m for m in store().list() if m.session_kind == "child"]
    assert child.specialist == "reviewer" and child.status == "completed"
    spec = listed(workspace)["reviewer"]
    assert spec["location"] == "project" and spec["description"] == "Reviews diffs for bugs."
    assert os.listdir(workspace / ".zero" / "specialists") == ["reviewer.toml"]  # no spare file left


BAD = '{ name = "reviewer", tools = ["bsh"], max_turns = 0, prompt = "Review." }'
BAD_THEN_GOOD = f"""
[[turns]]
match = {{ last = "Make a reviewer", turn = 1 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {BAD} }}]
[[turns]]
match = {{ last = "not a valid manifest", turn = 2 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {REVIEWER} }}]
[[turns]]
match = {{ turn = 3 }}
text = "Saved on the second try."
"""


def test_a_bad_draft_is_an_error_naming_each_key_and_the_model_retries(workspace: Path, tmp_path: Path) -> None:
    out = run(workspace, tmp_path, BAD_THEN_GOOD, "Make a reviewer", "--permission-mode", "unsafe")
    assert out == "Saved on the second try.\n"
    bad, good = tool_results()
    assert bad == (
        "Error: the draft is not a valid manifest: tools: unknown tool or category 'bsh' (did you mean \"bash\"?); "
        "max_turns: Input should be greater than or equal to 1. Fix it and call again"
    )
    assert good.startswith("Created .zero/specialists/reviewer.toml")


def one_call(arguments: str) -> str:
    return f"""
[[turns]]
match = {{ turn = 1 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {arguments} }}]
[[turns]]
match = {{ turn = 2 }}
text = "Refused."
"""


def test_what_a_draft_cannot_be(workspace: Path, tmp_path: Path) -> None:
    """Each refused with its reason, before anyone is asked, in every mode (unsafe too); nothing written."""
    cases = {
        '{ name = "../../evil", description = "d", prompt = "p" }': (
            "Error: name: '../../evil' is not a specialist's name; use lowercase letters, digits and dashes, "
            "starting with a letter (at most 64)"
        ),
        '{ name = "x", description = "d", prompt = "p", permission_mode = "unsafe" }': (
            "Error: permission_mode: a specialist runs in its caller's permission mode, so a draft cannot set "
            "it; drop permission_mode and call again"
        ),
        '{ name = "x", description = "d", prompt = "Use the key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789" }': (
            "Error: the manifest holds text that looks like a secret (a key, a token, a password), which the user "
            "would be shown masked, so not what is saved; a manifest holds no secrets: take it out"
        ),
        '{ name = "x", description = "d", prompt = "p", extends = "nobody" }': (
            "Error: extends: a drafted specialist is whole (what the user approves is all it is): write its own "
            "prompt and tools, so a draft cannot set it; drop extends and call again"
        ),
        '{ name = "x", description = "d", prompt = "p", tools = [1] }': (
            "Error: the draft is not a valid manifest: tools.0: Input should be a valid string. Fix it and call again"
        ),
        '{ name = "explorer", description = "d", prompt = "p" }': (
            "Error: name: 'explorer' is a built-in specialist, which a project's file of that name would replace "
            "for every Task and team here; choose another name"
        ),
        '{ name = "x", description = "d", prompt = "p", output_schema = "s.json" }': (
            'Error: output_schema: give the schema itself (an object), or "json": a file it names would not be '
            "shown to the user who approves this one"
        ),
        '{ name = "x", description = "d \\u3164", prompt = "p \\u2028 \\ufe0f" }': (
            "Error: the manifest holds characters a terminal does not show as they are (U+2028, U+3164, U+FE0F): "
            "the user would not see what is saved; take them out"
        ),
        '{ name = "x", description = "d", prompt = "p", output_schema = { "$ref" = "x.json" } }': (
            "Error: the draft is not a valid manifest: output_schema: it cannot be checked: Unresolvable: x.json; "
            "put what it refers to in the schema ($defs). Fix it and call again"
        ),
        '{ name = "x", description = "d", prompt = "p \\u202e txt.exe \\u001b[8m" }': (
            "Error: the manifest holds characters a terminal does not show as they are (U+001B, U+202E): the user "
            "would not see what is saved; take them out"
        ),
    }
    for mode in ("auto", "unsafe"):
        for arguments, refusal in cases.items():
            assert run(workspace, tmp_path, one_call(arguments), "Draft one", "--permission-mode", mode) == "Refused.\n"
            assert tool_results() == [refusal], arguments
    assert not (workspace / ".zero").exists()


def test_a_link_or_a_folder_at_the_manifest_is_refused_and_nothing_written(workspace: Path, tmp_path: Path) -> None:
    folder = workspace / ".zero" / "specialists"
    folder.mkdir(parents=True)
    target = tmp_path / "bashrc"
    target.write_text("# mine\n")
    (folder / "reviewer.toml").symlink_to(target)
    script = one_call(REVIEWER)
    run(workspace, tmp_path, script, "Draft one", "--permission-mode", "unsafe")
    assert tool_results() == [
        "Error: .zero/specialists/reviewer.toml is a link: it is not written through; remove it first"
    ]
    assert target.read_text() == "# mine\n" and (folder / "reviewer.toml").is_symlink()
    (folder / "reviewer.toml").unlink()
    (folder / "reviewer.toml").mkdir()
    run(workspace, tmp_path, script, "Draft one", "--permission-mode", "unsafe")
    assert tool_results() == [
        "Error: .zero/specialists/reviewer.toml is not a regular file: it is not replaced; remove it first"
    ]
    assert os.listdir(folder) == ["reviewer.toml"]


WIDER = """
[[turns]]
match = { system = "You are Zero", turn = 1 }
tool_calls = [{ name = "Task", arguments = { name = "scout", prompt = "Make a writer." } }]
[[turns]]
match = { system = "You are the scout", turn = 1 }
tool_calls = [
  { name = "CreateSpecialist", arguments = { name = "writer", description = "W", tools = ["edit"], prompt = "W" } },
  { name = "CreateSpecialist", arguments = { name = "writer", description = "W", extends = "worker", prompt = "W" } },
{ name = "CreateSpecialist", arguments = { name = "g", description = "G", tools = ["grep", "delegate"], prompt = "G" }},
]
[[turns]]
match = { system = "You are the scout", turn = 2 }
text = "Made a grepping writer."
[[turns]]
match = { system = "You are Zero", turn = 2 }
text = "Done."
"""


def test_a_draft_wider_than_its_caller_is_refused(workspace: Path, tmp_path: Path) -> None:
    """A child with read-only tools and Task (max_depth 2) may create a specialist with no more than its own
    tools: edit tools are refused, inherited ones too; grep and delegation are its own."""
    narrow_caller(tmp_path / "config" / "zero")
    assert run(workspace, tmp_path, WIDER, "Go", "--permission-mode", "unsafe") == "Done.\n"
    (child,) = [m for m in store().list() if m.session_kind == "child"]
    log = [e.event for e in store().events(child.session_id)]
    edit, extends, grep = [e.output for e in log if e.kind == "tool_result"]
    own = "(glob, grep, list_directory, read_file)"
    assert edit == (
        f"Error: tools: write_file, edit_file would be more than you have yourself {own}: a specialist you create "
        "gets at most your tools; drop them and call again"
    )
    assert extends == (
        "Error: extends: a drafted specialist is whole (what the user approves is all it is): write its own prompt "
        "and tools, so a draft cannot set it; drop extends and call again"
    )
    assert grep.startswith("Created .zero/specialists/g.toml")
    # saved unasked (unsafe), so not trusted: a project's specialist only the project has reads, until trusted
    assert "\ntools: grep\nSaved unasked, so not trusted" in grep
    assert "tools Task, TaskOutput, TaskStop, CreateSpecialist not granted" in grep
