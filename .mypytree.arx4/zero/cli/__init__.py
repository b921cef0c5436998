"""The command line: a thin shell over the engine. ``main(argv) -> exit code``."""

from __future__ import annotations

from zero.cli.main import entry, main

__all__ = ["entry", "main"]
