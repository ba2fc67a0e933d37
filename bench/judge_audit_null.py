"""Bench: the Judge audit's flags on null logs — how often a clean judge is flagged.

Run: python bench/judge_audit_null.py [--reps 200] [--bootstrap 200] [--judges 5] [--noise 1.0]

Synthetic null logs (exchangeable clean judges: every judge scores the same latent qualities
with the same perturbation effects and independent noise of ``--noise`` score points, prefers
the better of two answers and the concise original equally often, with no position or
self-preference) go through the real analysis (``judge_audit_section``) at the demo's size (24
items × 2 responders: 48 pairs per type) and at 200 rows per type (200 items, one response
each), ``--reps`` repetitions each, with one judge as the reference (as the demo). It prints the
share of clean judges flagged on anything under the analysis's rule (family-wise error held per
judge; target at most 5% at both sizes) and, from the same sections, under the rule the
analysis used before (each test on its own 95% interval plus the practical margins; the
reference judge tested only on position, verbosity and self-enhancement), the baseline; and the
most frequent flags. Each repetition draws a new world from its own seed.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

import numpy as np

from memearena.config import RunConfig, parse_config
from memearena.methods.judge_audit.analysis import (
    PAIRED_MARGIN,
    PAIRED_TESTS,
    RATE_MARGIN,
    SELF_MARGIN,
    judge_audit_section,
)
from memearena.methods.judge_audit.stages import JudgeAuditOutcome
from memearena.stats.judge_bias import BIAS_TYPES


def null_outcome(
    rng: np.random.Generator, n_items: int, both: bool, judges: list[str], noise: float
) -> JudgeAuditOutcome:
    """One null world: ``both`` — every item answered by both responders (the demo's shape);
    else one response per item, the responders alternating."""
    responders = ["r0", "r1"]
    out = JudgeAuditOutcome(items=n_items)
    # Judges 0 and 1 share a family with a responder (self-enhancement is tested on them).
    out.families = {j: f"fam-{j}" for j in judges} | {"r0": f"fam-{judges[0]}"}
    out.families["r1"] = f"fam-{judges[1]}"
    for i in range(n_items):
        item = f"m{i:04d}"
        answered = responders if both else [responders[i % 2]]
        for resp in answered:
            q = rng.uniform(3.5, 8.5)  # the answer's latent quality on the 1–10 scale
            base = {j: q + rng.normal(0, noise) for j in judges}
            text_only = {j: q + rng.normal(0, noise) for j in judges}
            for t, (_cat, metric) in BIAS_TYPES.items():
                if metric == "bd":
                    latent = 1 + (q - 1) * (1 - rng.uniform(0.3, 0.95))
                else:
                    latent = q + rng.choice([-1.0, 0.0, 0.0, 1.0])
                unb = text_only if t == "unnecessary_image" else base
                judged = []
                for j in judges:
                    y = int(np.clip(round(unb[j]), 1, 10))
                    h = int(np.clip(round(latent + rng.normal(0, noise)), 1, 10))
                    judged.append((j, y, "ok", h, "ok"))
                out.scores.add_pair(item, t, resp, judged)
        # Position: the two responders' answers in both orders; verbosity: answer vs padded.
        d = rng.normal(0, 1)
        for j in judges:
            for first, second, sign in (("r0", "r1", 1.0), ("r1", "r0", -1.0)):
                x = sign * d + rng.normal(0, 0.7)
                pref = "tie" if abs(x) < 0.15 else "A" if x > 0 else "B"
                out.verdicts.add(j, "position", item, first, second, pref, 100, 100)
            for first, second in (("original", "padded"), ("padded", "original")):
                u = rng.uniform()
                pick = "original" if u < 0.7 else "tie" if u < 0.8 else "padded"
                pref = "tie" if pick == "tie" else "A" if pick == first else "B"
                out.verdicts.add(j, "verbosity", item, first, second, pref, 100, 160)
    return out


def config(judges: list[str], bootstrap: int, seed: int) -> RunConfig:
    return parse_config(
        {
            "run": "null",
            "seed": seed,
            "models": {m: {"provider": "sim"} for m in [*judges, "r0", "r1"]},
            "data": [{"format": "demo"}],
            "judge_audit": {
                "judges": judges,
                "responders": ["r0", "r1"],
                "reference_judge": judges[0],
                "bootstrap": bootstrap,
            },
        }
    )


def old_rule(row: dict[str, Any], reference: str | None) -> list[str]:
    """The flags the analysis raised before the family-wise rule, from the section's own
    intervals: each test alone on its 95% percentile interval, with the practical margins; the
    reference judge was the baseline and never tested on the paired figures."""
    flags = []
    if row["judge"] != reference:
        for name in PAIRED_TESTS:
            p = (row.get("paired") or {}).get(name)
            hi = p["ci_high"] if p else None
            if p and hi is not None and hi < 0 and p["difference"] <= -PAIRED_MARGIN:
                flags.append(name)
    pf = row["p_prefer_first"]
    outside = pf["ci_low"] is not None and (pf["ci_low"] > 0.5 or pf["ci_high"] < 0.5)
    if outside and abs(pf["value"] - 0.5) >= RATE_MARGIN:
        flags.append("position")
    pp = row["p_prefer_padded"]
    if pp["ci_low"] is not None and pp["ci_low"] > 0.5 and pp["value"] - 0.5 >= RATE_MARGIN:
        flags.append("verbosity")
    se = row.get("self_enhancement") or {}
    if se.get("ci_low") is not None and se["ci_low"] > 0 and se["value"] >= SELF_MARGIN:
        flags.append("self_enhancement")
    return flags


def run(size: str, reps: int, bootstrap: int, n_judges: int, noise: float) -> dict[str, Any]:
    n_items, both = (24, True) if size == "demo" else (200, False)
    judges = [f"clean-{k}" for k in range(n_judges)]
    new_any = old_any = 0
    new_ref = old_ref = 0
    new_flags: Counter[str] = Counter()
    old_flags: Counter[str] = Counter()
    t0 = time.perf_counter()
    for rep in range(reps):
        rng = np.random.default_rng([rep, n_items])
        out = null_outcome(rng, n_items, both, judges, noise)
        sec = judge_audit_section(config(judges, bootstrap, rep), out)
        for row in sec["leaderboard"]:
            old = old_rule(row, judges[0])
            new_any += bool(row["flags"])
            old_any += bool(old)
            if row["judge"] == judges[0]:
                new_ref += bool(row["flags"])
                old_ref += bool(old)
            new_flags.update(row["flags"])
            old_flags.update(old)
    n = reps * n_judges
    return {
        "size": size,
        "pairs_per_type": n_items * (2 if both else 1),
        "new": new_any / n,
        "old": old_any / n,
        "new_ref": new_ref / reps,
        "old_ref": old_ref / reps,
        "new_flags": new_flags.most_common(4),
        "old_flags": old_flags.most_common(4),
        "secs": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--judges", type=int, default=5)
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--sizes", default="demo,200", help="demo and/or 200 (rows per type)")
    args = ap.parse_args()
    print(
        f"null logs: {args.judges} exchangeable clean judges, noise σ = {args.noise}, "
        f"{args.reps} repetitions, bootstrap {args.bootstrap}; target: ≤ 5% flagged"
    )
    ok = True
    for size in args.sizes.split(","):
        r = run(size, args.reps, args.bootstrap, args.judges, args.noise)
        ok &= r["new"] <= 0.05
        print(
            f"{r['size']:>5} ({r['pairs_per_type']} pairs per type): clean judges flagged on "
            f"anything: {r['new']:.1%} (family-wise rule) vs {r['old']:.1%} (baseline: each "
            f"test alone); the reference judge: {r['new_ref']:.1%} vs {r['old_ref']:.1%}  "
            f"[{r['secs']:.0f} s]"
        )
        print(f"      most frequent flags: {r['new_flags'] or 'none'}; baseline: {r['old_flags']}")
    print("target met at every size: " + ("yes" if ok else "NO"))


if __name__ == "__main__":
    main()
