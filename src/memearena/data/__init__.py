"""Datasets: one typed :class:`Meme`, loaders for every supported format, safe image I/O.

Formats: fhm, harm, mami, mm-judgebias, folder, jsonl, csv and the bundled synthetic demo set.
``encode_png``: the fast lossless PNG writer of the images the pipelines make.
"""

from typing import TYPE_CHECKING, Any

from memearena.data.demo import demo_annotations, demo_dir, normalize_text
from memearena.data.filters import apply_filters, stratified_sample
from memearena.data.images import (
    IMAGE_EXTENSIONS,
    ImageError,
    PreparedImage,
    VerifiedImages,
    prepare_image,
    safe_join,
    verify_image,
)
from memearena.data.loaders import (
    DEMO_CATEGORIES,
    Duplicate,
    ItemError,
    LoadResult,
    fhm_id,
    load_dataset,
    load_datasets,
    merge_results,
)
from memearena.data.meme import Meme

if TYPE_CHECKING:
    from memearena.data.png import encode_png

__all__ = [
    "DEMO_CATEGORIES",
    "IMAGE_EXTENSIONS",
    "Duplicate",
    "ImageError",
    "ItemError",
    "LoadResult",
    "Meme",
    "PreparedImage",
    "VerifiedImages",
    "apply_filters",
    "demo_annotations",
    "demo_dir",
    "encode_png",
    "fhm_id",
    "load_dataset",
    "load_datasets",
    "merge_results",
    "normalize_text",
    "prepare_image",
    "safe_join",
    "stratified_sample",
    "verify_image",
]


def __getattr__(name: str) -> Any:
    # The PNG writer (numpy) is imported when first used: loading memes needs no numpy.
    if name == "encode_png":
        from memearena.data.png import encode_png

        return encode_png
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
