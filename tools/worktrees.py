"""The git worktrees of one run's writing members, under ``$ZERO_HOME/worktrees/<root-short-id>/``.

Each member works in ``<root-short-id>/<member>`` on branch ``zero/<root-short-id>/<member>``,
branched from a snapshot of what the caller saw (or from the integration branch
``zero/<root-short-id>/land``, for a member that starts after others landed). The set is recorded in
``record.json`` beside them: what was snapshotted, each member's base and, once landed, the range it
added; a later command (resume, land, diff) finds the run there.

Work is never lost: ``finish`` commits whatever a member changed, whatever its status; ``release``
removes a worktree (and its branch) only when the branch was landed or holds no change, and only when
nothing is left uncommitted in it. ``prune`` clears what Zero made and only that: the stale entries of
recorded worktrees whose folder is gone (``git worktree prune`` would clear the user's too).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zero.errors import ConfigError, UsageError
from zero.strictfile import NAME_PATTERN, read_file
from zero.tools.git import GitError, git, git_ok, identity_env
from zero.tools.snapshot import Snapshot

__all__ = [
    "LAND",
    "DiffStat",
    "Finished",
    "MemberWorktree",
    "Worktrees",
    "commit_all",
    "restore_git_file",
    "workspace_in",
]

LAND = "land"  # the integration branch's last part, so no member may be called that


def unfit_for_a_worktree(member: str) -> str | None:
    """Why ``member`` cannot name a worktree and its branch (None: it can)."""
    if re.fullmatch(NAME_PATTERN, member) and member != LAND:
        return None
    return (
        f"member name {member!r} cannot name a worktree: use lowercase letters, digits and '-', "
        f"starting with a letter, and not {LAND!r} (the integration branch's name)"
    )


_ROOT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# Parallel checkout: on a slow disk the files of a 20,000-file tree are written by as many workers as
# there are cores instead of one (measured in bench/bench_worktree.py).
_CHECKOUT = ("-c", "checkout.workers=0")
POOL_SIZE = 32
"""The most released worktrees kept per repository for reuse (``$ZERO_HOME/worktrees/.pool/``): a worktree
made from one only rewrites the files that differ, where a new one writes the whole tree."""


@dataclass(frozen=True, kw_only=True)
class MemberWorktree:
    """A member's worktree: its top (``path``), its ``branch``, the commit it was branched from
    (``base``), the folder the member works in (``workspace``: the caller's folder, inside it) and
    whether it was there before (``reopened``: a resumed member carries on where it was)."""

    member: str
    path: Path
    branch: str
    base: str
    workspace: Path
    reopened: bool


@dataclass(frozen=True, kw_only=True)
class DiffStat:
    """What a branch changed: ``files``, lines ``added`` and ``removed`` (binary files count as files)."""

    files: int
    added: int
    removed: int

    def __str__(self) -> str:
        return f"+{self.added} −{self.removed} in {self.files} file{'' if self.files == 1 else 's'}"


@dataclass(frozen=True, kw_only=True)
class Finished:
    """What ``finish`` did: the ``commit`` it made (``None``: nothing was uncommitted) and the diff
    stat of the member's branch against its base."""

    commit: str | None
    stat: DiffStat


@dataclass(frozen=True)
class _Entry:
    branch: str | None
    prunable: bool


class Worktrees:
    """The member worktrees of the run whose root session's short id is ``root``. Safe to use from
    several threads at once (each git command is a process of its own; the record is written under a
    lock)."""

    def __init__(self, snapshot: Snapshot, *, root: str, home: Path, members: dict[str, dict[str, Any]]):
        if not _ROOT_ID.fullmatch(root):
            raise UsageError(f"invalid run id {root!r} for worktrees: use letters, digits, '_' or '-'")
        self.snapshot = snapshot
        self.root = root
        self.folder = Path(os.path.realpath(home / "worktrees" / root))
        self.land_branch = f"zero/{root}/{LAND}"
        self._members = members
        self._lock = threading.Lock()

    @classmethod
    def create(cls, snapshot: Snapshot, *, root: str, home: Path) -> Worktrees:
        """A new set for the run ``root``, recorded at once (an existing record of that run is kept)."""
        made = cls(snapshot, root=root, home=home, members={})
        if made._record_path.exists():
            return cls.load(root=root, home=home)
        made._write()
        return made

    @classmethod
    def load(cls, *, root: str, home: Path) -> Worktrees:
        """The set recorded for the run ``root`` (``UsageError`` if there is none)."""
        if not re.fullmatch(r"[A-Za-z0-9-]+", root):  # (a run's short id, as recorded: never a path)
            raise UsageError(f"run {root!r} made no worktrees: that is not a run's short id")
        path = Path(os.path.realpath(home / "worktrees" / root)) / "record.json"
        try:
            data = json.loads(read_file(path))  # (a FIFO or a device in its place is refused, never waited on)
            snapshot = Snapshot(**{**data["snapshot"], "repo": Path(data["snapshot"]["repo"])})
            return cls(snapshot, root=root, home=home, members=dict(data["members"]))
        except FileNotFoundError:
            raise UsageError(f"run {root} made no worktrees (no {path})") from None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path} cannot be read ({e}): the record of run {root}'s worktrees is damaged") from e

    # -- names --------------------------------------------------------------------------

    def branch_of(self, member: str) -> str:
        """``zero/<root>/<member>`` (``UsageError`` for a name git or the folder could not take)."""
        if (why := unfit_for_a_worktree(member)) is not None:
            raise UsageError(why)
        return f"zero/{self.root}/{member}"

    def path_of(self, member: str) -> Path:
        self.branch_of(member)
        return self.folder / member

    @property
    def members(self) -> list[str]:
        """The members recorded, in the order they were opened."""
        return list(self._members)

    # -- a member's life ----------------------------------------------------------------

    def open(self, member: str, base: str | None = None) -> MemberWorktree:
        """The worktree of ``member``: re-opened as it is if it exists (a resumed member), made again on
        its branch if only the branch is left, else made on a new branch from ``base`` (a commit or
        branch; by default the snapshot)."""
        branch, path, pending = self.branch_of(member), self.path_of(member), self._pending(member)
        # git reads every worktree's entry while it adds or removes one: two at once see each other's
        # half-made entry ("failed to read .git/worktrees/x/commondir"), so only the registration is
        # done under the repository's lock, and the slow part (writing the files) outside it.
        with self._repository_lock():
            reopened = self._register(member, branch, path, base)
        if pending.exists():
            git(*_CHECKOUT, "reset", "-q", "--hard", cwd=path)
            pending.unlink()
        if member not in self._members:  # a branch left by a run whose record was lost: its base is unknown
            self._note(member, {"base": self.snapshot.commit, "landed": None})
        return MemberWorktree(
            member=member,
            path=path,
            branch=branch,
            base=self.base_of(member),
            workspace=workspace_in(path, self.snapshot.prefix, branch),
            reopened=reopened,
        )

    def resumed_base(self, member: str) -> str | None:
        """What a member resumed alone goes on from when its own branch is gone: the integration branch, if its
        work landed there (its branch was deleted then); None: its branch as it is, or the snapshot."""
        repo = self.snapshot.repo
        if not self.landed(member) or _resolve(repo, f"refs/heads/{self.branch_of(member)}") is not None:
            return None
        return self.land_branch if _resolve(repo, f"refs/heads/{self.land_branch}") is not None else None

    def branch(self, member: str, base: str | None = None) -> str:
        """Make ``member``'s branch from ``base`` (a commit or branch; by default the snapshot), without a
        worktree here, unless it is there (a resumed member goes on from it); the commit it is at. For a
        member whose worktree another machine makes (``zero.tools.clones``)."""
        branch, repo = self.branch_of(member), self.snapshot.repo
        with self._repository_lock():
            tip = _resolve(repo, f"refs/heads/{branch}")
            if tip is None:
                tip = git("rev-parse", "-q", "--verify", f"{base or self.snapshot.commit}^{{commit}}", cwd=repo)
                git("branch", "--no-track", branch, tip, cwd=repo)
                self._note(member, {"base": tip, "landed": None})
            elif member not in self._members:  # a branch left by a run whose record was lost: its base is unknown
                self._note(member, {"base": self.snapshot.commit, "landed": None})
        return tip

    def _register(self, member: str, branch: str, path: Path, base: str | None) -> bool:
        """Register ``member``'s worktree, its files not written yet, unless it is there; whether it was."""
        repo = self.snapshot.repo
        entry = self._entries().get(str(path))
        if entry is not None and not entry.prunable:
            if f"refs/heads/{branch}" not in (entry.branch, _rebasing(path)):
                raise ConfigError(f"the worktree {path} is on {entry.branch or 'no branch'}, not on {branch}")
            return True
        if entry is not None:  # its folder was deleted: clear the stale entry before making it again
            git("worktree", "remove", "--force", str(path), cwd=repo)
        if path.exists():
            raise ConfigError(f"{path} exists but is not a worktree of {repo}: move it away and run again")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._pending(member).touch()  # until its files are written: a worktree cut short is no member's work
        if git_ok("rev-parse", "-q", "--verify", f"refs/heads/{branch}", cwd=repo):
            git("worktree", "add", "-q", "--no-checkout", str(path), branch, cwd=repo)
            self._recycle(path)
            return True
        start = git("rev-parse", "-q", "--verify", f"{base or self.snapshot.commit}^{{commit}}", cwd=repo)
        git("worktree", "add", "-q", "--no-checkout", "--no-track", "-b", branch, str(path), start, cwd=repo)
        self._recycle(path)
        self._note(member, {"base": start, "landed": None})
        return False

    def finish(self, member: str, session_id: str, status: str) -> Finished:
        """Commit on ``member``'s branch whatever it left uncommitted (any status: an interrupted
        member's edits are work too), with a message naming the member and the session."""
        path = self.path_of(member)
        if not path.is_dir():
            raise GitError(("add", "-A"), path, 128, f"the worktree {path} is gone")
        restore_git_file(self._common, path)
        commit = None
        if not self._pending(member).exists():  # else its files were never all written: nothing is the member's
            commit = commit_all(path, member, session_id, status)
        return Finished(commit=commit, stat=self.diff_stat(member))

    def release(self, member: str) -> bool:
        """Remove ``member``'s worktree and branch if its branch was landed or holds no change and
        nothing is uncommitted in it; else keep both. Whether it was removed. The folder goes to the
        trash (``sweep`` empties it): renaming is instant, deleting 20,000 files is not."""
        path, ref = self.path_of(member), f"refs/heads/{self.branch_of(member)}"
        repo = self.snapshot.repo
        with self._repository_lock():
            entry = self._entries().get(str(path))
        pending = self._pending(member).exists()
        if entry is not None and not entry.prunable and not pending and git("status", "--porcelain", cwd=path):
            return False
        tip = _resolve(repo, ref)
        # Asked of git, not of the record: a member resumed after landing may have added work since.
        on_land = tip is not None and git_ok("merge-base", "--is-ancestor", tip, self.land_branch, cwd=repo)
        if tip is not None and self.changed(member) and not on_land:
            return False
        if entry is not None:
            self._discard(member, path)
        self._pending(member).unlink(missing_ok=True)
        if tip is not None:
            git("update-ref", "-d", ref, tip, cwd=repo)
        return True

    def stow(self, member: str) -> bool:
        """Remove ``member``'s worktree and keep its branch, once nothing is left uncommitted in it (its
        work did not land: ``zero swarm diff`` shows it, ``zero swarm land`` and resume make the worktree
        again from the branch). Whether it was removed; a member that can be released is."""
        if self.release(member):
            return True
        path = self.path_of(member)
        with self._repository_lock():
            entry = self._entries().get(str(path))
        if entry is None or entry.prunable or self._pending(member).exists():
            return entry is None
        if git("status", "--porcelain", cwd=path):
            return False
        self._discard(member, path)
        return True

    def prune(self) -> list[str]:
        """Clear the stale entries of this set's worktrees (their folder is gone) and release each member
        that can be; the members kept (their branch holds work not landed), for ``zero swarm diff``."""
        with self._repository_lock():
            entries = self._entries()
            for member in self.members:
                entry = entries.get(str(self.path_of(member)))
                if entry is not None and entry.prunable:
                    git("worktree", "remove", "--force", str(self.path_of(member)), cwd=self.snapshot.repo)
        return [member for member in self.members if not self.release(member)]

    def drop_land_branch(self) -> None:
        """Delete the integration branch if nothing landed on it (it is still the snapshot): a run that
        landed nothing leaves no branch behind."""
        repo, ref = self.snapshot.repo, f"refs/heads/{self.land_branch}"
        tip = _resolve(repo, ref)
        if tip is not None and tip == self.snapshot.commit:
            git("update-ref", "-d", ref, tip, cwd=repo)

    def sweep(self) -> None:
        """Delete the folders ``release`` moved to the trash (slow on a big tree: run it in a worker
        thread, once the members are done)."""
        shutil.rmtree(self.folder / ".trash", ignore_errors=True)

    # -- what a branch holds ------------------------------------------------------------

    def base_of(self, member: str) -> str:
        return str(self._members[member]["base"]) if member in self._members else self.snapshot.commit

    def changed(self, member: str) -> bool:
        """Whether ``member``'s branch holds a change against its base (a branch that is gone holds none)."""
        ref = f"refs/heads/{self.branch_of(member)}"
        repo = self.snapshot.repo
        return _resolve(repo, ref) is not None and not git_ok("diff", "--quiet", self.base_of(member), ref, cwd=repo)

    def landed(self, member: str) -> bool:
        """Whether ``member``'s work is on the integration branch (recorded by ``mark_landed``)."""
        return member in self._members and self._members[member]["landed"] is not None

    def mark_landed(self, member: str, before: str, after: str) -> None:
        """Record that landing ``member`` moved the integration branch from ``before`` to ``after``."""
        with self._lock:
            self._members.setdefault(member, {"base": self.snapshot.commit})["landed"] = [before, after]
            self._write()

    def span(self, member: str) -> tuple[str, str]:
        """The two commits between which ``member``'s work shows: the range its landing added, else its
        base and its branch."""
        landed = self._members.get(member, {}).get("landed")
        if landed:
            return landed[0], landed[1]
        return self.base_of(member), f"refs/heads/{self.branch_of(member)}"

    def diff(self, member: str) -> str:
        """The diff of ``member``'s work (``zero swarm diff``)."""
        return git("diff", *self.span(member), cwd=self.snapshot.repo)

    def diff_stat(self, member: str) -> DiffStat:
        """``+added −removed in N files`` for ``member``'s work."""
        lines = git("diff", "--numstat", *self.span(member), cwd=self.snapshot.repo).splitlines()
        counts = [line.split("\t", 2)[:2] for line in lines]
        added = sum(int(a) for a, _ in counts if a.isdigit())
        removed = sum(int(r) for _, r in counts if r.isdigit())
        return DiffStat(files=len(counts), added=added, removed=removed)

    # -- helpers --------------------------------------------------------------------------

    def _discard(self, member: str, path: Path) -> None:
        """Move ``member``'s worktree folder to the pool (or, when it is full, to the trash) and drop its entry
        (its branch stays)."""
        with self._repository_lock():
            if path.exists() and not self._pool_up(path):
                trash = self.folder / ".trash"
                trash.mkdir(exist_ok=True)
                path.rename(trash / f"{member}-{secrets.token_hex(4)}")
            git("worktree", "remove", "--force", str(path), cwd=self.snapshot.repo)

    # -- the pool: released worktrees made again (under the repository's lock) ------------

    @property
    def _pool(self) -> Path:
        """This repository's pool: the folders of released worktrees, each with the index that describes it
        (``<token>/`` and ``<token>.index``; a folder without its index is no entry)."""
        common = os.path.realpath(self._common)
        return self.folder.parent / ".pool" / hashlib.sha256(common.encode()).hexdigest()[:16]

    def _pool_up(self, path: Path) -> bool:
        """Put the clean worktree at ``path`` in the pool, unless it is full; whether it went there."""
        pool = self._pool
        index = Path(git("rev-parse", "--absolute-git-dir", cwd=path), "index")
        if not index.exists() or (pool.exists() and len(list(pool.glob("*.index"))) >= POOL_SIZE):
            return False
        if _odd_modes(path):  # git restores contents, not a setuid bit or a world-writable folder
            return False
        git("clean", "-q", "-ffdx", cwd=path)  # what its member left that git ignores: the next starts without it
        pool.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(6)
        os.replace(index, pool / f"{token}.partial")  # before its entry (and the index with it) is removed
        (path / ".git").unlink()  # it names the entry being removed
        path.rename(pool / token)
        os.replace(pool / f"{token}.partial", pool / f"{token}.index")  # now it is an entry
        return True

    def _recycle(self, path: Path) -> None:
        """Give the worktree just registered at ``path`` (its folder holds only ``.git``) the files of one in
        the pool, with their index, if there is one: checking it out then rewrites only what differs."""
        pool = self._pool
        for index in pool.glob("*.index") if pool.exists() else ():
            folder = index.with_suffix("")
            if not folder.is_dir():
                continue
            (path / ".git").rename(folder / ".git")
            path.rmdir()
            folder.rename(path)
            os.replace(index, Path(git("rev-parse", "--absolute-git-dir", cwd=path), "index"))
            return

    @property
    def _record_path(self) -> Path:
        return self.folder / "record.json"

    def _write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        snapshot = {**asdict(self.snapshot), "repo": str(self.snapshot.repo)}
        data = json.dumps({"snapshot": snapshot, "members": self._members}, indent=1)
        spare = self._record_path.with_name(f"record.{secrets.token_hex(4)}.tmp")
        spare.write_text(data)
        os.replace(spare, self._record_path)  # a reader sees the old record or the new one, never half

    def _note(self, member: str, facts: dict[str, Any]) -> None:
        with self._lock:
            self._members[member] = facts
            self._write()

    def _pending(self, member: str) -> Path:
        """The mark of a worktree registered whose files are not all written yet (no member name starts
        with a dot)."""
        return self.folder / f".checkout-{member}"

    @functools.cached_property
    def _common(self) -> Path:
        """The repository's git folder (every worktree's is in it)."""
        return Path(self.snapshot.repo, git("rev-parse", "--git-common-dir", cwd=self.snapshot.repo))

    @contextmanager
    def _repository_lock(self) -> Iterator[None]:
        """Hold the repository's lock (``flock`` of its git folder: threads and processes alike wait)."""
        fd = os.open(self._common, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _entries(self) -> dict[str, _Entry]:
        """The repository's worktrees (``git worktree list``) by path (ask under the repository's lock)."""
        found: dict[str, _Entry] = {}
        out = git("worktree", "list", "--porcelain", "-z", cwd=self.snapshot.repo)
        for block in out.split("\0\0"):
            fields = dict(line.partition(" ")[::2] for line in block.strip("\0").split("\0") if line)
            if "worktree" in fields:
                found[fields["worktree"]] = _Entry(fields.get("branch"), "prunable" in fields)
        return found


def restore_git_file(common: Path, top: Path) -> None:
    """Make the worktree ``top``'s ``.git`` the file git wrote, naming its entry in the git folder ``common``,
    whatever a command in the worktree left there: a repository of its own (``git init`` at the top), a link,
    a file naming another worktree's entry. Zero's git there would take that folder's config, whose filter
    runs unconfined at ``git add``, or commit on that worktree's branch (another member's); its own branch
    would get nothing. ``GitError`` if ``common`` has no entry for ``top``."""
    dot = Path(os.path.realpath(top), ".git")
    entries = common / "worktrees"
    for named in sorted(entries.glob("*/gitdir")) if entries.is_dir() else ():
        try:
            if named.read_text().strip() == str(dot):
                break
        except OSError:
            continue
    else:
        raise GitError(("worktree", "list"), top, 128, f"{top} is no worktree of {common}: its entry is gone")
    want = f"gitdir: {named.parent}\n"
    if not dot.is_symlink() and dot.is_file() and dot.read_text() == want:
        return
    if dot.is_dir() and not dot.is_symlink():
        shutil.rmtree(dot)
    elif os.path.lexists(dot):
        dot.unlink()
    dot.write_text(want)


def workspace_in(top: Path, prefix: str, branch: str) -> Path:
    """The caller's folder ``prefix`` in the worktree ``top`` of ``branch``; ``ConfigError`` if a link on its
    way leads elsewhere (a member that landed ``ln -s /etc sub`` would make the next member's sandbox, and
    the check's, write where it leads)."""
    folder = top / prefix
    if prefix and os.path.realpath(folder) != os.path.join(os.path.realpath(top), prefix.rstrip("/")):
        raise ConfigError(
            f"{prefix.rstrip('/')} is a link in {branch} (to {os.path.realpath(folder)}): a member there would write "
            "where it leads; make it a folder again on that branch, or run from the repository's top"
        )
    return folder


def commit_all(path: Path, member: str, session_id: str, status: str) -> str | None:
    """Commit everything uncommitted in the worktree ``path`` as ``member``'s work in session ``session_id``
    (which ended ``status``); the commit, or None when nothing was. What git cannot add (a repository the member
    made with ``git init`` and no commit yet) is left out, and the commit's message says so: the rest is
    committed, never lost with it."""
    left_out: list[str] = []
    try:
        git("add", "-A", "--ignore-errors", cwd=path)
    except GitError as e:  # (it added what it could)
        left_out = re.findall(r"^error: '(.+?)' ", e.stderr, re.MULTILINE)
        if e.returncode != 1 or not left_out:
            raise
    if git_ok("diff", "--cached", "--quiet", cwd=path):
        return None
    subject = f"{member}: what session {session_id} changed (it ended {status})"
    trailers = f"Zero-Member: {member}\nZero-Session: {session_id}"
    message = ["-m", subject]
    if left_out:
        shown = ", ".join(left_out)
        message += ["-m", f"Left out (git cannot add them: a repository of its own with no commit?): {shown}"]
    git("commit", "-q", "--no-verify", *message, "-m", trailers, cwd=path, env=identity_env(path))
    return git("rev-parse", "HEAD", cwd=path)


def _rebasing(path: Path) -> str | None:
    """The branch a rebase stopped halfway in the worktree ``path`` is rebasing (HEAD is detached then)."""
    try:
        return Path(path, git("rev-parse", "--git-path", "rebase-merge/head-name", cwd=path)).read_text().strip()
    except (GitError, OSError):
        return None


def _resolve(repo: Path, ref: str) -> str | None:
    try:
        return git("rev-parse", "-q", "--verify", ref, cwd=repo)
    except GitError:
        return None


_ODD = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWOTH


def _odd_modes(top: Path) -> bool:
    """Whether anything in the worktree ``top`` has a mode git would not give it (setuid, setgid, sticky,
    writable by anyone): such a tree is not handed to another member."""
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if not stat.S_ISLNK(mode) and mode & _ODD:
                return True
    return bool(os.lstat(top).st_mode & _ODD)
