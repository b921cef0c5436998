"""The warnings of a run, for the outputs that are not a stream of events (text and JSON): each once."""

from __future__ import annotations

from anyio.streams.memory import MemoryObjectReceiveStream

from zero.agent import Event, WarningRaised
from zero.tools.describe import printable

__all__ = ["WarningLog"]


class WarningLog:
    """Collects the run's ``warning`` events (an unconfined shell, an answer cut at the output cap, a
    stream restarted, a tool mode fallback) in the order they came, each code and message once."""

    def __init__(self) -> None:
        self.items: list[WarningRaised] = []

    async def consume(self, events: MemoryObjectReceiveStream[Event]) -> None:
        async with events:
            async for event in events:
                if isinstance(event, WarningRaised) and not any(
                    (w.code, w.message) == (event.code, event.message) for w in self.items
                ):
                    self.items.append(event)

    def to_json(self) -> list[dict[str, str]]:
        return [{"code": w.code, "message": w.message, "sessionId": w.session_id} for w in self.items]

    def lines(self) -> list[str]:
        return [f"zero: warning: {printable(w.message)} ({w.code})" for w in self.items]  # (a file's name, say)
