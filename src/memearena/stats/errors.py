"""Errors raised by the statistics module (all are `MemearenaError`s: the CLI prints one line)."""

from __future__ import annotations

from memearena.errors import MemearenaError


class StatsError(MemearenaError):
    """Input that a statistic cannot be computed on (empty, duplicated, inconsistent)."""


class DisconnectedComparisonError(StatsError):
    """The comparison graph has several components, so their ratings are not comparable."""

    def __init__(self, message: str, components: list[list[str]]) -> None:
        super().__init__(message)
        self.components = components


class UnboundedRatingsError(StatsError):
    """The Bradley–Terry MLE does not exist: some models never lost (or never won) to the rest."""

    def __init__(self, message: str, group: list[str]) -> None:
        super().__init__(message)
        self.group = group
