"""Filters: harmful_only, then a seeded stratified sample, then limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_helpers import write_image, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from memearena.config import DatasetConfig
from memearena.data import Meme, apply_filters, load_dataset, stratified_sample


def _memes(harmful: int, benign: int, unlabelled: int = 0) -> list[Meme]:
    labels = [True] * harmful + [False] * benign + [None] * unlabelled
    return [Meme(id=str(i), source="jsonl", harmful=h) for i, h in enumerate(labels)]


def test_harmful_only_keeps_only_items_labelled_harmful() -> None:
    memes = _memes(3, 4, 2)
    assert [m.harmful for m in apply_filters(memes, harmful_only=True)] == [True] * 3


def test_stratified_sample_is_proportional() -> None:
    sample = stratified_sample(_memes(30, 70), 10, seed=0)
    assert len(sample) == 10
    assert sum(m.harmful is True for m in sample) == 3


def test_stratified_sample_is_deterministic_per_seed_and_keeps_order() -> None:
    memes = _memes(30, 70, 20)
    a = [m.id for m in stratified_sample(memes, 12, seed=7)]
    assert a == [m.id for m in stratified_sample(memes, 12, seed=7)]
    assert a != [m.id for m in stratified_sample(memes, 12, seed=8)]
    assert a == sorted(a, key=int)


def test_sample_larger_than_the_set_returns_everything() -> None:
    memes = _memes(2, 3)
    assert stratified_sample(memes, 50, seed=0) == memes


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 40), st.integers(0, 40), st.integers(0, 10), st.integers(1, 60), st.integers()
)
def test_stratified_allocation_is_within_one_of_exact(
    harmful: int, benign: int, unlabelled: int, n: int, seed: int
) -> None:
    memes = _memes(harmful, benign, unlabelled)
    sample = stratified_sample(memes, n, seed)
    total = len(memes)
    assert len(sample) == min(n, total)
    assert len({m.id for m in sample}) == len(sample)
    if total and n < total:
        for label, size in ((True, harmful), (False, benign), (None, unlabelled)):
            got = sum(m.harmful is label for m in sample)
            assert abs(got - n * size / total) < 1


def test_filters_apply_in_order_harmful_sample_limit() -> None:
    memes = _memes(40, 60)
    out = apply_filters(memes, harmful_only=True, sample=10, sample_seed=1, limit=4)
    assert len(out) == 4 and all(m.harmful for m in out)
    sampled = apply_filters(memes, harmful_only=True, sample=10, sample_seed=1)
    assert out == sampled[:4]
    assert apply_filters(memes, limit=3) == memes[:3]


@pytest.mark.parametrize("seed", [0, 1])
def test_loader_applies_filters_before_checking_images(tmp_path: Path, seed: int) -> None:
    rows = []
    for i in range(20):
        harmful = i % 4 == 0  # 5 harmful, 15 not
        if i != 3:
            write_image(tmp_path / "img" / f"{i}.png")
        rows.append({"id": i, "img": f"img/{i}.png", "label": int(harmful), "text": str(i)})
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = DatasetConfig(format="fhm", path=path, sample=8, sample_seed=seed)
    result = load_dataset(cfg)
    picked = {m.id for m in result.memes} | {e.item for e in result.errors}
    assert len(picked) == 8  # the sample depends on the file and seed, not on image health
    assert sum(m.harmful is True for m in result.memes) == 2
    again = load_dataset(cfg)
    assert [m.id for m in again.memes] == [m.id for m in result.memes]
    limited = load_dataset(DatasetConfig(format="fhm", path=path, harmful_only=True, limit=2))
    assert [m.id for m in limited.memes] == ["00000", "00004"]  # FHM ids: five digits
