"""The built-in eraser removes glyphs, not boxes: on rendered FHM-style memes no caption word is
read after erasing while the picture around the letters stays as it was; one image never
allocates unbounded memory (thin or huge images are refused, big ones read downscaled); an
erase whose mask covers too much of the image is flagged on record, never used."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from adapt_helpers import run_pipeline
from test_adapt_erase import _config_on, _copy_demo_without_erased

from memearena.errors import DataError
from memearena.methods.adapt import erase

needs_eraser = pytest.mark.skipif(
    not erase.eraser_available(),
    reason=f"the built-in eraser is not installed ({erase.ERASE_EXTRA})",
)

BENCH = Path(__file__).resolve().parents[3] / "bench" / "eraser.py"


def _bench() -> Any:
    """bench/eraser.py: the FHM-style renderer and the figures the bench prints."""
    if "bench_eraser" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_eraser", BENCH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_eraser"] = module
        spec.loader.exec_module(module)
    return sys.modules["bench_eraser"]


def _png(width: int, height: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (120, 140, 160)).save(buf, format="PNG")
    return buf.getvalue()


class _Engine:
    """Stands in for RapidOCR: records the size of every array it is given, finds nothing."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, img: Any, **_: Any) -> tuple[None, None]:
        self.shapes.append(tuple(img.shape))
        return None, None


@needs_eraser
@pytest.mark.slow
@pytest.mark.timeout(300)  # OCR on CPU: about 2 s an image
def test_rendered_fhm_memes_lose_their_captions_and_keep_their_picture() -> None:
    bench = _bench()
    eraser = erase.TextEraser()
    rows = []
    for sample in bench.fhm_memes(5):
        # OCR reads the caption before erasing: the check after can fail.
        before = " ".join(eraser.read(sample.png)).upper()
        assert sum(w in before for w in sample.words) >= len(sample.words) - 1, sample.name
        out = eraser.erase(sample.png)
        assert out.sha256 == hashlib.sha256(out.png).hexdigest()
        got = bench.figures(eraser, sample, out.png, out.mask_area)
        rows.append(got)
        assert got["words_read"] == 0, got
        # Around the letters the picture is the clean scene's (10 levels: the scene's noise).
        assert got["outside_changed"] <= 0.03, got
        # The glyphs only: a little more than the pixels the caption drew, never whole boxes.
        assert sample.text.mean() < out.mask_area < sample.text.mean() + 0.05, got
        # PSNR against the clean scene, over the whole image, on every image (the hardest,
        # fhm-4: wide letters across a mast and three shape edges, 33.1 dB; Telea 29.6 dB).
        assert got["psnr"] >= 32.0, got
    print({r["image"]: (r["psnr"], r["outside_changed"], r["masked"]) for r in rows})


@needs_eraser
@pytest.mark.parametrize("size", [(40000, 1), (1, 40000), (2000, 40)])
def test_a_thin_image_is_refused_naming_the_limit_before_any_ocr(size: tuple[int, int]) -> None:
    eraser = erase.TextEraser()
    engine = _Engine()
    eraser._engine = engine
    for call in (eraser.erase, eraser.read):
        with pytest.raises(DataError) as e:
            call(_png(*size))
        msg = str(e.value)
        assert "20:1" in msg and f"{size[0]}x{size[1]}" in msg and "\n" not in msg
    assert engine.shapes == []  # refused before the OCR saw it


@needs_eraser
def test_an_image_over_the_pixel_limit_is_refused_from_its_header() -> None:
    eraser = erase.TextEraser(max_pixels=1_000_000)
    eraser._engine = _Engine()
    with pytest.raises(DataError, match=r"at most 1,000,000 pixels; this one is 2000x1000"):
        eraser.erase(_png(2000, 1000))
    with pytest.raises(DataError, match="could not read the image"):
        eraser.erase(b"not an image")


@needs_eraser
def test_a_large_image_is_read_downscaled_and_an_allowed_thin_one_is_erased() -> None:
    eraser = erase.TextEraser(ocr_pixels=1_000_000)
    engine = _Engine()
    eraser._engine = engine
    out = eraser.erase(_png(4000, 3000))
    assert engine.shapes and all(h * w <= 1_000_000 for h, w, _ in engine.shapes)
    assert engine.shapes[0][:2] == (866, 1154)  # the aspect kept
    assert out.mask_area == 0 and out.boxes == 0
    engine.shapes.clear()
    thin = eraser.erase(_png(400, 20))  # 20:1 is the limit, still allowed
    # ... and read padded to 4:1 (the detector upscales a strip's short side to 736 pixels).
    assert engine.shapes == [(100, 400, 3)] and thin.mask_area == 0
    engine.shapes.clear()
    eraser.erase(_png(20, 400))
    assert engine.shapes == [(400, 100, 3)]


def test_an_erase_masking_more_than_the_limit_is_a_finished_flagged_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from memearena.data import prepare_image
    from memearena.methods.adapt.analysis import adapt_section
    from memearena.methods.adapt.method import adapt_status

    monkeypatch.setattr(erase, "eraser_available", lambda: True)
    data = _copy_demo_without_erased(tmp_path / "data")
    cfg = _config_on(data, steps=1, erase_max_mask=0.3)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    # Two memes' erasures mask 45% of their image, the others' 10%.
    heavy = {
        prepare_image(data.parent / r["img"], cfg.image).sha256: f"demo:{r['id']}" for r in rows[:2]
    }
    seen: list[str] = []

    def fake(self: erase.TextEraser, image: bytes) -> erase.Erased:
        sha = hashlib.sha256(image).hexdigest()
        seen.append(sha)
        png = _png(64, 64 + len(seen))  # one erased image per meme
        return erase.Erased(
            png, hashlib.sha256(png).hexdigest(), 0.45 if sha in heavy else 0.1, 2, 1
        )

    monkeypatch.setattr(erase.TextEraser, "erase", fake)
    out, store, _ = run_pipeline(cfg, tmp_path / "run")
    errors = [e for e in store.errors() if e.kind == erase.ERASED_KIND]
    section = adapt_section(cfg, out, bootstrap=50, store=store)
    status = adapt_status(cfg, out, store, max_cost=None)
    store.close()
    flagged = {f["meme"] for f in out.flagged}
    assert flagged and flagged <= set(heavy.values()), (flagged, heavy)
    assert all(f["mask_area"] == 0.45 and f["limit"] == 0.3 for f in out.flagged)
    # Finished, not pending: the run completes, with the flagged memes counted and reported.
    assert out.pending == 0 and status.complete, status.problems
    assert out.flagged_items > 0 and "erasure over adapt.erase_max_mask" in status.produced
    assert section["erase_flagged"]["memes"] == len(flagged)
    assert section["erase_flagged"]["originals"] == out.flagged_items
    # Never shown to a model: no score and no chain step of a flagged meme ...
    assert not {o["meme"] for o in out.originals} & flagged
    steps = [s for c in out.chains for s in c["steps"]]
    assert steps and not {s["meme"] for s in steps} & flagged
    assert all(s["image"]["mask_area"] == 0.1 for s in steps if s.get("image"))
    # ... and on record with its mask share.
    assert {e.key for e in errors} == flagged and all(
        "45.0% of the image" in e.reason and "adapt.erase_max_mask 30.0%" in e.reason
        for e in errors
    )
    # A higher limit uses the same stored erasures (the eraser does not run again).
    monkeypatch.setattr(erase.TextEraser, "erase", lambda self, image: pytest.fail("erased twice"))
    cfg = _config_on(data, steps=1, erase_max_mask=0.5)
    again, store, _ = run_pipeline(cfg, tmp_path / "run")
    store.close()
    assert not again.flagged and again.flagged_items == 0
    assert flagged <= {o["meme"] for o in again.originals}


def test_the_mask_limit_is_a_validated_share() -> None:
    from adapt_helpers import small_config
    from pydantic import ValidationError

    assert small_config().adapt.erase_max_mask == 0.3
    assert small_config(erase_max_mask=0.5).adapt.erase_max_mask == 0.5
    for bad in (0, 1.5):
        with pytest.raises(ValidationError, match="erase_max_mask"):
            small_config(erase_max_mask=bad)


def test_the_bench_renderer_keeps_the_clean_scene_and_the_caption_pixels() -> None:
    bench = _bench()
    sample = bench.fhm_meme(0)
    from PIL import Image

    with Image.open(io.BytesIO(sample.png)) as im:
        meme = np.asarray(im.convert("RGB"))
    assert meme.shape == sample.clean.shape
    # Outside the caption the meme is its clean scene, pixel for pixel; the caption is a few
    # per cent of the image, at the top and the bottom.
    assert (meme[~sample.text] == sample.clean[~sample.text]).all()
    rows = np.flatnonzero(sample.text.any(axis=1))
    h = meme.shape[0]
    assert 0.03 < sample.text.mean() < 0.2
    assert rows.min() < h * 0.1 and rows.max() > h * 0.9
    assert not sample.text[int(h * 0.3) : int(h * 0.7)].any()
    assert {"TRACTOR", "BORROW"} <= sample.words


@needs_eraser
def test_coherence_transport_carries_a_mast_and_an_edge_through_a_wide_letter() -> None:
    import cv2

    scene = np.full((80, 120, 3), (60, 160, 90), dtype=np.uint8)
    scene[50:] = (200, 40, 180)  # a shape's edge, across the letter
    scene[:, 54:60] = (50, 40, 40)  # a mast, across the letter and the edge
    mask = np.zeros((80, 120), dtype=np.uint8)
    mask[38:62, 20:100] = 255  # a wide letter's glyph mask
    meme = scene.copy()
    meme[mask > 0] = 255

    def psnr(out: Any) -> float:
        return float(10 * np.log10(255**2 / np.mean((out.astype(float) - scene) ** 2)))

    got = erase.coherence_fill(meme, mask)
    assert (got[mask == 0] == meme[mask == 0]).all()  # only the mask is filled
    telea = cv2.inpaint(meme, mask, 3, cv2.INPAINT_TELEA)
    # 35.1 dB against Telea's 29.8: the mast and the edge go on through the hole.
    assert psnr(got) >= 34.0 and psnr(got) >= psnr(telea) + 4.0, (psnr(got), psnr(telea))
    assert (erase.coherence_fill(meme, np.zeros_like(mask)) == meme).all()
