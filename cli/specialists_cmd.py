"""``zero specialists list | show NAME | new NAME | import PATH... | validate FILE... | trust NAME``"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from pathlib import Path
from textwrap import indent
from typing import Any, TextIO

import tomli_w

from zero.cli.common import Streams, confirm, print_error, workspace_from
from zero.cli.config import RunSettings, load_config, resolve_settings
from zero.cli.options import SpecialistsOptions
from zero.cli.trust import approve, load_specialists
from zero.errors import ConfigError, UsageError, ZeroError
from zero.specialists import ManifestError, ManifestFile, Specialist, SpecialistRegistry, project_dir, user_dir
from zero.specialists.importing import read_agents
from zero.specialists.manifest import NAME_PATTERN

__all__ = ["run_specialists"]


def run_specialists(args: SpecialistsOptions, streams: Streams) -> int:
    out = streams.stdout
    try:
        workspace = workspace_from(args)
        action = args.action
        if action == "list":
            return _list(workspace, args.json, out)
        if action == "show":
            return _show(workspace, args.name, args.json, out)
        if action == "new":
            return _new(workspace, args, out)
        if action == "trust":
            return _trust(workspace, args.name, args.yes, streams)
        if action == "import":
            return _import(workspace, args, out, streams.stderr)
        return _validate(workspace, [Path(f) for f in args.files], args.json, out)
    except ZeroError as e:
        print_error(str(e), streams.stderr)
        return e.exit_code


def _spec_json(spec: Specialist, registry: SpecialistRegistry) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "location": spec.location,
        "path": str(spec.path),
        "extends": spec.bases[0] if spec.bases else None,
        "inherits": list(spec.inherited),
        "tools": list(spec.tools),
        "defaultTools": spec.default_tools,
        "model": spec.model,
        "provider": spec.provider,
        "reasoningEffort": spec.reasoning_effort,
        "maxTurns": spec.max_turns,
        "maxOutputTokens": spec.max_output_tokens,
        "timeoutSeconds": spec.timeout_seconds,
        "isolation": spec.isolation,
        "outputSchema": spec.output_schema,
        "outputRetries": spec.output_retries,
        "budget": {"tokens": spec.budget_tokens, "costUsd": spec.budget_cost_usd},
        "overrides": [str(p) for p in registry.overridden.get(spec.name, [])],
        "trusted": spec.trusted,
        "narrowed": list(spec.narrowed),
        "prompt": spec.prompt,
    }


def _registry(workspace: Path, trusting: dict[str, str] | None = None) -> SpecialistRegistry:
    """The specialists as a run here would have them, with the user's config and the defaults (``trusting``:
    as if these were trusted too)."""
    configs = load_config(workspace)
    try:
        settings: RunSettings | None = resolve_settings(
            configs, provider=None, model=None, base_url=None, permission_mode=None, max_turns=None
        )
    except ConfigError:  # no provider configured: the limits of the config and the defaults
        settings = None
    return load_specialists(workspace, configs, settings, trusting)


def _where(spec: Specialist) -> str:
    return f"{spec.location}, trusted" if spec.trusted else spec.location


def _errors_json(e: ManifestError) -> list[dict[str, Any]]:
    return [{"path": p.path, "key": p.key, "line": p.line, "message": p.message} for p in e.problems]


def _list(workspace: Path, as_json: bool, out: TextIO) -> int:
    registry = _registry(workspace)
    specs = [registry.specialists[n] for n in registry.names()]
    if as_json:
        data = {
            "specialists": [_spec_json(s, registry) for s in specs],
            "errors": [problem for e in registry.errors for problem in _errors_json(e)],
        }
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    out.write("Specialists (a project manifest overrides a user one, which overrides a built-in one):\n")
    width = max((len(s.name) for s in specs), default=0)
    for s in specs:
        over = registry.overridden.get(s.name)
        note = f" (overrides {', '.join(str(p) for p in over)})" if over else ""
        out.write(f"  {s.name:<{width}}  [{_where(s)}]  {s.description}{note}\n")
        tools = ", ".join(s.tools) + (" (default)" if s.default_tools else "")
        out.write(f"  {'':<{width}}  tools: {tools}\n")
        out.writelines(f"  {'':<{width}}  narrowed: {n}\n" for n in s.narrowed)
    if registry.errors:
        out.write(f"\nSkipped {len(registry.errors)} manifest file(s) with errors:\n")
        for e in registry.errors:
            out.writelines(f"  {problem}\n" for problem in e.problems)
    return 0


def _show(workspace: Path, name: str, as_json: bool, out: TextIO) -> int:
    registry = _registry(workspace)
    spec = registry.get(name)
    data = _spec_json(spec, registry)
    if as_json:
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    for key in (
        "name",
        "description",
        "location",
        "path",
        "tools",
        "model",
        "provider",
        "reasoningEffort",
        "maxTurns",
        "maxOutputTokens",
        "timeoutSeconds",
        "isolation",
        "outputSchema",
        "outputRetries",
        "budget",
        "overrides",
    ):
        value = data[key]
        if value in (None, [], {"tokens": None, "costUsd": None}):
            continue
        shown = ", ".join(value) if isinstance(value, list) else value
        if key == "outputSchema":  # a result it ends with by calling submit_result
            shown = json.dumps(value, ensure_ascii=False) if value else '"json" (any JSON value)'
        out.write(f"{key}: {shown}\n")
        if key == "path" and spec.bases:
            out.write(f"extends: {' -> '.join(spec.bases)}{_inherits(spec)}\n")
    if spec.trusted is not None:
        out.write(f"trusted: {'yes' if spec.trusted else f'no (zero specialists trust {spec.name})'}\n")
    out.writelines(f"narrowed: {note}\n" for note in spec.narrowed)
    out.write(f"prompt:\n{spec.prompt}\n")
    return 0


def _inherits(spec: Specialist) -> str:
    """What a specialist takes from its base, as ``show`` says it."""
    keys = [k for k in spec.inherited if k != "prompt"]
    base = spec.bases[0]
    prompt = f"its prompt is {base}'s" if "prompt" in spec.inherited else f"its own prompt follows {base}'s"
    inherits = f"inherits {', '.join(keys)}; " if keys else ""
    return f" ({inherits}{prompt})"


def _new(workspace: Path, args: SpecialistsOptions, out: TextIO) -> int:
    name = args.name
    if not re.fullmatch(NAME_PATTERN, name):
        raise UsageError(
            f"invalid specialist name {name!r}: use lowercase letters, digits and dashes, "
            "starting with a letter (at most 64)"
        )
    folder = user_dir() if args.user else project_dir(workspace)
    path = folder / f"{name}.toml"
    if path.exists() and not args.force:
        raise UsageError(f"{path} already exists; pass --force to overwrite it")
    tools = [t for item in (args.tools or ["read-only"]) for t in re.split(r"[,\s]+", item) if t]
    description = args.description or f"Specialist {name}: say here what it is for."
    prompt = args.prompt or (
        f"You are the {name} specialist.\n\nDescribe here how it works and what its report must contain.\n"
    )
    data: dict[str, Any] = {"name": name, "description": description}
    if args.extends:
        data["extends"] = args.extends
    if args.model:
        data["model"] = args.model
    data["tools"] = tools
    data["prompt"] = prompt
    _write(workspace, path, tomli_w.dumps(data, multiline_strings=True), user=args.user)
    if args.json:
        out.write(json.dumps({"path": str(path), "name": name}) + "\n")
    else:
        out.write(
            f"Wrote {path}\nEdit its description and prompt, then check it with: zero specialists validate {path}\n"
        )
    return 0


def _write(workspace: Path, path: Path, text: str, *, user: bool) -> None:
    """Write the manifest ``text`` at ``path``, checked first (so nothing invalid is left behind), whole or
    not at all; a project's is trusted as written (the user wrote it, until someone else's edit)."""
    loaded = ManifestFile.parse(text, path, "user" if user else "project")
    SpecialistRegistry.load(workspace).resolve_draft(loaded)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not user and not os.path.realpath(path.parent).startswith(os.path.realpath(workspace) + os.sep):
        raise UsageError(f"{path.parent} leads out of the workspace (a link): a project's manifests are written in it")
    # A new spare file, never one that is there (a repository may ship a link by that name to your ~/.bashrc).
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as spare:
        spare.write(text)
    if path.is_file() and not path.is_symlink():  # a file overwritten (--force) keeps its mode
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
    os.replace(tmp, path)
    if not user:
        name = loaded.manifest.name
        approve("specialists", workspace, name, SpecialistRegistry.load(workspace).get(name).fingerprint)


def _import(workspace: Path, args: SpecialistsOptions, out: TextIO, err: TextIO) -> int:
    """Read other tools' agents (``args.files``) and write each as a manifest (``--dry-run``: print them)."""
    agents, errors = read_agents([Path(f) for f in args.files])
    folder = user_dir() if args.user else project_dir(workspace)
    report: list[dict[str, Any]] = []
    failed = [str(e) for e in errors]
    seen: set[str] = set()
    for agent in agents:
        path = folder / f"{agent.name}.toml"
        text = tomli_w.dumps(agent.data, multiline_strings=True)
        try:
            if agent.name in seen:
                raise UsageError(f"{agent.source}: a second agent named {agent.name!r} in this import: rename one")
            seen.add(agent.name)
            if args.dry_run:
                ManifestFile.parse(text, path, "user" if args.user else "project")  # what it would write is valid
            else:
                if path.exists() and not args.force:
                    raise UsageError(f"{path} already exists; pass --force to overwrite it with {agent.source}")
                _write(workspace, path, text, user=args.user)
                # (a project's manifest spends no more than the user allows, trusted or not: say what is capped)
                agent.notes.extend(_registry(workspace).get(agent.name).narrowed)
        except (ZeroError, ManifestError) as e:
            failed.append(str(e))
            continue
        report.append(
            {
                "source": str(agent.source),
                "kind": agent.kind,
                "name": agent.name,
                "path": str(path),
                "written": not args.dry_run,
                "notes": agent.notes,
            }  # fmt: skip
        )
        if not args.json:
            verb = "Would write" if args.dry_run else "Wrote"
            out.write(f"{verb} {path} from {agent.source} ({_KINDS[agent.kind]})\n")
            for note in agent.notes:
                out.write(f"  - {note}\n")
            if args.dry_run:
                out.write(indent(text, "    ") + "\n")
    for message in failed:
        print_error(message, err)
    if args.json:
        out.write(json.dumps({"imported": report, "errors": failed}, ensure_ascii=False) + "\n")
    elif report and not args.dry_run:
        out.write(f"Check them with: zero specialists validate {' '.join(r['path'] for r in report)}\n")
    return 2 if failed else 0


_KINDS = {"claude": "a Claude Code subagent", "codex": "a Codex agent", "zero-md": "an upstream Zero specialist"}


def _trust(workspace: Path, name: str, yes: bool, streams: Streams) -> int:
    """Show what a project's specialist asks for, and on a yes remember it for this workspace as it is now."""
    spec = _registry(workspace).get(name)
    if spec.trusted is None:
        raise UsageError(f"{name} is a {spec.location} specialist ({spec.path}): only a project's needs trusting")
    if spec.trusted:
        streams.stdout.write(f"{name} ({spec.path}) is trusted already, as it is now\n")
        return 0
    whole = _registry(workspace, trusting={name: spec.fingerprint}).get(name)
    out = streams.stdout
    out.write(f"{name}: a specialist of this project ({spec.path}). Trusted, it runs as written:\n")
    out.write(f"  model: {whole.model or 'the caller’s'} (provider: {whole.provider or 'the caller’s'})\n")
    out.write(f"  tools: {', '.join(whole.tools)}\n")
    out.writelines(f"  still: {note}\n" for note in whole.narrowed)  # spend limits hold even when trusted
    out.write(f"  its prompt: zero specialists show {name}\n")
    if not confirm(f"Trust {name} in {workspace}?", streams, yes=yes, needs=f"trusting {name}"):
        streams.stderr.write(f"{name} is not trusted\n")
        return 1
    approve("specialists", workspace, name, spec.fingerprint)
    out.write(f"trusted {name} in {workspace}, as it is now (an edit of its file asks again)\n")
    return 0


def _validate(workspace: Path, paths: list[Path], as_json: bool, out: TextIO) -> int:
    registry = SpecialistRegistry.load(workspace)
    results: list[dict[str, Any]] = []
    loaded: dict[str, ManifestFile] = {}
    problems: dict[str, ManifestError] = {}
    for path in paths:
        try:
            file = ManifestFile.load(path)
            loaded[file.manifest.name] = file
        except ManifestError as e:
            problems[str(path)] = e
    for file in loaded.values():
        try:
            registry.resolve_draft(file, loaded)
        except ManifestError as e:
            problems[str(file.path)] = e
    for path in paths:
        problem = problems.get(str(path))
        results.append(
            {"path": str(path), "valid": problem is None, "errors": _errors_json(problem) if problem else []}
        )
    if as_json:
        out.write(json.dumps({"files": results}, indent=2) + "\n")
    else:
        for path in paths:
            problem = problems.get(str(path))
            if problem is None:
                out.write(f"ok       {path}\n")
            elif len(problem.problems) == 1:
                out.write(f"invalid  {problem}\n")
            else:
                out.write(f"invalid  {path} ({len(problem.problems)} problems):\n")
                out.writelines(f"           {p}\n" for p in problem.problems)
    return 2 if problems else 0
