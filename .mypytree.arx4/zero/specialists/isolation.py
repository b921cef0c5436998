"""A ``Task`` child in a git worktree of its own (``isolation = "worktree"``), and its work handed back.

The child works in ``$ZERO_HOME/worktrees/<child-short-id>/<specialist>`` on branch
``zero/<child-short-id>/<specialist>``, branched from a snapshot of what its parent sees (HEAD plus every
uncommitted change, never ``origin/HEAD``); its whole workspace is rooted there. When it ends, whatever its
status, what it changed is committed on that branch and the worktree is removed: a branch with a change stays
for the parent to merge (the Task result says how), a branch without one goes too. A resumed child works
in its worktree again, made from its branch.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from zero.errors import ZeroError
from zero.sessions import default_data_dir, short_id
from zero.tools import DiffStat, MemberWorktree, Workspace, Worktrees, take_snapshot

__all__ = ["ChildWorktree", "HandedBack", "bring_back", "open_worktree", "reopen_worktree"]


@dataclass(frozen=True, kw_only=True)
class ChildWorktree:
    """The worktree a child works in, and the set (of one) it belongs to."""

    worktrees: Worktrees
    tree: MemberWorktree

    def workspace(self, caller: Workspace) -> Workspace:
        """The child's workspace: its folder in the worktree, writing only what its caller may (``owns``)."""
        if caller.owns is not None:
            return Workspace([self.tree.workspace], owns=caller.owns, owner=caller.owner)
        return Workspace([self.tree.workspace])


@dataclass(frozen=True, kw_only=True)
class HandedBack:
    """What a child's worktree left: its ``branch`` and ``stat`` (None: it changed nothing, so nothing is
    left), the command that merges it, or why the worktree is kept (``kept``)."""

    branch: str | None = None
    stat: DiffStat | None = None
    merge: str = ""
    kept: str = ""

    def lines(self) -> list[str]:
        """What the Task result says of it."""
        if self.kept:
            return [f"worktree: {self.kept}"]
        if self.branch is None:
            return ["worktree: it changed nothing, so no branch was kept"]
        return [f"branch: {self.branch} ({self.stat})", f"merge it: {self.merge}"]


def open_worktree(caller: Workspace, session_id: str, specialist: str) -> ChildWorktree:
    """A worktree for the child ``session_id`` working as ``specialist``, branched from a snapshot of what
    ``caller`` holds now (blocking: run it in a thread). ``ZeroError`` naming the fix where there is no git
    repository."""
    snapshot = take_snapshot(caller.root, who=f"the task {specialist!r}")
    worktrees = Worktrees.create(snapshot, root=short_id(session_id), home=default_data_dir())
    return ChildWorktree(worktrees=worktrees, tree=worktrees.open(specialist))


def reopen_worktree(session_id: str, specialist: str) -> ChildWorktree | None:
    """The worktree of the child ``session_id`` made again on its branch, to resume it where it was (None: it
    worked in no worktree of its own). Blocking: run it in a thread."""
    try:
        worktrees = Worktrees.load(root=short_id(session_id), home=default_data_dir())
    except ZeroError:
        return None
    return ChildWorktree(worktrees=worktrees, tree=worktrees.open(specialist))


def bring_back(child: ChildWorktree, session_id: str, status: str) -> HandedBack:
    """Commit what the child left on its branch and remove its worktree: the branch stays if it holds a change
    (blocking: run it in a thread). A git that fails keeps the worktree as it is, and says where."""
    worktrees, name = child.worktrees, child.tree.member
    try:
        finished = worktrees.finish(name, session_id, status)
        if not worktrees.changed(name):
            worktrees.release(name)
            return HandedBack()
        if not worktrees.stow(name):
            return HandedBack(kept=f"{child.tree.path} is kept: something in it could not be committed")
    except ZeroError as e:
        return HandedBack(kept=f"{child.tree.path} is kept as it is: {e}")
    finally:
        worktrees.sweep()
    return HandedBack(branch=child.tree.branch, stat=finished.stat, merge=_merge_command(child))


def _merge_command(child: ChildWorktree) -> str:
    """The command that brings the child's work into its caller's checkout: a merge where the caller had
    nothing uncommitted, else the child's own changes applied to the caller's files (a merge of the branch
    would bring the snapshot's commit of the caller's edits too)."""
    snapshot, branch = child.worktrees.snapshot, child.tree.branch
    command = f"git merge {branch}" if not snapshot.dirty else f"git diff {snapshot.commit[:12]} {branch} | git apply"
    return f"cd {shlex.quote(str(snapshot.repo))} && {command}" if snapshot.prefix else command
