"""The ``echo:`` section of a run config."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from memearena.config import ConfigSection


class EchoConfig(ConfigSection):
    """The echo method: one model restates every meme's text."""

    model: str
    """The model asked (a key of ``models``)."""
    max_reasks: int = Field(1, ge=0, le=5)
    """Re-asks of an empty reply."""

    def model_refs(self) -> Iterable[tuple[str, str]]:
        return [("echo.model", self.model)]
