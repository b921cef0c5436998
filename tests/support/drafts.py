"""What the CreateSpecialist tests share: a reviewer's draft, a run that creates it and gives it a Task, and a
scout (read-only tools and Task) to be a narrow caller."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import zero

REVIEWER = (
    '{ name = "reviewer", description = "Reviews diffs for bugs.", tools = ["read-only"], '
    'prompt = "You review the diff you are given.\\nReport each bug with its file and line." }'
)
"""A draft's arguments, as a script's inline table."""

CREATE_THEN_TASK = f"""
[[turns]]
match = {{ last = "Make a reviewer", turn = 1 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {REVIEWER} }}]
[[turns]]
match = {{ last = "the specialist 'reviewer' is ready", turn = 2 }}
tool_calls = [{{ name = "Task", arguments = {{ name = "reviewer", prompt = "Review src." }} }}]
[[turns]]
match = {{ system = "You review the diff", turn = 1 }}
text = "No bugs in src."
[[turns]]
match = {{ last = "No bugs in src", turn = 3 }}
text = "The reviewer found no bugs."
"""
"""Asked to "Make a reviewer", the agent drafts it and, once it is saved, gives it a Task."""

SCOUT = """
name = "scout"
description = "Reads, and may delegate."
tools = ["read-only", "delegate"]
prompt = "You are the scout."
"""


def narrow_caller(config: Path) -> None:
    """The user's scout manifest, and ``max_depth = 2`` so that it may delegate (``config``: the user's
    ``zero`` config folder)."""
    (config / "specialists").mkdir(parents=True)
    (config / "specialists" / "scout.toml").write_text(SCOUT)
    (config / "config.toml").write_text("max_depth = 2\n")


def listed(workspace: Path) -> dict[str, dict[str, object]]:
    """``zero specialists list --json``, by name."""
    done = zero("specialists", "list", "--json", "--cwd", str(workspace))
    return {s["name"]: s for s in json.loads(done.stdout)["specialists"]}
