"""Every published FHM / HarMeme / MAMI annotation file in ``../shared/realdata`` loads in its
release layout (placeholder images at the paths the files name), row for row as in the raw file.

The files are public releases kept outside the repository (see PROVENANCE.tsv there); the tests
skip when that folder is absent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from data_helpers import write_image

from memearena.config import DatasetConfig
from memearena.data import LoadResult, fhm_id, load_dataset, load_datasets

REALDATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata"

pytestmark = pytest.mark.skipif(
    not (REALDATA / "PROVENANCE.tsv").is_file(), reason="../shared/realdata is not available"
)

FHM_FILES = sorted(f"{d}/{f}" for d in ("fhm_original", "fhm_reserialized") for f in (
    "dev_seen.jsonl", "dev_unseen.jsonl", "test_seen.jsonl", "test_unseen.jsonl", "train.jsonl"
) if (REALDATA / d / f).is_file())  # fmt: skip
HARM_SPLITS = {"Harm-C": ("train", "val", "test"), "Harm-P": ("train_v1", "val_v1", "test_v1")}
HARM_FILES = [f"harmeme/{s}/{f}.jsonl" for s, names in HARM_SPLITS.items() for f in names]
MAMI_FILES = ["mami/training.csv"]


def _raw_json_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            yield n, json.loads(line)


def _placeholders(root: Path, names: set[str]) -> None:
    """A tiny valid image at every path the annotation file names (hard links: cheap)."""
    proto = write_image(root.parent / f".proto-{root.name}.png", (8, 8))
    for rel in names:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(proto, target)


def _release(tmp: Path, rel: str, layout: str) -> tuple[Path, Path]:
    """Lay ``rel`` out as released: (annotation file, image root) inside ``tmp``."""
    src = REALDATA / rel
    if layout == "fhm":  # hateful_memes/data/{train,dev_seen,...}.jsonl + data/img/NNNNN.png
        ann = tmp / "hateful_memes" / "data" / src.name
        root = ann.parent
    elif layout == "harm":  # HarMeme_V1/Annotations/Harm-C/train.jsonl; images in Images/
        ann = tmp / "HarMeme_V1" / "Annotations" / src.parent.name / src.name
        root = tmp / "HarMeme_V1" / "Images"
    else:  # MAMI: TRAINING/training.csv next to its jpgs
        ann = tmp / "TRAINING" / src.name
        root = ann.parent
    ann.parent.mkdir(parents=True, exist_ok=True)
    ann.symlink_to(src)
    return ann, root


def _by_id(result: LoadResult) -> dict[str, Any]:
    memes = {m.id: m for m in result.memes}
    assert len(memes) == len(result.memes)
    return memes


@pytest.mark.parametrize("rel", FHM_FILES)
def test_fhm_file_loads_every_row_as_published(tmp_path: Path, rel: str) -> None:
    ann, root = _release(tmp_path, rel, "fhm")
    raw = list(_raw_json_rows(ann))
    _placeholders(root, {r["img"] for _, r in raw})
    result = load_dataset(DatasetConfig(format="fhm", path=ann))
    assert result.errors == [] and result.duplicates == []
    memes = _by_id(result)
    assert len(memes) == len(raw)
    for n, row in raw:
        meme = memes.pop(fhm_id(row["id"]))
        # The canonical id is the image's name, whichever way the copy stores the id.
        assert meme.id == Path(row["img"]).stem, n
        assert meme.text == row["text"], n
        assert meme.image_path == (root / row["img"]).resolve(), n
        assert meme.harmful == (None if "label" not in row else row["label"] == 1), n
        assert meme.split == ann.stem and meme.source == "fhm"
    assert memes == {}


@pytest.mark.parametrize("rel", HARM_FILES)
def test_harmeme_file_loads_every_row_as_published(tmp_path: Path, rel: str) -> None:
    ann, root = _release(tmp_path, rel, "harm")
    raw = list(_raw_json_rows(ann))
    _placeholders(root, {r["image"] for _, r in raw})
    result = load_dataset(DatasetConfig(format="harm", path=ann, image_root=root))
    memes = _by_id(result)
    bad_lines = {e.item for e in result.errors}
    assert len(memes) + len(bad_lines) == len(raw)
    for n, row in raw:
        if f"line {n}" in bad_lines:
            # The one published row with a blank harmfulness label: recorded, not guessed.
            assert row["labels"][0] == "" and row["id"] not in memes
            continue
        meme = memes.pop(row["id"])
        assert meme.text == row["text"] and meme.labels == row["labels"], n
        assert meme.harmful == (row["labels"][0] != "not harmful"), n
        assert meme.image_path == (root / row["image"]).resolve(), n
    assert memes == {}
    expected_bad = {"line 1706"} if rel == "harmeme/Harm-P/train_v1.jsonl" else set()
    assert bad_lines == expected_bad
    assert all(e.kind == "bad row" and "field 'labels'" in e.reason for e in result.errors)


@pytest.mark.parametrize("rel", MAMI_FILES)
def test_mami_file_loads_every_row_as_published(tmp_path: Path, rel: str) -> None:
    ann, root = _release(tmp_path, rel, "mami")
    data = ann.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")  # the release has a BOM
    header, *lines = data.decode("utf-8-sig").splitlines()
    cols = header.split("\t")
    raw = [dict(zip(cols, line.split("\t"), strict=True)) for line in lines if line.strip()]
    _placeholders(root, {r["file_name"] for r in raw})
    result = load_dataset(DatasetConfig(format="mami", path=ann))
    assert result.errors == [] and result.duplicates == []
    memes = _by_id(result)
    assert len(memes) == len(raw) == 10_000
    subs = ("shaming", "stereotype", "objectification", "violence")
    for row in raw:
        meme = memes.pop(row["file_name"])
        assert meme.text == row["Text Transcription"]
        assert meme.harmful == (row["misogynous"] == "1")
        assert meme.labels == [s for s in subs if row[s] == "1"]
        assert meme.image_path == (root / row["file_name"]).resolve()
    assert memes == {}


@pytest.mark.parametrize(
    ("seen", "unseen"),
    [
        ("fhm_original", "fhm_original"),
        ("fhm_reserialized", "fhm_reserialized"),
        ("fhm_original", "fhm_reserialized"),
    ],
)
def test_fhm_dev_seen_plus_dev_unseen_is_640_unique_items(
    tmp_path: Path, seen: str, unseen: str
) -> None:
    a, root = _release(tmp_path / "a", f"{seen}/dev_seen.jsonl", "fhm")
    b, root_b = _release(tmp_path / "a", f"{unseen}/dev_unseen.jsonl", "fhm")
    assert root == root_b
    names = {r["img"] for f in (a, b) for _, r in _raw_json_rows(f)}
    _placeholders(root, names)
    result = load_datasets(
        [DatasetConfig(format="fhm", path=a), DatasetConfig(format="fhm", path=b)]
    )
    assert result.errors == []
    assert len(result.memes) == len({m.uid for m in result.memes}) == 640
    assert len(result.duplicates) == 400
    assert all(d.count == 2 and d.where == (str(a), str(b)) for d in result.duplicates)


def test_original_and_reserialized_fhm_copies_are_the_same_items(tmp_path: Path) -> None:
    """8291 (int) and "08291" name one meme: the two copies of dev_seen merge completely."""
    a, root = _release(tmp_path / "o", "fhm_original/dev_seen.jsonl", "fhm")
    b = tmp_path / "o" / "hateful_memes" / "data" / "dev_seen_resaved.jsonl"
    b.symlink_to(REALDATA / "fhm_reserialized" / "dev_seen.jsonl")
    _placeholders(root, {r["img"] for _, r in _raw_json_rows(a)})
    result = load_datasets(
        [DatasetConfig(format="fhm", path=a), DatasetConfig(format="fhm", path=b)]
    )
    assert result.errors == [] and len(result.memes) == 500 and len(result.duplicates) == 500
    assert any(isinstance(r["id"], int) and r["id"] < 10_000 for _, r in _raw_json_rows(a))


def test_ids_and_exclude_filter_by_canonical_id(tmp_path: Path) -> None:
    ann, root = _release(tmp_path, "fhm_original/dev_seen.jsonl", "fhm")
    _placeholders(root, {r["img"] for _, r in _raw_json_rows(ann)})
    picked = load_dataset(DatasetConfig(format="fhm", path=ann, ids=[8291, "46971", 99999]))
    assert [m.id for m in picked.memes] == ["08291", "46971"]
    assert [(e.item, e.kind) for e in picked.errors] == [("99999", "unknown id")]
    rest = load_dataset(DatasetConfig(format="fhm", path=ann, exclude=["08291", 3745]))
    assert len(rest.memes) == 498
    assert {"08291", "03745"}.isdisjoint(m.id for m in rest.memes)


def test_harm_p_blank_label_is_one_recorded_error_or_stops_when_strict(tmp_path: Path) -> None:
    ann, root = _release(tmp_path, "harmeme/Harm-P/train_v1.jsonl", "harm")
    cfg = DatasetConfig(format="harm", path=ann, image_root=root, strict=True)
    with pytest.raises(Exception, match=r"train_v1\.jsonl:1706: field 'labels'"):
        load_dataset(cfg, check_images=False)
