"""File tools stay inside the workspace even when another process races them, and never write a file
that is also somewhere else under another name (a hard link)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import zero.tools._beneath as beneath
from zero.errors import ToolError
from zero.tools import ToolContext, Workspace, builtin_tools

pytestmark = pytest.mark.anyio

ATTACKER = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
libc.renameat2(-100, a, -100, b, 2)
print("swapping", flush=True)
while True:  # swap the two names in one step, over and over (renameat2 RENAME_EXCHANGE)
    libc.renameat2(-100, a, -100, b, 2)
"""


@contextmanager
def attacker(a: Path, b: Path) -> Iterator[None]:
    """Another process swapping a folder and a link to outside as fast as it can."""
    process = subprocess.Popen([sys.executable, "-c", ATTACKER, str(a), str(b)], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"swapping\n"
    try:
        yield
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "walk":  # as on a kernel without openat2
        monkeypatch.setattr(beneath, "_openat2", None)
    yield request.param


async def call(workspace: Path, name: str, **args: object) -> str:
    tool = next(t for t in builtin_tools() if t.name == name)
    return (await tool.call(dict(args), ToolContext(workspace=Workspace([workspace])))).text


async def test_a_folder_swapped_for_a_link_mid_read_never_leaks_outside(
    workspace: Path, tmp_path: Path, resolution: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("SECRET")
    (workspace / "d").mkdir()
    (workspace / "d" / "f").write_text("inside")
    (workspace / "swap").symlink_to(outside)
    ws = Workspace([workspace])
    seen = {"inside": 0, "outside": 0, "refused": 0}

    def saw(text: str) -> None:
        seen["outside" if "SECRET" in text else "inside"] += 1

    with attacker(workspace / "d", workspace / "swap"):
        for i in range(1000):
            try:
                if i % 5:  # the opening every file tool goes through...
                    with os.fdopen(ws.open("d/f"), "rb") as f:
                        saw(f.read().decode())
                else:  # ...and the read_file tool itself
                    saw(await call(workspace, "read_file", path="d/f"))
            except ToolError:
                seen["refused"] += 1
    assert seen["outside"] == 0 and seen["inside"] > 0, seen


async def test_a_link_is_followed_only_while_it_stays_inside(workspace: Path, tmp_path: Path, resolution: str) -> None:
    (workspace / "rel").symlink_to("src")
    (workspace / "abs").symlink_to(workspace / "src")  # an absolute link back inside
    (workspace / "out").symlink_to(tmp_path)
    assert "return 42" in await call(workspace, "read_file", path="rel/app.py")
    assert "return 42" in await call(workspace, "read_file", path="abs/app.py")
    for path in ("out/ws/README.md", "../ws/README.md", "src/../../ws/README.md"):
        with pytest.raises(ToolError, match="is outside the workspace"):
            await call(workspace, "read_file", path=path)
    await call(workspace, "write_file", path="rel/new/deep.txt", content="x")
    assert (workspace / "src" / "new" / "deep.txt").read_text() == "x"


async def test_a_hard_link_to_an_outside_file_is_never_written(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0\n")
    os.link(secret, workspace / "innocent.txt")
    for name, args in (
        ("write_file", {"content": "pwned"}),
        ("edit_file", {"old_text": "root", "new_text": "pwned"}),
    ):
        with pytest.raises(ToolError, match="has 2 hard links"):
            await call(workspace, name, path="innocent.txt", **args)
    assert secret.read_text() == "root:x:0:0\n"
    shown = await call(workspace, "read_file", path="innocent.txt")
    assert "root:x:0:0" in shown and "[note: innocent.txt has 2 hard links" in shown


async def test_searches_never_follow_links_out(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text("TODO secret\n")
    (workspace / "src" / "escape").symlink_to(tmp_path)
    grep = await call(workspace, "grep", pattern="TODO")
    assert grep == "src/app.py:2:    return 42  # TODO: explain"
    listed = await call(workspace, "glob", pattern="**/*.py")
    assert listed == "src/app.py"
    assert await call(workspace, "list_directory", path="src") == "app.py\nescape"


async def test_writes_race_a_swap_and_stay_inside(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "d").mkdir()
    (workspace / "swap").symlink_to(outside)
    with attacker(workspace / "d", workspace / "swap"):
        for i in range(300):
            try:
                await call(workspace, "write_file", path=f"d/f{i}.txt", content="x")
            except ToolError:
                pass
    assert list(outside.iterdir()) == []


RENAMER = """
import os, sys
print("renaming", flush=True)
while True:  # renames anywhere make the kernel's openat2 refuse a ".." it met meanwhile (EAGAIN)
    open(sys.argv[1], "w").close()
    os.rename(sys.argv[1], sys.argv[1] + ".moved")
"""


def test_a_path_through_a_link_and_dotdot_opens_while_files_are_renamed(workspace: Path, tmp_path: Path) -> None:
    (workspace / "lib").mkdir()
    (workspace / "lib" / "config").write_text("mine\n")
    (workspace / "src" / "v").symlink_to("../lib/sub")
    (workspace / "lib" / "sub").mkdir()
    ws = Workspace([workspace])
    renamer = subprocess.Popen([sys.executable, "-c", RENAMER, str(tmp_path / "t")], stdout=subprocess.PIPE)
    assert renamer.stdout is not None and renamer.stdout.readline() == b"renaming\n"
    try:
        for _ in range(1000):
            with os.fdopen(ws.open("src/v/../config"), "rb") as f:
                assert f.read() == b"mine\n"
    finally:
        renamer.kill()
        renamer.wait()
        renamer.stdout.close()
