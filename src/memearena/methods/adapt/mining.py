"""Harmfulness mining as AdamMeme does it: the taxonomy grows while it is mined.

Memes are mined in order (by uid). Per meme the miner is shown the taxonomy as it stands and
sampled (a distinct seed per attempt) until ``votes`` valid votes are in, at most
``max_vote_attempts`` calls; a category of the taxonomy (seeded or already mined) is assigned
when ``vote_min`` votes name it. A new category proposed by ``proposal_votes`` votes (1: any
single vote's proposal, as the method does) is judged at once: the name filter, the text judge
(against the taxonomy as it stands), the image examiner (on this meme). An accepted category
joins the taxonomy at once (a new version, parent the previous one) and the meme gets it; later
memes are shown it and may vote for it. After the last meme the long-tail rule runs on the final
counts (memes assigned a mined category, by acceptance or by votes, per 100 memes); a kept
category gets a generated instruction, so it flows through every later stage like a seeded one.
The decision log has one entry per proposed name with every proposal's fate.

Resumability: every vote step is keyed by (meme, attempt, taxonomy version shown), so a re-run
replays the same sequence from the store, and a changed taxonomy recomputes exactly the votes
that saw it. Cost of the growing taxonomy: memes are voted ``window`` at a time with the
taxonomy as it stands; when a meme of the window adds a category, the votes already taken for
the memes after it saw the old taxonomy and are taken again (``revoted`` in the taxonomy
artifact: at most window - 1 memes per accepted category).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memearena.data import Meme
from memearena.engine.steps import capped_map
from memearena.methods.adapt.common import (
    AdaptContext,
    Category,
    Vote,
    gather_steps,
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

EVENTS_KEPT = 50
"""Proposals listed by meme per proposed name in the decision log (all are counted)."""


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


def count_votes(
    votes: Sequence[Vote], need: int, propose: int | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """Categories named by at least ``need`` votes (in first-seen order), and new categories
    (by case-insensitive name, first spelling kept) proposed by at least ``propose`` votes
    (default ``need``)."""
    propose = need if propose is None else propose
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
        [first for n, first in props.values() if n >= propose],
    )


@dataclass
class Mining:
    """The outcome of mining: the taxonomy in use and each meme's categories."""

    taxonomy: list[Category]
    version: str
    assignments: dict[str, list[str]]
    decisions: list[dict[str, Any]]
    incomplete: int = 0
    revoted: int = 0
    """Memes voted again because an earlier meme of their window grew the taxonomy."""


async def _votes(ctx: AdaptContext, meme: Meme, taxonomy: Sequence[Category]) -> MemeVotes:
    """The votes of one meme, shown ``taxonomy`` (its version is part of every step key)."""
    acfg = ctx.acfg
    out = MemeVotes(meme.uid)
    image = meme_or_error(ctx, meme)
    if isinstance(image, Exception):
        out.complete = False
        return out
    names = [c.name for c in taxonomy]
    version = _version(taxonomy)
    votes: list[Vote] = []
    attempt = 0

    def ask(attempt: int) -> Awaitable[dict[str, Any] | None]:
        return ctx.step(
            "adapt.vote",
            (meme.uid, attempt, version),
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

    # Attempts are sampled in order until ``votes`` are valid. Each attempt gives at most one
    # valid vote, so the attempts still needed are all asked at once: the same attempts as one
    # at a time, in fewer round trips.
    while len(votes) < acfg.votes and attempt < acfg.max_vote_attempts:
        batch = range(attempt, min(acfg.max_vote_attempts, attempt + acfg.votes - len(votes)))
        arts = await gather_steps([ask(a) for a in batch])
        failed = False
        for art in arts:
            attempt += 1
            if art is None:
                failed = True
                break
            if "categories" in art:
                nc = art.get("new_category")
                votes.append(Vote(tuple(art["categories"]), (nc[0], nc[1]) if nc else None))
        if failed:
            out.complete = False
            break
    out.valid, out.attempts = len(votes), attempt
    if len(votes) == acfg.votes:
        out.categories, out.proposals = count_votes(votes, acfg.vote_min, acfg.proposal_votes)
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


def _key(name: str) -> str:
    return " ".join(name.lower().split())


@dataclass
class _Miner:
    """The state of one mining pass: the taxonomy as it grows, and the decision log."""

    ctx: AdaptContext
    memes: int
    taxonomy: list[Category]
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    hits: dict[str, list[str]] = field(default_factory=dict)
    """Mined category -> memes assigned it (the accepting meme first)."""
    revoted: int = 0

    def _put_version(self, parent: str | None, decisions: list[dict[str, Any]]) -> str:
        version = _version(self.taxonomy)
        self.ctx.store.put_artifact(
            "adapt.taxonomy",
            version,
            {
                "version": version,
                "parent": parent,
                "categories": [c.__dict__ for c in self.taxonomy],
                "decisions": decisions,
            },
        )
        return version

    async def propose(self, meme: Meme, name: str, desc: str) -> bool:
        """Judge one proposal of ``meme`` now; True when it joined the taxonomy."""
        acfg, ctx = self.ctx.acfg, self.ctx
        key = _key(name)
        d = self.decisions.setdefault(
            key,
            {
                "name": " ".join(name.split()),
                "description": desc,
                "proposed_by": 0,
                "fates": {},
                "events": [],
            },
        )
        d["proposed_by"] += 1

        def event(fate: str) -> bool:
            # Every proposal's fate is counted; the first EVENTS_KEPT are listed by meme (the
            # log stays bounded however many memes propose a name).
            d["fates"][fate] = d["fates"].get(fate, 0) + 1
            if len(d["events"]) < EVENTS_KEPT:
                d["events"].append({"meme": meme.uid, "fate": fate})
            return fate == "accepted"

        existing = [c.name for c in self.taxonomy]
        reason = name_filter(name, existing)
        if reason is not None:
            return event(f"name filter: {reason}")
        shown = [(c.name, c.description) for c in self.taxonomy]
        judged = await ctx.step(
            "adapt.category_judge",
            (key, _version(self.taxonomy)),
            acfg.text_judge,
            "adapt.category_judge",
            "adapt/category_judge.j2",
            parse_judgement,
            lambda v: {"judgement": v},
            taxonomy=shown,
            name=name,
            description=desc,
        )
        if judged is None or "judgement" not in judged:
            return event("text judge: no verdict (" + _why(judged) + ")")
        if not judged["judgement"]["accept"]:
            d["judgement"] = judged["judgement"]
            return event("text judge: rejected")
        ex = await ctx.step(
            "adapt.image_examiner",
            (key, meme.uid),
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
        if ex is None or "fits" not in ex:
            return event("image examiner: no verdict (" + _why(ex) + ")")
        if ex["fits"] is not True:
            return event("image examiner: rejected")
        parent = _version(self.taxonomy)
        self.taxonomy.append(Category(" ".join(name.split()), desc, "", "mined"))
        self.hits[self.taxonomy[-1].name] = [meme.uid]
        d["accepted_by"] = meme.uid
        d["version"] = self._put_version(parent, [])
        return event("accepted")


async def mine(ctx: AdaptContext, memes: Sequence[Meme]) -> Mining:
    """Mine every meme in order with the taxonomy as it grows (see module doc), prune the long
    tail on the final counts, write the kept categories' instructions, store the versions."""
    acfg = ctx.acfg
    order = sorted(memes, key=lambda m: m.uid)
    st = _Miner(ctx, len(order), seed_taxonomy(ctx))
    seed_version = st._put_version(None, [])
    ctx.progress.stage("mining", len(order))
    results: dict[str, MemeVotes] = {}
    i = 0
    while i < len(order):
        window = order[i : i + acfg.window]
        shown = list(st.taxonomy)
        got: dict[str, MemeVotes] = {}
        async for m, mv in capped_map(
            lambda m, shown=shown: _votes(ctx, m, shown),  # type: ignore[misc]
            window,
            acfg.window,
        ):
            got[m.uid] = mv
        for j, meme in enumerate(window):
            mv = got[meme.uid]
            results[meme.uid] = mv
            ctx.progress.advance("mining")
            grew = False
            for name, desc in mv.proposals:
                grew = await st.propose(meme, name, desc) or grew
            if mv.complete and mv.valid < acfg.votes:
                ctx.store.record_error(
                    "adapt.vote",
                    meme.uid,
                    f"only {mv.valid} valid vote(s) in {mv.attempts} attempts; "
                    "no category assigned",
                )
            for c in mv.categories:
                if c in st.hits and meme.uid not in st.hits[c]:
                    st.hits[c].append(meme.uid)
            if grew:
                # The memes after this one were voted with the old taxonomy: vote them again.
                st.revoted += len(window) - j - 1
                i += j + 1
                break
        else:
            i += len(window)
    return await _finish(st, results, seed_version)


async def _finish(st: _Miner, results: dict[str, MemeVotes], seed_version: str) -> Mining:
    """The long-tail rule on the final counts, instructions for the kept, the final version."""
    ctx, acfg = st.ctx, st.ctx.acfg
    mined_version = _version(st.taxonomy)
    kept: list[Category] = []
    for c in st.taxonomy:
        if c.origin != "mined":
            kept.append(c)
            continue
        d = st.decisions[_key(c.name)]
        hits = st.hits[c.name]
        per_100 = 100.0 * len(hits) / max(1, st.memes)
        d["hits"] = len(hits)
        d["hits_by_later_votes"] = len(hits) - 1
        d["hits_per_100"] = per_100
        if per_100 < acfg.long_tail_per_100:
            d["fate"] = f"long tail: {per_100:.1f} hits per 100 memes < {acfg.long_tail_per_100}"
            continue
        inst = await ctx.step(
            "adapt.instruction",
            (_key(c.name),),
            acfg.instruction_writer,
            "adapt.instruction",
            "adapt/instruction.j2",
            parse_instruction,
            lambda v: {"instruction": v},
            name=c.name,
            description=c.description,
        )
        if inst is None or "instruction" not in inst:
            d["fate"] = "instruction: none (" + _why(inst) + ")"
            continue
        d["fate"] = "kept"
        kept.append(Category(c.name, c.description, inst["instruction"], "mined"))
    for d in st.decisions.values():
        if "fate" not in d:  # never accepted: the first proposal's fate
            d["fate"] = d["events"][0]["fate"]
    decisions = [st.decisions[k] for k in sorted(st.decisions)]
    kept_names = {c.name for c in kept}
    st.taxonomy = kept
    version = _version(kept)
    if version != seed_version:
        ctx.store.put_artifact(
            "adapt.taxonomy",
            version,
            {
                "version": version,
                "parent": mined_version if mined_version != version else seed_version,
                "categories": [c.__dict__ for c in kept],
                "decisions": decisions,
                "revoted": st.revoted,
            },
        )
    assignments: dict[str, list[str]] = {}
    for uid in sorted(results):
        r = results[uid]
        cats = [c for c in r.categories if c not in st.hits or c in kept_names]
        cats += [
            name
            for name, memes in st.hits.items()
            if name in kept_names and memes[0] == uid and name not in cats
        ]
        if cats:
            assignments[uid] = cats
    incomplete = sum(1 for r in results.values() if not r.complete)
    return Mining(kept, version, assignments, decisions, incomplete, st.revoted)


def _why(art: dict[str, Any] | None) -> str:
    if art is None:
        return "model error; retried on re-run"
    if art.get("refusal"):
        return "refused"
    return str(art.get("error", "unparsed"))
