"""Harmfulness mining: category votes per meme, new-category filters, the versioned taxonomy.

Per meme the miner is sampled (a distinct seed per attempt) until ``votes`` valid votes are in,
at most ``max_vote_attempts`` calls; a category is assigned when ``vote_min`` votes name it. A
proposed new category that enough votes share passes, in order, the name filter, the text
judge, the image examiner (on the memes that proposed it) and the long-tail filter (hits per 100
memes); a kept category gets a generated instruction, so it flows through every later stage.
Each taxonomy version is an artifact, keyed by its content, with every proposal's fate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memearena.data import Meme
from memearena.engine.steps import bounded_map
from memearena.methods.adapt.common import (
    AdaptContext,
    Category,
    Vote,
    meme_or_error,
    name_filter,
    parse_fits,
    parse_instruction,
    parse_judgement,
    parse_vote,
)
from memearena.models.types import GenParams
from memearena.prompts import render

__all__ = ["MemeVotes", "Mining", "count_votes", "mine"]

VOTE_TEMPERATURE = 0.7
"""Sampling temperature of the miner's votes (each attempt also has its own seed)."""


@dataclass
class MemeVotes:
    """The votes collected for one meme and what they decide."""

    meme: str
    valid: int = 0
    attempts: int = 0
    complete: bool = True
    """False when a model failure interrupted voting (a re-run resumes it)."""
    categories: list[str] = field(default_factory=list)
    proposals: list[tuple[str, str]] = field(default_factory=list)


def count_votes(votes: Sequence[Vote], need: int) -> tuple[list[str], list[tuple[str, str]]]:
    """Categories named by at least ``need`` votes (in first-seen order), and proposed new
    categories (by case-insensitive name) proposed by at least ``need`` votes."""
    counts: dict[str, int] = {}
    for v in votes:
        for c in v.categories:
            counts[c] = counts.get(c, 0) + 1
    props: dict[str, tuple[int, tuple[str, str]]] = {}
    for v in votes:
        if v.new is not None:
            key = " ".join(v.new[0].lower().split())
            n, first = props.get(key, (0, v.new))
            props[key] = (n + 1, first)
    return (
        [c for c, n in counts.items() if n >= need],
        [first for n, first in props.values() if n >= need],
    )


@dataclass
class Mining:
    """The outcome of mining: the taxonomy in use and each meme's categories."""

    taxonomy: list[Category]
    version: str
    assignments: dict[str, list[str]]
    decisions: list[dict[str, Any]]
    incomplete: int = 0


async def _votes(ctx: AdaptContext, meme: Meme, taxonomy: Sequence[Category]) -> MemeVotes:
    acfg = ctx.acfg
    out = MemeVotes(meme.uid)
    image = meme_or_error(ctx, meme)
    if isinstance(image, Exception):
        out.complete = False
        return out
    names = [c.name for c in taxonomy]
    votes: list[Vote] = []
    attempt = 0
    while len(votes) < acfg.votes and attempt < acfg.max_vote_attempts:
        art = await ctx.step(
            "adapt.vote",
            (meme.uid, attempt),
            acfg.miner,
            "adapt.miner",
            "adapt/miner.j2",
            lambda t: parse_vote(t, names),
            lambda v: {
                "categories": list(v.categories),
                "new_category": list(v.new) if v.new else None,
            },
            image=image,
            params=GenParams(temperature=VOTE_TEMPERATURE, seed=attempt),
            max_reasks=0,  # an invalid vote is a failed sample; the bound caps the samples
            meme_text=meme.text if acfg.miner_sees_text or image is None else None,
            taxonomy=[(c.name, c.description) for c in taxonomy],
        )
        attempt += 1
        if art is None:
            out.complete = False
            break
        if "categories" in art:
            nc = art.get("new_category")
            votes.append(Vote(tuple(art["categories"]), (nc[0], nc[1]) if nc else None))
    out.valid, out.attempts = len(votes), attempt
    if len(votes) == acfg.votes:
        out.categories, out.proposals = count_votes(votes, acfg.vote_min)
    ctx.progress.advance("mining")
    return out


def _version(taxonomy: Sequence[Category]) -> str:
    blob = json.dumps([c.__dict__ for c in taxonomy], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def seed_taxonomy(ctx: AdaptContext) -> list[Category]:
    """Version 0: the configured categories with their fixed instruction."""
    return [
        Category(name, desc, render("adapt/seed_instruction.j2", name=name, description=desc))
        for name, desc in ctx.acfg.seed_taxonomy.items()
    ]


async def mine(ctx: AdaptContext, memes: Sequence[Meme]) -> Mining:
    """Vote categories for every meme, filter new categories, store the taxonomy version."""
    acfg = ctx.acfg
    taxonomy = seed_taxonomy(ctx)
    ctx.store.put_artifact(
        "adapt.taxonomy",
        _version(taxonomy),
        {
            "version": _version(taxonomy),
            "parent": None,
            "categories": [c.__dict__ for c in taxonomy],
            "decisions": [],
        },
    )
    ctx.progress.stage("mining", len(memes))
    by_meme = {m.uid: m for m in memes}
    results: list[MemeVotes] = []
    async for _, mv in bounded_map(lambda m: _votes(ctx, m, taxonomy), memes, acfg.window):
        results.append(mv)
    results.sort(key=lambda r: r.meme)
    for r in results:
        if r.valid < acfg.votes and r.complete:
            ctx.store.record_error(
                "adapt.vote",
                r.meme,
                f"only {r.valid} valid vote(s) in {r.attempts} attempts; no category assigned",
            )
    # Proposals, by name, with the memes that proposed them.
    proposed: dict[str, tuple[str, str, list[str]]] = {}
    for r in results:
        for name, desc in r.proposals:
            key = " ".join(name.lower().split())
            proposed.setdefault(key, (" ".join(name.split()), desc, []))[2].append(r.meme)
    decisions: list[dict[str, Any]] = []
    kept: list[Category] = []
    hits_of: dict[str, list[str]] = {}
    existing = [c.name for c in taxonomy]
    for key in sorted(proposed):
        name, desc, uids = proposed[key]
        d: dict[str, Any] = {"name": name, "description": desc, "proposed_by": len(uids)}
        decisions.append(d)
        reason = name_filter(name, existing + [c.name for c in kept])
        if reason is not None:
            d["fate"] = f"name filter: {reason}"
            continue
        judged = await ctx.step(
            "adapt.category_judge",
            (key,),
            acfg.text_judge,
            "adapt.category_judge",
            "adapt/category_judge.j2",
            parse_judgement,
            lambda v: {"judgement": v},
            taxonomy=[(c.name, c.description) for c in taxonomy + kept],
            name=name,
            description=desc,
        )
        if judged is None or "judgement" not in judged:
            d["fate"] = "text judge: no verdict (" + _why(judged) + ")"
            continue
        if not judged["judgement"]["accept"]:
            d["fate"] = "text judge: rejected"
            d["judgement"] = judged["judgement"]
            continue
        fits: list[str] = []
        for uid in uids:
            meme = by_meme[uid]
            ex = await ctx.step(
                "adapt.image_examiner",
                (key, uid),
                acfg.image_examiner,
                "adapt.image_examiner",
                "adapt/image_examiner.j2",
                parse_fits,
                lambda v: {"fits": v},
                image=ctx.image(meme),
                meme_text=meme.text if acfg.miner_sees_text else None,
                name=name,
                description=desc,
            )
            if ex is not None and ex.get("fits") is True:
                fits.append(uid)
        d["image_fits"] = len(fits)
        per_100 = 100.0 * len(fits) / max(1, len(memes))
        d["hits_per_100"] = per_100
        if not fits:
            d["fate"] = "image examiner: rejected"
            continue
        if per_100 < acfg.long_tail_per_100:
            d["fate"] = f"long tail: {per_100:.1f} hits per 100 memes < {acfg.long_tail_per_100}"
            continue
        inst = await ctx.step(
            "adapt.instruction",
            (key,),
            acfg.instruction_writer,
            "adapt.instruction",
            "adapt/instruction.j2",
            parse_instruction,
            lambda v: {"instruction": v},
            name=name,
            description=desc,
        )
        if inst is None or "instruction" not in inst:
            d["fate"] = "instruction: none (" + _why(inst) + ")"
            continue
        d["fate"] = "kept"
        kept.append(Category(name, desc, inst["instruction"], "mined"))
        hits_of[name] = fits
    final = taxonomy + kept
    version = _version(final)
    if kept:
        ctx.store.put_artifact(
            "adapt.taxonomy",
            version,
            {
                "version": version,
                "parent": _version(taxonomy),
                "categories": [c.__dict__ for c in final],
                "decisions": decisions,
            },
        )
    assignments: dict[str, list[str]] = {}
    for r in results:
        cats = list(r.categories)
        cats += [c.name for c in kept if r.meme in hits_of.get(c.name, [])]
        if cats:
            assignments[r.meme] = cats
    return Mining(final, version, assignments, decisions, sum(1 for r in results if not r.complete))


def _why(art: dict[str, Any] | None) -> str:
    if art is None:
        return "model error; retried on re-run"
    if art.get("refusal"):
        return "refused"
    return str(art.get("error", "unparsed"))
