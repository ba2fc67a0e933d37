"""Bench: the built-in text eraser (glyph masks) against the box-fill eraser it replaced.

Run: python bench/eraser.py [--fhm N] [--noise SIGMA] [--demo N] [--inpaint coherence,telea,...]

Image sets:

* ``fhm``: FHM-style memes rendered here (photo-like scene: smooth colour gradients, soft
  low-frequency shading, Gaussian noise of sigma 5 (``--noise``), a few shapes, some crossing
  the caption bands; white bold captions with a black outline at the top and the bottom),
  each with its clean scene kept to compare;
* ``demo``: the bundled demo memes (``src/memearena/data/demo/img/*.png``), compared with the
  scene the demo script saved as ``img/erased/`` (quantised on its own palette, so even an
  untouched pixel can differ from it by a few levels).

Per image and eraser: caption words (3+ letters) OCR reads after erasing, PSNR against the
clean scene over the whole image, the share of pixels outside the text (the pixels drawing
the caption changed, for the demo more than 10 levels from the scene) that changed by more
than 10 levels (any channel) from the clean scene, and the share of pixels masked. Medians over
images carry a 95% percentile-bootstrap interval over the images (2,000 rounds, seed 0).

Erasers, all in one run on the same OCR engine: ``box-fill`` (the previous algorithm, kept
here: every OCR box grown by a quarter of its height and inpainted whole with Telea, radius 5,
up to 3 passes), ``glyph-<method>`` (the built-in eraser's glyph masks with that inpainting:
``coherence``, the built-in eraser's coherence transport; ``telea`` and ``ns``, ``cv2.inpaint``'s,
``telea`` being the eraser before coherence transport replaced it). With
``opencv-contrib-python-headless`` importable, ``glyph-fsr_fast``, ``glyph-fsr_best`` and
``glyph-shiftmap`` (``cv2.xphoto.inpaint``) can be added with ``--inpaint``.

Targets the built-in eraser is held to on the FHM-style set: 0 words read, PSNR >= 32 dB,
<= 3% of the pixels outside the text changed by more than 10 levels.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src" / "memearena" / "data" / "demo"

CAPTIONS = (
    ("WHEN THEY SAY THEY CAME", "TO BORROW YOUR TRACTOR"),
    ("NOBODY EXPECTS THE MONDAY", "MEETING TO RUN LATE AGAIN"),
    ("ME EXPLAINING WHY", "THE GARDEN NEEDS MORE GNOMES"),
    ("THAT FEELING WHEN", "THE PIZZA ARRIVES EARLY"),
    ("ONE DOES NOT SIMPLY", "WALK PAST FREE DONUTS"),
    ("MY NEIGHBOURS LOOKING AT", "MY HOLIDAY LIGHTS IN JULY"),
    ("SHOWS UP TEN MINUTES", "LATE WITH COFFEE FOR ALL"),
    ("WHEN THE WIFI GOES DOWN", "AND YOU MEET YOUR FAMILY"),
)
SIZES = ((540, 400), (500, 500), (600, 450), (480, 560), (640, 480), (560, 420), (520, 520))
FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
)


@dataclass(frozen=True)
class Sample:
    """A meme to erase, its clean scene, and which pixels its caption drew."""

    name: str
    png: bytes
    clean: Any
    """The scene without the caption (H, W, 3 RGB uint8)."""
    text: Any
    """Pixels the caption drew (H, W bool)."""
    words: frozenset[str]
    """The caption's words of 3+ letters, upper case."""


def words_of(text: str) -> frozenset[str]:
    """The words of 3+ letters in ``text``, upper case."""
    import re

    return frozenset(w for w in re.findall(r"[A-Z]+", text.upper()) if len(w) >= 3)


def _font(size: int) -> Any:
    from PIL import ImageFont

    for path in FONTS:
        if Path(path).exists():
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def fhm_scene(seed: int, size: tuple[int, int], noise: float = 5.0) -> Any:
    """A photo-like scene (RGB uint8): a two-colour gradient, soft shading, shapes, noise."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    angle = rng.uniform(0, np.pi)
    t = (np.cos(angle) * xx / w + np.sin(angle) * yy / h + 1) / 2
    a, b = rng.uniform(30, 220, 3), rng.uniform(30, 220, 3)
    base = a[None, None, :] * (1 - t[..., None]) + b[None, None, :] * t[..., None]
    # Soft shading: low-frequency noise, as light falls across a photo.
    low = rng.normal(0, 1, (h // 40 + 2, w // 40 + 2))
    shade = np.asarray(
        Image.fromarray(((low - low.min()) / np.ptp(low) * 255).astype(np.uint8)).resize(
            (w, h), Image.Resampling.BICUBIC
        ),
        dtype=np.float64,
    )
    base += (shade[..., None] - 128) * 0.25
    im = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    d = ImageDraw.Draw(layer)
    for _ in range(int(rng.integers(5, 9))):
        colour = (*(int(c) for c in rng.integers(20, 235, 3)), 255)
        x, y = int(rng.integers(-40, w - 40)), int(rng.integers(-40, h - 40))
        sw, sh = int(rng.integers(40, w // 3)), int(rng.integers(40, h // 2))
        if rng.random() < 0.5:
            d.ellipse((x, y, x + sw, y + sh), fill=colour)
        else:
            d.rectangle((x, y, x + sw, y + sh), fill=colour)
    # A thin tall structure crossing both caption bands (a mast, a spire).
    x = int(rng.integers(w // 5, 4 * w // 5))
    d.rectangle((x, 0, x + int(rng.integers(4, 12)), h), fill=(60, 50, 45, 255))
    layer = layer.filter(ImageFilter.GaussianBlur(1.2))  # photo edges are not pixel-sharp
    im.paste(layer, (0, 0), layer)
    noisy = np.asarray(im, dtype=np.float64) + rng.normal(0, noise, (h, w, 3))
    return np.clip(noisy, 0, 255).astype(np.uint8)


def fhm_meme(seed: int, noise: float = 5.0) -> Sample:
    """One FHM-style meme: a scene with white outlined bold captions at the top and bottom."""
    from PIL import Image, ImageDraw

    size = SIZES[seed % len(SIZES)]
    clean = fhm_scene(seed, size, noise)
    top, bottom = CAPTIONS[seed % len(CAPTIONS)]
    w, h = size
    im = Image.fromarray(clean.copy())
    d = ImageDraw.Draw(im)
    fsize = max(20, w // 15)
    font = _font(fsize)
    stroke = max(2, fsize // 12)
    for text, y in ((top, 10), (bottom, h - fsize - 22)):
        while d.textlength(text, font=font) > w - 20 and font.size > 12:
            font = _font(font.size - 2)
        tw = d.textlength(text, font=font)
        d.text(
            ((w - tw) / 2, y),
            text,
            font=font,
            fill="white",
            stroke_width=stroke,
            stroke_fill="black",
        )
    meme = np.asarray(im)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    text_px = np.any(meme != clean, axis=2)
    return Sample(f"fhm-{seed}", buf.getvalue(), clean, text_px, words_of(f"{top} {bottom}"))


def fhm_memes(n: int, noise: float = 5.0) -> list[Sample]:
    """``n`` FHM-style memes (seeds 0..n-1), their scenes' pixel noise of sigma ``noise``."""
    return [fhm_meme(i, noise) for i in range(n)]


def demo_memes(n: int | None = None) -> list[Sample]:
    """The bundled demo memes with the scenes the demo script saved as their erased images."""
    from PIL import Image

    out = []
    for line in (DEMO / "memes.jsonl").read_text().splitlines()[:n]:
        row = json.loads(line)
        raw = (DEMO / row["img"]).read_bytes()
        with Image.open(io.BytesIO(raw)) as im:
            meme = np.asarray(im.convert("RGB"))
        with Image.open(DEMO / row["erased_image"]) as im:
            clean = np.asarray(im.convert("RGB"))
        diff = np.abs(meme.astype(np.int16) - clean).max(axis=2)
        out.append(Sample(row["id"], raw, clean, diff > 10, words_of(row["text"])))
    return out


# ---- the previous eraser, kept for comparison ----------------------------------------------


def box_fill_erase(eraser: Any, image: bytes) -> tuple[bytes, float]:
    """The box-fill eraser the glyph masks replaced: each OCR box grown by a quarter of its
    height (at least 3 pixels) and inpainted whole (Telea, radius 5), up to 3 passes, later
    passes only where text was already erased. Returns (PNG, masked share)."""
    import cv2

    img = eraser.decode(image)
    mask = np.zeros(img.shape[:2], dtype=np.uint8)
    current = img
    for passes in range(1, 4):
        added = 0
        for pts, _, _ in eraser.ocr(current):
            height = float(min(np.ptp(pts[:, 1]), np.ptp(pts[:, 0])))
            if height > 0.25 * img.shape[0]:
                continue
            one = np.zeros_like(mask)
            cv2.fillPoly(one, [np.round(pts).astype(np.int32)], 255)
            if passes > 1 and not np.any(one & mask):
                continue
            grow = max(3, round(height * 0.25))
            mask |= cv2.dilate(one, np.ones((2 * grow + 1, 2 * grow + 1), dtype=np.uint8))
            added += 1
        if not added:
            break
        current = cv2.inpaint(current, mask, 5, cv2.INPAINT_TELEA)
    ok, buf = cv2.imencode(".png", current)
    assert ok
    return bytes(buf), float(np.count_nonzero(mask)) / mask.size


# ---- measuring ------------------------------------------------------------------------------


def figures(eraser: Any, sample: Sample, png: bytes, masked: float) -> dict[str, Any]:
    """What an erasure left: words read, PSNR, outside pixels changed, masked share."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        out = np.asarray(im.convert("RGB"))
    read = " ".join(eraser.read(png)).upper()
    words = sorted(w for w in sample.words if w in read)
    diff = np.abs(out.astype(np.int16) - sample.clean.astype(np.int16))
    mse = float(np.mean(diff.astype(np.float64) ** 2))
    psnr = 99.0 if mse == 0 else 10 * np.log10(255.0**2 / mse)
    changed = diff.max(axis=2) > 10
    outside = ~sample.text
    return {
        "image": sample.name,
        "words_read": len(words),
        "words": words,
        "of_words": len(sample.words),
        "psnr": round(float(psnr), 2),
        "outside_changed": round(float(changed[outside].mean()), 4),
        "masked": round(masked, 4),
    }


def median_ci(values: Sequence[float], rounds: int = 2000) -> tuple[float, float, float]:
    """Median and its 95% percentile-bootstrap interval over the images."""
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return statistics.median(values), meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def erasers(methods: Sequence[str]) -> dict[str, Callable[[Any, bytes], tuple[bytes, float]]]:
    """The erasers compared: box-fill, then the glyph eraser with each inpainting method."""
    from memearena.methods.adapt.erase import TextEraser

    out: dict[str, Callable[[Any, bytes], tuple[bytes, float]]] = {"box-fill": box_fill_erase}
    for method in methods:
        glyph = _glyph_eraser(TextEraser, method)

        def run(eraser: Any, image: bytes, glyph: Any = glyph) -> tuple[bytes, float]:
            glyph._engine = eraser._engine  # one OCR engine for every eraser
            got = glyph.erase(image)
            return got.png, got.mask_area

        out[f"glyph-{method}"] = run
    return out


def _glyph_eraser(cls: Any, method: str) -> Any:
    if method in ("coherence", "telea", "ns"):
        return cls(inpaint=method)
    import cv2

    xphoto = getattr(cv2, "xphoto", None)
    if xphoto is None:
        sys.exit(f"--inpaint {method} needs opencv-contrib-python-headless (cv2.xphoto)")
    flag = {
        "fsr_fast": xphoto.INPAINT_FSR_FAST,
        "fsr_best": xphoto.INPAINT_FSR_BEST,
        "shiftmap": xphoto.INPAINT_SHIFTMAP,
    }[method]

    class XPhoto(cls):  # type: ignore[misc, valid-type]
        def fill(self, img: Any, mask: Any) -> Any:
            if not mask.any():
                return img
            dst = img.copy()
            # xphoto's mask marks the known pixels.
            xphoto.inpaint(img, np.where(mask > 0, 0, 255).astype(np.uint8), dst, flag)
            return dst

    return XPhoto()


def main() -> None:
    """Erase each set with each eraser and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fhm", type=int, default=7, help="FHM-style memes rendered")
    parser.add_argument("--noise", type=float, default=5.0, help="FHM-style scenes' noise sigma")
    parser.add_argument("--demo", type=int, default=24, help="demo memes (at most 24)")
    parser.add_argument(
        "--inpaint", default="coherence,telea", help="glyph eraser inpainting methods"
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    from memearena.methods.adapt.erase import TextEraser

    base = TextEraser()
    base.ocr(np.zeros((64, 64, 3), dtype=np.uint8))  # load the engine once
    runs = erasers([m for m in args.inpaint.split(",") if m])
    sets = {"fhm": fhm_memes(args.fhm, args.noise), "demo": demo_memes(args.demo)}
    rows: list[dict[str, Any]] = []
    for set_name, samples in sets.items():
        if not samples:
            continue
        for name, run in runs.items():
            got = []
            t0 = time.process_time()
            for sample in samples:
                png, masked = run(base, sample.png)
                got.append({"set": set_name, "eraser": name, **figures(base, sample, png, masked)})
            cpu = (time.process_time() - t0) / max(1, len(samples))
            rows += got
            print(
                f"\n[{set_name}] {name}  ({len(samples)} images, {cpu:.2f} CPU s/image incl. OCR)"
            )
            for r in got:
                print(
                    f"  {r['image']:>7}  words read {r['words_read']:>2}/{r['of_words']:<2} "
                    f"PSNR {r['psnr']:6.2f} dB  outside changed {r['outside_changed']:6.2%}  "
                    f"masked {r['masked']:6.2%}" + (f"  {r['words']}" if r["words"] else "")
                )
            parts = [
                f"words read {sum(r['words_read'] for r in got)}/{sum(r['of_words'] for r in got)}"
            ]
            for key, fmt in (
                ("psnr", "{:.2f} dB"),
                ("outside_changed", "{:.2%}"),
                ("masked", "{:.2%}"),
            ):
                med, lo, hi = median_ci([float(r[key]) for r in got])
                parts.append(f"{key} {fmt.format(med)} [{fmt.format(lo)}, {fmt.format(hi)}]")
            print("  median [95% CI]: " + "; ".join(parts))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
