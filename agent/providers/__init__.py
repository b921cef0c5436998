"""Provider adapters, imported lazily: ``zero --help`` must not pay for the SDKs."""

from __future__ import annotations

from pathlib import Path

from zero.agent.provider import Provider
from zero.errors import ConfigError, did_you_mean

__all__ = ["DEFAULT_MODELS", "PROVIDERS", "create_provider"]

PROVIDERS = ("openai", "anthropic", "openai-compatible", "scripted")
DEFAULT_MODELS = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-6", "scripted": "scripted"}


def create_provider(
    name: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    script: Path | None = None,
) -> Provider:
    """Build the adapter for ``name``; configuration problems raise ``ConfigError``."""
    if name == "openai" or name == "openai-compatible":
        if name == "openai-compatible" and not base_url:
            raise ConfigError("the openai-compatible provider needs --base-url (e.g. http://localhost:11434/v1)")
        from zero.agent.providers.openai import OpenAIProvider

        return OpenAIProvider(api_key=api_key, base_url=base_url, name=name)
    if name == "anthropic":
        from zero.agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(api_key=api_key, base_url=base_url)
    if name == "scripted":
        if script is None:
            raise ConfigError("the scripted provider needs --script FILE (a TOML or JSON list of [[turns]])")
        from zero.agent.providers.scripted import ScriptedProvider

        return ScriptedProvider.from_file(script)
    raise ConfigError(f"unknown provider {name!r}{did_you_mean(name, PROVIDERS)}; choose one of {', '.join(PROVIDERS)}")
