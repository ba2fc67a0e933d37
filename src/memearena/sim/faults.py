"""Deterministic fault injection for the simulated server: the same seed and request sequence
number always draw the same fault, so a failing test replays exactly."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FAULTS", "FaultPlan", "garble"]

FAULTS: tuple[str, ...] = ("429", "500", "timeout", "malformed")
"""Fault kinds: rate limit with Retry-After, server error, hang past the client's timeout,
and a 200 whose content is garbled or truncated."""


def _unit(seed: int, seq: int, salt: str) -> float:
    digest = hashlib.blake2b(f"{seed}:{seq}:{salt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True)
class FaultPlan:
    """Which requests fail, and how: a pure function of (seed, sequence number)."""

    fail_rate: float = 0.0
    seed: int = 0
    faults: tuple[str, ...] = FAULTS

    @classmethod
    def of(cls, fail_rate: float, seed: int, faults: Sequence[str]) -> FaultPlan:
        """A validated plan (unknown fault names raise ValueError)."""
        bad = [f for f in faults if f not in FAULTS]
        if bad:
            raise ValueError(f"unknown faults {bad}; choose from {list(FAULTS)}")
        if not 0.0 <= fail_rate <= 1.0:  # also refuses NaN
            raise ValueError(f"--fail-rate must be between 0 and 1, got {fail_rate:g}")
        if fail_rate > 0 and not faults:
            raise ValueError("fail_rate > 0 needs at least one fault kind")
        return cls(fail_rate, seed, tuple(faults))

    def draw(self, seq: int) -> str | None:
        """The fault for request number ``seq`` (0-based), or None."""
        if self.fail_rate <= 0.0 or _unit(self.seed, seq, "fail") >= self.fail_rate:
            return None
        return self.faults[int(_unit(self.seed, seq, "kind") * len(self.faults))]


def garble(text: str, seq: int, seed: int = 0) -> str:
    """A malformed version of ``text``: cut short and ending in noise."""
    cut = int(len(text) * (0.2 + 0.5 * _unit(seed, seq, "cut")))
    return text[:cut] + "\ufffd{\x00]]<|endoftext|"
