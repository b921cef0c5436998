"""Pieces every command shares: the streams, the workspace, settings, the run context, signals, errors."""

from __future__ import annotations

import functools
import os
import signal
import site
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import TextIO, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from zero.agent import Approver, PriceTable, Provider, RateGovernors
from zero.agent.mcpconfig import McpServer
from zero.agent.prompts import read_instructions
from zero.agent.providers import ProviderPool, create_provider
from zero.cli._output import BackgroundWriter
from zero.cli._streams import Streams
from zero.cli.config import Configs, Network, RunSettings, load_config, resolve_settings, user_config_dir
from zero.cli.mcp_config import run_servers
from zero.cli.options import Options, RunOptions
from zero.cli.trust import approve, load_specialists, specialist_warnings
from zero.errors import ConfigError, UsageError
from zero.heap import settle_collector
from zero.sessions import AgentSession, FileSessionStore, RunTree, SessionStore, default_data_dir
from zero.specialists import AgentContext, SpecialistRegistry
from zero.tools import ShellSettings, Tool, Workspace, hide_own_secrets

TYPE_CHECKING = False
if TYPE_CHECKING:
    from zero.orchestrator.team import Defaults

__all__ = [
    "Opener",
    "Streams",
    "confirm",
    "freeze_startup_heap",
    "interruptible",
    "make_provider",
    "network_from",
    "open_context",
    "print_error",
    "print_warnings",
    "session_store",
    "settings_from",
    "team_settings",
    "unwrap",
    "workspace_from",
]

T = TypeVar("T")

Opener = Callable[[AgentContext], Awaitable[AgentSession]]
"""Opens the session a command runs: a new agent (``exec``) or a recorded one (``sessions resume``)."""


def freeze_startup_heap(streams: Streams) -> None:
    """``settle_collector`` in Zero's own process only: a test calling ``main`` must not freeze the test
    runner's heap."""
    if streams.real:
        settle_collector()


def current_folder(flag: str = "--cwd") -> Path:
    """The process's current folder; ``UsageError`` if it was removed (``getcwd`` fails then)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise UsageError(f"the current folder was removed: cd to a folder that exists, or give {flag} DIR") from None


def workspace_from(options: Options) -> Path:
    """The folder ``--cwd`` names (the current one without it), resolved."""
    path = Path(options.cwd).expanduser() if options.cwd else current_folder()
    if not path.is_dir():
        raise UsageError(f"--cwd {options.cwd}: {'not a folder' if path.exists() else 'no such folder'}")
    return Path(os.path.realpath(path))


def settings_from(run: RunOptions, workspace: Path) -> RunSettings:
    config = load_config(workspace)
    return resolve_settings(
        config,
        provider=run.provider,
        model=run.model,
        base_url=run.base_url,
        permission_mode=run.permission_mode,
        max_turns=run.max_turns,
        max_output_tokens=run.max_output_tokens,
        network=network_from(run),
    )


def team_settings(configs: Configs, run: RunOptions, defaults: Defaults) -> RunSettings:
    """What a team's members inherit (``zero swarm``, and run_team of ``zero mcp serve``): the flags, else the
    team's [defaults], else config."""
    return resolve_settings(
        configs,
        provider=run.provider or defaults.provider,
        model=run.model or defaults.model,
        base_url=run.base_url,
        permission_mode=run.permission_mode,
        max_turns=None,
        max_output_tokens=run.max_output_tokens,
        network=network_from(run),
    )


def network_from(run: RunOptions) -> Network:
    """The retry and timeout flags of a command."""
    return Network(
        retries=run.retries,
        retry_max_delay=run.retry_max_delay,
        connect_timeout=run.connect_timeout,
        read_timeout=run.read_timeout,
    )


def make_provider(settings: RunSettings, run: RunOptions) -> tuple[Provider, PriceTable]:
    if run.script and settings.provider != "scripted":
        raise UsageError("--script is only for --provider scripted")
    provider = create_provider(
        settings.provider,
        api_key=settings.api_key,
        base_url=settings.base_url,
        script=Path(run.script) if run.script else None,
        options=settings.options,
    )
    return provider, PriceTable.builtin().with_overrides(settings.prices)


@asynccontextmanager
async def open_context(
    run: RunOptions,
    settings: RunSettings,
    workspace: Path,
    streams: Streams,
    registry: SpecialistRegistry | None = None,
    approver: Approver | None = None,
    store: SessionStore | None = None,
) -> AsyncIterator[AgentContext]:
    """What the agents of one command share: the session store (``store``, else ``$ZERO_HOME``'s), the
    specialists, the providers, and who answers a call that asks for approval (``approver``: the front end's
    user; None: nobody, so it is denied).

    On the way out the providers are closed and every session's last writes are on disk.
    """
    if streams.real:  # Zero's own process (not a test calling main), before any command or MCP server starts
        hide_own_secrets()
    if store is None:
        store = session_store(writable=True)  # before anything runs: a run that cannot be recorded does not start
    tree = RunTree()  # the command's run: every session it runs is a node of it
    stop_tracing = _tracing(settings.configs, tree)
    provider, prices = make_provider(settings, run)

    def other(name: str) -> Provider:
        resolved = resolve_settings(
            settings.configs, provider=name, model=None, base_url=None, permission_mode=None, max_turns=None
        )
        return make_provider(resolved, run)[0]

    pool = ProviderPool(provider, other)
    servers, skipped = run_servers(settings.configs, workspace)
    print_warnings(tuple(skipped), streams.stderr)
    print_warnings(tuple(read_instructions(str(workspace))[1]), streams.stderr)
    if registry is None:
        registry = await anyio.to_thread.run_sync(load_specialists, workspace, settings.configs, settings)
        print_warnings(specialist_warnings(registry), streams.stderr)
    try:
        async with _mcp(servers, streams) as mcp:
            yield AgentContext(
                store=store,
                registry=registry,
                workspace=Workspace([workspace]),
                provider=provider,
                model=settings.model,
                providers=pool,
                prices=prices,
                max_depth=settings.max_depth,
                max_concurrency=settings.max_concurrency,
                max_output_tokens=settings.max_output_tokens,
                retry=settings.retry,
                mcp=mcp,
                approver=approver,
                governors=RateGovernors({k: (v.rpm, v.tpm) for k, v in settings.configs.user.rate_limits.items()}),
                tree=tree,
                shell=shell_settings(settings.configs),
                replay_of=run.replay_of or "",
                trust=functools.partial(approve, "specialists", workspace),
            )
    finally:
        with anyio.CancelScope(shield=True):
            await pool.aclose()
            await anyio.to_thread.run_sync(store.flush)  # every session's final status, on disk
            if stop_tracing is not None:
                await anyio.to_thread.run_sync(stop_tracing)  # the spans not sent yet


def _tracing(configs: Configs, tree: RunTree) -> Callable[[], None] | None:
    """Trace ``tree``'s run if telemetry is on (``[telemetry]`` in your config, or ``OTEL_EXPORTER_OTLP_*``
    set; ``OTEL_SDK_DISABLED=true`` turns it off): what ends it. Off, OpenTelemetry is not even imported."""
    section, env = configs.user.telemetry, os.environ
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    on = section.enabled if section.enabled is not None else bool(section.endpoint or endpoint)
    if not on or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    try:
        from zero.sessions.telemetry import start_tracing
    except ImportError as e:
        raise ConfigError(
            f"telemetry is on ([telemetry] or OTEL_EXPORTER_OTLP_ENDPOINT) but OpenTelemetry is not installed "
            f"({e.name}): pip install 'zero-agent[otel]', or turn it off with [telemetry] enabled = false"
        ) from None
    protocol = (
        section.protocol
        or env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    )
    return start_tracing(
        tree,
        endpoint=section.endpoint,
        protocol="grpc" if protocol == "grpc" else "http/protobuf",
        headers=section.headers or None,
        capture_content=section.capture_content,
    )


def shell_settings(configs: Configs) -> ShellSettings:
    """What shell commands run with (the bash tool's, a landing's check): Zero's own folders never
    writable, and the variables the user's config lets through."""
    return ShellSettings(protected=_zero_folders(), env_passthrough=tuple(configs.user.shell.env_passthrough))


def _zero_folders() -> tuple[Path, ...]:
    """What Zero reads when it starts, never writable from the sandbox: its data and config folders as this run
    finds them and as a run without ``ZERO_HOME`` and ``XDG_*`` would (in your home), and the virtual
    environment it runs from, or your user site-packages (its code, and the ``.pth`` files Python runs at start)."""
    home = Path.home()
    folders = [default_data_dir(), user_config_dir(), home / ".local" / "share" / "zero", home / ".config" / "zero"]
    if sys.prefix != sys.base_prefix:
        folders.append(Path(sys.prefix))
    elif site.ENABLE_USER_SITE:  # Python runs its .pth files at start
        folders.append(Path(site.getusersitepackages()))
    folders.append(Path(sys.base_prefix))  # the standard library the sandbox's first process imports
    folders += _source_folders()
    return tuple(dict.fromkeys(folders))


SOURCE_PACKAGES = tuple(
    f"zero.{name}" for name in ("agent", "cli", "manifests", "orchestrator", "sessions", "specialists", "tools")
)
"""Zero's packages but ``zero`` itself, each a folder (code, or the manifests it trusts) wherever it is installed
from: in an editable install, each one of a checkout."""


def _source_folders() -> list[Path]:
    """Where Zero's own code and built-in manifests are read from, every package of it, imported yet or not: in
    an editable install that is a checkout (working on Zero with Zero), whose next command would otherwise run
    what a sandboxed command edited."""
    import importlib.util

    import zero

    folders = [Path(zero.__file__).parent] if zero.__file__ else []
    for name in SOURCE_PACKAGES:
        spec = importlib.util.find_spec(name)  # (imports nothing of it: its parent, zero, is imported)
        if spec is not None:
            folders += [Path(p) for p in spec.submodule_search_locations or ()]
    return folders


def _mcp(servers: list[McpServer], streams: Streams) -> AbstractAsyncContextManager[dict[str, list[Tool]]]:
    """The configured MCP servers, started (the SDK is imported only when there are some)."""
    if not servers:
        return nullcontext({})
    from zero.agent.mcp import open_servers

    return open_servers(servers, lambda problem: print_warnings((problem,), streams.stderr))


def session_store(*, writable: bool = False) -> FileSessionStore:
    """The sessions of ``$ZERO_HOME`` (with the secrets of this environment to redact); ``writable``: for a
    command that writes them, checked first (``ConfigError``, exit 2, naming the folder and the fix)."""
    return FileSessionStore.default(writable=writable)


def stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop a run (Ctrl-C, SIGTERM, a closed terminal's SIGHUP), but for one the process was
    started ignoring (``nohup`` ignores SIGHUP, a shell's ``&`` SIGINT): that is the caller's wish, kept."""
    return tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) != signal.SIG_IGN)


async def interruptible(body: Callable[[], Awaitable[T]], on_signal: Callable[[], None], output: object = None) -> T:
    """Run ``body``; Ctrl-C, SIGTERM or SIGHUP calls ``on_signal`` (which stops the run; ``body`` then
    returns what it recorded), and so does the reader of ``output`` leaving (``| head``): no one reads
    what the run would do next."""
    result: list[T] = []
    if isinstance(output, BackgroundWriter):
        token = anyio.lowlevel.current_token()
        output.on_left = lambda: anyio.from_thread.run_sync(on_signal, token=token)
        if output.left:  # (it left before the run began: it stops as it starts)
            on_signal()
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(*stop_signals()) as signals:
                async for _ in signals:
                    on_signal()
                    return

        async def run() -> None:
            result.append(await body())
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(run)
    if isinstance(output, BackgroundWriter):
        output.on_left = None
    return result[0]


def unwrap(error: BaseException) -> BaseException:
    """The one error inside (nested) exception groups of one, as task groups raise them."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def confirm(question: str, streams: Streams, *, yes: bool, needs: str) -> bool:
    """The user's yes to ``question`` (on the terminal), or ``yes`` (``--yes``); without a terminal to ask,
    a usage error saying that ``needs`` it."""
    if yes:
        return True
    if not streams.stdin.isatty():
        raise UsageError(f"{needs} needs --yes when there is no terminal to ask")
    streams.stderr.write(f"{question} [y/N] ")
    streams.stderr.flush()
    return streams.stdin.readline().strip().lower() in ("y", "yes")


def print_warnings(warnings: tuple[str, ...], stream: TextIO) -> None:
    for warning in warnings:
        stream.write(f"zero: warning: {warning}\n")


def print_error(message: str, stream: TextIO | None = None) -> None:
    (stream or sys.stderr).write(f"zero: error: {message}\n")
