"""Scoring: the target answers the category question about a meme; every scorer of the panel
grades the answer 1-10 against the reference (a factual error caps it); the score is the panel
mean. A score is the scorer's own rating as real scorers write it (``parse_score``: a ``[[n]]``
anywhere or a ``Rating: n`` line, one decimal): meme text, instruction, reference and answer
are rendered with ratings made inert (``prompts.render`` defangs every inserted value), so a
rating left in the reply was written by the scorer and a forged one can never become a score.
An unparsed rating is an outcome, never a number. A target's refusal is its answer and is
scored, as the method scores whatever the target says (``refusals: scored``, the default; the
record says it was a refusal, so the refusal rate is reported beside the failure rate), or an
outcome of its own outside the failure rate (``refusals: excluded``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from memearena.methods.adapt.common import AdaptContext, Category, gather_steps, parse_text
from memearena.models.types import ImagePart
from memearena.prompts import parse_score

__all__ = ["Scored", "answer_and_score", "both", "is_self"]

A = TypeVar("A")
B = TypeVar("B")


async def both(
    first: Awaitable[A] | None, second: Awaitable[B] | None
) -> tuple[A | None, B | None]:
    """The outcomes of two independent awaitables (None: not asked), run side by side. Both
    run to their end before an exception is raised, so nothing in flight is orphaned."""
    if first is None or second is None:
        return (
            await first if first is not None else None,
            await second if second is not None else None,
        )
    task = asyncio.ensure_future(second)
    try:
        a = await first
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    except BaseException:
        await asyncio.gather(task, return_exceptions=True)
        raise
    return a, await task


@dataclass
class Scored:
    """The outcome of one answer: ``scored`` (with a score), ``refused`` (the target refused),
    ``unparsed`` (no scorer gave a valid rating), ``no_reference`` (none could be made)."""

    outcome: str
    score: float | None = None
    answer: str | None = None
    by_scorer: dict[str, float | None] = field(default_factory=dict)
    self_scored: bool = False
    """Only the target's own model (or family) scored it: flagged, kept apart in the analysis."""
    reason: str | None = None
    refused: bool = False
    """The target refused; under ``refusals: scored`` its refusal is the answer scored."""

    def record(self) -> dict[str, Any]:
        """The JSON-able record."""
        return {
            "outcome": self.outcome,
            "score": self.score,
            "by_scorer": self.by_scorer,
            "self_scored": self.self_scored,
            "reason": self.reason,
            "refused": self.refused,
        }


def is_self(ctx: AdaptContext, scorer: str, target: str) -> bool:
    """A scorer judging its own model or family."""
    if scorer == target:
        return True
    fam_s = getattr(ctx.cfg.models.get(scorer), "family", None)
    fam_t = getattr(ctx.cfg.models.get(target), "family", None)
    return fam_s is not None and fam_s == fam_t


async def answer_and_score(
    ctx: AdaptContext,
    target: str,
    meme_uid: str,
    text: str,
    image: ImagePart | None,
    category: Category,
    reference: dict[str, Any] | Awaitable[dict[str, Any] | None] | None,
    repeat: int,
    tag: str = "",
) -> Scored | None:
    """Answer and score one (meme text, category) for ``target`` in one repeat; None when a
    model failure leaves it for a re-run. ``tag`` keeps rewrites' steps apart in the store.
    ``reference`` may still be in the making (an awaitable): the answer, which does not depend
    on it, is then asked alongside it, one round trip less (when no usable reference comes
    out, that answer is on record but not scored)."""
    acfg = ctx.acfg
    params = (
        ctx.repeat_params(repeat)
        if acfg.target_temperature is None
        else ctx.repeat_params(repeat, temperature=acfg.target_temperature)
    )

    def ask() -> Awaitable[dict[str, Any] | None]:
        return ctx.step(
            "adapt.answer",
            (meme_uid, tag, category.name, target, repeat),
            target,
            "adapt.answer",
            "adapt/answer.j2",
            parse_text,
            lambda v: {"answer": v},
            image=image,
            params=params,
            max_reasks=0,
            meme_text=text,
            instruction=category.instruction,
        )

    ans: dict[str, Any] | None = None
    ref: dict[str, Any] | None
    # Not a dict (nor None): still in the making (no ABC check, which costs a microsecond).
    parallel = reference is not None and not isinstance(reference, dict)
    if parallel:
        ref, ans = await both(cast("Awaitable[dict[str, Any] | None]", reference), ask())
    else:
        ref = cast("dict[str, Any] | None", reference)
    if ref is None:
        return None
    if "reference" not in ref:
        return Scored("no_reference", reason=str(ref.get("error")))
    if not parallel:
        ans = await ask()
    if ans is None:
        return None
    refused = bool(ans.get("refusal"))
    if "answer" in ans:
        answer = ans["answer"]
    elif refused and acfg.refusals == "scored":
        # The refusal is the target's answer: it explains no harm, and is graded as such.
        answer = str(ans.get("raw") or "").strip() or "(no answer: the model declined)"
    else:
        return Scored("refused" if refused else "unparsed", reason="target")
    # Untrusted: rendering makes any rating in them inert (prompts.render.defang).
    shown: dict[str, Any] = {
        "meme_text": text,
        "instruction": category.instruction,
        "reference": ref["reference"],
        "answer": answer,
    }
    arts = await gather_steps(
        [
            ctx.step(
                "adapt.score",
                (meme_uid, tag, category.name, target, repeat, scorer),
                scorer,
                "adapt.score",
                "adapt/scorer.j2",
                # A rating re-typed from what the scorer was shown is not its own.
                functools.partial(parse_score, shown=tuple(shown.values())),
                lambda v: {"score": v.value},
                image=image,
                params=ctx.repeat_params(repeat, temperature=acfg.scorer_temperature),
                cap=acfg.factual_error_cap,
                **shown,
            )
            for scorer in acfg.scorers
        ]
    )
    if any(a is None for a in arts):
        return None
    by_scorer: dict[str, float | None] = {
        s: (a.get("score") if a else None) for s, a in zip(acfg.scorers, arts, strict=True)
    }
    others = [v for s, v in by_scorer.items() if v is not None and not is_self(ctx, s, target)]
    own = [v for s, v in by_scorer.items() if v is not None and is_self(ctx, s, target)]
    if others:
        return Scored("scored", sum(others) / len(others), answer, by_scorer, refused=refused)
    if own:
        return Scored(
            "scored", sum(own) / len(own), answer, by_scorer, self_scored=True, refused=refused
        )
    return Scored(
        "unparsed",
        None,
        answer,
        by_scorer,
        reason="no scorer gave a valid rating",
        refused=refused,
    )
