"""Harmfulness mining: the vote rule, every new-category filter, long-tail pruning, versions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from adapt_helpers import prompt_text, run_pipeline, small_config, tag

from memearena.methods.adapt.common import Vote, name_filter, parse_vote
from memearena.methods.adapt.config import SEED_TAXONOMY
from memearena.methods.adapt.mining import count_votes
from memearena.models.types import GenParams, Message

WITHOUT_GENDER = {k: v for k, v in SEED_TAXONOMY.items() if k != "Gender"}


def test_a_category_needs_two_of_three_votes() -> None:
    votes = [Vote(("Race",), None), Vote(("Race", "Gender"), None), Vote(("Religion",), None)]
    assert count_votes(votes, 2)[0] == ["Race"]
    assert count_votes(votes, 1)[0] == ["Race", "Gender", "Religion"]
    assert count_votes(votes, 3)[0] == []
    # A new category counts by name, case-insensitively, with the first spelling kept.
    props = [
        Vote((), ("Political", "Attacks political groups.")),
        Vote((), ("political ", "Demeans people for their politics.")),
        Vote((), ("Age", "Demeans older people.")),
    ]
    assert count_votes(props, 2)[1] == [("Political", "Attacks political groups.")]


def test_a_vote_may_only_name_known_categories() -> None:
    v = parse_vote('{"categories": ["race"], "new_category": null}', ["Race", "Gender"])
    assert v == Vote(("Race",), None)
    for bad in (
        '{"categories": ["Politics"], "new_category": null}',
        '{"categories": "Race"}',
        '{"categories": ["Race"], "new_category": "Politics"}',
        "Race, clearly.",
    ):
        try:
            parse_vote(bad, ["Race"])
        except Exception as e:
            assert type(e).__name__ == "ParseError"
        else:
            raise AssertionError(f"accepted {bad!r}")


def test_the_name_filter() -> None:
    existing = list(SEED_TAXONOMY)
    assert name_filter("Political", existing) is None
    assert name_filter("Child Exploitation", existing) is None
    assert name_filter("Dark Humour Memes", existing) == "name must be one or two words of letters"
    assert name_filter("Age 2", existing) == "name must be one or two words of letters"
    assert name_filter("Races", existing) == "a variant of 'Race'"
    assert name_filter("Racism", existing) == "a variant of 'Race'"
    assert name_filter("gendered", existing) == "a variant of 'Gender'"
    assert name_filter("Religious", existing) == "a variant of 'Religion'"
    assert name_filter("Animals", existing) == "a variant of 'Animal'"


def test_a_mined_category_flows_through_every_stage(tmp_path: Path) -> None:
    # Gender is left out of the seed: the miner proposes it for the Gender memes.
    cfg = small_config(seed_taxonomy=WITHOUT_GENDER)
    out, store, _ = run_pipeline(cfg, tmp_path)
    mined = [t for t in out.taxonomy if t["origin"] == "mined"]
    assert [t["name"] for t in mined] == ["Gender"]
    assert "Gender" in mined[0]["instruction"]  # generated, not hard-coded
    assert [d["fate"] for d in out.decisions if d["name"] == "Gender"] == ["kept"]
    scored = [o for o in out.originals if o["category"] == "Gender" and o["outcome"] == "scored"]
    assert scored, "the mined category reached scoring"
    assert any(c["category"] == "Gender" for c in out.chains), "and refinement"
    assert store.count_artifacts("adapt.instruction") == 1
    assert store.count_artifacts("adapt.misbelief") >= len({o["meme"] for o in scored})
    # Versioned: the version holding the mined category points to the seed version.
    versions = dict(store.artifacts("adapt.taxonomy"))
    assert out.taxonomy_version in versions
    assert versions[out.taxonomy_version]["parent"] in versions


def _override_json(key: str, value: object):
    def fn(model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        return json.dumps({key: value, "unique": True, "granularity": True, "overlaps": []})

    return fn


def test_the_text_judge_can_reject(tmp_path: Path) -> None:
    cfg = small_config(seed_taxonomy=WITHOUT_GENDER, steps=1)
    out, _, _ = run_pipeline(
        cfg, tmp_path, {"adapt.category_judge": _override_json("accept", False)}
    )
    assert [t["name"] for t in out.taxonomy] == list(WITHOUT_GENDER)
    assert [d["fate"] for d in out.decisions if d["name"] == "Gender"] == ["text judge: rejected"]
    assert not any(o["category"] == "Gender" for o in out.originals)


def test_the_image_examiner_can_reject(tmp_path: Path) -> None:
    cfg = small_config(seed_taxonomy=WITHOUT_GENDER, steps=1)

    def examiner(model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        # The examiner sees the image and the proposal, never the meme text (image-only mining).
        assert tag(prompt_text(messages), "meme_text") is None
        return '{"fits": false, "reason": "not this harm"}'

    out, _, _ = run_pipeline(cfg, tmp_path, {"adapt.image_examiner": examiner})
    fates = [d["fate"] for d in out.decisions if d["name"] == "Gender"]
    assert fates == ["image examiner: rejected"]
    assert "Gender" not in [t["name"] for t in out.taxonomy]


def test_the_long_tail_is_pruned(tmp_path: Path) -> None:
    # 4 Gender memes of 8 is 50 per 100; a cut at 60 prunes it.
    cfg = small_config(seed_taxonomy=WITHOUT_GENDER, long_tail_per_100=60, steps=1)
    out, _, _ = run_pipeline(cfg, tmp_path)
    (fate,) = [d["fate"] for d in out.decisions if d["name"] == "Gender"]
    assert fate.startswith("long tail:") and "< 60" in fate
    assert "Gender" not in [t["name"] for t in out.taxonomy]


def test_votes_are_sampled_until_enough_are_valid(tmp_path: Path) -> None:
    cfg = small_config(limit=1, steps=1, max_vote_attempts=4)
    seen: list[int | None] = []

    def miner(model: str, role: str, messages: Sequence[Message], params: GenParams) -> str | None:
        seen.append(params.seed)
        return "no JSON at all" if params.seed in (0, 2) else None

    out, store, _ = run_pipeline(cfg, tmp_path, {"adapt.miner": miner})
    # Attempts 0 and 2 are invalid; 1 and 3 valid: only 2 valid votes in the 4-call bound.
    assert sorted(seen) == [0, 1, 2, 3]
    assert out.assigned == 0
    errors = [e for e in store.errors() if e.kind == "adapt.vote" and "valid vote" in e.reason]
    assert errors and "only 2 valid vote(s) in 4 attempts" in errors[0].reason
