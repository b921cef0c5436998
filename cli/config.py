"""Configuration: config files, environment and flags resolved into one run setup.

Files: ``${XDG_CONFIG_HOME:-~/.config}/zero/config.toml``, overridden key by key by
``<workspace>/.zero/config.toml``. The project's file is code from a repository: it may
narrow the permission mode and lower the limits and timeouts, never raise them, may not choose
where requests go (``base_url``), which provider and key is used (``provider``), what calls cost
(``prices``) or which secrets its commands get (``shell.env_passthrough``), and picks the model
only where the user chose none (with a warning); what it tries beyond that is reported and ignored.
The ceiling of the permission mode is ``--permission-mode``, else the user's own config,
else ``auto``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from zero.agent import Price, RetryPolicy, smallest_cap
from zero.agent.providers import DEFAULT_MODELS, PROVIDER_INFO, PROVIDERS, ProviderOptions
from zero.errors import ConfigError, ToolError, did_you_mean
from zero.specialists.registry import user_config_dir
from zero.strictfile import MAX_FILE, FileError, Problem, read_data, validate_model
from zero.tools import PERMISSION_MODES, PermissionMode, Workspace, within

__all__ = [
    "Config",
    "Configs",
    "RunSettings",
    "load_config",
    "permission_ceiling",
    "resolve_settings",
    "user_config_dir",
]

NO_PROVIDER = (
    "No model provider is configured. Set OPENAI_API_KEY or ANTHROPIC_API_KEY in the environment "
    "(or pick one with --provider / ZERO_PROVIDER / `provider = ...` in {config}); "
    "for a local OpenAI-compatible server such as Ollama, vLLM or LM Studio pass "
    "--base-url http://localhost:11434/v1 --model NAME; to run offline on a script of model turns, "
    "use --provider scripted --script FILE."
)


class PriceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    max_output: int | None = Field(None, ge=1)
    context: int | None = Field(None, ge=1)


class ServerEntry(BaseModel):
    """How one OpenAI-compatible server (by base URL) takes tools."""

    model_config = ConfigDict(extra="forbid")
    tool_choice: Literal["auto", "omit"] = "auto"
    stream_tools: bool = True
    text_tool_calls: bool = True  # an answer that is wholly a tool call written as text runs as the call


class RateLimitEntry(BaseModel):
    """``[rate_limits."PROVIDER/MODEL"]``: what the key may send a minute, before the server's headers say."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    rpm: float | None = Field(None, gt=0)
    tpm: float | None = Field(None, gt=0)


class McpServerEntry(BaseModel):
    """``[mcp.servers.NAME]``: a server Zero starts for its agents (a command, or a URL)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    timeout_seconds: float = Field(15.0, gt=0, le=600)
    call_timeout_seconds: float = Field(120.0, gt=0, le=86_400)
    trust: bool = False
    side_effect: Literal["read", "write", "shell", "network"] = "network"

    @model_validator(mode="after")
    def _one_way(self) -> McpServerEntry:
        if bool(self.command) == bool(self.url):
            raise ValueError("give command (a stdio server) or url (a streamable HTTP server), not both or neither")
        return self


class McpSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    servers: dict[str, McpServerEntry] = Field(default_factory=dict)


class ShellSection(BaseModel):
    """``[shell]``: ``env_passthrough`` names variables shell commands get although they look secret."""

    model_config = ConfigDict(extra="forbid")
    env_passthrough: list[str] = Field(default_factory=list)


class TelemetrySection(BaseModel):
    """``[telemetry]``: OpenTelemetry traces of every run (docs/TELEMETRY.md). Off unless ``enabled`` or an
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; ``endpoint`` and ``protocol`` else come from the ``OTEL_*``
    variables; ``capture_content``: messages and tool calls on the spans, redacted."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool | None = None
    endpoint: str | None = None
    protocol: Literal["http/protobuf", "grpc"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    capture_content: bool = False


class Config(BaseModel):
    """The keys a config file may hold. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    permission_mode: PermissionMode | None = None
    max_turns: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    max_concurrency: int | None = Field(None, ge=1)
    max_depth: int | None = Field(None, ge=0)
    retries: int | None = Field(None, ge=0, le=100)
    retry_max_delay: float | None = Field(None, gt=0, le=86_400)
    connect_timeout: float | None = Field(None, gt=0, le=86_400)
    read_timeout: float | None = Field(None, gt=0, le=86_400)
    max_connections: int | None = Field(None, ge=1, le=100_000)
    prices: dict[str, PriceEntry] = Field(default_factory=dict)
    servers: dict[str, ServerEntry] = Field(default_factory=dict)
    rate_limits: dict[str, RateLimitEntry] = Field(default_factory=dict)
    mcp: McpSection = Field(default_factory=McpSection)
    shell: ShellSection = Field(default_factory=ShellSection)
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection)


T = TypeVar("T")


def _read(path: Path, workspace: Path | None = None) -> dict[str, Any]:
    """A config file's data (none if there is no file); a project's (``workspace`` given) is read beneath the
    workspace, as a repository's file: a link out of it, or to a device or a FIFO, is refused."""
    if not path.exists() and not path.is_symlink():
        return {}
    raw = None
    if workspace is not None and not path.is_dir():  # (a folder: read_data says so)
        try:
            raw = Workspace([workspace]).read_regular(str(path.relative_to(workspace)), limit=MAX_FILE)
        except ToolError as e:
            raise FileError(
                [Problem(path=str(path), message=f"{e}: a project's config must be a file of the repository")]
            ) from None
    data, text = read_data(path, raw)
    _, problems = validate_model(Config, data, path, text)
    if problems:
        raise FileError(problems)
    return data


LIMIT_DEFAULTS = {"max_turns": 50, "max_depth": 1, "max_concurrency": 4, "retries": RetryPolicy().retries}
_PATIENCE_DEFAULTS = {
    "retry_max_delay": RetryPolicy().max_delay,
    "connect_timeout": ProviderOptions().connect_timeout,
    "read_timeout": ProviderOptions().read_timeout,
    "max_connections": ProviderOptions().max_connections,
}
_NOT_FROM_A_PROJECT = {
    "base_url": "a project may not choose where requests, and your API key, are sent",
    "provider": "a project may not choose which provider, and which of your API keys, is used",
    "prices": "a project may not set what calls cost (a cost budget relies on them)",
    "servers": "a project may not change how requests to your model servers are made",
    "rate_limits": "a project may not change how fast requests go to your model servers",
    "telemetry": "a project may not send traces of your runs anywhere",
}


@dataclass(frozen=True, kw_only=True)
class Configs:
    """The user's config (trusted) and the project's (it may narrow, never widen), and what was ignored."""

    user: Config = field(default_factory=Config)
    project: Config = field(default_factory=Config)
    warnings: tuple[str, ...] = ()

    @property
    def merged(self) -> Config:
        """The user's settings overridden by the project's, except the permission mode (see ``ceiling``)."""
        project = self.project.model_dump(exclude_unset=True, exclude={"permission_mode"})
        return Config.model_validate({**self.user.model_dump(exclude_unset=True), **project})


def load_config(workspace: Path) -> Configs:
    """The user's config and the project's; keys a project may not set are left out, with a warning."""
    user = Config.model_validate(_read(user_config_dir() / "config.toml"))
    path = workspace / ".zero" / "config.toml"
    data = _read(path, workspace)
    warnings = []
    for key, why in _NOT_FROM_A_PROJECT.items():
        if key in data:
            del data[key]
            warnings.append(f"{path}: '{key}' ignored: {why}; set it in {user_config_dir() / 'config.toml'}")
    shell = data.get("shell")
    if isinstance(shell, dict) and "env_passthrough" in shell:
        del shell["env_passthrough"]
        warnings.append(
            f"{path}: 'shell.env_passthrough' ignored: a project may not hand your secrets to its commands; "
            f"set it in {user_config_dir() / 'config.toml'}"
        )
    servers = data.get("mcp", {}).get("servers", {}) if isinstance(data.get("mcp"), dict) else {}
    for name, entry in servers.items() if isinstance(servers, dict) else ():
        for key in ("trust", "side_effect"):
            if isinstance(entry, dict) and key in entry:
                del entry[key]
                warnings.append(
                    f"{path}: mcp.servers.{name}.{key} ignored: a project may not decide how far its own "
                    f"servers are trusted; zero mcp trust {name} does that"
                )
    limits: dict[str, float] = {**LIMIT_DEFAULTS, **_PATIENCE_DEFAULTS}
    for key, default in limits.items():  # spend and patience: a project may lower these, never raise them
        yours = getattr(user, key)
        yours = default if yours is None else yours
        asked = data.get(key)
        if isinstance(asked, int | float) and not isinstance(asked, bool) and asked > yours:
            warnings.append(
                f"{path}: '{key} = {_number(data.pop(key))}' ignored: a project may lower it, not raise it above "
                f"yours ({_number(yours)}); set it in {user_config_dir() / 'config.toml'}"
            )
    warnings += _project_model(data, user, path)
    return Configs(user=user, project=Config.model_validate(data), warnings=tuple(warnings))


def _project_model(data: dict[str, Any], user: Config, path: Path) -> list[str]:
    """A project may pick the model where you have not (it goes to your provider, within your limits), and
    says so; a model you chose in your config wins."""
    model = data.get("model")
    if not isinstance(model, str) or model == user.model:
        return []
    mine = user_config_dir() / "config.toml"
    if user.model:
        del data["model"]
        return [f"{path}: 'model = {model}' ignored: you chose {user.model!r} in {mine}, and your choice wins"]
    return [
        f"{path}: the project picks the model {model!r} (it is used unless you choose one: --model, ZERO_MODEL "
        f"or model in {mine})"
    ]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """Provider, model and limits of a run, after flags, environment and config."""

    provider: str
    model: str
    base_url: str | None
    api_key: str | None
    permission_mode: PermissionMode
    max_turns: int
    prices: dict[str, Price] = field(default_factory=dict)
    max_output_tokens: int | None = None  # the smallest set: flag, user's config, project's
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    options: ProviderOptions = field(default_factory=ProviderOptions)
    max_depth: int = 1
    max_concurrency: int = 4
    configs: Configs = field(default_factory=Configs)
    ceiling: PermissionMode = "auto"  # the widest mode anything of this run may use
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    """Retry and timeout flags of a command (``None``: not given)."""

    retries: int | None = None
    retry_max_delay: float | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None


def _first(*values: T | None) -> T:
    """The first value that is set: a flag, then config, then the default (last, always set)."""
    for value in values:
        if value is not None:
            return value
    raise AssertionError("the default is always set")


def permission_ceiling(flag: str | None, configs: Configs) -> PermissionMode:
    """The widest permission mode of a run: ``--permission-mode``, else the user's config, else ``auto``."""
    wanted = flag or configs.user.permission_mode or "auto"
    for mode in PERMISSION_MODES:
        if mode == wanted:
            return mode
    raise ConfigError(f"unknown permission mode {wanted!r}; choose one of {', '.join(PERMISSION_MODES)}")


def _user_file() -> Path:
    return user_config_dir() / "config.toml"


def _check_url(url: str, where: str, *, with_v1: bool) -> None:
    """A server's address must say how to reach it: ``localhost:11434`` would be retried, and fail, as a
    request to a server that is down."""
    scheme, found, rest = url.partition("://")
    if found and scheme.lower() in ("http", "https") and rest.split("/", 1)[0]:
        return
    if found:
        raise ConfigError(f"{where} {url!r} is not a web address: give one that starts with http:// or https://")
    suggestion = "http://" + url + ("/v1" if with_v1 and "/" not in url.rstrip("/") else "")
    raise ConfigError(f"{where} {url!r} has no scheme: give the whole address, e.g. {suggestion}")


def resolve_settings(
    configs: Configs,
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    permission_mode: str | None,
    max_turns: int | None,
    max_output_tokens: int | None = None,
    network: Network | None = None,
    environ: dict[str, str] | None = None,
) -> RunSettings:
    """Apply the precedence README.md gives ("Using zero exec"): flag, environment, config, then detection."""
    env = dict(os.environ) if environ is None else environ
    config = configs.merged
    name = provider or env.get("ZERO_PROVIDER") or config.provider
    if name is None:
        if base_url or config.base_url or env.get("OPENAI_BASE_URL"):
            name = "openai-compatible"
        elif env.get("OPENAI_API_KEY"):
            name = "openai"
        elif env.get("ANTHROPIC_API_KEY"):
            name = "anthropic"
        else:
            raise ConfigError(NO_PROVIDER.format(config=user_config_dir() / "config.toml"))
    info = PROVIDER_INFO.get(name)
    if info is None:
        raise ConfigError(
            f"unknown provider {name!r}{did_you_mean(name, PROVIDERS)}; choose one of {', '.join(PROVIDERS)}"
        )
    from_env = env.get(info.url_env) if info.url_env else None
    url = base_url or from_env or config.base_url
    if url is not None:
        where = "--base-url" if base_url else from_env and info.url_env or f"base_url in {_user_file()}"
        _check_url(url, where, with_v1=name in ("openai", "openai-compatible"))
    api_key = env.get(info.key_env) if info.key_env else None
    if info.needs_key and not api_key and not url:
        raise ConfigError(
            f"{info.key_env} is not set: export it to use the {name} provider, or pass --base-url "
            "for a compatible local server, or --provider scripted --script FILE to run offline."
        )
    chosen = model or env.get("ZERO_MODEL") or config.model or DEFAULT_MODELS.get(name)
    if not chosen:
        raise ConfigError(f"the {name} provider has no default model: pass --model NAME (or set ZERO_MODEL)")
    ceiling = permission_ceiling(permission_mode, configs)
    mode, note = within(ceiling, configs.project.permission_mode, "the project's .zero/config.toml")
    prices = {
        m: Price(
            input=p.input, output=p.output, cached_input=p.cached_input, max_output=p.max_output, context=p.context
        )
        for m, p in config.prices.items()
    }
    flags = network or Network()
    default_retry, default_options = RetryPolicy(), ProviderOptions()
    servers = {key.rstrip("/"): entry for key, entry in config.servers.items()}  # with or without its last /
    server = servers.get(url.rstrip("/"), ServerEntry()) if url else ServerEntry()
    retry = RetryPolicy(
        retries=_first(flags.retries, config.retries, default_retry.retries),
        base_delay=default_retry.base_delay,
        max_delay=_first(flags.retry_max_delay, config.retry_max_delay, default_retry.max_delay),
    )
    options = ProviderOptions(
        connect_timeout=_first(flags.connect_timeout, config.connect_timeout, default_options.connect_timeout),
        read_timeout=_first(flags.read_timeout, config.read_timeout, default_options.read_timeout),
        max_connections=_first(config.max_connections, default_options.max_connections),
        tool_choice=server.tool_choice,
        stream_tools=server.stream_tools,
        text_tool_calls=server.text_tool_calls if "text_tool_calls" in server.model_fields_set else None,
    )
    return RunSettings(
        provider=name,
        model=chosen,
        base_url=url,
        api_key=api_key,
        permission_mode=mode,
        max_turns=max_turns or config.max_turns or LIMIT_DEFAULTS["max_turns"],
        prices=prices,
        max_output_tokens=smallest_cap(
            max_output_tokens, configs.user.max_output_tokens, configs.project.max_output_tokens
        ),
        retry=retry,
        options=options,
        max_depth=config.max_depth if config.max_depth is not None else LIMIT_DEFAULTS["max_depth"],
        max_concurrency=config.max_concurrency or LIMIT_DEFAULTS["max_concurrency"],
        configs=configs,
        ceiling=ceiling,
        warnings=configs.warnings + ((note,) if note else ()),
    )
