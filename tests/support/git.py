"""Real git repositories for tests: made with the ``git`` binary in the test's folder, read back with it.

Tests assert through these plain calls, not through the code under test, so a bug there cannot hide
itself. ``hermetic_git`` points git at a config of the test's own (an identity, ``main`` as the first
branch) and stops it looking above the test's folder, so the machine's own settings play no part.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

__all__ = [
    "commit_all",
    "git",
    "hermetic_git",
    "make_repo",
    "origin_and_clone",
    "repository",
    "run_git",
    "worktree_list",
]


def hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, identity: bool = True) -> None:
    """Give git a global config of this test's own (with or without a user identity) and no system one."""
    config = tmp_path / "gitconfig"
    lines = ["[init]\n\tdefaultBranch = main\n", "[advice]\n\tdetachedHead = false\n"]
    if identity:
        lines.append("[user]\n\tname = Test User\n\temail = test@example.com\n")
    else:
        lines.append("[user]\n\tuseConfigOnly = true\n")
    config.write_text("".join(lines))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above the test's folder counts
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "EMAIL", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.delenv(name, raising=False)


def run_git(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd``: its output, without the last newline (the test fails if git does)."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.removesuffix("\n")


def git(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd`` as a test's user (an identity of its own, whatever the machine's config): its
    output, stripped."""
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@localhost", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def repository(path: Path, files: dict[str, str]) -> Path:
    """A repository at ``path`` with one commit (``start``, on ``main``) holding ``files``, as the test's user."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    return path


def origin_and_clone(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    """A team's repository and a user's checkout of it: ``origin.git`` (bare, one commit on ``main`` holding
    ``files``) and ``work``, a clone of it, in ``tmp_path``."""
    seed = repository(tmp_path / "seed", files)
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(work))
    return origin, work


def commit_all(repo: Path, message: str) -> str:
    """Commit every change in ``repo``; the new commit."""
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", message)
    return run_git(repo, "rev-parse", "HEAD")


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A repository at ``path`` with one commit holding ``files`` (by default a README and a module)."""
    path.mkdir(parents=True, exist_ok=True)
    run_git(path, "init", "-q")
    for name, text in (files or {"README.md": "# Demo\n", "src/app.py": "def main():\n    return 42\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    commit_all(path, "First")
    return path


def worktree_list(repo: Path) -> list[str]:
    """``git worktree list --porcelain``, one line per worktree: its path, then what git says of it
    (``branch refs/heads/x``, ``prunable ...``)."""
    found = []
    for block in run_git(repo, "worktree", "list", "--porcelain").split("\n\n"):
        path, *about = block.splitlines()
        said = [line for line in about if not line.startswith("HEAD")]
        found.append(" ".join([path.removeprefix("worktree "), *said]))
    return found
