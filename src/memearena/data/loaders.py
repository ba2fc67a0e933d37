"""Dataset loaders: every published format becomes a list of :class:`Meme`.

Two kinds of problems, handled differently (principle: nothing is silently dropped):

* a malformed ROW (invalid JSON, missing or ill-typed field) raises one :class:`DataError` line
  naming file, line and field — or, with ``skip_bad``, becomes an :class:`ItemError` and loading
  goes on;
* an IMAGE problem (missing, empty, corrupt, decompression bomb, path escaping the root) is always
  an :class:`ItemError` for that item alone; the other items load.

Filters (``harmful_only``, ``sample``, ``limit``) select among well-formed rows *before* images
are checked, so the sample depends only on the annotation file and the seed; an item whose image
then fails is reported, not replaced.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memearena.config import DatasetConfig, ImageConfig
from memearena.data.demo import demo_dir
from memearena.data.filters import apply_filters
from memearena.data.images import (
    DEFAULT_IMAGE_CONFIG,
    IMAGE_EXTENSIONS,
    ImageError,
    safe_join,
    verify_image,
)
from memearena.data.meme import Meme
from memearena.errors import DataError


@dataclass(frozen=True)
class ItemError:
    """One item that could not be loaded, and why."""

    source: str
    """The dataset file (or folder) the item comes from."""
    item: str
    """The item's id, or ``line N`` when the row was too malformed to have one."""
    reason: str
    """What is wrong, starting with its kind (e.g. ``missing image: /data/img/1.png``)."""

    @property
    def kind(self) -> str:
        """The class of problem: the reason up to its first ``': '`` (e.g. ``missing image``)."""
        return self.reason.split(": ", 1)[0]


@dataclass
class LoadResult:
    """Memes that loaded, and an error for every item that did not."""

    memes: list[Meme] = field(default_factory=list)
    """Items that loaded (after filters), in file order."""
    errors: list[ItemError] = field(default_factory=list)
    """Rows skipped with ``skip_bad`` and items whose image failed its checks."""


class _RowError(Exception):
    """A malformed row; becomes a DataError (or an ItemError with skip_bad) naming the line."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass
class _Item:
    """A well-formed row whose images have not been resolved or checked yet."""

    id: str
    text: str
    image: str | None
    harmful: bool | None = None
    labels: list[str] = field(default_factory=list)
    annotations: dict[str, Any] = field(default_factory=dict)
    extra_images: dict[str, str | None] = field(default_factory=dict)
    """Annotation key -> relative image path, resolved and checked like the main image."""


class _Ctx:
    """One dataset being read: where rows come from, where images live, where errors go."""

    def __init__(self, cfg: DatasetConfig, file: Path, root: Path, source: str | None = None):
        self.cfg = cfg
        self.file = file
        self.root = root
        self.source = source or str(file)
        self.errors: list[ItemError] = []
        self._seen: dict[str, int] = {}

    def bad_row(self, line: int, message: str, field: str | None = None) -> None:
        where = f"field {field!r}: " if field else ""
        if not self.cfg.skip_bad:
            raise DataError(f"{self.file}:{line}: {where}{message}")
        self.errors.append(ItemError(str(self.file), f"line {line}", f"bad row: {where}{message}"))

    def parse(
        self, line: int, row: dict[str, Any], parser: Callable[[dict[str, Any]], _Item]
    ) -> _Item | None:
        """Run a row parser; a malformed row is raised or recorded, and None returned."""
        try:
            item = parser(row)
            first = self._seen.setdefault(item.id, line)
            if first != line:
                raise _RowError(f"duplicate id {item.id!r} (first on line {first})", "id")
        except _RowError as e:
            self.bad_row(line, e.message, e.field)
            return None
        return item


# ---------------------------------------------------------------------------------------------
# Reading files


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: dataset file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, expected a dataset file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read dataset file ({e.strerror or e})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path}:{line}: not valid UTF-8") from None


def _json_rows(ctx: _Ctx) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of a JSONL file, or of a file holding one JSON array of objects, with line numbers."""
    text = _read_text(ctx.file)
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from _json_array_rows(ctx, text)
        return
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as e:
            ctx.bad_row(n, f"invalid JSON ({e.msg} at column {e.colno})")
            continue
        if not isinstance(row, dict):
            ctx.bad_row(n, f"expected a JSON object, got {type(row).__name__}")
            continue
        yield n, row


def _json_array_rows(ctx: _Ctx, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1

    def skip_ws(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    def fail(i: int, msg: str) -> DataError:
        # A broken array cannot be resynchronised: always fatal, even with skip_bad.
        return DataError(f"{ctx.file}:{text.count(chr(10), 0, i) + 1}: invalid JSON ({msg})")

    pos = skip_ws(pos)
    if pos < len(text) and text[pos] == "]":
        return
    while True:
        pos = skip_ws(pos)
        line = text.count("\n", 0, pos) + 1
        try:
            row, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise fail(e.pos, e.msg) from None
        if isinstance(row, dict):
            yield line, row
        else:
            ctx.bad_row(line, f"expected a JSON object, got {type(row).__name__}")
        pos = skip_ws(pos)
        if pos >= len(text):
            raise fail(pos, "unterminated array")
        if text[pos] == "]":
            if text[pos + 1 :].strip():
                raise fail(pos + 1, "extra data after the array")
            return
        if text[pos] != ",":
            raise fail(pos, "expected ',' or ']'")
        pos += 1


def _table_rows(
    ctx: _Ctx, path: Path, *, delimiter: str, required: Sequence[str], quoted: bool = True
) -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """Header and rows of a CSV/TSV file; a missing required column is fatal (line 1)."""
    text = _read_text(path)
    lines = text.splitlines(keepends=True)
    if quoted:
        reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL)
    else:
        reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise DataError(f"{path}:1: empty file, expected a header row") from None
    except csv.Error as e:
        raise DataError(f"{path}:1: unreadable header ({e})") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(
            f"{path}:1: missing column(s) {', '.join(repr(c) for c in missing)} "
            f"(header has {header})"
        )

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        prev = reader.line_num
        while True:
            try:
                values = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                ctx.bad_row(prev + 1, f"unreadable row ({e})")
                prev = reader.line_num
                continue
            line, prev = prev + 1, reader.line_num
            if not values or all(not v.strip() for v in values):
                continue
            if len(values) != len(header):
                ctx.bad_row(line, f"expected {len(header)} columns, got {len(values)}")
                continue
            yield line, dict(zip(header, values, strict=True))

    return header, rows()


# ---------------------------------------------------------------------------------------------
# Field checks (each raises _RowError naming the field)


def _require(row: dict[str, Any], name: str) -> Any:
    if name not in row:
        raise _RowError("required field is missing", name)
    return row[name]


def _id(row: dict[str, Any], name: str = "id") -> str:
    v = _require(row, name)
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise _RowError(f"must be a string or an integer, got {v!r}", name)
    s = str(v).strip()
    if not s:
        raise _RowError("must not be empty", name)
    return s


def _str(row: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    v = _require(row, name) if required else row.get(name)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise _RowError(f"must be a string, got {v!r}", name)
    return v


def _path(row: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    v = _str(row, name, required=required)
    if v is None or not v.strip():
        if required:
            raise _RowError("must be a non-empty image path", name)
        return None
    return v.strip()


def _zero_one(v: Any, name: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return v == 1
    if isinstance(v, str) and v.strip() in ("0", "1"):
        return v.strip() == "1"
    raise _RowError(f"must be 0 or 1, got {v!r}", name)


_TRUE = frozenset({"1", "true", "harmful"})
_FALSE = frozenset({"0", "false", "not harmful", "not-harmful"})


def _label(v: Any, name: str = "label") -> bool | None:
    """Generic label: 0/1, true/false, harmful/not harmful (any case); empty means unlabelled."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return v == 1
    if isinstance(v, str):
        s = " ".join(v.strip().lower().split())
        if not s:
            return None
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
    raise _RowError(f"must be 0/1, true/false or harmful/not harmful, got {v!r}", name)


def _labels(v: Any, name: str = "labels") -> list[str]:
    """A list of strings; in CSV a ``|``-separated string or a JSON list."""
    if v is None:
        return []
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            try:
                v = json.loads(s)
            except json.JSONDecodeError:
                raise _RowError(f"not a valid JSON list: {v!r}", name) from None
        else:
            return [p.strip() for p in s.split("|") if p.strip()]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise _RowError(f"must be a list of strings, got {v!r}", name)
    return [x.strip() for x in v]


# ---------------------------------------------------------------------------------------------
# Formats


def _fhm_row(row: dict[str, Any]) -> _Item:
    label = row.get("label")
    harmful = None if label is None else _zero_one(label, "label")
    known = {"id", "img", "label", "text"}
    return _Item(
        id=_id(row),
        text=_str(row, "text") or "",
        image=_path(row, "img"),
        harmful=harmful,
        labels=[] if harmful is None else ["hateful" if harmful else "not hateful"],
        annotations={k: v for k, v in row.items() if k not in known},
    )


_HARM_LEVELS = ("not harmful", "somewhat harmful", "very harmful")


def _harm_row(row: dict[str, Any]) -> _Item:
    labels = _labels(_require(row, "labels"))
    if not labels:
        raise _RowError("must list at least one label", "labels")
    level = " ".join(labels[0].lower().split())
    if level not in _HARM_LEVELS:
        raise _RowError(
            f"first label must be one of {list(_HARM_LEVELS)}, got {labels[0]!r}", "labels"
        )
    known = {"id", "image", "labels", "text"}
    return _Item(
        id=_id(row),
        text=_str(row, "text") or "",
        image=_path(row, "image"),
        harmful=level != "not harmful",
        labels=labels,
        annotations={k: v for k, v in row.items() if k not in known},
    )


_MAMI_SUBLABELS = ("shaming", "stereotype", "objectification", "violence")
_MAMI_TEXT = "Text Transcription"


def _mami_row(row: dict[str, Any]) -> _Item:
    file_name = _path(row, "file_name")
    assert file_name is not None
    harmful = None
    labels: list[str] = []
    if "misogynous" in row:
        harmful = _zero_one(row["misogynous"], "misogynous")
        labels = [s for s in _MAMI_SUBLABELS if s in row and _zero_one(row[s], s)]
    known = {"file_name", "misogynous", _MAMI_TEXT, *_MAMI_SUBLABELS}
    return _Item(
        id=file_name,
        text=_str(row, _MAMI_TEXT) or "",
        image=file_name,
        harmful=harmful,
        labels=labels,
        annotations={k: v for k, v in row.items() if k not in known},
    )


_JB_OPTIONAL_STR = ("bias_category", "task_type", "domain_type", "biased_instruction")


def _judgebias_row(row: dict[str, Any]) -> _Item:
    ann: dict[str, Any] = {"bias_type": _str(row, "bias_type")}
    for name in _JB_OPTIONAL_STR:
        ann[name] = _str(row, name, required=False)
    difficulty = row.get("difficulty")
    if difficulty is not None and (
        isinstance(difficulty, bool) or not isinstance(difficulty, str | int)
    ):
        raise _RowError(f"must be a string or an integer, got {difficulty!r}", "difficulty")
    ann["difficulty"] = difficulty
    ann["response"] = _str(row, "response")
    known = {"id", "unbiased_instruction", "unbiased_image", "biased_image", "difficulty"}
    known |= set(ann)
    ann.update({k: v for k, v in row.items() if k not in known})
    return _Item(
        id=_id(row),
        text=_str(row, "unbiased_instruction") or "",
        image=_path(row, "unbiased_image", required=False),
        annotations=ann,
        extra_images={"biased_image": _path(row, "biased_image", required=False)},
    )


def _generic_row(row: dict[str, Any]) -> _Item:
    known = {"id", "image", "text", "label", "labels"}
    return _Item(
        id=_id(row),
        text=_str(row, "text") or "",
        image=_path(row, "image"),
        harmful=_label(row.get("label")),
        labels=_labels(row.get("labels")),
        annotations={k: v for k, v in row.items() if k not in known},
    )


DEMO_CATEGORIES = ("Race", "Gender", "Religion", "Nationality", "Disability", "Animal")
"""Categories of the demo set (each mapped to a fictional analogue)."""


def _str_list(row: dict[str, Any], name: str) -> list[str]:
    v = _require(row, name)
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x.strip() for x in v):
        raise _RowError(f"must be a non-empty list of strings, got {v!r}", name)
    return list(v)


def _demo_row(row: dict[str, Any]) -> _Item:
    category = _str(row, "category")
    if category not in DEMO_CATEGORIES:
        raise _RowError(f"must be one of {list(DEMO_CATEGORIES)}, got {category!r}", "category")
    harmful = _zero_one(_require(row, "label"), "label")
    ann: dict[str, Any] = {
        "category": category,
        "target": _str(row, "target"),
        "facts": _str_list(row, "facts"),
        "false_facts": _str_list(row, "false_facts"),
        "misbelief": _str(row, "misbelief"),
        "harm": _str(row, "harm"),
    }
    known = {"id", "img", "text", "label", *ann}
    ann.update({k: v for k, v in row.items() if k not in known})
    return _Item(
        id=_id(row),
        text=_str(row, "text") or "",
        image=_path(row, "img"),
        harmful=harmful,
        labels=["harmful" if harmful else "not harmful"],
        annotations=ann,
    )


def _read_json_format(ctx: _Ctx, parser: Callable[[dict[str, Any]], _Item]) -> list[_Item]:
    items = []
    for line, row in _json_rows(ctx):
        item = ctx.parse(line, row, parser)
        if item is not None:
            items.append(item)
    return items


def _read_table_format(
    ctx: _Ctx,
    parser: Callable[[dict[str, Any]], _Item],
    *,
    delimiter: str,
    required: Sequence[str],
    quoted: bool = True,
) -> list[_Item]:
    _, rows = _table_rows(ctx, ctx.file, delimiter=delimiter, required=required, quoted=quoted)
    items = []
    for line, row in rows:
        item = ctx.parse(line, row, parser)
        if item is not None:
            items.append(item)
    return items


def _read_folder(ctx: _Ctx) -> list[_Item]:
    folder = ctx.root
    captions: dict[str, _Item] = {}
    cap_file = folder / "captions.csv"
    if cap_file.is_file():
        cap_ctx = _Ctx(ctx.cfg, cap_file, folder)
        _, rows = _table_rows(cap_ctx, cap_file, delimiter=",", required=("file", "text"))

        def caption_row(row: dict[str, Any]) -> _Item:
            name = _path(row, "file")
            assert name is not None
            extra = {k: v for k, v in row.items() if k not in ("file", "text", "label")}
            return _Item(
                id=name,
                text=_str(row, "text") or "",
                image=name,
                harmful=_label(row.get("label")),
                annotations=extra,
            )

        for line, row in rows:
            item = cap_ctx.parse(line, row, caption_row)
            if item is not None:
                captions[item.id] = item
        ctx.errors.extend(cap_ctx.errors)
    items = []
    for p in sorted(folder.iterdir(), key=lambda p: p.name):
        if p.suffix.lower() in IMAGE_EXTENSIONS and (p.is_file() or p.is_symlink()):
            item = captions.pop(p.name) if p.name in captions else None
            items.append(item or _Item(id=p.name, text="", image=p.name))
    # Captions naming an image that is not in the folder stay items: they fail the image check
    # (missing / escaping) and are reported instead of vanishing.
    items.extend(captions.values())
    return items


# ---------------------------------------------------------------------------------------------
# Public API


def _locate(cfg: DatasetConfig) -> tuple[Path, Path]:
    """(annotation file or folder, image root) for a dataset config."""
    if cfg.format == "demo":
        path = cfg.path or demo_dir()
        file = path / "memes.jsonl" if path.is_dir() else path
        return file, cfg.image_root or file.parent
    assert cfg.path is not None  # DatasetConfig requires it for every other format
    if cfg.format == "folder":
        if cfg.image_root is not None:
            raise DataError(
                f"{cfg.path}: format 'folder' reads images from 'path'; drop 'image_root'"
            )
        if not cfg.path.is_dir():
            raise DataError(f"{cfg.path}: format 'folder' needs a folder of images")
        return cfg.path, cfg.path
    return cfg.path, cfg.image_root or cfg.path.parent


def load_dataset(
    cfg: DatasetConfig, image_cfg: ImageConfig | None = None, *, check_images: bool = True
) -> LoadResult:
    """Load one dataset: parse rows, apply filters, then resolve and check each image.

    Raises DataError for an unreadable file or (without ``skip_bad``) the first malformed row.
    Image problems never raise: each becomes an :class:`ItemError` and the item is dropped.
    With ``check_images=False`` paths are still confined to the dataset root but files are not
    opened.
    """
    image_cfg = image_cfg or DEFAULT_IMAGE_CONFIG
    file, root = _locate(cfg)
    ctx = _Ctx(cfg, file, root)
    if cfg.format == "fhm":
        items = _read_json_format(ctx, _fhm_row)
    elif cfg.format == "harm":
        items = _read_json_format(ctx, _harm_row)
    elif cfg.format == "mami":
        # MAMI transcriptions contain stray quotes: no CSV quoting in its TSV.
        items = _read_table_format(
            ctx,
            _mami_row,
            delimiter="\t",
            required=("file_name", _MAMI_TEXT),
            quoted=False,
        )
    elif cfg.format == "mm-judgebias":
        items = _read_json_format(ctx, _judgebias_row)
    elif cfg.format == "folder":
        items = _read_folder(ctx)
    elif cfg.format == "jsonl":
        items = _read_json_format(ctx, _generic_row)
    elif cfg.format == "csv":
        items = _read_table_format(
            ctx, _generic_row, delimiter=",", required=("id", "image", "text")
        )
    elif cfg.format == "demo":
        items = _read_json_format(ctx, _demo_row)
    else:  # pragma: no cover - DatasetConfig's Literal rules this out
        raise DataError(f"unknown dataset format {cfg.format!r}")

    selected = apply_filters(
        items,
        harmful_only=cfg.harmful_only,
        sample=cfg.sample,
        sample_seed=cfg.sample_seed,
        limit=cfg.limit,
    )
    split = cfg.split or ("demo" if cfg.format == "demo" and cfg.path is None else file.stem)
    if cfg.format == "folder":
        split = cfg.split or file.name
    memes: list[Meme] = []
    for item in selected:
        try:
            image = _resolve(root, item.image, image_cfg, check_images)
            annotations = dict(item.annotations)
            for key, rel in item.extra_images.items():
                extra = _resolve(root, rel, image_cfg, check_images)
                annotations[key] = None if extra is None else str(extra)
        except ImageError as e:
            ctx.errors.append(ItemError(ctx.source, item.id, e.reason))
            continue
        memes.append(
            Meme(
                id=item.id,
                source=cfg.format,
                text=item.text,
                image_path=image,
                harmful=item.harmful,
                labels=item.labels,
                split=split,
                annotations=annotations,
            )
        )
    return LoadResult(memes=memes, errors=ctx.errors)


def _resolve(root: Path, rel: str | None, image_cfg: ImageConfig, check: bool) -> Path | None:
    if rel is None:
        return None
    path = safe_join(root, rel)
    if check:
        verify_image(path, image_cfg)
    return path


def check_unique(results: Sequence[tuple[DatasetConfig, LoadResult]]) -> None:
    """Raise DataError if two loaded memes share a ``uid`` (``source:id``), naming both datasets."""
    seen: dict[str, int] = {}
    for i, (cfg, result) in enumerate(results):
        for meme in result.memes:
            first = seen.setdefault(meme.uid, i)
            if first != i:
                a = results[first][0].path or "bundled demo"
                b = cfg.path or "bundled demo"
                raise DataError(
                    f"duplicate item {meme.uid!r}: in {a} and in {b} "
                    "(overlapping splits? load each once, or filter one of them)"
                )


def load_datasets(
    cfgs: Sequence[DatasetConfig],
    image_cfg: ImageConfig | None = None,
    *,
    check_images: bool = True,
) -> LoadResult:
    """Load several datasets and concatenate them; two items with the same uid is a DataError."""
    results = [(c, load_dataset(c, image_cfg, check_images=check_images)) for c in cfgs]
    check_unique(results)
    out = LoadResult()
    for _, r in results:
        out.memes.extend(r.memes)
        out.errors.extend(r.errors)
    return out
