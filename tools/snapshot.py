"""A snapshot of what the caller sees: its HEAD plus every uncommitted change, as one commit.

Members and children that work in worktrees branch from it, so each sees exactly the tree its parent
saw (never ``origin/HEAD``, never HEAD without the edits not yet committed). It is made the way
``git stash create`` makes its commit, but with untracked files too (those ``.gitignore`` does not
hide), and through an index of its own: the user's index, working tree, stash and branches are left
as they were.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from zero.tools.git import GitError, NotARepository, PlantedGitFolder, git, identity_env

__all__ = ["Snapshot", "current_branch", "repository_of", "take_snapshot"]


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """What ``take_snapshot`` saw: the ``commit`` to branch from, the ``head`` it was taken on (``None``
    in a repository with no commit yet), the ``branch`` HEAD was on (``None``: detached, or no commit),
    the top of the working tree (``repo``) and the caller's folder inside it (``prefix``, ``""`` at the
    top, else ending in ``/``)."""

    repo: Path
    commit: str
    head: str | None
    branch: str | None
    prefix: str

    @property
    def dirty(self) -> bool:
        """Whether the snapshot holds changes HEAD does not (it is then a commit of its own on HEAD)."""
        return self.commit != self.head


def repository_of(folder: Path, *, who: str = "") -> tuple[Path, str]:
    """The top of the git working tree ``folder`` is in, and ``folder``'s place in it (``prefix``);
    ``NotARepository`` naming the fix if there is none. ``who`` names what asked for a worktree
    (``member 'worker'``) in that message."""
    if not folder.is_dir():
        raise NotARepository(f"{folder} is not a folder, so {who or 'nothing'} can work in a git worktree of it")
    try:
        top, prefix = git("rev-parse", "--show-toplevel", "--show-prefix", cwd=folder).split("\n")
    except (GitError, ValueError) as e:  # ValueError: a bare repository answers no top level
        if isinstance(e, PlantedGitFolder):  # a repository, with a git folder a command made
            raise
        asker = f"{who} asks for" if who else "this needs"
        raise NotARepository(
            f'{folder} is not in a git working tree, and {asker} isolation = "worktree" (a git worktree '
            f'for each writer): run `git init` there, or set isolation = "none"'
        ) from e
    return Path(top), prefix


def take_snapshot(folder: Path, *, who: str = "") -> Snapshot:
    """Snapshot the working tree ``folder`` is in: HEAD itself where nothing is uncommitted, else a
    commit on HEAD (a root commit in a repository with none yet) holding the working tree's files,
    tracked and untracked, that ``.gitignore`` does not hide."""
    top, prefix = repository_of(folder, who=who)
    head = _resolve(top, "HEAD^{commit}")
    branch = current_branch(top) if head else None
    tree = _tree_of_working_tree(top)
    if head and tree == git("rev-parse", f"{head}^{{tree}}", cwd=top):
        return Snapshot(repo=top, commit=head, head=head, branch=branch, prefix=prefix)
    parents = ["-p", head] if head else []
    message = "Zero: snapshot of the working tree (HEAD and its uncommitted changes)"
    commit = git("commit-tree", "--no-gpg-sign", tree, *parents, "-m", message, cwd=top, env=identity_env(top))
    return Snapshot(repo=top, commit=commit, head=head, branch=branch, prefix=prefix)


def current_branch(top: Path) -> str | None:
    """The branch HEAD is on in the working tree ``top`` (``None``: detached)."""
    try:
        return git("symbolic-ref", "-q", "--short", "HEAD", cwd=top)
    except GitError:  # detached
        return None


def _resolve(top: Path, rev: str) -> str | None:
    try:
        return git("rev-parse", "-q", "--verify", rev, cwd=top)
    except GitError:
        return None


def _tree_of_working_tree(top: Path) -> str:
    """The tree of every file git would see with ``git add -A``, written through a copy of the user's
    index: the copy keeps the index's record of each file's size and time, so only files changed since
    are read again (20,000 files: a stat each)."""
    index = Path(top, git("rev-parse", "--git-path", "index", cwd=top))
    scratch = index.with_name(f"zero-snapshot-{os.getpid()}-{secrets.token_hex(4)}.index")
    try:
        if index.is_file():
            shutil.copy2(index, scratch)  # its time too: git reads again a file changed in its second
        env = {"GIT_INDEX_FILE": str(scratch)}
        git("add", "-A", "--", ".", cwd=top, env=env)
        return git("write-tree", cwd=top, env=env)
    finally:
        scratch.unlink(missing_ok=True)
