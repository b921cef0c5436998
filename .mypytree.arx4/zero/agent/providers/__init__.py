"""Provider facts in one table, and the adapters, imported lazily: ``zero --help`` must not pay for the SDKs."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from zero.agent.messages import ModelRequest
from zero.agent.provider import Provider
from zero.agent.stream import StreamEvent
from zero.errors import ConfigError, did_you_mean

__all__ = [
    "DEFAULT_MODELS",
    "PROVIDERS",
    "PROVIDER_INFO",
    "LazyProvider",
    "ProviderInfo",
    "ProviderOptions",
    "ProviderPool",
    "create_provider",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderInfo:
    """What Zero knows about a provider: where its key and URL come from, and its default model."""

    name: str
    key_env: str | None
    url_env: str | None
    default_model: str | None
    needs_key: bool  # without a key (or a base URL to a server that takes none) it cannot run


PROVIDER_INFO: dict[str, ProviderInfo] = {
    info.name: info
    for info in (
        ProviderInfo(
            name="openai",
            key_env="OPENAI_API_KEY",
            url_env="OPENAI_BASE_URL",
            default_model="gpt-5-mini",
            needs_key=True,
        ),
        ProviderInfo(
            name="anthropic",
            key_env="ANTHROPIC_API_KEY",
            url_env="ANTHROPIC_BASE_URL",
            default_model="claude-sonnet-4-6",
            needs_key=True,
        ),
        ProviderInfo(
            name="openai-compatible",
            key_env="OPENAI_API_KEY",
            url_env="OPENAI_BASE_URL",
            default_model=None,
            needs_key=False,
        ),
        ProviderInfo(name="scripted", key_env=None, url_env=None, default_model="scripted", needs_key=False),
    )
}
PROVIDERS = tuple(PROVIDER_INFO)
DEFAULT_MODELS = {name: info.default_model for name, info in PROVIDER_INFO.items() if info.default_model}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderOptions:
    """How to talk to a server: timeouts (seconds), how many calls may be under way at once
    (``max_connections``: one connection each; the others wait their turn, which is neither a failure nor a
    retry, and a connect timeout counts from a call's own attempt), and how it takes tools
    (OpenAI-compatible ones: ``tool_choice`` "auto" or "omit", whether a request with tools may stream, and
    whether an answer that is wholly a tool call written as text runs as that call; None: for any server but
    OpenAI's)."""

    connect_timeout: float = 5.0
    read_timeout: float = 600.0
    max_connections: int = 256
    tool_choice: Literal["auto", "omit"] = "auto"
    stream_tools: bool = True
    text_tool_calls: bool | None = None


def create_provider(
    name: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    script: Path | None = None,
    options: ProviderOptions = ProviderOptions(),
) -> Provider:
    """Build the adapter for ``name``; configuration problems raise ``ConfigError``."""
    timeouts = {"connect_timeout": options.connect_timeout, "read_timeout": options.read_timeout}
    cap = options.max_connections
    if name == "openai" or name == "openai-compatible":
        if name == "openai-compatible" and not base_url:
            raise ConfigError("the openai-compatible provider needs --base-url (e.g. http://localhost:11434/v1)")

        def openai() -> Provider:
            from zero.agent.providers.openai import OpenAIProvider

            return OpenAIProvider(
                api_key=api_key,
                base_url=base_url,
                name=name,
                tool_choice=options.tool_choice,
                stream_tools=options.stream_tools,
                text_tool_calls=options.text_tool_calls,
                max_connections=cap,
                **timeouts,
            )

        return LazyProvider(name, openai)
    if name == "anthropic":

        def anthropic() -> Provider:
            from zero.agent.providers.anthropic import AnthropicProvider

            return AnthropicProvider(api_key=api_key, base_url=base_url, max_connections=cap, **timeouts)

        return LazyProvider(name, anthropic)
    if name == "scripted":
        if script is None:
            raise ConfigError("the scripted provider needs --script FILE (a TOML or JSON list of [[turns]])")
        from zero.agent.providers.scripted import ScriptedProvider

        return ScriptedProvider.from_file(script)
    raise ConfigError(f"unknown provider {name!r}{did_you_mean(name, PROVIDERS)}; choose one of {', '.join(PROVIDERS)}")


class LazyProvider:
    """A provider made on its first call, so that its SDK (~0.3 s to import) is not paid for at start-up:
    the shell shows its prompt first, and ``warm`` makes it in a thread while the user types."""

    def __init__(self, name: str, make: Callable[[], Provider]):
        self.name = name
        self._make = make
        self._real: Provider | None = None
        self._lock = threading.Lock()

    def warm(self) -> Provider:
        with self._lock:
            if self._real is None:
                self._real = self._make()
            return self._real

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return (self._real or self.warm()).stream(request)

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()


class ProviderPool:
    """The providers of one run, by name: made on first use (a specialist may pick another one)
    and closed together when the run ends."""

    def __init__(self, main: Provider, factory: Callable[[str], Provider]):
        self.main = main
        self._factory = factory
        self._made: dict[str, Provider] = {main.name: main}

    def __call__(self, name: str) -> Provider:
        if name not in self._made:
            self._made[name] = self._factory(name)
        return self._made[name]

    async def aclose(self) -> None:
        for provider in self._made.values():
            await provider.aclose()
