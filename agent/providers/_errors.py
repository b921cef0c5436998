"""Turning an HTTP status and body into one of Zero's provider errors."""

from __future__ import annotations

from collections.abc import Mapping

from zero import errors

_CONTEXT_HINTS = (
    "context_length",
    "context length",
    "context window",
    "prompt is too long",
    "maximum context",
    "too many tokens",
)


def status_error(
    provider: str, status: int, message: str, headers: Mapping[str, str], body_type: str = ""
) -> errors.ProviderError:
    """The Zero error for an HTTP error answer of ``provider``, with a hint of what to do."""
    retry_after = parse_retry_after(headers)
    text = f"{provider} API error {status}: {message}"
    lowered = f"{message} {body_type}".lower()
    if status in (401, 403) or "authentication" in body_type or "permission" in body_type:
        return errors.AuthError(f"{text}. Check the API key (and --base-url) for {provider}.", status=status)
    client_error = 400 <= status < 500 and status not in (408, 409, 429)  # the request's fault: never retried
    if status == 429 or ("rate_limit" in body_type and not client_error):
        return errors.RateLimitError(text, status=status, retry_after=retry_after)
    if status in (408, 504):
        return errors.ProviderTimeoutError(text, status=status, retry_after=retry_after)
    if status >= 500 or status == 409 or (not client_error and ("overloaded" in body_type or body_type == "api_error")):
        return errors.OverloadedError(text, status=status, retry_after=retry_after)
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


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds; HTTP dates are ignored)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return float(value) / scale
            except ValueError:
                continue
    return None
