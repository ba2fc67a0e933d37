"""Harmfulness mining: the vote rule, every new-category filter, long-tail pruning, versions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
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


# ---- the taxonomy grows while it is mined (AdamMeme's mining) -------------------------------

PLANTED = {"Political": 30, "Age": 14, "Sexual Orientation": 6}
SEEDED = {"Race": 70, "Gender": 50, "Religion": 30}


def _planted_set(root: Path) -> tuple[Path, dict[str, str]]:
    """200 FHM-format memes (each its own image): seed categories and planted new ones."""
    from PIL import Image

    (root / "img").mkdir(parents=True)
    rows, truth = [], {}
    plan = [c for c, n in {**SEEDED, **PLANTED}.items() for _ in range(n)]
    for i, cat in enumerate(plan):
        Image.new("RGB", (24, 24), (i % 256, (i * 7) % 256, (i * 13) % 256)).save(
            root / "img" / f"{i:05d}.png"
        )
        rows.append(
            {
                "id": i,
                "img": f"img/{i:05d}.png",
                "label": 1,
                "text": f"MEME NUMBER {i} ABOUT {cat.upper()} PEOPLE",
                "category": cat,
                "target": f"group {i % 7}",
            }
        )
        truth[f"{i:05d}"] = cat
    (root / "memes.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root / "memes.jsonl", truth


def _mine_planted(tmp_path: Path, **adapt: object):
    import asyncio

    from memearena.config import DatasetConfig
    from memearena.engine.pool import sim_world
    from memearena.engine.rundir import load_memes
    from memearena.methods.adapt.common import AdaptContext
    from memearena.methods.adapt.mining import mine
    from memearena.models import ModelPool
    from memearena.store import RunStore

    path, truth = _planted_set(tmp_path / "data")
    seed = {k: v for k, v in SEED_TAXONOMY.items() if k in SEEDED}
    cfg = small_config(limit=None, seed_taxonomy=seed, window=16, **adapt)
    cfg = cfg.model_copy(update={"data": [DatasetConfig(format="fhm", path=str(path))]})
    store = RunStore(tmp_path / "run.db")
    memes = load_memes(cfg, store).memes
    assert len(memes) == 200
    world = sim_world(cfg, memes)

    def once():
        pool = ModelPool(cfg.models, store=store, cache=None, responder=world)
        ctx = AdaptContext(cfg, pool, store, on_image=world.adapt.register_image)

        async def go():
            try:
                return await mine(ctx, memes)
            finally:
                await pool.aclose()

        return asyncio.run(go())

    return once, store, truth


def test_mining_recovers_planted_categories_at_the_planted_rate(tmp_path: Path) -> None:
    once, store, truth = _mine_planted(tmp_path)
    mining = once()
    by_name = {d["name"]: d for d in mining.decisions}
    names = [c.name for c in mining.taxonomy]
    assert names[: len(SEEDED)] == list(SEEDED)
    # Planted at 15 and 7 per 100: kept; at 3 per 100: accepted, then pruned on the final counts.
    assert set(names[len(SEEDED) :]) == {"Political", "Age"}
    assert by_name["Sexual Orientation"]["fate"].startswith("long tail:")
    for cat in ("Political", "Age"):
        d = by_name[cat]
        assert d["fate"] == "kept"
        got = {uid.split(":")[-1] for uid, cats in mining.assignments.items() if cat in cats}
        planted = {k for k, v in truth.items() if v == cat}
        recovered = len(got & planted) / len(planted)
        # The miner (skill 0.85) names the category in 2 of 3 votes with p = 0.94.
        assert 0.8 <= recovered <= 1.0, (cat, recovered)
        assert len(got - planted) <= 1, (cat, sorted(got - planted))
        assert d["hits_per_100"] == pytest.approx(100 * d["hits"] / 200)
        # One meme's proposal put it in the taxonomy; later memes voted for it.
        assert d["accepted_by"] in mining.assignments
        assert d["hits_by_later_votes"] >= 0.7 * len(planted)
        assert all({"meme", "fate"} <= set(e) for e in d["events"])
        assert d["fates"]["accepted"] == 1 and sum(d["fates"].values()) == d["proposed_by"]
    # Every proposal's fate is in the log, the junk ones included.
    fates = {d["name"]: d["fate"] for d in mining.decisions}
    assert fates.get("Races", "name filter").startswith("name filter")
    assert all(d["fate"] for d in mining.decisions)
    assert all(sum(d["fates"].values()) == d["proposed_by"] for d in mining.decisions)
    # Each acceptance is a taxonomy version pointing at its parent.
    versions = dict(store.artifacts("adapt.taxonomy"))
    assert versions[mining.version]["parent"] in versions
    assert by_name["Political"]["version"] in versions


def test_mining_resumes_from_the_store(tmp_path: Path) -> None:
    once, store, _ = _mine_planted(tmp_path)
    first = once()
    calls = len(list(store.calls()))
    again = once()
    assert len(list(store.calls())) == calls  # every vote keyed by the taxonomy it was shown
    assert again.assignments == first.assignments and again.version == first.version


def test_stricter_proposal_votes(tmp_path: Path) -> None:
    # Every vote must propose the name: fewer proposals are judged, never more.
    once, _, _ = _mine_planted(tmp_path, proposal_votes=3)
    strict = once()
    judged = sum(d["proposed_by"] for d in strict.decisions)
    once1, _, _ = _mine_planted(tmp_path / "one")
    loose = sum(d["proposed_by"] for d in once1().decisions)
    assert judged < loose
    votes = [Vote((), ("Age", "d")), Vote((), None), Vote((), ("age", "d2"))]
    assert count_votes(votes, 2, 1)[1] == [("Age", "d")]
    assert count_votes(votes, 2, 3)[1] == []
