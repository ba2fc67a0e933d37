"""The bundled synthetic demo set, and the lookup the simulated world uses to find its truth."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memearena.data.meme import Meme


def demo_dir() -> Path:
    """The folder of the bundled synthetic demo set (``memes.jsonl`` + ``img/``)."""
    return Path(__file__).resolve().parent / "demo"


def normalize_text(text: str) -> str:
    """Lowercase and collapse whitespace: the key meme text is looked up by."""
    return " ".join(text.lower().split())


def demo_annotations(memes: Iterable[Meme]) -> dict[str, dict[str, Any]]:
    """Map each meme's normalized text to its annotations plus ``id`` and ``label`` (0/1).

    The simulated world sees only the prompt; it finds the world facts of the meme it is asked
    about (category, target, facts, false_facts, misbelief, harm, label) by the meme text in it.
    ``label`` is present only for memes with a harmful label.
    """
    out: dict[str, dict[str, Any]] = {}
    for m in memes:
        entry: dict[str, Any] = {**m.annotations, "id": m.id}
        if m.harmful is not None:
            entry["label"] = int(m.harmful)
        out[normalize_text(m.text)] = entry
    return out
