"""The live team tree in a real pseudo-terminal, plain progress without one, and the tree from disk."""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from support.cli import ZERO, zero
from support.terminal import Terminal

from zero.sessions import FileSessionStore, SessionMetadata

REPO = Path(__file__).resolve().parents[2]
TEAM = str(REPO / "manifests/teams/repo-review.toml")


def slow_script(tmp_path: Path, delay: float = 0.15) -> str:
    text = (REPO / "manifests/teams/repo-review.script.toml").read_text()
    slow = re.sub(r"^(match = .*)$", rf"\1\ndelay = {delay}", text, flags=re.MULTILINE)
    path = tmp_path / "slow.toml"
    path.write_text(slow)
    return str(path)


GATED_TEAM = """
name = "gated"
[defaults]
model = "gpt-4.1-mini"
[budget]
turns = 20
[[members]]
name = "mapper"
specialist = "tester"
prompt = "Map."
[[members]]
name = "reviewer"
specialist = "tester"
depends_on = ["mapper"]
prompt = "Review: {{ mapper.output }}"
"""
GATED_SCRIPT = "".join(
    f"""
[[turns]]
match = {{ system = 'You are "{name}"', turn = 1 }}
tool_calls = [{{ name = "bash", arguments = {{ command = "until [ -e {gate} ]; do sleep 0.01; done" }} }}]
[[turns]]
match = {{ system = 'You are "{name}"', turn = 2 }}
text = "{name} done"
"""
    for name, gate in (("mapper", "mapped"), ("reviewer", "reviewed"))
)


def test_the_live_tree_in_a_terminal(workspace: Path, tmp_path: Path) -> None:
    """Each member waits (in a command) for a file the test makes once the screen shows the state before:
    the test sees every state however slow the machine, and never waits for a time to pass."""
    team, script = tmp_path / "team.toml", tmp_path / "s.toml"
    team.write_text(GATED_TEAM)
    script.write_text(GATED_SCRIPT)
    term = Terminal("swarm", "run", str(team), "--provider", "scripted", "--script", str(script), cwd=workspace)

    def row(screen: str, member: str) -> str:
        return next((line for line in screen.splitlines() if re.search(rf"[├└]── . {member} ·", line)), "")

    try:
        screen = term.wait_until(
            lambda s: "waiting for mapper" in row(s, "reviewer") and "until [ -e mapped ]" in row(s, "mapper"),
            "the reviewer waiting for the mapper at work",
        )
        assert re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] mapper", row(screen, "mapper")) and "1 / 20 model calls" in screen
        (workspace / "mapped").touch()
        screen = term.wait_until(lambda s: "until [ -e reviewed ]" in row(s, "reviewer"), "the reviewer at work")
        assert re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] reviewer", row(screen, "reviewer")) and "3 / 20 model calls" in screen
        assert "✓ mapper" in row(screen, "mapper") and row(screen, "mapper").endswith("· completed")
        (workspace / "reviewed").touch()
        assert term.wait_exit() == 0
    finally:
        term.close()
    final = term.screen()
    assert "✓ reviewer" in row(final, "reviewer") and "4 / 20 model calls" in final  # the budget bar, to the end
    assert "team gated · completed" in final and "Totals: tokens" in final


def test_without_a_terminal_one_plain_line_per_state_change(tmp_path: Path) -> None:
    done = zero("swarm", "run", TEAM, "--provider", "scripted", "--script", slow_script(tmp_path, 0.0), cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x1b" not in done.stderr
    lines = done.stderr.strip().splitlines()
    changes = [re.sub(r"^\[\s*[\d.]+s\] ", "", line) for line in lines]
    # the estimate comes before the first call; the team's id as the run starts, so another terminal can follow it
    assert re.fullmatch(
        r"estimate: expected [\d.,k]+ tokens, \d+ model calls, \$\d\.\d{4} \(high .+ tokens\)", changes[0]
    )
    assert re.fullmatch(
        r"repo-review  team started: 4 members in 3 waves · follow it with: zero swarm watch team_\w+", changes[1]
    )
    assert [c.split()[0] for c in changes[2:]] == [
        "mapper",
        "mapper",
        "reviewer",
        "tester",
        "reviewer",
        "tester",
        "reporter",
        "reporter",
    ] or len(changes) == 10
    assert sum(" running (" in c for c in changes) == 4 and sum(" completed · " in c for c in changes) == 4
    assert any(re.search(r" completed · \d,\d{3} tokens · \$", c) for c in changes)  # as every view counts
    assert not any(re.search(r"\d{4} tokens", c) for c in changes)
    no_live = zero("swarm", "run", TEAM, "--provider", "scripted", "--script", slow_script(tmp_path, 0.0), "--no-live")
    assert no_live.returncode == 0 and "\x1b" not in no_live.stderr


def test_the_tree_from_disk_as_text_and_svg(tmp_path: Path) -> None:
    done = zero(
        "swarm",
        "run",
        TEAM,
        "--provider",
        "scripted",
        "--script",
        slow_script(tmp_path, 0.0),
        "--output-format",
        "json",
    )
    team_id = re.search(r'"sessionId": "(team_[^"]+)"', done.stdout)
    assert team_id is not None
    text = zero("sessions", "tree", team_id.group(1)).stdout
    # the tree from disk shows each session's short id, which the command line takes
    assert re.match(r"✓ repo-review [0-9a-f]{8} · gpt-4.1-mini · ", text.splitlines()[0])
    assert re.findall(r"── ✓ ([a-z]+) [0-9a-f]{8} · ", text) == ["mapper", "reviewer", "tester", "reporter"]
    short = re.search(r"── ✓ mapper ([0-9a-f]{8}) · ", text)
    assert short and zero("sessions", "show", short.group(1)).returncode == 0
    assert "turns  " in text and "4 completed" in text
    out = tmp_path / "tree.svg"
    saved = zero("sessions", "tree", team_id.group(1), "--svg", str(out))
    assert saved.returncode == 0 and out.exists()
    svg = ET.parse(out).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    words = "".join(svg.itertext())
    assert "reviewer" in words and "completed" in words


def summary(text: str) -> list[tuple[str, str, str]]:
    """(member, tokens, cost) of each member line of a drawn tree, and its status glyph."""
    return re.findall(r"── ([✓✗■$↷]) ([a-z]+)(?: [0-9a-f]{8})? · .*?([\d,]+ tok \$[\d.]+|[\d,]+ tok unknown)", text)


def test_watch_shows_what_the_run_and_the_tree_from_disk_show(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [ZERO, "swarm", "run", TEAM, "--provider", "scripted", "--script", slow_script(tmp_path, 0.2), "--no-live"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stderr is not None
    assert run.stderr.readline().startswith("estimate: expected ")  # said before the first call
    started = run.stderr.readline()  # "team started": the team session exists, and its id is on the line
    team_id = started.split("zero swarm watch ")[1].strip()
    running = zero("swarm", "watch", team_id)  # follows it while it runs, until it ends
    run.communicate(timeout=60)
    finished = zero("swarm", "watch", team_id)
    tree = zero("sessions", "tree", team_id)
    for done in (running, finished, tree):
        assert done.returncode == 0, done.stderr
        assert "stalled" not in done.stdout
        last = done.stdout.split("repo-review")[-1]
        members = re.findall(r"── ✓ ([a-z]+)(?: [0-9a-f]{8})? · ", last)
        assert members == ["mapper", "reviewer", "tester", "reporter"], done.stdout
        assert "4 completed" in last
    assert summary(running.stdout.split("repo-review")[-1]) == summary(tree.stdout) == summary(finished.stdout)
    assert len(summary(tree.stdout)) == 4
    totals = [
        re.search(r"repo-review(?: [0-9a-f]{8})? · [^\n]*?([\d,.]+k? tok \$[\d.]+)", t.stdout)  # 9,876 or 10.0k
        for t in (running, finished, tree)
    ]
    assert len({m.group(1) for m in totals if m}) == 1 and all(totals)  # the team's total too
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    member = next(m for m in store.list() if m.session_kind == "member")
    refused = zero("swarm", "watch", member.session_id)
    assert refused.returncode == 2
    assert f"zero swarm watch {team_id}" in refused.stderr and "is a member of the run" in refused.stderr


def test_watching_a_run_that_never_started_ends_at_once(tmp_path: Path) -> None:
    """A team session its process left before its first event (killed as it began) is pending, and nothing
    runs it: the watch says so and ends, rather than wait for ever."""
    store = FileSessionStore(Path(os.environ["ZERO_HOME"]) / "sessions")
    store.create(SessionMetadata(session_id="team_1", session_kind="team", team_name="stillborn"))
    store.release("team_1")
    store.flush()
    done = zero("swarm", "watch", "last")
    assert done.returncode == 1 and "○ stillborn" in done.stdout
    assert done.stderr == "zero: error: the run team_1 never started, and no process runs it\n"
