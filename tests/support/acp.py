"""An editor on the other end of ``zero acp``: the ``acp`` SDK's client over the agent's stdio."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, connect_to_agent
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from support.cli import ZERO


class Editor:
    """An ACP client: records every update, answers permission requests from a list."""

    def __init__(self, answers: list[str] | None = None):
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[Any] = []
        self.offered: list[list[str]] = []  # the names of the options of each request
        self.answers = list(answers or [])
        self.seen: list[tuple[str, Any]] = []  # ("update" | "ask", what) in the order it came

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.seen.append(("update", update))

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kwargs: Any) -> Any:
        self.asked.append(tool_call)
        self.seen.append(("ask", tool_call))
        self.offered.append([option.name for option in options])
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=answer, outcome="selected"))

    def kinds(self) -> list[str]:
        return [u.session_update for _, u in self.updates]

    def of_call(self, call_id: str) -> list[str]:
        """What the editor saw of one tool call, in order: ``tool_call:STATUS``, ``tool_call_update:STATUS``
        (``-`` when it has none) and ``ask`` for its permission request."""
        seen = []
        for kind, what in self.seen:
            if kind == "ask" and what.tool_call_id == call_id:
                seen.append("ask")
            elif kind == "update" and getattr(what, "tool_call_id", None) == call_id:
                seen.append(f"{what.session_update}:{what.status or '-'}")
        return seen

    def on_connect(self, conn: Any) -> None:
        return None


async def refused(call: Awaitable[Any]) -> str:
    """What the agent answered a request it refused (the error's message and data)."""
    with pytest.raises(RequestError) as caught:
        await call
    return f"{caught.value} {caught.value.data}"


@asynccontextmanager
async def agent(editor: Editor, script: Path, *extra: str) -> AsyncIterator[Any]:
    proc = await asyncio.create_subprocess_exec(
        ZERO, "acp", "--provider", "scripted", "--script", str(script), *extra,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    conn = connect_to_agent(editor, proc.stdin, proc.stdout, use_unstable_protocol=True)  # type: ignore[arg-type]
    try:
        await conn.initialize(protocol_version=1)
        yield conn
    finally:
        await conn.close()
        proc.stdin.close()
        with anyio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
