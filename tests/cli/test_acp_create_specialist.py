"""``CreateSpecialist`` over ACP: in ``auto`` too, the editor gets a permission request carrying the manifest's
diff (a new file, or against the one there), with no "for the session" option; allowed, the file is saved and
trusted as shown; rejected, nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block
from support.acp import Editor, agent
from support.cli import write_script
from support.drafts import CREATE_THEN_TASK, listed

pytestmark = pytest.mark.anyio

SHARPER = (
    '{ name = "reviewer", description = "Reviews diffs for bugs and risks.", tools = ["read-only"], '
    'prompt = "You review the diff you are given." }'
)
SCRIPT = (
    CREATE_THEN_TASK
    + f"""
[[turns]]
match = {{ last = "Sharpen the reviewer", turn = 1 }}
tool_calls = [{{ name = "CreateSpecialist", arguments = {SHARPER} }}]
[[turns]]
match = {{ last = "Permission denied: the user refused CreateSpecialist", turn = 2 }}
text = "Left as it was."
"""
)


async def test_an_editor_is_asked_with_the_manifests_diff(workspace: Path, tmp_path: Path) -> None:
    editor = Editor(answers=["allow_once", "reject_once"])
    manifest = workspace / ".zero" / "specialists" / "reviewer.toml"
    async with agent(editor, write_script(tmp_path / "s.toml", SCRIPT), "--permission-mode", "auto") as conn:
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("Make a reviewer")])).stop_reason == "end_turn"
        saved = manifest.read_text()
        (diff,) = editor.asked[0].content
        assert (diff.type, diff.path, diff.old_text, diff.new_text) == ("diff", str(manifest), None, saved)
        assert editor.offered[0] == ["Allow once", "Reject"]  # never "for this session"
        assert listed(workspace)["reviewer"]["trusted"] is True
        texts = [u.content.text for _, u in editor.updates if u.session_update == "agent_message_chunk"]
        assert "".join(texts).endswith("The reviewer found no bugs.")  # Task ran it in the same session
        assert (await conn.prompt(session_id=sid, prompt=[text_block("Sharpen the reviewer")])).stop_reason == (
            "end_turn"
        )
        (diff,) = editor.asked[1].content
        assert diff.old_text == saved and 'description = "Reviews diffs for bugs and risks."' in diff.new_text
        assert manifest.read_text() == saved  # rejected: as it was
