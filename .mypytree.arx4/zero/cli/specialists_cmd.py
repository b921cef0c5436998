"""``zero specialists list | show NAME | new NAME | validate FILE... | trust NAME``"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, TextIO

import tomli_w

from zero.cli.common import Streams, confirm, print_error, workspace_from
from zero.cli.config import RunSettings, load_config, resolve_settings
from zero.cli.options import SpecialistsOptions
from zero.cli.trust import approve, load_specialists
from zero.errors import ConfigError, UsageError, ZeroError
from zero.specialists import ManifestError, ManifestFile, Specialist, SpecialistRegistry, project_dir, user_dir
from zero.specialists.manifest import NAME_PATTERN
from zero.specialists.registry import resolve

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
    text = tomli_w.dumps(data, multiline_strings=True)
    # Check what we are about to write, so `new` never leaves an invalid manifest behind.
    loaded = ManifestFile.parse(text, path, "user" if args.user else "project")
    _check_resolves(loaded, SpecialistRegistry.load(workspace), {})
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(text, encoding="utf-8")
    with contextlib.suppress(FileNotFoundError):  # a file overwritten (--force) keeps its mode
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
    os.replace(tmp, path)
    if not args.user:  # the user wrote it: it runs as written (until someone else's edit)
        approve("specialists", workspace, name, SpecialistRegistry.load(workspace).get(name).fingerprint)
    if args.json:
        out.write(json.dumps({"path": str(path), "name": name}) + "\n")
    else:
        out.write(
            f"Wrote {path}\nEdit its description and prompt, then check it with: zero specialists validate {path}\n"
        )
    return 0


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


def _check_resolves(loaded: ManifestFile, registry: SpecialistRegistry, files: dict[str, ManifestFile]) -> None:
    """Resolve ``loaded`` (its extends chain and tools) against the manifests on disk."""
    on_disk: dict[str, ManifestFile] = {}
    for spec in registry.specialists.values():
        on_disk[spec.name] = ManifestFile.load(spec.path, spec.location)
    on_disk.update(files)
    on_disk[loaded.manifest.name] = loaded
    resolve(loaded.manifest.name, on_disk)


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
            _check_resolves(file, registry, loaded)
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
