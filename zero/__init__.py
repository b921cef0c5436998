"""Zero: a terminal coding agent built around multi-agent orchestration.

The package root holds only the error tree (``zero.errors``); the engine lives in
``zero.agent``, ``zero.tools``, ``zero.sessions``, ``zero.specialists`` and
``zero.orchestrator``, and the command line in ``zero.cli``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
