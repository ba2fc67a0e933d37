"""The simulated world's core: seeded simulated models, the memes they meet, and a target's
answer to a meme; every method's roles are answered by that method's part (``sim/parts.py``).

This is a SIMULATOR. Its replies are generated from a latent skill and injected biases so that
the methods' claims are testable (the Arena must recover the true ranking of simulated targets;
bias measures must detect injected biases). Nothing it produces is a result about real models.

What the core encodes (all phrasing is the simulator's own, read back by substring match):

- a meme's facts: true facts, false facts, its target, category and harm, from the dataset's
  annotations or, for a meme without any, drawn from a hash of its text;
- a target's answer (``answer``, which every part may ask for): its ``[Background Knowledge]``
  states about three facts, each a true fact of the meme with probability ``skill`` and a false
  one otherwise, plus 0-3 filler sentences (more for lower skill); its ``[Reasoning]`` names the
  right target group and harm with probability ``skill``, otherwise a wrong group or a vague
  reading; it carries its family's signature sentence.

How judges read answers is each method's own (the Arena's judges: ``methods/arena/sim.py``).
Every random draw comes from a generator seeded by (world seed, model, role, request text): the
same request always gets the same reply, different requests differ.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from memearena.config import SimModelConfig
from memearena.models.types import GenParams, ImagePart, Message
from memearena.sim.facts import SimMeme, SimProfile, digest, tag_block
from memearena.sim.parts import (
    SimPart,
    SimRequest,
    part_factories,
    part_factory,
    part_prefixes,
)

if TYPE_CHECKING:
    from memearena.config import ImageConfig
    from memearena.data import Meme

__all__ = [
    "DEFAULT_PROFILE",
    "FILLER_SENTENCES",
    "REFUSAL_TEXT",
    "VAGUE_READINGS",
    "SimWorld",
    "bounded_put",
    "family_signature",
    "norm_fact",
    "normalize_text",
    "sentence",
]

REFUSAL_TEXT = "I'm sorry, but I can't help with that."
"""What a simulated model says when it refuses (a typical provider refusal)."""

DEFAULT_PROFILE = SimModelConfig.model_validate({"provider": "sim", "skill": 0.5, "noise": 0.2})
"""Profile of a model name the world was not configured with: mid skill, no bias; its family is
its own name."""

_CACHE_SIZE = 20_000
K = TypeVar("K")
V = TypeVar("V")

FILLER_SENTENCES: tuple[str, ...] = (
    "Memes are a popular form of online communication.",
    "It is worth noting that memes are often shared widely on social media.",
    "Images with overlaid text are a very common meme format.",
    "Humour on the internet can take many different forms.",
    "Many people come across memes every day while browsing.",
    "Context always matters when looking at any image.",
)
VAGUE_READINGS: tuple[str, ...] = (
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

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")


def normalize_text(text: str) -> str:
    """Lowercase with whitespace collapsed: how the world keys memes (and how facts are matched)."""
    return " ".join(text.lower().split())


def norm_fact(text: str) -> str:
    """A fact as the world matches it: normalised, without its full stop."""
    return normalize_text(text).rstrip(".")


def sentence(text: str) -> str:
    """``text`` as one sentence: capitalised, ending in a full stop unless it has an end."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def family_signature(family: str) -> str:
    """The signature sentence a simulated family writes (how a judge recognises its own)."""
    h = digest("signature", family)
    return f"{_SIG_OPENERS[h % 8]} {_SIG_CLOSERS[(h >> 8) % 8]}"


class SimWorld:
    """A seeded SIMULATED world answering every registered method's roles through its part
    (implements ``SimResponder``).

    ``models`` maps names to simulated profiles; a request may name a model by its config key or
    its ``model`` display name; an unknown name gets ``DEFAULT_PROFILE``. ``annotations`` maps a
    meme's normalized text to its world facts (``category``, ``target``, ``facts``,
    ``false_facts``, ``misbelief``, ``harm``, ``label``); an unknown meme gets deterministic
    synthetic facts derived from a hash of its text. A role no registered part claims gets a
    short generic reply."""

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
        self.parts: dict[str, SimPart] = {p: make(self) for p, make in part_factories().items()}
        """The registered parts, by role prefix (``memearena.sim.parts``): each answers its
        method's roles. A part is also an attribute named as its
        prefix (``world.adapt``)."""

    def _part(self, prefix: str) -> SimPart | None:
        """The part answering ``prefix``'s roles; one registered after this world was made
        (its method imported later, as a served world meets it, or its module named by the
        registry and imported now) is built when first asked."""
        part = self.parts.get(prefix)
        if part is None:
            make = part_factory(prefix)
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
        for prefix in part_prefixes():  # every method's part, its module imported if need be
            self._part(prefix)
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
            bounded_put(self.memes, text, meme)
        return meme

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
        return f"(simulated reply: the simulated world does not model role {role!r} yet)"

    def meme_of(self, prompt: str) -> SimMeme:
        """The meme a prompt is about (its ``<meme_text>`` block, else the whole prompt)."""
        return self.meme(tag_block(prompt, "meme_text") or prompt)

    # ---- targets -------------------------------------------------------------------------

    def answer(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        """A target's answer to the meme of ``prompt`` (the Arena's answer format; ``bad``:
        without its section headers)."""
        meme = self.meme_of(prompt)
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
        fillers = [f for f in FILLER_SENTENCES if rng.random() < (1 - skill) / 2]
        for f in fillers[:3]:
            sentences.insert(rng.randrange(len(sentences) + 1), f)
        u = rng.random()
        if u < skill:
            reading = _right_reading(meme)
        elif rng.random() < 0.5:
            reading = _wrong_reading(meme, rng)
        else:
            reading = rng.choice(VAGUE_READINGS)
        background = " ".join(sentences)
        reasoning = f"{prof.signature} {reading}"
        if bad:
            return f"{background} {reasoning}"
        return f"[Background Knowledge]\n{background}\n\n[Reasoning]\n{reasoning}"


# ---- helpers ------------------------------------------------------------------------------


def bounded_put(cache: dict[K, V], key: K, value: V) -> None:
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
    belief = f" It plays on a false belief: {sentence(meme.misbelief)}" if meme.misbelief else ""
    return (
        f"The meme targets {meme.target} ({meme.category.lower()}). {sentence(meme.harm)}{belief}"
    )


def _wrong_reading(meme: SimMeme, rng: random.Random) -> str:
    decoy = rng.choice(meme.decoys)
    if meme.harmful:
        return f"The meme is aimed at {decoy}, and it reads as light-hearted banter, not harm."
    return f"The meme attacks {decoy} and is clearly meant to demean them."


def _build_meme(key: str, ann: Mapping[str, Any]) -> SimMeme:
    synth = _synthetic_meme(key, key)
    facts = tuple(sentence(str(f)) for f in ann.get("facts") or () if str(f).strip())
    false = tuple(sentence(str(f)) for f in ann.get("false_facts") or () if str(f).strip())
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
        facts_n=tuple(norm_fact(f) for f in facts),
        false_n=tuple(norm_fact(f) for f in false_facts),
        target_n=target_n,
        decoys_n=tuple(normalize_text(d) for d in decoys),
    )
