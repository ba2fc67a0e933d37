"""Each perturbation generator's output: what changes, what is kept, determinism."""

from __future__ import annotations

import base64
import hashlib
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from memearena.errors import DataError
from memearena.methods.judge_audit.judge import score_messages
from memearena.methods.judge_audit.perturb import (
    GENERATORS,
    INSERTED_KEY,
    SHOWS_KEY,
    ImageParts,
    ImageStore,
    PerturbContext,
    Triplet,
    image_metadata,
    insert_text,
    perturb,
)
from memearena.models.types import ImagePart
from memearena.stats import BIAS_TYPES


def _picture(colour: tuple[int, int, int], size: tuple[int, int] = (240, 180)) -> Image.Image:
    im = Image.new("RGB", size, colour)
    d = ImageDraw.Draw(im)
    d.ellipse((60, 40, 180, 140), fill=(250, 250, 250))
    d.rectangle((20, 20, 60, 60), fill=(10, 10, 10))
    return im


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "images")


@pytest.fixture
def base(store: ImageStore) -> Triplet:
    img = store.put(_picture((200, 60, 60)), {SHOWS_KEY: "meme one"})
    return Triplet("Is the meme in the image harmful?", img, "It targets nobody.")


@pytest.fixture
def donor(store: ImageStore) -> Triplet:
    img = store.put(_picture((60, 60, 200)), {SHOWS_KEY: "meme two"})
    return Triplet("Who is mocked in this other meme?", img, "Another answer.")


def _ctx(store: ImageStore, donor: Triplet | None = None, seed: int = 1) -> PerturbContext:
    return PerturbContext(
        store=store,
        rng=random.Random(seed),
        shows="meme one",
        donor=donor,
        description="A red square with a white circle.",
    )


def test_one_generator_per_bias_type() -> None:
    assert set(GENERATORS) == set(BIAS_TYPES)


def _request_text(t: Triplet) -> str:
    return "\n".join(m.plain_text() for m in score_messages(t, "plain"))


def _has_image(t: Triplet) -> bool:
    return any(isinstance(p, ImagePart) for m in score_messages(t, "plain") for p in m.content)


def test_removed_modality_is_absent_from_the_request(
    store: ImageStore, base: Triplet, donor: Triplet
) -> None:
    assert _has_image(base) and base.query in _request_text(base)
    td = perturb("text_dominance", base, _ctx(store, donor))
    assert not _has_image(td) and td.query in _request_text(td)
    idom = perturb("image_dominance", base, _ctx(store, donor))
    assert _has_image(idom) and base.query not in _request_text(idom)
    rd = perturb("response_dominance", base, _ctx(store, donor))
    assert not _has_image(rd) and base.query not in _request_text(rd)
    for t in (td, idom, rd):
        assert t.response == base.response and base.response in _request_text(t)


def test_swaps_come_from_another_item(store: ImageStore, base: Triplet, donor: Triplet) -> None:
    im = perturb("image_misalignment", base, _ctx(store, donor))
    assert im.image is not None and base.image is not None and donor.image is not None
    assert im.image.sha256 == donor.image.sha256 != base.image.sha256
    assert im.query == base.query
    qm = perturb("instruction_misalignment", base, _ctx(store, donor))
    assert qm.query == donor.query != base.query and qm.image == base.image


def test_swaps_need_another_item(store: ImageStore, base: Triplet) -> None:
    with pytest.raises(DataError, match="another item"):
        perturb("image_misalignment", base, _ctx(store, None))


def test_detail_description_is_appended_to_the_query(
    store: ImageStore, base: Triplet, donor: Triplet
) -> None:
    dd = perturb("detail_description", base, _ctx(store, donor))
    assert dd.query.startswith(base.query)
    assert "A red square with a white circle." in dd.query and dd.image == base.image


def test_unnecessary_image_adds_another_items_image(
    store: ImageStore, base: Triplet, donor: Triplet
) -> None:
    text_only = Triplet(base.query, None, base.response)
    ctx = PerturbContext(store, random.Random(1), "meme one", donor=donor, own_image=base.image)
    ui = perturb("unnecessary_image", text_only, ctx)
    assert ui.image is not None and donor.image is not None and base.image is not None
    assert ui.image.sha256 == donor.image.sha256 != base.image.sha256
    assert ui.query == text_only.query and ui.response == text_only.response
    assert image_metadata(ui.image.path.read_bytes())[SHOWS_KEY] == "meme two"
    with pytest.raises(DataError, match="text-only"):
        perturb("unnecessary_image", base, ctx)


def _diff_pixels(a: Image.Image, b: Image.Image) -> int:
    return int((np.asarray(a) != np.asarray(b)).any(axis=2).sum())


def test_visual_transformation_changes_pixels_but_keeps_size_and_content(
    store: ImageStore, base: Triplet
) -> None:
    assert base.image is not None
    vt = perturb("visual_transformation", base, _ctx(store))
    assert vt.image is not None and vt.image.sha256 != base.image.sha256
    before, after = base.image.load(), vt.image.load()
    assert after.size == before.size  # the same size class (the same size, in fact)
    assert _diff_pixels(before, after) > 0.05 * before.width * before.height
    # The content is kept: the white circle is still at the centre, the dark square top-left.
    cx, cy = before.width // 2, before.height // 2
    assert min(after.getpixel((cx, cy))) > 180
    assert max(after.getpixel((40, 40))) < 120
    assert vt.query == base.query


def test_texture_insertion_draws_the_query_into_the_image(store: ImageStore, base: Triplet) -> None:
    assert base.image is not None
    ctx = _ctx(store)
    ti = perturb("texture_insertion", base, ctx)
    assert ti.image is not None and ti.image.sha256 != base.image.sha256
    assert image_metadata(ti.image.path.read_bytes())[INSERTED_KEY] == base.query
    assert 0 < float(ctx.notes["covered_share"]) <= 0.10
    before, after = base.image.load(), ti.image.load()
    assert after.size == before.size
    # The text is in the picture: dark glyph pixels inside the overlay box, nothing changed
    # outside it, and another text draws other pixels.
    got = insert_text(before, base.query, rng=random.Random(1))
    x0, y0, x1, y1 = got.box
    inside = np.asarray(got.image)[y0:y1, x0:x1]
    assert int((inside.max(axis=2) < 80).sum()) > 20
    other = insert_text(before, "Completely different words here", rng=random.Random(1))
    assert _diff_pixels(other.image, got.image) > 20


def test_generators_are_deterministic(tmp_path: Path, base: Triplet) -> None:
    a = ImageStore(tmp_path / "a")
    b = ImageStore(tmp_path / "b")
    for bias_type in ("visual_transformation", "texture_insertion"):
        x = perturb(bias_type, base, _ctx(a, seed=7))
        y = perturb(bias_type, base, _ctx(b, seed=7))
        assert x.image is not None and y.image is not None
        assert x.image.sha256 == y.image.sha256  # same seed, same bytes, same request key
    z = perturb("visual_transformation", base, _ctx(a, seed=8))
    assert z.image is not None and z.image.sha256 != x.image.sha256  # type: ignore[union-attr]


def test_images_are_stored_by_content_hash(store: ImageStore) -> None:
    img = store.put(_picture((1, 2, 3)))
    assert img.path.name.startswith(img.sha256)
    assert store.find(img.sha256) == img
    img.path.write_bytes(b"tampered")
    assert store.find(img.sha256) is None


def test_a_generator_needs_an_image_to_transform(store: ImageStore) -> None:
    with pytest.raises(DataError, match="no image"):
        perturb("visual_transformation", Triplet("q", None, "r"), _ctx(store))


@pytest.mark.parametrize(
    ("seed", "sha"),
    [
        (2, "81b767e00b478a437688f6c670253e5d6236d8c6c64cdb05adec8178ff224db4"),
        (5, "9333fa0dd7d5eaac6648b1ac71627029b5a1936e9c3f5529fd8dc06b8cf7c17f"),
    ],
)
def test_visual_transformation_pixels_are_pinned_so_existing_runs_resume(seed: int, sha: str):
    # The variant's bytes are its request keys: the same seed must give the very same pixels in
    # every process, and a change of the edits is a deliberate one (it re-asks the variants'
    # judgments once; docs/judge_audit.md says when). Seeds 2 and 5 between them apply both
    # geometric edits and every table-driven edit (gamma, colour temperature, hue, noise,
    # grain, vignette).
    import hashlib

    from memearena.data.demo import demo_dir
    from memearena.methods.judge_audit.perturb import transform_image

    with Image.open(demo_dir() / "img" / "m01.png") as im:
        out = transform_image(im.convert("RGB"), random.Random(seed))
    assert hashlib.sha256(out.image.tobytes()).hexdigest() == sha


def test_table_edits_equal_their_formula_on_every_byte() -> None:
    # Gamma and colour temperature run as lookup tables: every input byte gives exactly the
    # value the formula rounds (half to even) and clips to.
    from memearena.methods.judge_audit.perturb import AESTHETIC_EDITS

    ramp = np.arange(256, dtype=np.uint8).reshape(16, 16)
    im = Image.fromarray(np.stack([ramp, ramp[::-1], ramp.T], axis=2), "RGB")
    a = np.asarray(im, dtype=np.float64)
    g_out, g_what = AESTHETIC_EDITS["gamma"](im, random.Random(3))
    g = random.Random(3)
    gamma = g.choice((g.uniform(0.88, 0.95), g.uniform(1.05, 1.12)))
    assert g_what == f"gamma {gamma:.2f}"
    want = np.clip(np.rint(255.0 * (a / 255.0) ** gamma), 0, 255)
    assert (np.asarray(g_out) == want).all()
    t_out, _ = AESTHETIC_EDITS["colour_temperature"](im, random.Random(4))
    t = random.Random(4)
    k = t.choice((-1, 1)) * t.uniform(0.03, 0.06)
    want = a.copy()
    want[..., 0] *= 1 + k
    want[..., 2] *= 1 - k
    assert (np.asarray(t_out) == np.clip(np.rint(want), 0, 255)).all()


def test_noise_and_grain_have_their_stated_strength() -> None:
    from memearena.methods.judge_audit.perturb import AESTHETIC_EDITS

    flat = Image.new("RGB", (200, 200), (128, 128, 128))
    for seed in range(4):
        out, what = AESTHETIC_EDITS["noise"](flat, random.Random(seed))
        sigma = float(what.rsplit(" ", 1)[1])
        d = np.asarray(out, dtype=np.float64) - 128
        assert abs(d.mean()) < 0.1 and abs(d.std() - sigma) < 0.15 * sigma, (what, d.std())
        out, what = AESTHETIC_EDITS["grain"](flat, random.Random(seed))
        d = np.asarray(out, dtype=np.float64) - 128
        assert (d[..., 0] == d[..., 2]).all()  # luminance: every channel alike
        assert 0.3 < d.std() < float(what.rsplit(" ", 1)[1])  # softened by its blur
    assert AESTHETIC_EDITS["noise"](flat, random.Random(1))[0].tobytes() != (
        AESTHETIC_EDITS["noise"](flat, random.Random(2))[0].tobytes()
    )


def test_zoom_out_pads_the_whole_scaled_image_onto_the_canvas() -> None:
    from memearena.methods.judge_audit.perturb import _zoom_out

    im = _picture((200, 60, 60))
    out, what = _zoom_out(im, random.Random(0))
    f = float(what.split("×")[1].split()[0])
    assert out.size == im.size and 0.90 <= f <= 0.96
    a = np.asarray(out)
    # A border of the corner colour all round, the picture's dark square moved inwards.
    assert (a[0] == (200, 60, 60)).all() and (a[:, -1] == (200, 60, 60)).all()
    assert a[22, 22].max() > 150 and a[30, 30].max() < 60


def test_rotate_keeps_every_corner_of_the_picture() -> None:
    from memearena.methods.judge_audit.perturb import _rotate_fit

    im = Image.new("RGB", (240, 180), (255, 255, 255))
    ImageDraw.Draw(im).rectangle((6, 6, 233, 173), outline=(0, 0, 0), width=3)
    out, what = _rotate_fit(im, random.Random(0))
    assert out.size == im.size and "rotate" in what
    dark = np.asarray(out.convert("L")) < 100
    # The frame is still whole: dark pixels near each edge, none cut off at the borders.
    ys, xs = np.nonzero(dark)
    assert xs.min() > 0 and ys.min() > 0 and xs.max() < 239 and ys.max() < 179
    assert xs.max() - xs.min() > 200 and ys.max() - ys.min() > 150
    for corner in ((0, 0), (0, 179), (239, 0), (239, 179)):  # the canvas is padded white
        assert out.getpixel(corner) == (255, 255, 255)


def test_encoded_images_get_their_metadata_without_being_re_encoded(store: ImageStore) -> None:
    import io

    png, jpeg = io.BytesIO(), io.BytesIO()
    pic = _picture((20, 120, 40))
    pic.save(png, format="PNG", compress_level=6)
    photo = Image.effect_noise((120, 90), 50).convert("RGB")
    photo.save(jpeg, format="JPEG", quality=90)
    meta = {SHOWS_KEY: "“quoted” ünïcode", INSERTED_KEY: "text"}
    for data, mime, im in ((png, "image/png", pic), (jpeg, "image/jpeg", photo)):
        got = store.put_encoded(data.getvalue(), mime, im.size, meta)
        raw = got.path.read_bytes()
        assert got.mime == mime and (got.width, got.height) == im.size
        assert image_metadata(raw) == meta
        with Image.open(data) as src:
            assert got.load().tobytes() == src.convert("RGB").tobytes()  # the very pixels
    # A PNG gets the bytes decoding and storing it again at the same level would give.
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    for k, v in sorted(meta.items()):
        info.add_itxt(k, v)
    again = io.BytesIO()
    pic.save(again, format="PNG", pnginfo=info, compress_level=6)
    got = store.put_encoded(png.getvalue(), "image/png", pic.size, meta)
    assert got.path.read_bytes() == again.getvalue()


def test_a_png_variant_keeps_its_pixels_and_metadata(store: ImageStore) -> None:
    # Variants go through the package's PNG writer: Pillow decodes the very pixels that were
    # stored, reads the metadata back, and the same variant always gives the same bytes.
    from memearena.data.demo import demo_dir

    with Image.open(demo_dir() / "img" / "m02.png") as src:
        pic = src.convert("RGB")
    got = insert_text(pic, "Is the meme in the image harmful?", rng=random.Random(3))
    meta = {SHOWS_KEY: "“quoted” ünïcode", INSERTED_KEY: got.text}
    img = store.put(got.image, meta)
    assert img.mime == "image/png" and (img.width, img.height) == pic.size
    raw = img.path.read_bytes()
    assert image_metadata(raw) == meta
    with Image.open(img.path, formats=("PNG",)) as back:
        assert back.mode == "RGB" and back.tobytes() == got.image.tobytes()
    other = ImageStore(store.root.parent / "other")
    assert other.put(got.image.copy(), dict(meta)).sha256 == img.sha256


def test_an_image_part_sends_the_stored_bytes_and_is_built_once(store: ImageStore) -> None:
    img = store.put(_picture((30, 160, 90)), {SHOWS_KEY: "meme three"})
    part = img.part()
    head, _, b64 = part.data_url.partition(",")
    assert head == f"data:{img.mime};base64"
    assert base64.b64decode(b64) == img.path.read_bytes()
    assert part.sha256 == img.sha256 == hashlib.sha256(img.path.read_bytes()).hexdigest()
    assert img.part() is part  # the data URL is not built again for the next request


def test_images_made_ahead_never_push_out_kept_ones() -> None:
    parts = ImageParts(limit=120)
    first = parts.put("a", "image/png", b"x" * 30)  # 62 characters kept
    assert not parts.has_room("image/png", 30)
    ahead = parts.put("b", "image/png", b"y" * 30, evict=False)
    assert base64.b64decode(ahead.data_url.split(",", 1)[1]) == b"y" * 30  # still usable
    assert parts.get("b", "image/png") is None and parts.get("a", "image/png") is first
    sent = parts.put("c", "image/png", b"z" * 30)  # a part asked for is kept, the oldest goes
    assert parts.get("c", "image/png") is sent and parts.get("a", "image/png") is None


@pytest.mark.parametrize("name", ["brightness", "contrast"])
def test_blend_edits_give_image_enhances_pixels(name: str) -> None:
    # Brightness and contrast run as byte tables made by Pillow's own blend: on every image
    # and strength they give exactly ImageEnhance's pixels (the variants' bytes and request
    # keys depend on it).
    from PIL import ImageEnhance

    from memearena.methods.judge_audit.perturb import AESTHETIC_EDITS

    rng = np.random.default_rng(3)
    noisy = Image.fromarray(rng.integers(0, 256, (37, 53, 3), dtype=np.uint8), "RGB")
    images = [noisy, _picture((200, 60, 60)), Image.new("RGB", (5, 4), (255, 255, 255))]
    kind = {"brightness": ImageEnhance.Brightness, "contrast": ImageEnhance.Contrast}[name]
    lo, hi = {"brightness": (0.90, 1.10), "contrast": (0.88, 1.12)}[name]
    for im in images:
        for seed in range(12):
            got, what = AESTHETIC_EDITS[name](im, random.Random(seed))
            r = random.Random(seed)
            k = r.choice((r.uniform(lo, 1 - (1 - lo) / 3), r.uniform(1 + (hi - 1) / 3, hi)))
            assert what == f"{name} ×{k:.2f}"
            assert got.tobytes() == kind(im).enhance(k).tobytes(), (name, im.size, seed)


def test_vignette_mask_table_equals_its_formula() -> None:
    from memearena.methods.judge_audit.perturb import _BYTES, _rounded, _table

    for k in (0.08, 0.1, 0.1234567, 0.15):
        assert _rounded(255 * (1 - k * _BYTES / 255)) == _table(
            lambda v, k=k: 255 * (1 - k * v / 255)
        )
    for k in (-0.06, -0.03, 0.03, 0.0517):
        assert _rounded(_BYTES * (1 + k)) == _table(lambda v, k=k: v * (1 + k))


def test_integral_image_counts_every_box() -> None:
    from memearena.methods.judge_audit.perturb import _integral

    rng = np.random.default_rng(5)
    for shape in ((1, 1), (7, 3), (64, 101)):
        mask = rng.random(shape) < 0.3
        want = np.pad(mask.astype(np.int64), ((1, 0), (1, 0))).cumsum(0).cumsum(1)
        assert (_integral(mask) == want).all()
