"""The simulated world answers every Arena role in the templates' formats, deterministically, with
quality that follows skill and judges whose injected biases show. (A SIMULATOR, not real models.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memearena.config import SimModelConfig
from memearena.errors import ParseError
from memearena.models.types import GenParams, ImagePart, Message
from memearena.prompts import (
    build_messages,
    parse_answer,
    parse_contexts,
    parse_guideline,
    parse_verdicts,
    reask_message,
)
from memearena.prompts.schemas import CRITERIA
from memearena.sim import (
    DEMO_CONTEXT_MODEL,
    DEMO_JUDGES,
    DEMO_TARGETS,
    REFUSAL_TEXT,
    SimWorld,
    demo_models,
    family_signature,
    true_ranking,
)

MEME = "When the Quorvish neighbours move in   next door"
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
    "when the quorvish neighbours move in next door": {
        "category": "Nationality",
        "target": "Quorvish migrants",
        "facts": FACTS,
        "false_facts": FALSE_FACTS,
        "misbelief": "Quorvish migrants lower the value of a neighbourhood.",
        "harm": "It casts Quorvish migrants as unwanted neighbours, encouraging exclusion.",
        "label": 1,
    }
}
P = GenParams()


def sim(**fields: Any) -> SimModelConfig:
    return SimModelConfig.model_validate({"provider": "sim", **fields})


def world(models: dict[str, SimModelConfig], seed: int = 0) -> SimWorld:
    return SimWorld(models, ANNOTATIONS, seed=seed)


def answer_msgs(task: str = "Explain the harm.", meme: str = MEME) -> list[Message]:
    return build_messages("arena.answer", meme_text=meme, background="A viewer.", task=task)


def judge_msgs(a: str, b: str, *, guideline: str | None = None, task: str = "t") -> list[Message]:
    return build_messages(
        "arena.judge",
        meme_text=MEME,
        background="A viewer.",
        task=task,
        guideline=guideline,
        response_a=a,
        response_b=b,
        criteria=list(CRITERIA),
    )


PERFECT_GUIDELINE = "\n".join(
    ["Key background facts:", *(f"- {f}" for f in FACTS), "Target: Quorvish migrants"]
)


def answers(w: SimWorld, model: str, n: int) -> list[str]:
    return [w.respond(model, "arena.answer", answer_msgs(f"task {i}"), P) for i in range(n)]


def judged(
    w: SimWorld, judge: str, a: str, b: str, *, guideline: str | None = None, task: str = "t"
) -> dict[str, str]:
    reply = w.respond(judge, "arena.judge", judge_msgs(a, b, guideline=guideline, task=task), P)
    return {c: v.winner for c, v in parse_verdicts(reply, CRITERIA).items()}


# ---- formats -------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_contexts_parse(n: int) -> None:
    w = world({"ctx": sim(skill=0.8)})
    reply = w.respond(
        "ctx", "arena.context", build_messages("arena.context", meme_text=MEME, n_contexts=n), P
    )
    contexts = parse_contexts(reply, n)
    assert [c.level for c in contexts] == ["high", "moderate", "unrelated"][:n]
    assert "Quorvish migrants" in contexts[0].background


def test_answers_parse_with_both_sections() -> None:
    w = world({"t": sim(skill=0.7, family="fam")})
    for text in answers(w, "t", 20):
        a = parse_answer(text)
        assert a.format_ok, text
        assert family_signature("fam") in a.reasoning


@pytest.mark.parametrize("role", ["arena.guideline_draft", "arena.guideline_self"])
def test_guidelines_parse(role: str) -> None:
    w = world({"j": sim(skill=1.0)})
    reply = w.respond("j", role, build_messages(role, meme_text=MEME), P)
    g = parse_guideline(reply)
    assert all(f"- {f}" in g for f in FACTS)
    assert "Target: Quorvish migrants" in g
    assert not any(f in g for f in FALSE_FACTS)


def test_refined_guideline_parses() -> None:
    w = world({"j": sim(skill=0.6), "t": sim(skill=0.6)})
    msgs = build_messages(
        "arena.guideline_refine",
        meme_text=MEME,
        guideline=PERFECT_GUIDELINE,
        analysis=answers(w, "t", 1)[0],
    )
    assert parse_guideline(w.respond("j", "arena.guideline_refine", msgs, P))


def test_verdicts_parse_for_any_criteria_subset() -> None:
    w = world({"j": sim(), "t": sim()})
    a, b = answers(w, "t", 2)
    msgs = build_messages(
        "arena.judge",
        meme_text=MEME,
        background="bg",
        task="t",
        guideline=None,
        response_a=a,
        response_b=b,
        criteria=["correctness", "accuracy"],
    )
    reply = w.respond("j", "arena.judge", msgs, P)
    assert set(json.loads(reply)["verdicts"]) == {"correctness", "accuracy"}
    assert set(parse_verdicts(reply, ["correctness", "accuracy"])) == {"correctness", "accuracy"}


def test_ping_and_unmodelled_roles_get_short_replies() -> None:
    w = world({})
    image = ImagePart("data:image/png;base64,AAAA", "cd" * 32)
    assert len(w.respond("any", "ping", build_messages("ping", image=image), P).split()) == 3
    other = w.respond("any", "judge_audit.judge", [Message.text("user", "hi")], P)
    assert "simulated" in other and len(other) < 200


# ---- determinism and lookups ---------------------------------------------------------------


def test_same_request_same_reply_different_requests_differ() -> None:
    models = {"t": sim(skill=0.5)}
    w1, w2 = world(models), world(models)
    assert answers(w1, "t", 10) == answers(w2, "t", 10)
    assert len(set(answers(w1, "t", 10))) > 1
    assert answers(world(models, seed=1), "t", 10) != answers(w1, "t", 10)


def test_a_reask_is_a_different_request() -> None:
    w = world({"j": sim(format_error_rate=0.5)})
    msgs = build_messages("arena.guideline_draft", meme_text=MEME)
    replies = {w.respond("j", "arena.guideline_draft", msgs, P)}
    for i in range(10):
        convo = [*msgs, Message.text("assistant", "x"), reask_message(f"reason {i}")]
        replies.add(w.respond("j", "arena.guideline_draft", convo, P))
    assert len(replies) > 1


def test_meme_lookup_normalizes_text() -> None:
    w = world({"j": sim(skill=1.0)})
    messy = "  WHEN the quorvish\nNEIGHBOURS move in next door "
    g = parse_guideline(
        w.respond(
            "j",
            "arena.guideline_draft",
            build_messages("arena.guideline_draft", meme_text=messy),
            P,
        )
    )
    assert FACTS[0] in g


def test_unknown_memes_get_deterministic_synthetic_facts() -> None:
    w = world({"j": sim(skill=1.0)})
    msgs = build_messages("arena.guideline_draft", meme_text="A meme nobody annotated")
    g1 = parse_guideline(w.respond("j", "arena.guideline_draft", msgs, P))
    g2 = parse_guideline(
        world({"j": sim(skill=1.0)}).respond("j", "arena.guideline_draft", msgs, P)
    )
    assert g1 == g2 and g1.count("\n- ") >= 2


def test_models_resolve_by_key_or_endpoint_id_and_unknown_get_a_default() -> None:
    w = world({"key": sim(skill=1.0, family="fam", model="vendor/model-1")})
    by_key = w.respond("key", "arena.answer", answer_msgs(), P)
    assert family_signature("fam") in by_key
    by_id = w.respond("vendor/model-1", "arena.answer", answer_msgs(), P)
    assert family_signature("fam") in by_id
    unknown = w.respond("stranger", "arena.answer", answer_msgs(), P)
    assert parse_answer(unknown).format_ok and family_signature("stranger") in unknown


# ---- quality follows skill; biases show ----------------------------------------------------


def win_share(
    w: SimWorld,
    judge: str,
    strong: list[str],
    weak: list[str],
    criteria: tuple[str, ...] = CRITERIA,
    **kw: Any,
) -> float:
    """Share of non-tie verdicts on ``criteria`` won by ``strong``, judged in both orders."""
    won = lost = 0
    for i, (s, k) in enumerate(zip(strong, weak, strict=True)):
        for first_is_strong in (True, False):
            a, b = (s, k) if first_is_strong else (k, s)
            verdicts = judged(w, judge, a, b, task=f"t{i}", **kw)
            for winner in (verdicts[c] for c in criteria):
                if winner == "tie":
                    continue
                if (winner == "A") == first_is_strong:
                    won += 1
                else:
                    lost += 1
    return won / max(won + lost, 1)


def test_a_higher_skill_target_wins_with_an_unbiased_judge() -> None:
    w = world({"strong": sim(skill=0.9), "weak": sim(skill=0.3), "j": sim(skill=0.8)})
    share = win_share(w, "j", answers(w, "strong", 100), answers(w, "weak", 100))
    assert share > 0.7


def test_a_guideline_makes_ignorant_judges_agree_with_the_truth_more() -> None:
    judges = {f"j{i}": sim(skill=0.0, noise=0.1) for i in range(4)}
    w = world({"strong": sim(skill=0.9), "weak": sim(skill=0.3), **judges})
    strong, weak = answers(w, "strong", 40), answers(w, "weak", 40)
    knowledge = ("correctness", "accuracy")
    without = sum(win_share(w, j, strong, weak, knowledge) for j in judges) / len(judges)
    with_g = sum(
        win_share(w, j, strong, weak, knowledge, guideline=PERFECT_GUIDELINE) for j in judges
    ) / len(judges)
    assert with_g > 0.75 and with_g > without + 0.15


def p_first(w: SimWorld, judge: str, texts: list[str]) -> float:
    """Share of non-tie verdicts for the response shown first, over both orders of each pair."""
    first = total = 0
    for i in range(0, len(texts) - 1, 2):
        for a, b in ((texts[i], texts[i + 1]), (texts[i + 1], texts[i])):
            for winner in judged(w, judge, a, b, task=f"t{i}").values():
                total += winner != "tie"
                first += winner == "A"
    return first / max(total, 1)


def test_a_position_biased_judge_prefers_the_first_response() -> None:
    models = {"t": sim(skill=0.6), "fair": sim(), "first": sim(position_bias=0.3)}
    w = world(models)
    texts = answers(w, "t", 80)
    assert abs(p_first(w, "fair", texts) - 0.5) < 0.1
    assert p_first(w, "first", texts) > 0.7
    w_neg = world({**models, "second": sim(position_bias=-0.3)})
    assert p_first(w_neg, "second", texts) < 0.3


def p_longer(w: SimWorld, judge: str) -> float:
    longer = total = 0
    for i, text in enumerate(answers(w, "t", 40)):
        padded = text + " This point is worth restating in more words, to be thorough about it."
        for a, b in ((text, padded), (padded, text)):
            for winner in judged(w, judge, a, b, task=f"t{i}").values():
                total += winner != "tie"
                longer += (winner == "A") == (a is padded) and winner != "tie"
    return longer / max(total, 1)


def test_a_verbosity_biased_judge_prefers_the_longer_response() -> None:
    w = world({"t": sim(skill=0.6), "fair": sim(), "wordy": sim(verbosity_bias=0.3)})
    assert abs(p_longer(w, "fair") - 0.5) < 0.1
    assert p_longer(w, "wordy") > 0.75


def test_a_self_biased_judge_favours_its_own_family() -> None:
    models = {
        "mine": sim(skill=0.6, family="kin"),
        "other": sim(skill=0.6, family="stranger"),
        "fair": sim(skill=0.8, family="kin"),
        "vain": sim(skill=0.8, family="kin", self_bias=0.4),
    }
    w = world(models)
    mine, other = answers(w, "mine", 60), answers(w, "other", 60)
    assert abs(win_share(w, "fair", mine, other) - 0.5) < 0.12
    assert win_share(w, "vain", mine, other) > 0.75


# ---- refusals and format errors ------------------------------------------------------------


def test_refusal_rate_takes_effect() -> None:
    w = world({"never": sim(), "always": sim(refusal_rate=1.0), "some": sim(refusal_rate=0.3)})
    assert REFUSAL_TEXT not in answers(w, "never", 50)
    assert set(answers(w, "always", 5)) == {REFUSAL_TEXT}
    share = answers(w, "some", 300).count(REFUSAL_TEXT) / 300
    assert 0.2 < share < 0.4
    assert REFUSAL_TEXT.startswith("I'm sorry, but I can't")


def test_format_error_rate_takes_effect_for_every_structured_role() -> None:
    w = world({"bad": sim(format_error_rate=1.0), "t": sim()})
    assert not any(parse_answer(t).format_ok for t in answers(w, "bad", 20))
    a, b = answers(w, "t", 2)
    with pytest.raises(ParseError):
        parse_verdicts(w.respond("bad", "arena.judge", judge_msgs(a, b), P), CRITERIA)
    msgs = build_messages("arena.context", meme_text=MEME, n_contexts=3)
    with pytest.raises(ParseError):
        parse_contexts(w.respond("bad", "arena.context", msgs, P), 3)
    msgs = build_messages("arena.guideline_draft", meme_text=MEME)
    with pytest.raises(ParseError):
        parse_guideline(w.respond("bad", "arena.guideline_draft", msgs, P))
    some = world({"some": sim(format_error_rate=0.2)})
    share = sum(not parse_answer(t).format_ok for t in answers(some, "some", 300)) / 300
    assert 0.12 < share < 0.28


def test_a_malformed_answer_loses_on_instruction_following() -> None:
    w = world({"ok": sim(skill=0.6), "bad": sim(skill=0.6, format_error_rate=1.0), "j": sim()})
    ok, bad = answers(w, "ok", 30), answers(w, "bad", 30)
    wins = sum(
        judged(w, "j", a, b, task=f"{i}")["instruction_following"] == "A"
        for i, (a, b) in enumerate(zip(ok, bad, strict=True))
    )
    assert wins >= 28


# ---- guideline fusion ----------------------------------------------------------------------


def refine(w: SimWorld, judge: str, guideline: str, analysis: str) -> str:
    msgs = build_messages(
        "arena.guideline_refine", meme_text=MEME, guideline=guideline, analysis=analysis
    )
    return parse_guideline(w.respond(judge, "arena.guideline_refine", msgs, P))


def test_refine_adds_true_facts_from_the_analysis() -> None:
    w = world({"j": sim(skill=1.0)})
    guideline = f"Key background facts:\n- {FACTS[0]}\nTarget: Quorvish migrants\nCategory: x"
    analysis = f"[Background Knowledge]\n{FACTS[1]} {FACTS[2]}\n[Reasoning]\nIt targets them."
    out = refine(w, "j", guideline, analysis)
    assert all(f"- {f}" in out for f in FACTS)
    assert out.index(f"- {FACTS[2]}") < out.index("Target:")
    assert "Category: x" in out  # the rest is kept


def test_refine_drops_false_facts_it_recognises_and_fixes_the_target() -> None:
    w = world({"j": sim(skill=1.0)})
    guideline = f"Key background facts:\n- {FACTS[0]}\n- {FALSE_FACTS[0]}\nTarget: unclear"
    analysis = f"[Background Knowledge]\n{FALSE_FACTS[1]}\n[Reasoning]\nIt targets tourists."
    out = refine(w, "j", guideline, analysis)
    assert not any(f in out for f in FALSE_FACTS)
    assert "Target: Quorvish migrants" in out


def test_fusion_over_rounds_collects_the_panels_knowledge() -> None:
    judges = {f"j{i}": sim(skill=0.5) for i in range(4)}
    w = world({**judges, "t": sim(skill=0.9)})
    msgs = build_messages("arena.guideline_draft", meme_text=MEME)
    g = parse_guideline(w.respond("j0", "arena.guideline_draft", msgs, P))
    start = sum(f in g for f in FACTS)
    for r, analysis in enumerate(answers(w, "t", 8)):
        g = refine(w, f"j{r % 4}", g, analysis)
    assert sum(f in g for f in FACTS) >= max(start, 2)


# ---- catalogue -----------------------------------------------------------------------------


def test_demo_catalogue_is_well_formed() -> None:
    models = demo_models()
    assert set(DEMO_TARGETS) | set(DEMO_JUDGES) == set(models)
    assert DEMO_CONTEXT_MODEL in models
    ranking = true_ranking(models, list(DEMO_TARGETS))
    skills = [models[t].skill for t in ranking]
    assert skills == sorted(skills, reverse=True) and len(set(skills)) == len(skills)
    families = [m.family for m in models.values()]
    sigs = {family_signature(f) for f in families if f}
    assert len(sigs) == len(set(families))  # no two families share a signature
    assert len({DEMO_TARGETS[t].family for t in DEMO_TARGETS}) == len(DEMO_TARGETS)
    vain = max(DEMO_JUDGES.values(), key=lambda j: j.self_bias)
    kin = [t for t in ranking if DEMO_TARGETS[t].family == vain.family]
    assert vain.self_bias >= 0.3 and kin and ranking.index(kin[0]) >= len(ranking) // 2
    models["sim-aurora"].skill = 0.0
    assert demo_models()["sim-aurora"].skill == 0.9  # fresh copies


def test_true_ranking_rejects_unknown_targets() -> None:
    with pytest.raises(ValueError, match="ghost"):
        true_ranking(demo_models(), ["sim-aurora", "ghost"])
