"""Audit items: unbiased triplets with their perturbed variants.

Two sources: MM-JudgeBias rows as published (both variants given), and memes, where the query
is a question about the meme, the response a configured model's answer, and the variants are
generated (``perturb``). The bootstrap unit is the item: a meme (all its responders and bias
types together) or an MM-JudgeBias row.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from memearena.config import ImageConfig
from memearena.data import Meme
from memearena.data.images import encode_image
from memearena.data.mmjudgebias import JudgeBiasRow
from memearena.methods.judge_audit.perturb import SHOWS_KEY, AuditImage, ImageStore, Triplet

__all__ = [
    "INTEGRALITY_OVERLAP",
    "AuditPair",
    "integrality_check",
    "meme_image",
    "meme_query",
    "pair_from_row",
    "text_only_query",
    "unbiased_for",
]

INTEGRALITY_OVERLAP = 0.5
"""A query restates the meme's text when it holds at least this share of the text's words."""


@dataclass(frozen=True)
class AuditPair:
    """One unbiased/perturbed pair of triplets to be scored by every judge."""

    item: str
    """The sampled unit (meme uid or ``mm-judgebias:<id>``)."""
    bias_type: str
    """One of the nine bias types."""
    unbiased: Triplet
    """The reference triplet."""
    biased: Triplet
    """The perturbed triplet."""
    responder: str | None = None
    """The model whose answer is the response (None for MM-JudgeBias rows)."""
    meta: dict[str, str] = field(default_factory=dict)
    """Source details shown in the report."""


def meme_query(meme: Meme, queries: list[str], seed: int) -> str:
    """The question asked about a meme: one of ``queries`` drawn by (seed, meme), with
    ``{meme_text}`` filled in."""
    rng = random.Random(f"{seed}\x1fquery\x1f{meme.uid}")
    template = queries[rng.randrange(len(queries))] if len(queries) > 1 else queries[0]
    text = " ".join(meme.text.split())
    return template.replace("{meme_text}", text)


def meme_image(meme: Meme, store: ImageStore, image_cfg: ImageConfig) -> AuditImage | None:
    """The meme's image, checked and resized by the safe image path, then stored by hash."""
    if meme.image_path is None:
        return None
    return _stored(meme.image_path, store, meme.text or meme.uid, image_cfg)


def text_only_query(meme: Meme) -> str:
    """A self-contained question about a meme's text alone (the text-only item that
    ``unnecessary_image`` adds an irrelevant image to)."""
    text = " ".join(meme.text.split())
    return (
        f"A meme's overlaid text reads “{text}”. Judging from this text alone: is it harmful, "
        "to whom, and why?"
    )


def unbiased_for(
    bias_type: str, base: Triplet, text_query: str, text_response: str | None
) -> Triplet | None:
    """The unbiased triplet a bias type compares against: the base, except for
    ``unnecessary_image``, whose reference is the text-only item (its own self-contained
    question, no image, and the answer written for that question; None without one)."""
    if bias_type == "unnecessary_image":
        if text_response is None:
            return None
        return Triplet(text_query, None, text_response)
    return base


def _words(text: str) -> list[str]:
    return [w for w in "".join(c if c.isalnum() else " " for c in text.lower()).split() if w]


def _share(part: str, whole: str) -> float:
    """The share of ``part``'s words that occur in ``whole``."""
    words = _words(part)
    have = set(_words(whole))
    return sum(w in have for w in words) / len(words) if words else 0.0


def integrality_check(bias_type: str, query: str, meme_text: str) -> str | None:
    """Why an integrality pair of a meme would not test what its type means (None: it does).
    ``text_dominance`` removes the image: the query must not restate the meme's text, or the
    image was not needed and a kept score is a fair non-penalty. ``image_dominance`` removes
    the query: the meme's text must not restate the query."""
    if not meme_text.strip() or not query.strip():
        return None
    if bias_type == "text_dominance" and _share(meme_text, query) >= INTEGRALITY_OVERLAP:
        return (
            "text_dominance: the query restates the meme's text, so the item does not depend "
            "on its image"
        )
    if bias_type == "image_dominance" and _share(query, meme_text) >= INTEGRALITY_OVERLAP:
        return "image_dominance: the meme's text restates the query, so the query is not needed"
    return None


def _stored(path: Path, store: ImageStore, shows: str, image_cfg: ImageConfig) -> AuditImage:
    # The safe path's bytes with the metadata added: the same bytes as decoding and storing
    # them again (a PNG), never a second JPEG generation.
    enc = encode_image(path, image_cfg)
    return store.put_encoded(enc.data, enc.mime, (enc.width, enc.height), {SHOWS_KEY: shows})


def pair_from_row(row: JudgeBiasRow, store: ImageStore, image_cfg: ImageConfig) -> AuditPair:
    """An MM-JudgeBias row as an audit pair (its images re-encoded into the store)."""
    shows = f"mm-judgebias item {row.id}"
    u_img = _stored(row.unbiased_image, store, shows, image_cfg) if row.unbiased_image else None
    b_img = None
    if row.biased_image is not None:
        b_shows = shows
        if row.biased_image == row.unbiased_image:
            b_img = u_img
        else:
            b_shows = f"mm-judgebias item {row.id} ({row.bias_type} image)"
            b_img = _stored(row.biased_image, store, b_shows, image_cfg)
    return AuditPair(
        item=f"mm-judgebias:{row.id}",
        bias_type=row.bias_type,
        unbiased=Triplet(row.unbiased_instruction, u_img, row.response),
        biased=Triplet(row.biased_instruction, b_img, row.response),
        meta={k: str(v) for k, v in row.meta.items()},
    )
