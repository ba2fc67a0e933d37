"""Each perturbation generator's output: what changes, what is kept, determinism."""

from __future__ import annotations

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
        (2, "8794b2d6662a8eaf94a461dc4d16947975762990cd55e2df58d2de131fe79e20"),
        (5, "f72e5a2f885b4cfbccab5ad44d0a5782517401e966369556a1ebdc6e7c73cf04"),
    ],
)
def test_visual_transformation_pixels_are_pinned_so_existing_runs_resume(seed: int, sha: str):
    # The variant's bytes are its request keys: a faster edit must give the very same pixels.
    # Seeds 2 and 5 between them apply every numeric edit (gamma, colour temperature, noise,
    # grain, vignette).
    import hashlib

    from memearena.data.demo import demo_dir
    from memearena.methods.judge_audit.perturb import transform_image

    with Image.open(demo_dir() / "img" / "m01.png") as im:
        out = transform_image(im.convert("RGB"), random.Random(seed))
    assert hashlib.sha256(out.image.tobytes()).hexdigest() == sha
