"""Request-rate limiting and retry backoff."""

from __future__ import annotations

import asyncio
import random

__all__ = ["RateLimiter", "backoff_delay"]


class RateLimiter:
    """A smooth token bucket of capacity one: requests are spaced ``60 / rpm`` seconds apart,
    never bursting (a burst right after a quiet spell is what trips providers' limiters)."""

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self._next = 0.0

    async def acquire(self) -> None:
        """Wait for this request's slot."""
        now = asyncio.get_running_loop().time()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)


def backoff_delay(
    attempt: int,
    rng: random.Random,
    *,
    base: float = 0.5,
    cap: float = 30.0,
    retry_after: float | None = None,
) -> float:
    """Seconds before retry number ``attempt`` (1-based): exponential backoff with full jitter,
    never shorter than the server's Retry-After."""
    delay = rng.uniform(0.0, min(cap, base * 2 ** (attempt - 1)))
    if retry_after is not None:
        delay = max(delay, min(retry_after, max(cap, 60.0)))
    return delay
