"""Tool calls a model wrote as text: what small local models do instead of calling a tool.

Three shapes are recognised, and only when they are the whole answer: a JSON object
``{"name": ..., "arguments": {...}}`` (``"parameters"`` also), the same in a fenced block
(```` ```json ````), or one or more ``<tool_call>...</tool_call>`` blocks (Hermes and Qwen's format).
Each must name a tool that was offered, with arguments valid by its schema; anything else (prose
around it, an unknown tool, arguments that do not validate) is an answer and stays one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from zero.agent.messages import ToolSpec

__all__ = ["calls_in_text"]

_FENCED = re.compile(r"```(?:json|tool_call)?[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_TAGGED = re.compile(r"<tool_call>(.*?)(?:</tool_call>\s*|\Z)", re.DOTALL)  # the last one may be left open
_KEYS = {"name", "arguments", "parameters"}


def calls_in_text(text: str, tools: tuple[ToolSpec, ...]) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls (name, arguments) that ``text`` consists of, or None if it is not wholly tool calls."""
    body = text.strip()
    if body.startswith("{"):
        pieces = [body]
    elif fenced := _FENCED.fullmatch(body):
        pieces = [fenced.group(1)]
    elif body.startswith("<tool_call>"):
        pieces, end = [], 0
        while end < len(body):
            tagged = _TAGGED.match(body, end)
            if tagged is None:
                return None
            pieces.append(tagged.group(1))
            end = tagged.end()
    else:
        return None
    specs = {t.name: t for t in tools}
    calls = [_call(piece, specs) for piece in pieces]
    return None if any(c is None for c in calls) else [c for c in calls if c is not None]


def _call(piece: str, specs: dict[str, ToolSpec]) -> tuple[str, dict[str, Any]] | None:
    try:
        written = json.loads(piece)
    except ValueError:
        return None
    if not isinstance(written, dict) or not set(written) <= _KEYS or written.get("name") not in specs:
        return None
    arguments = written.get("arguments", written.get("parameters", {}))
    if isinstance(arguments, str):  # some models write them as a JSON string, as the wire format has them
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    name = str(written["name"])
    if not isinstance(arguments, dict) or not _valid(arguments, specs[name].parameters):
        return None
    return name, arguments


def _valid(arguments: dict[str, Any], schema: dict[str, Any]) -> bool:
    import jsonschema  # only for an answer that looks like a call (~70 ms to import)

    try:
        validator = jsonschema.validators.validator_for(schema)
        validator.check_schema(schema)
        return bool(validator(schema).is_valid(arguments))
    except Exception:  # a broken schema (an MCP server's, say: an unknown type, a $ref to nowhere): no guessing
        return False
