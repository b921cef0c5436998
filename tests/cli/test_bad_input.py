"""Bad input gets a one-line error naming it and the documented exit code, never a traceback or a hang."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import ZERO, scripted, write_script, zero

from zero.cli.main import main
from zero.sessions import FileSessionStore, SessionMetadata

ANSWER = '[[turns]]\ntext = "fine"\ntimes = 0\n'
TEAM = '[[members]]\nname = "a"\nspecialist = "explorer"\nprompt = "x"\n'


def one_error_line(stderr: str, *needles: str) -> None:
    errors = [line for line in stderr.splitlines() if line.startswith("zero: error:") or "error" in line.lower()]
    assert errors, stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)


def answering(workspace: Path, tmp_path: Path, *more: str) -> list[str]:
    script = write_script(tmp_path / "ok.toml", ANSWER)
    return ["exec", "hi", *scripted(script, workspace), *more]


def test_bad_files_are_named_with_the_exit_code_2(workspace: Path, tmp_path: Path) -> None:
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"name = \xff\xfe\x00\x01\n")
    nested = tmp_path / "nested.toml"
    nested.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    infinite = write_script(tmp_path / "inf.toml", 'name = "t"\n[budget]\nwall_seconds = inf\n' + TEAM)
    cases = [
        (["swarm", "validate", str(binary)], f"{binary}:1: is not UTF-8 text"),
        (["swarm", "validate", str(nested)], f"{nested}: is nested too deeply to read"),
        (["swarm", "validate", str(infinite)], f"{infinite}:3: budget.wall_seconds: Input should be a finite number"),
        (["swarm", "validate", str(tmp_path)], f"{tmp_path}: is a folder, not a file"),
        (["exec", "hi", *scripted(binary, workspace)], str(binary)),
        (["exec", "--file", str(binary), "--cwd", str(workspace)], f"--file {binary}: is not UTF-8 text"),
        (["exec", "--file", str(tmp_path), "--cwd", str(workspace)], "is a folder, not a file"),
    ]
    for argv, needle in cases:
        done = zero(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        one_error_line(done.stderr, needle)


def test_bad_config_and_data_folders(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".zero").mkdir()
    config = workspace / ".zero" / "config.toml"
    config.write_bytes(b'model = "\xff"\n')
    done = zero(*answering(workspace, tmp_path))
    assert done.returncode == 2
    one_error_line(done.stderr, f"{config}:1: is not UTF-8 text")
    config.unlink()
    config.mkdir()  # a folder where the file should be
    done = zero(*answering(workspace, tmp_path))
    assert done.returncode == 2
    one_error_line(done.stderr, f"{config}: is a folder, not a file")
    config.rmdir()
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    for argv in (answering(workspace, tmp_path), ["sessions", "list"]):
        done = zero(*argv, env={"ZERO_HOME": str(home)})
        assert done.returncode == 2
        one_error_line(done.stderr, f"ZERO_HOME {home} is a file, not a folder")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["swarm", "validate", "t.toml", "--budget-cost", "nan"], "argument --budget-cost: 'nan' is out of range"),
        (["swarm", "validate", "t.toml", "--budget-cost", "inf"], "argument --budget-cost: 'inf' is out of range"),
        (["swarm", "validate", "t.toml", "--budget-seconds", "-1"], "argument --budget-seconds: '-1' is out of range"),
        (["exec", "hi", "--max-turns", str(10**30)], "argument --max-turns: '1000000000000000000000000000000'"),
        (["exec", "hi", "--max-turns", "many"], "argument --max-turns: 'many' is not a whole number"),
    ],
)
def test_bad_numbers_on_the_command_line(argv: list[str], needle: str) -> None:
    done = zero(*argv)
    assert done.returncode == 2 and needle.replace("'", "") in done.stderr.replace("'", "")
    assert "Traceback" not in done.stderr


def test_damaged_sessions_are_named_and_stray_files_ignored(workspace: Path, tmp_path: Path) -> None:
    assert zero(*answering(workspace, tmp_path)).returncode == 0
    root = Path(os.environ["ZERO_HOME"]) / "sessions"
    (root / ".DS_Store").write_bytes(b"\x00\x01junk")  # a stray file in the sessions folder
    [meta] = FileSessionStore(root).list()
    listed = zero("sessions", "list", "--json")
    assert listed.returncode == 0 and meta.session_id in listed.stdout
    assert zero("sessions", "tree", meta.session_id).returncode == 0
    log = root / meta.session_id / "events.jsonl"
    lines = log.read_text().splitlines()
    for bad, why in (('{"sequence": 2}', "the record has no type"), ("[1, 2]", "a record must be a JSON object")):
        log.write_text("\n".join([lines[0], bad, *lines[2:]]) + "\n")
        for argv in (["sessions", "show", meta.session_id], ["swarm", "watch", meta.session_id]):
            done = zero(*argv)
            assert done.returncode == 1, (argv, done.stdout, done.stderr)
            one_error_line(done.stderr, f"{log}: line 2 is not a valid event ({why})")
    copied = root / "zero_20990101000000_000000000000"
    copied.mkdir()
    (copied / "metadata.json").write_text((root / meta.session_id / "metadata.json").read_text())
    done = zero("sessions", "show", copied.name)
    assert done.returncode == 1
    one_error_line(done.stderr, f"names session {meta.session_id!r}, not {copied.name!r}")
    assert meta.session_id in zero("sessions", "list", "--json").stdout  # the copy is skipped, the rest listed


def test_a_link_in_place_of_a_session_folder_is_never_read_or_written_through(workspace: Path, tmp_path: Path) -> None:
    """A read of the list made a lease file wherever a link in the sessions folder pointed (/etc/lease), and
    zero sessions rm of the link, as the list said to, failed with "None"."""
    assert zero(*answering(workspace, tmp_path)).returncode == 0
    root = Path(os.environ["ZERO_HOME"]) / "sessions"
    [meta] = FileSessionStore(root).list()
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(root / meta.session_id, elsewhere)  # a whole session's files, or anything at all
    (elsewhere / "lease").unlink()
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    link = root / f"zero_20260101000000_{'e' * 12}"
    link.symlink_to(elsewhere)
    why = f"{link} is a link, not a session folder: never read through (zero sessions rm {link.name} removes the link)"
    rows = {row["sessionId"]: row for row in json.loads(zero("sessions", "list", "--json").stdout)}
    assert rows[link.name] == {**rows[link.name], "status": "damaged", "damaged": why}
    assert rows[meta.session_id]["status"] == "completed"
    script = write_script(tmp_path / "r.toml", '[[turns]]\ntext = "ok"\n')
    for argv in (["show", link.name], ["tree", link.name], ["resume", link.name, "more", *scripted(script, workspace)]):
        done = zero("sessions", *argv)
        assert (done.returncode, done.stderr) == (1, f"zero: error: {why}\n"), (argv, done)
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before  # nothing made or changed there
    assert zero("sessions", "rm", link.name, "--yes").stdout == "removed 1 session\n"
    assert not link.is_symlink() and {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


@pytest.mark.timeout(20)  # (before the fix, each command hung on the FIFO for ever)
def test_a_fifo_or_a_device_in_place_of_a_session_file_is_a_damaged_session(workspace: Path, tmp_path: Path) -> None:
    """A session file replaced by a FIFO hung show, tree and resume; a link to /dev/zero took all memory."""
    assert zero(*answering(workspace, tmp_path)).returncode == 0
    root = Path(os.environ["ZERO_HOME"]) / "sessions"
    [meta] = FileSessionStore(root).list()
    folder = root / meta.session_id
    log, metadata = folder / "events.jsonl", folder / "metadata.json"
    saved = metadata.read_bytes()
    script = write_script(tmp_path / "r.toml", '[[turns]]\ntext = "ok"\n')
    resume = ["sessions", "resume", meta.session_id, "again", *scripted(script, workspace)]
    plants: dict[str, Callable[[Path], None]] = {"a FIFO": os.mkfifo, "/dev/zero": lambda p: p.symlink_to("/dev/zero")}
    for name, plant in plants.items():
        for path in (log, metadata):
            path.unlink()
            plant(path)
            what = "a FIFO, a device or a socket" if name == "a FIFO" else "a link"  # (never followed to /dev/zero)
            why = f"{path} is {what}, not a file: the session is damaged"
            for argv in (["sessions", "show", meta.session_id], ["sessions", "tree", meta.session_id], resume):
                done = zero(*argv)
                assert done.returncode == 1, (name, path.name, argv, done.stdout, done.stderr)
                one_error_line(done.stderr, why)
            if path == metadata:
                [row] = json.loads(zero("sessions", "list", "--json").stdout)
                assert row["status"] == "damaged" and row["damaged"].startswith(why), (name, row)
                path.unlink()
                path.write_bytes(saved)
        log.unlink()
        log.write_text("")


def test_escape_codes_from_a_model_or_a_title_never_reach_the_terminal(workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "esc.toml", '[[turns]]\ntext = "ok \\u001b]0;pwned\\u0007 \\u001b[2J done"\n')
    done = zero("exec", "title \x1b[31mred", *scripted(script, workspace))
    assert done.returncode == 0 and "\x1b" not in done.stdout + done.stderr
    assert done.stdout == "ok \\x1b]0;pwned\\x07 \\x1b[2J done\n"
    listed = zero("sessions", "list").stdout
    assert "\x1b" not in listed and "title \\x1b[31mred" in listed


def test_a_closed_pipe_ends_quietly(workspace: Path, tmp_path: Path) -> None:
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    for i in range(400):
        store.create(SessionMetadata(session_id=f"zero_20260101000000_{i:012x}", title="x" * 60, status="completed"))
    store.flush()
    proc = subprocess.Popen([ZERO, "sessions", "list", "--limit", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    proc.wait(timeout=20)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.returncode == 141 and err == ""
    # what Rich draws too (Rich's own answer to a closed pipe was exit 1, silently)
    team = write_script(tmp_path / "team.toml", 'name = "t"\n' + TEAM)
    for argv in (["swarm", "validate", str(team)], ["sessions", "tree", "zero_20260101000000_000000000000"]):
        ran = subprocess.run(
            ["bash", "-o", "pipefail", "-c", f"{shlex.join([ZERO, *argv])} | true"], capture_output=True
        )
        assert (ran.returncode, ran.stderr) == (141, b""), (argv, ran)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_start_up_ends_quietly_with_130(tmp_path: Path, sig: signal.Signals) -> None:
    team = write_script(tmp_path / "team.toml", 'name = "t"\n' + TEAM)
    script = write_script(tmp_path / "s.toml", ANSWER)
    proc = subprocess.Popen(
        [ZERO, "swarm", "run", str(team), "--provider", "scripted", "--script", str(script), "--no-live"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + 10
    while "pydantic_core" not in maps.read_text():  # it is importing what a run needs: start-up
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.002)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, (proc.returncode, err)
    assert b"Traceback" not in err


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(workspace: Path, tmp_path: Path) -> None:
    bad = write_script(tmp_path / "bad.json", json.dumps({"turns": [{"text": "x"}]}))
    done = zero("exec", "hi", *scripted(bad, workspace))
    assert done.returncode == 0  # a JSON script is fine; the point is the shape of errors below
    (workspace / ".zero").mkdir()
    (workspace / ".zero" / "specialists").mkdir()
    (workspace / ".zero" / "specialists" / "bin.toml").write_bytes(b"\x00\x01\x02\xff")
    listed = zero("specialists", "list", "--cwd", str(workspace))
    assert listed.returncode == 0 and "bin.toml:1: is not UTF-8 text" in listed.stdout
    ran = zero(*answering(workspace, tmp_path))  # a broken manifest skips that file only
    assert ran.returncode == 0 and "skipped specialist manifest" in ran.stderr
    metas = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions").list()
    assert all(m.status == "completed" for m in metas)  # no pending session left behind


def test_mistakes_in_what_was_typed_are_refused_at_once_saying_what_to_type(workspace: Path, tmp_path: Path) -> None:
    """A base URL without its scheme was retried for seconds as a server that is down, and left a failed
    session; an event past a log's end was exit 1, a misspelt status matched nothing; a message said "the
    prompt from prompt is empty". Each is a usage error (exit 2) that says what to type."""
    home = Path(os.environ["ZERO_HOME"]) / "sessions"
    done = zero("exec", "hi", "--base-url", "localhost:11434", "--cwd", str(workspace))
    assert (done.returncode, done.stderr) == (
        2,
        "zero: error: --base-url 'localhost:11434' has no scheme: give the whole address, e.g. http://localhost:11434/v1\n",
    )
    assert not home.exists() or FileSessionStore(home).list() == []  # nothing ran
    done = zero("exec", "hi", "--cwd", str(workspace), env={"OPENAI_BASE_URL": "ftp://example.com"})
    assert done.stderr == (
        "zero: error: OPENAI_BASE_URL 'ftp://example.com' is not a web address: give one that starts with http:// "
        "or https://\n"
    )
    assert zero(*answering(workspace, tmp_path)).returncode == 0
    [meta] = FileSessionStore(home).list()
    done = zero("sessions", "fork", meta.session_id, "--at", "999")
    last = meta.event_count
    assert (done.returncode, done.stderr) == (
        2,
        f"zero: error: session {meta.session_id} has no event 999: it has {last} (--at takes 1 to {last}; "
        f"zero sessions show {meta.session_id} numbers them)\n",
    )
    done = zero("sessions", "list", "--status", "interupted")
    assert done.returncode == 2
    assert done.stderr.startswith("zero: error: --status 'interupted' is not a status (did you mean \"interrupted\"?)")
    done = zero("sessions", "rm", meta.session_id)
    assert done.stderr == "zero: error: removing 1 session needs --yes when there is no terminal to ask\n"
    (tmp_path / "empty.txt").write_text("")
    fix = ": give the prompt as an argument, with --file, or on standard input\n"
    for argv, said in (
        (["exec", "  "], "the prompt argument is blank"),
        (["exec"], "standard input is empty"),
        (["exec", "--file", str(tmp_path / "empty.txt")], f"the file {tmp_path / 'empty.txt'} is empty"),
    ):
        done = zero(*argv, *scripted(tmp_path / "ok.toml", workspace))
        assert (done.returncode, done.stderr) == (2, f"zero: error: {said}{fix}"), argv


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("output", ["text", "stream-json"])
def test_output_that_cannot_be_written_is_an_error_not_silence_or_a_traceback(
    workspace: Path, tmp_path: Path, output: str
) -> None:
    # (a full disk was exit 0 with the answer lost, or an internal error; a closed stdout a thread's traceback)
    full = "zero: error: cannot write to standard output: No space left on device"
    runs = {"run": answering(workspace, tmp_path, "--output-format", output), "list": ["sessions", "list"]}
    if output == "text":
        runs["help"] = ["--help"]
    for name, args in runs.items():
        with open("/dev/full", "w") as stdout:
            ran = subprocess.run([ZERO, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=30)
        assert (ran.returncode, ran.stderr.splitlines()[-1]) == (1, full), (name, ran.stderr)
        assert "Traceback" not in ran.stderr
    (session,) = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions").list()  # recorded all the same
    assert session.status == "completed"

    ran = subprocess.run(f"exec {ZERO} {' '.join(runs['run'])} >&-", shell=True, capture_output=True, text=True)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.splitlines()[-1] == "zero: error: cannot write to standard output: the descriptor is closed"
    assert len(FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions").list()) == 1  # nothing was run


def test_a_prompt_that_never_ends_or_is_not_utf8_is_a_usage_error(workspace: Path, tmp_path: Path) -> None:
    # (an endless source took all the memory there was, deaf to Ctrl-C; other bytes were an internal error)
    script = write_script(tmp_path / "ok.toml", ANSWER)
    flags = scripted(script, workspace)
    cases = [
        (["exec", "-f", "/dev/zero", *flags], "", "--file /dev/zero goes on past 32 MB"),
        (["exec", *flags], "y\n" * (16 * 2**20 + 1), "the prompt on stdin goes on past 32 MB"),
        (["exec", "caf\udce9", *flags], "", "the prompt argument is not UTF-8 text (byte 3)"),  # argv as Python has it
        (["exec", *flags], "caf\udce9\n", "standard input is not UTF-8 text (byte 3)"),
        (["sessions", "resume", "last", "\udcff", *flags], "", "the prompt argument is not UTF-8 text (byte 0)"),
    ]
    for argv, given, needle in cases:
        done = zero(*argv, input=given)
        assert done.returncode == 2, (argv[:3], done.stderr)
        one_error_line(done.stderr, needle)
    assert not FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions").list()  # nothing was run


def test_closed_standard_streams_are_empty_or_silent_never_a_file_zero_opens(workspace: Path, tmp_path: Path) -> None:
    # (2>&- was exit 1 with nothing done; <&- an internal error; and a descriptor left closed is the number
    # the next file takes, so a server or tool inheriting it wrote its stderr into a session's log)
    run = " ".join(answering(workspace, tmp_path))

    def shell(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30)

    quiet = shell(f"exec {ZERO} {run} 2>&-")
    assert (quiet.returncode, quiet.stdout) == (0, "fine\n"), quiet
    assert shell(f"exec {ZERO} {run} --max-turns 0 2>&-").returncode == 2  # a usage error is still exit 2
    unasked = shell(f"exec {ZERO} {run.replace(' hi ', ' ')} <&-")
    assert unasked.returncode == 2
    one_error_line(unasked.stderr, "standard input is empty: give the prompt as an argument")
    probe = (
        "import os, sys; from zero.cli.main import _standard_streams; _standard_streams(); "
        "print(open(os.devnull).fileno(), sys.stdin.read() == '', *(os.readlink(f'/proc/self/fd/{n}') for n in (0, 2)))"
    )
    opened = shell(f"exec {sys.executable} -c {shlex.quote(probe)} <&- 2>&-")
    assert opened.stdout.split() == ["3", "True", "/dev/null", "/dev/null"], opened


def test_an_output_encoding_that_cannot_hold_the_text_gets_escapes_not_silence(workspace: Path, tmp_path: Path) -> None:
    # (PYTHONIOENCODING=ascii dropped the answer with exit 0, and sessions list and show were internal errors)
    script = write_script(tmp_path / "s.toml", '[[turns]]\ntext = "caf\u00e9 \u2014 \U0001f600"\ntimes = 0\n')
    ascii_env = {**os.environ, "PYTHONIOENCODING": "ascii"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([ZERO, *args], capture_output=True, text=True, env=ascii_env, timeout=30)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done
        assert done.stdout.isascii()
        return done

    assert run("exec", "hi", *scripted(script, workspace)).stdout == "caf\\u00e9 \\u2014 \\ud83d\\ude00\n"
    streamed = run("exec", "hi", *scripted(script, workspace), "--output-format", "stream-json").stdout
    final = [line for line in map(json.loads, streamed.splitlines()) if line["type"] == "final"]
    assert final[0]["text"] == "caf\u00e9 \u2014 \U0001f600"  # escapes that JSON reads back as the text
    assert "\\u00b7" in run("sessions", "show", "last").stdout


def test_a_removed_current_folder_or_a_file_as_cwd_is_a_usage_error(workspace: Path, tmp_path: Path) -> None:
    # (a removed current folder was an internal FileNotFoundError; --cwd FILE said "no such folder")
    gone = tmp_path / "gone"
    gone.mkdir()
    before = os.getcwd()
    os.chdir(gone)
    try:
        gone.rmdir()
        for argv in (answering(workspace, tmp_path)[:2], ["sessions", "list", "--here"]):
            err = io.StringIO()
            assert main(argv, stdout=io.StringIO(), stderr=err, stdin=io.StringIO()) == 2, (argv, err.getvalue())
            one_error_line(err.getvalue(), "the current folder was removed: cd to a folder that exists, or give --")
    finally:
        os.chdir(before)
    done = zero("exec", "hi", "--cwd", str(workspace / "README.md"))
    assert done.returncode == 2
    assert done.stderr == f"zero: error: --cwd {workspace / 'README.md'}: not a folder\n"


def test_an_age_past_the_calendar_is_a_usage_error_and_every_command_takes_debug() -> None:
    # (prune --older-than 3000000d was an internal OverflowError, whose hint to add --debug sessions refused)
    for age in ("3000000d", "99999999999999999d", "0d"):
        done = zero("sessions", "prune", "--older-than", age, "--dry-run")
        assert done.returncode == 2 and done.stderr == (
            f"zero: error: --older-than '{age}': give an age above 0 and at most 36500d (100 years)\n"
        )
    assert zero("sessions", "prune", "--older-than", "36500d", "--dry-run").returncode == 0
    for argv in (["sessions", "list"], ["specialists", "list"], ["mcp", "list"], ["swarm", "watch", "last"]):
        done = zero(*argv, "--debug")
        assert "unrecognized arguments" not in done.stderr, (argv, done.stderr)


def test_a_prompt_on_its_own_output_and_a_negative_retry_after_are_refused(workspace: Path, tmp_path: Path) -> None:
    # (the first was told to add itself to its own depends_on, a cycle; the second waited 600 s)
    team = write_script(tmp_path / "t.toml", 'name = "t"\n' + TEAM.replace('prompt = "x"', 'prompt = "{{ a.output }}"'))
    done = zero("swarm", "validate", str(team))
    assert done.returncode == 2
    own = "prompt uses {{ a.output }}, its own output, which it has not made yet"
    assert done.stderr == f"zero: error: {team}:5: member 'a': {own}\n"
    script = write_script(tmp_path / "s.toml", '[[turns]]\nerror = { kind = "rate_limit", retry_after = -1 }\n')
    done = zero("exec", "hi", *scripted(script, workspace))
    assert (
        done.returncode == 2 and "turns.0.error.retry_after: Input should be greater than or equal to 0" in done.stderr
    )


def test_the_hint_for_a_price_names_your_config_where_it_is(tmp_path: Path) -> None:
    # (it named ~/.config/zero/config.toml whatever XDG_CONFIG_HOME said)
    team = write_script(tmp_path / "t.toml", 'name = "t"\n[budget]\ncost_usd = 1\n' + TEAM)
    done = zero("swarm", "validate", str(team), "--provider", "scripted")
    mine = Path(os.environ["XDG_CONFIG_HOME"]) / "zero" / "config.toml"
    assert (
        done.returncode == 2
        and f"output = ... (US dollars per million tokens; 0 for a local model) to {mine}," in done.stderr
    )
