"""The one error hierarchy. Messages name the file, line or field; the CLI prints one line."""

from __future__ import annotations


class MemearenaError(Exception):
    """Base of every error memearena raises on purpose (user-facing, one line)."""


class ConfigError(MemearenaError):
    """A run config is invalid: the message names the field and the problem."""


class DataError(MemearenaError):
    """A dataset file or item is malformed: the message names the file and line or item."""


class ModelError(MemearenaError):
    """A model call failed for good (after retries), or an endpoint is misconfigured."""


class TransientModelError(ModelError):
    """A model call failed in a way worth retrying (429, 5xx, timeout, connection reset)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BudgetExceeded(MemearenaError):
    """The next call would push the run's cost past --max-cost; the run stops cleanly."""


class StoreError(MemearenaError):
    """The run database cannot be opened or written."""


class RunLockedError(StoreError):
    """Another process is running in the same run directory (one writer per directory)."""


class IncompatibleRunError(StoreError):
    """A run directory holds a run of another identity (e.g. other datasets) than the config."""


class ParseError(MemearenaError):
    """An agent's output does not match its schema."""
