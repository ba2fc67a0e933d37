"""Misbelief statements: per (meme, category), the generalised false belief that makes the meme
harmful, standalone (the parser re-asks a statement that mentions or quotes the meme)."""

from __future__ import annotations

from memearena.data import Meme
from memearena.methods.adapt.common import AdaptContext, Category, parse_misbelief

__all__ = ["misbelief"]


async def misbelief(ctx: AdaptContext, meme: Meme, category: Category) -> str | None:
    """The narrator's misbelief statement, or None (refused, unparsed, or a model error)."""
    art = await ctx.step(
        "adapt.misbelief",
        (meme.uid, category.name),
        ctx.acfg.narrator,
        "adapt.narrator",
        "adapt/narrator.j2",
        lambda t: parse_misbelief(t, meme.text),
        lambda v: {"misbelief": v},
        image=ctx.image(meme),
        meme_text=meme.text,
        category=category.name,
        description=category.description,
    )
    ctx.progress.advance("misbeliefs")
    return art.get("misbelief") if art else None
