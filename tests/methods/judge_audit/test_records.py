"""The audit's record logs: every record reads back as it was logged, in arrival order, from
memory or from the spool file, and memory does not grow with the records logged."""

from __future__ import annotations

import pytest

import memearena.methods.judge_audit.records as records
from memearena.methods.judge_audit.records import (
    ScoreLog,
    ScoreRecord,
    VerdictLog,
    VerdictRecord,
)


def _scores(n: int) -> list[ScoreRecord]:
    out = []
    for k in range(n):
        u: float | None = [7, 6.5, None][k % 3]
        b: float | None = [3.0, None, 10][k % 3]
        out.append(
            ScoreRecord(
                f"j{k % 4}",
                f"m{k % 37:02d}",
                ["text_dominance", "unnecessary_image"][k % 2],
                u,
                b,
                "ok" if u is not None else "abstained",
                "ok" if b is not None else "error",
                None if k % 5 == 0 else f"r{k % 2}",
            )
        )
    return out


def _verdicts(n: int) -> list[VerdictRecord]:
    return [
        VerdictRecord(
            f"j{k % 3}",
            ["position", "verbosity"][k % 2],
            f"m{k % 11}",
            "r1",
            "padded",
            [None, "A", "B", "tie"][k % 4],
            k,
            10**12 + k,
        )
        for k in range(n)
    ]


@pytest.mark.parametrize("spooled", [False, True])
def test_records_read_back_as_logged_in_arrival_order(spooled: bool, monkeypatch) -> None:
    if spooled:  # most rows in the temporary file, chunks smaller than a flush
        monkeypatch.setattr(records, "_FLUSH_BYTES", 200)
        monkeypatch.setattr(records._Spool.chunks, "__defaults__", (7,))
    scores, verdicts = _scores(500), _verdicts(300)
    slog, vlog = ScoreLog(scores), VerdictLog(verdicts)
    assert len(slog) == 500 and len(vlog) == 300
    got = list(slog)
    assert got == scores
    # An int score stays an int, a float a float: the scores file writes them as given.
    assert [type(r.unbiased) for r in got[:3]] == [int, float, type(None)]
    assert list(vlog) == verdicts
    assert list(slog) == scores  # re-iterable
    slog.append(scores[0])  # and still open for more
    assert list(slog)[-1] == scores[0] and len(slog) == 501
    assert sum(len(c) for c in slog.chunks()) == 501


def test_a_log_holds_a_bounded_buffer_however_many_records(monkeypatch) -> None:
    monkeypatch.setattr(records, "_FLUSH_BYTES", 4096)
    log = ScoreLog()
    for r in _scores(5000):
        log.append(r)
        assert len(log._buf) < 4096 + ScoreLog.DTYPE.itemsize
    assert len(log) == 5000 and list(log)[4999] == _scores(5000)[4999]
    # Names are kept once: the log knows 37 items, not 5000.
    assert len(log.items) == 37 and len(log.judges) == 4


def test_a_pair_logged_at_once_reads_back_as_its_judges_logged_one_by_one() -> None:
    judged = [("j2", 7, "ok", None, "refusal"), ("j0", 6.5, "ok", 3.0, "ok")]
    whole, single = ScoreLog(), ScoreLog()
    whole.add_pair("m1", "text_dominance", "r1", judged)
    for j, u, us, b, bs in judged:
        single.add(j, "m1", "text_dominance", u, b, us, bs, "r1")
    assert (
        list(whole)
        == list(single)
        == [
            ScoreRecord("j2", "m1", "text_dominance", 7, None, "ok", "refusal", "r1"),
            ScoreRecord("j0", "m1", "text_dominance", 6.5, 3.0, "ok", "ok", "r1"),
        ]
    )
    assert bytes(whole._buf) == bytes(single._buf)  # the same codes, the same rows
