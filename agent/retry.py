"""Retry policy for model calls: exponential backoff with jitter, honouring Retry-After."""

from __future__ import annotations

import random
from dataclasses import dataclass

from zero.errors import ProviderError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``retries`` further attempts after the first, for retryable provider errors only."""

    retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 60.0

    def should_retry(self, error: ProviderError, attempt: int) -> bool:
        limit = self.retries if error.max_retries is None else min(self.retries, error.max_retries)
        return error.retryable and attempt <= limit

    def delay(self, error: ProviderError, attempt: int) -> float:
        """Seconds to wait before ``attempt`` (1 = the first retry)."""
        if error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.max_delay)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)
