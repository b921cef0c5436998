"""Zero: a terminal coding agent built around multi-agent orchestration.

The package root holds only the error tree (``zero.errors``) and the strict-file loader
(``zero.strictfile``); the engine lives in ``zero.agent``, ``zero.tools``, ``zero.sessions``,
``zero.specialists`` and ``zero.orchestrator``, and the command line in ``zero.cli``.
"""

# The version is pyproject.toml's; this copy spares every start-up the ~20 ms importlib.metadata costs
# (zero --version: 44 ms with this copy, 66 ms reading the metadata). tests/test_version.py ties the two.
__version__ = "0.1.0"

__all__ = ["__version__"]
