"""`zero exec` end to end, run as a user runs it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import ZERO, lines, scripted, write_script, zero
from support.llm_server import LLMServer, anthropic_reply, error_reply, openai_reply

from zero.sessions import FileSessionStore

READ_README = """
[[turns]]
match = { turn = 1 }
text = "Let me read the README."
tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]

[[turns]]
match = { turn = 2 }
text = "The README says the answer is 42."
"""


def sessions() -> FileSessionStore:
    return FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")


def test_scripted_exec_prints_the_answer_and_records_the_session(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", READ_README)
    done = zero("exec", "What does the README say?", *scripted(script, workspace))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The README says the answer is 42.\n"
    assert "→ read_file README.md" in done.stderr
    [meta] = sessions().list()
    assert meta.status == "completed" and meta.cwd == str(workspace.resolve()) and meta.provider == "scripted"
    assert meta.title == "What does the README say?" and meta.root_session_id == meta.session_id
    kinds = [e.event.kind for e in sessions().events(meta.session_id)]
    assert kinds == [
        "run_start",
        "message",
        "message",
        "message",
        "usage",
        "tool_call",
        "tool_result",
        "message",
        "usage",
        "run_end",
    ]


def test_exec_against_an_openai_compatible_server_reads_a_file_and_answers(workspace: Path) -> None:
    with LLMServer() as server:
        server.enqueue(
            openai_reply("Reading.", [("call_1", "read_file", {"path": "README.md"})], usage=(300, 20)),
            openai_reply("The answer is 42.", usage=(400, 10)),
        )
        done = zero(
            "exec",
            "What is the answer?",
            "--base-url",
            server.url + "/v1",
            "--model",
            "gpt-4.1-mini",
            "--cwd",
            str(workspace),
            "--output-format",
            "json",
        )
        tool_result = server.requests[1]["messages"][3]
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["result"] == "The answer is 42." and result["exitCode"] == 0
    assert result["usage"]["promptTokens"] == 700 and result["costUsd"] == round((700 * 0.4 + 30 * 1.6) / 1e6, 6)
    assert tool_result["role"] == "tool" and "The answer is 42." in tool_result["content"]
    events = [e.event for e in sessions().events(result["sessionId"])]
    assert [e.kind for e in events] == [
        "run_start",
        "message",
        "message",
        "message",
        "usage",
        "tool_call",
        "tool_result",
        "message",
        "usage",
        "run_end",
    ]
    assert events[6].status == "ok" and "The answer is 42." in events[6].output  # type: ignore[union-attr]
    assert sessions().metadata(result["sessionId"]).usage.prompt_tokens == 700


def test_exec_through_the_anthropic_provider(workspace: Path) -> None:
    with LLMServer() as server:
        server.enqueue(
            anthropic_reply("", [("toolu_1", "grep", {"pattern": "TODO"})]), anthropic_reply("One TODO in src/app.py.")
        )
        done = zero(
            "exec",
            "Find TODOs",
            "--provider",
            "anthropic",
            "--cwd",
            str(workspace),
            env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url},
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "One TODO in src/app.py.\n"


def test_provider_errors_exit_3_with_a_clear_message(workspace: Path) -> None:
    with LLMServer() as server:
        server.enqueue(error_reply(401, "Incorrect API key provided", "invalid_request_error"))
        done = zero(
            "exec",
            "hi",
            "--provider",
            "openai",
            "--cwd",
            str(workspace),
            env={"OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": server.url},
        )
    assert done.returncode == 3
    assert "openai API error 401: Incorrect API key provided. Check the API key" in done.stderr
    [meta] = sessions().list()
    assert meta.status == "failed"


def test_no_provider_is_a_one_paragraph_error_and_exit_2(workspace: Path) -> None:
    done = zero("exec", "hi", "--cwd", str(workspace))
    assert done.returncode == 2 and done.stdout == ""
    message = done.stderr.strip()
    assert message.startswith("zero: error: No model provider is configured.")
    assert "OPENAI_API_KEY" in message and "--base-url" in message and "--provider scripted" in message
    assert "\n" not in message


def test_usage_errors_exit_2(workspace: Path, tmp_path: Path) -> None:
    assert zero("exec", "hi", "--cwd", str(tmp_path / "missing")).returncode == 2
    assert zero("exec", "--provider", "scripted", "--script", "x.toml", "--cwd", str(workspace)).returncode == 2
    bad = write_script(tmp_path / "bad.toml", "[[turns]]\ntxet = 1\n")
    done = zero("exec", "hi", *scripted(bad, workspace))
    assert done.returncode == 2 and f"{bad}:2: unknown key 'turns.0.txet' (did you mean \"text\"?)" in done.stderr
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "config.toml").write_text('provder = "openai"\n')
    done = zero("exec", "hi", "--cwd", str(workspace))
    assert done.returncode == 2
    assert "config.toml:1: unknown key 'provder' (did you mean \"provider\"?)" in done.stderr


def test_max_turns_exits_4_with_the_partial_answer(workspace: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "loop.toml",
        '[[turns]]\ntimes = 0\ntext = "Still looking."\ntool_calls = [{ name = "list_directory" }]\n',
    )
    done = zero("exec", "loop", *scripted(script, workspace), "--max-turns", "2")
    assert done.returncode == 4
    assert done.stdout == "Still looking.\n"
    assert "stopped after 2 model calls (max turns); the answer is partial" in done.stderr


def test_prompt_from_stdin_and_file(workspace: Path, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\nmatch = { user = "from stdin" }\ntext = "got stdin"\n'
        '[[turns]]\nmatch = { user = "from a file" }\ntext = "got file"\n',
    )
    base = ["exec", *scripted(script, workspace)]
    assert zero(*base, input="prompt from stdin").stdout == "got stdin\n"
    (tmp_path / "p.txt").write_text("prompt from a file")
    assert zero(*base, "--file", str(tmp_path / "p.txt")).stdout == "got file\n"


def test_an_api_key_printed_by_bash_reaches_neither_output_nor_disk(workspace: Path, tmp_path: Path) -> None:
    key = "sk-proj-ThisIsAFakeKeyForTesting1234567890"
    (workspace / "key.txt").write_text(key)  # commands do not get it from the environment: a file has it
    script = write_script(
        tmp_path / "s.toml",
        """
[[turns]]
match = { turn = 1 }
tool_calls = [{ name = "bash", arguments = { command = "echo my key is $(cat key.txt)" } }]
[[turns]]
match = { turn = 2 }
text = "Done."
""",
    )
    done = zero(
        "exec",
        "print the key",
        *scripted(script, workspace),
        "--output-format",
        "stream-json",
        env={"OPENAI_API_KEY": key},
    )
    assert done.returncode == 0, done.stderr
    assert key not in done.stdout
    result = [e for e in lines(done.stdout) if e["type"] == "tool_result"][0]
    assert result["output"] == "my key is [REDACTED]\n\n[exit code 0]"
    [meta] = sessions().list()
    on_disk = (sessions().path(meta.session_id) / "events.jsonl").read_text()
    assert key not in on_disk and "my key is [REDACTED]" in on_disk


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["int", "hup"])
def test_a_signal_interrupts_with_exit_130_and_a_final_status(workspace: Path, tmp_path: Path, sig: int) -> None:
    # (SIGHUP, a closed terminal's, killed the run where it stood: no end in its log, its session "running")
    script = write_script(
        tmp_path / "slow.toml",
        """
[[turns]]
match = { turn = 1 }
text = "Working on it."
tool_calls = [{ name = "bash", arguments = { command = "sleep 60" } }]
""",
    )
    proc = subprocess.Popen(
        [
            ZERO,
            "exec",
            "slow",
            *scripted(script, workspace),
            "--output-format",
            "stream-json",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # synchronise on the protocol, not on time
        if json.loads(line)["type"] == "tool_call":
            break
    proc.send_signal(sig)
    started = time.monotonic()
    rest, _ = proc.communicate(timeout=10)
    assert proc.returncode == 130 and time.monotonic() - started < 5  # (a bound on a hang: it waits for no command)
    assert lines(rest)[-1]["type"] == "run_end" and lines(rest)[-1]["status"] == "interrupted"
    [meta] = sessions().list()
    assert meta.status == "interrupted"
    events = [e.event for e in sessions().events(meta.session_id)]
    assert events[-1].kind == "run_end" and events[-1].status == "interrupted"
    assert any(e.kind == "message" and e.content == "Working on it." for e in events)


def test_a_reader_that_leaves_stops_the_run_with_141(workspace: Path, tmp_path: Path) -> None:
    # (| head -1 left the run going, its tools run for no one, and it exited 0; so did text mode's | true)
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\nmatch = { turn = 1 }\ntext = "first"\n'
        'tool_calls = [{ name = "bash", arguments = { command = "sleep 5; echo ran > side-effect" } }]\n'
        '[[turns]]\nmatch = { turn = 2 }\ntext = "the rest"\n',
    )
    command = [ZERO, "exec", "hi", *scripted(script, workspace), "--output-format", "stream-json"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as head -1 does
    started = time.monotonic()
    assert proc.wait(timeout=20) == 141 and proc.stderr.read() == ""
    assert time.monotonic() - started < 4  # (it did not wait for the command it started)
    proc.stderr.close()
    [meta] = sessions().list()
    assert meta.status == "interrupted" and not (workspace / "side-effect").exists()
    # a reader gone before the run began (| true): it stops as it starts, its tools never run
    early = script.read_text().replace("side-effect", "early-effect")
    quick = write_script(tmp_path / "q.toml", early)
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{ZERO} exec hi {shlex.join(scripted(quick, workspace))} | true"]
    )
    assert piped.returncode == 141 and not (workspace / "early-effect").exists()


def test_a_signal_the_run_was_started_ignoring_stays_ignored(workspace: Path, tmp_path: Path) -> None:
    # (nohup's SIGHUP, or a background job's SIGINT, stopped the run all the same)
    script = write_script(
        tmp_path / "s.toml",
        '[[turns]]\nmatch = { turn = 1 }\ntool_calls = [{ name = "bash", arguments = { command = "sleep 1" } }]\n'
        '[[turns]]\nmatch = { turn = 2 }\ntext = "done"\n',
    )
    ignoring = "import os, signal, sys; [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGHUP, signal.SIGINT)]; "
    command = [ZERO, "exec", "hi", *scripted(script, workspace), "--output-format", "stream-json"]
    code = ignoring + f"os.execv({ZERO!r}, {command!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if json.loads(line)["type"] == "tool_call":
            break
    proc.send_signal(signal.SIGHUP)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and lines(rest)[-1]["status"] == "success"


def test_help_does_not_import_the_sdks() -> None:
    code = (
        "import sys\nfrom zero.cli import main\n"
        "for argv in (['--help'], ['exec', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "heavy = ('openai', 'anthropic', 'mcp', 'rich', 'pydantic', 'jsonschema', 'ray')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


RESTARTED = """
[[turns]]
match = { turn = 1 }
text = "Half an answer that"
error = { kind = "stream_dropped" }
[[turns]]
match = { turn = 1 }
text = "A whole answer."
"""


def test_a_warning_is_said_in_text_and_in_json(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.toml", RESTARTED)
    text = zero("exec", "go", *scripted(script, workspace), "--retry-max-delay", "0.01")
    assert text.returncode == 0 and text.stdout == "A whole answer.\n"
    assert "! warning: " in text.stderr and "(stream_restarted)" in text.stderr
    done = zero("exec", "go", *scripted(script, workspace), "--retry-max-delay", "0.01", "--output-format", "json")
    warnings = json.loads(done.stdout)["warnings"]
    assert [w["code"] for w in warnings] == ["stream_restarted"] and warnings[0]["sessionId"].startswith("zero_")
