"""File tools stay inside the workspace even when another process races them, and never write a file
that is also somewhere else under another name (a hard link)."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import zero.tools._beneath as beneath
from zero.errors import ToolError
from zero.tools import ToolContext, Workspace, builtin_tools

pytestmark = pytest.mark.anyio

_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a: Path, b: Path) -> None:
    """Swap two names in one step (renameat2 RENAME_EXCHANGE), as an attacker's process would."""
    if _libc.renameat2(-100, bytes(a), -100, bytes(b), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


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
    stop = threading.Event()

    def attacker() -> None:
        while not stop.is_set():
            exchange(workspace / "d", workspace / "swap")

    thread = threading.Thread(target=attacker)
    thread.start()
    seen = {"inside": 0, "outside": 0, "refused": 0}
    try:
        for _ in range(1000 if resolution == "openat2" else 300):
            try:
                text = await call(workspace, "read_file", path="d/f")
            except ToolError:
                seen["refused"] += 1
                continue
            seen["outside" if "SECRET" in text else "inside"] += 1
    finally:
        stop.set()
        thread.join()
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
    stop = threading.Event()

    def attacker() -> None:
        while not stop.is_set():
            exchange(workspace / "d", workspace / "swap")

    thread = threading.Thread(target=attacker)
    thread.start()
    try:
        for i in range(300):
            with anyio.move_on_after(5):
                try:
                    await call(workspace, "write_file", path=f"d/f{i}.txt", content="x")
                except ToolError:
                    pass
    finally:
        stop.set()
        thread.join()
    assert list(outside.iterdir()) == []
