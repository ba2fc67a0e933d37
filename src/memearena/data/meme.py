"""The one typed meme every loader produces."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Meme(BaseModel):
    """One meme: an image and its overlaid text, with whatever labels its dataset gives."""

    model_config = ConfigDict(frozen=True)

    id: str
    """Identifier, unique within its source (e.g. the FHM id)."""
    source: str
    """Dataset format it was loaded from (fhm, harm, mami, folder, jsonl, csv, demo, ...)."""
    text: str = ""
    """Text written on the meme (transcription / caption)."""
    image_path: Path | None = None
    """Absolute path of the image, inside the dataset root; None for text-only items."""
    erased_image: Path | None = None
    """Absolute path of the same image with its text erased (inpainted), when the dataset has
    one (an ``erased_image`` field, the dataset's ``erased_dir``, or AdamMeme's ``image/erased/``
    beside ``image/ori/``); Adapt shows it with a rewritten text."""
    harmful: bool | None = None
    """Binary harmfulness label when the dataset has one."""
    labels: list[str] = Field(default_factory=list)
    """Raw labels as the dataset spells them (e.g. ['somewhat harmful', 'individual'])."""
    split: str | None = None
    """Dataset split (train / dev_seen / test ...), when known."""
    annotations: dict[str, Any] = Field(default_factory=dict)
    """Extra fields: demo-set world facts (category, target, facts, misbelief) or row extras."""

    @property
    def uid(self) -> str:
        """Globally unique key: ``source:id``."""
        return f"{self.source}:{self.id}"


@dataclass(frozen=True)
class ItemError:
    """One item that could not be loaded, and why."""

    source: str
    """The dataset file (or folder) the item comes from."""
    item: str
    """The item's id, or ``line N`` when the row was too malformed to have one."""
    reason: str
    """What is wrong, starting with its kind (e.g. ``missing image: /data/img/1.png``)."""

    @property
    def kind(self) -> str:
        """The class of problem: the reason up to its first ``': '`` (e.g. ``missing image``)."""
        return self.reason.split(": ", 1)[0]
