"""Retry policy for model calls: exponential backoff with jitter, honouring Retry-After."""

from __future__ import annotations

import random
from dataclasses import dataclass

from zero.errors import ProviderError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """``retries`` further attempts after the first, for retryable provider errors only."""

    retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 60.0

    def should_retry(self, error: ProviderError, attempt: int, repeats: int | None = None) -> bool:
        """Whether to try again after ``attempt`` (1 = the first) failed with ``error``. An error's own
        ``max_retries`` counts the attempts that failed with this same error, code and message (``repeats``;
        default: all of them): a 500 after a 429 is still retried, and so is one that names another request."""
        if not error.retryable or attempt > self.retries:
            return False
        return error.max_retries is None or (attempt if repeats is None else repeats) <= error.max_retries

    def delay(self, error: ProviderError, attempt: int) -> float:
        """Seconds to wait before ``attempt`` (1 = the first retry)."""
        if error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.max_delay)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)
