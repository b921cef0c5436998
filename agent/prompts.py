"""The default system prompt of a top-level Zero agent."""

from __future__ import annotations

import platform
from pathlib import Path

__all__ = ["INSTRUCTION_FILES", "default_system_prompt", "project_instructions"]

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
"""A workspace's instructions for agents: the first of these at its root (CLAUDE.md when there is no
AGENTS.md), added to the system prompt of every run in that workspace."""
MAX_INSTRUCTIONS = 20_000


def project_instructions(cwd: str) -> str:
    """The workspace's ``AGENTS.md`` (else ``CLAUDE.md``) as a section of a system prompt, or ''."""
    for name in INSTRUCTION_FILES:
        path = Path(cwd) / name
        try:
            text = path.read_text("utf-8", errors="replace")
        except OSError:
            continue
        if len(text) > MAX_INSTRUCTIONS:
            text = text[:MAX_INSTRUCTIONS] + f"\n[... {name} is longer; the rest is not shown]"
        return f"\n\nProject instructions, from {name} at the workspace root (follow them):\n\n{text.strip()}"
    return ""


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
