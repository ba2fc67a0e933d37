"""Each perturbation keeps its bias type's meaning, measured on every demo meme and on 20
rendered FHM-style memes (a picture with caption text at the top and the bottom):
texture_insertion covers at most its share of the area and never the caption; visual
transformation applies one geometric and 7-9 appearance edits and keeps the content
(SSIM above a floor); unnecessary_image attaches another item's real image (a different content
hash) to a text-only item with its own answer; integrality pairs that do not need the removed
part are excluded and counted."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from memearena.config import parse_config
from memearena.data import load_datasets
from memearena.demo import demo_config
from memearena.engine.pool import open_pool, sim_world
from memearena.methods.judge_audit.items import integrality_check
from memearena.methods.judge_audit.method import load_audit_inputs
from memearena.methods.judge_audit.perturb import (
    AESTHETIC_EDITS,
    GEOMETRIC_EDITS,
    SHOWS_KEY,
    ImageStore,
    PerturbContext,
    Triplet,
    insert_text,
    perturb,
    structural_similarity,
    transform_image,
)
from memearena.methods.judge_audit.stages import JudgeAuditOutcome, JudgeAuditPipeline
from memearena.store import RunStore

SSIM_FLOOR = 0.75
"""The appearance edits keep at least this SSIM against the geometric-only image (measured
minimum on the demo and rendered memes: about 0.85)."""
QUERY = "Is this meme harmful, to whom, and why? Refer to what the image shows."

_WORDS = ("WHEN", "YOU", "SEE", "THE", "MONDAY", "MEETING", "AND", "NOBODY", "COFFEE", "AGAIN")


def _rendered(i: int) -> tuple[Image.Image, list[tuple[int, int, int, int]]]:
    """An FHM-style meme: a photo-like picture, white captions outlined in black at the top and
    the bottom; returns the image and the exact caption boxes."""
    rng = np.random.default_rng(i)
    w, h = [(400, 300), (320, 320), (500, 400), (300, 420)][i % 4]
    base = rng.integers(30, 220, 3)
    yy, xx = np.mgrid[0:h, 0:w]
    img = base + 40 * np.sin(xx[..., None] / (15 + i) + yy[..., None] / 23 + rng.random(3) * 6)
    img = np.clip(img + rng.normal(0, 6, (h, w, 3)), 0, 255).astype(np.uint8)
    im = Image.fromarray(img, "RGB")
    d = ImageDraw.Draw(im)
    for _ in range(5):
        x, y = int(rng.integers(0, w)), int(rng.integers(h // 4, 3 * h // 4))
        r = int(rng.integers(10, 40))
        d.ellipse((x - r, y - r, x + r, y + r), fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
    font = ImageFont.load_default(size=max(16, w // 14))
    pyr = random.Random(i)
    boxes = []
    for top in (True, False):
        text = " ".join(pyr.sample(_WORDS, 3))
        tw = d.textlength(text, font=font)
        x = max(2, int((w - tw) / 2))
        y = 8 if top else h - max(16, w // 14) - 16
        d.text((x, y), text, font=font, fill=(255, 255, 255), stroke_width=2, stroke_fill=(0, 0, 0))
        boxes.append(d.textbbox((x, y), text, font=font, stroke_width=2))
    return im, [tuple(int(v) for v in b) for b in boxes]  # type: ignore[misc]


def _demo_images() -> list[Image.Image]:
    cfg = demo_config()
    memes = load_datasets(cfg.data, cfg.image).memes
    out = []
    for m in memes:
        assert m.image_path is not None
        with Image.open(m.image_path) as im:
            out.append(im.convert("RGB"))
    return out


def _caption_mask(im: Image.Image) -> np.ndarray:
    """Caption glyph pixels of a demo meme (white fill next to its black outline): a strict
    definition independent of the placement heuristic."""
    a = np.asarray(im, dtype=np.int16)
    white = (a >= 245).all(axis=2)
    black = (a <= 15).all(axis=2)
    near_black = np.zeros_like(black)
    for dy in (-2, -1, 0, 1, 2):
        for dx in (-2, -1, 0, 1, 2):
            near_black |= np.roll(np.roll(black, dy, 0), dx, 1)
    return white & near_black


DEMO = _demo_images()
RENDERED = [_rendered(i) for i in range(20)]


def test_the_demo_memes_have_caption_pixels_to_protect() -> None:
    assert len(DEMO) == 24 and all(_caption_mask(im).sum() > 200 for im in DEMO)


@pytest.mark.parametrize("k", range(len(DEMO)))
def test_texture_insertion_on_a_demo_meme_stays_small_and_off_the_caption(k: int) -> None:
    im = DEMO[k]
    got = insert_text(im, QUERY, max_cover=0.10, rng=random.Random(k))
    assert 0 < got.covered_share <= 0.10
    before, after = np.asarray(im), np.asarray(got.image)
    mask = _caption_mask(im)
    assert (before[mask] == after[mask]).all()  # not one caption pixel touched
    changed = (before != after).any(axis=2)
    x0, y0, x1, y1 = got.box
    assert changed[y0:y1, x0:x1].any() and not changed[:y0].any() and not changed[y1:].any()
    assert changed.mean() <= 0.10


@pytest.mark.parametrize("k", range(20))
def test_texture_insertion_on_a_rendered_meme_never_covers_the_caption_box(k: int) -> None:
    im, captions = RENDERED[k]
    got = insert_text(im, QUERY, max_cover=0.10, rng=random.Random(k))
    assert got.covered_share <= 0.10
    before, after = np.asarray(im), np.asarray(got.image)
    for x0, y0, x1, y1 in captions:
        assert (before[y0:y1, x0:x1] == after[y0:y1, x0:x1]).all()
    assert (before != after).any(axis=2).mean() <= 0.10


def test_a_smaller_configured_share_is_respected() -> None:
    im, captions = RENDERED[0]
    got = insert_text(im, QUERY, max_cover=0.04, rng=random.Random(0))
    assert got.covered_share <= 0.04
    before, after = np.asarray(im), np.asarray(got.image)
    for x0, y0, x1, y1 in captions:
        assert (before[y0:y1, x0:x1] == after[y0:y1, x0:x1]).all()


def _all_images() -> list[Image.Image]:
    return DEMO + [im for im, _ in RENDERED]


@pytest.mark.parametrize("k", range(44))
def test_visual_transformation_applies_one_geometric_and_7_to_9_appearance_edits(k: int) -> None:
    im = _all_images()[k]
    res = transform_image(im, random.Random(k))
    assert res.image.size == im.size
    geometric, appearance = res.names[0], res.names[1:]
    assert geometric in GEOMETRIC_EDITS and len(res.edits) == len(res.names)
    assert 7 <= len(appearance) <= 9
    assert set(appearance) <= set(AESTHETIC_EDITS) and len(set(appearance)) == len(appearance)
    assert structural_similarity(res.geometric, res.image) >= SSIM_FLOOR
    assert structural_similarity(im, res.image) < 0.999  # it did change the picture


def test_every_listed_appearance_edit_alone_keeps_the_content() -> None:
    im = RENDERED[3][0]
    for name, edit in AESTHETIC_EDITS.items():
        out, _ = edit(im, random.Random(1))
        assert structural_similarity(im, out) >= SSIM_FLOOR, name


def test_ssim_of_an_image_with_itself_is_one_and_of_noise_is_low() -> None:
    im = RENDERED[1][0]
    assert structural_similarity(im, im) == pytest.approx(1.0)
    noise = Image.fromarray(
        np.random.default_rng(0).integers(0, 255, (*im.size[::-1], 3), dtype=np.uint8)
    )
    assert structural_similarity(im, noise) < 0.2


def test_unnecessary_image_attaches_another_items_image_to_a_text_only_item(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    own = store.put(DEMO[0], {SHOWS_KEY: "one"})
    other = store.put(DEMO[1], {SHOWS_KEY: "two"})
    text_only = Triplet("A meme's overlaid text reads “x”. Is it harmful?", None, "An answer.")
    ctx = PerturbContext(
        store, random.Random(0), "one", donor=Triplet("q", other, "r"), own_image=own
    )
    ui = perturb("unnecessary_image", text_only, ctx)
    assert ui.image == other and ui.image.sha256 != own.sha256
    same = PerturbContext(
        store, random.Random(0), "one", donor=Triplet("q", own, "r"), own_image=own
    )
    with pytest.raises(Exception, match="own"):
        perturb("unnecessary_image", text_only, same)


@pytest.mark.parametrize("k", range(20))
def test_unnecessary_image_on_rendered_memes_is_another_memes_image(tmp_path: Path, k: int) -> None:
    store = ImageStore(tmp_path)
    own = store.put(RENDERED[k][0], {SHOWS_KEY: f"r{k}"})
    other = store.put(RENDERED[(k + 1) % 20][0], {SHOWS_KEY: f"r{k + 1}"})
    text_only = Triplet("A meme's overlaid text reads “x”. Is it harmful?", None, "An answer.")
    ctx = PerturbContext(
        store, random.Random(k), f"r{k}", donor=Triplet("q", other, "r"), own_image=own
    )
    ui = perturb("unnecessary_image", text_only, ctx)
    assert text_only.image is None and ui.image is not None
    assert ui.image.sha256 != own.sha256 and ctx.notes["attached_image"] == other.sha256


def _pipeline(tmp_path: Path, **audit: object) -> tuple[JudgeAuditPipeline, RunStore]:
    raw = {
        "run": "props",
        "models": {
            "sim-aurora": {"provider": "sim", "skill": 0.9, "family": "aurora"},
            "sim-ember": {"provider": "sim", "skill": 0.4, "family": "ember"},
            "clean": {"provider": "sim"},
        },
        "data": [{"format": "demo"}],
        "judge_audit": {"judges": ["clean"], "responders": ["sim-aurora", "sim-ember"], **audit},
    }
    cfg = parse_config(raw)
    store = RunStore(tmp_path / "run.db")
    memes, rows = load_audit_inputs(cfg, store, tmp_path / "source")
    pool = open_pool(cfg, sim_world(cfg, memes), store, cache_path=None, max_cost=None)
    return JudgeAuditPipeline(cfg, memes, rows, pool, store, tmp_path / "images"), store


def test_every_demo_pair_keeps_its_meaning(tmp_path: Path) -> None:
    pipe, store = _pipeline(tmp_path)
    bases = asyncio.run(pipe.prepare())
    out = JudgeAuditOutcome()
    pairs = list(pipe.meme_pairs(bases, out))
    by_type: dict[str, list] = {}
    for p in pairs:
        by_type.setdefault(p.bias_type, []).append(p)
    # unnecessary_image: text-only unbiased side answered for the text-only question, another
    # meme's real image on the biased side.
    ui = by_type["unnecessary_image"]
    assert len(ui) == len(bases)
    own = {b.meme.uid: b.triplet for b in bases}
    for p in ui:
        assert p.unbiased.image is None and p.biased.image is not None
        assert p.biased.image.sha256 != own[p.item].image.sha256  # type: ignore[union-attr]
        assert p.unbiased.response != own[p.item].response  # its own answer, not the image one
        assert p.unbiased.query == p.biased.query and "image" not in p.unbiased.query.lower()
    # texture_insertion: the covered share is recorded per item, at most 10%.
    ti = by_type["texture_insertion"]
    assert len(ti) == len(bases)
    assert all(0 < float(p.meta["covered_share"]) <= 0.10 for p in ti)
    # visual_transformation: 1 + 7-9 edits recorded.
    for p in by_type["visual_transformation"]:
        assert 8 <= len(p.meta["edits"].split("; ")) <= 10
    # integrality: the default query does not restate the meme text; nothing excluded.
    assert len(by_type["text_dominance"]) == len(bases) and out.integrality_excluded == {}
    for b in bases:
        assert integrality_check("text_dominance", b.triplet.query, b.meme.text) is None
    # instruction_misalignment: a query about another meme.
    for p in by_type["instruction_misalignment"]:
        assert p.biased.query != p.unbiased.query and p.biased.image == p.unbiased.image
    store.close()


def test_a_query_restating_the_meme_text_is_excluded_from_text_dominance_and_counted(
    tmp_path: Path,
) -> None:
    pipe, store = _pipeline(
        tmp_path,
        queries=["The meme's text reads “{meme_text}”: is it harmful? Refer to the image."],
        bias_types=["text_dominance", "image_misalignment"],
    )
    bases = asyncio.run(pipe.prepare())
    out = JudgeAuditOutcome()
    pairs = list(pipe.meme_pairs(bases, out))
    assert {p.bias_type for p in pairs} == {"image_misalignment"}
    assert out.integrality_excluded == {"text_dominance": len(bases)}
    assert sum(e.kind == "ja_integrality" for e in store.errors()) == len(bases)
    store.close()


def test_a_donor_is_the_one_a_scan_of_every_other_meme_draws() -> None:
    # The donor draw skips the memes sharing the item's image without scanning all memes; it
    # must pick exactly the meme a uniform draw over the candidates in load order picks (the
    # swaps' requests, and so their stored steps, stay the same).
    from types import SimpleNamespace as NS

    from memearena.methods.judge_audit.stages import _Donors

    def scanned(uid: str, by_uid: dict[str, Any], rng: random.Random) -> Any:
        mine = by_uid[uid].triplet.image if uid in by_uid else None
        others = [
            u
            for u in by_uid
            if u != uid
            and not (
                mine is not None
                and by_uid[u].triplet.image is not None
                and by_uid[u].triplet.image.sha256 == mine.sha256
            )
        ]
        return by_uid[others[rng.randrange(len(others))]] if others else None

    r = random.Random(0)
    for _ in range(500):
        by_uid: dict[str, Any] = {}
        for i in range(r.randint(1, 12)):
            image = None if r.random() < 0.3 else NS(sha256=str(r.randint(0, 3)))
            by_uid[f"u{i}"] = NS(triplet=NS(image=image))
        donors = _Donors(by_uid, None, scenes=False)  # the uniform draw, no relatedness check
        for uid in [*by_uid, "absent"]:
            seed = r.random()
            got = donors.draw(uid, random.Random(seed))
            assert got is scanned(uid, by_uid, random.Random(seed))


@pytest.mark.parametrize("k", range(4))
def test_texture_insertion_on_a_photo_jpeg_changes_only_its_label(tmp_path: Path, k: int) -> None:
    # A photo-like JPEG meme, stored as the safe image path stores it (its own bytes): the
    # variant must differ from it only inside the inserted label — no caption pixel, and no
    # pixel outside the label, changed by a second JPEG generation.
    import io

    im, captions = RENDERED[k]
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=90)
    store = ImageStore(tmp_path / "images")
    original = store.put_encoded(buf.getvalue(), "image/jpeg", im.size, {SHOWS_KEY: "m"})
    assert original.mime == "image/jpeg"
    ctx = PerturbContext(store=store, rng=random.Random(k), shows="m")
    ti = perturb("texture_insertion", Triplet(QUERY, original, "answer"), ctx)
    assert ti.image is not None and ti.image.mime == "image/png"
    before, after = np.asarray(original.load()), np.asarray(ti.image.load())
    changed = (before != after).any(axis=2)
    assert changed.any()
    for x0, y0, x1, y1 in captions:
        assert not changed[y0:y1, x0:x1].any()  # 0 caption pixels
    got = insert_text(original.load(), QUERY, max_cover=0.10, rng=random.Random(k))
    x0, y0, x1, y1 = got.box
    outside = changed.copy()
    outside[y0:y1, x0:x1] = False
    assert int(outside.sum()) == 0  # 0 pixels outside the label


def test_donors_are_unrelated_memes_and_the_check_is_counted(tmp_path: Path) -> None:
    from memearena.methods.judge_audit.perturb import same_scene, scene_fingerprint

    pipe, store = _pipeline(tmp_path)
    bases = asyncio.run(pipe.prepare())
    out = JudgeAuditOutcome()
    pairs = list(pipe.meme_pairs(bases, out))
    meme_of = {b.meme.uid: b.meme for b in bases}
    by_image = {b.triplet.image.sha256: b.meme for b in bases if b.triplet.image is not None}
    lent = [p for p in pairs if p.bias_type in ("image_misalignment", "unnecessary_image")]
    assert lent
    for p in lent:
        assert p.biased.image is not None
        donor, me = by_image[p.biased.image.sha256], meme_of[p.item]
        assert donor.uid != me.uid
        mine = set(str(me.annotations["target"]).lower().split())
        theirs = set(str(donor.annotations["target"]).lower().split())
        assert not (mine & theirs) - {"people", "men", "women", "with"}, (me.uid, donor.uid)
        own = bases[[b.meme.uid for b in bases].index(me.uid)].triplet.image
        assert own is not None
        assert not same_scene(
            scene_fingerprint(own.load()), scene_fingerprint(p.biased.image.load())
        )
    checks = out.donor_checks
    # Three donor types per meme, each drawn once; related draws were rejected and counted.
    assert checks["drawn"] == 3 * len(meme_of) and checks["no_unrelated_donor"] == 0
    assert checks["rejected_same_scene"] > 0 and checks["rejected_same_group"] > 0
    store.close()


def test_the_demo_memes_of_one_scene_are_recognised_and_other_scenes_are_not() -> None:
    from memearena.methods.judge_audit.perturb import same_scene, scene_fingerprint

    prints = [scene_fingerprint(im) for im in DEMO]
    same = [(i, j) for i in range(24) for j in range(i + 1, 24) if same_scene(prints[i], prints[j])]
    # The demo set reuses a few scenes under other captions (eight pairs by eye, in four
    # scenes or more); every other pair differs.
    assert 6 <= len(same) <= 20
    # A scene under another caption matches; a different picture does not.
    assert same_scene(prints[1], prints[17])  # m02 and m18: one portrait, two captions
    assert not same_scene(prints[0], prints[1])
