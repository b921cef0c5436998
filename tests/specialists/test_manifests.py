"""Manifests: the strict format, extends, discovery precedence, and errors that skip one file only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from zero.specialists import ManifestError, ManifestFile, SpecialistRegistry

GOOD = 'name = "{name}"\ndescription = "A {name}."\ntools = ["read-only"]\nprompt = "You are {name}."\n'


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    return tmp_path / "config" / "zero" / "specialists"


def test_builtins_load_and_are_useful_on_their_own() -> None:
    registry = SpecialistRegistry.load()
    assert registry.errors == []
    assert registry.names() == ["code-review", "explorer", "planner", "tester", "worker"]
    assert registry.get("code-review").tools == ("read_file", "list_directory", "glob", "grep")
    assert "write_file" in registry.get("worker").tools and "bash" in registry.get("worker").tools
    assert "bash" in registry.get("tester").tools and "write_file" not in registry.get("tester").tools
    assert registry.get("planner").tools[-1] == "update_plan"
    assert all(len(s.prompt) > 400 for s in registry.specialists.values())


def test_project_overrides_user_overrides_builtin(workspace: Path, user_folder: Path) -> None:
    write(user_folder, "explorer", GOOD.format(name="explorer").replace("A explorer.", "user explorer"))
    write(user_folder, "helper", GOOD.format(name="helper").replace("A helper.", "user helper"))
    write(
        workspace / ".zero" / "specialists", "helper", GOOD.format(name="helper").replace("A helper.", "project helper")
    )
    registry = SpecialistRegistry.load(workspace)
    assert registry.get("explorer").description == "user explorer"
    assert registry.get("explorer").location == "user"
    assert registry.get("helper").description == "project helper"
    assert registry.get("helper").location == "project"
    assert registry.overridden["helper"] == [user_folder / "helper.toml"]


def test_extends_concatenates_prompts_and_own_tools_replace(workspace: Path, user_folder: Path) -> None:
    folder = user_folder
    write(
        folder,
        "strict-review",
        'name = "strict-review"\nextends = "code-review"\n'
        'prompt = "Also check the error messages."\nmodel = "gpt-4.1"\n',
    )
    write(
        folder,
        "review-and-plan",
        'name = "review-and-plan"\nextends = "strict-review"\ntools = ["read-only", "plan"]\n',
    )
    registry = SpecialistRegistry.load(workspace)
    strict = registry.get("strict-review")
    base = registry.get("code-review")
    assert strict.prompt == base.prompt + "\n\nAlso check the error messages."
    assert strict.description == base.description and strict.tools == base.tools and strict.model == "gpt-4.1"
    assert registry.get("review-and-plan").tools[-1] == "update_plan"
    assert registry.get("review-and-plan").model == "gpt-4.1"


def test_bad_files_are_reported_with_file_and_key_and_skip_only_themselves(workspace: Path) -> None:
    folder = workspace / ".zero" / "specialists"
    typo = write(folder, "typo", 'name = "typo"\ndescription = "x"\npromt = "oops"\n')
    write(folder, "loop-a", 'name = "loop-a"\nextends = "loop-b"\nprompt = "a"\n')
    write(folder, "loop-b", 'name = "loop-b"\nextends = "loop-a"\nprompt = "b"\n')
    write(folder, "orphan", 'name = "orphan"\nextends = "nobody"\nprompt = "x"\n')
    write(folder, "tools", 'name = "tools"\ndescription = "x"\nprompt = "x"\ntools = ["read-onyl"]\n')
    write(folder, "Bad", 'name = "Bad"\ndescription = "x"\nprompt = "x"\n')
    write(folder, "syntax", 'name = "syntax\n')
    write(folder, "good-one", GOOD.format(name="good-one"))
    registry = SpecialistRegistry.load(workspace)
    assert "good-one" in registry.names() and "explorer" in registry.names()
    messages = sorted(str(e) for e in registry.errors)
    assert f"{typo}:3: unknown key 'promt' (did you mean \"prompt\"?)" in messages
    assert any("loop-a.toml: extends cycle: loop-a -> loop-b -> loop-a" in m for m in messages)
    assert any("loop-b.toml: extends cycle: loop-b -> loop-a -> loop-b" in m for m in messages)
    assert any("orphan.toml: extends 'nobody', which is not a known specialist" in m for m in messages)
    unknown_tool = "tools.toml:4: unknown tool or category 'read-onyl' (did you mean \"read-only\"?)"
    assert any(unknown_tool in m for m in messages)
    assert any("Bad.toml:1: name 'Bad' is not a valid name" in m for m in messages)
    assert any("syntax.toml:1: not valid TOML" in m for m in messages)
    assert len(registry.errors) == 7


def test_description_and_prompt_are_required_without_extends(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="description is required"):
        ManifestFile.parse('name = "x"\nprompt = "p"\n', tmp_path / "x.toml")
    with pytest.raises(ManifestError, match="prompt is empty"):
        ManifestFile.parse('name = "x"\ndescription = "d"\n', tmp_path / "x.toml")
    with pytest.raises(ManifestError, match=r"budget.token.*did you mean \"tokens\""):
        ManifestFile.parse('name = "x"\ndescription = "d"\nprompt = "p"\n[budget]\ntoken = 5\n', tmp_path / "x.toml")


def test_unknown_specialist_names_the_available_ones() -> None:
    from zero.errors import ConfigError

    with pytest.raises(ConfigError, match="no specialist named 'reviewer'; available: code-review, explorer"):
        SpecialistRegistry.load().get("reviewer")


def test_linked_manifests_are_followed_where_they_may_lead_and_reported_where_not(
    workspace: Path, user_folder: Path, tmp_path: Path
) -> None:
    """A project's manifest (a repository's file) is read beneath its folder, as AGENTS.md is read beneath the
    workspace; the user's own are followed wherever their links lead. None is skipped without a word."""
    project = workspace / ".zero" / "specialists"
    write(project / "shared", "kept", GOOD.format(name="kept"))
    (project / "kept.toml").symlink_to("shared/kept.toml")  # stays in the folder: read
    outside = write(tmp_path / "elsewhere", "leak", GOOD.format(name="leak"))
    (project / "leak.toml").symlink_to(outside)  # leads out of the repository
    write(workspace / "docs", "near", GOOD.format(name="near"))
    (project / "near.toml").symlink_to("../../docs/near.toml")  # in the workspace, but not the folder
    (project / "gone.toml").symlink_to("missing.toml")
    os.mkfifo(project / "pipe.toml")  # would block a plain read
    dotfiles = write(tmp_path / "dotfiles", "mine", GOOD.format(name="mine"))
    user_folder.mkdir(parents=True)
    (user_folder / "mine.toml").symlink_to(dotfiles)  # the user's link: followed
    registry = SpecialistRegistry.load(workspace, user=user_folder)
    assert {"kept", "mine"} <= set(registry.names()) and not {"leak", "near"} & set(registry.names())
    assert registry.get("kept").path == project / "kept.toml"
    leads_out = f"it is a link that leads outside {project}, where a project's manifests are read from"
    assert sorted(str(e) for e in registry.errors) == [
        f"{project}/gone.toml: it is a link to missing.toml, which does not exist",
        f"{project}/leak.toml: {leads_out}",
        f"{project}/near.toml: {leads_out}",
        f"{project}/pipe.toml: it is not a regular file but a FIFO",
    ]


def test_a_projects_manifest_folder_that_leads_outside_the_workspace_is_not_read(
    workspace: Path, user_folder: Path, tmp_path: Path
) -> None:
    write(tmp_path / "theirs", "leak", GOOD.format(name="leak"))
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "specialists").symlink_to(tmp_path / "theirs")
    registry = SpecialistRegistry.load(workspace, user=user_folder)
    assert "leak" not in registry.names()
    assert [str(e) for e in registry.errors] == [
        f"{workspace}/.zero/specialists: it is a link that leads outside the workspace"
    ]


@pytest.mark.parametrize("tools", ["[1]", "[{ a = 1 }]", '[["edit"]]'])
def test_a_tool_that_is_not_a_name_is_a_problem_of_the_file_not_a_crash(tmp_path: Path, tools: str) -> None:
    # A cloned repository's manifest with tools = [1] ended every command in it with "internal error".
    text = f'name = "bad"\ndescription = "d"\nprompt = "p"\ntools = {tools}\n'
    with pytest.raises(ManifestError, match=r"bad.toml:4: tools.0: Input should be a valid string"):
        ManifestFile.parse(text, tmp_path / "bad.toml")


def test_a_schema_nested_too_deeply_to_check_is_a_problem_of_the_file(tmp_path: Path) -> None:
    schema: dict[str, object] = {"type": "object"}
    for _ in range(150):
        schema = {"type": "object", "properties": {"a": schema}}
    (tmp_path / "deep.json").write_text(json.dumps(schema))
    text = 'name = "deep"\ndescription = "d"\nprompt = "p"\noutput_schema = "deep.json"\n'
    with pytest.raises(ManifestError, match=r"output_schema: the schema file .*deep.json: it is nested too deeply"):
        ManifestFile.parse(text, tmp_path / "deep.toml")
