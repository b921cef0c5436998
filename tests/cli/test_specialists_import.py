"""``zero specialists import``: Claude Code subagents, Codex agents and upstream Zero specialists become
manifests that ``zero specialists validate`` accepts, and what did not map is said."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.cli import zero

CLAUDE = {
    "reviewer.md": """---
name: reviewer
description: Reviews a diff for bugs: quote the line, say why.
tools: Read, Grep, Glob
model: sonnet
---

You review code. Quote each line you flag.
""",
    "fixer.md": """---
name: fixer
description: >
  Fixes failing tests,
  one at a time.
color: red
---
You fix failing tests.
""",
    "web.md": """---
name: Web_Researcher
description: "Looks things up: docs, issues."
tools: [Read, WebFetch, mcp__github__get_issue, Bash, TodoWrite]
model: claude-opus-4-1
---
You look things up.
""",
}
CODEX = """name = "code_explorer"
description = "Traces call paths, read only."
model = "gpt-5.3-codex"
model_reasoning_effort = "high"
sandbox_mode = "read-only"
nickname_candidates = ["Atlas"]
developer_instructions = \"\"\"
Trace the real call path. Cite files.
\"\"\"
"""
UPSTREAM = """---
name: "api-review"
description: "API review helper"
reasoningEffort: max
tools:
  - "read-only"
  - "plan"
  - "web_fetch"
---

Review API diffs.
"""


def agents(tmp_path: Path) -> list[str]:
    claude = tmp_path / "elsewhere" / ".claude" / "agents"
    claude.mkdir(parents=True)
    for name, text in CLAUDE.items():
        (claude / name).write_text(text)
    (tmp_path / "code_explorer.toml").write_text(CODEX)
    (tmp_path / "api-review.md").write_text(UPSTREAM)
    return [str(claude), str(tmp_path / "code_explorer.toml"), str(tmp_path / "api-review.md")]


def test_other_tools_agents_become_manifests_zero_accepts_saying_what_did_not_map(
    tmp_path: Path, workspace: Path
) -> None:
    done = zero("specialists", "import", *agents(tmp_path), "--cwd", str(workspace), "--json")
    assert done.returncode == 0, done.stderr
    report = {r["name"]: r for r in json.loads(done.stdout)["imported"]}
    assert {name: r["kind"] for name, r in report.items()} == {
        "fixer": "claude",
        "reviewer": "claude",
        "web-researcher": "claude",
        "code-explorer": "codex",
        "api-review": "zero-md",
    }
    assert report["reviewer"]["notes"] == [
        "its front matter is not valid YAML: each line was read as 'key: the rest of the line'",
        "model 'sonnet' is 'claude-sonnet-4-6' on the anthropic provider",
        "tool Read is read_file",
        "tool Grep is grep",
        "tool Glob is glob",
    ]
    assert report["fixer"]["notes"] == [
        "no tools listed, so all of them: read-only, edit, execute and plan",
        "not mapped (Zero has no use for them): color",
    ]
    assert report["web-researcher"]["notes"] == [
        "name 'Web_Researcher' is 'web-researcher' here (a specialist's name is lowercase letters, digits, '-')",
        "tool Read is read_file",
        "tool WebFetch not mapped: Zero's tools do not reach the network",
        "tool mcp__github__get_issue not mapped: MCP tools come from the run's MCP servers (zero mcp add)",
        "tool Bash is bash",
        "tool TodoWrite is update_plan",
    ]
    assert report["code-explorer"]["notes"] == [
        "name 'code_explorer' is 'code-explorer' here (a specialist's name is lowercase letters, digits, '-')",
        "model 'gpt-5.3-codex' is not one Zero prices: its cost shows as unknown until you price it",
        "not mapped (Zero has no use for them): nickname_candidates",
        f"{workspace / '.zero/specialists/code-explorer.toml'}: 'reasoning_effort = high' lowered to the model "
        "default: a project's specialist may lower what its calls cost, not raise it",
    ]
    assert report["api-review"]["notes"] == [
        "reasoningEffort 'max' is 'xhigh', the most Zero asks for",
        "tool web_fetch not mapped: Zero's tools do not reach the network",
        f"{workspace / '.zero/specialists/api-review.toml'}: 'reasoning_effort = xhigh' lowered to the model default: "
        "a project's specialist may lower what its calls cost, not raise it",
    ]

    paths = [r["path"] for r in report.values()]
    assert all(Path(p).parent == workspace / ".zero" / "specialists" for p in paths)
    assert zero("specialists", "validate", *paths, "--cwd", str(workspace)).returncode == 0
    shown = {
        name: json.loads(zero("specialists", "show", name, "--cwd", str(workspace), "--json").stdout) for name in report
    }
    assert shown["reviewer"]["tools"] == ["read_file", "grep", "glob"]
    assert (shown["reviewer"]["model"], shown["reviewer"]["provider"]) == ("claude-sonnet-4-6", "anthropic")
    assert shown["fixer"]["description"] == "Fixes failing tests, one at a time."
    assert "bash" in shown["fixer"]["tools"] and "write_file" in shown["fixer"]["tools"]
    assert shown["code-explorer"]["prompt"] == "Trace the real call path. Cite files."
    assert "write_file" not in shown["code-explorer"]["tools"]  # (sandbox_mode = "read-only")
    assert shown["api-review"]["prompt"] == "Review API diffs."
    assert 'reasoning_effort = "xhigh"' in (workspace / ".zero/specialists/api-review.toml").read_text()
    # The user imported them: they run as written, not narrowed as a cloned repository's would be
    assert shown["web-researcher"]["trusted"] is True


def test_a_dry_run_prints_the_manifests_and_writes_nothing(tmp_path: Path, workspace: Path) -> None:
    done = zero("specialists", "import", *agents(tmp_path), "--dry-run", "--cwd", str(workspace))
    assert done.returncode == 0, done.stderr
    assert f"Would write {workspace / '.zero/specialists/reviewer.toml'} from " in done.stdout
    assert '    name = "reviewer"\n' in done.stdout and "  - tool Read is read_file\n" in done.stdout
    assert not (workspace / ".zero").exists()


def test_a_bad_file_is_named_with_its_line_and_the_others_are_imported(tmp_path: Path, workspace: Path) -> None:
    (tmp_path / "broken.md").write_text("---\nname: broken\ndescription: [unclosed\n---\nPrompt.\n")
    (tmp_path / "stray.md").write_text("---\nname: stray\njust words\n---\nPrompt.\n")
    (tmp_path / "nofront.md").write_text("Just a prompt.\n")
    (tmp_path / "good.md").write_text(CLAUDE["reviewer.md"])
    done = zero("specialists", "import", str(tmp_path), "--cwd", str(workspace))
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert errors == [
        f"zero: error: {tmp_path / 'broken.md'}:3: the front matter is not valid YAML (expected ',' or ']', but got "
        "'<stream end>')",
        f"zero: error: {tmp_path / 'nofront.md'}:1: no front matter: the file must start with a '---' line",
        f"zero: error: {tmp_path / 'stray.md'}:3: the front matter is not valid YAML (could not find expected ':')",
    ]
    assert (workspace / ".zero/specialists/reviewer.toml").is_file()
    again = zero("specialists", "import", str(tmp_path / "good.md"), "--cwd", str(workspace))
    assert again.returncode == 2 and "already exists; pass --force to overwrite it" in again.stderr
    assert zero("specialists", "import", str(tmp_path / "good.md"), "--force", "--cwd", str(workspace)).returncode == 0


def test_a_link_the_repository_ships_where_the_manifest_goes_is_never_written_through(
    tmp_path: Path, workspace: Path
) -> None:
    victim = tmp_path / "victim_bashrc"
    victim.write_text("# mine\n")
    folder = workspace / ".zero" / "specialists"
    folder.mkdir(parents=True)
    (folder / "reviewer.toml.tmp").symlink_to(victim)  # the spare name of the old writer
    (folder / "reviewer.toml").symlink_to(victim)
    (tmp_path / "reviewer.md").write_text(CLAUDE["reviewer.md"])
    done = zero("specialists", "import", str(tmp_path / "reviewer.md"), "--force", "--cwd", str(workspace))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "# mine\n"
    assert not (folder / "reviewer.toml").is_symlink() and 'name = "reviewer"' in (folder / "reviewer.toml").read_text()


def test_hostile_agent_files_are_refused_quickly_and_named(tmp_path: Path, workspace: Path) -> None:
    laughs = "---\nname: bomb\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    (tmp_path / "bomb.md").write_text(laughs + "description: *i\n---\nPrompt.\n")
    (tmp_path / "zero.md").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.md")
    done = zero("specialists", "import", str(tmp_path), "--cwd", str(workspace))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"zero: error: {tmp_path / 'bomb.md'}:4: the front matter is not valid YAML "
        "(aliases (*name) are not read here)",
        f"zero: error: {tmp_path / 'fifo.md'}: not a regular file (a device, a FIFO...), so not an agent file",
        f"zero: error: {tmp_path / 'zero.md'}: not a regular file (a device, a FIFO...), so not an agent file",
    ]
