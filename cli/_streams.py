"""The streams a command reads and writes. Light on purpose: ``zero --help`` imports it."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (~2 ms of zero --help)

if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["CheckedOutput", "Streams"]


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

    def __exit__(self, kind: object, *exc: object) -> None:
        self._err.close()
        self._out.close()
        if self._out.left and kind is None:  # the reader left (``| head``): 141, quietly, as any command
            raise BrokenPipeError("the reader of standard output left")


class CheckedOutput:
    """The process's stdout (None: its descriptor was closed), whose write errors are an ``OutputError`` saying
    so, not an internal error or silence; a reader that left stays a ``BrokenPipeError`` (``| head``)."""

    def __init__(self, target: TextIO | None):
        self.target = target

    def write(self, text: str) -> int:
        try:
            if self.target is None:
                raise OSError(9, "the descriptor is closed")
            return self.target.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _unwritable(e) from None

    def flush(self) -> None:
        try:
            if self.target is not None:
                self.target.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _unwritable(e) from None

    def isatty(self) -> bool:
        return self.target is not None and self.target.isatty()

    def __getattr__(self, name: str) -> object:
        return getattr(self.target, name)


def _unwritable(e: OSError) -> Exception:
    from zero.errors import OutputError

    return OutputError(f"cannot write to standard output: {e.strerror or e}")
