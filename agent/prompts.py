"""The default system prompt of a top-level Zero agent."""

from __future__ import annotations

import codecs
import platform

from zero.errors import ToolError
from zero.tools import NotFound, OutsideWorkspace, Workspace

__all__ = [
    "CONTINUED",
    "INSTRUCTION_FILES",
    "NODE_RESUMED",
    "TEAM_RESUMED",
    "default_system_prompt",
    "project_instructions",
    "read_instructions",
]

TEAM_RESUMED = (
    "The team's run stopped before you finished, and it is resumed now. Continue your task from where you left off "
    "(check what is already done first), then end with your report."
)
"""The prompt of a member's run in ``zero swarm resume``, when its history holds its task already."""
NODE_RESUMED = (
    "The node you ran on stopped before you finished, and you are resumed on another. Continue your task from "
    "where you left off (check what is already done first), then end with your report."
)
"""The prompt of a member's run resumed on another Ray node, after its node died."""
CONTINUED = frozenset({TEAM_RESUMED, NODE_RESUMED})
"""The prompts of a run that goes on with a task a stopped run left: not a new task (a replay of the team
runs it as one run)."""

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
"""A workspace's instructions for agents: the first of these at its root (CLAUDE.md when there is no
AGENTS.md), added to the system prompt of every run in that workspace."""
MAX_INSTRUCTIONS = 20_000
"""Bytes of an instruction file that join a system prompt; no more is read."""


def read_instructions(cwd: str) -> tuple[str, list[str]]:
    """The workspace's ``AGENTS.md`` (else ``CLAUDE.md``) as a section of a system prompt (or ''), and why a
    file that is there was not used. A file comes with the repository, so it is read as the file tools read:
    beneath the workspace (a link that leads outside is refused), a regular file only (a FIFO or a device
    could block or never end), and no more than the cut."""
    workspace, refused = Workspace([cwd]), []
    for name in INSTRUCTION_FILES:
        try:
            data = _read_beneath(workspace, name)
        except NotFound:
            continue
        except ToolError as e:
            refused.append(f"{workspace.root / name} not added to the system prompt: {e}")
            continue
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(data[:MAX_INSTRUCTIONS])
        if len(data) > MAX_INSTRUCTIONS:
            text += f"\n[... {name} is longer; the rest is not shown]"
        section = f"\n\nProject instructions, from {name} at the workspace root (follow them):\n\n{text.strip()}"
        return section, refused
    return "", refused


def _read_beneath(workspace: Workspace, name: str) -> bytes:
    try:
        return workspace.read_regular(name, MAX_INSTRUCTIONS)
    except OutsideWorkspace:
        raise ToolError("it is a link that leads outside the workspace") from None


def project_instructions(cwd: str) -> str:
    """The workspace's instructions as a section of a system prompt, or '' (see ``read_instructions``)."""
    return read_instructions(cwd)[0]


def default_system_prompt(cwd: str) -> str:
    return _DEFAULT.format(cwd=cwd, system=platform.system()) + project_instructions(cwd)


_DEFAULT = """You are Zero, a coding agent working in a terminal on the user's repository.

Workspace: {cwd} ({system})

How to work:
- Look before you act: read the files and search the code that the task touches. Prefer grep and
  glob over guessing paths.
- Make the smallest change that does the job, in the style of the code around it. Use edit_file
  for changes to existing files and write_file for new ones.
- Check your work: run the tests or the command that proves the change, when you can.
- Tool results tell you when something failed or was denied. Read them and adapt; do not repeat
  a refused call.
- Finish with a short answer: what you found or changed (with file paths), and anything left
  undone or uncertain. Do not invent results you did not see."""
