"""The streams a command reads and writes. Light on purpose: ``zero --help`` imports it."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (~2 ms of zero --help)

if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["Streams"]


class Streams:
    """Where a command reads and writes: the process's own streams, or a test's.

    ``real`` is true in Zero's own process (not when a test calls ``main``).
    """

    def __init__(self, stdout: TextIO, stderr: TextIO, stdin: TextIO, real: bool = False):
        self.stdout = stdout
        self.stderr = stderr
        self.stdin = stdin
        self.real = real

    def unblocked(self) -> Unblocked:
        """These streams, written from threads of their own while a run goes on (see ``_output``)."""
        return Unblocked(self)


class Unblocked:
    def __init__(self, streams: Streams):
        self.streams = streams

    def __enter__(self) -> Streams:
        from typing import cast

        from zero.cli._output import BackgroundWriter

        self._out, self._err = BackgroundWriter(self.streams.stdout), BackgroundWriter(self.streams.stderr)
        return Streams(cast("TextIO", self._out), cast("TextIO", self._err), self.streams.stdin, self.streams.real)

    def __exit__(self, *exc: object) -> None:
        self._err.close()
        self._out.close()
