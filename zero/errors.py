"""Zero's one error root.

Every error Zero raises on purpose is a ``ZeroError``. The tree says who can fix it and which exit code
the CLI gives (the exit codes of README.md, "Using zero exec"); a class defined outside this module names,
in brackets, the package that exports it. ``tests/test_errors.py`` holds the drawing to the classes::

    ZeroError
    ├── UserError                         the user can fix it: usage or configuration (exit 2)
    │   ├── UsageError                    bad arguments or input
    │   │   ├── ControlRefused            a running team refused: no such member, or it ended [zero.orchestrator]
    │   │   └── ControlUnavailable        no run of that team listens: it ended, or was killed [zero.orchestrator]
    │   └── ConfigError                   a bad or missing setting, file or manifest
    │       ├── FileError                 a file with mistakes, each named by path, line and key [zero.strictfile]
    │       │   ├── ManifestError         a specialist manifest [zero.specialists]
    │       │   └── TeamError             a team file [zero.orchestrator]
    │       └── NotARepository            worktrees asked for in a folder outside any git repository [zero.tools]
    └── RunError                          something failed while running (exit 1)
        ├── ProviderError                 the model API failed (exit 3)
        │   ├── AuthError                 the API key was refused
        │   ├── BadRequestError           the request was refused as malformed
        │   │   └── ContextTooLongError   the conversation outgrew the model's context window
        │   ├── RateLimitError            retryable: HTTP 429
        │   ├── QuotaExhaustedError       HTTP 429 for an account whose quota is spent: waiting does not help
        │   ├── OverloadedError           retryable: HTTP 502, 503 or 529, or a model still loading
        │   ├── ServerError               retryable, once: HTTP 500 (the same request breaks the server again)
        │   ├── ProviderTimeoutError      retryable: no answer in time
        │   ├── ProviderConnectionError   retryable: the API could not be reached
        │   ├── StreamDroppedError        retryable: the stream ended before the answer did
        │   │   └── EmptyResponseError    retryable, once: it closed before its first chunk
        │   └── EmptyAnswerError          the model answered nothing (no text, no tool call), twice
        ├── BudgetExhaustedError          a token, cost, turn or time limit was reached (exit 4)
        ├── OutputCappedError             the final answer was cut at the output cap (exit 4)
        ├── InvalidOutputError            a typed result stayed invalid by its output schema, retries spent (exit 4)
        ├── ToolError                     a tool call could not be carried out; the model reads why
        │   ├── NotFound                  the path does not exist (yet) [zero.tools]
        │   └── OutsideWorkspace          the path, or a link on the way, leads outside the workspace [zero.tools]
        ├── GitError                      a git command Zero ran (a snapshot, a worktree, landing) failed [zero.tools]
        │   └── PlantedGitFolder          not run: git would read a git folder a command made [zero.tools]
        ├── SessionError                  the session store is missing or damaged
        │   └── SessionWriteError         a session's files could not be written (disk full, ...)
        ├── OutputError                   standard output could not be written (disk full, closed)
        └── InternalError                 a bug in Zero: it ends that agent's run, not the others'

Messages say what happened, why, and what to do.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AuthError",
    "BadRequestError",
    "BudgetExhaustedError",
    "ConfigError",
    "ContextTooLongError",
    "EmptyAnswerError",
    "EmptyResponseError",
    "InternalError",
    "InvalidOutputError",
    "OutputCappedError",
    "OutputError",
    "OverloadedError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "QuotaExhaustedError",
    "RateLimitError",
    "RunError",
    "ServerError",
    "SessionError",
    "SessionWriteError",
    "StreamDroppedError",
    "ToolError",
    "UsageError",
    "UserError",
    "ZeroError",
    "did_you_mean",
]


class ZeroError(Exception):
    """Root of every error Zero raises on purpose."""

    exit_code = 1
    code = "error"


class UserError(ZeroError):
    """The user can fix this: bad usage or configuration."""

    exit_code = 2
    code = "usage_error"


class UsageError(UserError):
    """Bad command-line arguments or input."""


class ConfigError(UserError):
    """A bad or missing setting, config file or manifest."""

    code = "config_error"


class RunError(ZeroError):
    """Something failed while the agent ran."""

    code = "run_error"


class ProviderError(RunError):
    """The model API failed. ``retryable`` errors are retried with backoff."""

    exit_code = 3
    code = "provider_error"
    retryable = False
    max_retries: int | None = None  # fewer retries of the same error than the policy allows, for errors that repeat

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class AuthError(ProviderError):
    """The API key was refused."""

    code = "auth_error"


class BadRequestError(ProviderError):
    """The API refused the request as malformed."""

    code = "bad_request"


class ContextTooLongError(BadRequestError):
    """The conversation no longer fits the model's context window."""

    code = "context_too_long"


class RateLimitError(ProviderError):
    """HTTP 429: too many requests or tokens."""

    code = "rate_limited"
    retryable = True


class QuotaExhaustedError(ProviderError):
    """HTTP 429 with ``insufficient_quota``: the account's plan or credit is spent, which no wait mends."""

    code = "quota_exhausted"


class OverloadedError(ProviderError):
    """HTTP 502, 503, 529 or an overloaded (or still loading) model."""

    code = "overloaded"
    retryable = True


class ServerError(ProviderError):
    """HTTP 500: the server failed on this request. The same failure is retried once at most: a request
    that breaks the server (a chat template that cannot render it, say) breaks it the same way again."""

    code = "server_error"
    retryable = True
    max_retries = 1


class ProviderTimeoutError(ProviderError):
    """The API did not answer in time."""

    code = "timeout"
    retryable = True


class ProviderConnectionError(ProviderError):
    """The API could not be reached."""

    code = "connection_error"
    retryable = True


class StreamDroppedError(ProviderError):
    """The response stream ended before the model finished."""

    code = "stream_dropped"
    retryable = True


class EmptyResponseError(StreamDroppedError):
    """A 200 answer whose stream closed before its first chunk: retried once at most, since the
    usual cause (a prompt longer than a local server's context) does not go away."""

    code = "empty_response"
    max_retries = 1


class EmptyAnswerError(ProviderError):
    """The model finished its answer with nothing in it (no text, no tool call) twice in a row: the loop
    asks once more after the first, since a sampling model may answer then."""

    code = "empty_answer"


class BudgetExhaustedError(RunError):
    """A budget limit was reached; no further model call may start."""

    exit_code = 4
    code = "budget_exhausted"

    def __init__(self, message: str, *, limit: str = ""):
        super().__init__(message)
        self.limit = limit


class OutputCappedError(RunError):
    """The model's final answer was cut at the output cap of the call."""

    exit_code = 4
    code = "output_capped"


class InvalidOutputError(RunError):
    """A typed agent's result did not match its output schema, and its retries are spent."""

    exit_code = 4
    code = "invalid_output"


class ToolError(RunError):
    """A tool call could not be carried out; its message goes back to the model."""

    code = "tool_error"


class SessionError(RunError):
    """A session is missing or its files are damaged."""

    code = "session_error"


class SessionWriteError(SessionError):
    """A session's log or metadata could not be written (disk full, a file-size limit, a read-only or
    failing disk): the run that writes it stops, and the session keeps its last whole event."""

    code = "session_write_error"


class OutputError(RunError):
    """Standard output could not be written (a full disk, a failing device, a closed descriptor): what the
    command said is lost, so it does not end as if all were well. A reader that left (a closed pipe, ``| head``)
    is not one: that is ``BrokenPipeError``, and quiet."""

    code = "output_error"


class InternalError(RunError):
    """A bug in Zero; ``detail`` is the traceback, kept in the session for the report."""

    code = "internal_error"

    def __init__(self, message: str, *, detail: str = ""):
        super().__init__(message)
        self.detail = detail


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean "x"?)' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""
