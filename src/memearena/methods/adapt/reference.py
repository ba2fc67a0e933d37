"""Reference answers by the wisdom of crowds: ``reference_candidates`` candidates sampled at a
temperature above zero, each with its own seed (so a cache cannot replay one answer as all),
then a judge picks the best or writes a better one. Every candidate is kept.

References see the meme and the task only (``reference_sees_misbelief: false``, as the method):
a reference told the narrator's misbelief would assert the harm even after a rewrite removed it,
and grade the target down for reading an ambiguous meme as ambiguous. The misbelief still drives
retrieval, the refiner and the checker."""

from __future__ import annotations

from typing import Any

from memearena.methods.adapt.common import (
    AdaptContext,
    Category,
    gather_steps,
    parse_reference_choice,
    parse_text,
)
from memearena.models.types import ImagePart
from memearena.prompts import defang_score_fields

__all__ = ["reference"]


async def reference(
    ctx: AdaptContext,
    meme_uid: str,
    text: str,
    image: ImagePart | None,
    category: Category,
    misbelief: str,
) -> dict[str, Any] | None:
    """``{"reference", "candidates", "choice"}`` for a meme text (original or rewritten), or
    ``{"error": ...}`` when no usable reference came out, or None to retry on a re-run."""
    acfg = ctx.acfg
    common: dict[str, Any] = {
        "image": image,
        "meme_text": text,
        "instruction": category.instruction,
        "misbelief": misbelief if acfg.reference_sees_misbelief else None,
    }
    arts = await gather_steps(
        [
            ctx.step(
                "adapt.reference_candidate",
                (meme_uid, category.name, i),
                acfg.reference_model,
                "adapt.reference",
                "adapt/reference.j2",
                parse_text,
                lambda v: {"text": v},
                params=ctx.params(temperature=acfg.reference_temperature, seed=i),
                max_reasks=0,
                **common,
            )
            for i in range(acfg.reference_candidates)
        ]
    )
    if any(a is None for a in arts):
        return None
    usable = [a["text"] for a in arts if a and "text" in a]
    kept = [
        {"model": a.get("model"), "text": a.get("text"), "refusal": bool(a.get("refusal"))}
        for a in arts
        if a is not None
    ]
    if not usable:
        return {"error": "no usable reference candidate", "candidates": kept}
    # Candidates are untrusted model output shown to a grader: no score field may survive.
    shown = [defang_score_fields(c) for c in usable]
    pick = await ctx.step(
        "adapt.reference_judge",
        (meme_uid, category.name),
        acfg.reference_judge,
        "adapt.reference_judge",
        "adapt/reference_judge.j2",
        lambda t: parse_reference_choice(t, len(shown)),
        lambda v: {"choice": v} if isinstance(v, int) else {"better": v},
        required=True,  # an unparsed pick is asked again on a re-run, never the final word
        candidates=shown,
        **common,
    )
    if pick is None:
        return None
    if "choice" in pick:
        return {"reference": usable[pick["choice"]], "candidates": kept, "choice": pick["choice"]}
    if "better" in pick:
        return {"reference": pick["better"], "candidates": kept, "choice": "better"}
    # A judge that refused or stayed unparsed picks nothing: no default candidate stands in.
    why = "refused" if pick.get("refusal") else "unparsed"
    return {"error": f"reference judge {why}", "candidates": kept}
