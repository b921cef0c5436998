"""No secret reaches any channel: stdout and stderr in every output format, and the session files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.cli import scripted, write_script, zero
from support.secrets import ENV_SECRETS, SECRETS, TOKENS

from zero.sessions import FileSessionStore

SAY = " ".join(TOKENS.values()).replace("\n", " ")


def script(tmp_path: Path) -> Path:
    said = json.dumps(f"Found these: {SAY}. Done.")
    github = TOKENS["github"]
    return write_script(
        tmp_path / "leaky.toml",
        f"""
[[turns]]
match = {{ turn = 1 }}
text = {said}
chunk = 3
tool_calls = [
  {{ name = "bash", arguments = {{ command = "echo \\"$MY_SERVICE_TOKEN and $DB_PASSWORD\\"" }} }},
  {{ name = "bash", arguments = {{ command = "echo {github}" }} }},
]
[[turns]]
match = {{ turn = 2 }}
error = {{ kind = "rate_limit", message = "429 for key Authorization: Bearer {SECRETS["bearer"]}", retry_after = 0.01 }}
[[turns]]
match = {{ turn = 2 }}
text = {said}
chunk = 5
""",
    )


@pytest.mark.parametrize("fmt", ["text", "json", "stream-json"])
def test_the_secret_corpus_leaks_through_no_channel(workspace: Path, tmp_path: Path, fmt: str) -> None:
    done = zero(
        "exec",
        "find the secrets",
        *scripted(script(tmp_path), workspace),
        "--output-format",
        fmt,
        env=ENV_SECRETS,
    )
    assert done.returncode == 0, done.stderr
    home = Path(os.environ["ZERO_HOME"])
    files = "".join(p.read_text() for p in home.rglob("*") if p.is_file())
    channels = {"stdout": done.stdout, "stderr": done.stderr, "session files": files}
    secrets = [*SECRETS.values(), ENV_SECRETS["MY_SERVICE_TOKEN"], ENV_SECRETS["DB_PASSWORD"]]
    leaks = [(where, s) for where, text in channels.items() for s in secrets if s in text]
    assert leaks == []
    assert "[REDACTED]" in done.stdout + done.stderr
    if fmt == "stream-json":  # the deltas, joined, hold no secret either (each line alone was checked above)
        deltas = "".join(json.loads(line).get("delta", "") for line in done.stdout.splitlines())
        assert not [s for s in secrets if s in deltas] and deltas.count("Found these:") == 2
    if fmt == "text":  # the tool-call line and the retry line are redacted too
        assert "→ bash echo [REDACTED]" in done.stderr and "Bearer [REDACTED]" in done.stderr
    # SORT_KEY=sequence masks that word in values, never the "sequence" keys: the session still reads
    store = FileSessionStore(home / "sessions")
    [meta] = store.list()
    assert [e.sequence for e in store.events(meta.session_id)] == list(range(1, meta.event_count + 1))
    assert zero("sessions", "show", meta.session_id, env=ENV_SECRETS).returncode == 0
