"""Running the ``git`` binary for Zero's own bookkeeping (snapshots, member worktrees, landing).

Every call runs with the same guards: the variables that would point git at another repository
(``GIT_DIR``, ``GIT_INDEX_FILE``, ...) are dropped, so a Zero started from a git hook still works on
the folder it names; the user's hooks, commit signing, rerere and auto-stash are off for these calls;
messages are in English (``LC_ALL=C``) so that they can be read; and nothing may prompt.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from zero.errors import ConfigError, RunError

__all__ = [
    "FALLBACK_IDENTITY",
    "GitError",
    "NotARepository",
    "PlantedGitFolder",
    "git",
    "git_bytes",
    "git_ok",
    "identity_env",
    "planted",
]

# Variables that choose which repository, index or object store git works on: inherited from a hook
# or a user's shell, they would send Zero's commands to another repository than the one it names.
_LOCATING = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
        "GIT_QUARANTINE_PATH",
        "GIT_REFLOG_ACTION",
    }
)

# Zero's commits are bookkeeping: a user's pre-commit hook that rejects them would lose a member's work,
# a signing key would prompt for a passphrase nobody types, rerere would resolve a conflict that must be
# reported, and auto-stash or update-refs would move what Zero did not mean to move. The repository's config
# is the workspace's, which a sandboxed command may write: what it names to run on every status or add
# (core.fsmonitor) would run unconfined here.
_GUARDS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "rerere.enabled=false",
    "-c",
    "rebase.autoStash=false",
    "-c",
    "rebase.updateRefs=false",
    "-c",
    "advice.detachedHead=false",
)

FALLBACK_IDENTITY = ("Zero", "zero@localhost")


class GitError(RunError):
    """A git command Zero ran failed; the message quotes the command and what git said."""

    code = "git_error"

    def __init__(self, args: Sequence[str], cwd: Path, returncode: int, stderr: str):
        said = stderr.strip() or f"exit status {returncode}"
        super().__init__(f"git {' '.join(args)} (in {cwd}) failed: {said}")
        self.returncode = returncode
        self.stderr = stderr
        self._made = (tuple(args), cwd, returncode, stderr)

    def __reduce__(self) -> tuple[type[GitError], tuple[Sequence[str], Path, int, str]]:
        return type(self), self._made  # (it crosses processes: a Ray node's member host raises it to the driver)


class PlantedGitFolder(GitError):
    """A git command Zero did not run: git there would read a git folder a command in the workspace made."""


class NotARepository(ConfigError):
    """``isolation = "worktree"`` was asked for in a folder that is not in a git repository."""


def _environ(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in _LOCATING}
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true")
    env.update(extra or {})
    return env


def planted(folder: Path) -> str | None:
    """What makes git in ``folder`` read a git folder a command in the workspace made (its config names the
    programs git runs: a filter, a merge driver), or None. A repository's own ``.git`` folder holds no
    ``commondir``; a worktree's ``.git`` file names a folder outside the worktree, whose ``commondir`` leads
    outside it too. Only a command run in the workspace would make them otherwise."""
    top = Path(os.path.abspath(folder))
    for here in (top, *top.parents):
        dot = here / ".git"
        if dot.is_symlink():
            return f"{dot} is a link"
        if dot.is_dir():
            return f"{dot / 'commondir'} exists" if (dot / "commondir").exists() else None
        if dot.is_file():
            try:
                target = Path(dot.read_text().removeprefix("gitdir:").strip())
                target = Path(os.path.realpath(here / target))
                common = Path(os.path.realpath(target / (target / "commondir").read_text().strip()))
            except OSError:
                return f"{dot} names no worktree's git folder"
            inside = [
                p
                for p in (target, common)
                if p == Path(os.path.realpath(here)) or Path(os.path.realpath(here)) in p.parents
            ]
            return f"{dot} names a git folder inside the worktree ({inside[0]})" if inside else None
    return None


def _run(args: Sequence[str], cwd: Path, env: Mapping[str, str] | None) -> subprocess.CompletedProcess[bytes]:
    if (why := planted(cwd)) is not None:
        raise PlantedGitFolder(
            args,
            cwd,
            128,
            f"not run: {why}, so git would take its config (and the programs it names) from a folder a command "
            "made; remove it, and check what ran in this workspace",
        )
    try:
        return subprocess.run(
            ["git", *_GUARDS, *args], cwd=cwd, env=_environ(env), stdin=subprocess.DEVNULL, capture_output=True
        )
    except FileNotFoundError as e:
        if not cwd.is_dir():
            raise GitError(args, cwd, 128, f"the folder {cwd} is gone") from e
        raise ConfigError(
            'isolation = "worktree" needs git, which is not installed here (no git on PATH): install it, '
            'or set isolation = "none"'
        ) from e


def git(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    """Run ``git ARGS`` in ``cwd`` and return its output with the final newline removed;
    ``GitError`` if it fails."""
    return git_bytes(*args, cwd=cwd, env=env).decode(errors="surrogateescape").removesuffix("\n")


def git_bytes(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> bytes:
    """Run ``git ARGS`` in ``cwd`` and return its output as it is (a file's content, say)."""
    done = _run(args, cwd, env)
    if done.returncode != 0:
        raise GitError(args, cwd, done.returncode, done.stderr.decode(errors="replace"))
    return done.stdout


def git_ok(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``git ARGS`` succeeds (exit 0): for the commands that answer a question by their status
    (``rev-parse --verify``, ``diff --quiet``, ``merge-base --is-ancestor``). A git that fails for
    another reason also answers no, so callers ask the question whose "no" is the safe answer (has the
    branch no change? was it landed?): a branch is kept, never deleted, on a doubt."""
    return _run(args, cwd, env).returncode == 0


def identity_env(cwd: Path) -> dict[str, str]:
    """The author and committer variables for Zero's commits: none where the user has an identity
    (their commits are theirs), else Zero's own, so that a machine without ``user.email`` never
    loses a member's work to "Please tell me who you are"."""
    if git_ok("var", "GIT_COMMITTER_IDENT", cwd=cwd) and git_ok("var", "GIT_AUTHOR_IDENT", cwd=cwd):
        return {}
    name, email = FALLBACK_IDENTITY
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
