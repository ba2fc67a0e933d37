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

    def __init__(self, message: str = "", *, kind: str = "model_error") -> None:
        super().__init__(message)
        self.kind = kind  # the reason recorded with the call (``auth``, ``bad_response``, ...)


class TransientModelError(ModelError):
    """A model call failed in a way worth retrying (429, 5xx, timeout, connection reset)."""

    def __init__(
        self, message: str, retry_after: float | None = None, *, kind: str = "transient"
    ) -> None:
        super().__init__(message, kind=kind)
        self.retry_after = retry_after


class BadResponse(TransientModelError):
    """A reply that is not a well-formed completion (recorded as ``bad_response``, retried as
    configured, never cached)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="bad_response")


class EndpointError(ModelError):
    """An endpoint that cannot serve this model at all (connection refused, unknown host, 401,
    403, 404, missing key): never retried, and no further call to the model is sent."""


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
