"""ScriptedProvider: replays scripted model turns, for tests and offline runs.

A script is a list of turns. Each call picks the first unused turn whose ``match``
fits the conversation (the system prompt, the first user message, the last message,
the call number), so several agents can share one script and each gets its own
answers, whatever order they run in. A call that matches no turn fails loudly.

TOML form (``zero exec --provider scripted --script run.toml``)::

    [[turns]]
    match = { user = "README", turn = 1 }
    text = "Let me read it."
    tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]

    [[turns]]
    match = { user = "README", turn = 2 }
    text = "The README says hello."
    usage = { prompt_tokens = 900, completion_tokens = 40 }
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from zero import errors
from zero.agent.governor import RateLimits
from zero.agent.messages import Message, ModelRequest, ToolCall, Usage
from zero.agent.stream import (
    Finish,
    LimitsReport,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    UsageReport,
)
from zero.strictfile import load_model

__all__ = [
    "Script",
    "ScriptMatch",
    "ScriptRecording",
    "ScriptResult",
    "ScriptSession",
    "ScriptToolCall",
    "ScriptTurn",
    "ScriptUsage",
    "ScriptedProvider",
    "load_script",
    "turn_number",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ScriptMatch(_Strict):
    """Which conversations a turn answers; every field given must fit (substrings)."""

    system: str | None = None
    user: str | None = None
    last: str | None = None
    prompt: str | None = None
    turn: int | None = Field(None, ge=1, description="1 for the first model call of a run, 2 for the next...")

    def fits(self, messages: Sequence[Message]) -> bool:
        if self.turn is not None and self.turn != turn_number(messages):
            return False
        system = next((m.content for m in messages if m.role == "system"), "")
        user = next((m.content for m in messages if m.role == "user"), "")
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
        last = messages[-1].content if messages else ""
        return all(
            needle is None or needle in hay
            for needle, hay in ((self.system, system), (self.user, user), (self.prompt, prompt), (self.last, last))
        )


class ScriptToolCall(_Strict):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptUsage(_Strict):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cached_tokens: int = Field(0, ge=0)


ErrorKind = Literal[
    "rate_limit", "overloaded", "timeout", "connection", "auth", "bad_request", "context_too_long", "stream_dropped"
]
_ERRORS: dict[str, type[errors.ProviderError]] = {
    "rate_limit": errors.RateLimitError,
    "overloaded": errors.OverloadedError,
    "timeout": errors.ProviderTimeoutError,
    "connection": errors.ProviderConnectionError,
    "auth": errors.AuthError,
    "bad_request": errors.BadRequestError,
    "context_too_long": errors.ContextTooLongError,
    "stream_dropped": errors.StreamDroppedError,
}


class ScriptError(_Strict):
    """Fail this call. ``stream_dropped`` streams the turn's text first, then fails."""

    kind: ErrorKind
    message: str = ""
    retry_after: float | None = Field(None, ge=0, description="Seconds the server says to wait (a rate limit).")

    def build(self) -> errors.ProviderError:
        message = self.message or f"scripted {self.kind.replace('_', ' ')} error"
        return _ERRORS[self.kind](message, retry_after=self.retry_after)


class ScriptResult(_Strict):
    """What one of a turn's tool calls returned when the run was recorded, which ``zero replay`` compares
    with what it returns now; ``missing``: the recorded run ended before the call did."""

    name: str
    status: Literal["ok", "error", "denied", "missing"]
    output: str = ""


class ScriptTurn(_Strict):
    """One scripted model reply. ``times`` is how many calls it answers (0: any number). ``session`` and
    ``results`` are a recording's (``zero sessions export --as-script``): the session it answered, by its
    place in the run, and what its tool calls returned; the provider does not read them."""

    match: ScriptMatch = Field(default_factory=ScriptMatch)
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    usage: ScriptUsage | None = None
    delay: float = Field(0.0, ge=0, description="Seconds before the first token.")
    chunk: int | None = Field(None, ge=1, description="Stream the text in pieces of this many characters.")
    error: ScriptError | None = None
    finish: Literal["stop", "length"] | None = Field(
        None, description="Why the model stops; `length`: cut at the output cap (default: stop, or tool_calls)."
    )
    times: int = Field(1, ge=0)
    session: str = ""
    results: list[ScriptResult] = Field(default_factory=list)


class ScriptSession(_Strict):
    """A recorded session: ``path`` is its place in the run (``""`` the top, a member's name, then ``/`` and
    the id of the ``Task`` call that started each child), ``label`` what a report calls it."""

    path: str
    id: str
    label: str
    status: str = ""
    cwd: str = ""


class ScriptRecording(_Strict):
    """The run a script was exported from (``zero sessions export --as-script``), for ``zero replay``."""

    session_id: str
    kind: Literal["agent", "team"]
    session_kind: str = ""  # the recorded session's own kind: "" (a top-level agent), team, member, child, fork
    workspace: str
    model: str = ""
    prompts: list[str] = Field(default_factory=list, description="An agent's prompts, one for each run.")
    team: dict[str, Any] = Field(default_factory=dict, description="The team file as the run recorded it.")
    team_file: str = ""
    sessions: list[ScriptSession] = Field(default_factory=list)


class Script(_Strict):
    recording: ScriptRecording | None = None
    turns: list[ScriptTurn]


def load_script(path: Path) -> Script:
    """A ``.toml`` or ``.json`` script; ``FileError`` lists every problem with its file, line and key."""
    return load_model(Script, path)


def turn_number(messages: Sequence[Message]) -> int:
    """Which model call this is since the latest user message (a prompt, or a note): 1 + assistant messages since."""
    count = 0
    for m in reversed(messages):
        if m.role == "user":
            break
        count += m.role == "assistant"
    return count + 1


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _fill(value: Any, messages: Sequence[Message]) -> Any:
    """Replace ``{{key}}`` in string arguments with the latest ``key: value`` line of a tool result.

    This lets a script use what an earlier tool call returned, e.g. ``resume = "{{session_id}}"``.
    """
    if isinstance(value, dict):
        return {k: _fill(v, messages) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, messages) for v in value]
    if not isinstance(value, str) or "{{" not in value:
        return value

    def lookup(match: re.Match[str]) -> str:
        key = match.group(1)
        line = re.compile(rf"^{re.escape(key)}: (\S+)", re.MULTILINE)
        for m in reversed(messages):
            if m.role == "tool" and (found := line.search(m.content)):
                return found.group(1)
        raise errors.BadRequestError(f"script placeholder {{{{{key}}}}}: no tool result has a '{key}: ...' line yet")

    return _PLACEHOLDER.sub(lookup, value)


def _tokens(text: str) -> int:
    """About what a server's tokenizer counts: four ASCII characters a token, and a token for
    each other character (CJK text runs about one a character)."""
    plain = len(text.encode("ascii", "ignore"))
    return plain // 4 + len(text) - plain


class ScriptedProvider:
    """A provider that replays a script. ``calls`` records every request it answered."""

    name = "scripted"

    def __init__(self, turns: Sequence[ScriptTurn], *, chunk_words: int = 3):
        self.turns = list(turns)
        self._left = [t.times for t in self.turns]
        self.calls: list[ModelRequest] = []
        self._chunk_words = chunk_words

    @classmethod
    def from_file(cls, path: Path | str) -> ScriptedProvider:
        """Load a ``.toml`` or ``.json`` script; ``FileError`` lists every problem with its file, line and key."""
        return cls(load_script(Path(path)).turns)

    def unconsumed(self) -> list[ScriptTurn]:
        """Turns that still expect calls (turns with ``times = 0`` never do)."""
        return [t for t, left in zip(self.turns, self._left, strict=True) if left > 0 and t.times > 0]

    def assert_consumed(self) -> None:
        left = self.unconsumed()
        if left:
            raise AssertionError(f"{len(left)} scripted turns were never used: {[t.match for t in left]}")

    def _pick(self, request: ModelRequest) -> ScriptTurn:
        for i, turn in enumerate(self.turns):
            if (self._left[i] > 0 or turn.times == 0) and turn.match.fits(request.messages):
                self._left[i] -= turn.times > 0
                return turn
        last = request.messages[-1].content[:200] if request.messages else ""
        raise errors.BadRequestError(
            f"no scripted turn matches call {turn_number(request.messages)} of this conversation "
            f"(last message: {last!r}); add a [[turns]] entry whose match fits it"
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        turn = self._pick(request)
        self.calls.append(request)
        if turn.error and turn.error.kind != "stream_dropped":  # the server said no (after the delay)
            await anyio.sleep(turn.delay)
            raise turn.error.build()
        yield LimitsReport(RateLimits())  # it took the call, stating no limits; the first token comes later
        # A real model call always waits on the network: give the other tasks their turn, too.
        await anyio.sleep(turn.delay)
        for chunk in self._chunks(turn.reasoning, turn.chunk):
            yield ReasoningDelta(chunk)
        for chunk in self._chunks(turn.text, turn.chunk):
            yield TextDelta(chunk)
        if turn.error:
            raise turn.error.build()
        number = turn_number(request.messages)
        for index, call in enumerate(turn.tool_calls):
            call_id = call.id or f"call_{number}_{index + 1}"
            arguments = _fill(call.arguments, request.messages)
            raw = json.dumps(arguments)
            yield ToolCallStart(index=index, id=call_id, name=call.name)
            yield ToolCallDelta(index=index, arguments=raw)
            yield ToolCallDone(index=index, call=ToolCall(id=call_id, name=call.name, arguments=arguments))
        yield UsageReport(self._usage(turn, request))
        yield Finish(turn.finish or ("tool_calls" if turn.tool_calls else "stop"))

    def _chunks(self, text: str, size: int | None) -> list[str]:
        if size is not None:
            return [text[i : i + size] for i in range(0, len(text), size)]
        words = re.findall(r"\S+\s*|\s+", text)
        n = self._chunk_words
        return ["".join(words[i : i + n]) for i in range(0, len(words), n)]

    @staticmethod
    def _usage(turn: ScriptTurn, request: ModelRequest) -> Usage:
        if turn.usage:
            return Usage(
                prompt_tokens=turn.usage.prompt_tokens,
                completion_tokens=turn.usage.completion_tokens,
                cached_tokens=turn.usage.cached_tokens,
            )
        # No usage given: counted as a real tokenizer would, about, so budgets see real numbers.
        prompt = sum(
            _tokens(m.content) + sum(_tokens(json.dumps(c.arguments, ensure_ascii=False)) for c in m.tool_calls)
            for m in request.messages
        )
        out = _tokens(turn.text) + sum(_tokens(json.dumps(c.arguments)) + _tokens(c.name) for c in turn.tool_calls)
        return Usage(prompt_tokens=max(1, prompt), completion_tokens=max(1, out))

    async def aclose(self) -> None:
        return None
