"""Pairwise battles in the Chatbot Arena format, and their JSONL / JSON-array readers.

Two readers share one definition of a valid battle line:

* `read_battle_table` reads a file straight into integer columns (`BattleTable`), the form
  every rating is computed from. A fast path decodes whole chunks of lines with msgspec's typed
  decoder; any chunk it cannot vouch for (a decode or type error, a line that may break a
  bound, a byte-order mark inside the file) is re-read line by line by the exact path, which
  names the line and field of the first problem. Both paths accept exactly the same lines.
* `load_battles` / `parse_battles` give one `Battle` object per line (handy in a notebook,
  heavy at arena scale), read by the exact path.

A battle file is untrusted text: every line is parsed with the same bounds as dataset rows
(nesting depth, number length, no NaN/Infinity), so a hostile line is a one-line error, never a
traceback. A UTF-8 byte-order mark is accepted at the start of the file and of any line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import re
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import msgspec
import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, model_validator

from memearena.errors import DataError

if TYPE_CHECKING:
    from memearena.stats.counts import PairCounts

Winner = Literal["model_a", "model_b", "tie", "tie (bothbad)"]
WINNERS: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")
_OPTIONAL_STR_FIELDS = ("judge", "criterion", "item")
_REQUIRED = ("model_a", "model_b", "winner")

MAX_DEPTH = 32
"""Deepest nesting of arrays/objects a battle line may have (as for dataset rows)."""
MAX_NUMBER_CHARS = 64
"""Longest number literal a battle line may hold (as for dataset rows)."""

_CHUNK_BYTES = 8 << 20  # lines decoded per fast-path batch: bounds memory, not the file size
_BOM = b"\xef\xbb\xbf"
_WINNER_CODE = {w: k for k, w in enumerate(WINNERS)}

Codes = NDArray[np.int32]


class Battle(BaseModel):
    """One pairwise comparison; unknown fields are kept (see `field`) for group-by."""

    model_config = ConfigDict(frozen=True, extra="allow")

    model_a: str
    """Name of the model whose response was labelled A."""
    model_b: str
    """Name of the model whose response was labelled B (never equal to `model_a`)."""
    winner: Winner
    """`model_a`, `model_b`, `tie` or `tie (bothbad)`; both ties count half a win each."""
    judge: str | None = None
    """Who decided the battle (an LLM judge, a human), if recorded."""
    criterion: str | None = None
    """The criterion the battle was judged on, if any."""
    item: str | None = None
    """The item (meme, task) both responses answer, if recorded."""

    @model_validator(mode="after")
    def _distinct_models(self) -> Battle:
        if self.model_a == self.model_b:
            raise ValueError(f"model_a and model_b are both {self.model_a!r}")
        return self

    @property
    def score_a(self) -> float:
        """Points scored by `model_a`: 1 for a win, 0.5 for any tie, 0 for a loss."""
        return 1.0 if self.winner == "model_a" else 0.0 if self.winner == "model_b" else 0.5

    def field(self, name: str) -> Any:
        """Value of a declared or extra field (None when the battle lacks it)."""
        if name in type(self).model_fields:
            return getattr(self, name)
        return (self.model_extra or {}).get(name)


class SkippedLine(NamedTuple):
    """A malformed line left out by `load_battles(..., skip_bad=True)`."""

    line: int
    reason: str


class LoadedBattles(NamedTuple):
    """What `load_battles` read: the valid battles and the lines it skipped."""

    battles: list[Battle]
    skipped: list[SkippedLine]


# --- the exact path: one line at a time, bounded, naming the first problem -----------------------


class _BoundError(ValueError):
    """A line outside the bounds (nesting depth, NaN/Infinity)."""


class _LongNumber:
    """A number literal past `MAX_NUMBER_CHARS` (or overflowing a float), kept unparsed.

    In a field the ranking never reads it is harmless and the line is accepted (as by the fast
    path, which skips such fields); in a field it reads it is an error naming that field.
    """

    __slots__ = ("length",)

    def __init__(self, text: str) -> None:
        self.length = len(text)

    def __repr__(self) -> str:
        return f"<number literal of {self.length} characters, out of range>"


def _parse_int(text: str) -> int | _LongNumber:
    return _LongNumber(text) if len(text) > MAX_NUMBER_CHARS else int(text)


def _parse_float(text: str) -> float | _LongNumber:
    if len(text) > MAX_NUMBER_CHARS:
        return _LongNumber(text)
    value = float(text)
    return value if math.isfinite(value) else _LongNumber(text)


def _parse_constant(text: str) -> Any:
    raise _BoundError(f"{text} is not valid JSON")


def _in_bounds(value: Any) -> bool:
    """No out-of-range number anywhere in `value` (decoded by either path)."""
    if isinstance(value, _LongNumber):
        return False
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return len(str(abs(value))) <= MAX_NUMBER_CHARS
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_in_bounds(v) for v in value.values())
    if isinstance(value, list):
        return all(_in_bounds(v) for v in value)
    return True


_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)


def _check_depth(value: Any) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _BoundError(f"nested more than {MAX_DEPTH} levels deep")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def _raw_decode(text: str, pos: int) -> tuple[Any, int]:
    """One bounded JSON value at `pos`: (value, end); JSONDecodeError or _BoundError."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise _BoundError(f"nested more than {MAX_DEPTH} levels deep") from None
    if isinstance(value, dict | list):
        _check_depth(value)
    return value, end


def _decode_line(raw: bytes) -> tuple[Any, str]:
    """Decode one JSONL line: (object, "") or (None, reason)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start + 1} of the line)"
    try:
        start = len(text) - len(text.lstrip())
        value, end = _raw_decode(text, start)
        if text[end:].strip():
            return None, f"invalid JSON: extra data after the object (column {end + 1})"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    except _BoundError as exc:
        return None, f"invalid JSON: {exc}"
    return value, ""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    # A regex, not a loop over characters: a 20 MB model name is scanned in milliseconds.
    return _SURROGATE.search(text) is not None


def _given(value: Any) -> str:
    """A refused field value as the battle file wrote it: text quoted, anything else as its
    JSON (``null``, ``["tie"]``), never a Python repr (``None``, ``['tie']``)."""
    if isinstance(value, str | _LongNumber):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=repr)


def _validate(obj: Any, fields: Sequence[str] = ()) -> tuple[dict[str, Any] | None, str]:
    """Check one decoded record: the record (item ids as text) or a reason naming the field.

    `fields` are extra fields the caller reads (group-by, clusters): their numbers must be in
    range, as everywhere the ranking reads.
    """
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    for name in _REQUIRED:
        if name not in obj:
            return None, f"field {name!r}: missing"
    for name in ("model_a", "model_b"):
        value = obj[name]
        if not isinstance(value, str) or not value.strip():
            return None, f"field {name!r}: must be a non-empty string; got {_given(value)}"
        # Model names reach terminals and reports: text that cannot be encoded is refused.
        if _has_surrogate(value):
            return None, f"field {name!r}: not valid Unicode text"
    if obj["winner"] not in WINNERS:
        return (
            None,
            f"field 'winner': must be one of {', '.join(WINNERS)}; got {_given(obj['winner'])}",
        )
    if obj["model_a"] == obj["model_b"]:
        return None, f"field 'model_b': must differ from model_a; both are {obj['model_a']!r}"
    clean = dict(obj)
    for name in _OPTIONAL_STR_FIELDS:
        value = clean.get(name)
        if value is None:
            continue
        # Item ids are often integers in datasets: accept them, keep them as text.
        if name == "item" and isinstance(value, int) and not isinstance(value, bool):
            clean[name] = str(value)
        elif not isinstance(value, str):
            return None, f"field {name!r}: must be a string or null; got {_given(value)}"
    for name in fields:
        if not _in_bounds(clean.get(name)):
            return None, f"field {name!r}: holds a number out of range"
    return clean, ""


def _array_records(text: str, source: str) -> Iterator[tuple[int, Any, str]]:
    """Yield (line, decoded element, "") for a JSON array, element by element."""
    stripped = text.lstrip()
    pos = len(text) - len(stripped) + 1
    line, counted = 1, 0  # line number at offset `counted`, advanced incrementally

    def line_at(offset: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, offset)
        counted = offset
        return line

    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == "]":
            if text[pos + 1 :].strip():
                raise DataError(f"{source}:{line_at(pos)}: invalid JSON: data after the array")
            return
        number = line_at(pos)
        try:
            obj, pos = _raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise DataError(f"{source}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        except _BoundError as exc:
            # The array cannot be resynchronised past an unbounded element: stop here.
            raise DataError(f"{source}:{number}: invalid JSON: {exc}") from None
        yield number, obj, ""
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "]":
            raise DataError(
                f"{source}:{line_at(pos)}: invalid JSON: expected ',' or ']' in the array"
            )


def _line_records(data: bytes, first_line: int) -> Iterator[tuple[int, Any, str]]:
    """Yield (line, decoded object or None, reason) for the non-blank lines of JSONL bytes."""
    for number, raw in enumerate(data.split(b"\n"), start=first_line):
        if raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        if not raw.strip():
            continue
        obj, reason = _decode_line(raw)
        yield number, obj, reason


def _is_array(data: bytes) -> bool:
    return data.lstrip(b" \t\r\n").startswith(b"[")


def _records(data: bytes, source: str) -> Iterator[tuple[int, Any, str]]:
    """Every record of a battle file (BOM already removed), exact path."""
    if not _is_array(data):
        yield from _line_records(data, 1)
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{source}:{line}: not UTF-8 text") from None
    yield from _array_records(text, source)


def parse_battles(
    text: str | bytes, *, source: str = "<battles>", skip_bad: bool = False
) -> LoadedBattles:
    """Parse battles from JSONL or JSON-array text; `source` names it in error messages."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    data = data.removeprefix(_BOM)
    battles: list[Battle] = []
    skipped: list[SkippedLine] = []
    for number, obj, error in _records(data, source):
        record, reason = (None, error) if error else _validate(obj)
        if record is not None:
            battles.append(Battle.model_validate(record))
        elif skip_bad:
            skipped.append(SkippedLine(number, reason))
        else:
            raise DataError(f"{source}:{number}: {reason}")
    return LoadedBattles(battles, skipped)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a battle file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None


def load_battles(path: str | Path, *, skip_bad: bool = False) -> LoadedBattles:
    """Read a battle file (JSONL, or one JSON array) in the Chatbot Arena format.

    A malformed record raises `DataError` naming file, line and field; with `skip_bad` it is
    left out and listed in `.skipped` instead (never dropped silently).
    """
    path = Path(path)
    return parse_battles(_read_bytes(path), source=str(path), skip_bad=skip_bad)


# --- the columnar form -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FieldColumn:
    """One battle field, dictionary-encoded: battle k's value is `labels[codes[k]]`."""

    labels: tuple[str | None, ...]
    """Distinct values as text (`str(value)`); None stands for a missing or null value."""
    codes: Codes
    """Index into `labels`, one per battle."""
    present: bool
    """Whether any line of the file carries the field at all (even as null)."""


@dataclass(frozen=True, eq=False)
class BattleTable:
    """Battles as integer columns, in file order: what every rating here is computed from."""

    models: tuple[str, ...]
    """Model names, sorted; `model_a` and `model_b` index into it."""
    model_a: Codes
    model_b: Codes
    outcome: NDArray[np.int8]
    """Index into `WINNERS`: 0 model_a won, 1 model_b won, 2 tie, 3 tie (bothbad)."""
    fields: dict[str, FieldColumn] = field(default_factory=dict)
    """Columns of the extra fields asked for when reading (group-by, clusters)."""
    skipped: tuple[SkippedLine, ...] = ()
    """Malformed lines left out with `skip_bad`."""

    def __len__(self) -> int:
        return len(self.outcome)

    @property
    def score_a(self) -> NDArray[np.float64]:
        """Points scored by model_a in each battle: 1, 0 or 0.5 for either tie."""
        return np.array([1.0, 0.0, 0.5, 0.5])[self.outcome]

    def counts(self) -> PairCounts:
        """Aggregated outcome counts over `models` (one pass, no per-battle objects)."""
        from memearena.stats.counts import PairCounts  # counts.py imports this module

        m = len(self.models)
        # One count per (model_a, model_b, kind): kind 0 model_a won, 1 model_b won, 2 a tie.
        key = (self.model_a.astype(np.int64) * m + self.model_b) * 3 + np.minimum(self.outcome, 2)
        cells = np.bincount(key, minlength=3 * m * m).reshape(m, m, 3).astype(np.float64)
        ties = cells[:, :, 2]
        return PairCounts.from_arrays(self.models, cells[:, :, 0] + cells[:, :, 1].T, ties + ties.T)

    def take(self, rows: NDArray[np.intp]) -> BattleTable:
        """The battles at `rows` (in that order); `models` shrinks to those still present."""
        a, b = self.model_a[rows], self.model_b[rows]
        used = np.unique(np.concatenate([a, b]))
        remap = np.full(len(self.models), -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        columns = {
            name: FieldColumn(col.labels, col.codes[rows], col.present)
            for name, col in self.fields.items()
        }
        return BattleTable(
            models=tuple(self.models[k] for k in used),
            model_a=remap[a],
            model_b=remap[b],
            outcome=self.outcome[rows],
            fields=columns,
            skipped=(),
        )

    def group_by(self, name: str) -> dict[str | None, BattleTable]:
        """One table per value of field `name` (None: missing or null), sorted by value text."""
        column = self.fields[name]
        order = np.argsort(column.codes, kind="stable")  # stable: file order within a group
        codes = column.codes[order]
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else ()
        bounds = [*(int(s) for s in starts), len(codes)]
        groups = {column.labels[codes[lo]]: self.take(order[lo:hi]) for lo, hi in pairwise(bounds)}
        return dict(sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or "")))

    def battles(self) -> Iterator[Battle]:
        """The battles as `Battle` objects (only the extra fields read into the table)."""
        for k in range(len(self)):
            extra = {name: col.labels[col.codes[k]] for name, col in self.fields.items()}
            yield Battle.model_validate(
                {
                    **extra,
                    "model_a": self.models[self.model_a[k]],
                    "model_b": self.models[self.model_b[k]],
                    "winner": WINNERS[self.outcome[k]],
                }
            )


def _label(value: Any) -> str | None:
    """The group key text of a field value, the same on both paths: text as it is, any other
    value as its JSON (``true``, ``{"k": 1}``), as the battle file wrote it."""
    if value is None or value is msgspec.UNSET:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


class _Builder:
    """Accumulates codes chunk by chunk; names are coded in order of first appearance."""

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = tuple(fields)
        self.index: dict[str, int] = {}
        self.a: list[Codes] = []
        self.b: list[Codes] = []
        self.outcome: list[NDArray[np.int8]] = []
        self.labels: list[dict[str | None, int]] = [{} for _ in self.fields]
        self.field_codes: list[list[Codes]] = [[] for _ in self.fields]
        self.present = [False] * len(self.fields)
        self.skipped: list[SkippedLine] = []

    def add_record(self, record: dict[str, Any]) -> None:
        """Add one validated record (exact path)."""
        for name in (record["model_a"], record["model_b"]):
            self.index.setdefault(name, len(self.index))
        self.a.append(np.array([self.index[record["model_a"]]], np.int32))
        self.b.append(np.array([self.index[record["model_b"]]], np.int32))
        self.outcome.append(np.array([_WINNER_CODE[record["winner"]]], np.int8))
        for f, name in enumerate(self.fields):
            self.present[f] |= name in record
            text = _label(record.get(name))
            table = self.labels[f]
            self.field_codes[f].append(np.array([table.setdefault(text, len(table))], np.int32))

    def table(self) -> BattleTable:
        a = np.concatenate(self.a) if self.a else np.zeros(0, np.int32)
        b = np.concatenate(self.b) if self.b else np.zeros(0, np.int32)
        outcome = np.concatenate(self.outcome) if self.outcome else np.zeros(0, np.int8)
        # Sorted names; a name seen only on a line that was then refused has no battle: dropped.
        first_seen = list(self.index)
        met = np.bincount(a, minlength=len(first_seen)) + np.bincount(b, minlength=len(first_seen))
        used = np.flatnonzero(met)
        names = sorted(first_seen[k] for k in used)
        remap = np.full(len(first_seen), -1, dtype=np.int32)
        for new, name in enumerate(names):
            remap[self.index[name]] = new
        columns = {}
        for f, name in enumerate(self.fields):
            parts = self.field_codes[f]
            codes = np.concatenate(parts) if parts else np.zeros(0, np.int32)
            labels = tuple(self.labels[f])  # insertion order = code order
            columns[name] = FieldColumn(labels, codes, self.present[f])
        return BattleTable(
            models=tuple(names),
            model_a=remap[a],
            model_b=remap[b],
            outcome=outcome,
            fields=columns,
            skipped=tuple(self.skipped),
        )


def _fast_spec(
    fields: Sequence[str],
) -> tuple[list[tuple[str, Any, Any]], dict[str, str], list[str]]:
    """The fast decoder's fields, with the declared types of the exact path plus the asked-for
    fields: (spec, renames, attributes of the asked-for fields)."""
    spec: list[tuple[str, Any, Any]] = [
        ("model_a", str, msgspec.NODEFAULT),
        ("model_b", str, msgspec.NODEFAULT),
        ("winner", Winner, msgspec.NODEFAULT),
    ]
    rename = {}
    attrs = []
    for k, name in enumerate(fields):
        if name in _REQUIRED:
            attrs.append(name)
            continue
        attr = f"f{k}"
        rename[attr] = name
        attrs.append(attr)
        kind: Any = Any
        if name in ("judge", "criterion"):
            kind = str | None | msgspec.UnsetType
        elif name == "item":
            kind = str | int | None | msgspec.UnsetType
        spec.append((attr, kind, msgspec.UNSET))
    for name in _OPTIONAL_STR_FIELDS:
        if name not in fields:  # still type-checked, as on the exact path
            kind = str | int | None if name == "item" else str | None
            spec.append((f"x_{name}", kind, None))
            rename[f"x_{name}"] = name
    return spec, rename, attrs


def _fast_struct(fields: Sequence[str]) -> tuple[type, list[str]]:
    """A typed decoder with the declared types of the exact path, plus the asked-for fields."""
    spec, rename, attrs = _fast_spec(fields)
    return msgspec.defstruct("BattleLine", spec, rename=rename, gc=False), attrs


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _too_deep(chunk: bytes | memoryview, rows: int, array: bool, bracketless: bool = False) -> bool:
    """Conservative depth check: flat lines are fine; otherwise count brackets per line.
    `bracketless`: the caller knows the chunk holds no "[" (a memoryview chunk always does)."""
    # One "{" a line and no "[": nothing nested. The braces are counted by numpy (a vectorised
    # compare), a few times faster than bytes.count on a chunk of megabytes.
    flat = bracketless or b"[" not in chunk
    if flat and np.count_nonzero(np.frombuffer(chunk, np.uint8) == 123) == rows:
        return False
    if array:
        return True  # nested elements: the exact path decides
    lines = bytes(chunk).split(b"\n")
    return any(line.count(b"{") + line.count(b"[") > MAX_DEPTH for line in lines)


_MAX_NAMED = 4096  # most model names typed into the fast decoder
_MAX_MISSES = 8  # chunks meeting a new name before the typed decoder is given up


class _FastDecoders:
    """The fast path's decoders of one file: model names typed as the names already met (each
    decoded to that very string: no string made per line, and a cached hash to code it), and
    names typed as any string, for a chunk that meets a new name. Both accept exactly the same
    lines wherever the first succeeds: it only narrows a type the checks after it read."""

    def __init__(self, fields: Sequence[str]) -> None:
        self.spec, self.rename, self.attrs = _fast_spec(fields)
        self.plain: msgspec.json.Decoder[Any] = msgspec.json.Decoder(self._struct(str))
        self.named: msgspec.json.Decoder[Any] | None = None
        self.names = 0
        self.misses = 0

    def _struct(self, name_type: Any) -> type:
        spec = [(n, name_type if n in ("model_a", "model_b") else t, d) for n, t, d in self.spec]
        return msgspec.defstruct("BattleLine", spec, rename=self.rename, gc=False)

    def decode(self, chunk: bytes | memoryview) -> tuple[list[Any], bool] | None:
        """(rows, whether every name is already known), or None when msgspec refuses it."""
        if self.named is not None and self.misses < _MAX_MISSES:
            try:
                return self.named.decode_lines(chunk), True
            except msgspec.ValidationError:  # a new name (or a bad line): decoded again below
                self.misses += 1
            except (msgspec.DecodeError, RecursionError):
                return None
        try:
            return self.plain.decode_lines(chunk), False
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None

    def learn(self, index: dict[str, int]) -> None:
        """Type the names coded so far (all validated) into the named decoder."""
        if len(index) != self.names and len(index) <= _MAX_NAMED and self.misses < _MAX_MISSES:
            self.named = msgspec.json.Decoder(self._struct(Literal[tuple(index)]))
            self.names = len(index)


def _fast_chunk(chunk: bytes | memoryview, decoders: _FastDecoders, out: _Builder) -> bool:
    """Decode a chunk of whole lines on the fast path; False when the exact path must read it.
    A memoryview chunk is a view of plain text: ASCII without "[" (see `_plain`)."""
    plain = isinstance(chunk, memoryview)
    # ASCII text holds no byte-order mark: only other text is searched for one (a BOM inside,
    # from concatenated files, is stripped by the exact path) and checked as UTF-8 (msgspec does
    # not check bytes inside fields it skips).
    if (
        not isinstance(chunk, memoryview)
        and not chunk.isascii()
        and (_BOM in chunk or not _is_utf8(chunk))
    ):
        return False
    decoded = decoders.decode(chunk)
    if decoded is None:
        return False
    rows, known = decoded
    if not rows:
        return not bytes(chunk).strip()
    if _too_deep(chunk, len(rows), array=False, bracketless=plain):
        return False
    if not _add_rows(rows, decoders.attrs, out, known):
        return False
    if not known:
        decoders.learn(out.index)
    return True


_PLAIN = frozenset({str, type(None), msgspec.UnsetType})


def _column_codes(
    column: list[Any], name: str, table: dict[str | None, int]
) -> tuple[Codes, bool] | None:
    """Code one field column against `table`: (codes, present), None when a value is refused."""
    n = len(column)
    if set(map(type, column)) <= _PLAIN:  # the common case: text, null or absent
        # First-appearance order (not set order): codes must not depend on hash seeds.
        mapping = {v: table.setdefault(_label(v), len(table)) for v in dict.fromkeys(column)}
        present = any(v is not msgspec.UNSET for v in mapping)
        return np.fromiter(map(mapping.__getitem__, column), np.int32, n), present
    if not all(map(_in_bounds, column)):
        return None
    if name == "item":  # item ids may be integers: kept as text, as on the exact path
        column = [str(v) if isinstance(v, int) else v for v in column]
    texts = [_label(v) for v in column]
    for text in dict.fromkeys(texts):
        table.setdefault(text, len(table))
    present = any(v is not msgspec.UNSET for v in column)
    return np.fromiter(map(table.__getitem__, texts), np.int32, n), present


def _add_rows(rows: list[Any], attrs: Sequence[str], out: _Builder, known: bool = False) -> bool:
    """Add decoded rows to `out`; False (nothing added) when a row needs the exact path.
    `known`: every model name is already coded (the named decoder read them)."""
    get_a, get_b = attrgetter("model_a"), attrgetter("model_b")
    new: set[str] = set()
    if not known:
        names = set(map(get_a, rows))
        names.update(map(get_b, rows))
        new = names.difference(out.index)
        if any(not name.strip() or _has_surrogate(name) for name in new):
            return False
    labelled = [len(table) for table in out.labels]

    def refuse() -> bool:
        # Nothing added: neither the names nor the field values of this chunk stay coded (the
        # exact path codes those of its valid lines, in their order).
        for name in new:
            del out.index[name]
        for table, size in zip(out.labels, labelled, strict=True):
            for key in list(table)[size:]:
                del table[key]
        return False

    for name in new:  # sorted later: the order met only fixes codes that are remapped
        out.index[name] = len(out.index)
    n = len(rows)
    a = np.fromiter(map(out.index.__getitem__, map(get_a, rows)), np.int32, n)
    b = np.fromiter(map(out.index.__getitem__, map(get_b, rows)), np.int32, n)
    if (a == b).any():
        return refuse()
    columns = []
    for k, attr in enumerate(attrs):
        coded = _column_codes(list(map(attrgetter(attr), rows)), out.fields[k], out.labels[k])
        if coded is None:
            return refuse()
        columns.append(coded)
    winners = map(_WINNER_CODE.__getitem__, map(attrgetter("winner"), rows))
    out.a.append(a)
    out.b.append(b)
    out.outcome.append(np.fromiter(winners, np.int8, n))
    for k, (codes, present) in enumerate(columns):
        out.field_codes[k].append(codes)
        out.present[k] |= present
    return True


def _exact(data: bytes, first_line: int, source: str, skip_bad: bool, out: _Builder) -> None:
    records = _line_records(data, first_line) if first_line else _records(data, source)
    for number, obj, error in records:
        record, reason = (None, error) if error else _validate(obj, out.fields)
        if record is not None:
            out.add_record(record)
        elif skip_bad:
            out.skipped.append(SkippedLine(number, reason))
        else:
            raise DataError(f"{source}:{number}: {reason}")


def parse_battle_table(
    data: bytes,
    *,
    source: str = "<battles>",
    fields: Sequence[str] = (),
    skip_bad: bool = False,
    workers: int = 1,
) -> BattleTable:
    """Battles from JSONL or JSON-array bytes into columns, with the extra `fields` asked for.

    Errors as in `load_battles`: a malformed line raises `DataError` naming file, line and
    field, or with `skip_bad` is left out and listed in `.skipped`. With `workers` > 1, a large
    JSONL file is read by that many processes at once (forked, where the platform forks), each
    its own run of lines: the same table, the same first error.
    """
    fields = list(dict.fromkeys(fields))
    out = _Builder(fields)
    data = data.removeprefix(_BOM)
    if _is_array(data):
        struct, attrs = _fast_struct(fields)
        if not _fast_array(data, struct, attrs, out):
            out = _Builder(fields)
            _exact(data, 0, source, skip_bad, out)
        return out.table()
    workers = min(workers, len(data) // _PARALLEL_BYTES) if hasattr(os, "fork") else 1
    plain = _plain(data)
    if workers > 1:
        _parse_forked(data, source, skip_bad, out, workers, plain)
    else:
        _parse_lines(data, 0, len(data), 1, source, skip_bad, out, plain)
    return out.table()


def _plain(data: bytes) -> bool:
    """Whether `data` is ASCII without "[": no byte-order mark or invalid UTF-8 inside, nothing
    nested but objects. Two scans of the whole file (memchr speed), once, before any split."""
    return data.isascii() and b"[" not in data


_PARALLEL_BYTES = 16 << 20  # bytes of battle file per reading process, at least


def _parse_lines(
    data: bytes,
    begin: int,
    stop: int,
    line: int | None,
    source: str,
    skip_bad: bool,
    out: _Builder,
    plain: bool = False,
) -> None:
    """The JSONL lines in data[begin:stop] (whole lines; the first is line `line`, None: counted
    from the start of `data`) into `out`. Lines are counted only up to a chunk the exact path
    reads: only its records are numbered (in errors and skipped lines). `plain`: `data` is
    plain text (see `_plain`)."""
    decoders = _FastDecoders(out.fields)
    counted, number = (0, 1) if line is None else (begin, line)  # data[counted] is line `number`
    # Plain text is decoded from views of `data`: no copy of each chunk (and, in a forked
    # reader, no fresh pages for it); any other text from copies, checked as bytes.
    view = memoryview(data) if plain else None
    start = begin
    while start < stop:
        limit = start + _CHUNK_BYTES
        if limit >= stop:
            end = stop
        else:  # whole lines only
            newline = data.rfind(b"\n", start, limit)
            end = newline + 1 if newline >= start else (data.find(b"\n", limit, stop) + 1 or stop)
        chunk = view[start:end] if view is not None else data[start:end]
        if not _fast_chunk(chunk, decoders, out):
            number += data.count(b"\n", counted, start)
            counted = start
            _exact(bytes(chunk), number, source, skip_bad, out)
        start = end


def _merge(out: _Builder, part: _Builder) -> None:
    """Append `part`, read from the lines after those of `out`: its codes are re-coded so that
    names and labels keep their order of first appearance in the whole file."""

    def remap(into: dict[Any, int], codes_of: dict[Any, int]) -> Codes:
        for key in codes_of:
            into.setdefault(key, len(into))
        return np.array([into[key] for key in codes_of], dtype=np.int32)

    names = remap(out.index, part.index)
    out.a.extend(names[x] for x in part.a)
    out.b.extend(names[x] for x in part.b)
    out.outcome.extend(part.outcome)
    for f in range(len(out.fields)):
        labels = remap(out.labels[f], part.labels[f])
        out.field_codes[f].extend(labels[x] for x in part.field_codes[f])
        out.present[f] |= part.present[f]
    out.skipped.extend(part.skipped)


def _parse_forked(
    data: bytes, source: str, skip_bad: bool, out: _Builder, workers: int, plain: bool = False
) -> None:
    """Read the file's lines in `workers` runs: this process the first, forked children the
    others (each sends back its columns, or its first error). Runs are merged in file order,
    so the first error raised is the file's first."""
    bounds = [0]
    for k in range(1, workers):
        cut = data.find(b"\n", max(bounds[-1], k * len(data) // workers)) + 1 or len(data)
        bounds.append(cut)
    bounds.append(len(data))
    runs = [(lo, hi) for lo, hi in pairwise(bounds) if hi > lo]
    children: list[tuple[int, int]] = []
    try:
        for lo, hi in runs[1:]:  # each child numbers its lines only if it needs to
            children.append(_fork_run(data, lo, hi, None, source, skip_bad, out.fields, plain))
        _parse_lines(data, runs[0][0], runs[0][1], 1, source, skip_bad, out, plain)
        while children:
            pid, fd = children.pop(0)
            with os.fdopen(fd, "rb") as pipe:
                payload = pipe.read()
            os.waitpid(pid, 0)
            message: tuple[str, Any] = pickle.loads(payload) if payload else ("crash", "none")
            kind, value = message
            if kind == "error":
                raise DataError(value)
            if kind != "ok":
                raise RuntimeError(f"a battle-file reading process failed: {value}")
            part = _Builder(out.fields)
            vars(part).update(value)
            _merge(out, part)
    finally:
        for pid, fd in children:  # an error before their turn: stop them
            os.close(fd)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _fork_run(
    data: bytes,
    lo: int,
    hi: int,
    line: int | None,
    source: str,
    skip_bad: bool,
    fields: Sequence[str],
    plain: bool = False,
) -> tuple[int, int]:
    """Fork a child that reads data[lo:hi] and writes its columns to a pipe: (pid, read end)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    # The child: never returns, never runs the parent's exit handlers.
    code = 0
    try:
        os.close(read_end)
        part = _Builder(fields)
        try:
            _parse_lines(data, lo, hi, line, source, skip_bad, part, plain)
            reply: tuple[str, Any] = ("ok", vars(part))
        except DataError as exc:
            reply = ("error", str(exc))
        except Exception as exc:  # a bug: the parent raises it
            reply = ("crash", repr(exc))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _fast_array(data: bytes, struct: type, attrs: Sequence[str], out: _Builder) -> bool:
    """A whole JSON array on the fast path; False when the exact path must read it."""
    if not data.isascii() and (_BOM in data or not _is_utf8(data)):
        return False
    try:
        rows = msgspec.json.Decoder(list[struct]).decode(data)  # type: ignore[valid-type]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return False
    return not _too_deep(data, len(rows), array=True) and _add_rows(rows, attrs, out)


def read_battle_table(
    path: str | Path, *, fields: Sequence[str] = (), skip_bad: bool = False, workers: int = 1
) -> BattleTable:
    """Read a battle file (JSONL or a JSON array) into a `BattleTable`; see `parse_battle_table`."""
    path = Path(path)
    return parse_battle_table(
        _read_bytes(path), source=str(path), fields=fields, skip_bad=skip_bad, workers=workers
    )
