"""The pre-flight estimate of ``zero swarm validate`` and ``run``: from prompt sizes, then from recorded runs,
and ``run``'s refusal of a team whose expected figures exceed its budget."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from support.cli import lines, scripted, write_script, zero
from support.llm_server import LLMServer, Reply, openai_reply

from zero.agent import Message, ToolSpec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests/teams/repo-review.toml"
EXAMPLE_SCRIPT = REPO / "manifests/teams/repo-review.script.toml"

PAIR = """
name = "pair"
[defaults]
model = "gpt-4.1-mini"
max_turns = 6
[budget]
{budget}
[[members]]
name = "looker"
specialist = "explorer"
prompt = "Look at the layout."
[[members]]
name = "judge"
specialist = "code-review"
depends_on = ["looker"]
prompt = "Judge this: {{{{ looker.output }}}}"
"""
LOOK = """
[[turns]]
match = {{ system = "{who}", turn = 1 }}
times = {times}
tool_calls = [{{ name = "list_directory", arguments = {{ path = "." }} }}]
[[turns]]
match = {{ system = "{who}", turn = 2 }}
times = {times}
text = "{answer}"
"""


def look(times: int = 1) -> str:
    """An explorer and a code reviewer that each list the workspace, then answer (``times``: 0, any number)."""
    explorer = LOOK.format(who="You are the explorer", answer="A README and src/app.py.", times=times)
    return explorer + LOOK.format(who="You are the code reviewer", answer="One TODO in src/app.py.", times=times)


PAIR_SCRIPT = look()


def estimate(*args: str) -> dict[str, Any]:
    done = zero("swarm", "validate", *args, "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)["estimate"]
    return found


def by_name(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in found["members"]}


def test_from_prompt_sizes_then_from_what_the_members_spent(workspace: Path, tmp_path: Path) -> None:
    team = str(write_script(tmp_path / "team.toml", PAIR.format(budget="")))
    script = write_script(tmp_path / "s.toml", PAIR_SCRIPT)
    cold = estimate(team, *scripted(script, workspace))
    looker, judge = by_name(cold)["looker"], by_name(cold)["judge"]
    assert (looker["source"], looker["runs"]) == ("prompt sizes", 0)
    assert looker["calls"] == {"low": 1, "expected": 4, "high": 6}  # expected: 4 calls, never above max_turns
    low, expected, high = (looker["tokens"][k] for k in ("low", "expected", "high"))
    first = looker["firstPromptTokens"]
    assert low == first + 200  # one call sending its first prompt, answering 200 tokens
    assert expected == 4 * first + (0 + 1 + 2 + 3) * 1200 + 4 * 400  # each later call 400 + 800 tokens more
    assert expected < high
    assert judge["firstPromptTokens"] > first  # the looker's report is taken into the judge's prompt
    assert cold["tokens"]["expected"] == looker["tokens"]["expected"] + judge["tokens"]["expected"]
    assert cold["costUsd"]["expected"] > 0

    done = zero("swarm", "run", team, *scripted(script, workspace), "--output-format", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["estimate"] == cold  # the run's result says what it expected
    spent = {m["name"]: m["usage"] for m in result["members"]}
    warm = by_name(estimate(team, *scripted(script, workspace)))
    for name in ("looker", "judge"):
        assert (warm[name]["source"], warm[name]["runs"]) == ("team history", 1)
        assert warm[name]["tokens"]["expected"] == spent[name]["totalTokens"]
        assert warm[name]["calls"] == {"low": 2, "expected": 2, "high": 2}
        assert warm[name]["costUsd"]["expected"] == spent[name]["costUsd"]

    text = zero("swarm", "validate", team, *scripted(script, workspace)).stdout
    assert "calls 2 / 2 / 2 · cost $0.00" in text and "from team history (1 run)" in text
    assert "\n  total            tokens " in text
    # another team of the same specialists on the same model: drawn from what they spent as members
    other = write_script(tmp_path / "other.toml", PAIR.format(budget="").replace('name = "pair"', 'name = "other"'))
    assert {m["source"] for m in estimate(str(other), *scripted(script, workspace))["members"]} == {
        "specialist history"
    }


def test_the_first_prompt_is_what_the_first_call_sends(workspace: Path, tmp_path: Path) -> None:
    team = str(write_script(tmp_path / "team.toml", PAIR.format(budget="")))

    def respond(request: dict[str, Any]) -> Reply:
        return openai_reply("Done.")

    with LLMServer(respond) as server:
        found = by_name(estimate(team, "--base-url", server.url, "--cwd", str(workspace)))
        done = zero("swarm", "run", team, "--base-url", server.url, "--cwd", str(workspace), "--no-live")
        assert done.returncode == 0, done.stderr
        first = server.requests[0]
    messages = [Message(role=m["role"], content=m["content"]) for m in first["messages"]]
    tools = [ToolSpec(**{k: t["function"][k] for k in ("name", "description", "parameters")}) for t in first["tools"]]
    assert "looker" in messages[0].content
    assert found["looker"]["firstPromptTokens"] == sum(m.tokens for m in messages) + sum(t.tokens for t in tools)


def test_a_team_expected_to_spend_more_than_its_budget_is_refused_before_any_call(
    workspace: Path, tmp_path: Path
) -> None:
    team = str(write_script(tmp_path / "team.toml", PAIR.format(budget="tokens = 12_000")))
    with LLMServer(lambda request: openai_reply("Done.")) as server:
        run = ("swarm", "run", team, "--base-url", server.url, "--cwd", str(workspace))
        expected = estimate(team, "--base-url", server.url, "--cwd", str(workspace))["tokens"]["expected"]
        refused = zero(*run)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr == (
            f"zero: error: team 'pair' not started, no model called: expected {expected:,} tokens is more than "
            f"budget.tokens = 12,000. Raise budget.tokens in {team} (or --budget-tokens), or pass "
            "--accept-estimate to run anyway (the budget still stops the run when it is spent)\n"
        )
        streamed = zero(*run, "--output-format", "stream-json")
        error, end = lines(streamed.stdout)[-2:]
        assert (streamed.returncode, error["type"], end["exitCode"]) == (2, "error", 2)
        assert "budget.tokens = 12,000" in error["message"]
        assert server.requests == []  # no model call
        assert not (Path(os.environ["ZERO_HOME"]) / "sessions").exists() or zero("sessions", "list").stdout == ""
        by_one = zero(*run, "--budget-tokens", str(expected - 1))  # refused however little it is over
        assert by_one.returncode == 2 and f"budget.tokens = {expected - 1:,}. Raise" in by_one.stderr
        # a cost over the budget names budget.cost_usd and its flag
        cost = zero(*run, "--budget-tokens", "none", "--budget-cost", "0.001")
        assert cost.returncode == 2 and "is more than budget.cost_usd = $0.0010. Raise budget.cost_usd in " in (
            cost.stderr
        )
        assert "(or --budget-cost)" in cost.stderr and server.requests == []
        accepted = zero(*run, "--accept-estimate", "--output-format", "json")
        assert accepted.returncode == 0, accepted.stderr
        assert len(server.requests) == 2 and json.loads(accepted.stdout)["budget"]["used"]["tokens"] < 12_000


def test_run_says_the_expected_figure_before_the_first_call_and_dry_run_prints_the_estimate(
    workspace: Path, tmp_path: Path
) -> None:
    team = str(write_script(tmp_path / "team.toml", PAIR.format(budget="")))
    script = write_script(tmp_path / "s.toml", PAIR_SCRIPT)
    found = estimate(team, *scripted(script, workspace))
    dry = zero("swarm", "run", team, *scripted(script, workspace), "--dry-run", "--output-format", "json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["estimate"] == found
    text = zero("swarm", "run", team, *scripted(script, workspace), "--dry-run").stdout
    assert 'Estimate, low / expected / high (docs/TEAMS.md, "The estimate"):' in text
    assert "  looker           tokens " in text and "from prompt sizes (" in text
    run = zero("swarm", "run", team, *scripted(script, workspace), "--no-live")
    assert run.returncode == 0, run.stderr
    expected = f"{found['tokens']['expected'] / 1000:.1f}k tokens, {found['calls']['expected']} model calls"
    assert run.stderr.splitlines()[0] == (
        f"estimate: expected {expected}, ${found['costUsd']['expected']:.4f} "
        f"(high {found['tokens']['high'] / 1000:.1f}k tokens)"
    )
    assert "team started" in run.stderr.splitlines()[1]


def crew(name: str, size: int) -> str:
    """A team of ``size`` explorers and reviewers, each after the member two before it."""
    body = f'name = "{name}"\n[defaults]\nmodel = "gpt-4.1-mini"\n'
    for i in range(1, size + 1):
        specialist = "explorer" if i % 2 else "code-review"
        after = f'depends_on = ["m{i - 2}"]\n' if i > 2 else ""
        task = f"{{{{ m{i - 2}.output }}}}" if i > 2 else "the layout"
        body += f'[[members]]\nname = "m{i}"\nspecialist = "{specialist}"\n{after}prompt = "Part {i} of {task}."\n'
    return body


def test_the_estimate_from_recorded_runs_is_within_a_quarter_of_what_a_run_spends(
    workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "s.toml", look(times=0))

    def run(team: Path, cwd: Path, *flags: str) -> dict[str, Any]:
        done = zero("swarm", "run", str(team), *flags, "--cwd", str(cwd), "--output-format", "json")
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    flags = ("--provider", "scripted", "--script", str(script))
    run(write_script(tmp_path / "five.toml", crew("five", 5)), workspace, *flags)
    twenty = write_script(tmp_path / "twenty.toml", crew("twenty", 20))
    drawn = run(twenty, workspace, *flags)
    assert {m["source"] for m in drawn["estimate"]["members"]} == {"specialist history"}
    expected, spent = drawn["estimate"]["tokens"]["expected"], drawn["usage"]["totalTokens"]
    assert abs(expected - spent) <= 0.25 * spent, (expected, spent)
    assert drawn["estimate"]["calls"]["expected"] == drawn["usage"]["calls"] == 40
    # the repository's example team, run twice: the second run's estimate is drawn from the first
    example = ("--provider", "scripted", "--script", str(EXAMPLE_SCRIPT))
    run(EXAMPLE, REPO, *example)
    again = run(EXAMPLE, REPO, *example)
    assert {m["source"] for m in again["estimate"]["members"]} == {"team history"}
    expected, spent = again["estimate"]["tokens"]["expected"], again["usage"]["totalTokens"]
    assert abs(expected - spent) <= 0.25 * spent, (expected, spent)
