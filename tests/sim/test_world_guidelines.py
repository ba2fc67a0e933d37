"""The simulated world's guideline model: biases damped by settled beliefs, shared misbeliefs,
and the null control (every new parameter at 0 leaves the world as it was)."""

from __future__ import annotations

from typing import Any

from memearena.config import SimModelConfig
from memearena.models.types import GenParams
from memearena.prompts import build_messages, parse_guideline, parse_verdicts
from memearena.prompts.schemas import CRITERIA
from memearena.sim.world import SimWorld

MEME = "When the Quorvish neighbours move in next door"
FACTS = [
    "The Quorvish are a fictional mountain people of the Pell highlands.",
    "Quorvish families traditionally keep goats.",
    "Quorvish migrants mostly work in construction in Ostrava Pell.",
]
FALSE_FACTS = [
    "The Quorvish are banned from owning property in Ostrava Pell.",
    "Goats are sacred animals to the Quorvish.",
]
ANNOTATIONS: dict[str, dict[str, Any]] = {
    MEME.lower(): {
        "category": "Nationality",
        "target": "Quorvish migrants",
        "facts": FACTS,
        "false_facts": FALSE_FACTS,
        "harm": "It casts Quorvish migrants as unwanted neighbours.",
        "label": 1,
    }
}
PERFECT = "\n".join(
    ["Key background facts:", *(f"- {f}" for f in FACTS), "Target: Quorvish migrants"]
)
P = GenParams()


def sim(**fields: Any) -> SimModelConfig:
    return SimModelConfig.model_validate({"provider": "sim", **fields})


def p_first(w: SimWorld, judge: str, guideline: str | None) -> float:
    """Share of decisive verdicts won by the first-shown of two answers of one target."""
    texts = [
        w.respond(
            "t",
            "arena.answer",
            build_messages("arena.answer", meme_text=MEME, background="A viewer.", task=f"t{i}"),
            P,
        )
        for i in range(60)
    ]
    first = total = 0
    for i in range(0, len(texts) - 1, 2):
        for a, b in ((texts[i], texts[i + 1]), (texts[i + 1], texts[i])):
            msgs = build_messages(
                "arena.judge",
                meme_text=MEME,
                background="A viewer.",
                task=f"t{i}",
                guideline=guideline,
                response_a=a,
                response_b=b,
                criteria=list(CRITERIA),
            )
            reply = w.respond(judge, "arena.judge", msgs, P)
            for v in parse_verdicts(reply, CRITERIA).values():
                total += v.winner != "tie"
                first += v.winner == "A"
    return first / max(total, 1)


def test_a_guideline_that_settles_the_meme_damps_a_judges_bias() -> None:
    models = {"t": sim(skill=0.6), "j": sim(skill=0.2, position_bias=0.4, guideline_damping=1.0)}
    w = SimWorld(models, ANNOTATIONS)
    without, with_guide = p_first(w, "j", None), p_first(w, "j", PERFECT)
    assert without > 0.65  # an ignorant judge leans on its position bias
    assert with_guide < without - 0.1  # the perfect guideline settles nearly everything


def test_null_control_a_guideline_cannot_change_an_undamped_bias() -> None:
    models = {"t": sim(skill=0.6), "j": sim(skill=0.2, position_bias=0.4)}
    w = SimWorld(models, ANNOTATIONS)
    without, with_guide = p_first(w, "j", None), p_first(w, "j", PERFECT)
    assert without > 0.75 and with_guide > 0.75
    assert abs(without - with_guide) < 0.1


def test_new_parameters_at_zero_leave_every_reply_unchanged() -> None:
    plain = SimWorld({"t": sim(skill=0.6), "j": sim(skill=0.3, verbosity_bias=0.2)}, ANNOTATIONS)
    zeroed = SimWorld(
        {
            "t": sim(skill=0.6, family_misbeliefs=0.0),
            "j": sim(skill=0.3, verbosity_bias=0.2, guideline_damping=0.0, family_misbeliefs=0.0),
        },
        ANNOTATIONS,
    )
    for role, msgs in [
        ("arena.guideline_draft", build_messages("arena.guideline_draft", meme_text=MEME)),
        (
            "arena.judge",
            build_messages(
                "arena.judge",
                meme_text=MEME,
                background="A viewer.",
                task="t",
                guideline=PERFECT,
                response_a="[Background Knowledge]\nShort.\n\n[Reasoning]\nA reading.",
                response_b="[Background Knowledge]\nLonger text here.\n\n[Reasoning]\nAnother.",
                criteria=list(CRITERIA),
            ),
        ),
    ]:
        assert plain.respond("j", role, msgs, P) == zeroed.respond("j", role, msgs, P)


def _false_in_draft(w: SimWorld, judge: str, meme: str) -> frozenset[str]:
    reply = w.respond(
        judge, "arena.guideline_self", build_messages("arena.guideline_self", meme_text=meme), P
    )
    text = parse_guideline(reply)
    return frozenset(
        line for line in text.splitlines() if "official motto" in line or "textbook" in line
    )


def test_family_misbeliefs_are_shared_within_a_family() -> None:
    memes = [f"Meme number {k} about the harbour town" for k in range(60)]
    for shared, expect_same in ((1.0, True), (0.0, False)):
        models = {
            "j1": sim(skill=0.0, family="kin", family_misbeliefs=shared),
            "j2": sim(skill=0.0, family="kin", family_misbeliefs=shared),
        }
        w = SimWorld(models)
        pairs = [(_false_in_draft(w, "j1", m), _false_in_draft(w, "j2", m)) for m in memes]
        assert any(a for a, _ in pairs)  # skill 0: some misbeliefs at all
        assert all(a == b for a, b in pairs) == expect_same
