from __future__ import annotations

"""The permission modes and providers ``zero``'s flags choose from, as plain tuples: the parser needs them
before anything else is imported (tests tie them to zero.tools and zero.agent.providers)."""

__all__ = ["PERMISSION_MODES", "PROVIDERS"]

PERMISSION_MODES = ("read-only", "ask", "auto", "unsafe")
PROVIDERS = ("openai", "anthropic", "openai-compatible", "scripted")
