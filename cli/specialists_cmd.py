"""``zero specialists list | show NAME | new NAME | validate FILE...``"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any, TextIO

import tomli_w

from zero.cli.common import Streams, print_error, workspace_from_args
from zero.errors import UsageError, ZeroError
from zero.specialists import ManifestError, ManifestFile, Specialist, SpecialistRegistry, project_dir, user_dir
from zero.specialists.manifest import NAME_PATTERN
from zero.specialists.registry import resolve

__all__ = ["run_specialists"]


def run_specialists(args: argparse.Namespace, streams: Streams) -> int:
    out = streams.stdout
    try:
        workspace = workspace_from_args(args)
        action = args.specialists_command
        if action == "list":
            return _list(workspace, args.json, out)
        if action == "show":
            return _show(workspace, args.name, args.json, out)
        if action == "new":
            return _new(workspace, args, out)
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
        "tools": list(spec.tools),
        "defaultTools": spec.default_tools,
        "model": spec.model,
        "provider": spec.provider,
        "reasoningEffort": spec.reasoning_effort,
        "maxTurns": spec.max_turns,
        "timeoutSeconds": spec.timeout_seconds,
        "budget": {"tokens": spec.budget_tokens, "costUsd": spec.budget_cost_usd},
        "overrides": [str(p) for p in registry.overridden.get(spec.name, [])],
        "prompt": spec.prompt,
    }


def _errors_json(e: ManifestError) -> list[dict[str, Any]]:
    return [{"path": p.path, "key": p.key, "line": p.line, "message": p.message} for p in e.problems]


def _list(workspace: Path, as_json: bool, out: TextIO) -> int:
    registry = SpecialistRegistry.load(workspace)
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
        out.write(f"  {s.name:<{width}}  [{s.location}]  {s.description}{note}\n")
        tools = ", ".join(s.tools) + (" (default)" if s.default_tools else "")
        out.write(f"  {'':<{width}}  tools: {tools}\n")
    if registry.errors:
        out.write(f"\nSkipped {len(registry.errors)} manifest file(s) with errors:\n")
        for e in registry.errors:
            out.writelines(f"  {problem}\n" for problem in e.problems)
    return 0


def _show(workspace: Path, name: str, as_json: bool, out: TextIO) -> int:
    registry = SpecialistRegistry.load(workspace)
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
        "timeoutSeconds",
        "budget",
        "overrides",
    ):
        value = data[key]
        if value in (None, [], {"tokens": None, "costUsd": None}):
            continue
        shown = ", ".join(value) if isinstance(value, list) else value
        out.write(f"{key}: {shown}\n")
    out.write(f"prompt:\n{spec.prompt}\n")
    return 0


def _new(workspace: Path, args: argparse.Namespace, out: TextIO) -> int:
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
    os.replace(tmp, path)
    if args.json:
        out.write(json.dumps({"path": str(path), "name": name}) + "\n")
    else:
        out.write(
            f"Wrote {path}\nEdit its description and prompt, then check it with: zero specialists validate {path}\n"
        )
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
