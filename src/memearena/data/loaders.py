"""Dataset loaders: every published format becomes a list of :class:`Meme`.

Problems are handled per item (principle: a run survives a bad item, records it and goes on):

* a malformed ROW (invalid or unbounded JSON, missing or ill-typed field) becomes an
  :class:`ItemError` naming file, line and field, and loading goes on — or, with ``strict``, raises
  that line as a :class:`DataError`;
* an IMAGE problem (missing, empty, corrupt, decompression bomb, path escaping the root) is always
  an :class:`ItemError` for that item alone; the other items load;
* the same id twice (in one file or across files, after canonicalisation) is merged into one item
  when the rows are identical, counted in :attr:`LoadResult.duplicates`; rows that disagree are
  an error for that id and neither copy is kept (``strict``: a DataError).

A file that is unreadable, has no rows, or whose header is broken is a DataError: nothing to go on.

Filters (``ids``, ``exclude``, ``harmful_only``, ``sample``, ``limit``) select among well-formed
rows *before* images are checked, so the sample depends only on the annotation file and the seed;
an item whose image then fails is reported, not replaced.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memearena.config import DatasetConfig, ImageConfig
from memearena.data._json import JSONLimitError, iter_json_array, loads_row
from memearena.data.demo import demo_dir
from memearena.data.filters import apply_filters
from memearena.data.images import (
    DEFAULT_IMAGE_CONFIG,
    IMAGE_EXTENSIONS,
    ImageError,
    VerifiedImages,
    safe_join,
    verify_image,
)
from memearena.data.meme import ItemError, Meme
from memearena.errors import DataError

_Check = Callable[[Path, ImageConfig], object]
"""Admits an image file (raises ``ImageError``): ``verify_image`` or a record's ``verify``."""


@dataclass(frozen=True)
class Duplicate:
    """An item found more than once with identical content, kept once."""

    uid: str
    """The item's uid (``source:id``)."""
    count: int
    """How many identical rows were merged into the one kept."""
    where: tuple[str, ...]
    """``file:line`` of every copy, the kept one first."""


@dataclass
class LoadResult:
    """Memes that loaded, an error for every item that did not, and the duplicates merged."""

    memes: list[Meme] = field(default_factory=list)
    """Items that loaded (after filters), in file order."""
    errors: list[ItemError] = field(default_factory=list)
    """Malformed rows, conflicting duplicates, unknown ``ids`` and items whose image failed."""
    duplicates: list[Duplicate] = field(default_factory=list)
    """Identical rows found more than once (in one file or across files), each kept once."""


class _RowError(Exception):
    """A malformed row; becomes an ItemError (or a DataError with ``strict``) naming the line."""

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
    line: int = 0
    """Line of the row in its file (0: not from a numbered row, e.g. a folder image)."""

    def content(self) -> tuple[Any, ...]:
        """Everything that makes two rows with the same id the same item."""
        return (
            self.text,
            self.image,
            self.harmful,
            self.labels,
            self.annotations,
            self.extra_images,
        )


_ITEM_FIELDS = ("text", "image", "label", "labels", "annotations", "images")


def _differing(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    return ", ".join(n for n, x, y in zip(_ITEM_FIELDS, a, b, strict=True) if x != y)


class _Ctx:
    """One dataset being read: where rows come from, where images live, where errors go."""

    def __init__(self, cfg: DatasetConfig, file: Path, root: Path, source: str | None = None):
        self.cfg = cfg
        self.file = file
        self.root = root
        self.source = source or str(file)
        self.errors: list[ItemError] = []
        self.rows = 0
        """Non-blank rows seen, well-formed or not (0 means an empty dataset)."""

    def bad_row(self, line: int, message: str, field: str | None = None) -> None:
        """Record a malformed row (or raise it with ``strict``)."""
        where = f"field {field!r}: " if field else ""
        if self.cfg.strict:
            raise DataError(f"{self.file}:{line}: {where}{message}")
        self.errors.append(ItemError(str(self.file), f"line {line}", f"bad row: {where}{message}"))

    def parse(
        self, line: int, row: dict[str, Any], parser: Callable[[dict[str, Any]], _Item]
    ) -> _Item | None:
        """Run a row parser; a malformed row is raised or recorded, and None returned."""
        try:
            item = parser(row)
        except _RowError as e:
            self.bad_row(line, e.message, e.field)
            return None
        item.line = line
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
        # A BOM is accepted at the start of any line: concatenated files keep theirs.
        raw = raw.removeprefix("\ufeff")
        if not raw.strip():
            continue
        ctx.rows += 1
        try:
            row = loads_row(raw)
        except json.JSONDecodeError as e:
            ctx.bad_row(n, f"invalid JSON ({e.msg} at column {e.colno})")
            continue
        except JSONLimitError as e:
            ctx.bad_row(n, f"invalid JSON ({e})")
            continue
        if not isinstance(row, dict):
            ctx.bad_row(n, f"expected a JSON object, got {type(row).__name__}")
            continue
        yield n, row


def _json_array_rows(ctx: _Ctx, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    # A broken array cannot be resynchronised: always fatal, even without strict.
    for line, row in iter_json_array(text, str(ctx.file)):
        ctx.rows += 1
        if isinstance(row, dict):
            yield line, row
        else:
            ctx.bad_row(line, f"expected a JSON object, got {type(row).__name__}")


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
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise DataError(
            f"{path}:1: duplicated column(s) {', '.join(repr(c) for c in dup)}: "
            "which one holds the value is ambiguous"
        )
    missing = [c for c in required if c not in header]
    if missing:
        shown = ", ".join(repr(h[:40]) for h in header[:12]) + (", ..." if len(header) > 12 else "")
        hint = ""
        names = {"\t": "tab", ",": "comma"}
        other = {"\t": ",", ",": "\t"}.get(delimiter)
        if other is not None and len(header) == 1 and other in header[0]:
            hint = (
                f"; the file looks {names[other]}-separated, this format reads "
                f"{names[delimiter]}-separated columns"
            )
        raise DataError(
            f"{path}:1: missing column(s) {', '.join(repr(c) for c in missing)} "
            f"(header has {len(header)} column(s): {shown}){hint}"
        )

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        prev = reader.line_num
        while True:
            try:
                values = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                ctx.rows += 1
                ctx.bad_row(prev + 1, f"unreadable row ({e})")
                prev = reader.line_num
                continue
            line, prev = prev + 1, reader.line_num
            if not values or all(not v.strip() for v in values):
                continue
            ctx.rows += 1
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
                v = loads_row(s)
            except ValueError:
                raise _RowError(f"not a valid JSON list: {v[:60]!r}", name) from None
        else:
            return [p.strip() for p in s.split("|") if p.strip()]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise _RowError(f"must be a list of strings, got {v!r}", name)
    return [x.strip() for x in v]


# ---------------------------------------------------------------------------------------------
# Formats


FHM_ID_WIDTH = 5
"""FHM ids are numbers written with five digits in image names (``img/08291.png``)."""


def fhm_id(value: str | int) -> str:
    """Canonical FHM id: digits zero-padded to five, as the image is named (8291 -> "08291").

    The original release stores ``id`` as an integer, re-saved copies as a padded string; both
    must name the same meme. Non-numeric ids are kept as written.
    """
    s = str(value).strip()
    return s.zfill(FHM_ID_WIDTH) if s.isascii() and s.isdigit() else s


def _fhm_row(row: dict[str, Any]) -> _Item:
    label = row.get("label")
    harmful = None if label is None else _zero_one(label, "label")
    known = {"id", "img", "label", "text"}
    return _Item(
        id=fhm_id(_id(row)),
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


GENERIC_FIELDS = ("id", "image", "text", "label", "labels")
"""Fields of the generic jsonl/csv formats; ``fields`` in the dataset config renames them."""


def _field_names(cfg: DatasetConfig) -> dict[str, str]:
    """The file's name for each generic field (``fields`` in the config; default: the same)."""
    return {f: f for f in GENERIC_FIELDS} | {str(k): v for k, v in (cfg.fields or {}).items()}


def _generic_parser(names: dict[str, str]) -> Callable[[dict[str, Any]], _Item]:
    """Row parser of the generic formats; errors name the file's own field names."""

    def parse(row: dict[str, Any]) -> _Item:
        return _Item(
            id=_id(row, names["id"]),
            text=_str(row, names["text"]) or "",
            image=_path(row, names["image"]),
            harmful=_label(row.get(names["label"]), names["label"]),
            labels=_labels(row.get(names["labels"]), names["labels"]),
            annotations={k: v for k, v in row.items() if k not in names.values()},
        )

    return parse


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
    bad_captions = 0
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
        bad_captions = len(cap_ctx.errors)
    items = []
    for p in sorted(folder.iterdir(), key=lambda p: p.name):
        if p.suffix.lower() in IMAGE_EXTENSIONS and (p.is_file() or p.is_symlink()):
            item = captions.pop(p.name) if p.name in captions else None
            items.append(item or _Item(id=p.name, text="", image=p.name))
    # Captions naming an image that is not in the folder stay items: they fail the image check
    # (missing / escaping) and are reported instead of vanishing.
    items.extend(captions.values())
    ctx.rows += len(items) + bad_captions
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


def _canonical_id(cfg: DatasetConfig, value: str | int) -> str:
    """An id from the config (``ids``/``exclude``) in the form the format's loader produces."""
    return fhm_id(value) if cfg.format == "fhm" else str(value).strip()


def _read_items(cfg: DatasetConfig, ctx: _Ctx) -> list[_Item]:
    if cfg.format == "fhm":
        return _read_json_format(ctx, _fhm_row)
    if cfg.format == "harm":
        return _read_json_format(ctx, _harm_row)
    if cfg.format == "mami":
        # MAMI transcriptions contain stray quotes: no CSV quoting in its TSV.
        return _read_table_format(
            ctx, _mami_row, delimiter="\t", required=("file_name", _MAMI_TEXT), quoted=False
        )
    if cfg.format == "folder":
        return _read_folder(ctx)
    if cfg.format == "jsonl":
        return _read_json_format(ctx, _generic_parser(_field_names(cfg)))
    if cfg.format == "csv":
        names = _field_names(cfg)
        required = (names["id"], names["image"], names["text"])
        return _read_table_format(ctx, _generic_parser(names), delimiter=",", required=required)
    if cfg.format == "demo":
        return _read_json_format(ctx, _demo_row)
    raise DataError(f"unknown dataset format {cfg.format!r}")  # pragma: no cover - Literal


def _merge_items(ctx: _Ctx, items: list[_Item], source: str) -> tuple[list[_Item], list[Duplicate]]:
    """Merge identical rows sharing an id; drop and report ids whose rows disagree."""
    first: dict[str, _Item] = {}
    copies: dict[str, list[int]] = {}
    conflicts: dict[str, str] = {}
    for item in items:
        kept = first.setdefault(item.id, item)
        if kept is item:
            continue
        if item.content() == kept.content():
            copies.setdefault(item.id, [kept.line]).append(item.line)
        elif item.id not in conflicts:
            diff = _differing(kept.content(), item.content())
            conflicts[item.id] = (
                f"conflicting duplicate: lines {kept.line} and {item.line} differ in {diff}"
            )
    for item_id, reason in conflicts.items():
        if ctx.cfg.strict:
            raise DataError(f"{ctx.file}: id {item_id!r}: {reason}")
        ctx.errors.append(ItemError(ctx.source, item_id, reason))
    dups = [
        Duplicate(f"{source}:{i}", len(lines), tuple(f"{ctx.file}:{n}" for n in lines))
        for i, lines in copies.items()
        if i not in conflicts
    ]
    return [it for i, it in first.items() if i not in conflicts], dups


def load_dataset(
    cfg: DatasetConfig,
    image_cfg: ImageConfig | None = None,
    *,
    check_images: bool = True,
    image_store: Path | None = None,
    verified: VerifiedImages | None = None,
) -> LoadResult:
    """Load one dataset: parse rows, merge duplicates, apply filters, then check each image.

    Raises DataError for an unreadable or empty file, a broken header, or (with ``strict``) the
    first malformed row or conflicting duplicate. Every other problem is an :class:`ItemError`
    and the item is left out while the others load. With ``check_images=False`` paths are still
    confined to the dataset root but files are not opened; with ``verified`` (a run's record)
    an image verified before and unchanged since is not decoded again. An ``mm-judgebias``
    dataset is read by the Judge audit's own loader (its images always checked; embedded image
    bytes written to ``image_store``, by default a scratch folder removed at exit).
    """
    image_cfg = image_cfg or DEFAULT_IMAGE_CONFIG
    if cfg.format == "mm-judgebias":
        return _load_judgebias(cfg, image_cfg, image_store, check_images)
    file, root = _locate(cfg)
    ctx = _Ctx(cfg, file, root)
    parsed = _read_items(cfg, ctx)
    if ctx.rows == 0:
        what = "no images" if cfg.format == "folder" else "no rows"
        raise DataError(f"{file}: empty dataset ({what})")
    merged, duplicates = _merge_items(ctx, parsed, cfg.format)
    items = merged
    if cfg.ids is not None:
        wanted = {_canonical_id(cfg, i): None for i in cfg.ids}
        present = {it.id for it in items}
        for missing in (i for i in wanted if i not in present):
            ctx.errors.append(ItemError(ctx.source, missing, "unknown id: listed in 'ids'"))
        items = [it for it in items if it.id in wanted]
    if cfg.exclude:
        excluded = {_canonical_id(cfg, i) for i in cfg.exclude}
        items = [it for it in items if it.id not in excluded]
    selected = apply_filters(
        items,
        harmful_only=cfg.harmful_only,
        sample=cfg.sample,
        sample_seed=cfg.sample_seed,
        limit=cfg.limit,
    )
    if merged and not selected:
        active = [
            name
            for name, on in (
                ("ids", cfg.ids is not None),
                ("exclude", bool(cfg.exclude)),
                ("harmful_only", cfg.harmful_only),
            )
            if on
        ]
        raise DataError(
            f"{file}: no items left after filters ({', '.join(active) or 'none'}; "
            f"{len(merged)} well-formed items)"
        )
    split = cfg.split or ("demo" if cfg.format == "demo" and cfg.path is None else file.stem)
    if cfg.format == "folder":
        split = cfg.split or file.name
    if cfg.erased_dir is not None and not cfg.erased_dir.is_dir():
        raise DataError(f"{cfg.erased_dir}: erased_dir is not a folder")
    check: _Check | None = None
    if check_images:
        check = verify_image if verified is None else verified.verify
    memes: list[Meme] = []
    for item in selected:
        try:
            image = _resolve(root, item.image, image_cfg, check)
            annotations = dict(item.annotations)
            for key, rel in item.extra_images.items():
                extra = _resolve(root, rel, image_cfg, check)
                annotations[key] = None if extra is None else str(extra)
            erased = _erased_image(cfg, root, annotations.pop(ERASED_FIELD, None), image)
            if erased is not None and check is not None:
                check(erased, image_cfg)
        except ImageError as e:
            ctx.errors.append(ItemError(ctx.source, item.id, e.reason))
            continue
        except _RowError as e:
            where = f"field {e.field!r}: " if e.field else ""
            ctx.errors.append(ItemError(ctx.source, item.id, f"bad row: {where}{e.message}"))
            continue
        memes.append(
            Meme(
                id=item.id,
                source=cfg.format,
                text=item.text,
                image_path=image,
                erased_image=erased,
                harmful=item.harmful,
                labels=item.labels,
                split=split,
                annotations=annotations,
            )
        )
    return LoadResult(memes=memes, errors=ctx.errors, duplicates=duplicates)


ERASED_FIELD = "erased_image"
"""A row's field naming the meme's text-erased image (relative to the image root)."""


def _erased_image(
    cfg: DatasetConfig, root: Path, field_value: Any, image: Path | None
) -> Path | None:
    """The meme's text-erased image, in order: the row's ``erased_image`` field, the dataset's
    ``erased_dir`` (the image's name, or its stem + ``.png``), AdamMeme's layout
    (``.../erased/<name>`` beside ``.../ori/<name>``, inside the dataset root); else None."""
    if field_value is not None:
        if not isinstance(field_value, str) or not field_value.strip():
            raise _RowError(f"must be an image path, got {field_value!r}", ERASED_FIELD)
        return safe_join(root, field_value)
    if image is None:
        return None
    if cfg.erased_dir is not None:
        for name in dict.fromkeys((image.name, image.stem + ".png")):
            candidate = safe_join(cfg.erased_dir, name)
            if candidate.is_file():
                return candidate
        return None
    if image.parent.name == "ori":
        candidate = image.parent.parent / "erased" / image.name
        if candidate.is_file() and candidate.resolve().is_relative_to(root.resolve()):
            return candidate.resolve()
    return None


_SCRATCH: list[Path] = []


def _scratch_store() -> Path:
    """A process-wide folder for image bytes embedded in MM-JudgeBias rows (removed at exit),
    for callers that give no image folder of their own (`data check`, a dry run)."""
    if not _SCRATCH:
        import atexit
        import shutil
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="memearena-images-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _SCRATCH.append(path)
    return _SCRATCH[0]


def _load_judgebias(
    cfg: DatasetConfig, image_cfg: ImageConfig, image_store: Path | None, check_images: bool
) -> LoadResult:
    """MM-JudgeBias through the one loader the Judge audit uses (`load_mmjudgebias`), so
    `data check` accepts and refuses exactly the rows a run would; each row becomes a Meme
    (its unbiased query and image, the rest in annotations)."""
    from memearena.data.mmjudgebias import load_mmjudgebias  # imports this module

    file, _ = _locate(cfg)
    got = load_mmjudgebias(
        file,
        image_root=cfg.image_root,
        image_store=image_store or _scratch_store(),
        image_cfg=image_cfg,
        limit=cfg.limit,
        check_images=check_images,
    )
    if not got.rows and not got.errors:
        raise DataError(f"{file}: empty dataset (no rows)")
    if cfg.strict and got.errors:
        first = got.errors[0]
        raise DataError(f"{first.source}:{got.error_lines[0]}: {first.reason}")
    split = cfg.split or file.stem
    memes = []
    for row in got.rows:
        annotations: dict[str, Any] = {
            "bias_type": row.bias_type,
            **{k: row.meta.get(k) for k in ("bias_category", "task_type", "domain_type")},
            "difficulty": row.meta.get("difficulty"),
            "biased_instruction": row.biased_instruction or None,
            "response": row.response,
            **row.meta,
            "biased_image": None if row.biased_image is None else str(row.biased_image),
        }
        memes.append(
            Meme(
                id=row.id,
                source=cfg.format,
                text=row.unbiased_instruction,
                image_path=row.unbiased_image,
                split=split,
                annotations=annotations,
            )
        )
    if cfg.ids is not None:
        wanted = {_canonical_id(cfg, i) for i in cfg.ids}
        memes = [m for m in memes if m.id in wanted]
    if cfg.exclude:
        excluded = {_canonical_id(cfg, i) for i in cfg.exclude}
        memes = [m for m in memes if m.id not in excluded]
    return LoadResult(memes=memes, errors=list(got.errors))


def _resolve(
    root: Path, rel: str | None, image_cfg: ImageConfig, check: _Check | None
) -> Path | None:
    if rel is None:
        return None
    path = safe_join(root, rel)
    if check is not None:
        check(path, image_cfg)
    return path


def _meme_content(m: Meme) -> tuple[Any, ...]:
    # The split is where a copy was found, not what the item is: dev_seen and dev_unseen share
    # 400 identical rows.
    return (m.text, m.image_path, m.harmful, m.labels, m.annotations, m.erased_image)


def merge_results(results: Sequence[tuple[DatasetConfig, LoadResult]]) -> LoadResult:
    """Concatenate loaded datasets; an item in several of them is kept once if identical.

    Identical copies (same uid, text, image, labels, annotations) are merged and counted in
    ``duplicates``; copies that disagree are an :class:`ItemError` for that uid and no copy is
    kept (a DataError if either dataset is ``strict``).
    """
    out = LoadResult()
    kept: dict[str, tuple[int, Meme]] = {}
    merged: dict[str, list[str]] = {}
    conflicts: dict[str, ItemError] = {}
    for i, (cfg, result) in enumerate(results):
        out.errors.extend(result.errors)
        out.duplicates.extend(result.duplicates)
        name = str(cfg.path or "bundled demo")
        for meme in result.memes:
            prev = kept.setdefault(meme.uid, (i, meme))
            if prev[1] is meme or meme.uid in conflicts:
                continue
            first_cfg = results[prev[0]][0]
            first_name = str(first_cfg.path or "bundled demo")
            if _meme_content(meme) == _meme_content(prev[1]):
                merged.setdefault(meme.uid, [first_name]).append(name)
                continue
            diff = _differing(_meme_content(prev[1]), _meme_content(meme))
            reason = f"conflicting duplicate: {first_name} and {name} differ in {diff}"
            if cfg.strict or first_cfg.strict:
                raise DataError(f"item {meme.uid!r}: {reason}")
            conflicts[meme.uid] = ItemError(name, meme.id, reason)
    out.errors.extend(conflicts.values())
    out.memes = [m for i, m in kept.values() if m.uid not in conflicts]
    out.duplicates.extend(
        Duplicate(uid, len(where), tuple(where))
        for uid, where in merged.items()
        if uid not in conflicts
    )
    return out


def load_datasets(
    cfgs: Sequence[DatasetConfig],
    image_cfg: ImageConfig | None = None,
    *,
    check_images: bool = True,
    verified: VerifiedImages | None = None,
) -> LoadResult:
    """Load several datasets and merge them (see :func:`merge_results`). ``verified``: images
    verified before (a run's record), not decoded again while unchanged."""
    return merge_results(
        [
            (c, load_dataset(c, image_cfg, check_images=check_images, verified=verified))
            for c in cfgs
        ]
    )
