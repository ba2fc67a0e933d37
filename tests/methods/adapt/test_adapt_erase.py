"""A refined meme hides its text from the image too: rewrites go out on the text-erased image
(checked at the server), the built-in eraser leaves no caption OCR can read, refinement without
an erased image or the eraser is refused before any call, and the simulated world reads the
caption an image shows."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from adapt_helpers import prompt_text, run_pipeline, small_config, tag

from memearena.config import DatasetConfig, RunConfig
from memearena.data import demo_dir, load_datasets, prepare_image
from memearena.engine.pool import sim_world
from memearena.engine.rundir import load_memes
from memearena.errors import ConfigError
from memearena.methods.adapt import erase
from memearena.methods.adapt.stages import AdaptPipeline
from memearena.models import ModelPool
from memearena.models.types import GenParams, ImagePart, Message
from memearena.sim.catalogue import demo_models
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore

needs_eraser = pytest.mark.skipif(
    not erase.eraser_available(),
    reason=f"the built-in eraser is not installed ({erase.ERASE_EXTRA})",
)

REFINED_ROLES = ("adapt.answer", "adapt.score", "adapt.reference", "adapt.reference_judge")


def _images(messages: Sequence[Message]) -> list[str]:
    return [p.sha256 for m in messages for p in m.content if isinstance(p, ImagePart)]


class Recorder:
    """The simulated world behind the server, recording what each request carried."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.requests: list[tuple[str, str | None, list[str]]] = []

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        self.requests.append((role, tag(prompt_text(messages), "meme_text"), _images(messages)))
        return str(self.world.respond(model, role, messages, params))


def http_config(base_url: str, **adapt: Any) -> RunConfig:
    cfg = small_config(**adapt)
    models = {
        name: {
            "provider": "openai",
            "base_url": base_url,
            "model": name,
            "family": m.family,
            "max_concurrency": 8,
            "max_retries": 2,
        }
        for name, m in demo_models().items()
    }
    return RunConfig.model_validate({**cfg.model_dump(exclude={"models"}), "models": models})


def test_no_refined_request_carries_the_original_image(tmp_path: Path) -> None:
    from memearena.sim.serve import demo_world

    memes = load_memes(small_config()).memes
    # The served world, as `memearena sim-serve` builds it: the pipeline tells it nothing.
    recorder = Recorder(demo_world(seed=0))
    with BackgroundServer(recorder) as srv:
        cfg = http_config(srv.base_url)
        store = RunStore(tmp_path / "run.db")
        pool = ModelPool(cfg.models, store=store, cache=None)

        async def go() -> Any:
            try:
                return await AdaptPipeline(cfg, memes, pool, store).run()
            finally:
                await pool.aclose()

        out = asyncio.run(go())
        store.close()
    originals = {prepare_image(m.image_path).sha256 for m in memes if m.image_path}
    originals |= {hashlib.sha256(m.image_path.read_bytes()).hexdigest() for m in memes}
    texts = {m.text for m in memes}
    rewrites = {s["text"] for c in out.chains for s in c["steps"] if s.get("text")}
    assert rewrites
    refined = [r for r in recorder.requests if r[0] in REFINED_ROLES and r[1] in rewrites]
    roles = {r[0] for r in refined}
    assert roles == set(REFINED_ROLES)
    # Counted at the server: every refined target, scorer and reference request carried an
    # image, and none carried the original's bytes.
    assert all(len(imgs) == 1 for _, _, imgs in refined)
    assert not [r for r in refined if set(r[2]) & originals]
    # ... and the served world read them as the erased images they are: no caption shown.
    assert all(recorder.world.adapt.caption_shown(imgs[0]) == "" for _, _, imgs in refined)
    # The refiner and the checker see the original, as the method does (the refiner's first
    # image; its examples' follow, each on the image it was scored on).
    checks = [r for r in recorder.requests if r[0] in ("adapt.refine", "adapt.check")]
    assert checks and all(imgs[0] in originals for _, _, imgs in checks)
    # The originals were scored on their own images (the "original image" figure) and on the
    # erased image (the loop's s, like for like with the rewrites).
    first = [r for r in recorder.requests if r[0] == "adapt.score" and r[1] in texts]
    assert {bool(set(imgs) & originals) for _, _, imgs in first} == {True, False}
    print(
        f"server: {len(refined)} refined requests ({len(rewrites)} rewrites), "
        f"0 with the original image; {len(checks)} refiner/checker requests on the original"
    )


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[A-Z]+", text.upper()) if len(w) >= 3}


def _fhm_style(path: Path) -> str:
    """A rendered FHM-style meme: a photo-like noisy scene, white caption with black outline at
    top and bottom."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(7)
    h, w = 400, 540
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([90 + 80 * xx / w, 110 + 60 * yy / h, 140 - 50 * xx / w], axis=-1)
    noise = rng.normal(0, 18, size=(h, w, 3))
    im = Image.fromarray(np.clip(base + noise, 0, 255).astype("uint8"))
    d = ImageDraw.Draw(im)
    for _ in range(12):
        x, y = int(rng.integers(0, w - 60)), int(rng.integers(80, h - 120))
        d.ellipse((x, y, x + 60, y + 80), fill=tuple(int(c) for c in rng.integers(40, 200, 3)))
    font = ImageFont.load_default(size=34)
    top, bottom = "WHEN THEY SAY THEY CAME", "TO BORROW YOUR TRACTOR"
    for text, y in ((top, 12), (bottom, h - 52)):
        tw = d.textlength(text, font=font)
        d.text(
            ((w - tw) / 2, y), text, font=font, fill="white", stroke_width=3, stroke_fill="black"
        )
    im.save(path)
    return f"{top} {bottom}"


@needs_eraser
@pytest.mark.slow
@pytest.mark.timeout(600)  # OCR on CPU: about a second an image
def test_the_eraser_leaves_no_caption_text(tmp_path: Path) -> None:
    eraser = erase.TextEraser()
    memes = load_datasets([DatasetConfig(format="demo")]).memes
    # One meme of each demo category (m07's loom threads once read as a glyph filling the
    # image), and an FHM-style rendered meme.
    picked: dict[str, tuple[Path, str]] = {}
    for m in memes:
        assert m.image_path is not None
        if m.id in ("m01", "m07", "m09", "m13", "m18", "m21"):
            picked[m.annotations["category"]] = (m.image_path, m.text)
    assert len(picked) == 6
    fhm = tmp_path / "fhm.png"
    picked["fhm-style"] = (fhm, _fhm_style(fhm))
    areas = {}
    for name, (path, text) in picked.items():
        raw = path.read_bytes()
        words = _words(text)
        if name in ("fhm-style", "Gender"):
            # OCR reads the original caption: the check below can fail.
            before = "".join(eraser.read(raw)).upper()
            assert sum(w in before for w in words) >= len(words) // 2, name
        out = eraser.erase(raw)
        after = "".join(eraser.read(out.png)).upper()
        assert not [w for w in words if w in after], (name, after)
        # The captions only: two bands of a few lines, never the scene.
        assert 0.05 < out.mask_area < 0.35 and out.boxes >= 2, (name, out.mask_area)
        assert out.sha256 == hashlib.sha256(out.png).hexdigest()
        areas[name] = round(out.mask_area, 3)
    print("mask areas:", json.dumps(areas))


def _copy_demo_without_erased(tmp_path: Path, limit: int = 8) -> Path:
    """The demo set's first memes with their images, but no erased images."""
    src = demo_dir()
    (tmp_path / "img").mkdir(parents=True)
    rows = []
    for line in (src / "memes.jsonl").read_text().splitlines()[:limit]:
        row = json.loads(line)
        row.pop("erased_image", None)
        shutil.copy(src / row["img"], tmp_path / row["img"])
        rows.append(json.dumps(row))
    (tmp_path / "memes.jsonl").write_text("\n".join(rows) + "\n")
    return tmp_path / "memes.jsonl"


def _config_on(path: Path, **adapt: Any) -> RunConfig:
    cfg = small_config(**adapt)
    return cfg.model_copy(update={"data": [DatasetConfig(format="demo", path=path, limit=8)]})


def test_refinement_without_erased_images_or_eraser_is_refused_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(erase, "eraser_available", lambda: False)
    cfg = _config_on(_copy_demo_without_erased(tmp_path / "data"))
    with pytest.raises(ConfigError) as e:
        run_pipeline(cfg, tmp_path / "run")
    msg = str(e.value)
    assert "\n" not in msg and "memearena[erase]" in msg and "refine_image: none" in msg
    assert "8 of 8 memes have no text-erased image" in msg
    store = RunStore(tmp_path / "run" / "run.db")
    assert store.calls() == []  # nothing was sent
    store.close()


def test_refine_image_none_sends_rewrites_without_an_image_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(erase, "eraser_available", lambda: False)
    cfg = _config_on(_copy_demo_without_erased(tmp_path / "data"), refine_image="none")
    sent: list[tuple[str | None, list[str]]] = []

    def answer(model: str, role: str, messages: Sequence[Message], params: GenParams) -> None:
        sent.append((tag(prompt_text(messages), "meme_text"), _images(messages)))
        return None  # the world answers

    out, store, _ = run_pipeline(cfg, tmp_path / "run", {"adapt.answer": answer})
    store.close()
    steps = [s for c in out.chains for s in c["steps"] if s.get("text")]
    assert steps and all(s["image"]["source"] == "none" for s in steps)
    rewrites = {s["text"] for s in steps}
    texts = {m.text for m in load_memes(cfg).memes}
    # Every rewrite's answer went out with no image; the originals with theirs.
    assert [imgs for text, imgs in sent if text in rewrites] and all(
        imgs == [] for text, imgs in sent if text in rewrites
    )
    # The originals: with no image for the loop's s (like for like), with theirs for the
    # "original image" figure.
    assert sorted({len(imgs) for text, imgs in sent if text in texts}) == [0, 1]
    from memearena.methods.adapt.analysis import adapt_section

    sec = adapt_section(cfg, out, bootstrap=0)
    assert sec["refine_image"]["mode"] == "none" and "NO image" in sec["refine_image"]["note"]


@needs_eraser
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_built_in_eraser_runs_once_per_image_and_is_stored_by_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config_on(_copy_demo_without_erased(tmp_path / "data"), steps=1)
    out, store, _ = run_pipeline(cfg, tmp_path / "run")
    steps = [s for c in out.chains for s in c["steps"] if s.get("text")]
    assert steps and all(s["image"]["source"] == "eraser" for s in steps)
    records = dict(store.artifacts(erase.ERASED_KIND))
    assert records
    for rec in records.values():
        png = tmp_path / "run" / "erased" / f"{rec['sha256']}.png"
        assert hashlib.sha256(png.read_bytes()).hexdigest() == rec["sha256"]
        assert 0 < rec["mask_area"] < 0.6
    store.close()
    # A re-run reads every erasure back: the eraser is never called again.
    monkeypatch.setattr(erase.TextEraser, "erase", lambda self, image: pytest.fail("erased twice"))
    again, store, _ = run_pipeline(cfg, tmp_path / "run")
    assert [s["image"] for c in again.chains for s in c["steps"] if s.get("text")] == [
        s["image"] for s in steps
    ]
    store.close()


def test_the_simulated_world_reads_the_caption_an_image_shows() -> None:
    cfg = small_config()
    memes = load_memes(cfg).memes
    world = sim_world(cfg, memes).adapt
    m = memes[0]
    meme = world.world.meme(m.text)
    world.register_image("orig", m.text)
    world.register_image("erased", m.text, "")
    rewrite = "those folks " + " ".join(m.text.split()[-2:])
    full = world.explicitness(meme, m.text, m.text, world.caption_shown("orig"))
    on_original = world.explicitness(meme, m.text, rewrite, world.caption_shown("orig"))
    on_erased = world.explicitness(meme, m.text, rewrite, world.caption_shown("erased"))
    assert on_original == full  # the original caption still shows: nothing is hidden
    assert on_erased < full
    assert world.caption_shown("unknown") is None


def test_refine_image_original_shows_the_original_caption_to_the_simulated_target(
    tmp_path: Path,
) -> None:
    cfg = small_config(steps=1, refine_image="original")
    out, store, scripted = run_pipeline(cfg, tmp_path)
    store.close()
    memes = {m.uid: m for m in load_memes(cfg).memes}
    steps = [s for c in out.chains for s in c["steps"] if s.get("text")]
    assert steps
    world = scripted.world.adapt
    for s in steps:
        m = memes[s["meme"]]
        assert s["image"]["source"] == "original"
        assert s["image"]["sha256"] == prepare_image(m.image_path).sha256
        # The world knows that image still shows the original caption: nothing is hidden.
        assert world.caption_shown(s["image"]["sha256"]) == m.text
    from memearena.methods.adapt.analysis import adapt_section

    assert "ORIGINAL image" in adapt_section(cfg, out, bootstrap=0)["refine_image"]["note"]


def test_the_cli_refuses_refinement_that_cannot_hide_the_text_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_adapt_cli import CONFIG, app, runner

    monkeypatch.setattr(erase, "eraser_available", lambda: False)
    data = _copy_demo_without_erased(tmp_path / "data")
    cfg = tmp_path / "adapt.yaml"
    cfg.write_text(
        CONFIG.replace("PRICE", "1").replace(
            "{format: demo, limit: 8}", f"{{format: demo, path: {data}, limit: 8}}"
        )
    )
    for extra in (["--dry-run"], []):
        r = runner.invoke(app, ["adapt", str(cfg), "--out", str(tmp_path / "runs"), *extra])
        assert r.exit_code == 2, r.output
        assert "memearena[erase]" in r.output and "Traceback" not in r.output
        assert len(r.output.strip().splitlines()) == 1, r.output
    for db in (tmp_path / "runs").rglob("run.db"):
        store = RunStore(db)
        assert store.calls() == []  # refused before any call
        store.close()


def test_a_failing_eraser_leaves_its_chains_pending_with_the_reason_on_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: erase.TextEraser, image: bytes) -> erase.Erased:
        raise RuntimeError("onnxruntime session failed")

    monkeypatch.setattr(erase, "eraser_available", lambda: True)
    monkeypatch.setattr(erase.TextEraser, "erase", broken)
    cfg = _config_on(_copy_demo_without_erased(tmp_path / "data"), steps=1)
    out, store, _ = run_pipeline(cfg, tmp_path / "run")
    errors = [e for e in store.errors() if e.kind == erase.ERASED_KIND]
    store.close()
    assert out.pending > 0 and not [
        s for c in out.chains for s in c["steps"] if s.get("score_after")
    ]
    assert errors and all("onnxruntime session failed" in e.reason for e in errors)


def test_the_served_world_knows_which_image_shows_which_caption() -> None:
    from memearena.sim.serve import demo_world

    world = demo_world().adapt  # behind sim-serve: no pipeline registers anything
    for m in load_datasets([DatasetConfig(format="demo", limit=4)]).memes:
        assert m.image_path is not None and m.erased_image is not None
        for path, caption in ((m.image_path, m.text), (m.erased_image, "")):
            assert world.caption_shown(prepare_image(path).sha256) == caption
            assert world.caption_shown(hashlib.sha256(path.read_bytes()).hexdigest()) == caption


def test_a_drawn_caption_is_stored_losslessly_and_deterministically() -> None:
    # The rendered image is a PNG of exactly the pixels drawn: below the caption region every
    # pixel is the erased image's own, and the same caption always gives the same bytes (its
    # hash is in the requests' keys).
    import base64
    import io

    from PIL import Image

    img = prepare_image(demo_dir() / "img" / "erased" / "m06.png")
    base = ImagePart(img.data_url, img.sha256)
    drawn = erase.render_caption(base, "a softer caption")
    data = base64.b64decode(drawn.data_url.split(",", 1)[1])
    assert drawn.data_url.startswith("data:image/png;base64,")
    assert drawn.sha256 == hashlib.sha256(data).hexdigest()
    assert drawn == erase.render_caption(base, "a softer caption")
    with (
        Image.open(io.BytesIO(data), formats=("PNG",)) as out,
        Image.open(io.BytesIO(base64.b64decode(img.data_url.split(",", 1)[1]))) as src,
    ):
        assert out.mode == "RGB" and out.size == src.size
        w, h = src.size
        below = (0, h // 2, w, h)
        assert out.crop(below).tobytes() == src.convert("RGB").crop(below).tobytes()
        assert (
            out.crop((0, 0, w, h // 4)).tobytes()
            != src.convert("RGB").crop((0, 0, w, h // 4)).tobytes()
        )
