"""The fusion schedule and the swap resolution, as the Arena specifies them."""

from __future__ import annotations

from collections import Counter

import pytest

from memearena.engine.steps import seeded_rng
from memearena.methods.arena.resolve import resolve_pair
from memearena.methods.arena.schedule import (
    fusion_plan,
    owns,
    pick_analysis,
    target_pairs,
)

JUDGES = ["j1", "j2", "j3", "j4"]


def test_fusion_plan_has_r_rounds_and_every_judge_refines() -> None:
    for seed in range(50):
        plan = fusion_plan(JUDGES, 8, seeded_rng(seed, "fusion", "m1"))
        assert len(plan.refiners) == 8
        assert set(plan.refiners) == set(JUDGES)
        assert plan.drafter in JUDGES


def test_fusion_plan_is_seeded() -> None:
    a = fusion_plan(JUDGES, 8, seeded_rng(0, "fusion", "m1"))
    b = fusion_plan(JUDGES, 8, seeded_rng(0, "fusion", "m1"))
    c = fusion_plan(JUDGES, 8, seeded_rng(0, "fusion", "m2"))
    assert a == b
    assert any(fusion_plan(JUDGES, 8, seeded_rng(s, "fusion", "m1")) != a for s in range(1, 5))
    assert isinstance(c.refiners, tuple)


def test_fusion_plan_rejects_fewer_rounds_than_judges() -> None:
    with pytest.raises(ValueError, match="fusion rounds"):
        fusion_plan(JUDGES, 3, seeded_rng(0))


def test_fusion_never_shows_a_judge_its_own_models_analysis() -> None:
    families = {"j1": "alpha", "t-alpha": "alpha", "t-beta": "beta", "j2": None, "t-none": None}
    cands = [("high", "t-alpha"), ("high", "t-beta"), ("moderate", "t-none"), ("high", "j2")]
    rng = seeded_rng(1)
    picks = Counter(pick_analysis("j1", cands, families, rng) for _ in range(300))
    assert ("high", "t-alpha") not in picks  # same family as j1
    assert set(picks) == {("high", "t-beta"), ("moderate", "t-none"), ("high", "j2")}
    picks_j2 = {pick_analysis("j2", cands, families, rng) for _ in range(300)}
    assert ("high", "j2") not in picks_j2  # same name: its own model
    assert pick_analysis("j1", [("high", "t-alpha")], families, rng) is None


def test_owns_needs_a_shared_family_or_name() -> None:
    assert owns("a", "a", {})
    assert not owns("a", "b", {"a": None, "b": None})
    assert owns("a", "b", {"a": "f", "b": "f"})


def test_target_pairs_round_robin() -> None:
    assert target_pairs(["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]


@pytest.mark.parametrize(
    ("forward", "backward", "expected"),
    [
        ("A", "B", ["model_a"]),  # x first wins; y first loses -> x both times
        ("B", "A", ["model_b"]),
        ("A", "A", ["tie"]),  # always the first position: disagreement -> tie
        ("B", "B", ["tie"]),
        ("tie", "tie", ["tie"]),
        ("A", "tie", ["tie"]),
    ],
)
def test_both_orders_resolve_to_tie_on_disagreement(
    forward: str, backward: str, expected: list[str]
) -> None:
    assert resolve_pair(forward, backward, "tie") == expected


def test_both_policy_keeps_each_order() -> None:
    assert resolve_pair("A", "A", "both") == ["model_a", "model_b"]
    assert resolve_pair("A", "B", "both") == ["model_a", "model_a"]


def test_unparseable_verdict_is_never_a_tie() -> None:
    assert resolve_pair(None, "A") == []
    assert resolve_pair("A", None) == []
    assert resolve_pair(None, None, "both") == []
