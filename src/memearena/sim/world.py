"""The simulated world: seeded simulated targets and judges that answer every Arena role.

This is a SIMULATOR. Its replies are generated from a latent skill and injected biases so that
the methods' claims are testable (the Arena must recover the true ranking of simulated targets;
bias measures must detect injected biases). Nothing it produces is a result about real models.

How quality is encoded (all phrasing is the simulator's own, read back by substring match):

- a target's ``[Background Knowledge]`` states about three facts, each a true fact of the meme
  with probability ``skill`` and a false one otherwise, plus 0-3 filler sentences (more for lower
  skill); its ``[Reasoning]`` names the right target group and harm with probability ``skill``,
  otherwise a wrong group or a vague reading; it carries its family's signature sentence;
- a model's *knowledge* of a meme is drawn once per (world seed, model, meme): it knows each true
  fact, recognises each false fact and knows the target with probability ``skill``, and believes
  a false fact with probability ``0.3 * (1 - skill)``;
- a judge scores each response per criterion from what it contains and what it believes (a
  guideline's facts count as known truths; without one only its own knowledge counts), then
  ``diff = q_A - q_B + position_bias + verbosity_bias * sign(len_A - len_B)
  + self_bias * (own_A - own_B) + Normal(0, noise)``; beyond a margin of 0.05 the better one wins;
  with ``guideline_damping`` the three biases are scaled by ``1 - guideline_damping * coverage``,
  coverage being the share of the meme's facts and target the judge's beliefs settle (so a good
  guideline can reduce them, a self-written one carrying misbeliefs less so);
- with ``family_misbeliefs`` a share of misbelief draws is made per family, not per model.

Every random draw comes from a generator seeded by (world seed, model, role, request text): the
same request always gets the same reply, different requests differ.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from memearena.config import SimModelConfig
from memearena.models.types import GenParams, ImagePart, Message
from memearena.prompts.parsers import parse_answer
from memearena.prompts.schemas import CRITERIA, LEVELS
from memearena.sim.facts import SimMeme, SimProfile, digest, tag_block
from memearena.sim.parts import SimPart, SimRequest, part_factories

if TYPE_CHECKING:
    from memearena.config import ImageConfig
    from memearena.data import Meme

__all__ = [
    "DEFAULT_PROFILE",
    "REFUSAL_TEXT",
    "SimWorld",
    "family_signature",
    "normalize_text",
]

REFUSAL_TEXT = "I'm sorry, but I can't help with that."
"""What a simulated model says when it refuses (a typical provider refusal)."""

DEFAULT_PROFILE = SimModelConfig.model_validate({"provider": "sim", "skill": 0.5, "noise": 0.2})
"""Profile of a model name the world was not configured with: mid skill, no bias; its family is
its own name."""

_JUDGE_MARGIN = 0.05
_FILLER_PENALTY = 0.3
_MISBELIEF_RATE = 0.3
_CACHE_SIZE = 20_000
K = TypeVar("K")
V = TypeVar("V")

_FILLER = (
    "Memes are a popular form of online communication.",
    "It is worth noting that memes are often shared widely on social media.",
    "Images with overlaid text are a very common meme format.",
    "Humour on the internet can take many different forms.",
    "Many people come across memes every day while browsing.",
    "Context always matters when looking at any image.",
)
_VAGUE = (
    "The meme could be offensive to some people, depending on how it is read.",
    "It is hard to say who the meme is about; some viewers might find it upsetting.",
    "Whether the meme is harmful depends on the viewer and is not clear from the image alone.",
)
_DECOYS = (
    "office workers",
    "sports fans",
    "tourists",
    "online gamers",
    "city commuters",
    "cat owners",
)
_SIG_OPENERS = (
    "Taking everything into account,",
    "Looking at this closely,",
    "Put simply,",
    "On a careful reading,",
    "All things considered,",
    "To break this down,",
    "Reading between the lines,",
    "At its core,",
)
_SIG_CLOSERS = (
    "here is my reading.",
    "this is how the meme works.",
    "the picture is fairly clear.",
    "a few points stand out.",
    "the intent can be pinned down.",
    "the message is worth unpacking.",
    "my assessment follows.",
    "the meaning comes into focus.",
)
_SYNTH_GROUPS = (
    "the Qellish minority",
    "people from Norrvale",
    "Tarnic speakers",
    "the Ostrin community",
    "residents of Palmhollow",
    "Verdani migrants",
)
_SYNTH_CATEGORIES = ("nationality", "religion", "race", "gender", "disability")

_CRITERION_LINE = re.compile(r"^-\s*([a-z_]+)\s*:", re.M)
_N_CONTEXTS = re.compile(r"exactly (\d+) interpretive context")
_TARGET_LINE = re.compile(r"^\s*target\s*:(.*)$", re.I | re.M)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")


def normalize_text(text: str) -> str:
    """Lowercase with whitespace collapsed: how the world keys memes (and how facts are matched)."""
    return " ".join(text.lower().split())


def _norm_fact(text: str) -> str:
    return normalize_text(text).rstrip(".")


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def family_signature(family: str) -> str:
    """The signature sentence a simulated family writes (how a judge recognises its own)."""
    h = digest("signature", family)
    return f"{_SIG_OPENERS[h % 8]} {_SIG_CLOSERS[(h >> 8) % 8]}"


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


class SimWorld:
    """A seeded SIMULATED world answering every Arena role (implements ``SimResponder``).

    ``models`` maps names to simulated profiles; a request may name a model by its config key or
    its ``model`` display name; an unknown name gets ``DEFAULT_PROFILE``. ``annotations`` maps a
    meme's normalized text to its world facts (``category``, ``target``, ``facts``,
    ``false_facts``, ``misbelief``, ``harm``, ``label``); an unknown meme gets deterministic
    synthetic facts derived from a hash of its text. Roles of the other methods are answered with
    a short generic reply until they are modelled."""

    def __init__(
        self,
        models: Mapping[str, SimModelConfig],
        annotations: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        seed: int = 0,
    ) -> None:
        self.seed = seed
        self.fingerprint = f"simulated-world:{seed}"
        """What a simulated model's identity adds: its answers depend on this world's seed."""
        self._profiles: dict[str, SimProfile] = {}
        for key, cfg in models.items():
            prof = SimProfile(key, cfg, cfg.family or key, family_signature(cfg.family or key))
            self._profiles[key] = prof
            if cfg.model and cfg.model not in models:
                self._profiles.setdefault(cfg.model, prof)
        self._annotations = {normalize_text(k): v for k, v in (annotations or {}).items()}
        self.memes: dict[str, SimMeme] = {}
        self._knowledge: dict[tuple[str, str], _Knowledge] = {}
        self._scores: dict[tuple[str, _Beliefs, str], dict[str, float]] = {}
        self.parts: dict[str, SimPart] = {p: make(self) for p, make in part_factories().items()}
        """The registered parts, by role prefix (``memearena.sim.parts``): each answers its
        method's roles; the core answers the Arena's. A part is also an attribute named as its
        prefix (``world.adapt``)."""

    def _part(self, prefix: str) -> SimPart | None:
        """The part answering ``prefix``'s roles; one registered after this world was made
        (its method imported later, as a served world meets it) is built when first asked."""
        part = self.parts.get(prefix)
        if part is None:
            make = part_factories().get(prefix)
            if make is not None:
                part = self.parts[prefix] = make(self)
        return part

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not attributes: a registered part by its prefix.
        part = self._part(name) if "parts" in self.__dict__ and not name.startswith("_") else None
        if part is not None:
            return part
        raise AttributeError(f"{type(self).__name__!r} has no attribute or part {name!r}")

    # ---- lookups -------------------------------------------------------------------------

    def serve_dataset(self, memes: Sequence[Meme], image_cfg: ImageConfig | None) -> int:
        """Know every dataset image as a world behind ``sim-serve`` does (which meme and which
        caption it shows, by the hash of the bytes a client sends): a dry run's stand-ins for
        endpoint models then meet the world the run will meet. Returns the hashes registered."""
        known = 0
        for part in self.parts.values():
            register = getattr(part, "register_dataset_images", None)
            if callable(register):
                known = max(known, int(register(memes, image_cfg)))
        return known

    def _profile(self, model: str) -> SimProfile:
        prof = self._profiles.get(model)
        if prof is None:
            prof = SimProfile(model, DEFAULT_PROFILE, model, family_signature(model))
            self._profiles[model] = prof
        return prof

    def meme(self, text: str) -> SimMeme:
        meme = self.memes.get(text)
        if meme is None:
            key = normalize_text(text)
            ann = self._annotations.get(key)
            meme = _build_meme(key, ann) if ann is not None else _synthetic_meme(key, text)
            _bounded_put(self.memes, text, meme)
        return meme

    def _know(self, prof: SimProfile, meme: SimMeme) -> _Knowledge:
        k = self._knowledge.get((prof.name, meme.key))
        if k is None:
            skill = prof.cfg.skill

            def u(*parts: object) -> float:
                return digest(self.seed, "know", prof.name, meme.key, *parts) / 2.0**64

            shared = prof.cfg.family_misbeliefs

            def misbelief_u(j: int) -> float:
                # A family-wide draw with probability `family_misbeliefs`: models of one family
                # then hold the same false beliefs (0 keeps every draw the model's own).
                if shared > 0 and u("shared?", j) < shared:
                    return digest(self.seed, "know-family", prof.family, meme.key, j) / 2.0**64
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
            _bounded_put(self._knowledge, (prof.name, meme.key), k)
        return k

    # ---- the responder -------------------------------------------------------------------

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        """The simulated reply of ``model`` acting as ``role``; ``params`` are ignored (the reply
        is a pure function of the world seed, model, role and request)."""
        prof = self._profile(model)
        parts: list[str] = []
        user: list[str] = []
        n_original = 0
        for m in messages:
            if m.role == "assistant" and not n_original:
                n_original = len(parts)
            for p in m.content:
                parts.append(p.sha256 if isinstance(p, ImagePart) else p.text)
                if m.role == "user" and not isinstance(p, ImagePart):
                    user.append(p.text)
            parts.append(f"\x1e{m.role}")
        # The content of a reply depends on the original request only, so a re-ask after a
        # malformed reply (ours or an injected fault) gets the answer a clean first try would
        # have got: a resumed run then ends where an uninterrupted one does. Whether this
        # attempt refuses or is malformed depends on the whole conversation.
        original = parts[:n_original] if n_original else parts
        rng = random.Random(digest(self.seed, prof.name, role, "\x1d".join(original)))
        attempt = random.Random(digest(self.seed, prof.name, role, "attempt", *parts))
        prompt = "\n".join(user)
        if role == "ping":
            return "Captioned meme image."
        cfg = prof.cfg
        if cfg.refusal_rate > 0 and rng.random() < cfg.refusal_rate:
            return REFUSAL_TEXT
        bad_format = cfg.format_error_rate > 0 and attempt.random() < cfg.format_error_rate
        part = self._part(role.partition(".")[0])
        if part is not None:
            return part.reply(SimRequest(prof, role, prompt, messages, params, rng, bad_format))
        if role == "arena.answer":
            return self.answer(prof, prompt, rng, bad_format)
        if role == "arena.judge":
            return self._judge(prof, prompt, rng, bad_format)
        if role in ("arena.guideline_draft", "arena.guideline_self"):
            return self._draft(prof, prompt, rng, bad_format)
        if role == "arena.guideline_refine":
            return self._refine(prof, prompt, rng, bad_format)
        if role == "arena.context":
            return self._contexts(prompt, rng, bad_format)
        return f"(simulated reply: the simulated world does not model role {role!r} yet)"

    def _meme_of(self, prompt: str) -> SimMeme:
        return self.meme(tag_block(prompt, "meme_text") or prompt)

    # ---- targets -------------------------------------------------------------------------

    def answer(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        meme = self._meme_of(prompt)
        skill = prof.cfg.skill
        true_pool = list(range(len(meme.facts)))
        false_pool = list(range(len(meme.false_facts)))
        rng.shuffle(true_pool)
        rng.shuffle(false_pool)
        sentences: list[str] = []
        for _ in range(min(3, len(meme.facts))):
            if rng.random() < skill or not false_pool:
                sentences.append(meme.facts[true_pool.pop()])
            else:
                sentences.append(meme.false_facts[false_pool.pop()])
        fillers = [f for f in _FILLER if rng.random() < (1 - skill) / 2]
        for f in fillers[:3]:
            sentences.insert(rng.randrange(len(sentences) + 1), f)
        u = rng.random()
        if u < skill:
            reading = _right_reading(meme)
        elif rng.random() < 0.5:
            reading = _wrong_reading(meme, rng)
        else:
            reading = rng.choice(_VAGUE)
        background = " ".join(sentences)
        reasoning = f"{prof.signature} {reading}"
        if bad:
            return f"{background} {reasoning}"
        return f"[Background Knowledge]\n{background}\n\n[Reasoning]\n{reasoning}"

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
            f"Harm: {_sentence(meme.harm) if k.knows_target else 'unclear'}",
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
                    kept[n] = f"Harm: {_sentence(meme.harm)}"
        at = target_at if target_at is not None else len(kept)
        kept[at:at] = added
        return _guideline_json("\n".join(kept).strip() or "\n".join(added), rng, bad)

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
            _bounded_put(self._scores, key, cached)
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

_FILLER_N = tuple(_norm_fact(f) for f in _FILLER)
_VAGUE_N = tuple(_norm_fact(v) for v in _VAGUE)
# (relevance, accuracy) of a reading, as the judge classifies it.
_READING_SCORES = {
    "right": (1.0, 1.0),
    "unsure": (0.6, 0.5),
    "wrong": (0.3, 0.0),
    "vague": (0.2, 0.4),
}


def _coverage(meme: SimMeme, b: _Beliefs) -> float:
    """Share of the meme's facts (true ones known, false ones recognised) and of its target
    that the judge's beliefs settle correctly."""
    settled = len(b.true_facts & frozenset(range(len(meme.facts))))
    settled += len(b.false_known - b.false_believed)
    settled += b.target_n == meme.target_n
    return settled / (len(meme.facts) + len(meme.false_facts) + 1)


def _bounded_put(cache: dict[K, V], key: K, value: V) -> None:
    """Memoise, bounded: a long-lived sim-serve must not grow without limit (values are pure
    functions of their keys, so dropping them changes nothing but speed)."""
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = value


def _right_reading(meme: SimMeme) -> str:
    if not meme.harmful:
        return (
            f"The meme refers to {meme.target}, but it does not demean them; read from this "
            "standpoint it is not harmful."
        )
    belief = f" It plays on a false belief: {_sentence(meme.misbelief)}" if meme.misbelief else ""
    return (
        f"The meme targets {meme.target} ({meme.category.lower()}). {_sentence(meme.harm)}{belief}"
    )


def _wrong_reading(meme: SimMeme, rng: random.Random) -> str:
    decoy = rng.choice(meme.decoys)
    if meme.harmful:
        return f"The meme is aimed at {decoy}, and it reads as light-hearted banter, not harm."
    return f"The meme attacks {decoy} and is clearly meant to demean them."


def _guideline_json(text: str, rng: random.Random, bad: bool) -> str:
    out = json.dumps({"guideline": text})
    return _malformed(out, rng) if bad else out


def _malformed(out: str, rng: random.Random) -> str:
    """A broken version of a JSON reply: truncated, or prose without the JSON."""
    if rng.random() < 0.5:
        return out[: max(1, len(out) // 2)]
    return "Having compared everything carefully, I think the first one is somewhat better."


def _build_meme(key: str, ann: Mapping[str, Any]) -> SimMeme:
    synth = _synthetic_meme(key, key)
    facts = tuple(_sentence(str(f)) for f in ann.get("facts") or () if str(f).strip())
    false = tuple(_sentence(str(f)) for f in ann.get("false_facts") or () if str(f).strip())
    target = str(ann.get("target") or synth.target).strip()
    label = ann.get("label", 1)
    return _finish(
        key=key,
        target=target,
        category=str(ann.get("category") or synth.category),
        harm=str(ann.get("harm") or synth.harm),
        misbelief=str(ann.get("misbelief") or ""),
        harmful=label not in (0, "0", False, "not harmful"),
        facts=facts or synth.facts,
        false_facts=false or synth.false_facts,
    )


def _synthetic_meme(key: str, text: str) -> SimMeme:
    h = digest("synthetic", key)
    group = _SYNTH_GROUPS[h % len(_SYNTH_GROUPS)]
    category = _SYNTH_CATEGORIES[(h >> 8) % len(_SYNTH_CATEGORIES)]
    words = _WORD.findall(text)
    word = words[(h >> 16) % len(words)].lower() if words else "this"
    return _finish(
        key=key,
        target=group,
        category=category,
        harm=f"it mocks {group} by repeating a demeaning stereotype about them",
        misbelief=f"{group} cannot be trusted",
        harmful=True,
        facts=(
            f'The word "{word}" is used as a coded insult against {group} on some forums.',
            f"A false rumour about {group} spread through meme pages last year.",
            f"This image template is often reused to mock {group}.",
        ),
        false_facts=(
            f'The word "{word}" is the official motto of a charity run by {group}.',
            "The image was first printed in a school history textbook.",
        ),
    )


def _finish(
    *,
    key: str,
    target: str,
    category: str,
    harm: str,
    misbelief: str,
    harmful: bool,
    facts: tuple[str, ...],
    false_facts: tuple[str, ...],
) -> SimMeme:
    target_n = normalize_text(target)
    decoys = tuple(d for d in _DECOYS if d not in target_n and target_n not in d)
    decoys = decoys or ("people in general",)
    return SimMeme(
        key=key,
        target=target,
        category=category,
        harm=harm,
        misbelief=misbelief,
        harmful=harmful,
        facts=facts,
        false_facts=false_facts,
        decoys=decoys,
        facts_n=tuple(_norm_fact(f) for f in facts),
        false_n=tuple(_norm_fact(f) for f in false_facts),
        target_n=target_n,
        decoys_n=tuple(normalize_text(d) for d in decoys),
    )
