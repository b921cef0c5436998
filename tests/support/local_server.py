"""An OpenAI-compatible local model server as rude as the real ones.

``LocalModel`` is a responder for ``LLMServer``: the model's answers come from a script (a function
of the request), and each way a real server was seen to misbehave is a switch, so a test turns on
what llama-cpp-python, vLLM or Ollama do and the real ``openai`` SDK talks to it over HTTP:

- ``usage=False``: no usage chunk, whatever ``stream_options`` says (llama-cpp-python);
- ``content_500``: an assistant message whose ``content`` is ``null`` or missing gets a 500, the same
  one every time (llama-cpp-python's function-calling templates);
- ``max_tokens`` is honoured: an answer longer than it (four characters a token) is cut, with
  ``finish_reason: "length"``, a tool call in the middle of its arguments;
- ``tools_need_choice``: without ``tool_choice`` the tools are ignored (llama-cpp-python);
- ``auto_stream_empty``: ``tool_choice: "auto"`` streamed gets a 200 and an empty stream
  (llama-cpp-python), while the same request unstreamed works;
- ``reject_tool_choice``: ``tool_choice`` gets a 400 that names it (vLLM without a tool parser);
- ``loading``: the first N requests get llama.cpp's ``503 Loading model``;
- ``template_error``: a conversation with a tool result gets a 500, the same one every time (a chat
  template that knows no ``tool`` role);
- ``calls_as_text``: the model writes its tool calls as text (``"json"``, ``"fenced"`` in a ```json block,
  ``"tagged"`` in <tool_call> tags), as small models do, and the server passes them on as content;
- ``context_chars``: a longer prompt gets a 200 and a stream closed before its first chunk;
- ``malformed``: the first N streams carry a ``data:`` line that is not JSON;
- ``drop_first``: the first stream breaks off after some text, and the retry answers differently.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from support.llm_server import Reply, _chunk, _split

TEMPLATE_ERROR = 'can only concatenate str (not "NoneType") to str'
"""What llama-cpp-python's chat template says of an assistant message without text content."""
ROLES_ERROR = "Conversation roles must alternate user/assistant/user/assistant/..."
"""What a chat template without a ``tool`` role says of a tool result (Mistral's, Gemma's)."""


@dataclass
class Answer:
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, arguments)


Script = Callable[[dict[str, Any], int], Answer]  # (request, how many requests so far) -> answer


@dataclass
class LocalModel:
    script: Script
    usage: bool = False
    content_500: bool = True
    tools_need_choice: bool = True
    auto_stream_empty: bool = False
    reject_tool_choice: bool = False
    loading: int = 0
    calls_as_text: Literal["json", "fenced", "tagged"] | None = None
    template_error: bool = False
    context_chars: int | None = None
    malformed: int = 0
    drop_first: bool = False
    pieces: int = 4
    pace: float = 0.0  # seconds between the chunks of a stream (a model generating slowly)
    _count: itertools.count[int] = field(default_factory=itertools.count)

    def __call__(self, request: dict[str, Any]) -> Reply:
        number = next(self._count)
        messages = request.get("messages", [])
        if self.content_500 and any(m.get("role") == "assistant" and m.get("content") is None for m in messages):
            return _error(500, TEMPLATE_ERROR, "server_error")
        if number < self.loading:
            return Reply(503, body={"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
        if self.template_error and any(m.get("role") == "tool" for m in messages):
            return _error(500, ROLES_ERROR, "server_error")
        if self.reject_tool_choice and "tool_choice" in request:
            return _error(
                400,
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
                "BadRequestError",
            )
        streamed = request.get("stream", False)
        prompt = sum(len(str(m.get("content") or "")) for m in messages)
        if self.context_chars is not None and prompt > self.context_chars:
            if streamed:
                return Reply(events=[])  # llama.cpp: the prompt does not fit; the stream closes at once
            return _error(400, f"Requested tokens ({prompt}) exceed context window of {self.context_chars}", "")
        tools_offered = bool(request.get("tools")) and (not self.tools_need_choice or "tool_choice" in request)
        if streamed and self.auto_stream_empty and request.get("tool_choice") == "auto":
            return Reply(events=[])
        answer = self.script(request, number)
        if self.calls_as_text is not None and answer.tool_calls:
            answer = Answer(written_calls(answer.tool_calls, self.calls_as_text))
        if self.drop_first and number == 0:
            answer = Answer("This first answer breaks off in the middle of a sent")
        calls = answer.tool_calls if tools_offered else []
        cap = request.get("max_tokens") or request.get("max_completion_tokens")
        text, raw_calls, finish = _capped(answer.text, calls, cap)
        completion = (len(text) + sum(len(a) for _, a in raw_calls)) // 4 + 1
        usage = {"prompt_tokens": prompt // 4 + 1, "completion_tokens": completion}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not streamed:
            return Reply(body=_completion(text, raw_calls, finish, usage if self.usage else None))
        events: list[tuple[str | None, str]] = [(None, _chunk({"role": "assistant", "content": ""}))]
        for part in _split(text, self.pieces):
            events.append((None, _chunk({"content": part})))
        if number < self.malformed:
            events.insert(2, (None, '{"id": "chatcmpl-1", "choices": [{"delta": {"content": "broken'))
        for index, (name, raw) in enumerate(raw_calls):
            start = {"index": index, "id": f"call_{number}_{index}", "type": "function"}
            events.append((None, _chunk({"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]})))
            for part in _split(raw, self.pieces):
                events.append((None, _chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})))
        events.append((None, _chunk({}, finish)))
        if self.usage and request.get("stream_options", {}).get("include_usage"):
            events.append((None, _chunk(None, usage=usage)))
        events.append((None, "[DONE]"))
        if self.drop_first and number == 0:
            return Reply(events=events, cut_after=3)
        return Reply(events=events, pace=self.pace)


def written_calls(calls: list[tuple[str, dict[str, Any]]], form: Literal["json", "fenced", "tagged"]) -> str:
    """Tool calls as a small model writes them in its text."""
    written = [json.dumps({"name": name, "arguments": arguments}) for name, arguments in calls]
    if form == "tagged":
        return "\n".join(f"<tool_call>\n{call}\n</tool_call>" for call in written)
    return written[0] if form == "json" else f"```json\n{written[0]}\n```"


def _capped(
    text: str, calls: list[tuple[str, dict[str, Any]]], cap: int | None
) -> tuple[str, list[tuple[str, str]], str]:
    """What fits in ``cap`` tokens (four characters each): the text, then the calls' arguments."""
    raw = [(name, json.dumps(arguments)) for name, arguments in calls]
    finish = "tool_calls" if raw else "stop"
    if cap is None:
        return text, raw, finish
    room = cap * 4
    if len(text) > room:
        return text[:room], [], "length"
    room -= len(text)
    out: list[tuple[str, str]] = []
    for name, arguments in raw:
        if len(arguments) > room:
            return text, [*out, (name, arguments[:room])], "length"
        room -= len(arguments)
        out.append((name, arguments))
    return text, out, finish


def _completion(text: str, calls: list[tuple[str, str]], finish: str, usage: dict[str, int] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": raw}}
            for i, (name, raw) in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "local",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


def _error(status: int, message: str, kind: str) -> Reply:
    return Reply(status, body={"error": {"message": message, "type": kind, "code": status}})


def turns(*answers: Answer) -> Script:
    """A script answering each model call of a run in turn: the number of assistant messages so far."""

    def script(request: dict[str, Any], number: int) -> Answer:
        done = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
        return answers[min(done, len(answers) - 1)]

    return script
