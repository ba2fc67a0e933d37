"""Console figures: an interval written as ``v±h`` only where it is centred on the value."""

from __future__ import annotations

from memearena.report.console import fmt_estimate, interval_text


def test_a_centred_interval_is_written_plus_minus() -> None:
    assert interval_text(0.94, 0.92, 0.96) == "0.94±0.02"
    assert interval_text(173.88, 142.06, 205.79) == "173.88±31.86"  # within a tenth of the width


def test_a_lopsided_interval_is_written_with_its_bounds() -> None:
    # A percentile interval at the edge: 1.00±0.10 would claim values above 1.
    assert interval_text(1.0, 0.8, 1.0) == "1.00 (0.80–1.00)"
    assert interval_text(0.67, 0.64, 0.68) == "0.67 (0.64–0.68)"
    est = {"value": 0.0, "ci_low": 0.0, "ci_high": 0.14}
    assert fmt_estimate(est) == "0.00 (0.00–0.14)"
    assert fmt_estimate({"value": 0.5, "ci_low": None, "ci_high": None}) == "0.500"
