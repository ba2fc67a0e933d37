"""The simulated world's Arena roles: context agents, guideline drafters and refiners, and
pairwise judges (targets' answers are the world core's ``answer``).

This is a SIMULATOR: it exists so the Arena's claims can be tested offline (it must recover the
true ranking of the simulated targets; its bias measures must detect the injected biases). What
it encodes, and nothing more:

- a model's *knowledge* of a meme is drawn once per (world seed, model, meme): it knows each true
  fact, recognises each false fact and knows the target with probability ``skill``, and believes
  a false fact with probability ``0.3 * (1 - skill)``; with ``family_misbeliefs`` a share of
  misbelief draws is made per family, not per model;
- a guideline drafter writes the facts it knows and believes, and the target if it knows it; a
  refiner drops false facts it recognises and adds true ones it knows or reads in an analysis;
- a judge scores each response per criterion from what it contains and what it believes (a
  guideline's facts count as known truths; without one only its own knowledge counts), then
  ``diff = q_A - q_B + position_bias + verbosity_bias * sign(len_A - len_B)
  + self_bias * (own_A - own_B) + Normal(0, noise)``; beyond a margin of 0.05 the better one wins;
  with ``guideline_damping`` the three biases are scaled by ``1 - guideline_damping * coverage``,
  coverage being the share of the meme's facts and target the judge's beliefs settle (so a good
  guideline can reduce them, a self-written one carrying misbeliefs less so).

Every draw comes from the request's seeded generator (``SimRequest.rng``) or from the world's
seed, so the same request gets the same reply. The part registers with ``sim/parts.py`` when
this module is imported (the Arena's ``method.py`` imports it)."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memearena.prompts.parsers import parse_answer
from memearena.prompts.schemas import CRITERIA, LEVELS
from memearena.sim.facts import digest, tag_block
from memearena.sim.parts import SimRequest, register_part
from memearena.sim.world import (
    FILLER_SENTENCES,
    VAGUE_READINGS,
    bounded_put,
    norm_fact,
    normalize_text,
    sentence,
)

if TYPE_CHECKING:
    from memearena.sim.facts import SimMeme, SimProfile, WorldCore

__all__ = ["RATING_AXES", "ArenaSim", "guideline_quality"]

_JUDGE_MARGIN = 0.05
_FILLER_PENALTY = 0.3
_MISBELIEF_RATE = 0.3
_CRITERION_LINE = re.compile(r"^-\s*([a-z_]+)\s*:", re.M)
_N_CONTEXTS = re.compile(r"exactly (\d+) interpretive context")
_TARGET_LINE = re.compile(r"^\s*target\s*:(.*)$", re.I | re.M)


@dataclass(frozen=True, slots=True)
class _Knowledge:
    """What one model knows about one meme, drawn once (a model's knowledge does not change)."""

    true_known: frozenset[int]
    false_known: frozenset[int]
    misbeliefs: frozenset[int]
    knows_target: bool
    guess: str | None


@dataclass(frozen=True, slots=True)
class _Beliefs:
    true_facts: frozenset[int]
    false_believed: frozenset[int]
    false_known: frozenset[int]
    target_n: str | None


class ArenaSim:
    """Answers the ``arena.*`` roles for a world (its memes, profiles and targets' answers)."""

    def __init__(self, world: WorldCore) -> None:
        self.world = world
        self._knowledge: dict[tuple[str, str], _Knowledge] = {}
        self._scores: dict[tuple[str, _Beliefs, str], dict[str, float]] = {}

    def _meme_of(self, prompt: str) -> SimMeme:
        return self.world.meme(tag_block(prompt, "meme_text") or prompt)

    def reply(self, request: SimRequest) -> str:
        """The simulator's entry (``memearena.sim.parts.SimPart``)."""
        prof, role, prompt = request.profile, request.role, request.prompt
        rng, bad = request.rng, request.bad_format
        if role == "arena.answer":
            return self.world.answer(prof, prompt, rng, bad)
        if role == "arena.judge":
            return self._judge(prof, prompt, rng, bad)
        if role in ("arena.guideline_draft", "arena.guideline_self"):
            return self._draft(prof, prompt, rng, bad)
        if role == "arena.guideline_refine":
            return self._refine(prof, prompt, rng, bad)
        if role == "arena.context":
            return self._contexts(prompt, rng, bad)
        if role == "arena.guideline_rating":
            return self._rate(prof, prompt, rng, bad)
        return f"(simulated reply: the simulated world does not model role {role!r} yet)"

    def _know(self, prof: SimProfile, meme: SimMeme) -> _Knowledge:
        k = self._knowledge.get((prof.name, meme.key))
        if k is None:
            skill = prof.cfg.skill

            def u(*parts: object) -> float:
                return digest(self.world.seed, "know", prof.name, meme.key, *parts) / 2.0**64

            shared = prof.cfg.family_misbeliefs

            def misbelief_u(j: int) -> float:
                # A family-wide draw with probability `family_misbeliefs`: models of one family
                # then hold the same false beliefs (0 keeps every draw the model's own).
                if shared > 0 and u("shared?", j) < shared:
                    return (
                        digest(self.world.seed, "know-family", prof.family, meme.key, j) / 2.0**64
                    )
                return u("m", j)

            false_known = frozenset(j for j in range(len(meme.false_facts)) if u("f", j) < skill)
            k = _Knowledge(
                true_known=frozenset(i for i in range(len(meme.facts)) if u("t", i) < skill),
                false_known=false_known,
                misbeliefs=frozenset(
                    j
                    for j in range(len(meme.false_facts))
                    if j not in false_known and misbelief_u(j) < _MISBELIEF_RATE * (1 - skill)
                ),
                knows_target=u("target") < skill,
                guess=meme.decoys[int(u("guess") * len(meme.decoys))] if u("g?") < 0.5 else None,
            )
            bounded_put(self._knowledge, (prof.name, meme.key), k)
        return k

    # ---- judges: guidelines --------------------------------------------------------------

    def _draft(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        meme = self._meme_of(prompt)
        k = self._know(prof, meme)
        facts = [meme.facts[i] for i in sorted(k.true_known)]
        facts += [meme.false_facts[j] for j in sorted(k.misbeliefs)]
        target = meme.target if k.knows_target else (k.guess or "unclear")
        lines = ["Key background facts:", *(f"- {f}" for f in facts)]
        lines += [
            f"Target: {target}",
            f"Category: {meme.category}",
            f"Harm: {sentence(meme.harm) if k.knows_target else 'unclear'}",
            "A good analysis states these facts, names the target and explains how and why the "
            "meme is (or is not) harmful from the viewer's standpoint.",
        ]
        return _guideline_json("\n".join(lines), rng, bad)

    def _refine(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        meme = self._meme_of(prompt)
        k = self._know(prof, meme)
        skill = prof.cfg.skill
        guideline = tag_block(prompt, "guideline") or ""
        analysis_n = normalize_text(tag_block(prompt, "analysis") or "")
        guide_n = normalize_text(guideline)
        kept: list[str] = []
        for line in guideline.splitlines():
            line_n = normalize_text(line)
            wrong = [j for j, f in enumerate(meme.false_n) if f in line_n]
            if wrong and any(j in k.false_known or rng.random() < skill / 2 for j in wrong):
                continue  # drop a false fact the refiner recognises
            kept.append(line)
        added: list[str] = []
        for i, f in enumerate(meme.facts_n):
            if f in guide_n:
                continue
            from_analysis = f in analysis_n and (i in k.true_known or rng.random() < skill)
            if from_analysis or (i in k.true_known and rng.random() < 0.5):
                added.append(f"- {meme.facts[i]}")
        for j, f in enumerate(meme.false_n):
            if f in analysis_n and f not in guide_n and j in k.misbeliefs:
                added.append(f"- {meme.false_facts[j]}")
        target_at = next((n for n, ln in enumerate(kept) if _TARGET_LINE.match(ln)), None)
        if k.knows_target:
            fixed = f"Target: {meme.target}"
            if target_at is None:
                kept.append(fixed)
                target_at = len(kept) - 1
            elif meme.target_n not in normalize_text(kept[target_at]):
                kept[target_at] = fixed
            for n, ln in enumerate(kept):
                if ln.lower().startswith("harm:") and "unclear" in ln.lower():
                    kept[n] = f"Harm: {sentence(meme.harm)}"
        at = target_at if target_at is not None else len(kept)
        kept[at:at] = added
        return _guideline_json("\n".join(kept).strip() or "\n".join(added), rng, bad)

    def _rate(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        """Ratings 1-3 per axis: the guideline's true quality (``guideline_quality``) plus the
        judge's noise, rounded at random so that a rating's expectation is the quality."""
        meme = self._meme_of(prompt)
        quality = guideline_quality(meme, tag_block(prompt, "guideline") or "")
        ratings: dict[str, int] = {}
        for axis, q in quality.items():
            x = min(3.0, max(1.0, q + rng.gauss(0.0, prof.cfg.noise)))
            low = int(x)
            ratings[axis] = min(3, low + (rng.random() < x - low))
        out = json.dumps({"ratings": ratings})
        return _malformed(out, rng) if bad else out

    # ---- judges: pairwise verdicts -------------------------------------------------------

    def _beliefs(self, prof: SimProfile, meme: SimMeme, guideline: str | None) -> _Beliefs:
        k = self._know(prof, meme)
        own_target = meme.target_n if k.knows_target else None
        if not guideline:
            return _Beliefs(k.true_known, k.misbeliefs, k.false_known, own_target)
        g = normalize_text(guideline)
        g_true = frozenset(i for i, f in enumerate(meme.facts_n) if f in g)
        g_false = frozenset(j for j, f in enumerate(meme.false_n) if f in g)
        target: str | None = own_target
        line = _TARGET_LINE.search(guideline)
        where = normalize_text(line.group(1)) if line else g
        if meme.target_n in where:
            target = meme.target_n
        elif line is not None:
            target = next((d for d in meme.decoys_n if d in where), own_target)
        # Facts the guideline states count as known truths, right or wrong.
        return _Beliefs(
            k.true_known | g_true, k.misbeliefs | g_false, k.false_known - g_false, target
        )

    def _quality(self, text: str, meme: SimMeme, b: _Beliefs) -> dict[str, float]:
        key = (meme.key, b, text)
        cached = self._scores.get(key)
        if cached is None:
            cached = self._score(text, meme, b)
            bounded_put(self._scores, key, cached)
        return cached

    def _score(self, text: str, meme: SimMeme, b: _Beliefs) -> dict[str, float]:
        ans = parse_answer(text)
        body = normalize_text(text)
        stated_true = [i for i, f in enumerate(meme.facts_n) if f in body]
        stated_false = [j for j, f in enumerate(meme.false_n) if f in body]
        score = sum(1 for i in stated_true if i in b.true_facts)
        score += sum(1 for j in stated_false if j in b.false_believed)
        score -= sum(1 for j in stated_false if j in b.false_known)
        n_facts = len(stated_true) + len(stated_false)
        fillers = sum(1 for f in _FILLER_N if f in body)
        reasoning = normalize_text(ans.reasoning)
        if b.target_n is not None and b.target_n in reasoning:
            reading = "right"
        elif any(v in reasoning for v in _VAGUE_N) or not reasoning:
            reading = "vague"
        elif b.target_n is None:
            reading = "unsure"
        else:
            reading = "wrong"
        relevance, accuracy = _READING_SCORES[reading]
        return {
            "instruction_following": 1.0 if ans.format_ok else 0.0,
            "redundancy": max(0.0, 1.0 - _FILLER_PENALTY * fillers),
            "correctness": score / n_facts if n_facts else 0.0,
            "relevance": relevance,
            "accuracy": accuracy,
        }

    def _judge(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        meme = self._meme_of(prompt)
        crit_block = tag_block(prompt, "criteria")
        criteria = _CRITERION_LINE.findall(crit_block) if crit_block else []
        criteria = criteria or list(CRITERIA)
        a = tag_block(prompt, "response_a") or ""
        b = tag_block(prompt, "response_b") or ""
        beliefs = self._beliefs(prof, meme, tag_block(prompt, "guideline"))
        qa, qb = self._quality(a, meme, beliefs), self._quality(b, meme, beliefs)
        cfg = prof.cfg
        bias = cfg.position_bias
        bias += cfg.verbosity_bias * ((len(a) > len(b)) - (len(a) < len(b)))
        bias += cfg.self_bias * ((prof.signature in a) - (prof.signature in b))
        if cfg.guideline_damping > 0:
            # A judge whose beliefs the guideline settled leans on them, not on its biases.
            bias *= 1.0 - cfg.guideline_damping * _coverage(meme, beliefs)
        verdicts: dict[str, dict[str, str]] = {}
        for c in criteria:
            diff = qa.get(c, 0.0) - qb.get(c, 0.0) + bias + rng.gauss(0.0, cfg.noise)
            if diff > _JUDGE_MARGIN:
                verdicts[c] = {"winner": "A", "rationale": f"Response A is stronger on {c}."}
            elif diff < -_JUDGE_MARGIN:
                verdicts[c] = {"winner": "B", "rationale": f"Response B is stronger on {c}."}
            else:
                verdicts[c] = {"winner": "tie", "rationale": f"The responses are even on {c}."}
        if bad:
            return _malformed(json.dumps({"verdicts": verdicts}), rng)
        return json.dumps({"verdicts": verdicts})

    # ---- context agent -------------------------------------------------------------------

    def _contexts(self, prompt: str, rng: random.Random, bad: bool) -> str:
        meme = self._meme_of(prompt)
        m = _N_CONTEXTS.search(prompt)
        n = min(max(int(m.group(1)), 1), len(LEVELS)) if m else len(LEVELS)
        group, topic = meme.target, meme.category
        backgrounds = {
            "high": (
                f"A viewer who belongs to or works closely with {group}. They follow online "
                f"debates about {topic} and know the stereotypes and events memes like this "
                "refer to."
            ),
            "moderate": (
                f"A university student who has read a little about {topic} issues and has a "
                f"few acquaintances among {group}. They know some of the references, but only "
                "at second hand."
            ),
            "unrelated": rng.choice(
                (
                    "A retired engineer who rarely uses social media and came across this meme "
                    "in a family group chat. They know nothing in particular about its subject.",
                    "A teenager abroad who scrolls past this meme on a video app. They have no "
                    "background in its subject and read it at face value.",
                )
            ),
        }
        contexts = [
            {
                "level": lv,
                "background": backgrounds[lv],
                "task": "From this viewer's standpoint, explain whether the meme is harmful, "
                "to whom, and why.",
            }
            for lv in LEVELS[:n]
        ]
        out = json.dumps({"contexts": contexts})
        return _malformed(out, rng) if bad else out


# ---- helpers ------------------------------------------------------------------------------

_FILLER_N = tuple(norm_fact(f) for f in FILLER_SENTENCES)
_VAGUE_N = tuple(norm_fact(v) for v in VAGUE_READINGS)
# (relevance, accuracy) of a reading, as the judge classifies it.
_READING_SCORES = {
    "right": (1.0, 1.0),
    "unsure": (0.6, 0.5),
    "wrong": (0.3, 0.0),
    "vague": (0.2, 0.4),
}


RATING_AXES: tuple[str, ...] = (
    "readability",
    "informativeness",
    "soundness",
    "persuasiveness",
    "conciseness",
)


def guideline_quality(meme: SimMeme, guideline: str) -> dict[str, float]:
    """The planted quality (1-3) of a guideline on each rating axis, from what it states: the
    share of the meme's true facts (informativeness), false facts it states (soundness), a named
    true target and harm (persuasiveness), repeated lines (conciseness, readability)."""
    g = normalize_text(guideline)
    n_facts = max(1, len(meme.facts_n))
    true_share = sum(1 for f in meme.facts_n if f in g) / n_facts
    n_false = sum(1 for f in meme.false_n if f in g)
    line = _TARGET_LINE.search(guideline)
    target_ok = bool(line) and meme.target_n in normalize_text(line.group(1) if line else "")
    harm_ok = target_ok and "harm: unclear" not in guideline.lower()
    lines = [normalize_text(ln) for ln in guideline.splitlines() if ln.strip()]
    repeats = len(lines) - len(set(lines))
    sound = max(0.0, 1.0 - 0.5 * n_false) * (0.6 + 0.4 * target_ok)
    quality = {
        "readability": 0.8 - 0.2 * min(repeats, 4) + 0.2 * target_ok,
        "informativeness": 0.75 * true_share + 0.25 * target_ok,
        "soundness": sound,
        "persuasiveness": 0.5 * true_share + 0.25 * target_ok + 0.25 * harm_ok,
        "conciseness": 0.9 - 0.2 * min(repeats, 4) - 0.2 * min(n_false, 2),
    }
    return {a: 1.0 + 2.0 * min(1.0, max(0.0, quality[a])) for a in RATING_AXES}


def _coverage(meme: SimMeme, b: _Beliefs) -> float:
    """Share of the meme's facts (true ones known, false ones recognised) and of its target
    that the judge's beliefs settle correctly."""
    settled = len(b.true_facts & frozenset(range(len(meme.facts))))
    settled += len(b.false_known - b.false_believed)
    settled += b.target_n == meme.target_n
    return settled / (len(meme.facts) + len(meme.false_facts) + 1)


def _guideline_json(text: str, rng: random.Random, bad: bool) -> str:
    out = json.dumps({"guideline": text})
    return _malformed(out, rng) if bad else out


def _malformed(out: str, rng: random.Random) -> str:
    """A broken version of a JSON reply: truncated, or prose without the JSON."""
    if rng.random() < 0.5:
        return out[: max(1, len(out) // 2)]
    return "Having compared everything carefully, I think the first one is somewhat better."


register_part("arena", ArenaSim)
