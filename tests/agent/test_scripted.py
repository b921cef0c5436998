"""ScriptedProvider: matching, determinism under concurrency, loud failures, script files."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from zero import errors
from zero.agent import Message, ModelRequest, ScriptedProvider, ScriptMatch, ScriptTurn

pytestmark = pytest.mark.anyio


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(model="scripted", messages=messages)


async def text_of(provider: ScriptedProvider, req: ModelRequest) -> str:
    return "".join([e.text async for e in provider.stream(req) if e.kind == "text"])


async def test_turns_are_chosen_by_the_conversation_not_by_call_order() -> None:
    provider = ScriptedProvider(
        [
            ScriptTurn(match=ScriptMatch(system="reviewer", turn=1), text="review", delay=0.02),
            ScriptTurn(match=ScriptMatch(system="mapper", turn=1), text="map"),
            ScriptTurn(match=ScriptMatch(user="task 2"), text="two"),
            ScriptTurn(match=ScriptMatch(user="task 1"), text="one"),
        ]
    )
    got: dict[str, str] = {}

    async def ask(key: str, req: ModelRequest) -> None:
        got[key] = await text_of(provider, req)

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            ask, "r", request(Message(role="system", content="You are the reviewer"), Message(role="user", content="x"))
        )
        tg.start_soon(
            ask, "m", request(Message(role="system", content="You are the mapper"), Message(role="user", content="x"))
        )
        tg.start_soon(
            ask, "1", request(Message(role="system", content="plain"), Message(role="user", content="do task 1"))
        )
        tg.start_soon(
            ask, "2", request(Message(role="system", content="plain"), Message(role="user", content="do task 2"))
        )
    assert got == {"r": "review", "m": "map", "1": "one", "2": "two"}
    provider.assert_consumed()


async def test_an_unexpected_call_fails_loudly() -> None:
    provider = ScriptedProvider([ScriptTurn(match=ScriptMatch(user="hello"), text="hi")])
    with pytest.raises(errors.BadRequestError, match="no scripted turn matches call 1 of this conversation"):
        await text_of(provider, request(Message(role="user", content="something else")))


async def test_a_turn_is_used_once_unless_times_says_otherwise() -> None:
    provider = ScriptedProvider([ScriptTurn(text="once"), ScriptTurn(text="forever", times=0)])
    req = request(Message(role="user", content="q"))
    assert [await text_of(provider, req) for _ in range(3)] == ["once", "forever", "forever"]
    assert provider.unconsumed() == []


def test_unconsumed_turns_are_reported() -> None:
    provider = ScriptedProvider([ScriptTurn(text="never used")])
    with pytest.raises(AssertionError, match="1 scripted turns were never used"):
        provider.assert_consumed()


def test_script_files_load_from_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text(
        '[[turns]]\nmatch = { turn = 1 }\ntext = "hi"\n'
        'tool_calls = [{ name = "read_file", arguments = { path = "a" } }]\n'
    )
    assert ScriptedProvider.from_file(toml).turns[0].tool_calls[0].arguments == {"path": "a"}
    js = tmp_path / "s.json"
    js.write_text('{"turns": [{"text": "hi", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}]}')
    assert ScriptedProvider.from_file(js).turns[0].usage is not None


def test_a_bad_script_names_the_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[turns]]\ntxet = "typo"\n\n[[turns]]\ntext = "ok"\ndelay = -1\n')
    with pytest.raises(errors.ConfigError) as caught:
        ScriptedProvider.from_file(bad)
    assert str(caught.value).splitlines() == [  # every problem of the file, each with its line
        f"{bad}:2: unknown key 'turns.0.txet' (did you mean \"text\"?)",
        f"{bad}:6: turns.1.delay: Input should be greater than or equal to 0",
    ]
    with pytest.raises(errors.ConfigError, match="missing.toml: cannot read: No such file or directory"):
        ScriptedProvider.from_file(tmp_path / "missing.toml")
