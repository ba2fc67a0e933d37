"""The Judge audit's records as the stages produce them: every scored pair and every pairwise
verdict, logged in arrival order as fixed-size binary rows (names kept once, as small codes)
and spooled to an anonymous temporary file, so an audit's memory does not grow with the number
of pairs. A log reads back as records (``ScoreRecord``, ``VerdictRecord``) or, for the analysis,
as chunks of columns (a numpy structured array), in the order the records arrived.

Each score and verdict names the request that gave it (``ModelPool.request_key``, the
``request_hash`` of its calls in ``run.db``), kept as its 32 bytes in the row, not as a name:
every request is another key, so a table of them would grow with the audit. A record made
without one (an older caller) reads back with None.
"""

from __future__ import annotations

import os
import struct
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, ClassVar

import numpy as np

__all__ = [
    "MISSING",
    "PREFERENCES",
    "Names",
    "ScoreLog",
    "ScoreRecord",
    "VerdictLog",
    "VerdictRecord",
]


@dataclass(frozen=True, slots=True)
class ScoreRecord:
    """One judge's outcome on one pair: scores, or why there is none."""

    judge: str
    item: str
    bias_type: str
    unbiased: float | None
    biased: float | None
    unbiased_status: str
    """``ok``, ``abstained``, ``unparsed``, ``refusal`` or ``error``."""
    biased_status: str
    """Same, for the perturbed triplet."""
    responder: str | None = None
    unbiased_request: str | None = None
    """The request key of the unperturbed triplet's score (None: not recorded)."""
    biased_request: str | None = None
    """The same, for the perturbed triplet."""


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """One pairwise verdict as shown (``first`` shown as A)."""

    judge: str
    probe: str
    """``position`` or ``verbosity``."""
    item: str
    first: str
    second: str
    preference: str | None
    """``A``, ``B``, ``tie``, or None (unparsed, refused or failed)."""
    len_first: int
    len_second: int
    request: str | None = None
    """The verdict's request key (None: not recorded)."""


MISSING, _INT, _FLOAT = 0, 1, 2
"""A score's kind in a log row: none (its value is NaN), an int, a float (the record reads back
as it was given: ``7`` stays an int, ``7.0`` a float)."""

PREFERENCES: tuple[str | None, ...] = (None, "A", "B", "tie")
"""A verdict's preference as a code (its index)."""

_FLUSH_BYTES = 1 << 18
"""Rows are written to the spool file this many bytes at a time."""
_CHUNK_ROWS = 1 << 12
"""Rows per chunk read back: what the analysis holds at a time (a chunk and its per-row
temporaries), small enough that the pass's memory stops growing with the audit's size
within the first few dozen memes."""


class Names:
    """Strings kept once and referred to by a small code (its index in ``names``)."""

    __slots__ = ("codes", "names")

    def __init__(self) -> None:
        self.names: list[Any] = []
        self.codes: dict[Any, int] = {}

    def code(self, name: Any) -> int:
        c = self.codes.get(name)
        if c is None:
            c = self.codes[name] = len(self.names)
            self.names.append(name)
        return c

    def __len__(self) -> int:
        return len(self.names)


def _close(f: IO[bytes]) -> None:
    f.close()


class _Spool:
    """Fixed-size rows appended in memory and moved to an anonymous temporary file (deleted
    when closed, by the OS on a kill) in blocks; read back in the order written."""

    DTYPE: ClassVar[np.dtype[Any]]
    PACK: ClassVar[struct.Struct]

    def __init__(self) -> None:
        self._buf = bytearray()
        self._file: IO[bytes] | None = None
        self._written = 0
        self._rows = 0

    def _put(self, row: bytes) -> None:
        self._buf += row
        self._rows += 1
        if len(self._buf) >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="memearena-audit-")  # noqa: SIM115
            weakref.finalize(self, _close, self._file)
        self._file.seek(self._written)
        self._file.write(self._buf)
        self._file.flush()
        self._written += len(self._buf)
        self._buf.clear()

    def __len__(self) -> int:
        return self._rows

    def chunks(self, rows: int = _CHUNK_ROWS) -> Iterator[np.ndarray]:
        """Every row in arrival order, ``rows`` at a time, as a structured array (``DTYPE``)."""
        size = self.DTYPE.itemsize
        end, off = self._written, 0
        while off < end:
            assert self._file is not None
            data = os.pread(self._file.fileno(), min(rows * size, end - off), off)
            if not data:
                raise OSError("the audit's record spool ended early")
            data = data[: len(data) - len(data) % size]
            off += len(data)
            yield np.frombuffer(data, dtype=self.DTYPE)
        tail = bytes(self._buf[: len(self._buf) - len(self._buf) % size])
        for k in range(0, len(tail), rows * size):
            yield np.frombuffer(tail[k : k + rows * size], dtype=self.DTYPE)


def _value(v: float | None) -> tuple[float, int]:
    if v is None:
        return float("nan"), MISSING
    if isinstance(v, int) and not isinstance(v, bool):
        return float(v), _INT
    return float(v), _FLOAT


_NO_KEY = bytes(32)
"""A row's request key when none was recorded."""


def _key_bytes(key: str | None) -> bytes:
    """A request key (64 hex digits, a sha256) as the 32 bytes a row keeps."""
    if key is None:
        return _NO_KEY
    try:
        raw = bytes.fromhex(key)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise ValueError(f"not a request key (64 hex digits): {key[:80]!r}")
    return raw


def _key_text(raw: bytes) -> str | None:
    return None if raw == _NO_KEY else raw.hex()


def _read(v: float, kind: int) -> float | None:
    if kind == MISSING:
        return None
    return int(v) if kind == _INT else v


class ScoreLog(_Spool):
    """Every scored pair in arrival order (``ScoreRecord``; 93 bytes a pair on disk)."""

    DTYPE = np.dtype(
        [
            ("judge", "<u2"),
            ("item", "<u4"),
            ("bias_type", "u1"),
            ("responder", "<u2"),
            ("unbiased", "<f8"),
            ("biased", "<f8"),
            ("unbiased_kind", "u1"),
            ("biased_kind", "u1"),
            ("unbiased_status", "u1"),
            ("biased_status", "u1"),
            ("unbiased_request", "V32"),
            ("biased_request", "V32"),
        ]
    )
    PACK = struct.Struct("<HIBHddBBBB32s32s")

    def __init__(self, records: Iterable[ScoreRecord] = ()) -> None:
        super().__init__()
        self.judges = Names()
        self.items = Names()
        self.bias_types = Names()
        self.responders = Names()
        self.statuses = Names()
        self.extend(records)

    def add(
        self,
        judge: str,
        item: str,
        bias_type: str,
        unbiased: float | None,
        biased: float | None,
        unbiased_status: str,
        biased_status: str,
        responder: str | None = None,
        unbiased_request: str | None = None,
        biased_request: str | None = None,
    ) -> None:
        """Log one pair's outcome (the fields of ``ScoreRecord``)."""
        u, uk = _value(unbiased)
        b, bk = _value(biased)
        st = self.statuses.code
        self._put(
            self.PACK.pack(
                self.judges.code(judge),
                self.items.code(item),
                self.bias_types.code(bias_type),
                self.responders.code(responder),
                u,
                b,
                uk,
                bk,
                st(unbiased_status),
                st(biased_status),
                _key_bytes(unbiased_request),
                _key_bytes(biased_request),
            )
        )

    def add_pair(
        self,
        item: str,
        bias_type: str,
        responder: str | None,
        judged: Iterable[tuple[Any, ...]],
    ) -> None:
        """Log one pair's outcome for each judge: ``(judge, unbiased, unbiased_status, biased,
        biased_status[, unbiased_request, biased_request])`` (what ``add`` logs, the pair's
        names coded once)."""
        ic, tc, rc = (
            self.items.code(item),
            self.bias_types.code(bias_type),
            self.responders.code(responder),
        )
        jcode, st, pack, put = self.judges.code, self.statuses.code, self.PACK.pack, self._put
        for judge, unbiased, us, biased, bs, *keys in judged:
            u, uk = _value(unbiased)
            b, bk = _value(biased)
            ur, br = keys if keys else (None, None)
            put(
                pack(
                    jcode(judge),
                    ic,
                    tc,
                    rc,
                    u,
                    b,
                    uk,
                    bk,
                    st(us),
                    st(bs),
                    _key_bytes(ur),
                    _key_bytes(br),
                )
            )

    def append(self, r: ScoreRecord) -> None:
        self.add(
            r.judge,
            r.item,
            r.bias_type,
            r.unbiased,
            r.biased,
            r.unbiased_status,
            r.biased_status,
            r.responder,
            r.unbiased_request,
            r.biased_request,
        )

    def extend(self, records: Iterable[ScoreRecord]) -> None:
        for r in records:
            self.append(r)

    def __iter__(self) -> Iterator[ScoreRecord]:
        j, i, t = self.judges.names, self.items.names, self.bias_types.names
        resp, st = self.responders.names, self.statuses.names
        for chunk in self.chunks():
            for jc, ic, tc, rc, u, b, uk, bk, us, bs, ur, br in chunk.tolist():
                yield ScoreRecord(
                    j[jc],
                    i[ic],
                    t[tc],
                    _read(u, uk),
                    _read(b, bk),
                    st[us],
                    st[bs],
                    resp[rc],
                    _key_text(ur),
                    _key_text(br),
                )


class VerdictLog(_Spool):
    """Every pairwise verdict in arrival order (``VerdictRecord``; 60 bytes a verdict on disk)."""

    DTYPE = np.dtype(
        [
            ("judge", "<u2"),
            ("probe", "u1"),
            ("item", "<u4"),
            ("first", "<u2"),
            ("second", "<u2"),
            ("preference", "u1"),
            ("len_first", "<i8"),
            ("len_second", "<i8"),
            ("request", "V32"),
        ]
    )
    PACK = struct.Struct("<HBIHHBqq32s")
    _PREF: ClassVar[dict[str | None, int]] = {p: k for k, p in enumerate(PREFERENCES)}

    def __init__(self, records: Iterable[VerdictRecord] = ()) -> None:
        super().__init__()
        self.judges = Names()
        self.probes = Names()
        self.items = Names()
        self.labels = Names()
        """What was shown as A or B: a responder, ``original`` or ``padded``."""
        self.extend(records)

    def add(
        self,
        judge: str,
        probe: str,
        item: str,
        first: str,
        second: str,
        preference: str | None,
        len_first: int,
        len_second: int,
        request: str | None = None,
    ) -> None:
        """Log one verdict (the fields of ``VerdictRecord``)."""
        lab = self.labels.code
        self._put(
            self.PACK.pack(
                self.judges.code(judge),
                self.probes.code(probe),
                self.items.code(item),
                lab(first),
                lab(second),
                self._PREF[preference],
                len_first,
                len_second,
                _key_bytes(request),
            )
        )

    def append(self, v: VerdictRecord) -> None:
        self.add(
            v.judge,
            v.probe,
            v.item,
            v.first,
            v.second,
            v.preference,
            v.len_first,
            v.len_second,
            v.request,
        )

    def extend(self, records: Iterable[VerdictRecord]) -> None:
        for v in records:
            self.append(v)

    def __iter__(self) -> Iterator[VerdictRecord]:
        j, p, i, lab = self.judges.names, self.probes.names, self.items.names, self.labels.names
        for chunk in self.chunks():
            for jc, pc, ic, fc, sc, pref, lf, ls, rq in chunk.tolist():
                yield VerdictRecord(
                    j[jc], p[pc], i[ic], lab[fc], lab[sc], PREFERENCES[pref], lf, ls, _key_text(rq)
                )
