"""A node's clones of a team's repository and the member worktrees made from them (``zero.tools.clones``), on
real git repositories: the driver's bundle in, the member's work out."""

from __future__ import annotations

from pathlib import Path

from support.git import git, origin_and_clone

from zero.tools.clones import NodeClones, NodeTree, bundle_of, fetch_bundle, tips_of


def test_a_member_branch_goes_to_a_node_and_its_work_comes_back(tmp_path: Path) -> None:
    origin, work = origin_and_clone(tmp_path, {"app.py": "x = 1\n"})
    (work / "local.txt").write_text("not pushed\n")
    git(work, "add", "local.txt")
    git(work, "commit", "-q", "-m", "local")
    branch = "zero/a1b2c3d4/worker"
    git(work, "branch", branch)
    start = git(work, "rev-parse", branch)
    data = bundle_of(work, branch, since=tips_of(str(origin), cwd=work))
    assert data is not None  # the commit the repository lacks goes with it
    tree = NodeTree(repo=str(origin), branch=branch, start=start, prefix="", bundle=data)
    clones = NodeClones(tmp_path / "node")
    folder = clones.open(tree)
    assert (folder / "local.txt").read_text() == "not pushed\n"
    (folder / "app.py").write_text("x = 2\n")
    back = clones.finish(tree, "s1", "completed")
    assert back is not None and not folder.exists()
    fetch_bundle(work, back, branch, force=False)
    assert git(work, "show", f"{branch}:app.py") == "x = 2"
    assert (tmp_path / "node").stat().st_mode & 0o077 == 0  # its user's alone


def test_a_path_repository_is_cloned_as_a_url_is_never_taking_its_alternates(tmp_path: Path) -> None:
    """A repository given as a path whose ``objects/info/alternates`` names another folder: a local clone would
    copy that file and read objects from wherever it leads; the node's clone has none."""
    origin, work = origin_and_clone(tmp_path, {"app.py": "x = 1\n"})
    elsewhere = tmp_path / "elsewhere.git"
    git(tmp_path, "init", "-q", "--bare", str(elsewhere))
    (origin / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (origin / "objects" / "info" / "alternates").write_text(f"{elsewhere / 'objects'}\n")
    branch = "zero/a1b2c3d4/worker"
    git(work, "branch", branch)
    tree = NodeTree(repo=str(origin), branch=branch, start=git(work, "rev-parse", branch), prefix="", bundle=None)
    clones = NodeClones(tmp_path / "node")
    clones.open(tree)
    [clone] = (tmp_path / "node" / "clones").glob("*.git")
    assert not (clone / "objects" / "info" / "alternates").exists()
    assert clones.finish(tree, "s1", "completed") is None  # nothing done: nothing to send back
