"""A member's worktree: made under $ZERO_HOME/worktrees/<run>/<member> from the snapshot, re-opened where
it was, its work committed whatever its status, removed only once nothing in it can be lost, and only
what Zero made pruned."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
from support.git import commit_all, hermetic_git, make_repo, run_git, worktree_list

from zero.errors import ConfigError, UsageError
from zero.tools import Worktrees, take_snapshot
from zero.tools.git import GitError


@pytest.fixture(autouse=True)
def _git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def home() -> Path:
    return Path(os.environ["ZERO_HOME"])


def worktrees(repo: Path, root: str = "a1b2c3d4") -> Worktrees:
    return Worktrees.create(take_snapshot(repo), root=root, home=home())


def test_a_member_works_under_zero_home_on_its_branch_and_sees_the_callers_uncommitted_edits(repo: Path) -> None:
    (repo / "src" / "app.py").write_text("uncommitted edit\n")
    (repo / "notes.txt").write_text("untracked\n")
    wt = worktrees(repo)

    tree = wt.open("worker")

    assert tree.path == Path(os.path.realpath(home())) / "worktrees" / "a1b2c3d4" / "worker"
    assert (tree.branch, tree.reopened, tree.base) == ("zero/a1b2c3d4/worker", False, wt.snapshot.commit)
    assert run_git(tree.path, "symbolic-ref", "--short", "HEAD") == "zero/a1b2c3d4/worker"
    assert (tree.path / "src" / "app.py").read_text() == "uncommitted edit\n"
    assert (tree.path / "notes.txt").read_text() == "untracked\n"
    assert run_git(tree.path, "status", "--porcelain") == ""
    assert run_git(repo, "status", "--porcelain") == " M src/app.py\n?? notes.txt"


def test_a_member_started_in_a_subfolder_works_in_that_folder_of_its_worktree(repo: Path) -> None:
    wt = Worktrees.create(take_snapshot(repo / "src"), root="a1b2c3d4", home=home())
    tree = wt.open("worker")
    assert tree.workspace == tree.path / "src/" and (tree.workspace / "app.py").is_file()


def test_finish_commits_what_the_member_changed_naming_member_and_session(repo: Path) -> None:
    wt = worktrees(repo)
    tree = wt.open("worker")
    (tree.path / "src" / "app.py").write_text("def main():\n    return 43\n")
    (tree.path / "new.py").write_text("x = 1\ny = 2\n")
    (tree.path / "README.md").unlink()

    done = wt.finish("worker", "zero_20261201_abcdef123456", "interrupted")

    assert done.commit == run_git(repo, "rev-parse", "zero/a1b2c3d4/worker")
    assert run_git(repo, "log", "-1", "--format=%s%n%b", "zero/a1b2c3d4/worker") == (
        "worker: what session zero_20261201_abcdef123456 changed (it ended interrupted)\n"
        "Zero-Member: worker\nZero-Session: zero_20261201_abcdef123456\n"
    )
    assert (done.stat.files, done.stat.added, done.stat.removed) == (3, 3, 2)
    assert str(done.stat) == "+3 −2 in 3 files"
    assert run_git(tree.path, "status", "--porcelain") == ""
    assert wt.finish("worker", "zero_20261201_abcdef123456", "completed").commit is None


def test_finish_commits_even_where_the_user_has_no_identity(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wt = worktrees(repo)
    tree = wt.open("worker")
    hermetic_git(tmp_path, monkeypatch, identity=False)
    (tree.path / "new.py").write_text("x = 1\n")
    assert wt.finish("worker", "s1", "failed").commit is not None
    assert run_git(repo, "log", "-1", "--format=%an", "zero/a1b2c3d4/worker") == "Zero"


def test_a_killed_members_worktree_is_reopened_where_it_was_uncommitted_edits_and_all(repo: Path) -> None:
    wt = worktrees(repo)
    tree = wt.open("worker")
    (tree.path / "half.py").write_text("written before the kill\n")

    again = Worktrees.load(root="a1b2c3d4", home=home()).open("worker")

    assert (again.path, again.reopened, again.base) == (tree.path, True, tree.base)
    assert (again.path / "half.py").read_text() == "written before the kill\n"


def test_a_worktree_whose_folder_was_deleted_is_made_again_from_its_branch(repo: Path) -> None:
    wt = worktrees(repo)
    tree = wt.open("worker")
    (tree.path / "kept.py").write_text("committed work\n")
    wt.finish("worker", "s1", "interrupted")
    shutil.rmtree(tree.path)

    again = wt.open("worker")

    assert again.reopened and (again.path / "kept.py").read_text() == "committed work\n"
    assert [line for line in worktree_list(repo) if "prunable" in line] == []


def test_a_member_with_no_change_is_removed_worktree_and_branch(repo: Path) -> None:
    wt = worktrees(repo)
    wt.open("reader")
    wt.finish("reader", "s1", "completed")

    assert wt.release("reader")

    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"]
    assert run_git(repo, "branch", "--list", "zero/*") == ""
    wt.sweep()
    assert not (wt.folder / ".trash").exists() and not wt.path_of("reader").exists()


def test_a_branch_holding_work_not_landed_is_kept_with_its_worktree(repo: Path) -> None:
    wt = worktrees(repo)
    tree = wt.open("worker")
    (tree.path / "work.py").write_text("work\n")
    assert not wt.release("worker")  # uncommitted: kept
    wt.finish("worker", "s1", "completed")
    assert not wt.release("worker")  # committed, not landed: kept
    assert wt.changed("worker") and (tree.path / "work.py").is_file()
    assert run_git(repo, "branch", "--list", "zero/*").strip() == "+ zero/a1b2c3d4/worker"


def test_prune_clears_zeros_stale_entries_and_never_the_users(repo: Path, tmp_path: Path) -> None:
    run_git(repo, "worktree", "add", "-q", "-b", "mine", str(tmp_path / "my-tree"))
    run_git(repo, "worktree", "add", "-q", "-b", "gone", str(tmp_path / "my-gone-tree"))
    shutil.rmtree(tmp_path / "my-gone-tree")
    wt = worktrees(repo)
    killed, idle = wt.open("killed"), wt.open("idle")
    (killed.path / "work.py").write_text("work\n")
    wt.finish("killed", "s1", "interrupted")
    shutil.rmtree(killed.path)  # the folder lost, the branch kept
    shutil.rmtree(idle.path)

    kept = wt.prune()

    assert kept == ["killed"]
    assert worktree_list(repo) == [
        f"{repo} branch refs/heads/main",
        f"{tmp_path / 'my-gone-tree'} branch refs/heads/gone prunable gitdir file points to non-existent location",
        f"{tmp_path / 'my-tree'} branch refs/heads/mine",
    ]
    assert run_git(repo, "show", "zero/a1b2c3d4/killed:work.py") == "work"
    assert run_git(repo, "branch", "--list", "zero/*").strip() == "zero/a1b2c3d4/killed"


def test_the_record_lets_a_later_command_find_the_run(repo: Path) -> None:
    (repo / "wip.txt").write_text("wip\n")
    wt = worktrees(repo)
    wt.open("one")
    wt.open("two", base="main")

    later = Worktrees.load(root="a1b2c3d4", home=home())

    assert later.snapshot == wt.snapshot and later.members == ["one", "two"]
    assert later.base_of("two") == run_git(repo, "rev-parse", "main") != later.base_of("one")


def test_member_names_that_cannot_name_a_branch_and_folder_are_refused(repo: Path) -> None:
    wt = worktrees(repo)
    for name in ("land", "Worker", "../up", "a b"):
        with pytest.raises(UsageError) as caught:
            wt.open(name)
        assert str(caught.value) == (
            f"member name {name!r} cannot name a worktree: use lowercase letters, digits and '-', starting "
            "with a letter, and not 'land' (the integration branch's name)"
        )
    with pytest.raises(UsageError, match="invalid run id '../x' for worktrees"):
        Worktrees.create(wt.snapshot, root="../x", home=home())
    with pytest.raises(UsageError, match="run nope made no worktrees"):
        Worktrees.load(root="nope", home=home())


def test_a_folder_in_the_way_that_is_not_a_worktree_is_never_overwritten(repo: Path) -> None:
    wt = worktrees(repo)
    wt.path_of("worker").mkdir(parents=True)
    (wt.path_of("worker") / "theirs.txt").write_text("someone's file\n")
    with pytest.raises(ConfigError, match="exists but is not a worktree of"):
        wt.open("worker")
    assert (wt.path_of("worker") / "theirs.txt").read_text() == "someone's file\n"


def test_a_damaged_record_is_a_clear_error(repo: Path) -> None:
    wt = worktrees(repo)
    (wt.folder / "record.json").write_text("{not json")
    with pytest.raises(ConfigError, match="the record of run a1b2c3d4's worktrees is damaged"):
        Worktrees.load(root="a1b2c3d4", home=home())


def test_a_member_can_start_from_another_commit_than_the_snapshot(repo: Path) -> None:
    wt = worktrees(repo)
    (repo / "later.txt").write_text("committed after the snapshot\n")
    later = commit_all(repo, "Later")
    tree = wt.open("second", base=later)
    assert tree.base == later and (tree.path / "later.txt").is_file()


def test_a_worktree_whose_files_were_never_all_written_is_no_members_work(repo: Path) -> None:
    """Zero killed between registering a worktree and writing its files (the slow part, done outside the
    repository's lock) leaves an empty worktree with its mark: finishing it commits nothing (not the
    deletion of every file), and opening it again writes the files."""
    wt = worktrees(repo)
    path = wt.path_of("cut")
    (wt.folder / ".checkout-cut").touch()
    run_git(repo, "worktree", "add", "-q", "--no-checkout", "-b", "zero/a1b2c3d4/cut", str(path), "main")

    assert wt.finish("cut", "s1", "interrupted").commit is None
    assert run_git(repo, "rev-parse", "zero/a1b2c3d4/cut") == run_git(repo, "rev-parse", "main")
    tree = wt.open("cut")
    assert tree.reopened and (tree.path / "src" / "app.py").is_file()
    assert run_git(tree.path, "status", "--porcelain") == ""


def test_a_released_worktree_is_made_again_from_the_pool_with_exactly_the_new_base(repo: Path) -> None:
    (repo / ".gitignore").write_text("build/\n")
    commit_all(repo, "ignore build")
    first = worktrees(repo, "run1")
    tree = first.open("reader")
    (tree.path / "build").mkdir()
    (tree.path / "build" / "cache.bin").write_text("a build left by the last member\n")  # ignored
    marker = os.stat(tree.path / "src").st_ino
    first.finish("reader", "s1", "completed")
    assert first.release("reader")
    assert worktree_list(repo) == [f"{repo} branch refs/heads/main"]  # the pool is not registered

    (repo / "src" / "app.py").write_text("changed since\n")
    (repo / "README.md").unlink()
    again = worktrees(repo, "run2").open("worker")

    assert os.stat(again.path / "src").st_ino == marker  # the recycled folder, not a new checkout
    assert (again.path / "src" / "app.py").read_text() == "changed since\n"
    assert not (again.path / "README.md").exists() and not (again.path / "build").exists()
    assert run_git(again.path, "status", "--porcelain", "--ignored") == ""
    assert run_git(again.path, "symbolic-ref", "--short", "HEAD") == "zero/run2/worker"
    assert len(worktree_list(repo)) == 2 and not list((home() / "worktrees" / ".pool").glob("*/*.index"))


def test_the_pool_keeps_at_most_its_size_per_repository(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("zero.tools.worktrees.POOL_SIZE", 1)
    wt = worktrees(repo)
    for name in ("one", "two"):
        wt.open(name)
    assert wt.release("one") and wt.release("two")
    assert len(list((home() / "worktrees" / ".pool").glob("*/*.index"))) == 1
    assert [p.name for p in (wt.folder / ".trash").iterdir()][0].startswith("two-")


def test_a_worktree_with_modes_git_would_not_give_goes_to_the_trash_not_the_pool(repo: Path) -> None:
    wt = worktrees(repo)
    tree = wt.open("worker")
    os.chmod(tree.path / "src" / "app.py", 0o4666)  # setuid and world-writable: git sees no change
    assert wt.release("worker")
    assert not list((home() / "worktrees" / ".pool").glob("*/*.index"))
    assert [p.name for p in (wt.folder / ".trash").iterdir()][0].startswith("worker-")


def test_zeros_git_refuses_a_git_folder_a_command_in_the_workspace_made(repo: Path, tmp_path: Path) -> None:
    """A command in a worktree that points git at a folder of its own (a ``.git`` file naming it, or a repository
    made at the top), whose config names a filter, would have it run unconfined by Zero's next git add, and the
    member's work committed there, not on its branch: Zero puts back the ``.git`` file git wrote first. In the
    checkout itself, Zero's git refuses to run."""
    wt = worktrees(repo)
    ran = tmp_path / "ran"
    for case, member in (("file", "worker"), ("folder", "other")):
        tree = wt.open(member)
        own = tmp_path / f"own-{case}"
        run_git(tmp_path, "init", "-q", str(own))
        (tree.path / ".gitattributes").write_text("* filter=x\n")
        (tree.path / "src" / "app.py").write_text(f"changed {case}\n")
        if case == "file":
            (tree.path / ".git").write_text(f"gitdir: {own}/.git\n")
        else:
            (tree.path / ".git").unlink()
            shutil.copytree(own / ".git", tree.path / ".git")
        config = own / ".git" / "config" if case == "file" else tree.path / ".git" / "config"
        config.write_text(config.read_text() + f"[filter \"x\"]\n\tclean = sh -c 'echo ran >> {ran}; cat'\n")
        assert wt.finish(member, "s1", "completed").stat.files == 2
        assert not ran.exists()
        assert run_git(repo, "show", f"{wt.branch_of(member)}:src/app.py") == f"changed {case}"
    (repo / ".git" / "commondir").write_text("evil\n")  # the checkout's own git folder, made to lead elsewhere
    with pytest.raises(GitError, match=r"not run: .*/repo/\.git/commondir exists"):
        take_snapshot(repo)


def test_a_member_is_not_given_a_workspace_a_landed_link_leads_out_of_its_worktree(repo: Path, tmp_path: Path) -> None:
    """The caller works in ``src``; a member that landed ``src`` as a link to a folder elsewhere would make the
    next member's workspace (its sandbox's writable root, and the check's) that folder: it is a clear problem."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    wt = Worktrees.create(take_snapshot(repo / "src"), root="a1b2c3d4", home=home())
    first = wt.open("first")
    shutil.rmtree(first.path / "src")
    (first.path / "src").symlink_to(elsewhere)
    wt.finish("first", "s1", "completed")
    run_git(repo, "branch", wt.land_branch, wt.branch_of("first"))
    with pytest.raises(ConfigError, match=rf"^src is a link in zero/a1b2c3d4/second \(to {elsewhere}\): a member"):
        wt.open("second", wt.land_branch)


def test_a_repository_a_member_made_without_a_commit_is_left_out_and_the_rest_is_committed(repo: Path) -> None:
    """``git init newcrate`` (``cargo new``) in a member's worktree: git cannot add it, and once that cost the
    member every other edit too (its whole ``git add -A`` failed); now the rest is committed, and the commit
    says what was left out. The error that did cross a Ray node's process boundary is picklable."""
    wt = worktrees(repo)
    tree = wt.open("worker")
    (tree.path / "src" / "app.py").write_text("edited\n")
    run_git(tree.path, "init", "-q", "newcrate")
    (tree.path / "newcrate" / "main.rs").write_text("fn main() {}\n")
    finished = wt.finish("worker", "s1", "completed")
    assert finished.commit is not None and finished.stat.files == 1
    assert run_git(repo, "show", f"{wt.branch_of('worker')}:src/app.py") == "edited"
    message = run_git(repo, "log", "-1", "--format=%B", wt.branch_of("worker"))
    assert "Left out (git cannot add them: a repository of its own with no commit?): newcrate/" in message
    error = GitError(("add", "-A"), repo, 128, "fatal: nope")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.returncode, copy.stderr) == (GitError, str(error), 128, "fatal: nope")
