"""MCP both ways, with real MCP servers written with the ``mcp`` SDK: users' servers as tools of Zero's
agents (stdio and streamable HTTP), and ``zero mcp serve`` driven by the SDK's client."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from support.cli import ZERO, scripted, write_script, zero

from zero import __version__
from zero.cli.config import NO_PROVIDER, McpServerEntry
from zero.cli.mcp_config import MAX_CODE_BYTES, MAX_CODE_FILES, RepositoryCode, fingerprint, repository_code
from zero.sessions import FileSessionStore

DEMO = str(Path(__file__).parents[1] / "mcpdemo" / "server.py")
HANG_MARK = f"zero-test-mcp-hangs-at-start-{os.getpid()}"  # this run's: another copy of the suite may run beside it


def store() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


@contextmanager
def http_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, DEMO, "http", str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP MCP server did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


SCRIPT = """
[[turns]]
match = { user = "Use the tools", turn = 1 }
text = "Calling them."
tool_calls = [
  { name = "mcp__local__echo", arguments = { text = "hi" } },
  { name = "mcp__web__add", arguments = { a = 2, b = 3 } },
  { name = "mcp__unsure__echo", arguments = { text = "x" } },
]
[[turns]]
match = { user = "Use the tools", turn = 2 }
tool_calls = [{ name = "Task", arguments = { name = "helper", description = "use mcp", prompt = "Echo child." } }]
[[turns]]
match = { system = "You help", turn = 1 }
tool_calls = [
  { name = "mcp__local__echo", arguments = { text = "child" } },
  { name = "mcp__web__add", arguments = { a = 1, b = 1 } },
]
[[turns]]
match = { system = "You help", turn = 2 }
text = "child done"
[[turns]]
match = { last = "child done", turn = 3 }
text = "all done"
"""


def test_an_agent_and_its_specialist_use_mcp_servers(workspace: Path, tmp_path: Path) -> None:
    with http_server() as url:
        config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            f"""
[mcp.servers.local]
command = {json.dumps(sys.executable)}
args = [{json.dumps(DEMO)}, "stdio"]
trust = true
[mcp.servers.web]
url = "{url}"
trust = true
[mcp.servers.unsure]
url = "{url}"
[mcp.servers.missing]
command = "/no/such/mcp-server"
[mcp.servers.hangs]
command = {json.dumps(sys.executable)}
args = ["-c", "import time; time.sleep(60)  # {HANG_MARK}"]
timeout_seconds = 1
"""
        )
        mine = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "specialists"
        mine.mkdir(parents=True)
        (mine / "helper.toml").write_text(
            'name = "helper"\ndescription = "Helps with MCP."\n'
            'tools = ["read-only", "mcp:local"]\nprompt = "You help."\n'
        )
        script = write_script(tmp_path / "s.toml", SCRIPT)
        started = time.monotonic()
        done = zero("exec", "Use the tools", *scripted(script, workspace))
        took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout == "all done\n"
    # a server that cannot start and one that hangs are reported, skipped, within their timeouts
    assert "MCP server 'missing' (/no/such/mcp-server) skipped: FileNotFoundError" in done.stderr
    assert "MCP server 'hangs'" in done.stderr and "did not start within 1 s" in done.stderr
    assert took < 15
    assert HANG_MARK not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    root = next(m for m in store().list() if not m.parent_session_id)
    results = [e.event.output for e in store().events(root.session_id) if e.event.kind == "tool_result"]
    assert results[0] == "echo: hi" and results[1] == "5"  # stdio and streamable HTTP, into the session
    assert "needs approval in auto mode" in results[2] and "zero mcp trust unsure" in results[2]  # untrusted
    child = next(m for m in store().list() if m.parent_session_id)
    child_results = [e.event.output for e in store().events(child.session_id) if e.event.kind == "tool_result"]
    assert child_results[0] == "echo: child"  # granted by its manifest
    assert child_results[1].startswith("Error: there is no tool named 'mcp__web__add'")  # not granted


def test_mcp_add_list_trust_and_remove_keep_the_rest_of_the_file(workspace: Path) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('# mine\nmodel = "gpt-4.1"  # keep\n')
    added = zero("mcp", "add", "local", "--cwd", str(workspace), "--", sys.executable, DEMO, "stdio")
    assert added.returncode == 0, added.stderr
    listed = json.loads(zero("mcp", "list", "--json", "--cwd", str(workspace)).stdout)
    assert listed[0]["name"] == "local" and listed[0]["started"] and listed[0]["trusted"] is False
    assert listed[0]["tools"][:2] == ["mcp__local__echo", "mcp__local__add"]
    assert zero("mcp", "trust", "local", "--yes", "--cwd", str(workspace)).returncode == 0
    assert "trust = true" in config.read_text()
    assert zero("mcp", "remove", "local", "--cwd", str(workspace)).returncode == 0
    assert config.read_text() == '# mine\nmodel = "gpt-4.1"  # keep\n'
    # a project's server starts only once approved, and cannot trust itself
    project = workspace / ".zero" / "config.toml"
    project.parent.mkdir(parents=True)
    project.write_text(
        f"[mcp.servers.repo]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(DEMO)}, "stdio"]\ntrust = true\n'
    )
    done = zero("mcp", "list", "--json", "--cwd", str(workspace))
    listed = json.loads(done.stdout)
    assert listed[0]["started"] is False and "zero mcp trust repo" in listed[0]["problem"]
    assert "mcp.servers.repo.trust ignored" in done.stderr and listed[0]["trusted"] is False
    assert zero("mcp", "trust", "repo", "--yes", "--cwd", str(workspace)).returncode == 0
    approved = json.loads((Path(os.environ["ZERO_HOME"]) / "mcp-approved.json").read_text())
    assert list(approved[str(workspace)]) == ["repo"]  # approved: it starts in runs here from now on


def test_mcp_trust_changes_one_line_of_the_server_table_and_nothing_else(workspace: Path) -> None:
    """Trust rewrote the whole table from the parsed entry: the comments in it went, its [..env] table became an
    inline one, ``30`` became ``30.0``; a file with Windows line ends came back with Unix ones."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    table = (
        "[mcp.servers.fs]\n# the filesystem server\ncommand = 'npx'\n"
        'args = ["-y", "@modelcontextprotocol/server-filesystem"]  # pinned\ntimeout_seconds = 30\n'
    )
    rest = '[mcp.servers.fs.env]\nTOKEN = "$FS_TOKEN"  # from the shell\n\n# the next one\n'
    rest += '[mcp.servers.b]\ncommand = "b"\n'
    config.write_text(table + rest)
    assert zero("mcp", "trust", "fs", "--yes").returncode == 0
    assert config.read_text() == table + "trust = true\n" + rest
    config.write_text(table + "trust = false  # for now\n" + rest)
    assert zero("mcp", "trust", "fs", "--yes").returncode == 0
    assert config.read_text() == table + "trust = true  # for now\n" + rest
    assert zero("mcp", "trust", "fs", "--yes").returncode == 0  # trusted already: the file as it was
    assert config.read_text() == table + "trust = true  # for now\n" + rest
    windows = '[mcp.servers.b]\r\ncommand = "b"\r\n\r\n[mcp.servers.c]\r\ncommand = "c"'
    config.write_bytes(windows.encode())
    assert zero("mcp", "trust", "b", "--yes").returncode == 0
    assert config.read_bytes() == windows.replace('"b"\r\n', '"b"\r\ntrust = true\r\n').encode()
    config.write_bytes(b'[mcp.servers.b]\ncommand = "b"')  # no newline at the end
    assert zero("mcp", "trust", "b", "--yes").returncode == 0
    assert config.read_text() == '[mcp.servers.b]\ncommand = "b"\ntrust = true\n'


def test_mcp_add_and_remove_leave_every_other_line_as_it_was(workspace: Path) -> None:
    """Remove took the comment above the next table with it, and add and remove wrote a Windows file back with
    Unix line ends and dropped its leading blank lines; remove of ``a.env`` deleted server a's [env] table."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    rest = '# Local llama: free (see OPS-12)\n[prices."llama3.1"]\ninput = 0.0\noutput = 0.0\n'
    config.write_text('[mcp.servers.docs]\ncommand = "docs-server"\n\n' + rest)
    assert zero("mcp", "remove", "docs").returncode == 0
    assert config.read_text() == rest
    windows = (
        '\r\nmodel = "gpt-4.1"\r\n\r\n[mcp.servers.a]\r\ncommand = "a"\r\n\r\n[mcp.servers.b]\r\ncommand = "b"\r\n'
    )
    config.write_bytes(windows.encode())
    assert zero("mcp", "remove", "a").returncode == 0
    assert config.read_bytes() == b'\r\nmodel = "gpt-4.1"\r\n\r\n[mcp.servers.b]\r\ncommand = "b"\r\n'
    assert zero("mcp", "add", "c", "--", "c-server").returncode == 0
    added = b'\r\n[mcp.servers.c]\r\ncommand = "c-server"\r\n'
    assert config.read_bytes() == b'\r\nmodel = "gpt-4.1"\r\n\r\n[mcp.servers.b]\r\ncommand = "b"\r\n' + added
    assert zero("mcp", "remove", "b").returncode == 0 and zero("mcp", "remove", "c").returncode == 0
    assert config.read_bytes() == b'\r\nmodel = "gpt-4.1"\r\n'
    nested = '[mcp.servers.a]\ncommand = "a"\n\n[mcp.servers.a.env]\nTOKEN = "$A_TOKEN"\n'
    config.write_text(nested)
    refused = zero("mcp", "remove", "a.env")
    assert refused.returncode == 2 and "invalid server name 'a.env'" in refused.stderr
    assert config.read_text() == nested


def test_a_server_that_exits_at_start_is_reported_by_its_exit_code_then_its_stderr(workspace: Path) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    exits = "import sys; sys.stderr.write('GITHUB_TOKEN is not set\\n'); sys.exit(3)"
    config.write_text(
        f"[mcp.servers.bad]\ncommand = {json.dumps(sys.executable)}\nargs = ['-c', {json.dumps(exits)}]\n"
    )
    listed = zero("mcp", "list", "--cwd", str(workspace))
    assert listed.returncode == 0, listed.stderr
    said = "skipped: it exited at start with code 3; its stderr ended with: GITHUB_TOKEN is not set\n"
    assert listed.stdout.endswith(said)
    [row] = json.loads(zero("mcp", "list", "--json", "--cwd", str(workspace)).stdout)
    assert row["problem"] == f"MCP server 'bad' ({sys.executable} -c {exits}) {said.strip()}"


def test_a_server_of_yours_never_runs_code_a_command_put_in_the_workspace(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user runs zero in the project; a sandboxed command had put a module there named as the one their
    server runs (``python -m``; ``npx`` finds ``node_modules/.bin`` the same way): it must not run, unconfined."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f"[mcp.servers.tools]\ncommand = {json.dumps(sys.executable)}\nargs = ['-m', 'team_tools']\n")
    proof = tmp_path / "ran-unconfined"
    (workspace / "team_tools.py").write_text(f"open({str(proof)!r}, 'w').write('planted')\n")
    monkeypatch.chdir(workspace)
    listed = zero("mcp", "list", "--cwd", str(workspace))
    assert not proof.exists(), listed.stderr
    assert "No module named team_tools" in listed.stdout  # it ran in your config folder, where there is none


def test_mcp_edits_a_server_however_its_table_is_written_or_refuses_and_leaves_the_file(workspace: Path) -> None:
    """Trust and remove doubled or orphaned a server's [..env] sub-table, and trust and add doubled a server
    written inline or under a quoted header, each leaving a file every later command refused; add replaced an
    existing server without a word."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    rest = '\n[mcp.servers.other]\ncommand = "cat"\n'
    split = '# mine\n[mcp.servers.gh]\ncommand = "echo"\n\n[mcp.servers.gh.env]\nTOKEN = "$GITHUB_TOKEN"\n' + rest
    config.write_text(split)
    assert zero("mcp", "trust", "gh", "--yes").returncode == 0
    assert config.read_text() == split.replace('command = "echo"\n', 'command = "echo"\ntrust = true\n')
    config.write_text(split)
    assert zero("mcp", "remove", "gh").returncode == 0
    assert config.read_text() == "# mine\n" + rest
    config.write_text('[ mcp.servers."gh" ]  # quoted\ncommand = "echo"\n')
    assert zero("mcp", "trust", "gh", "--yes").returncode == 0
    assert config.read_text() == '[ mcp.servers."gh" ]  # quoted\ncommand = "echo"\ntrust = true\n'
    inline = '[mcp.servers]\ngh = { command = "echo" }\n'
    for argv in (["trust", "gh", "--yes"], ["remove", "gh"]):
        config.write_text(inline)
        refused = zero("mcp", *argv)
        assert refused.returncode == 2 and config.read_text() == inline, (argv, refused)
        assert refused.stderr.endswith(
            f"{config}: [mcp.servers.gh] is written in a way zero mcp does not rewrite (inline in its parent table, "
            "or keys of it elsewhere in the file): edit the file by hand\n"
        )
    refused = zero("mcp", "add", "gh", "--", "other-server")
    assert refused.returncode == 2 and config.read_text() == inline
    assert refused.stderr == (
        f"zero: error: {config} has [mcp.servers.gh] already: remove it first (zero mcp remove gh), or another name\n"
    )
    assert zero("mcp", "list").returncode == 0  # every file left behind still reads
    # your config through a link to your dotfiles: the file itself is edited, the link kept
    real = workspace.parent / "dotfiles.toml"
    config.rename(real)
    config.symlink_to(real)
    assert zero("mcp", "remove", "gh", "--cwd", str(workspace)).returncode == 2  # (inline: refused, as above)
    assert zero("mcp", "add", "mine", "--", "echo").returncode == 0
    assert config.is_symlink() and "[mcp.servers.mine]" in real.read_text()
    # a project's, never out of its workspace: a cloned repository's link could lead to any file of yours
    project = workspace / ".zero"
    project.mkdir()
    (project / "config.toml").symlink_to(real)
    before = real.read_text()
    for argv in (["add", "--project", "x", "--cwd", str(workspace), "--", "echo"], ["remove", "--project", "mine"]):
        refused = zero("mcp", *argv, cwd=workspace)
        assert refused.returncode == 2 and str(project / "config.toml") in refused.stderr, refused
        assert real.read_text() == before


def test_mcp_add_writes_any_text_toml_holds_and_nothing_when_a_config_is_broken(workspace: Path) -> None:
    # (an emoji was written as JSON's surrogate pair, which TOML refuses, and blamed on the file; with the
    # project's config broken, yours was written and then the command failed)
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    text = 'a\x7fb\U0001f600"\\ tab\tnl\n'
    assert zero("mcp", "add", "odd", "-e", f"K={text}", "--", "echo", text).returncode == 0
    entry = tomllib.loads(config.read_text())["mcp"]["servers"]["odd"]
    assert entry == {"command": "echo", "args": [text], "env": {"K": text}}
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "config.toml").write_text("broken [\n")
    saved = config.read_text()
    refused = zero("mcp", "add", "more", "--cwd", str(workspace), "--", "echo")
    assert refused.returncode == 2 and config.read_text() == saved, refused


def test_the_readmes_mcp_add_stores_the_env_and_an_env_after_the_double_dash_is_refused(workspace: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    [line] = [line for line in readme.splitlines() if line.startswith("zero mcp add github ")]
    here = ["--cwd", str(workspace)]
    words = shlex.split(line)[1:]
    added = zero(*words[:3], *here, *words[3:])
    assert added.returncode == 0, added.stderr
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    github = tomllib.loads(config.read_text())["mcp"]["servers"]["github"]
    assert github == {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-github"],
        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "$GITHUB_TOKEN"},
    }
    before = config.read_text()
    for flags in (["--env", "T=$GITHUB_TOKEN"], ["-e", "T=$GITHUB_TOKEN"], ["--env=T=$GITHUB_TOKEN"]):
        refused = zero("mcp", "add", "gh", *here, "--", "npx", "-y", "server-github", *flags)
        assert refused.returncode == 2
        assert refused.stderr == (
            f"zero: error: {flags[0].partition('=')[0]} T=$GITHUB_TOKEN comes after --, where it would be an argument "
            "of npx, not its environment: give it before --: zero mcp add gh --env 'T=$GITHUB_TOKEN' -- npx -y "
            "server-github\n"
        )
    assert config.read_text() == before  # nothing written
    docker = ["docker", "run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN=x", "ghcr.io/github/github-mcp-server"]
    assert zero("mcp", "add", "gh", "-e", "A=1", *here, "--", *docker).returncode == 0  # the container's -e
    stored = tomllib.loads(config.read_text())["mcp"]["servers"]["gh"]
    assert stored["args"] == docker[1:] and stored["env"] == {"A": "1"}


REPO_SERVER = (
    Path(DEMO)
    .read_text()
    .replace(
        'if __name__ == "__main__":',
        '@server.tool()\ndef getenv(name: str) -> str:\n    """A variable of its environment."""\n'
        '    import os\n\n    return os.environ.get(name, "(unset)")\n\n\nif __name__ == "__main__":',
    )
)

USE_REPO = """
[[turns]]
match = { turn = 1 }
tool_calls = [
  { name = "mcp__repo__echo", arguments = { text = "hi" } },
  { name = "mcp__repo__getenv", arguments = { name = "T" } },
  { name = "mcp__repo__getenv", arguments = { name = "PYTHONDONTWRITEBYTECODE" } },
]
[[turns]]
match = { turn = 2 }
text = "used"
"""
# Put beside a server's script, a module of that name shadows Python's own: the server imports it, outside
# the sandbox.
SHADOW = "import pathlib\npathlib.Path(__file__).parents[2].joinpath('PWNED').write_text('ran')\n"


def test_a_projects_server_shows_what_it_runs_and_asks_again_when_its_code_changes(
    workspace: Path, tmp_path: Path
) -> None:
    code = workspace / "tools" / "server.py"
    code.parent.mkdir()
    code.write_text(REPO_SERVER)
    project = workspace / ".zero" / "config.toml"
    project.parent.mkdir()
    entry = (
        f'[mcp.servers.repo]\ncommand = {json.dumps(sys.executable)}\nargs = ["tools/server.py", "stdio"]\n'
        'env = { T = "$OPENAI_API_KEY", MODE = "fast" }\n'
    )
    project.write_text(entry)
    key = {"OPENAI_API_KEY": "sk-users-own-key-0000000000000000"}
    here = ["--cwd", str(workspace)]
    asked = zero("mcp", "trust", "repo", *here, env=key)  # no terminal and no --yes: it shows, and exits 2
    assert asked.returncode == 2
    assert asked.stderr == "zero: error: trusting repo needs --yes when there is no terminal to ask\n"
    assert asked.stdout == (
        f"MCP server repo, the project's ({project}):\n"
        f"  command: {sys.executable}\n"
        "  args: tools/server.py stdio\n"
        f"  cwd: {workspace}\n"
        "  env: T = $OPENAI_API_KEY  (from your environment: OPENAI_API_KEY (named like a secret: its value goes "
        "to this server))\n"
        "  env: MODE = fast\n"
        f"  its code in the repository (any change there asks again): tools/ (1 file, {len(REPO_SERVER):,} bytes)\n"
    )
    run = ["exec", "go", *scripted(write_script(tmp_path / "s.toml", USE_REPO), workspace), "--output-format", "json"]
    done = zero(*run, env=key)
    assert f"MCP server 'repo' of {project} not started: a project's servers start once you approve them" in (
        done.stderr
    )
    assert zero("mcp", "trust", "repo", "--yes", *here, env=key).returncode == 0

    done = zero(*run, env=key)  # approved: its tools run in auto, headless, without asking
    assert done.returncode == 0, done.stderr
    results = [e.event for e in store().events(json.loads(done.stdout)["sessionId"]) if e.event.kind == "tool_result"]
    assert results[0].output == "echo: hi" and results[1].output == "[REDACTED]"  # it got the key you were shown
    assert results[2].output == "1"  # it writes no bytecode there: its own start changes nothing it runs
    assert "trust = true" not in done.stderr

    changes: list[Callable[[], object]] = [
        lambda: (code.parent / "json.py").write_text(SHADOW),  # a file beside it (Python imports it first)
        lambda: (code.parent / "json.py").unlink(),  # a file removed
        lambda: (code.parent / "lib" / "json").mkdir(parents=True),  # a folder beneath
        lambda: (code.parent / "util.py").symlink_to("../README.md"),  # a link
        lambda: (code.parent / "__pycache__").mkdir(),  # Python runs a .pyc there if its header matches
        lambda: (code.parent / "__pycache__" / "util.cpython-312.pyc").write_bytes(b"\x00" * 16),
    ]
    for change in changes:
        change()
        done = zero(*run, env=key)
        assert (
            f"MCP server 'repo' of {project} not started: the code it runs from the repository (tools/ ("
        ) in done.stderr and "changed since you approved it; zero mcp trust repo shows what it runs and asks" in (
            done.stderr
        )
        assert not (workspace.parent / "PWNED").exists()
        assert zero("mcp", "trust", "repo", "--yes", *here, env=key).returncode == 0
    code.write_text(REPO_SERVER + "\n# a second change\n")
    done = zero(*run, env=key)
    assert (
        f"MCP server 'repo' of {project} not started: the code it runs from the repository (tools/ (6 files, "
    ) in done.stderr
    results = [e.event for e in store().events(json.loads(done.stdout)["sessionId"]) if e.event.kind == "tool_result"]
    assert results[0].output.startswith("Error: there is no tool named 'mcp__repo__echo'")
    assert zero("mcp", "trust", "repo", "--yes", *here, env=key).returncode == 0
    project.write_text(entry.replace('MODE = "fast"', 'MODE = "$ANTHROPIC_API_KEY"'))
    done = zero(*run, env=key)
    assert "not started: its entry changed since you approved it; zero mcp trust repo" in done.stderr


HI = '[[turns]]\nmatch = { turn = 1 }\ntext = "hi"\n'


def code_of(workspace: Path, *args: str, command: str = "python3", cwd: str | None = None) -> RepositoryCode:
    return repository_code(McpServerEntry(command=command, args=list(args), cwd=cwd), workspace)


def test_the_code_a_server_really_runs_is_covered_however_its_entry_names_it(workspace: Path) -> None:
    """Found by the re-attack: a module glued to -m, a script that is a link (Python imports from where the
    link leads), and the node_modules a require climbs to, each ran code the approval did not cover."""
    for folder in ("srv", "lib", "app/src", "node_modules/helper", "app/node_modules/x"):
        (workspace / folder).mkdir(parents=True)
    (workspace / "srv.py").write_text("import json\n")
    (workspace / "lib" / "real.py").write_text("import json\n")
    (workspace / "srv" / "server.py").symlink_to("../lib/real.py")
    (workspace / "app" / "src" / "index.js").write_text("require('helper')\n")
    (workspace / "node_modules" / "helper" / "index.js").write_text("module.exports = 1\n")
    (workspace / "app" / "node_modules" / "x" / "index.js").write_text("module.exports = 2\n")
    assert code_of(workspace, "-msrv").folders == (".",)  # -m glued to its module: the folder it runs in
    assert code_of(workspace, "-Im", "srv").folders == (".",)
    assert code_of(workspace, "-W", "ignore", "srv/server.py").folders == ("lib", "srv")  # the link's and its target's
    assert code_of(workspace, "app/src/index.js", command="node").folders == (
        "app/node_modules", "app/src", "node_modules",
    )  # fmt: skip


def test_the_code_a_projects_server_runs_is_each_folder_it_runs_from_to_the_bottom(
    workspace: Path, tmp_path: Path
) -> None:
    srv = workspace / "srv"
    (srv / "pkg").mkdir(parents=True)
    (srv / "server.py").write_text("import pkg\n")
    (srv / "pkg" / "__init__.py").write_text("")
    (workspace / "lib").mkdir()
    (workspace / "lib" / "util.py").write_text("x = 1\n")
    (srv / "util.py").symlink_to("../lib/util.py")  # a link inside: what it leads to is covered
    (tmp_path / "outside.py").write_text("secret")
    (srv / "out.py").symlink_to(tmp_path / "outside.py")  # a link out: where it leads, never what is there
    (srv / "loop").symlink_to(".")  # a link back: walked once
    os.mkfifo(srv / "pipe")  # never opened (it would block)
    (srv / ".git").mkdir()  # git's store: not walked
    (srv / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    code = code_of(workspace, "srv/server.py", "--port", "8000")
    assert (code.folders, code.too_much) == (("srv",), "")
    assert list(code.files) == [
        "srv/loop", "srv/out.py", "srv/pipe", "srv/pkg", "srv/pkg/__init__.py", "srv/server.py", "srv/util.py"
    ]  # fmt: skip
    assert code.files["srv/out.py"] == f"link to {tmp_path / 'outside.py'}" and code.files["srv/loop"] == "link to ."
    assert code.described() == "srv/ (7 files, 17 bytes)"
    # which folders: of the files named (one walk for nested ones), the folders named, the cwd of a module
    assert code_of(workspace, "srv/server.py", "srv/pkg/__init__.py").folders == ("srv",)
    assert code_of(workspace, "srv/pkg", "lib/util.py").folders == ("lib", "srv/pkg")
    assert code_of(workspace, command="srv/server.py").folders == ("srv",)
    assert code_of(workspace, "-m", "pkg.server", cwd="srv").folders == ("srv",)
    assert code_of(workspace, "-m", "srv.server").described().startswith("the whole workspace (")
    assert code_of(workspace, "../elsewhere.py", str(tmp_path / "outside.py"), "-y", "pkg").folders == ()
    # what changes what an approval covers, and what does not
    entry = McpServerEntry(command="python3", args=["srv/server.py"])
    approved = fingerprint(entry, code)
    unrelated: list[Callable[[], object]] = [
        lambda: (tmp_path / "outside.py").write_text("changed"),
        lambda: (srv / ".git" / "HEAD").write_text("ref: refs/heads/evil\n"),
        lambda: (workspace / "README.md").write_text("changed"),
        lambda: (workspace / "srv.py").write_text("beside the folder"),
    ]
    for change in unrelated:
        change()
        assert fingerprint(entry, code_of(workspace, "srv/server.py")) == approved
    (workspace / "lib" / "util.py").write_text("x = 2\n")  # through the link
    assert fingerprint(entry, code_of(workspace, "srv/server.py")) != approved
    (srv / "server.py").chmod(0o755)
    assert code_of(workspace, "srv/server.py").files["srv/server.py"].endswith(" executable")


def refused_trust(name: str, workspace: Path) -> str:
    """What ``zero mcp trust NAME --yes`` says as it refuses (exit 2)."""
    done = zero("mcp", "trust", name, "--yes", "--cwd", str(workspace))
    assert done.returncode == 2
    return done.stderr


def test_a_projects_server_with_more_code_than_an_approval_covers_is_not_approved(workspace: Path) -> None:
    project = workspace / ".zero" / "config.toml"
    project.parent.mkdir()
    project.write_text('[mcp.servers.big]\ncommand = "python3"\nargs = ["big/server.py"]\n')
    (workspace / "big").mkdir()
    (workspace / "big" / "server.py").write_text("")
    here = ["--cwd", str(workspace)]
    assert zero("mcp", "trust", "big", "--yes", *here).returncode == 0
    for i in range(MAX_CODE_FILES):
        (workspace / "big" / f"m{i}.py").touch()
    assert code_of(workspace, "big/server.py").described() == "big/ (more than 2,000 files)"
    assert refused_trust("big", workspace) == (
        "zero: error: big cannot be approved: the code it runs from the repository is big/ (more than 2,000 files), "
        "more than an approval covers (2,000 files, 20,000,000 bytes); move the server into a folder of its own, or "
        "add it to your own config (zero mcp add big -- COMMAND...), which trusts it as yours\n"
    )
    done = zero("exec", "hi", *scripted(write_script(workspace.parent / "s.toml", HI), workspace))
    assert (
        f"MCP server 'big' of {project} not started: the code it runs from the repository (big/ (more than 2,000 "
        "files)) is more than an approval covers; zero mcp trust big shows what it runs and asks"
    ) in done.stderr
    (workspace / "fat").mkdir()
    with (workspace / "fat" / "data.bin").open("wb") as f:
        f.truncate(MAX_CODE_BYTES + 1)  # sparse: its size is what counts
    assert code_of(workspace, "fat/data.bin").too_much == "more than 20,000,000 bytes"


def planted(mark: Path) -> str:
    """Python that leaves ``mark`` once it runs: the proof that a file planted in the repository ran."""
    return f"import os; open({str(mark)!r}, 'w').write('ran')\n"


def test_a_projects_server_asks_again_when_a_folder_its_env_names_changes(workspace: Path, tmp_path: Path) -> None:
    project = workspace / ".zero" / "config.toml"
    project.parent.mkdir()
    project.write_text(
        '[mcp.servers.tools]\ncommand = "python3"\nargs = ["srv/server.py"]\nenv = { PYTHONPATH = "vendor:$LIB", '
        'NODE_OPTIONS = "--require ./hooks/pre.js --import=./esm/x.mjs", MODE = "fast", EMPTY = "" }\n'
    )
    for folder in ("srv", "vendor", "lib", "hooks", "esm"):
        (workspace / folder).mkdir()
    (workspace / "srv" / "server.py").write_text("import json\n")  # were it started, it would exit at once
    (workspace / "hooks" / "pre.js").write_text("")
    (workspace / "esm" / "x.mjs").write_text("")
    here, lib = ["--cwd", str(workspace)], {"LIB": "lib"}
    shown = zero("mcp", "trust", "tools", *here, env=lib)
    assert shown.stdout.endswith(
        "  its code in the repository (any change there asks again): esm/, hooks/, lib/, srv/, vendor/ (3 files, "
        "12 bytes)\n"
    )
    done = zero("mcp", "trust", "tools", "--yes", *here, env=lib)
    assert done.stdout.endswith(
        f"approved the project's MCP server tools: it starts with every run in {workspace} and its tools run "
        "without asking, until its entry or the code it runs changes\n"
    )
    again = zero("mcp", "trust", "tools", "--yes", *here, env=lib)
    assert again.stdout.endswith(f"approved already, as it is now: it starts with every run in {workspace}\n")
    mark = tmp_path / "PWNED"
    changes: list[Callable[[], object]] = [
        lambda: (workspace / "vendor" / "json.py").write_text(planted(mark)),  # first on its PYTHONPATH
        lambda: (workspace / "lib" / "json.py").write_text(planted(mark)),  # through $LIB
        lambda: (workspace / "hooks" / "pre.js").write_text("require('child_process')"),  # NODE_OPTIONS'
    ]
    run = ["exec", "hi", *scripted(write_script(tmp_path / "s.toml", HI), workspace)]
    for change in changes:
        change()
        done = zero(*run, env=lib)
        assert (
            f"MCP server 'tools' of {project} not started: the code it runs from the repository (esm/, hooks/, lib/, "
            "srv/, vendor/ ("
        ) in done.stderr and "changed since you approved it; zero mcp trust tools shows what it runs" in done.stderr
        assert not mark.exists()
        assert zero("mcp", "trust", "tools", "--yes", *here, env=lib).returncode == 0


def test_a_projects_server_run_by_the_repositorys_virtual_environment_covers_all_of_it(
    workspace: Path, tmp_path: Path
) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(workspace / ".venv")], check=True)
    project = workspace / ".zero" / "config.toml"
    project.parent.mkdir()
    project.write_text('[mcp.servers.tools]\ncommand = ".venv/bin/python"\nargs = ["srv/server.py"]\n')
    (workspace / "srv").mkdir()
    (workspace / "srv" / "server.py").write_text("")  # were it started, it would exit at once
    here = ["--cwd", str(workspace)]
    shown = zero("mcp", "trust", "tools", "--yes", *here)
    covered = "its code in the repository (any change there asks again): the virtual environment .venv/, srv/ ("
    assert shown.returncode == 0 and covered in shown.stdout
    site = next((workspace / ".venv" / "lib").glob("python3*/site-packages"))
    mark = tmp_path / "PWNED"
    (site / "zz.pth").write_text(planted(mark))  # Python runs it at every start
    done = zero("exec", "hi", *scripted(write_script(tmp_path / "s.toml", HI), workspace))
    assert (
        f"MCP server 'tools' of {project} not started: the code it runs from the repository (the virtual environment "
        ".venv/, srv/ ("
    ) in done.stderr and "changed since you approved it" in done.stderr
    assert not mark.exists()
    with (site / "big.bin").open("wb") as f:
        f.truncate(MAX_CODE_BYTES + 1)  # sparse: its size is what counts
    assert refused_trust("tools", workspace) == (
        "zero: error: tools cannot be approved: the code it runs from the repository is the virtual environment "
        ".venv/, srv/ (more than 20,000,000 bytes), more than an approval covers (2,000 files, 20,000,000 bytes); "
        "run it from a virtual environment outside the repository (its python as the command), or add it to your "
        "own config (zero mcp add tools -- COMMAND...), which trusts it as yours\n"
    )


def test_a_projects_server_runs_from_its_links_words_interpreter_and_projects_environment(workspace: Path) -> None:
    (workspace / "srv").mkdir()
    (workspace / "srv" / "server.py").write_text("")
    (workspace / "bin").mkdir()
    (workspace / "bin" / "python").symlink_to(sys.executable)  # leads out, yet a sandboxed command can replace it
    assert code_of(workspace, "srv/server.py", command="bin/python").folders == ("bin", "srv")
    env = workspace / "env"
    (env / "bin").mkdir(parents=True)
    (env / "lib").mkdir()
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "bin" / "python").symlink_to(sys.executable)
    code = code_of(workspace, "srv/server.py", command="env/bin/python")  # the whole environment, said so
    assert (code.folders, code.environments) == (("env", "srv"), ("env",))
    assert code.described().startswith("the virtual environment env/, srv/ (")
    (workspace / "srv" / "run").write_text(f"#!{env}/bin/python -I\n")  # the interpreter its #! line names
    assert code_of(workspace, command="srv/run").folders == ("env", "srv")
    assert code_of(workspace, "-c", "exec env/bin/python srv/server.py", command="sh").folders == ("env", "srv")
    assert code_of(workspace, "-c", "import server", cwd="srv").folders == ("srv",)  # Python's -c, as -m
    entry = McpServerEntry(command="python3", args=["srv/server.py"], env={"PYTHONPATH": "env/lib"})
    assert repository_code(entry, workspace).folders == ("env", "srv")
    entry = McpServerEntry(command="python3", args=["-I"], env={"PYTHONPATH": "../lib:"}, cwd="srv")
    assert repository_code(entry, workspace).folders == ("srv",)  # in a path list, an empty part is where it runs
    assert code_of(workspace, "--port=:8000", "-y", "fast", "").folders == ()  # no part names a folder
    (workspace / ".venv").mkdir()
    (workspace / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for runner in ("uv", "/usr/local/bin/poetry", "pipenv", "pdm"):  # the project's .venv, where it starts or above
        assert code_of(workspace, "run", "server.py", command=runner, cwd="srv").folders == (".venv", "srv")
    assert code_of(workspace, "server.py", cwd="srv").folders == ("srv",)  # python3 does not run it


SERVE_SCRIPT = """
[[turns]]
match = { user = "Look around", turn = 1 }
text = "Looking."
tool_calls = [{ name = "list_directory" }]
[[turns]]
match = { user = "Look around", turn = 2 }
text = "A README and a src folder."
[[turns]]
match = { user = "Take forever" }
delay = 30
text = "never"
[[turns]]
match = { system = 'You are "solo"' }
text = "solo done"
times = 0
"""


def test_zero_as_an_mcp_server(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", SERVE_SCRIPT)
    team = write_script(
        workspace / "team.toml",
        'name = "t"\n[defaults]\nmodel = "gpt-4.1-nano"\n[[members]]\nname = "solo"\nspecialist = "explorer"\n'
        'prompt = "Go."\n',
    )
    params = StdioServerParameters(
        command=ZERO,
        args=["mcp", "serve", *scripted(script, workspace)],
        env={k: os.environ[k] for k in ("ZERO_HOME", "XDG_CONFIG_HOME", "PATH")},
    )
    notes: list[Any] = []

    async def scenario() -> dict[str, Any]:
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]

            async def note(progress: float, total: float | None, message: str | None) -> None:
                notes.append(message)

            answer = await client.call_tool("explorer", {"prompt": "Look around"}, progress_callback=note)
            ran = await client.call_tool("run_team", {"team": "team.toml"})
            outside = await client.call_tool("run_team", {"team": "../s.toml"})
            broken = await client.call_tool("run_team", {"team": "README.md"})
            bad_limit = await client.call_tool("run_team", {"team": "team.toml", "budget_tokens": -5})
            nul = await client.call_tool("run_team", {"team": "team\x00.toml"})
            lifted = await client.call_tool("run_team", {"team": "team.toml", "budget_cost": "none"})
            with anyio.move_on_after(1):  # the client gives up on a long run: the call is cancelled
                await client.call_tool("explorer", {"prompt": "Take forever"})
            await anyio.sleep(0.3)
            foreign = await client.call_tool("session_show", {"session_id": "zero_20200101000000_000000000000"})
            return {
                "names": names,
                "answer": answer,
                "ran": ran,
                "foreign": foreign,
                "outside": outside,
                "broken": broken,
                "bad_limit": bad_limit,
                "nul": nul,
                "lifted": lifted,
            }

    got = anyio.run(scenario)
    assert {"explorer", "worker", "run_team", "session_tree", "session_show"} <= set(got["names"])
    text = got["answer"].content[0].text
    assert text.startswith("session_id: explorer_") and "status: completed" in text and "A README" in text
    assert notes == [f"session {text.splitlines()[0].removeprefix('session_id: ')}", "list_directory"]
    team = json.loads(got["ran"].content[0].text)
    assert team["status"] == "completed" and team["members"][0]["output"] == "solo done"
    assert store().metadata(team["members"][0]["sessionId"]).model_id == "gpt-4.1-nano"  # the team file's [defaults]
    assert got["outside"].is_error and "must be in the workspace" in got["outside"].content[0].text
    assert got["broken"].is_error and "README.md" in got["broken"].content[0].text  # what is wrong, and where
    assert got["bad_limit"].is_error
    assert (
        got["bad_limit"]
        .content[0]
        .text.endswith('budget limit tokens = -5: input should be greater than or equal to 1 (or "none": no limit)')
    )
    assert got["nul"].is_error and "holds a NUL byte" in got["nul"].content[0].text
    assert json.loads(got["lifted"].content[0].text)["status"] == "completed"
    assert got["foreign"].content[0].text.endswith(": no session zero_20200101000000_000000000000 in this workspace")
    assert got["foreign"].is_error  # never says whether another workspace's session exists
    statuses = {m.title: m.status for m in store().list() if m.title in ("Look around", "Take forever")}
    assert statuses == {"Look around": "completed", "Take forever": "cancelled"}


def test_an_unconfigured_zero_still_serves_and_each_run_answers_with_the_configuration_error(workspace: Path) -> None:
    """A host starts servers with a minimal environment (no API key) and often hides stderr: the server starts,
    says who it is, lists its tools under proper schemas, and each run answers with what ``zero exec`` says."""
    params = StdioServerParameters(
        command=ZERO,
        args=["mcp", "serve", "--cwd", str(workspace)],
        env={k: os.environ[k] for k in ("ZERO_HOME", "XDG_CONFIG_HOME", "PATH")},
    )

    async def scenario() -> dict[str, Any]:
        async with Client(params) as client:
            got: dict[str, Any] = {"info": client.server_info, "capabilities": client.server_capabilities}
            got["tools"] = (await client.list_tools()).tools
            got["explorer"] = await client.call_tool("explorer", {"prompt": "Look around"})
            got["team"] = await client.call_tool("run_team", {"team": "team.toml"})
            got["sessions"] = await client.call_tool("session_show", {"session_id": "zero_20200101000000_000000000000"})
            with pytest.raises(MCPError) as refused:
                await client.list_prompts()
            got["prompts"] = refused.value.error.message
            return got

    got = anyio.run(scenario)
    assert got["info"].name == "zero" and got["info"].version == __version__
    assert got["capabilities"].tools is not None
    assert got["capabilities"].prompts is None and got["capabilities"].resources is None  # it serves tools only
    assert got["prompts"] == "Method not found"
    tools = {t.name: t for t in got["tools"]}
    assert {"explorer", "worker", "run_team", "session_tree", "session_show"} <= set(tools)
    assert tools["explorer"].input_schema == {
        "type": "object",
        "properties": {"prompt": {"type": "string"}},
        "required": ["prompt"],
    }
    assert all("title" not in t.input_schema and t.output_schema is None for t in got["tools"])
    assert tools["run_team"].title == "Run a team"
    assert tools["run_team"].description.startswith("Run a team file (a path in the workspace) under its shared")
    mine = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"  # (named where it is: it was ~/.config's)
    for answer, tool in ((got["explorer"], "explorer"), (got["team"], "run_team")):
        said = NO_PROVIDER.format(config=mine)
        assert answer.is_error and answer.content[0].text == f"Error executing tool {tool}: {said}"
    # reading sessions needs no provider
    assert got["sessions"].content[0].text.endswith("no session zero_20200101000000_000000000000 in this workspace")
    assert store().list() == []


@pytest.fixture(autouse=True)
def _quiet_mcp_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTMCP_LOG_LEVEL", "ERROR")


def test_long_tool_names_are_shortened_deterministically() -> None:
    from zero.agent.mcpconfig import tool_name

    assert tool_name("github", "search_issues") == "mcp__github__search_issues"
    long = tool_name("a-very-long-server-name", "and_an_even_longer_tool_name_that_goes_on_and_on")
    assert len(long) == 64 and long == tool_name(
        "a-very-long-server-name", "and_an_even_longer_tool_name_that_goes_on_and_on"
    )
    assert long != tool_name("a-very-long-server-name", "and_an_even_longer_tool_name_that_goes_on_and_off")
    assert tool_name("s", "odd name/with.dots") == "mcp__s__odd_name_with_dots"


FAULTS = """
[[turns]]
match = { user = "Use the odd tools", turn = 1 }
tool_calls = [
  { name = "mcp__demo__x_y", arguments = {} },
  { name = "mcp__demo__note", arguments = {} },
  { name = "mcp__a_b__echo", arguments = { text = "one" } },
]
[[turns]]
match = { user = "Use the odd tools", turn = 2 }
tool_calls = [{ name = "mcp__demo__big", arguments = { size = 20000000 } }]
[[turns]]
match = { user = "Use the odd tools", turn = 3 }
tool_calls = [{ name = "mcp__demo__echo", arguments = { text = "after" } }]
[[turns]]
match = { user = "Use the odd tools", turn = 4 }
text = "done"
"""


def test_names_that_come_out_alike_a_huge_result_and_a_failing_servers_secrets(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tools (x.y, x_y) and two servers (a.b, a_b) that sanitize alike are told apart, not a crash; a result
    over the cap is trimmed while it is read and the server's next call answers; a secret split across content
    items is masked; a failing server's stderr is redacted (a secret-named variable, a value given in config)."""
    monkeypatch.setenv("ZERO_TEST_SERVER_TOKEN", "env-secret-value-4242")
    demo = f'command = {json.dumps(sys.executable)}\nargs = [{json.dumps(DEMO)}, "stdio"]\ntrust = true\n'
    failing = "import os, sys; sys.stderr.write(f\"using {os.environ['T']} and {os.environ['U']}\\n\"); sys.exit(3)"
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[mcp.servers.demo]\n{demo}[mcp.servers."a.b"]\n{demo}[mcp.servers.a_b]\n{demo}'
        f'[mcp.servers.failing]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(failing)}]\n'
        'env = { T = "$ZERO_TEST_SERVER_TOKEN", U = "literal-secret-in-config" }\n'
    )
    done = zero("exec", "Use the odd tools", *scripted(write_script(tmp_path / "s.toml", FAULTS), workspace))
    assert done.returncode == 0, done.stderr
    assert "MCP tool 'x_y' of server 'demo' comes out as 'mcp__demo__x_y'" in done.stderr
    assert "server 'a_b' comes out as 'mcp__a_b__echo'" in done.stderr
    assert "MCP server 'failing'" in done.stderr and "[REDACTED]" in done.stderr
    assert "env-secret-value-4242" not in done.stderr and "literal-secret-in-config" not in done.stderr
    root = next(m for m in store().list() if not m.parent_session_id)
    results = [e.event.output for e in store().events(root.session_id) if e.event.kind == "tool_result"]
    assert results[:3] == ["x.y", "[REDACTED]\n[REDACTED]", "echo: one"]
    # the note first, then (trimmed again to the output budget, as every tool's) what began and ended it
    assert results[3].startswith("[the MCP server's answer was over 4,194,304 bytes: Zero read its first and last")
    assert results[3].rstrip().endswith("aaaa END")
    assert results[4] == "echo: after"  # the server's next call, answered


@pytest.mark.anyio
async def test_what_a_server_says_of_its_tools_is_redacted() -> None:
    from zero.agent.mcp import open_servers
    from zero.agent.mcpconfig import McpServer

    demo = McpServer(name="demo", command=sys.executable, args=(DEMO, "stdio"))
    async with open_servers([demo], lambda problem: None) as tools:
        note = next(t for t in tools["demo"] if t.name == "mcp__demo__note")
    assert "sk-proj" not in note.description and "[REDACTED]" in note.description


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_secret_split_across_a_structured_results_strings_is_masked() -> None:
    from mcp import types as mcp_types

    from zero.agent.mcp import _text_of

    token = "glpat-" + "C" * 12 + "D" * 12
    result = mcp_types.CallToolResult(content=[], structured_content={"parts": [token[:9], token[9:]], "n": 1})
    shown = _text_of(result)
    assert "CCC" not in shown and json.loads(shown) == {"parts": ["[REDACTED]", "[REDACTED]"], "n": 1}
    # as servers send it: the structured result dumped into the text too
    dumped = json.dumps({"parts": [token[:9], token[9:]], "n": 1})
    both = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=dumped)], structured_content={})
    assert json.loads(_text_of(both)) == {"parts": ["[REDACTED]", "[REDACTED]"], "n": 1}


STEERED = """
name = "steered"
[defaults]
isolation = "none"
[[members]]
name = "waiter"
specialist = "worker"
prompt = "Wait."
[[members]]
name = "solo"
specialist = "worker"
prompt = "Go."
"""

STEERED_SCRIPT = """
[[turns]]
match = { system = 'You are "waiter"', turn = 1 }
text = "waiting"
tool_calls = [{ name = "bash", arguments = { command = "while [ ! -e go ]; do sleep 0.02; done" } }]
[[turns]]
match = { system = 'You are "solo"' }
text = "solo done"
"""


def tool_runs(team_id: str, member: str) -> None:
    """Return once ``member`` of the team ``team_id`` has called a tool: its session log says so."""
    deadline = time.monotonic() + 30
    while not any(
        e.event.kind == "tool_call"
        for m in store().list()
        if m.member_name == member and m.root_session_id == team_id
        for e in store().events(m.session_id)
    ):
        assert time.monotonic() < deadline, f"{member} never called a tool"
        time.sleep(0.05)


def test_control_team_stops_one_member_of_a_team_that_run_team_runs(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", STEERED_SCRIPT)
    write_script(workspace / "team.toml", STEERED)
    params = StdioServerParameters(
        command=ZERO,
        args=["mcp", "serve", *scripted(script, workspace)],
        env={k: os.environ[k] for k in ("ZERO_HOME", "XDG_CONFIG_HOME", "PATH")},
    )

    async def scenario() -> dict[str, Any]:
        got: dict[str, Any] = {}
        started = anyio.Event()
        team_id = ""

        async def note(progress: float, total: float | None, message: str | None) -> None:
            nonlocal team_id
            if message and message.startswith("session "):
                team_id = message.removeprefix("session ")
                started.set()

        async with Client(params) as client:
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    got["ran"] = await client.call_tool("run_team", {"team": "team.toml"}, progress_callback=note)

                tg.start_soon(run)
                await started.wait()
                await anyio.to_thread.run_sync(tool_runs, team_id, "waiter")
                got["no_member"] = await client.call_tool("control_team", {"team_id": team_id, "action": "stop"})
                got["stop"] = await client.call_tool(
                    "control_team", {"team_id": team_id, "action": "stop", "member": "waiter"}
                )
            got["team_id"] = team_id  # the team has ended
            got["ended"] = await client.call_tool(
                "control_team", {"team_id": team_id, "action": "pause", "member": "solo"}
            )
        (workspace / "go").touch()  # (nothing waits for it any more)
        return got

    got = anyio.run(scenario)
    assert got["no_member"].is_error and got["no_member"].content[0].text.endswith("stop needs the member's name")
    assert got["stop"].content[0].text == "stopping waiter: it ends cancelled, keeping its output so far"
    team = json.loads(got["ran"].content[0].text)
    members = {m["name"]: (m["status"], m["reason"], m["output"]) for m in team["members"]}
    assert members == {
        "waiter": ("cancelled", "stopped by the user", "waiting"),
        "solo": ("completed", None, "solo done"),
    }
    assert got["ended"].is_error
    assert got["ended"].content[0].text.endswith(f"the team {got['team_id']} is not running: it ended cancelled")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["term", "int", "hup"])
def test_a_signal_ends_zero_mcp_serve_at_once_and_its_runs_interrupted(
    workspace: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    # (its SDK reads stdin on a thread no cancellation reaches: a signal left the server waiting for the
    # client's next line, a run under way ended cancelled and its call never answered)
    script = write_script(tmp_path / "s.toml", SERVE_SCRIPT)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    asked = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "explorer", "arguments": {
            "prompt": "Take forever"}}},
    ]  # fmt: skip
    command = [ZERO, "mcp", "serve", *scripted(script, workspace)]

    def under_way() -> bool:  # its log holds the prompt (its metadata says running only every few seconds)
        return any(e.event.kind == "message" for m in store().list() for e in store().events(m.session_id))

    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write("".join(json.dumps(m) + "\n" for m in asked[: 3 if sig != signal.SIGHUP else 2]))
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 1
            deadline = time.monotonic() + 30
            while sig != signal.SIGHUP and not under_way():
                assert time.monotonic() < deadline, "the run never started"
                time.sleep(0.02)
            proc.send_signal(sig)  # the client's end stays open
            answers = [json.loads(line) for line in proc.stdout]
            assert proc.wait(timeout=10) == 130
        finally:
            proc.kill()
    if sig == signal.SIGHUP:  # idle: nothing to answer
        assert answers == []
        return
    (answer,) = answers  # (the call under way answers before the input ends)
    assert answer["id"] == 2 and "status: interrupted" in answer["result"]["content"][0]["text"]
    assert [m.status for m in store().list()] == ["interrupted"]


def test_zero_mcp_serve_says_when_its_output_cannot_be_written(workspace: Path, tmp_path: Path) -> None:
    # (a full disk or a closed stdout was an internal error: the SDK writes the process's stdout itself)
    script = write_script(tmp_path / "s.toml", HI)
    client = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": client}
    serve = f"{ZERO} mcp serve {shlex.join(scripted(script, workspace))}"
    for redirect, why in ((">/dev/full", "No space left on device"), (">&-", "the descriptor is closed")):
        done = subprocess.run(
            f"exec {serve} {redirect}", shell=True, input=json.dumps(hello) + "\n", capture_output=True, text=True
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, (redirect, done.stderr)
        assert done.stderr.splitlines()[-1] == f"zero: error: cannot write to standard output: {why}", done.stderr
