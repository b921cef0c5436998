"""A workspace's AGENTS.md (else CLAUDE.md) joins every system prompt; it comes with a cloned repository,
so it is read as the file tools read: beneath the workspace, a regular file only, no more than the cut."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import scripted, write_script, zero

from zero.sessions import FileSessionStore

ANSWER = """
[[turns]]
text = "Done."
"""


def system_prompt_of(workspace: Path, tmp_path: Path) -> tuple[str, str]:
    """The system prompt of an exec in ``workspace``, and what it warned."""
    done = zero(
        "exec", "hi", *scripted(write_script(tmp_path / "s.toml", ANSWER), workspace), "--output-format", "json"
    )
    assert done.returncode == 0, done.stderr
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    log = [e.event for e in store.events(json.loads(done.stdout)["sessionId"])]
    system = next(e for e in log if e.kind == "message" and e.role == "system")
    return system.content, done.stderr


def test_a_link_out_of_the_workspace_is_not_read_and_claude_md_is(workspace: Path, tmp_path: Path) -> None:
    mine = tmp_path / "config" / "zero" / "config.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text("# my-private-config-line\n")
    (workspace / "AGENTS.md").symlink_to(mine)
    (workspace / "CLAUDE.md").write_text("Answer in English.")
    prompt, warned = system_prompt_of(workspace, tmp_path)
    assert "my-private-config-line" not in prompt
    assert "from CLAUDE.md at the workspace root (follow them):\n\nAnswer in English." in prompt
    assert (
        f"zero: warning: {workspace}/AGENTS.md not added to the system prompt: it is a link that leads outside "
        "the workspace\n"
    ) in warned
    (workspace / "CLAUDE.md").unlink()
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agents.md").write_text("Run the tests.")
    (workspace / "AGENTS.md").unlink()
    (workspace / "AGENTS.md").symlink_to("docs/agents.md")  # a link that stays inside is followed
    prompt, warned = system_prompt_of(workspace, tmp_path)
    assert "from AGENTS.md at the workspace root (follow them):\n\nRun the tests." in prompt and "warning" not in warned


def _device(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 5))  # what /dev/zero is: reading it never ends


SPECIAL: dict[str, tuple[Callable[[Path], object], str]] = {
    "link-to-dev-zero": (lambda p: p.symlink_to("/dev/zero"), "it is a link that leads outside the workspace"),
    "device": (_device, "it is not a regular file but a character device"),
    "fifo": (os.mkfifo, "it is not a regular file but a FIFO"),  # opening it to read waits for a writer
    "directory": (os.mkdir, "it is not a regular file but a directory"),
}


@pytest.mark.parametrize("case", SPECIAL)
def test_a_device_fifo_or_folder_is_refused_with_the_reason(workspace: Path, tmp_path: Path, case: str) -> None:
    make, why = SPECIAL[case]
    path = workspace / "AGENTS.md"
    make(path)
    prompt, warned = system_prompt_of(workspace, tmp_path)
    assert "Project instructions" not in prompt
    assert f"zero: warning: {path} not added to the system prompt: {why}\n" in warned


def _bytes_read() -> int:
    """What this process has read so far (every read, from any file)."""
    io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(io["rchar"])


def test_no_more_than_the_cut_of_a_huge_file_is_read(workspace: Path, tmp_path: Path) -> None:
    huge = workspace / "AGENTS.md"
    with huge.open("wb") as f:
        f.write(b"Rules:  \n" + "Be brief. é".encode() * 3000)  # the cut falls inside an é
        f.truncate(256 * 1024 * 1024)  # sparse: no disk used, but reading it whole takes 256 MiB
    before = _bytes_read()
    prompt, _ = system_prompt_of(workspace, tmp_path)
    assert _bytes_read() - before < 32 * 1024 * 1024
    note = "\n[... AGENTS.md is longer; the rest is not shown]"
    section = prompt.split("(follow them):\n\n", 1)[1].split(note)[0]
    assert section.startswith("Rules:  \nBe brief. é") and note in prompt
    assert len(section.encode()) == 19_999 and "\ufffd" not in section  # cut at a character, not in one
