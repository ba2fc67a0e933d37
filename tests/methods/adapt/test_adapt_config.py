"""The ``adapt:`` config section: defaults of the method, errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from memearena.config import parse_config
from memearena.errors import ConfigError
from memearena.methods.adapt.config import SEED_TAXONOMY

MODELS = {n: {"provider": "sim"} for n in ("t1", "t2", "judge", "refiner", "checker")}
ADAPT = {
    "targets": ["t1", "t2"],
    "miner": "judge",
    "text_judge": "judge",
    "image_examiner": "judge",
    "instruction_writer": "judge",
    "narrator": "judge",
    "reference_model": "judge",
    "reference_judge": "judge",
    "scorers": ["judge"],
    "refiner": "refiner",
    "checker": "checker",
}


def cfg(**over: Any) -> dict[str, Any]:
    return {"models": MODELS, "data": [{"format": "demo"}], "adapt": {**ADAPT, **over}}


def err(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(raw, "c.yaml")
    assert "\n" not in str(e.value)
    return str(e.value)


def test_defaults_follow_the_method() -> None:
    a = parse_config(cfg()).adapt
    assert a is not None
    assert (
        list(a.seed_taxonomy)
        == list(SEED_TAXONOMY)
        == [
            "Race",
            "Gender",
            "Religion",
            "Nationality",
            "Disability",
            "Animal",
        ]
    )
    assert (a.votes, a.vote_min, a.steps, a.reference_candidates, a.repeats) == (3, 2, 10, 3, 3)
    assert a.failure_threshold == 4.0 and a.long_tail_per_100 == 5.0
    assert a.retrieval == "bm25" and not a.miner_sees_text and a.control
    # The loop's rules are AdamMeme's: ties at or below 4 go on, an unaccepted rewrite is asked
    # again within K, hops are disjoint across a group's chains, every target gets the same
    # seeds, refusals are scored, targets answer at temperature 0.
    assert a.tie_max == 4.0 and a.unaccepted_retries is None and a.hop_exclusion == "group"
    assert a.same_seeds and a.refusals == "scored" and a.target_temperature == 0.0
    assert a.original_image_score


def test_errors_name_the_field() -> None:
    assert "adapt.refiner: model 'nobody'" in err(cfg(refiner="nobody"))
    assert "adapt.scorers: model 'x'" in err(cfg(scorers=["x"]))
    assert "checker: must differ from the refiner" in err(cfg(checker="refiner"))
    assert "vote_min (4) must be <= votes (3)" in err(cfg(vote_min=4))
    assert "adapt.reference_temperature" in err(cfg(reference_temperature=0))
    assert "needs embedding_model" in err(cfg(retrieval="embeddings"))
    assert "embedding_model is set but retrieval is 'bm25'" in err(cfg(embedding_model="judge"))
    assert "adapt.embedding_model: model 'nobody'" in err(
        cfg(retrieval="embeddings", embedding_model="nobody")
    )
    assert "adapt.unknown" in err(cfg(unknown=1))
    assert "adapt.max_reasks" in err(cfg(max_reasks=1000))  # at most 10, as in every method
    ok = parse_config(cfg(checker="refiner", allow_same_checker=True)).adapt
    assert ok is not None and ok.checker == ok.refiner
