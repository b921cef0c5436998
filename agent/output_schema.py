"""Typed outputs: an agent whose result must match a JSON Schema ends by calling ``submit_result``.

The tool's parameters are the schema (an object schema as it is; any other is wrapped as the one
property ``result``), so it works on any server that takes tools, JSON mode or not. A call whose
arguments do not match is refused with the validation message, and the model tries again (at most
``retries`` times; an answer without the call counts as such an attempt too). ``jsonschema`` is
imported only when a schema is checked (~70 ms of start-up that most commands need not pay).

A schema with a regular expression in it (``pattern``, ``patternProperties``) is checked in a child
process with a time limit: Python's ``re`` holds the interpreter while it backtracks, so a pattern such
as ``^(a+)+$`` (from a cloned repository's manifest, or a model's own ``Task`` schema) against a crafted
result would stop the event loop, Ctrl-C and every other agent of the process for as long as it runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from zero.agent import _schema_check
from zero.agent._schema_check import ENDLESS, problems_of
from zero.errors import ToolError
from zero.strictfile import MAX_FILE
from zero.tools import NotFound, OutsideWorkspace, SideEffect, ToolContext, ToolOutput, Workspace

__all__ = [
    "ANY_JSON",
    "CALL_SUBMIT",
    "DEFAULT_RETRIES",
    "SUBMIT_NOTE",
    "SUBMIT_RESULT",
    "OutputSchema",
    "SubmitResult",
    "dump_result",
    "field_problem",
    "pick",
    "read_schema",
    "schema_problem",
    "typed_prompt",
]

SUBMIT_RESULT = "submit_result"
ANY_JSON = "json"
"""``output_schema = "json"``: any JSON value (the empty schema)."""
DEFAULT_RETRIES = 2
CHECK_SECONDS = 5.0
"""How long checking a result against a schema with regular expressions may take before it is refused."""
START_SECONDS = 60.0  # the most its child process may take to start
_REGEX_KEYS = frozenset({"pattern", "patternProperties"})

CALL_SUBMIT = (
    f"Your answer was not accepted: this task ends only when you call the {SUBMIT_RESULT} tool with your result "
    "as its arguments (they must match its schema). Call it now."
)
"""What a model that answered without calling ``submit_result`` is told."""
SUBMIT_NOTE = (
    f"When you are done, call the {SUBMIT_RESULT} tool with your result (it must match the tool's schema): "
    "that ends the task. An answer in text is not accepted."
)
"""What a typed agent's prompt ends with."""


def typed_prompt(prompt: str) -> str:
    """A typed agent's prompt as it is sent: ``prompt``, then ``SUBMIT_NOTE``."""
    return f"{prompt}\n\n{SUBMIT_NOTE}"


@dataclass(frozen=True, kw_only=True)
class OutputSchema:
    """The schema an agent's result must match, and how many invalid attempts it may follow with retries."""

    schema: dict[str, Any] = field(default_factory=dict)  # {}: any JSON value
    retries: int = DEFAULT_RETRIES

    @classmethod
    def of(cls, schema: dict[str, Any] | None, *retries: int | None) -> OutputSchema | None:
        """The typed output of ``schema`` (None: untyped), with the first of ``retries`` that is set."""
        if schema is None:
            return None
        return cls(schema=schema, retries=next((r for r in retries if r is not None), DEFAULT_RETRIES))

    @property
    def wrapped(self) -> bool:
        """The result is the ``result`` argument (the schema is not an object's, which tool parameters must be)."""
        return self.schema.get("type") != "object"

    @property
    def parameters(self) -> dict[str, Any]:
        if not self.wrapped:
            return self.schema
        return {
            "type": "object",
            "properties": {"result": self.schema or {"description": "any JSON value"}},
            "required": ["result"],
            "additionalProperties": False,
        }

    async def result_of(self, arguments: dict[str, Any]) -> Any:
        """The result a ``submit_result`` call submits; a ``ToolError`` saying what is wrong with it."""
        if self.wrapped and set(arguments) != {"result"}:
            raise ToolError(f"{SUBMIT_RESULT} takes exactly one argument, result; got {sorted(arguments) or 'none'}")
        value = arguments["result"] if self.wrapped else arguments
        problems = await _checked(self.schema, value) if _has_regex(self.schema) else problems_of(self.schema, value)
        if problems:
            raise ToolError(
                f"the result does not match the output schema: {'; '.join(problems)}. "
                f"Fix it and call {SUBMIT_RESULT} again."
            )
        return value


def _has_regex(schema: object) -> bool:
    """Whether ``schema`` holds a regular expression anywhere (a key of that name inside ``properties`` too:
    checking such a schema in the child process costs time, not correctness)."""
    if isinstance(schema, dict):
        return not _REGEX_KEYS.isdisjoint(schema) or any(_has_regex(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_regex(v) for v in schema)
    return False


async def _checked(schema: dict[str, Any], value: Any) -> list[str]:
    """``problems_of`` in a child process, killed ``CHECK_SECONDS`` after it is ready to check (its start-up, slow
    on a loaded machine, does not count; cancelling the wait kills it too)."""
    command = [sys.executable, "-I", _schema_check.__file__]
    data = json.dumps([schema, value], default=str).encode()  # (a TOML date in a schema: its text)
    async with await anyio.open_process(command, stderr=subprocess.DEVNULL) as child:
        assert child.stdin is not None and child.stdout is not None
        await child.stdin.send(data)
        await child.stdin.aclose()
        said = b""
        with anyio.move_on_after(START_SECONDS):
            while b"\n" not in said and (chunk := await _receive(child.stdout)):
                said += chunk
        ready, _, said = said.partition(b"\n")
        if ready == b"ready":
            with anyio.move_on_after(CHECK_SECONDS) as scope:
                while chunk := await _receive(child.stdout):
                    said += chunk
            if scope.cancelled_caught:
                with suppress(ProcessLookupError):
                    child.kill()
                raise ToolError(
                    f"checking the result against the output schema took longer than {CHECK_SECONDS:g} s, so it "
                    "is refused (a pattern in the schema that backtracks without end on this result?); submit a "
                    "simpler result"
                )
        elif child.returncode is None:  # a child that never got ready
            with suppress(ProcessLookupError):
                child.kill()
    try:
        problems: list[str] = json.loads(said)
    except ValueError:
        raise ToolError("the result could not be checked against the output schema (its checker failed)") from None
    return problems


async def _receive(stream: anyio.abc.ByteReceiveStream) -> bytes:
    try:
        return await stream.receive()
    except anyio.EndOfStream:
        return b""


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` is not a JSON Schema a result can be checked against (None: it is one)."""
    import jsonschema
    import referencing.exceptions

    if not isinstance(schema, dict):
        return f"a JSON Schema is a table (an object), not {type(schema).__name__}"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        where = ".".join(str(p) for p in e.absolute_path)
        return f"it is not a valid JSON Schema: {e.message}" + (f" (at {where})" if where else "")
    except RecursionError:
        return "it is nested too deeply to be checked; flatten it (a $defs entry and $ref for what repeats)"
    # null meets no pattern (those apply to strings and keys), so this probe runs no regular expression.
    try:
        probed = problems_of(schema, None)
    except referencing.exceptions.Unresolvable as e:  # (a $ref to a file or a URL, which is not fetched)
        return f"it cannot be checked: {str(e).splitlines()[0]}; put what it refers to in the schema ($defs)"
    if probed == [ENDLESS]:
        return 'it refers to itself without end (a $ref cycle such as {"$ref": "#"}): no value can be checked'
    return None


def read_schema(value: object, base: Path) -> dict[str, Any]:
    """The schema an ``output_schema`` setting names: ``"json"`` (any value), a table, or the path of a ``.json``
    file relative to ``base`` (the folder of the file that names it). A ``ValueError`` says what is wrong."""
    if value == ANY_JSON:
        return {}
    if isinstance(value, str):
        path = base / value
        try:
            # Beneath the folder of the file naming it, as a project's manifests are read: a file from a
            # repository must not make another file of the machine (a key's, say) a schema the model is sent.
            raw = Workspace([base]).read_regular(value, limit=MAX_FILE)
        except OutsideWorkspace:
            raise ValueError(
                f"the schema file {value} is outside {base}, the folder of the file that names it; keep the "
                "schema beside it (or in a folder below it)"
            ) from None
        except NotFound:
            raise ValueError(f"cannot read the schema file {path}: No such file or directory") from None
        except (ToolError, OSError) as e:
            raise ValueError(f"cannot read the schema file {path}: {e}") from None
        if len(raw) > MAX_FILE:
            raise ValueError(f"the schema file {path} is larger than {MAX_FILE // 1024} KiB")
        try:
            value = json.loads(raw)
        except ValueError as e:
            raise ValueError(f"the schema file {path} is not valid JSON: {e}") from None
        except RecursionError:
            raise ValueError(f"the schema file {path} is nested too deeply to be read") from None
        problem = schema_problem(value)
        if problem is not None:
            raise ValueError(f"the schema file {path}: {problem}")
        assert isinstance(value, dict)
        return value
    problem = schema_problem(value)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, dict)
    return value


def field_problem(schema: dict[str, Any], path: Sequence[str]) -> str | None:
    """Why a result valid by ``schema`` can have nothing at ``path`` (keys, or indexes of an array), where the
    schema says so: a key its object declares no property for (unless it allows others by name:
    ``additionalProperties`` that is not ``false``, or ``patternProperties``), an index into what is no array, a key
    into a scalar.
    None where the result may have it (``$ref``, combinators and the like are not followed)."""
    from zero.errors import did_you_mean

    for i, key in enumerate(path):
        kind = schema.get("type")
        where = f" at {'.'.join(path[:i])}" if i else ""
        if isinstance(kind, str) and kind not in ("object", "array"):
            return f"its output_schema makes{where} a {kind}, which has no {key!r}"
        if kind == "array" or "items" in schema:
            items = schema.get("items")
            if not key.isdigit():
                return f"its output_schema makes{where} an array, whose items are named by number, not {key!r}"
            if not isinstance(items, dict):
                return None
            schema = items
            continue
        properties = schema.get("properties")
        others = schema.get("additionalProperties", False) is not False or bool(
            set(schema) & {"patternProperties", "$ref"}
        )
        if not isinstance(properties, dict) or others:  # (``additionalProperties = false`` allows none: checked)
            return None
        if key not in properties:
            return f"its output_schema declares no property {key!r}{where}{did_you_mean(key, properties)}"
        schema = properties[key] if isinstance(properties[key], dict) else {}
    return None


def pick(value: Any, path: Sequence[str]) -> Any:
    """What is at ``path`` in a result; a ``LookupError`` saying where it has nothing."""
    for i, key in enumerate(path):
        where = ".".join(path[:i]) or "the result"
        if isinstance(value, dict):
            if key not in value:
                raise LookupError(f"{where} has no key {key!r} (its keys: {', '.join(map(str, value)) or 'none'})")
            value = value[key]
        elif isinstance(value, list):
            if not key.isdigit() or int(key) >= len(value):
                raise LookupError(f"{where} is an array of {len(value)}, with no item {key!r}")
            value = value[int(key)]
        else:
            raise LookupError(f"{where} is {json.dumps(value)}, which has no {key!r}")
    return value


def dump_result(value: Any) -> str:
    """A result as its dependents and a parent read it: JSON text."""
    return json.dumps(value, ensure_ascii=False, indent=2)


class SubmitResult:
    """The tool a typed agent ends with; ``submitted`` holds the last result it accepted."""

    name = SUBMIT_RESULT
    side_effect: SideEffect = "read"

    def __init__(self, output: OutputSchema):
        self.output = output
        self.accepted = False
        self.value: Any = None

    @property
    def description(self) -> str:
        shape = "its arguments are the result" if not self.output.wrapped else "the result is its `result` argument"
        return (
            "Submit your final result and end the task: call this once, when you are done, instead of answering "
            f"in text ({shape}, which must match the schema). If it is refused, fix what the error names and call "
            "it again."
        )

    @property
    def parameters(self) -> dict[str, Any]:
        return self.output.parameters

    def reset(self) -> None:
        self.accepted, self.value = False, None

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.value = await self.output.result_of(arguments)
        self.accepted = True
        return ToolOutput(text="result accepted")
