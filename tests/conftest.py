from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# A Ray cluster a test starts (tests/orchestrator/test_ray.py) and its driver stay on the loopback address: without
# this, Ray takes 127.0.0.1 for this machine's own address. Read when Ray is imported, so before any test module.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

_PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ZERO_PROVIDER",
    "ZERO_MODEL",
)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test gets its own data and config folders and no provider settings."""
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ZERO_HOME", str(tmp_path / "zero-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    yield


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "README.md").write_text("# Demo\nThe answer is 42.\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 42  # TODO: explain\n")
    return root


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A folder outside the workspace that the sandbox still shows (not a temp or runtime folder)."""
    folder = Path.home() / f".zero-sandbox-test-{os.getpid()}-{tmp_path.name}"
    if str(folder.resolve()).startswith(("/tmp", "/var/tmp", "/run", "/dev", tempfile.gettempdir())):
        pytest.skip("no folder outside the temp folders to test with")
    folder.mkdir()
    yield folder
    shutil.rmtree(folder)
