"""The evaluator leaderboard from hand-built records: paired flags against the reference judge,
abstention and unparsed rates per bias type and side (the shared unbiased judgement once), and
the trust ranking with its components, flag mark and rank interval."""

from __future__ import annotations

from typing import Any

import pytest

from memearena.config import RunConfig, parse_config
from memearena.methods.judge_audit.analysis import judge_audit_section
from memearena.methods.judge_audit.records import ScoreLog
from memearena.methods.judge_audit.stages import JudgeAuditOutcome, ScoreRecord, VerdictRecord

ITEMS = [f"m{i:02d}" for i in range(30)]


def _cfg(judges: list[str], reference: str | None = "ref") -> RunConfig:
    return parse_config(
        {
            "run": "t",
            "models": {j: {"provider": "sim"} for j in [*judges, "r1", "r2"]},
            "data": [{"format": "demo"}],
            "judge_audit": {
                "judges": judges,
                "responders": ["r1", "r2"],
                "reference_judge": reference,
                "bootstrap": 400,
            },
        }
    )


def _scores(
    judge: str, bias_type: str, pairs: list[tuple[int | None, int | None]], **kw: Any
) -> list[ScoreRecord]:
    out = []
    for item, (u, b) in zip(ITEMS, pairs, strict=False):
        out.append(
            ScoreRecord(judge, item, bias_type, u, b, kw.get("us", "ok"), kw.get("bs", "ok"), "r1")
        )
    return out


def _row(section: dict[str, Any], judge: str) -> dict[str, Any]:
    return next(r for r in section["leaderboard"] if r["judge"] == judge)


def test_a_judge_is_flagged_on_its_paired_difference_from_the_reference() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    ys = [3 + (i * 7) % 8 for i in range(30)]  # unbiased scores vary a lot across items
    out.scores.extend(_scores("ref", "text_dominance", [(y, 1) for y in ys]))
    out.scores.extend(
        _scores("good", "text_dominance", [(y, 1 + (i % 5 == 0)) for i, y in enumerate(ys)])
    )
    out.scores.extend(_scores("bad", "text_dominance", [(y, max(1, y - 2)) for y in ys]))
    sec = judge_audit_section(_cfg(["ref", "good", "bad"]), out)
    bad, good, ref = _row(sec, "bad"), _row(sec, "good"), _row(sec, "ref")
    assert "text_dominance" in bad["flags"]
    p = bad["paired"]["text_dominance"]
    assert p["difference"] < 0 and p["ci_high"] < 0
    assert "text_dominance" not in good["flags"]  # within the margin of the reference
    assert bad["flag_p_adjusted"]["text_dominance"] <= sec["flagging"]["family_wise_alpha"]
    assert bad["tests"]["text_dominance"]["p_adjusted"] == bad["flag_p_adjusted"]["text_dominance"]
    # The reference judge is tested too, against the mean of the others: it is the best here.
    assert ref["flags"] == []
    assert ref["paired"]["text_dominance"]["against"] == "mean of the other judges"
    assert ref["paired"]["text_dominance"]["difference"] > 0
    assert ref["tests"]["text_dominance"]["p_adjusted"] > 0.5


def test_the_reference_judge_is_flagged_when_it_is_worse_than_the_others() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    ys = [3 + (i * 7) % 8 for i in range(30)]
    for j in ("a", "b"):
        out.scores.extend(_scores(j, "text_dominance", [(y, 1) for y in ys]))
    out.scores.extend(_scores("ref", "text_dominance", [(y, max(1, y - 2)) for y in ys]))
    sec = judge_audit_section(_cfg(["ref", "a", "b"]), out)
    assert "text_dominance" in _row(sec, "ref")["flags"]
    assert _row(sec, "a")["paired"]["text_dominance"]["against"] == "ref"


def test_no_flag_from_too_few_pairs_or_a_zero_width_interval() -> None:
    # One pair per type: the worst possible judge is still not flagged (too few pairs).
    out = JudgeAuditOutcome(items=len(ITEMS))
    out.scores.extend(_scores("ref", "text_dominance", [(8, 1)]))
    out.scores.extend(_scores("bad", "text_dominance", [(8, 8)]))
    row = _row(judge_audit_section(_cfg(["ref", "bad"]), out), "bad")
    assert row["paired"]["text_dominance"]["difference"] == pytest.approx(-1.0)
    assert row["flags"] == []
    assert row["tests"]["text_dominance"]["untested"] == "fewer than 10 pairs"
    # Thirty identical pairs: the interval has zero width, and proves nothing.
    out = JudgeAuditOutcome(items=len(ITEMS))
    out.scores.extend(_scores("ref", "text_dominance", [(8, 1)] * 30))
    out.scores.extend(_scores("bad", "text_dominance", [(8, 7)] * 30))
    row = _row(judge_audit_section(_cfg(["ref", "bad"]), out), "bad")
    assert row["flags"] == []
    assert row["tests"]["text_dominance"]["untested"] == "zero-width interval"


def test_without_a_reference_the_other_judges_mean_is_the_baseline() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    ys = [3 + (i * 7) % 8 for i in range(30)]
    for j in ("a", "b", "c"):
        out.scores.extend(_scores(j, "image_misalignment", [(y, 1) for y in ys]))
    out.scores.extend(
        _scores("d", "image_misalignment", [(y, y - (i % 3 == 0)) for i, y in enumerate(ys)])
    )
    sec = judge_audit_section(_cfg(["a", "b", "c", "d"], reference=None), out)
    assert "image_misalignment" in _row(sec, "d")["flags"]
    assert all(_row(sec, j)["flags"] == [] for j in "abc")


def test_rates_are_per_type_and_side_and_the_shared_unbiased_judgement_counts_once() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    # The base triplet is shared by three types: its unbiased judgement is one abstention per
    # item, not three; the biased side abstains on one type only.
    for t in ("text_dominance", "image_dominance", "texture_insertion"):
        bs = "abstained" if t == "image_dominance" else "ok"
        out.scores.extend(_scores("ref", t, [(None, 5)] * 10, us="abstained", bs=bs))
    sec = judge_audit_section(_cfg(["ref"]), out)
    ab = _row(sec, "ref")["abstention"]
    assert ab["unbiased"]["judgements"] == 10 and ab["unbiased"]["value"] == pytest.approx(1.0)
    assert ab["biased"]["judgements"] == 30
    assert ab["biased"]["value"] == pytest.approx(1 / 3)
    assert ab["by_type"]["image_dominance"]["biased"]["value"] == pytest.approx(1.0)
    assert ab["by_type"]["text_dominance"]["biased"]["value"] == pytest.approx(0.0)
    assert ab["by_type"]["text_dominance"]["unbiased"]["judgements"] == 10
    pooled = _row(sec, "ref")["abstention_rate"]
    assert pooled["judgements"] == 40 and pooled["value"] == pytest.approx((10 + 10) / 40)
    assert _row(sec, "ref")["unparsed"]["biased"]["value"] == pytest.approx(0.0)


def _verdicts(judge: str, p_first: float) -> list[VerdictRecord]:
    out = []
    for k, item in enumerate(ITEMS):
        for first, second in (("r1", "r2"), ("r2", "r1")):
            pref = "A" if (k * 2 + (first == "r2")) % 10 < p_first * 10 else "B"
            out.append(VerdictRecord(judge, "position", item, first, second, pref, 100, 100))
            out.append(VerdictRecord(judge, "verbosity", item, "original", "padded", "A", 100, 300))
            out.append(VerdictRecord(judge, "verbosity", item, "padded", "original", "B", 300, 100))
    return out


def _pairwise(judge: str, kind: str, seed: int = 0) -> list[VerdictRecord]:
    """Position and verbosity verdicts of a ``decisive`` judge (r1 is better: it wins in both
    orders, and the concise original beats the padded copy), an ``always_first`` one, one that
    answers ``tie`` every time, or a ``coin`` flip."""
    import random

    rng = random.Random(seed)
    out = []
    for item in ITEMS:
        for first, second in (("r1", "r2"), ("r2", "r1")):
            pref = {
                "decisive": "A" if first == "r1" else "B",
                "always_first": "A",
                "tie": "tie",
                "coin": rng.choice("AB"),
            }[kind]
            out.append(VerdictRecord(judge, "position", item, first, second, pref, 100, 100))
        for first, second in (("original", "padded"), ("padded", "original")):
            pref = {
                "decisive": "A" if first == "original" else "B",
                "always_first": "A",
                "tie": "tie",
                "coin": rng.choice("AB"),
            }[kind]
            out.append(VerdictRecord(judge, "verbosity", item, first, second, pref, 100, 300))
    return out


def _same_scores(out: JudgeAuditOutcome, judges: list[str]) -> None:
    ys = [3 + (i * 7) % 8 for i in range(30)]
    for j in judges:
        out.scores.extend(_scores(j, "text_dominance", [(y, 1 + (y > 6)) for y in ys]))
        out.scores.extend(_scores(j, "texture_insertion", [(y, y - (y > 9)) for y in ys]))


def test_the_leaderboard_is_ordered_by_overall_and_says_so() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    ys = [3 + (i * 7) % 8 for i in range(30)]
    out.scores.extend(_scores("ref", "text_dominance", [(y, 1) for y in ys]))
    out.scores.extend(_scores("lax", "text_dominance", [(y, y - 1) for y in ys]))
    # The better Overall ranks first even with the worse classic biases beside it.
    out.verdicts.extend(_verdicts("ref", 0.9) + _pairwise("lax", "decisive"))
    sec = judge_audit_section(_cfg(["lax", "ref"]), out)
    assert sec["order_by"] == "overall"
    assert [r["judge"] for r in sec["leaderboard"]] == ["ref", "lax"]
    ref = _row(sec, "ref")
    assert "position" in ref["flags"] and ref["rank_label"] == "1*"
    assert ref["p_prefer_first"]["value"] == pytest.approx(0.9)
    lo, hi = ref["rank_ci"]
    assert lo == 1 and hi <= 2


@pytest.mark.parametrize("rank_by", ["overall", "composite"])
def test_a_decisive_consistent_judge_ranks_above_an_always_tie_and_a_coin_flip_judge(
    rank_by: str,
) -> None:
    judges = ["tie", "coin", "decisive"]
    out = JudgeAuditOutcome(items=len(ITEMS))
    _same_scores(out, judges)  # the same BD/BC: only the classic biases tell them apart
    for j in judges:
        out.verdicts.extend(_pairwise(j, j))
    cfg = _cfg(judges, reference=None)
    assert cfg.judge_audit is not None
    cfg.judge_audit.rank_by = rank_by  # type: ignore[assignment]
    sec = judge_audit_section(cfg, out)
    assert sec["order_by"] == rank_by
    order = [r["judge"] for r in sec["leaderboard"]]
    assert order[0] == "decisive", order
    dec, tie, coin = (_row(sec, j) for j in ("decisive", "tie", "coin"))
    assert dec["decisive_consistency"]["value"] == pytest.approx(1.0)
    assert tie["decisive_consistency"]["value"] == pytest.approx(0.0)
    assert tie["position_consistency"]["value"] == pytest.approx(1.0)  # tie both times
    # Verbosity: the share preferring the concise answer beside P(prefer padded).
    assert dec["p_prefer_concise"]["value"] == pytest.approx(1.0)
    assert tie["p_prefer_concise"]["value"] == pytest.approx(0.0)
    assert tie["p_prefer_padded"]["value"] == pytest.approx(0.5)
    assert dec["trust"]["value"] > max(tie["trust"]["value"], coin["trust"]["value"])
    assert dec["trust"]["components"]["position"] == pytest.approx(0.0)
    assert tie["trust"]["components"]["position"] == pytest.approx(1.0)


def test_score_rows_stream_in_the_order_they_were_scored() -> None:
    from memearena.methods.judge_audit.analysis import iter_score_rows, score_rows

    out = JudgeAuditOutcome(
        scores=ScoreLog(_scores("j", "visual_transformation", [(7, 5), (None, 3)]))
    )
    rows = list(iter_score_rows(out))
    assert rows == score_rows(out)
    assert [(r["id"], r["unbiased_score"], r["biased_score"]) for r in rows] == [
        (ITEMS[0], 7, 5),
        (ITEMS[1], None, 3),
    ]


def _mixed_outcome() -> JudgeAuditOutcome:
    """Decimal scores, every status, two responders and families, verdicts of both probes."""
    out = JudgeAuditOutcome(items=len(ITEMS), families={"ref": "fam", "r1": "fam"})
    statuses = ["ok", "ok", "ok", "abstained", "unparsed", "refusal", "error"]
    for k in range(900):
        judge = ["ref", "good", "bad"][k % 3]
        st_u, st_b = statuses[k % 7], statuses[(k // 7) % 7]
        u = None if st_u != "ok" else 1 + (k * 37 % 90) / 10
        b = None if st_b != "ok" else 1 + (k * 53 % 90) / 10
        t = ["text_dominance", "texture_insertion", "unnecessary_image", "image_misalignment"]
        out.scores.add(judge, ITEMS[k % 30], t[k % 4], u, b, st_u, st_b, "r1" if k % 2 else "r2")
    for judge in ("ref", "good", "bad"):
        out.verdicts.extend(_verdicts(judge, 0.7 if judge == "bad" else 0.5))
    return out


def test_the_section_does_not_depend_on_where_the_records_were_spooled(monkeypatch) -> None:
    import memearena.methods.judge_audit.records as records

    cfg = _cfg(["ref", "good", "bad"])
    held = judge_audit_section(cfg, _mixed_outcome())
    monkeypatch.setattr(records, "_FLUSH_BYTES", 256)
    monkeypatch.setattr(records._Spool.chunks, "__defaults__", (13,))
    spooled = judge_audit_section(cfg, _mixed_outcome())
    assert spooled == held
    assert _row(held, "ref")["self_enhancement"]["own"] == ["r1"]


def test_self_enhancement_reads_each_base_triplet_once() -> None:
    # The judge's first score of an item's answer is the base score; unnecessary_image's
    # unbiased side (a text-only triplet) is not one, however it was scored.
    out = JudgeAuditOutcome(items=len(ITEMS), families={"ref": "fam", "r1": "fam"})
    for k, item in enumerate(ITEMS):
        for judge, own, other in (("ref", 9 - k % 2, 5), ("good", 5, 5)):
            for responder, y in (("r1", own), ("r2", other)):
                out.scores.add(judge, item, "unnecessary_image", 1, 1, "ok", "ok", responder)
                out.scores.add(judge, item, "text_dominance", y, 1, "ok", "ok", responder)
                out.scores.add(judge, item, "texture_insertion", 2, y, "ok", "ok", responder)
    sec = judge_audit_section(_cfg(["ref", "good"]), out)
    se = _row(sec, "ref")["self_enhancement"]
    assert se["value"] == pytest.approx(3.5) and se["n"] == len(ITEMS)
    assert "self_enhancement" in _row(sec, "ref")["flags"]


def _rounded(x: Any) -> Any:
    if isinstance(x, float):
        return float(f"{x:.10g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def test_the_section_does_not_depend_on_the_order_records_arrived() -> None:
    # The document, its key order included, must not change with completion order (a resume,
    # a re-run): only a sum's rounding may (terms added in another order).
    import json
    import random

    out = _mixed_outcome()
    # As in a run: the unbiased triplet one judge scored for several types is one judgement.
    first: dict[tuple[Any, ...], tuple[Any, str]] = {}
    scores = []
    for r in out.scores:
        key = (r.judge, r.item, r.responder, r.bias_type == "unnecessary_image")
        u, us = first.setdefault(key, (r.unbiased, r.unbiased_status))
        scores.append(
            ScoreRecord(r.judge, r.item, r.bias_type, u, r.biased, us, r.biased_status, r.responder)
        )
    verdicts = list(out.verdicts)
    docs = []
    for seed in (1, 2):
        random.Random(seed).shuffle(scores)
        random.Random(seed).shuffle(verdicts)
        o = JudgeAuditOutcome(items=out.items, families=out.families)
        o.scores.extend(scores)
        o.verdicts.extend(verdicts)
        docs.append(json.dumps(_rounded(judge_audit_section(_cfg(["ref", "good", "bad"]), o))))
    assert docs[0] == docs[1]


def test_a_rate_of_zero_keeps_an_interval_over_its_items() -> None:
    # No abstention and no parse failure in 60 judgements over 30 items: the rate is 0, but
    # 30 items cannot rule out a few percent; a percentile bootstrap alone gives [0, 0].
    out = JudgeAuditOutcome(items=len(ITEMS))
    out.scores.extend(_scores("ref", "text_dominance", [(7, 3)] * 30))
    row = _row(judge_audit_section(_cfg(["ref"]), out), "ref")
    for key in ("abstention_rate", "parse_failure_rate"):
        est = row[key]
        assert est["value"] == 0.0 and est["n"] == 30
        assert est["ci_low"] == 0.0 and est["ci_high"] == pytest.approx(0.1135, abs=1e-3)
    side = row["abstention"]["by_type"]["text_dominance"]["biased"]
    assert side["ci_high"] > 0.1


def test_a_judge_that_always_prefers_the_first_answer_is_flagged() -> None:
    # Every verdict the same: the bootstrap interval has zero width, but 30 items of it are
    # evidence (the proportion's Wilson interval sets the least standard error).
    out = JudgeAuditOutcome(items=len(ITEMS))
    _same_scores(out, ["ref", "first"])
    out.verdicts.extend(_pairwise("ref", "decisive") + _pairwise("first", "always_first"))
    row = _row(judge_audit_section(_cfg(["ref", "first"]), out), "first")
    assert row["p_prefer_first"]["value"] == pytest.approx(1.0)
    assert "position" in row["flags"] and row["flag_p_adjusted"]["position"] < 0.001
