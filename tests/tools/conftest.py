from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A folder outside the workspace that the sandbox still shows (not a temp or runtime folder)."""
    folder = Path.home() / f".zero-sandbox-test-{os.getpid()}-{tmp_path.name}"
    if str(folder.resolve()).startswith(("/tmp", "/var/tmp", "/run", "/dev", tempfile.gettempdir())):
        pytest.skip("no folder outside the temp folders to test with")
    folder.mkdir()
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def host_tmp() -> Iterator[Path]:
    """A folder in the host's own /tmp, which no sandboxed command sees (a test's ``tmp_path`` is there only
    when TMPDIR is: a suite run with TMPDIR elsewhere would find it in view)."""
    folder = Path(tempfile.mkdtemp(prefix="zero-host-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder)
