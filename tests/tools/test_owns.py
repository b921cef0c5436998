"""Ownership globs: which paths a member owns, and whether two members' globs can ever own the same path
(decided from the globs, and checked here against every path of a small alphabet)."""

from __future__ import annotations

import itertools
import random

import pytest

from zero.tools import Owns, overlaps

OWNED = [
    ("src/api/**", "src/api/v1/users.py", True),
    ("src/api/**", "src/api", True),
    ("src/api/**", "src/apiary/x.py", False),
    ("src/api", "src/api/x.py", True),  # a folder owns what is in it
    ("src/api/", "src/api/x.py", True),
    ("*.md", "README.md", True),
    ("*.md", "docs/guide.md", False),  # anchored at the top, as every glob is
    ("**/*.md", "docs/deep/guide.md", True),
    ("**/*.md", "guide.md", True),  # ``**`` may be no folder at all
    ("src/**/test_*.py", "src/test_a.py", True),
    ("src/**/test_*.py", "src/a/b/test_a.py", True),
    ("src/**/test_*.py", "src/a/b/a_test.py", False),
    ("src/*.py", "src/a/b.py", False),  # ``*`` stays within one name
    ("src/?.py", "src/a.py", True),
    ("src/?.py", "src/ab.py", False),
    ("src/[a-c]*.py", "src/b.py", True),
    ("src/[!a-c]*.py", "src/b.py", False),
    ("src/[!a-c]*.py", "src/d.py", True),
    ("src/[]]x", "src/]x", True),
    ("src/\\*.py", "src/*.py", True),
    ("src/\\*.py", "src/a.py", False),
    ("src/api/**", "src/./api/x.py", True),
    ("src/api/**", "src/api/../../etc/passwd", False),  # never a path out of the workspace
    ("src/api/**", "/src/api/x.py", False),
    ("Docs/**", "docs/a.md", False),  # names are compared as they are spelt
]


@pytest.mark.parametrize(("glob", "path", "owned"), OWNED)
def test_a_glob_owns_the_paths_it_matches_and_what_is_inside_them(glob: str, path: str, owned: bool) -> None:
    assert Owns([glob]).owns(path) is owned


OVERLAPS = [
    ("src/api/**", "src/**/test_*.py", True),  # src/api/test_x.py
    ("*.py", "src/**", False),
    ("src/*.py", "src/a*", True),  # src/a.py
    ("src/[a-m]*", "src/[n-z]*", False),
    ("src/[!a]*", "src/a*", False),
    ("**/*.md", "docs/**", True),
    ("tests/api/**", "tests/apix/**", False),
    ("a/**/b", "a/b", True),
    ("src/api", "src/api/**", True),
    ("src/ap?", "src/api/x.py", True),  # src/api owns src/api/x.py
    ("*a*b*", "*b*a*", True),  # aba
    ("x*", "*y", True),  # xy
    ("[ab]", "[!a]", True),  # b
    ("[ab]", "[!ab]", False),
    ("**", "anything/at/all", True),
    ("src/**/x", "lib/**/x", False),
]


@pytest.mark.parametrize(("a", "b", "overlap"), OVERLAPS)
def test_two_globs_overlap_when_a_path_is_owned_by_both(a: str, b: str, overlap: bool) -> None:
    assert overlaps([a], [b]) == ([(a, b)] if overlap else [])
    assert overlaps([b], [a]) == ([(b, a)] if overlap else [])


def test_overlaps_names_each_pair_of_globs_that_meet() -> None:
    api = ["src/api/**", "tests/api/**", "docs/api.md"]
    web = ["src/web/**", "tests/**/test_*.py", "docs/*.md"]
    assert overlaps(api, web) == [("tests/api/**", "tests/**/test_*.py"), ("docs/api.md", "docs/*.md")]


@pytest.mark.parametrize(
    ("glob", "problem"),
    [
        ("", "owns glob '' is empty: remove it, or name files (\"src/api/**\")"),
        ("/etc/**", "owns glob '/etc/**' must be a path inside the workspace (relative, without '..')"),
        ("src/../x", "owns glob 'src/../x' must be a path inside the workspace (relative, without '..')"),
        ("src/[ab", "owns glob 'src/[ab': '[' is not closed by ']' (write \\[ for a plain '[')"),
        ("src/[z-a]", "owns glob 'src/[z-a]': the range z-a is backwards (write a-z)"),
    ],
)
def test_a_glob_that_cannot_be_one_is_refused_saying_why(glob: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        Owns([glob])
    assert str(caught.value) == problem


NAMES = ["a", "b", "c", "aa", "ab", "ba", "bb", "ac", "ca"]
PATHS = ["/".join(parts) for depth in (1, 2, 3) for parts in itertools.product(NAMES, repeat=depth)]
PIECES = ["a", "b", "*", "?", "a*", "*b", "[ab]", "[!a]", "**", "?a", "b?"]


def test_the_overlap_decided_from_the_globs_agrees_with_every_path_tried() -> None:
    """Random globs of up to two names over a small alphabet: two overlap exactly when some path of up to
    three such names is owned by both (witnesses need no longer names or deeper paths)."""
    rng = random.Random(23)
    globs = sorted({"/".join(rng.choice(PIECES) for _ in range(rng.randint(1, 2))) for _ in range(40)})
    owned = {glob: set(filter(Owns([glob]).owns, PATHS)) for glob in globs}
    for a, b in itertools.combinations(globs, 2):
        assert bool(overlaps([a], [b])) == bool(owned[a] & owned[b]), (a, b)
