"""MM-JudgeBias as published: the Hugging Face dataset's parquet files and its ``datasets`` JSON
export.

A row holds ``id``, ``bias_type``, ``bias_category``, ``task_type``, ``domain_type``,
``difficulty``, ``unbiased_source``, ``biased_source``, ``response``, ``unbiased_instruction``,
``biased_instruction``, ``unbiased_image`` and ``biased_image``. An image cell is a
``{"bytes", "path"}`` object (bytes raw in parquet, base64 text in a JSON export), a plain path,
or null: a licence-gated image the user rebuilds locally as ``images/{id:04d}_{role}.jpg``.

Threats guarded against: image bytes are untrusted (decoded only by the safe image checks, under
the pixel cap, and stored by content hash so a name can never escape the image folder); paths in
cells stay inside the dataset root. A row with an unknown bias type, or a null image where the
bias type needs one and no rebuilt file exists, is an error for that item only (recorded, never
silently dropped); a file that cannot be read at all is a DataError naming it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memearena.config import ImageConfig
from memearena.data._json import iter_json_array
from memearena.data.images import ImageError, safe_join, verify_image
from memearena.data.meme import ItemError
from memearena.errors import DataError
from memearena.jsonsafe import jsonl_lines, loads_bounded
from memearena.stats.judge_bias import BIAS_TYPES

__all__ = [
    "IMAGE_ROLES",
    "JudgeBiasLoad",
    "JudgeBiasRow",
    "iter_rows",
    "load_mmjudgebias",
]

IMAGE_ROLES: dict[str, tuple[bool, bool]] = {
    "text_dominance": (True, False),
    "image_dominance": (True, True),
    "response_dominance": (True, False),
    "instruction_misalignment": (True, True),
    "image_misalignment": (True, True),
    "detail_description": (True, True),
    "unnecessary_image": (False, True),
    "visual_transformation": (True, True),
    "texture_insertion": (True, True),
}
"""Bias type → whether its (unbiased, biased) triplet carries an image."""


@dataclass(frozen=True)
class JudgeBiasRow:
    """One MM-JudgeBias pair, with its images as files inside the image folder."""

    id: str
    """The row's ``id``."""
    bias_type: str
    """One of the nine bias types."""
    response: str
    """The response both triplets share."""
    unbiased_instruction: str
    """The query of the unbiased triplet."""
    biased_instruction: str
    """The query of the perturbed triplet (empty when the bias type removes it)."""
    unbiased_image: Path | None
    """Image of the unbiased triplet (None: text-only)."""
    biased_image: Path | None
    """Image of the perturbed triplet (None: removed)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Other fields (category, task type, domain, difficulty, sources)."""


@dataclass
class JudgeBiasLoad:
    """Rows that loaded, and an error for every row that did not."""

    rows: list[JudgeBiasRow] = field(default_factory=list)
    """Usable rows, in file order."""
    errors: list[ItemError] = field(default_factory=list)
    """One per unusable row (its id, or ``line N`` / ``row N``), with the reason."""
    error_lines: list[int] = field(default_factory=list)
    """The line (JSON) or row (parquet) of each error, in the same order."""


def _parquet_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.parquet") if p.is_file())
        if not files:
            raise DataError(f"{path}: no .parquet files in this folder")
        return files
    return [path]


def _iter_parquet(path: Path) -> Iterator[tuple[str, int, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(
            f"{path}: reading parquet needs pyarrow: pip install 'memearena[parquet]'"
        ) from None
    for file in _parquet_files(path):
        try:
            pf = pq.ParquetFile(file)
            n = 0
            # Streamed in small batches: memory follows the batch, not the dataset.
            for batch in pf.iter_batches(batch_size=64):
                for row in batch.to_pylist():
                    n += 1
                    yield str(file), n, row
        except (OSError, ValueError) as e:
            raise DataError(f"{file}: cannot read parquet ({e})") from None


class BadLine:
    """A line of a JSON-lines export that is not a JSON value within the bounds: an error for
    that row only."""

    def __init__(self, message: str) -> None:
        self.message = message


_ROW_MAX_BYTES = 64 * 1024 * 1024
"""Largest JSON row: a row of the JSON export embeds its two images as base64."""


def _iter_json(path: Path) -> Iterator[tuple[str, int, Any]]:
    # Bounded parsing (depth, number length, size) and a BOM accepted, as in every loader.
    try:
        with path.open("rb") as f:
            head = f.read(4096).decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    # An export is one array of row objects; a JSONL file whose first line is an array (or
    # nests 100,000 deep) is a file of rows with a bad first row.
    if re.match(r"\[\s*(?:[{\]]|$)", head):
        yield from _iter_json_array(path)
        return
    for n, text in jsonl_lines(path):
        row: Any
        try:
            row = loads_bounded(text, max_bytes=_ROW_MAX_BYTES)
        except json.JSONDecodeError as e:
            row = BadLine(f"invalid JSON ({e.msg} at column {e.colno})")
        except ValueError as e:
            row = BadLine(f"invalid JSON ({e})")
        yield str(path), n, row


def _iter_json_array(path: Path) -> Iterator[tuple[str, int, Any]]:
    """Elements of a file holding one JSON array; a broken array cannot be resynchronised, so
    its first error is a DataError naming the line."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None

    for line, row in iter_json_array(text, str(path)):
        yield str(path), line, row


def iter_rows(path: Path) -> Iterator[tuple[str, int, Any]]:
    """``(file, row number, raw row)`` of a parquet file or folder, or a JSON / JSON-lines
    export (streamed)."""
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if path.is_dir() or path.suffix.lower() == ".parquet":
        return _iter_parquet(path)
    return _iter_json(path)


class _RowProblem(Exception):
    """A problem with one row; ``kind`` starts the recorded reason."""

    def __init__(self, message: str, kind: str = "malformed row") -> None:
        super().__init__(message)
        self.kind = kind


def _text(row: dict[str, Any], name: str, *, required: bool = True) -> str:
    v = row.get(name)
    if v is None:
        if required:
            raise _RowProblem(f"field {name!r}: missing")
        return ""
    if not isinstance(v, str):
        raise _RowProblem(f"field {name!r}: must be text, got {type(v).__name__}")
    return v


def _decode_bytes(raw: Any, name: str) -> bytes:
    if isinstance(raw, bytes | bytearray):
        return bytes(raw)
    if isinstance(raw, str):
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise _RowProblem(f"field {name!r}: bytes are not base64") from None
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw)
    raise _RowProblem(f"field {name!r}: unsupported bytes type {type(raw).__name__}")


class _Images:
    """Writes image bytes into a content-addressed folder (first write wins, atomically)."""

    def __init__(
        self, root: Path, store: Path | None, image_cfg: ImageConfig | None, check: bool = True
    ) -> None:
        self.root = root
        self.store = store
        self.image_cfg = image_cfg
        self.check = check

    def from_bytes(self, data: bytes, name: str) -> Path:
        if not data:
            raise _RowProblem(f"field {name!r}: empty image bytes")
        if self.store is None:
            raise _RowProblem(f"field {name!r}: image bytes given but no image folder to write to")
        self.store.mkdir(parents=True, exist_ok=True)
        target = self.store / f"{hashlib.sha256(data).hexdigest()}.img"
        if not target.exists():
            fd, tmp = tempfile.mkstemp(dir=self.store, prefix=".img.")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        return target

    def resolve(self, cell: Any, name: str, row_id: str, role: str, needed: bool) -> Path | None:
        path: Path | None = None
        if isinstance(cell, dict):
            raw = cell.get("bytes")
            if raw:
                path = self.from_bytes(_decode_bytes(raw, name), name)
            elif cell.get("path"):
                path = self._rel(str(cell["path"]), name)
        elif isinstance(cell, str):
            path = self._rel(cell, name) if cell.strip() else None  # blank: null
        elif cell is not None:
            raise _RowProblem(f"field {name!r}: unsupported image cell {type(cell).__name__}")
        if path is None:
            if not needed:
                return None
            path = self._rebuilt(row_id, role)
            if path is None:
                raise _RowProblem(
                    f"field {name!r}: null image (licence-gated); rebuild it as "
                    f"images/{_padded(row_id)}_{role}.jpg under {self.root}",
                    "missing image",
                )
        if not self.check:
            return path
        try:
            verify_image(path, self.image_cfg)
        except ImageError as e:
            raise _RowProblem(f"field {name!r}: {e.reason}", e.kind) from None
        return path

    def _rel(self, rel: str, name: str) -> Path:
        try:
            return safe_join(self.root, rel)
        except ImageError as e:
            raise _RowProblem(f"field {name!r}: {e.reason}", e.kind) from None

    def _rebuilt(self, row_id: str, role: str) -> Path | None:
        # The id is dataset content: the name built from it goes through the safe join, so
        # an id of "../../x" or "/etc/x" can never name a file outside the dataset root.
        stem = _padded(row_id)
        if not _SAFE_STEM.fullmatch(stem):
            raise _RowProblem(
                f"field 'id': {_shown(row_id)} cannot name a rebuilt image "
                "(letters, digits, '.', '_' and '-' only)",
                "missing image",
            )
        for cand in (f"{stem}_{role}.jpg", f"{stem}.jpg"):
            try:
                p = safe_join(self.root, f"images/{cand}")
            except DataError:
                continue
            if p.is_file():
                return p
        return None


_SAFE_STEM = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
"""A rebuilt image's name stem: no separator, no leading dot, bounded."""


def _padded(row_id: str) -> str:
    """``7`` -> ``0007`` (the published names); other ids as they are. Only ASCII digits count
    ("²".isdigit() is true but int() refuses it), and only a short run of them (int() refuses
    thousands of digits)."""
    if row_id.isascii() and row_id.isdigit() and len(row_id) <= 18:
        return f"{int(row_id):04d}"
    return row_id


def _shown(text: str, limit: int = 60) -> str:
    """An untrusted value for a message, cut to `limit` characters."""
    r = repr(text)
    return r if len(r) <= limit else f"{r[:limit]}… ({len(text):,} characters)"


def load_mmjudgebias(
    path: str | Path,
    *,
    image_root: Path | None = None,
    image_store: Path | None = None,
    image_cfg: ImageConfig | None = None,
    bias_types: list[str] | None = None,
    limit: int | None = None,
    check_images: bool = True,
) -> JudgeBiasLoad:
    """Load MM-JudgeBias rows from a parquet file or folder, or a ``datasets`` JSON export.

    ``image_root`` is where cell paths and rebuilt ``images/{id:04d}_{role}.jpg`` files live
    (default: the file's folder); embedded image bytes are written to ``image_store`` by content
    hash. ``bias_types`` keeps only those types; ``limit`` caps rows per type (the first ones).
    With ``check_images=False`` image paths are still confined to the root but not opened."""
    path = Path(path)
    root = image_root or (path if path.is_dir() else path.parent)
    images = _Images(root, image_store, image_cfg, check_images)
    out = JudgeBiasLoad()
    per_type: dict[str, int] = {}
    for file, n, row in iter_rows(path):
        where = f"row {n}" if file.endswith(".parquet") else f"line {n}"
        if isinstance(row, BadLine):
            out.errors.append(ItemError(file, where, f"malformed row: {where}: {row.message}"))
            out.error_lines.append(n)
            continue
        if not isinstance(row, dict):
            out.errors.append(ItemError(file, where, "malformed row: expected an object"))
            out.error_lines.append(n)
            continue
        raw_id = row.get("id")
        ok_id = isinstance(raw_id, int | str) and not isinstance(raw_id, bool)
        row_id = str(raw_id) if ok_id and str(raw_id).strip() else None
        item = row_id or where
        try:
            if row_id is None:
                if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
                    raise _RowProblem("field 'id': missing")
                raise _RowProblem(
                    f"field 'id': must be text or an integer, got {type(raw_id).__name__}"
                )
            bias_type = _text(row, "bias_type")
            if bias_type not in BIAS_TYPES:
                raise _RowProblem(
                    f"field 'bias_type': {_shown(bias_type)}; "
                    f"expected one of {', '.join(BIAS_TYPES)}",
                    "unknown bias type",
                )
            if bias_types is not None and bias_type not in bias_types:
                continue
            if limit is not None and per_type.get(bias_type, 0) >= limit:
                continue
            need_u, need_b = IMAGE_ROLES[bias_type]
            rec = JudgeBiasRow(
                id=row_id,
                bias_type=bias_type,
                response=_text(row, "response"),
                unbiased_instruction=_text(row, "unbiased_instruction"),
                biased_instruction=_text(row, "biased_instruction", required=False),
                unbiased_image=images.resolve(
                    row.get("unbiased_image"), "unbiased_image", row_id, "unbiased", need_u
                ),
                biased_image=images.resolve(
                    row.get("biased_image"), "biased_image", row_id, "biased", need_b
                ),
                meta={
                    k: row.get(k)
                    for k in (
                        "bias_category",
                        "task_type",
                        "domain_type",
                        "difficulty",
                        "unbiased_source",
                        "biased_source",
                    )
                    if isinstance(row.get(k), str | int | float)
                },
            )
        except _RowProblem as e:
            out.errors.append(ItemError(file, item, f"{e.kind}: {where}: {e}"))
            out.error_lines.append(n)
            continue
        per_type[bias_type] = per_type.get(bias_type, 0) + 1
        out.rows.append(rec)
    return out


# ---- MM-JudgeBias's judgement files (its judge's outputs) -------------------------------------

_SCORE_MARK = "### Score:"
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_RECORD_BYTES = 64 << 20
"""The largest per-sample judgement file read (a judge's two replies and the sample's meta)."""


def reference_score(text: Any) -> float | None:
    """A score read from a judge's reply the way MM-JudgeBias's ``extract_score`` reads it
    (rewritten from its documented behaviour): the whole reply if it is one number; else the
    first number after the last ``### Score:``; else the last number anywhere in the reply;
    None when there is none. Signs are not read (``-3`` is 3) and nothing is clamped to the
    scale, as in the reference; a non-finite reply (``nan``) is no number here."""
    if not isinstance(text, str):
        return None
    s = text.strip()
    try:
        v = float(s)
    except ValueError:
        pass
    else:
        if v == v and abs(v) != float("inf"):
            return v
    if _SCORE_MARK in s:
        found = _NUMBER.findall(s.split(_SCORE_MARK)[-1])
        if found:
            return float(found[0])
    found = _NUMBER.findall(s)
    return float(found[-1]) if found else None


@dataclass
class ScoreReading:
    """How the scores of one file were read: the rule and what it counted."""

    reference: bool
    """True: MM-JudgeBias's reading (a score given as a string is converted, a null score is
    read from the reply text by its last-number fallback, nothing is clamped); False: a score
    must be a number in 1–S or null (unparsed)."""
    scale: float = 10
    """Top of the score scale (S)."""
    counts: dict[str, int] = field(
        default_factory=lambda: {"from_string": 0, "from_text": 0, "out_of_range": 0}
    )
    """Scores converted from a string, read from the reply text, and outside 1–S (kept only
    with the reference's reading)."""

    def score(self, holder: dict[str, Any], name: str, text_key: str | None = None) -> float | None:
        """``holder[name]`` as a score (None: unparsed); ValueError naming the field when it
        cannot be one under this reading."""
        if name not in holder and (text_key is None or text_key not in holder):
            raise ValueError(f"field {name!r}: missing")
        v = holder.get(name)
        if v is None:
            if self.reference and text_key is not None:
                got = reference_score(holder.get(text_key))
                if got is not None:
                    self.counts["from_text"] += 1
                    return self._ranged(got, name)
            return None  # unparsed: kept, excluded by the table and counted, never a number
        if isinstance(v, str) and self.reference:
            try:
                number = float(v)
            except ValueError:
                raise ValueError(f"field {name!r}: not a number ({_shown(v)})") from None
            if number != number or abs(number) == float("inf"):
                raise ValueError(f"field {name!r}: not a finite number ({_shown(v)})")
            self.counts["from_string"] += 1
            return self._ranged(number, name)
        if (
            isinstance(v, bool)
            or not isinstance(v, int | float)
            or v != v
            or abs(v) == float("inf")
        ):
            hint = (
                " (--reference-parsing reads it as MM-JudgeBias does)" if isinstance(v, str) else ""
            )
            raise ValueError(
                f"field {name!r}: must be a number or null, got {_shown(repr(v))}{hint}"
            )
        return self._ranged(float(v), name)

    def _ranged(self, v: float, name: str) -> float:
        if 1 <= v <= self.scale:
            return v
        if not self.reference:
            raise ValueError(
                f"field {name!r}: {v:g} is outside 1-{self.scale:g} (--reference-parsing keeps "
                "it unclamped, as MM-JudgeBias does)"
            )
        self.counts["out_of_range"] += 1
        return v


@dataclass
class JudgementFiles:
    """Scored pairs from MM-JudgeBias's per-sample judgement files."""

    pairs: list[tuple[str, str, float | None, float | None]] = field(default_factory=list)
    """(item, bias type, unbiased score, biased score) of the chosen judge."""
    excluded: list[tuple[str, str]] = field(default_factory=list)
    """(file, reason) of every record left out."""
    judges: list[str] = field(default_factory=list)
    """Every judge (model key) the files hold."""


def judgement_files(path: Path) -> list[Path]:
    """The per-sample files of a ``judgements/seed_N/`` folder (sorted, as the reference reads
    them), or the one file given. A ``judgements/`` folder of seed folders is a DataError
    naming them: the seeds are separate runs, and one must be chosen."""
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.glob("*.json") if p.is_file())
    if not files:
        seeds = sorted(p.name for p in path.iterdir() if p.is_dir() and p.name.startswith("seed_"))
        if seeds:
            raise DataError(
                f"{path}: holds seed folders ({', '.join(seeds[:5])}); give one of them "
                "(each seed is a separate judge run)"
            )
        raise DataError(f"{path}: no *.json judgement files in this folder")
    return files


def load_judgements(path: Path, reading: ScoreReading, *, judge: str | None) -> JudgementFiles:
    """MM-JudgeBias's judgement records — ``{"meta": {"id", "bias_type", ...}, "judgement":
    {model_key: {"unbiased", "unbiased_score", "biased", "biased_score"}}}``, one per file in a
    ``judgements/seed_N/`` folder, or one file — as scored pairs of ``judge`` (a model key;
    needed when the files hold several). A record that cannot be read or scored is excluded
    with its file and reason, never dropped silently (the reference skips an unknown bias type
    without a word); an unreadable folder is a DataError."""
    out = JudgementFiles()
    seen: set[str] = set()
    records: list[tuple[str, dict[str, Any]]] = []
    for f in judgement_files(path):
        name = f.name if path.is_dir() else str(f)
        try:
            raw = f.read_bytes()
        except OSError as e:
            raise DataError(f"{f}: cannot read ({e.strerror or e})") from None
        try:
            rec = loads_bounded(raw.decode("utf-8-sig"), max_bytes=_RECORD_BYTES)
        except UnicodeDecodeError:
            out.excluded.append((name, "not valid UTF-8"))
            continue
        except ValueError as e:
            out.excluded.append((name, f"invalid JSON ({e})"))
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("judgement"), dict):
            out.excluded.append((name, "expected a record with 'meta' and 'judgement' objects"))
            continue
        seen.update(str(k) for k in rec["judgement"])
        records.append((name, rec))
    out.judges = sorted(seen)
    if judge is None and len(seen) > 1:
        raise DataError(
            f"{path}: the records hold several judges ({', '.join(out.judges[:5])}); "
            "choose one with --judge"
        )
    if judge is not None and judge not in seen:
        raise DataError(f"{path}: no judgement by {judge!r} (judges: {', '.join(out.judges[:5])})")
    key = judge if judge is not None else (out.judges[0] if out.judges else None)
    for name, rec in records:
        given_meta = rec.get("meta")
        meta: dict[str, Any] = given_meta if isinstance(given_meta, dict) else {}
        bias_type = meta.get("bias_type")
        if not isinstance(bias_type, str) or bias_type not in BIAS_TYPES:
            out.excluded.append(
                (name, f"meta.bias_type: unknown bias type {_shown(repr(bias_type))}")
            )
            continue
        given = rec["judgement"].get(key)
        if not isinstance(given, dict):
            out.excluded.append((name, f"no judgement by {key!r}"))
            continue
        item = meta.get("id")
        item_id = str(item) if isinstance(item, str | int) and not isinstance(item, bool) else ""
        item_id = item_id.strip() or Path(name).stem
        try:
            u = reading.score(given, "unbiased_score", "unbiased")
            b = reading.score(given, "biased_score", "biased")
        except ValueError as e:
            out.excluded.append((name, f"judgement.{key}.{e}"))
            continue
        out.pairs.append((item_id, bias_type, u, b))
    return out
