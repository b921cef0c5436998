"""``zero`` as a user with a local model server runs it: against ``LocalModel``, rude as llama-cpp-python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.cli import write_script, zero
from support.llm_server import LLMServer
from support.local_server import ROLES_ERROR, Answer, LocalModel, turns

from zero.cli.config import Config, Configs, resolve_settings

LONG = Answer("All work and no play makes Jack a dull boy. " * 200)
READ = Answer("", [("read_file", {"path": "README.md"})])


def local(server: LLMServer, *args: str) -> list[str]:
    return ["--base-url", server.url + "/v1", "--model", "local-llm", *args]


def test_exec_with_an_output_cap_exits_4_and_names_it(workspace: Path) -> None:
    with LLMServer(LocalModel(turns(LONG))) as server:
        done = zero("exec", "write a lot", "--cwd", str(workspace), *local(server, "--max-output-tokens", "20"))
        sent = server.requests[0]
    assert done.returncode == 4, done.stderr
    assert sent["max_tokens"] == 20
    assert "output cap of 20 tokens" in done.stderr and "--max-output-tokens" in done.stderr
    assert "output_capped" in done.stderr and "cost unknown" in done.stderr and "~" in done.stderr


def test_swarm_run_with_an_output_cap_exits_4_and_names_it(workspace: Path, tmp_path: Path) -> None:
    team = write_script(
        tmp_path / "team.toml",
        'name = "t"\n[[members]]\nname = "writer"\nspecialist = "explorer"\nprompt = "write a lot"\n',
    )
    with LLMServer(LocalModel(turns(LONG))) as server:
        done = zero(
            "swarm", "run", str(team), "--cwd", str(workspace), "--output-format", "json",
            *local(server, "--max-output-tokens", "20"),
        )  # fmt: skip
    assert done.returncode == 4, done.stderr
    result = json.loads(done.stdout)
    member = result["members"][0]
    assert member["status"] == "output_capped" and "output cap of 20 tokens" in member["reason"]
    assert member["usage"]["estimated"] is True and member["costUsd"] is None  # unknown, never $0


def test_a_failed_run_of_an_unpriced_model_costs_unknown(workspace: Path) -> None:
    model = LocalModel(turns(LONG), context_chars=5)  # every request is too long for the server
    with LLMServer(model) as server:
        done = zero("exec", "hi", "--cwd", str(workspace), "--output-format", "json", *local(server))
    result = json.loads(done.stdout)
    assert done.returncode == 3 and result["status"] == "failed"
    assert result["costUsd"] is None and result["usage"]["costUsd"] is None  # was 0.0


def test_a_malformed_stream_in_exec_gives_error_and_run_end_and_a_failed_session(workspace: Path) -> None:
    with LLMServer(LocalModel(turns(LONG), malformed=99)) as server:
        done = zero(
            "exec", "hi", "--cwd", str(workspace), "--output-format", "stream-json",
            *local(server, "--retry-max-delay", "0.01"),
        )  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 3 and "Traceback" not in done.stderr
    assert [e["type"] for e in events[-2:]] == ["error", "run_end"] and events[-2]["code"] == "stream_dropped"
    assert "malformed" in events[-2]["message"]


def test_openai_base_url_alone_selects_the_openai_compatible_provider() -> None:
    settings = resolve_settings(
        Configs(),
        provider=None,
        model="m",
        base_url=None,
        permission_mode=None,
        max_turns=None,
        environ={"OPENAI_BASE_URL": "http://localhost:8080/v1"},
    )
    assert settings.provider == "openai-compatible" and settings.base_url == "http://localhost:8080/v1"


def test_a_servers_options_apply_with_or_without_the_urls_last_slash() -> None:
    for key, url in (("http://localhost:8080/v1/", "http://localhost:8080/v1"), ("http://h/v1", "http://h/v1/")):
        configs = Configs(
            user=Config.model_validate({"servers": {key: {"stream_tools": False, "text_tool_calls": False}}})
        )
        settings = resolve_settings(
            configs, provider=None, model="m", base_url=url, permission_mode=None, max_turns=None, environ={}
        )
        assert (settings.options.stream_tools, settings.options.text_tool_calls) == (False, False)


def test_retries_and_timeouts_are_settings(workspace: Path, tmp_path: Path) -> None:
    home = tmp_path / "config"
    (home / "zero").mkdir(parents=True)
    (home / "zero" / "config.toml").write_text("retries = 0\n")
    env = {"XDG_CONFIG_HOME": str(home)}
    model = LocalModel(turns(LONG), malformed=99)
    with LLMServer(model) as server:
        done = zero("exec", "hi", "--cwd", str(workspace), *local(server), env=env)
        assert done.returncode == 3 and len(server.requests) == 1  # config: no retry
        done = zero(
            "exec",
            "hi",
            "--cwd",
            str(workspace),
            *local(server, "--retries", "2", "--retry-max-delay", "0.01"),
            env=env,
        )
        assert len(server.requests) == 1 + 3  # the flag wins over the config
    slow = LocalModel(turns(LONG))

    def late(request: dict[str, Any]) -> Any:
        reply = slow(request)
        reply.delay = 2.0
        return reply

    with LLMServer(late) as server:
        done = zero("exec", "hi", "--cwd", str(workspace), *local(server, "--retries", "0", "--read-timeout", "0.3"))
    assert done.returncode == 3 and "timed out: nothing came for 0.3 s (ReadTimeout); --read-timeout" in done.stderr


def test_server_errors_say_the_status_the_servers_message_and_the_setting_that_helps(workspace: Path) -> None:
    with LLMServer(LocalModel(turns(READ, LONG), template_error=True)) as server:
        done = zero("exec", "hi", "--cwd", str(workspace), *local(server, "--retry-max-delay", "0.01"))
        assert len(server.requests) == 3  # the second turn fails the same way twice: not tried a third time
    assert done.returncode == 3
    assert [line for line in done.stderr.splitlines() if line.startswith("zero: error")] == [
        f"zero: error: openai-compatible API error 500: {ROLES_ERROR}. The server failed on this request (its "
        "log says why); Zero retries it, but not after the same failure twice"
    ]
    with LLMServer(LocalModel(turns(LONG), loading=1)) as server:
        done = zero("exec", "hi", "--cwd", str(workspace), *local(server, "--retries", "0"))
    assert done.returncode == 3
    assert done.stderr.splitlines()[0] == (
        "zero: error: openai-compatible API error 503: Loading model. The model is still loading: Zero retries; "
        "--retries and --retry-max-delay wait longer"
    )


def test_a_cost_limit_on_an_unpriced_model_says_both_ways_out(workspace: Path) -> None:
    demo = Path(__file__).parents[2] / "manifests" / "teams" / "repo-review.toml"
    with LLMServer(LocalModel(turns(Answer("done")))) as server:
        done = zero("swarm", "validate", str(demo), "--cwd", str(workspace), *local(server))
        assert done.returncode == 2
        assert "--budget-cost none" in done.stderr and '[prices."local-llm"]' in done.stderr
        lifted = zero(
            "swarm", "validate", str(demo), "--cwd", str(workspace), "--budget-cost", "none", *local(server)
        )  # fmt: skip
    assert lifted.returncode == 0, lifted.stderr


def test_a_call_written_as_text_runs_resumes_the_same_and_text_tool_calls_false_turns_it_off(
    workspace: Path, tmp_path: Path
) -> None:
    model = LocalModel(turns(READ, Answer("The README says 42.")), calls_as_text="tagged")
    ask = ("what does the README say?", "--cwd", str(workspace), "--output-format", "json")
    with LLMServer(model) as server:
        done = zero("exec", *ask, *local(server))
        result = json.loads(done.stdout)
        assert done.returncode == 0 and result["result"] == "The README says 42.", done.stderr
        url = f"{server.url}/v1"
        assert [w["code"] for w in result["warnings"]] == ["tool_mode", "stream_restarted"]
        assert f'set text_tool_calls = false under [servers."{url}"] in config.toml' in result["warnings"][0]["message"]
        sent = server.requests[1]["messages"]
        assert sent[2]["content"] == "" and sent[2]["tool_calls"][0]["function"]["name"] == "read_file"
        again = zero("sessions", "resume", result["sessionId"], "and now?", "--cwd", str(workspace), *local(server))
        assert again.returncode == 0, again.stderr
        assert server.requests[2]["messages"][: len(sent)] == sent  # the log gives the server the same history
        home = tmp_path / "config"
        (home / "zero").mkdir(parents=True)
        (home / "zero" / "config.toml").write_text(f'[servers."{url}"]\ntext_tool_calls = false\n')
        off = zero("exec", *ask, *local(server), env={"XDG_CONFIG_HOME": str(home)})
    result = json.loads(off.stdout)
    assert off.returncode == 0 and result["result"].startswith("<tool_call>") and result["warnings"] == []
