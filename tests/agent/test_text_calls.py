"""Which texts are tool calls a model wrote as text (``calls_in_text``), against the built-in tools' schemas."""

from __future__ import annotations

from typing import Any

import pytest

from zero.agent import ToolSpec
from zero.agent.providers._text_calls import calls_in_text
from zero.tools import builtin_tools

TOOLS = tuple(ToolSpec(name=t.name, description=t.description, parameters=t.parameters) for t in builtin_tools())
READ = '{"name": "read_file", "arguments": {"path": "a.py"}}'


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (f"  {READ}\n", [("read_file", {"path": "a.py"})]),
        ('{"name": "read_file", "parameters": {"path": "a.py"}}', [("read_file", {"path": "a.py"})]),  # Llama's
        ('{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}', [("read_file", {"path": "a.py"})]),
        (f"```\n{READ}\n```", [("read_file", {"path": "a.py"})]),
        (f"```json\n{READ}\n```", [("read_file", {"path": "a.py"})]),
        (
            f'<tool_call>\n{READ}\n</tool_call>\n<tool_call>\n{{"name": "glob", "arguments": {{"pattern": "*.py"}}}}\n',
            [("read_file", {"path": "a.py"}), ("glob", {"pattern": "*.py"})],  # the last tag left open
        ),
    ],
)
def test_a_whole_answer_of_calls_is_read_as_those_calls(text: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
    assert calls_in_text(text, TOOLS) == calls


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        f"{READ} {READ}",
        f"<tool_call>{READ}</tool_call> done",
        f"```json\n{READ}\n```\nThen I will edit it.",
        '{"name": "read_file"}',  # its path is required
        '{"name": "read_file", "arguments": {"path": "a.py", "lines": "all"}}',
        '{"name": "read_file", "arguments": "not json"}',
        '{"name": "read_file", "arguments": ["a.py"]}',
        '{"tool": "read_file", "arguments": {"path": "a.py"}}',
        "{not json at all}",
        "[1, 2]",
    ],
)
def test_anything_else_is_an_answer(text: str) -> None:
    assert calls_in_text(text, TOOLS) is None


def test_a_tool_with_a_broken_schema_is_never_guessed_at() -> None:
    broken = (ToolSpec(name="odd", description="", parameters={"type": "no-such-type"}),)
    assert calls_in_text('{"name": "odd", "arguments": {}}', broken) is None
    assert calls_in_text(READ, ()) is None  # no tools were offered
