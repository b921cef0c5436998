"""Rich's console, but a reader that leaves (``| head``) is a ``BrokenPipeError``, which every command ends
with 141, quietly: Rich's own answer is exit 1, silently."""

from __future__ import annotations

from rich.console import Console as RichConsole

__all__ = ["Console"]


class Console(RichConsole):
    def on_broken_pipe(self) -> None:
        self.quiet = True  # (nothing more to say to a reader that left)
        raise BrokenPipeError("the reader of the output left")
