from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def host_tmp() -> Iterator[Path]:
    """A folder in the host's own /tmp, which no sandboxed command sees (a test's ``tmp_path`` is there only
    when TMPDIR is: a suite run with TMPDIR elsewhere would find it in view)."""
    folder = Path(tempfile.mkdtemp(prefix="zero-host-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder)
