"""The simulated world's Judge-audit part: responders, describer, pointwise and pairwise judges.

Registered with the simulator (``memearena.sim.parts``) for the ``judge_audit.*`` roles when
this module is imported (the method imports it).

This is a SIMULATOR: judges with the audit's failure modes as parameters, so every injected
bias has a known expected signature, and a clean judge that must come out clean.

How a simulated judge "sees" (its stand-in for vision): an image's ``memearena:shows`` metadata
says which meme it depicts, ``memearena:inserted`` the text drawn into it; a query names its
meme by quoting the meme's text in “…”; a response is about a meme when it states one of that
meme's world facts. Pointwise scoring, from a base quality of the response
(5–8, a pure function of its content with filler removed):

* evidence missing or mismatched lowers the score towards 1 by a fraction 0.8, damped by the
  judge's blind spot: a missing or mismatched image (when the query relies on the image, i.e.
  mentions it) by ``1 - ignores_image``, a mismatched query by ``1 - query_trust``; a missing
  query is always noticed;
* an appended image description raises the score by ``3 * query_trust``; text drawn into the
  image lowers it by ``4 * text_sway``; an image attached to a question that does not rely on
  one (``unnecessary_image``) changes nothing;
* ``self_bias`` adds ``3 * self_bias`` to answers carrying the judge's family signature;
* with probability ``noise`` the score moves by one point.

Pairwise: ``diff = q_A - q_B + position_bias + (verbosity_bias - 0.1) * sign(len_A - len_B)
+ self_bias * (own_A - own_B) + Normal(0, noise)``, quality on a 0–1 scale; beyond 0.05 the
better one wins. An abstention-aware prompt lets an attentive judge answer N/A when both the
query and the image are missing.
"""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memearena.config import SimModelConfig
from memearena.methods.judge_audit.classic import FILLER
from memearena.methods.judge_audit.perturb import INSERTED_KEY, SHOWS_KEY, image_metadata
from memearena.models.types import ImagePart, Message
from memearena.sim.catalogue import register_demo_models
from memearena.sim.facts import tag_block
from memearena.sim.parts import SimRequest, register_part

if TYPE_CHECKING:
    from memearena.sim.facts import SimMeme, SimProfile, WorldCore

__all__ = [
    "DEMO_AUDIT_JUDGES",
    "DEMO_AUDIT_REFERENCE",
    "DEMO_AUDIT_RESPONDERS",
    "JudgeAuditSim",
]

_QUOTED = re.compile(r"“([^”]{1,2000})”")
_ABSTAIN_OFFER = "Rating: [[N/A]]"
_PAIR_V2_ANSWERS = re.compile(
    r"\[The Start of Assistant A's Answer\]\n(.*?)\n\[The End of Assistant A's Answer\]"
    r".*?\[The Start of Assistant B's Answer\]\n(.*?)\n\[The End of Assistant B's Answer\]",
    re.S,
)
_REFERENCE_FORMAT = "### Feedback: (write a feedback) ### Score:"
"""How the simulated judge recognises MM-JudgeBias's prompt (the ``plain`` variant)."""
_REFERENCE_INPUTS = re.compile(
    r"### The instruction to evaluate:\n(.*?)\n\n### Response to evaluate:\n(.*)\n\n### Feedback:",
    re.S,
)
_MARGIN = 0.05
REDUNDANCY_COST = 0.1
"""Pairwise: what a longer (padded) answer costs with every simulated judge before its
``verbosity_bias`` (an unbiased judge prefers the concise original, as MM-JudgeBias expects)."""
_DROP = 0.8
_FILLER_N = tuple(" ".join(f.lower().split()) for f in FILLER)


def _sim(**fields: object) -> SimModelConfig:
    return SimModelConfig.model_validate({"provider": "sim", **fields})


DEMO_AUDIT_JUDGES: dict[str, SimModelConfig] = {
    "sim-judge-blind": _sim(skill=0.8, family="blind", noise=0.15, ignores_image=0.9),
    "sim-judge-credulous": _sim(skill=0.8, family="credulous", noise=0.15, query_trust=0.9),
    "sim-judge-swayed": _sim(skill=0.8, family="swayed", noise=0.15, text_sway=0.8),
    "sim-judge-first": _sim(skill=0.8, family="first", noise=0.15, position_bias=0.4),
    "sim-judge-wordy": _sim(skill=0.8, family="wordy", noise=0.15, verbosity_bias=0.4),
}
"""The demo audit's extra SIMULATED judges, one per injected failure mode; the audit panel adds
them to the Arena's four judges (``sim-judge-falcon`` is clean and is the reference;
``sim-judge-drizzle`` prefers its own family's answers)."""

DEMO_AUDIT_REFERENCE = "sim-judge-falcon"
"""The clean judge of the demo panel (nothing injected)."""

DEMO_AUDIT_RESPONDERS: tuple[str, ...] = ("sim-aurora", "sim-drizzle")
"""Demo targets whose answers the audit panel judges (``sim-drizzle`` is the self-preferring
judge's own family)."""


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class JudgeAuditSim:
    """Answers the ``judge_audit.*`` roles for a ``WorldCore`` (its memes and profiles)."""

    def __init__(self, world: WorldCore) -> None:
        self.world = world
        self._meta: dict[str, dict[str, str]] = {}

    def reply(self, request: SimRequest) -> str:
        """The simulator's entry (``memearena.sim.parts.SimPart``)."""
        r = request
        return self.respond(r.profile, r.role, r.prompt, r.messages, r.rng, r.bad_format)

    def respond(
        self,
        prof: SimProfile,
        role: str,
        prompt: str,
        messages: Sequence[Message],
        rng: random.Random,
        bad: bool,
    ) -> str:
        """The reply of one simulated model in one ``judge_audit.*`` role."""
        if role == "judge_audit.respond":
            if tag_block(prompt, "meme_text") is None:
                # The text-only question names its meme by quoting the meme's text.
                quoted = _QUOTED.search(tag_block(prompt, "query") or prompt)
                if quoted:
                    prompt = f"<meme_text>\n{quoted.group(1)}\n</meme_text>\n{prompt}"
            return self.world.answer(prof, prompt, rng, bad)
        meta = self._image_meta(messages)
        if role == "judge_audit.describe":
            shows = meta.get(SHOWS_KEY) if meta is not None else None
            return (
                f"The image shows a picture with the words “{shows}” written on it, set "
                "against a plain background."
                if shows
                else "The image shows an abstract scene."
            )
        if role == "judge_audit.score":
            return self._score(prof, prompt, meta, rng, bad)
        if role == "judge_audit.pairwise":
            return self._pairwise(prof, prompt, rng, bad)
        return f"(simulated reply: the simulated world does not model role {role!r} yet)"

    # ---- what the judge sees ---------------------------------------------------------------

    def _image_meta(self, messages: Sequence[Message]) -> dict[str, str] | None:
        for m in messages:
            for p in m.content:
                if isinstance(p, ImagePart):
                    got = self._meta.get(p.sha256)
                    if got is None:
                        try:
                            got = image_metadata(base64.b64decode(p.data_url.split(",", 1)[1]))
                        except (ValueError, IndexError):
                            got = {}
                        if len(self._meta) >= 10_000:  # bounded: sim-serve lives long
                            self._meta.clear()
                        self._meta[p.sha256] = got
                    return got
        return None

    def _meme_of(self, text: str | None) -> SimMeme | None:
        if not text or text.startswith("mm-judgebias item"):
            return None
        return self.world.meme(text)

    @staticmethod
    def _about(response_n: str, meme: SimMeme) -> bool:
        # Facts are specific to one meme (several memes may share a target group).
        return any(f in response_n for f in (*meme.facts_n, *meme.false_n))

    @staticmethod
    def _base(response: str) -> int:
        body = _norm(response)
        for f in _FILLER_N:
            body = body.replace(f, "")
        h = int.from_bytes(_digest(" ".join(body.split())), "big")
        return 5 + h % 4

    # ---- pointwise ---------------------------------------------------------------------------

    def _score(
        self,
        prof: SimProfile,
        prompt: str,
        meta: dict[str, str] | None,
        rng: random.Random,
        bad: bool,
    ) -> str:
        cfg = prof.cfg
        reference = _REFERENCE_FORMAT in prompt
        if reference:
            # MM-JudgeBias's prompt has no delimiters: its inputs sit between its headings.
            got = _REFERENCE_INPUTS.search(prompt)
            query, response = (got.group(1), got.group(2)) if got else ("", "")
        else:
            query = tag_block(prompt, "query") or ""
            response = tag_block(prompt, "response") or ""
        response_n = _norm(response)
        quoted = _QUOTED.search(query)
        q_meme = self._meme_of(quoted.group(1)) if quoted else None
        i_meme = self._meme_of(meta.get(SHOWS_KEY)) if meta is not None else None
        needs_image = "image" in query.lower() or not query.strip()
        attentive = cfg.ignores_image < 0.5
        if _ABSTAIN_OFFER in prompt and not query.strip() and meta is None and attentive:
            return "Neither the query nor the image is available.\nRating: [[N/A]]"
        base = self._base(response)
        if prof.signature in response:
            base += round(3 * cfg.self_bias)
        drop = 0.0
        notes: list[str] = []
        if not query.strip():
            drop = max(drop, _DROP)
            notes.append("no query was given")
        if meta is None and needs_image:
            drop = max(drop, _DROP * (1 - cfg.ignores_image))
            notes.append("the image the query relies on is missing")
        if needs_image and i_meme is not None and not self._about(response_n, i_meme):
            drop = max(drop, _DROP * (1 - cfg.ignores_image))
            notes.append("the image does not support the response")
        if q_meme is not None and not self._about(response_n, q_meme):
            drop = max(drop, _DROP * (1 - cfg.query_trust))
            notes.append("the response does not answer this query")
        score = base - (base - 1) * drop
        if "image description:" in query.lower():
            score += 3 * cfg.query_trust
        if meta is not None and meta.get(INSERTED_KEY):
            score -= 4 * cfg.text_sway
        if rng.random() < cfg.noise:
            score += rng.choice((-1, 1))
        n = max(1, min(10, round(score)))
        feedback = (
            "The response is assessed against the query and the image; "
            + ("; ".join(notes) if notes else "it is grounded and answers what was asked")
            + "."
        )
        if bad:
            return f"{feedback} Overall I would put it at about {n} out of 10."
        if reference:
            return f"### Feedback: {feedback} ### Score: {n}"
        return f"{feedback}\nRating: [[{n}]]"

    # ---- pairwise ----------------------------------------------------------------------------

    def _pairwise(self, prof: SimProfile, prompt: str, rng: random.Random, bad: bool) -> str:
        cfg = prof.cfg
        v2 = _PAIR_V2_ANSWERS.search(prompt)
        if v2 is not None:  # MT-Bench's pair-v2 prompt: its answers sit between its markers
            a, b = v2.group(1), v2.group(2)
        else:
            a = tag_block(prompt, "response_a") or ""
            b = tag_block(prompt, "response_b") or ""
        qa, qb = (self._base(a) - 5) / 3, (self._base(b) - 5) / 3
        diff = qa - qb + cfg.position_bias
        # Every judge notices redundancy a little (REDUNDANCY_COST); verbosity bias outweighs it.
        longer = (len(a) > len(b)) - (len(a) < len(b))
        diff += (cfg.verbosity_bias - REDUNDANCY_COST) * longer
        diff += cfg.self_bias * ((prof.signature in a) - (prof.signature in b))
        diff += rng.gauss(0.0, cfg.noise)
        verdict = "A" if diff > _MARGIN else "B" if diff < -_MARGIN else "tie"
        if bad:
            return "Both have merits; on balance one of them is a little better."
        said = {"A": "Response A is better", "B": "Response B is better", "tie": "They are even"}
        if v2 is not None:
            return f"{said[verdict]} on substance. [[{'C' if verdict == 'tie' else verdict}]]"
        return f"{said[verdict]} on substance.\nVerdict: [[{verdict}]]"


def _digest(text: str) -> bytes:
    import hashlib

    return hashlib.blake2b(text.encode(), digest_size=8).digest()


register_part("judge_audit", JudgeAuditSim)
register_demo_models(DEMO_AUDIT_JUDGES)  # sim-serve serves the demo audit's judges too
