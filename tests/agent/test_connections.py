"""A fan-out larger than the server's queue of connections waits its turn: each adapter has at most
``max_connections`` calls under way, so a server that takes connections one at a time is never sent more at
once than it can queue, and no call fails for the size of the fan-out (a connection the server's queue
dropped is retried by the kernel a second later, then two more, past the connect timeout)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from support.llm_server import LLMServer, Reply, anthropic_reply, openai_reply

from zero import errors
from zero.agent import Message, ModelRequest, Provider
from zero.agent.providers.anthropic import AnthropicProvider
from zero.agent.providers.openai import OpenAIProvider

pytestmark = pytest.mark.anyio

CALLS, QUEUE, UNDER_WAY = 200, 16, 8  # the server queues 16 connections; 8 calls may be under way at once
# Past the kernel's first retry of a dropped connection (1 s), short of its second (3 s): a fan-out that
# overflowed the queue has connections that wait both; a loaded machine's slow event loop is not one of them.
CONNECT = 2.5

ADAPTERS: dict[str, tuple[Callable[[str, int], Provider], Callable[[dict[str, object]], Reply]]] = {
    "openai": (
        lambda url, cap: OpenAIProvider(api_key="sk-test", base_url=url, connect_timeout=CONNECT, max_connections=cap),
        lambda request: openai_reply("hi", usage=(5, 1)),
    ),
    "anthropic": (
        lambda url, cap: AnthropicProvider(
            api_key="sk-ant-test", base_url=url, connect_timeout=CONNECT, max_connections=cap
        ),
        lambda request: anthropic_reply("hi", usage=(5, 1)),
    ),
}


async def fan_out(adapter: str, cap: int) -> tuple[list[str], int]:
    """``CALLS`` calls at once (each an agent of its own); the errors they ended with, and how many the server
    answered."""
    make, reply = ADAPTERS[adapter]
    failed: list[str] = []
    with LLMServer(reply, backlog=QUEUE) as server:
        provider = make(server.url, cap)

        async def call(i: int) -> None:
            request = ModelRequest(
                model="m", messages=(Message(role="user", content="hi"),), metadata={"session_id": f"agent_{i}"}
            )
            try:
                async for _ in provider.stream(request):
                    pass
            except errors.ProviderError as e:
                failed.append(str(e))

        async with anyio.create_task_group() as tg:
            for i in range(CALLS):
                tg.start_soon(call, i)
        await provider.aclose()
        return failed, len(server.requests)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
async def test_a_fan_out_larger_than_the_servers_queue_waits_its_turn(adapter: str) -> None:
    failed, answered = await fan_out(adapter, UNDER_WAY)
    assert failed == [] and answered == CALLS
