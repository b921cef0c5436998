"""Turning an HTTP status and body into one of Zero's provider errors."""

from __future__ import annotations

from collections.abc import Mapping

import httpx2

from zero import errors
from zero.agent.governor import parse_retry_after

_CONTEXT_HINTS = (
    "context_length",
    "context length",
    "context window",
    "prompt is too long",
    "maximum context",
    "too many tokens",
)


WAIT_LONGER = "--retries and --retry-max-delay wait longer"


def status_error(
    provider: str, status: int, message: str, headers: Mapping[str, str], body_type: str = ""
) -> errors.ProviderError:
    """The Zero error for an HTTP error answer of ``provider``, with a hint of what to do; retried or not as the
    server's ``x-should-retry`` says, where it says."""
    error = _status_error(provider, status, message, headers, body_type)
    said = headers.get("x-should-retry")
    if said in ("true", "false") and not isinstance(error, errors.AuthError | errors.QuotaExhaustedError):
        error.retryable = said == "true"
    return error


def _status_error(
    provider: str, status: int, message: str, headers: Mapping[str, str], body_type: str
) -> errors.ProviderError:
    retry_after = parse_retry_after(headers)
    text = f"{provider} API error {status}: {message or f'HTTP {status}'}"
    lowered = f"{message} {body_type}".lower()
    if status in (401, 403) or "authentication" in body_type or "permission" in body_type:
        return errors.AuthError(f"{text}. Check the API key (and --base-url) for {provider}.", status=status)
    client_error = 400 <= status < 500 and status not in (408, 409, 429)  # the request's fault: never retried
    if "insufficient_quota" in lowered or "credit balance is too low" in lowered:
        return errors.QuotaExhaustedError(
            f"{text}. The account's quota or credit is spent, which waiting does not mend: check the plan and "
            f"billing of this API key for {provider}",
            status=status,
        )
    if status == 429 or ("rate_limit" in body_type and not client_error):
        return errors.RateLimitError(
            f"{text}. Zero waits and retries; {WAIT_LONGER}", status=status, retry_after=retry_after
        )
    if status in (408, 504):
        return errors.ProviderTimeoutError(
            f"{text}. The server gave up waiting; {WAIT_LONGER}", status=status, retry_after=retry_after
        )
    if "loading model" in lowered:  # llama.cpp's server answers 503 until the model is in memory
        return errors.OverloadedError(
            f"{text}. The model is still loading: Zero retries; {WAIT_LONGER}", status=status, retry_after=retry_after
        )
    if status == 500 and "overloaded" not in lowered:
        return errors.ServerError(
            f"{text}. The server failed on this request (its log says why); Zero retries it, but not after the "
            "same failure twice",
            status=status,
            retry_after=retry_after,
        )
    if status >= 500 or status == 409 or (not client_error and ("overloaded" in body_type or body_type == "api_error")):
        return errors.OverloadedError(
            f"{text}. The server is overloaded or restarting; {WAIT_LONGER}", status=status, retry_after=retry_after
        )
    if any(hint in lowered for hint in _CONTEXT_HINTS):
        return errors.ContextTooLongError(f"{text}. The conversation is too long for this model.", status=status)
    if status == 404:
        return errors.BadRequestError(f"{text}. Is the model name right for this provider?", status=status)
    return errors.BadRequestError(text, status=status)


def body_error(
    provider: str, status: int, body: object, fallback: str, headers: Mapping[str, str]
) -> errors.ProviderError:
    """``status_error`` for an error answer whose body may hold an ``error`` object (both APIs' shape):
    its message (else ``fallback``) and its kind."""
    body = body if isinstance(body, dict) else {}
    inner = body.get("error", body)
    inner = inner if isinstance(inner, dict) else {}
    message = str(inner.get("message") or fallback)
    return status_error(provider, status, message, headers, str(inner.get("code") or inner.get("type") or ""))


def transport_error(
    provider: str, url: object, e: BaseException, *, started: bool, timeouts: httpx2.Timeout
) -> errors.ProviderError:
    """The Zero error for a call that failed below HTTP: ``e`` is an httpx error, or an SDK's error made
    from one. It names what failed (the exception's text, else its type) and the setting that helps."""
    inner = e if isinstance(e, httpx2.HTTPError) or e.__cause__ is None else e.__cause__
    what = str(inner) or type(inner).__name__
    if isinstance(inner, httpx2.ConnectTimeout):
        return errors.ProviderTimeoutError(
            f"the {provider} API at {url} timed out: no connection within {timeouts.connect:g} s ({what}); "
            "--connect-timeout S waits longer"
        )
    if isinstance(inner, httpx2.TimeoutException) or "timeout" in type(e).__name__.lower():
        return errors.ProviderTimeoutError(
            f"the {provider} API at {url} timed out: nothing came for {timeouts.read:g} s ({what}); "
            "--read-timeout S waits longer"
        )
    if started:
        return errors.StreamDroppedError(
            f"the {provider} stream broke off ({what}); Zero asks again, as often as --retries says"
        )
    return errors.ProviderConnectionError(
        f"cannot reach the {provider} API at {url} ({what}): is the server running there, and is --base-url "
        f"right? For a server that is starting, {WAIT_LONGER}"
    )
