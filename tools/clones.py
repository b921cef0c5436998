"""Member worktrees made on another machine, from the team's repository (``[workspace] repo``).

The driver (the machine ``zero swarm run`` runs on) keeps each isolated member's branch and lands it; a node
that runs the member makes the worktree from its own clone of the repository (``$ZERO_HOME/ray/<node>/``),
so no folder need be shared. What the repository does not have (the snapshot of the caller's uncommitted
changes, commits not pushed, what landed before the member started) travels with the member as a git
bundle of its branch; what the member did comes back the same way, a bundle the driver fetches onto the
member's branch. Nothing is pushed to the repository: the nodes only read it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from zero.errors import ConfigError
from zero.tools.git import GitError, git, git_ok
from zero.tools.worktrees import commit_all, restore_git_file, workspace_in

__all__ = ["NodeClones", "NodeTree", "bundle_of", "fetch_bundle", "repository_problem", "tips_of"]

_BRANCH = re.compile(r"^zero/[A-Za-z0-9][A-Za-z0-9_-]{0,63}/[a-z][a-z0-9-]*$")
# A URL's [user@]host[:port], ASCII only: what reaches ssh as a host name can be nothing it reads another way
# (an option, a percent-escape its ProxyCommand would expand).
_HOST = re.compile(r"^(?:[A-Za-z0-9._-]+@)?(?:[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")


def repository_problem(repo: str) -> str | None:
    """Why ``repo`` cannot name the team's repository (``[workspace] repo``), or None: a URL git fetches
    (``https://``, ``ssh://``, ``git://``, ``file://``, or ``host:path`` as scp writes it) or an absolute
    path; never an option, a transport helper (``ext::``) or a relative path (each node reads it)."""
    if repo != repo.strip() or any(ord(c) < 32 or ord(c) == 127 for c in repo):
        return "it holds spaces at an end or control characters"
    if repo.startswith("-"):
        return "it starts with '-' (git would read it as an option)"
    if "::" in repo:
        return "it names a git transport helper ('::'), which Zero does not run"
    if (url := re.match(r"^(https?|ssh|git|file)://([^/]*)(/.*)?$", repo)) is not None:
        if url.group(1) != "file" and not _HOST.fullmatch(url.group(2)):
            return "its host is not a plain name (letters, digits, '.', '-'; a user before '@', a port after ':')"
        return None
    if (scp := re.match(r"^([^/:]+):(?!//)(.?)", repo)) is not None:
        if not _HOST.fullmatch(scp.group(1)):
            return "its host is not a plain name (letters, digits, '.', '-'; a user before '@')"
        if scp.group(2) == "-":
            return "its path starts with '-' (git would read it as an option)"
        return None
    if "://" in repo:
        return "its scheme is not one of https, http, ssh, git or file"
    if not repo.startswith("/"):
        return "it is a relative path: give an absolute one (every node reads it) or a URL"
    return None


@dataclass(frozen=True, kw_only=True)
class NodeTree:
    """What a node needs to make a member's worktree: the team's ``repo``, the member's ``branch`` and the
    commit it starts at (``start``), the commits the node's clone may lack (``bundle``: a git bundle of the
    branch; None when the repository has them all) and the caller's folder inside the tree (``prefix``)."""

    repo: str
    branch: str
    start: str
    prefix: str
    bundle: bytes | None


def bundle_of(repo: Path, branch: str, *, since: list[str]) -> bytes | None:
    """A git bundle of ``branch`` in ``repo`` without the commits ``since`` holds (those the other side
    has), or None when it would hold none."""
    tips = _present(repo, since)
    with tempfile.TemporaryDirectory(prefix="zero-bundle-") as scratch:
        path = Path(scratch, "b.bundle")
        try:
            git("bundle", "create", "-q", str(path), f"refs/heads/{branch}", *(f"^{tip}" for tip in tips), cwd=repo)
        except GitError as e:
            if "empty bundle" in e.stderr:
                return None
            raise
        return path.read_bytes()


def fetch_bundle(repo: Path, data: bytes, branch: str, *, force: bool) -> None:
    """Fetch ``branch`` from the bundle ``data`` into ``repo`` (``force``: wherever it was; else only
    forward, a ``GitError`` if the branch there has commits the bundle's does not)."""
    with tempfile.TemporaryDirectory(prefix="zero-bundle-") as scratch:
        path = Path(scratch, "b.bundle")
        path.write_bytes(data)
        ref = f"refs/heads/{branch}"
        git(
            "fetch",
            "-q",
            "--no-tags",
            "--no-write-fetch-head",
            str(path),
            f"{'+' if force else ''}{ref}:{ref}",
            cwd=repo,
        )


def tips_of(repo: str, *, cwd: Path) -> list[str]:
    """The commits ``repo``'s branches and tags point at (``git ls-remote``); none when it cannot be read
    from here (a bundle then carries everything)."""
    try:
        out = git("ls-remote", "--heads", "--tags", "--", repo, cwd=cwd)
    except GitError:
        return []
    return sorted({line.split("\t", 1)[0] for line in out.splitlines() if "\t" in line})


def _present(repo: Path, commits: list[str]) -> list[str]:
    """Those of ``commits`` that ``repo`` has (a tag or commit it lacks cannot be left out of a bundle)."""
    return [
        c
        for c in commits
        if re.fullmatch(r"[0-9a-f]{40,64}", c) and git_ok("cat-file", "-e", f"{c}^{{commit}}", cwd=repo)
    ]


class NodeClones:
    """A node's clones of team repositories and the worktrees made from them, under ``folder``
    (``$ZERO_HOME/ray/<node>``): ``clones/<hash>.git`` (bare, shared by every member and run) and
    ``trees/<branch>``. Safe to use from several threads and processes (each clone has a lock)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def open(self, tree: NodeTree) -> Path:
        """Make ``tree``'s worktree (again, if a run before left one) on its branch at its start; the member's
        workspace in it."""
        if not _BRANCH.fullmatch(tree.branch):
            raise ConfigError(f"{tree.branch!r} is not a member branch Zero makes")
        clone = self._clone(tree.repo)
        path = self.folder / "trees" / tree.branch
        with _locked(clone):
            self._remove(clone, path)  # a worktree a run before left (its node died): its branch moves now
            if tree.bundle is not None:
                try:
                    fetch_bundle(clone, tree.bundle, tree.branch, force=True)
                except GitError:  # what the bundle builds on is newer than this clone: bring it up to date
                    self._update(clone, tree.repo)
                    fetch_bundle(clone, tree.bundle, tree.branch, force=True)
            else:
                if not git_ok("cat-file", "-e", f"{tree.start}^{{commit}}", cwd=clone):
                    self._update(clone, tree.repo)
                git("update-ref", f"refs/heads/{tree.branch}", tree.start, cwd=clone)
            if git("rev-parse", f"refs/heads/{tree.branch}", cwd=clone) != tree.start:
                raise ConfigError(f"the bundle of {tree.branch} does not hold its start {tree.start[:12]}")
            path.parent.mkdir(parents=True, exist_ok=True)
            git("-c", "checkout.workers=0", "worktree", "add", "-q", str(path), tree.branch, cwd=clone)
        return workspace_in(path, tree.prefix, tree.branch)

    def finish(self, tree: NodeTree, session_id: str, status: str) -> bytes | None:
        """Commit what the member left uncommitted, remove its worktree and branch here, and give back the
        bundle of what its branch holds past its start (None: nothing)."""
        clone = self._clone_path(tree.repo)
        path = self.folder / "trees" / tree.branch
        member = tree.branch.rsplit("/", 1)[1]
        if path.is_dir():
            restore_git_file(clone, path)  # what the member left there is no git folder Zero's git may read
            commit_all(path, member, session_id, status)
        with _locked(clone):
            tip = git("rev-parse", f"refs/heads/{tree.branch}", cwd=clone)
            data = bundle_of(clone, tree.branch, since=[tree.start]) if tip != tree.start else None
            self._remove(clone, path)
            git("update-ref", "-d", f"refs/heads/{tree.branch}", tip, cwd=clone)
        return data

    # -- helpers ----------------------------------------------------------------------------------

    def _clone_path(self, repo: str) -> Path:
        return self.folder / "clones" / f"{hashlib.sha256(repo.encode()).hexdigest()[:16]}.git"

    def _clone(self, repo: str) -> Path:
        """This node's bare clone of ``repo``, made at its first member."""
        clone = self._clone_path(repo)
        if clone.is_dir():
            return clone
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # (what members did: only this user reads it)
        clone.parent.mkdir(exist_ok=True)
        with _locked(clone):
            if not clone.is_dir():
                spare = clone.with_name(f"{clone.name}.{os.getpid()}.partial")
                shutil.rmtree(spare, ignore_errors=True)
                try:
                    # (--no-local: a path is read as a URL is, never by copying its folder, whose
                    # objects/info/alternates would have this clone read objects from wherever it names)
                    git("clone", "-q", "--bare", "--no-local", "--no-tags", "--", repo, str(spare), cwd=clone.parent)
                except GitError as e:
                    shutil.rmtree(spare, ignore_errors=True)
                    raise ConfigError(
                        f"[workspace] repo = {repo!r} cannot be cloned on this node ({e.stderr.strip()}): give a URL "
                        "or path every node can read"
                    ) from e
                os.rename(spare, clone)  # a clone cut short is never taken for one
        return clone

    def _update(self, clone: Path, repo: str) -> None:
        git("fetch", "-q", "--no-tags", "--", repo, "+refs/heads/*:refs/remotes/origin/*", cwd=clone)

    def _remove(self, clone: Path, path: Path) -> None:
        """Remove the worktree at ``path`` (its work is on the driver, or was never the member's) and its entry."""
        shutil.rmtree(path, ignore_errors=True)
        git("worktree", "prune", cwd=clone)


@contextmanager
def _locked(clone: Path) -> Iterator[None]:
    """Hold ``clone``'s lock (``flock`` of a file beside it: threads and processes alike wait)."""
    fd = os.open(clone.with_name(clone.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
