"""The snapshot a writer branches from is what the caller sees: HEAD plus every uncommitted change,
tracked or not (ignored files aside), made without touching the user's index, stash or branches."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.git import hermetic_git, make_repo, run_git

from zero.errors import ConfigError
from zero.tools import NotARepository, take_snapshot


@pytest.fixture(autouse=True)
def _git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_git(tmp_path, monkeypatch)


def state(repo: Path) -> dict[str, str]:
    """Everything of the user's a snapshot must leave alone."""
    return {
        "status": run_git(repo, "status", "--porcelain", "--untracked-files=all"),
        "staged": run_git(repo, "diff", "--cached", "--name-status"),
        "refs": run_git(repo, "for-each-ref"),
        "stash": run_git(repo, "stash", "list"),
        "head": run_git(repo, "rev-parse", "HEAD"),
        "git dir": " ".join(sorted(p.name for p in (repo / ".git").iterdir())),
    }


def test_a_clean_tree_is_snapshotted_as_head_itself(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    snap = take_snapshot(repo)
    head = run_git(repo, "rev-parse", "HEAD")
    assert (snap.commit, snap.head, snap.branch, snap.prefix, snap.dirty) == (head, head, "main", "", False)
    assert snap.repo == repo


def test_uncommitted_changes_tracked_and_untracked_are_in_the_snapshot_and_nothing_of_the_user_moves(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", ".gitignore": "*.log\n"})
    (repo / "a.txt").write_text("a edited, not staged\n")
    (repo / "b.txt").write_text("b staged\n")
    run_git(repo, "add", "b.txt")
    (repo / "b.txt").write_text("b staged, then edited again\n")
    (repo / "c.txt").unlink()
    (repo / "new").mkdir()
    (repo / "new" / "d.txt").write_text("untracked\n")
    (repo / "build.log").write_text("ignored\n")
    before = state(repo)

    snap = take_snapshot(repo)

    assert state(repo) == before
    assert snap.dirty and snap.head == before["head"]
    assert run_git(repo, "rev-parse", f"{snap.commit}^") == snap.head
    assert run_git(repo, "ls-tree", "-r", "--name-only", snap.commit).split("\n") == [
        ".gitignore",
        "a.txt",
        "b.txt",
        "new/d.txt",
    ]
    assert run_git(repo, "show", f"{snap.commit}:a.txt") == "a edited, not staged"
    assert run_git(repo, "show", f"{snap.commit}:b.txt") == "b staged, then edited again"
    assert run_git(repo, "show", f"{snap.commit}:new/d.txt") == "untracked"


def test_a_snapshot_from_a_clone_branches_from_local_head_never_origin_head(tmp_path: Path) -> None:
    upstream = make_repo(tmp_path / "upstream")
    clone = tmp_path / "clone"
    run_git(tmp_path, "clone", "-q", str(upstream), str(clone))
    (clone / "local.txt").write_text("a local commit the remote does not have\n")
    run_git(clone, "add", "local.txt")
    run_git(clone, "commit", "-q", "-m", "Local")
    (clone / "wip.txt").write_text("work in progress\n")

    snap = take_snapshot(clone)

    assert run_git(clone, "rev-parse", f"{snap.commit}^") == run_git(clone, "rev-parse", "HEAD")
    assert run_git(clone, "rev-parse", "origin/HEAD") != snap.head
    assert run_git(clone, "show", f"{snap.commit}:local.txt") == "a local commit the remote does not have"
    assert run_git(clone, "show", f"{snap.commit}:wip.txt") == "work in progress"


def test_a_repository_with_no_commit_yet_is_snapshotted_as_a_root_commit(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    run_git(repo, "init", "-q")
    (repo / "a.txt").write_text("first file\n")

    snap = take_snapshot(repo)

    assert (snap.head, snap.branch, snap.dirty) == (None, None, True)
    assert run_git(repo, "rev-list", "--parents", "-n", "1", snap.commit) == snap.commit
    assert run_git(repo, "show", f"{snap.commit}:a.txt") == "first file"
    assert run_git(repo, "status", "--porcelain") == "?? a.txt"  # still untracked, still no commit
    assert run_git(repo, "rev-list", "--all") == ""


def test_an_empty_repository_is_snapshotted_as_an_empty_root_commit(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    run_git(repo, "init", "-q")
    snap = take_snapshot(repo)
    assert run_git(repo, "ls-tree", snap.commit) == "" and snap.head is None


def test_a_snapshot_from_a_subfolder_covers_the_whole_tree_and_names_the_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("edited at the top\n")
    snap = take_snapshot(repo / "src")
    assert (snap.repo, snap.prefix) == (repo, "src/")
    assert run_git(repo, "show", f"{snap.commit}:README.md") == "edited at the top"


def test_git_variables_inherited_from_a_hook_do_not_send_the_snapshot_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    other = make_repo(tmp_path / "other")
    (repo / "wip.txt").write_text("here\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    snap = take_snapshot(repo)
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert run_git(repo, "show", f"{snap.commit}:wip.txt") == "here"


def test_without_a_user_identity_the_snapshot_is_committed_as_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    hermetic_git(tmp_path, monkeypatch, identity=False)
    (repo / "wip.txt").write_text("x\n")
    snap = take_snapshot(repo)
    assert run_git(repo, "log", "-1", "--format=%an <%ae>", snap.commit) == "Zero <zero@localhost>"


def test_a_folder_outside_any_repository_is_refused_with_the_fix(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    with pytest.raises(NotARepository) as caught:
        take_snapshot(folder, who="member 'worker'")
    assert str(caught.value) == (
        f"{folder} is not in a git working tree, and member 'worker' asks for isolation = \"worktree\" (a git "
        'worktree for each writer): run `git init` there, or set isolation = "none"'
    )
    assert caught.value.exit_code == 2


def test_a_bare_repository_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    run_git(tmp_path, "init", "-q", "--bare", str(bare))
    with pytest.raises(NotARepository, match="is not in a git working tree, and this needs isolation"):
        take_snapshot(bare)


def test_without_git_installed_the_error_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    with pytest.raises(ConfigError) as caught:
        take_snapshot(repo)
    assert str(caught.value) == (
        'isolation = "worktree" needs git, which is not installed here (no git on PATH): install it, or set '
        'isolation = "none"'
    )


def test_a_program_the_repositorys_config_names_never_runs_in_zeros_git(tmp_path: Path) -> None:
    """The repository's config is the workspace's, which a sandboxed command may write: a core.fsmonitor
    program there would run, unconfined, at Zero's next snapshot."""
    repo = make_repo(tmp_path / "repo")
    proof = tmp_path / "ran"
    hook = tmp_path / "monitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {proof}\n")
    hook.chmod(0o755)
    run_git(repo, "config", "core.fsmonitor", str(hook))
    (repo / "wip.txt").write_text("x\n")
    take_snapshot(repo)
    assert not proof.exists()
