"""The simulated world's Adapt roles: miners, narrators, references, targets, scorers, refiners.

This is a SIMULATOR: it exists so the Adapt method's claims can be tested offline, without the
conclusions built in. What it encodes, and nothing more:

- each simulated target has an *understanding* per harm category (``category_skill``, falling
  back to ``skill``); the demo gives one target a hidden weakness in one category;
- a meme's harm has an *explicitness*: a per-meme base in [0.55, 1] times the share of the
  original text's cue words a reader still sees, in the prompt's text or in the caption the
  image shows (the world knows which image hash shows which caption: the original image its own
  text, a text-erased image none); a rewrite that drops cue words lowers it only when it is not
  shown on an image that still carries the original caption;
- a target understands a meme with probability ``understanding * (0.3 + 0.7 * explicitness)``
  (full answer: target, harm, misbelief, facts), else with probability ``understanding`` a
  partial reading (the target, not the harm) and otherwise a wrong one; it states a false
  fact with probability ``0.3 * (1 - understanding)``;
- the scorer grades an answer against the reference: points for the target, misbelief and harm
  the *reference* states and the answer repeats, plus a true fact; a false fact caps the score;
  Normal noise is added (``noise``, scaled to the 1-10 scale), so rescoring varies;
- in the *null world* (``null_world``) every text of a meme has the meme's base explicitness:
  refinement makes nothing harder for anyone, so any failure-rate increase is an artefact.

The world finds the meme a prompt is about from its image hash (registered by the pipeline
driver for the images it sends) or, failing that, from its text. Every draw is seeded by
(world seed, model, role, request, sampling seed): a repeated request gets the same reply.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memearena.models.types import GenParams, ImagePart, Message
from memearena.sim.facts import digest
from memearena.sim.parts import SimRequest, register_part

if TYPE_CHECKING:
    from memearena.config import ImageConfig
    from memearena.data import Meme
    from memearena.sim.facts import SimMeme, SimProfile, WorldCore

__all__ = ["AdaptWorld", "cue_words"]

_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "any",
        "can",
        "had",
        "her",
        "was",
        "one",
        "our",
        "out",
        "day",
        "get",
        "has",
        "him",
        "his",
        "how",
        "man",
        "new",
        "now",
        "old",
        "see",
        "two",
        "way",
        "who",
        "boy",
        "did",
        "its",
        "let",
        "put",
        "say",
        "she",
        "too",
        "use",
        "that",
        "with",
        "have",
        "this",
        "will",
        "your",
        "from",
        "they",
        "know",
        "want",
        "been",
        "good",
        "much",
        "some",
        "time",
        "very",
        "when",
        "come",
        "here",
        "just",
        "like",
        "long",
        "make",
        "many",
        "over",
        "such",
        "take",
        "than",
        "them",
        "well",
        "were",
        "what",
        "into",
        "only",
        "then",
        "also",
        "after",
        "back",
        "other",
        "there",
        "these",
        "thing",
        "think",
        "where",
        "which",
        "while",
        "those",
        "whose",
    ]
)
_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]+")
_VAGUE_SUBS = ("those folks", "that crowd", "them", "certain people", "that thing", "you know who")
_JUNK_PROPOSALS = (
    ("Dark Humour Memes", "Jokes that are in poor taste."),
    ("Races", "Demeans people because of their race."),
    ("Humour", "Memes that try to be funny."),
)
_KNOWN_HARMS = frozenset(
    {
        "race",
        "gender",
        "religion",
        "nationality",
        "disability",
        "animal",
        "political",
        "child exploitation",
        "age",
        "sexual orientation",
    }
)
_SCORE_NOISE_SCALE = 6.0


def cue_words(text: str) -> frozenset[str]:
    """The content words of a text (lowercase, 3+ letters, no stop words): what makes its harm
    explicit in the simulation."""
    return frozenset(
        w.lower().strip("'-")
        for w in _WORDS.findall(text)
        if len(w) >= 3 and w.lower() not in _STOP
    )


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def _tag(text: str, name: str) -> str | None:
    start = text.find(f"<{name}>")
    if start == -1:
        return None
    start += len(name) + 2
    end = text.find(f"</{name}>", start)
    return text[start:end].strip() if end != -1 else None


def _tags(text: str, name: str) -> list[str]:
    return [m.strip() for m in re.findall(f"<{name}>(.*?)</{name}>", text, re.S)]


@dataclass(frozen=True)
class _Request:
    prompt: str
    image: str | None


class AdaptWorld:
    """The Adapt roles of a ``WorldCore`` (reached through ``WorldCore.respond``)."""

    def __init__(self, world: WorldCore) -> None:
        self.world = world
        self.null_world = False
        self._images: dict[str, str] = {}
        self._captions: dict[str, str] = {}

    def register_image(self, sha256: str, meme_text: str, caption: str | None = None) -> None:
        """Tell the world which meme an image (by content hash) is of, and the caption it shows
        (default: the meme's own text, as its original image shows; ``""`` for a text-erased
        image; a rewrite drawn onto the erased image)."""
        self._images[sha256] = meme_text
        self._captions[sha256] = meme_text if caption is None else caption

    def register_dataset_images(self, memes: Sequence[Meme], image_cfg: ImageConfig | None) -> int:
        """Register every meme's image and text-erased image (by the hash of the bytes a client
        sends: the prepared image, and the file itself), so a world behind a server, which no
        pipeline tells, still knows which meme an image is of and what caption it shows.
        Returns how many hashes it registered; an unreadable image is skipped."""
        from memearena.data import prepare_image
        from memearena.errors import DataError

        n = 0
        for m in memes:
            for path, caption in ((m.image_path, None), (m.erased_image, "")):
                if path is None:
                    continue
                try:
                    hashes = {
                        prepare_image(path, image_cfg).sha256,
                        hashlib.sha256(path.read_bytes()).hexdigest(),
                    }
                except (DataError, OSError):
                    continue
                for sha in hashes:
                    self.register_image(sha, m.text, caption)
                    n += 1
        return n

    def caption_shown(self, image: str | None) -> str | None:
        """The caption a registered image (by hash) shows (None: not a registered image)."""
        return self._captions.get(image) if image is not None else None

    # ---- lookups -------------------------------------------------------------------------

    def _original_text(self, req: _Request, text: str | None) -> str:
        if req.image is not None and req.image in self._images:
            return self._images[req.image]
        if text is not None:
            return text
        return req.image or ""

    def _meme(self, req: _Request, text: str | None) -> tuple[SimMeme, str]:
        original = self._original_text(req, text)
        return self.world.meme(original), original

    def _base_explicitness(self, meme: SimMeme) -> float:
        return 0.55 + 0.45 * (digest(self.world.seed, "explicit", meme.key) / 2.0**64)

    def explicitness(
        self, meme: SimMeme, original: str, text: str | None, caption: str | None = None
    ) -> float:
        """How explicit the meme's harm is to a reader given ``text`` with an image showing
        ``caption`` (1: fully explicit): the share of the original's cue words the reader sees,
        in the text or in the image. A rewrite shown on the original image hides nothing."""
        base = self._base_explicitness(meme)
        if self.null_world or (text is None and caption is None):
            return base
        cues = cue_words(original)
        if not cues:
            return base
        seen = cue_words(text or "") | cue_words(caption or "")
        return base * len(cues & seen) / len(cues)

    # ---- the responder -------------------------------------------------------------------

    def reply(self, request: SimRequest) -> str:
        """The simulator's entry (``memearena.sim.parts.SimPart``)."""
        r = request
        return self.respond(r.profile, r.role, r.messages, r.params, r.rng, r.bad_format)

    def respond(
        self,
        prof: SimProfile,
        role: str,
        messages: Sequence[Message],
        params: GenParams,
        rng: random.Random,
        bad: bool = False,
    ) -> str:
        """The simulated reply of one Adapt role (``bad``: a malformed version of it)."""
        image = None
        user: list[str] = []
        for m in messages:
            if m.role != "user":
                continue
            for p in m.content:
                if isinstance(p, ImagePart):
                    image = image or p.sha256
                else:
                    user.append(p.text)
        req = _Request("\n".join(user), image)
        # Sampling seeds (votes, reference candidates, repeats, retries) must change the draw.
        if params.seed is not None:
            rng = random.Random(digest(rng.random(), "seed", params.seed))
        handler = getattr(self, "_" + role.removeprefix("adapt."), None)
        if handler is None:
            return f"(simulated reply: the simulated world does not model role {role!r} yet)"
        out: str = handler(prof, req, rng)
        if bad and role in ("adapt.answer", "adapt.reference"):
            return out  # free text has no format to break
        if bad and role == "adapt.score":
            return out.rsplit("Rating:", 1)[0] + "Overall a middling answer."
        if bad:
            return out[: max(1, len(out) // 2)]
        return out

    # ---- mining --------------------------------------------------------------------------

    def _miner(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        meme, _ = self._meme(req, _tag(req.prompt, "meme_text"))
        names = [
            ln[2:].split(":", 1)[0].strip()
            for ln in (_tag(req.prompt, "taxonomy") or "").splitlines()
            if ln.startswith("- ")
        ]
        by_norm = {_norm(n): n for n in names}
        skill = prof.cfg.skill
        cats: list[str] = []
        new: dict[str, str] | None = None
        truth = by_norm.get(_norm(meme.category))
        if not meme.harmful:
            pass
        elif rng.random() < skill:
            if truth is not None:
                cats.append(truth)
            else:
                new = {
                    "name": meme.category,
                    "description": f"Demeans or endangers people through {meme.category.lower()}.",
                }
        elif names:
            cats.append(rng.choice(names))
        if new is None and rng.random() < 0.1:
            name, desc = rng.choice(_JUNK_PROPOSALS)
            new = {"name": name, "description": desc}
        return json.dumps({"categories": cats, "new_category": new})

    def _category_judge(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        proposal = _tag(req.prompt, "proposal") or ""
        name = _norm(proposal.split(":", 1)[0])
        existing = [
            _norm(ln[2:].split(":", 1)[0])
            for ln in (_tag(req.prompt, "taxonomy") or "").splitlines()
            if ln.startswith("- ")
        ]
        known = name in _KNOWN_HARMS or name in {
            _norm(m.category) for m in self.world.memes.values()
        }
        overlaps = [e for e in existing if e == name or e in name or name in e]
        ok = known and not overlaps
        if rng.random() < 0.3 * (1 - prof.cfg.skill):
            ok = not ok
        return json.dumps(
            {
                "unique": not overlaps,
                "granularity": known,
                "overlaps": overlaps,
                "accept": ok,
                "reason": "A distinct kind of harm." if ok else "Not a distinct kind of harm.",
            }
        )

    def _image_examiner(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        meme, _ = self._meme(req, _tag(req.prompt, "meme_text"))
        name = _norm((_tag(req.prompt, "proposal") or "").split(":", 1)[0])
        fits = name == _norm(meme.category)
        if rng.random() < 0.3 * (1 - prof.cfg.skill):
            fits = not fits
        return json.dumps({"fits": fits, "reason": "Checked against the image."})

    def _instruction(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        cat = (_tag(req.prompt, "category") or "this category").split(":", 1)
        name = cat[0].strip()
        desc = cat[1].strip() if len(cat) > 1 else ""
        return json.dumps(
            {
                "instruction": "Analyze how this meme may cause harm in the harm category "
                f'"{name}" ({desc}): who it targets, the false belief it relies on, and why '
                "that is harmful."
            }
        )

    def _narrator(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        meme, _ = self._meme(req, _tag(req.prompt, "meme_text"))
        category = (_tag(req.prompt, "category") or "").split(":", 1)[0].strip()
        if _norm(category) == _norm(meme.category) and meme.misbelief:
            belief = meme.misbelief
        else:
            belief = f"{meme.target} deserve contempt because of their {category.lower()}."
        return json.dumps({"misbelief": belief})

    # ---- answers and references ----------------------------------------------------------

    def _understanding(self, prof: SimProfile, category: str) -> float:
        by_cat = {_norm(k): v for k, v in prof.cfg.category_skill.items()}
        return by_cat.get(_norm(category), prof.cfg.skill)

    def _write_answer(
        self, meme: SimMeme, p_understand: float, u: float, rng: random.Random, hint: bool
    ) -> str:
        true_pool = list(meme.facts)
        rng.shuffle(true_pool)
        sentences = [true_pool[0]] if true_pool else []
        if meme.false_facts and rng.random() < 0.3 * (1 - u):
            sentences.append(rng.choice(meme.false_facts))
        roll = rng.random()
        if hint or roll < p_understand:
            reading = (
                f"The meme targets {meme.target}. {meme.harm[0].upper()}{meme.harm[1:]}"
                f"{'' if meme.harm.endswith('.') else '.'} It relies on the false belief that "
                f"{meme.misbelief[0].lower()}{meme.misbelief[1:]}"
            )
            if len(true_pool) > 1:
                sentences.append(true_pool[1])
        elif roll < p_understand + (1 - p_understand) * u:
            reading = (
                f"The meme mentions {meme.target}; it may be offensive to some viewers, though "
                "its point is not entirely clear."
            )
        else:
            reading = (
                f"The meme is aimed at {rng.choice(meme.decoys)} and reads as light-hearted "
                "banter rather than harm."
            )
        return " ".join([*sentences, reading])

    def _answer(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        text = _tag(req.prompt, "meme_text")
        meme, original = self._meme(req, text)
        category = _category_of(_tag(req.prompt, "instruction") or "", meme.category)
        u = self._understanding(prof, category)
        e = self.explicitness(meme, original, text, self.caption_shown(req.image))
        return self._write_answer(meme, u * (0.3 + 0.7 * e), u, rng, hint=False)

    def _reference(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        text = _tag(req.prompt, "meme_text")
        meme, original = self._meme(req, text)
        u = prof.cfg.skill
        hinted = _norm(_tag(req.prompt, "misbelief") or "") == _norm(meme.misbelief)
        e = self.explicitness(meme, original, text, self.caption_shown(req.image))
        return self._write_answer(
            meme, u * (0.3 + 0.7 * e), u, rng, hint=hinted and rng.random() < u
        )

    def _coverage(self, meme: SimMeme, text: str) -> int:
        t = _norm(text)
        points = 1
        points += 3 if _norm(meme.target) in t else 0
        points += 3 if meme.misbelief and _norm(meme.misbelief)[:40] in t else 0
        points += 2 if _norm(meme.harm)[:40] in t else 0
        points += 1 if any(f in t for f in meme.facts_n) else 0
        return points

    def _reference_judge(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        meme, _ = self._meme(req, _tag(req.prompt, "meme_text"))
        cands = _tags(req.prompt, "candidate")
        scored = [(self._coverage(meme, c), -i) for i, c in enumerate(cands)]
        best, neg = max(scored) if scored else (0, 0)
        if best < 7 and rng.random() < prof.cfg.skill:
            return json.dumps({"better": self._write_answer(meme, 1.0, 1.0, rng, hint=True)})
        return json.dumps({"choice": -neg + 1})

    # ---- scoring -------------------------------------------------------------------------

    def _score(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        meme, _ = self._meme(req, _tag(req.prompt, "meme_text"))
        ref = _norm(_tag(req.prompt, "reference") or "")
        ans = _norm(_tag(req.prompt, "answer") or "")
        points = 1.0
        # Credit for the target only where the reading names it (a fact may mention it too).
        names = (f"targets {_norm(meme.target)}", f"mentions {_norm(meme.target)}")
        if any(n in ref for n in names) and any(n in ans for n in names):
            points += 3
        mis = _norm(meme.misbelief)[:40] if meme.misbelief else None
        if mis and mis in ref and mis in ans:
            points += 3
        harm = _norm(meme.harm)[:40]
        if harm in ref and harm in ans:
            points += 2
        if any(f in ans for f in meme.facts_n):
            points += 1
        error = any(f in ans for f in meme.false_n)
        cap_m = re.search(r"gets at most (\d+)", req.prompt)
        cap = int(cap_m.group(1)) if cap_m else 4
        raw = points + rng.gauss(0.0, prof.cfg.noise * _SCORE_NOISE_SCALE)
        score = max(1, min(10, round(raw)))
        if error:
            score = min(score, cap)
        why = "It states a false fact. " if error else ""
        return (
            f"{why}Compared with the reference, the answer covers {points:.0f} of 10 points."
            f"\nRating: [[{score}]]"
        )

    # ---- refinement ----------------------------------------------------------------------

    def _refine(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        text = _tag(req.prompt, "meme_text") or ""
        words = text.split()
        cues = [i for i, w in enumerate(words) if cue_words(w)]
        rng.shuffle(cues)
        # An over-eager rewrite drops every cue (the checker should catch it).
        if rng.random() < 0.2:
            n = len(cues)
        else:  # a careful rewrite keeps at least one cue
            n = min(max(1, math.ceil(len(cues) * (0.3 + 0.3 * rng.random()))), len(cues) - 1)
        drop = set(cues[: max(0, n)])
        out = [rng.choice(_VAGUE_SUBS) if i in drop else w for i, w in enumerate(words)]
        rewrite = " ".join(out) or "you know who"
        return json.dumps(
            {
                "rewrite": rewrite,
                "explanation": f"Replaced {len(drop)} explicit word(s) with vaguer wording.",
            }
        )

    def _check(self, prof: SimProfile, req: _Request, rng: random.Random) -> str:
        original = _tag(req.prompt, "original_text") or ""
        rewrite = _tag(req.prompt, "rewrite") or ""
        _, first = self._meme(req, original)
        cues = cue_words(first)
        kept = len(cues & cue_words(rewrite)) / len(cues) if cues else 1.0
        carries = kept >= 0.25
        if rng.random() > 0.7 + 0.3 * prof.cfg.skill:
            carries = not carries
        return json.dumps(
            {
                "carries_misbelief": carries,
                "reason": "The belief is still recognisable." if carries else "It is gone.",
            }
        )


def _category_of(instruction: str, default: str) -> str:
    m = re.search(r'category "([^"]+)"', instruction)
    return m.group(1) if m else default


register_part("adapt", AdaptWorld)
