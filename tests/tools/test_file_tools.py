"""The built-in file and search tools, and workspace confinement."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from zero.errors import ToolError
from zero.tools import ToolContext, ToolOutput, Workspace, builtin_tools

pytestmark = pytest.mark.anyio
TOOLS = {t.name: t for t in builtin_tools()}


async def call(workspace: Path, name: str, **args: Any) -> ToolOutput:
    return await TOOLS[name].call(args, ToolContext(workspace=Workspace([workspace])))


async def test_read_file_numbers_lines_and_reads_ranges(workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await call(workspace, "read_file", path="long.txt", start_line=3, end_line=4)
    assert out.text == "     3\tline 3\n     4\tline 4\n[lines 3-4 of 10]"
    whole = await call(workspace, "read_file", path="README.md")
    assert whole.text == "     1\t# Demo\n     2\tThe answer is 42."


async def test_read_file_errors_say_what_is_wrong(workspace: Path) -> None:
    with pytest.raises(ToolError, match="nope.txt does not exist"):
        await call(workspace, "read_file", path="nope.txt")
    with pytest.raises(ToolError, match="src is a directory; use list_directory"):
        await call(workspace, "read_file", path="src")
    (workspace / "blob.bin").write_bytes(b"\x00\x01binary")
    with pytest.raises(ToolError, match="blob.bin is a binary file"):
        await call(workspace, "read_file", path="blob.bin")


async def test_write_then_edit_a_file(workspace: Path) -> None:
    out = await call(workspace, "write_file", path="pkg/new.py", content="a = 1\nb = 2\n")
    assert out.text == "Created pkg/new.py (2 lines)" and out.changed_files == ("pkg/new.py",)
    out = await call(workspace, "edit_file", path="pkg/new.py", old_text="b = 2", new_text="b = 3")
    assert out.text == "Edited pkg/new.py: replaced 1 occurrence"
    assert (workspace / "pkg/new.py").read_text() == "a = 1\nb = 3\n"


async def test_edit_file_refuses_missing_or_ambiguous_text(workspace: Path) -> None:
    (workspace / "dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError) as missing:
        await call(workspace, "edit_file", path="dup.py", old_text="z = 9", new_text="z = 0")
    assert str(missing.value) == (
        "old_text was not found in dup.py; read the file again and copy the exact text, "
        "including indentation and line breaks"
    )
    with pytest.raises(ToolError) as ambiguous:
        await call(workspace, "edit_file", path="dup.py", old_text="x = 1", new_text="x = 2")
    assert str(ambiguous.value) == (
        "old_text occurs 2 times in dup.py (lines 1, 3); include more surrounding text "
        "to make it unique, or set replace_all"
    )
    assert (workspace / "dup.py").read_text() == "x = 1\ny = 2\nx = 1\n"
    await call(workspace, "edit_file", path="dup.py", old_text="x = 1", new_text="x = 2", replace_all=True)
    assert (workspace / "dup.py").read_text() == "x = 2\ny = 2\nx = 2\n"


async def test_list_glob_and_grep(workspace: Path) -> None:
    assert (await call(workspace, "list_directory")).text == "README.md\nsrc/"
    assert (await call(workspace, "glob", pattern="**/*.py")).text == "src/app.py"
    grep = await call(workspace, "grep", pattern="todo", ignore_case=True, include="*.py")
    assert grep.text == "src/app.py:2:    return 42  # TODO: explain"
    assert (await call(workspace, "grep", pattern="nothing-here")).text == "no matches for 'nothing-here' under ."
    with pytest.raises(ToolError, match="invalid regular expression"):
        await call(workspace, "grep", pattern="(unclosed")


async def test_grep_output_is_bounded(workspace: Path) -> None:
    (workspace / "many.txt").write_text("hit\n" * 500)
    out = await call(workspace, "grep", pattern="hit", max_results=10)
    assert out.text.count("many.txt:") == 10 and out.text.endswith(
        "[stopped at 10 matches; narrow the pattern or path]"
    )


@pytest.fixture
def outside(tmp_path: Path, workspace: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (workspace / "link").symlink_to(secret)
    (workspace / "linkdir").symlink_to(tmp_path)
    return secret


ESCAPES = ["../secret.txt", "{abs}", "link", "linkdir/secret.txt"]
FILE_CALLS = [
    ("read_file", {}),
    ("write_file", {"content": "x"}),
    ("edit_file", {"old_text": "top", "new_text": "x"}),
    ("list_directory", {}),
    ("grep", {"pattern": "secret"}),
    ("glob", {"pattern": "*"}),
]


@pytest.mark.parametrize(("name", "extra"), FILE_CALLS)
@pytest.mark.parametrize("escape", ESCAPES)
async def test_every_file_tool_refuses_paths_outside_the_workspace(
    workspace: Path, outside: Path, name: str, extra: dict[str, Any], escape: str
) -> None:
    path = escape.format(abs=outside)
    with pytest.raises(ToolError, match="is outside the workspace"):
        await call(workspace, name, path=path, **extra)
    assert outside.read_text() == "top secret"


def test_workspace_accepts_absolute_paths_inside_it(workspace: Path) -> None:
    ws = Workspace([workspace])
    assert ws.resolve(str(workspace / "README.md")) == Path(os.path.realpath(workspace / "README.md"))
    assert ws.resolve("src/../README.md") == Path(os.path.realpath(workspace / "README.md"))
