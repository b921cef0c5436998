"""The version is pyproject.toml's, in one place: the package's copy of it (kept for start-up speed), the
installed metadata, ``zero --version`` and the newest entry of CHANGELOG.md all say the same."""

from __future__ import annotations

import importlib.metadata
import re

from support.cli import zero
from support.package import ROOT, pyproject

import zero as package


def test_the_version_is_pyprojects_everywhere() -> None:
    version = pyproject()["project"]["version"]
    assert package.__version__ == version, "zero/__init__.py's __version__ must be pyproject.toml's"
    assert importlib.metadata.version("zero-agent") == version, "the installed metadata is stale: pip install -e ."
    assert zero("--version").stdout == f"zero {version}\n"


def test_the_changelog_starts_with_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.MULTILINE)
    assert newest and newest[1] == pyproject()["project"]["version"]
