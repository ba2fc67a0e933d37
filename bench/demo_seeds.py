"""Bench: the demo world over several seeds, and its guideline settings against the truth.

Run: python bench/demo_seeds.py [--seeds 10] [--bootstrap 200] [--compare-seed 0] [--no-compare]

Part 1 runs `memearena demo --seed S` for S = 0 … seeds−1 (default policies: self-judging
excluded, intervals over memes) and prints, per seed, the Kendall τ of the leaderboard against
the true order, and which judges are flagged for verbosity (P(longer) above the other judges'
on the same presentations, beyond its 95% interval); the demo's clean judges are every judge
with `verbosity_bias` 0. It also prints τ with self-judged battles included, for contrast.

Part 2 runs the demo with `--compare-settings` twice: with the world parameters through which
guidelines can matter at their defaults, and at 0 (the null control), and prints each setting
against the truth (τ of the leaderboard, the panel's NDCG vs truth), against the leave-one-out
joint vote, and the panel's measured biases.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memearena.demo import demo_config
from memearena.engine.lifecycle import run_method
from memearena.sim.catalogue import DEMO_JUDGES
from memearena.stats import kendall_tau


def _fmt(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def seeds(n: int, bootstrap: int) -> bool:
    clean = {j for j, m in DEMO_JUDGES.items() if m.verbosity_bias == 0}
    print(f"Part 1: the demo over {n} seeds (bootstrap {bootstrap}, intervals over memes)")
    print(f"{'seed':>4} {'τ (exclude)':>12} {'τ (include)':>12}  flagged for verbosity")
    ok = True
    ratings: dict[str, list[float]] = {}
    halves: dict[str, list[float]] = {}
    for seed in range(n):
        cfg = demo_config(seed=seed, bootstrap=bootstrap)
        with tempfile.TemporaryDirectory() as tmp:
            board = run_method("arena", cfg, Path(tmp), show_progress=False).leaderboard
        arena, truth = board["arena"], board["simulated"]["true_ranking"]
        tau = board["simulated"]["kendall_tau"]
        alt = arena["sensitivity"].get("self_judging_include", {}).get("overall")
        tau_inc = kendall_tau([r["model"] for r in alt], truth) if alt else tau
        for r in arena["overall"]:
            ratings.setdefault(r["model"], []).append(r["bt"])
            halves.setdefault(r["model"], []).append((r["ci_high"] - r["ci_low"]) / 2)
        flagged = [j["judge"] for j in arena["judges"] if j["verbosity_flagged"]]
        wrong = sorted(set(flagged) & clean)
        ok &= tau == 1.0 and not wrong
        note = f"  CLEAN JUDGE FLAGGED: {', '.join(wrong)}" if wrong else ""
        print(f"{seed:>4} {tau:>12.3f} {tau_inc:>12.3f}  {', '.join(flagged) or '—'}{note}")
    print(
        "all seeds τ = 1.0 and no clean judge flagged: " + ("yes" if ok else "NO"),
        flush=True,
    )
    # The seeds redraw the world (answers, judge noise) on the same 24 memes: a meme-level
    # interval must be at least as wide as this spread, which leaves meme sampling out.
    print("spread of BT across seeds (1.96 sd) vs the median reported 95% half-width:")
    for model, values in ratings.items():
        spread = 1.96 * statistics.stdev(values) if len(values) > 1 else float("nan")
        half = statistics.median(halves[model])
        ratio = spread / half
        print(f"  {model:<14} spread ±{spread:5.1f}   reported ±{half:5.1f}   ratio {ratio:.2f}")
    return ok


def compare(seed: int, bootstrap: int) -> None:
    cols = [
        ("leaderboard_tau_vs_truth", "τ vs truth"),
        ("mean_ndcg_vs_truth", "NDCG vs truth"),
        ("mean_ndcg_vs_loo", "NDCG vs LOO"),
        ("mean_p_prefer_first", "P(first)"),
        ("mean_p_prefer_longer", "P(longer)"),
        ("mean_self_preference", "self-pref."),
    ]
    for null in (False, True):
        cfg = demo_config(seed=seed, bootstrap=bootstrap, null_world=null)
        with tempfile.TemporaryDirectory() as tmp:
            board = run_method(
                "arena", cfg, Path(tmp), settings=["memearena", "none", "self"], show_progress=False
            ).leaderboard
        label = "at 0 (null control)" if null else "at their defaults"
        print(f"\nPart 2: --compare-settings, seed {seed}, world parameters {label}")
        print(f"{'setting':<10}" + "".join(f"{h:>15}" for _, h in cols))
        for name, row in board["arena"]["settings_comparison"].items():
            print(f"{name:<10}" + "".join(f"{_fmt(row.get(k)):>15}" for k, _ in cols))
        print("self-preference of the self-preferring judge (95% interval over memes):")
        for name, sec in board["arena"]["settings"].items():
            sp = next(j for j in sec["judges"] if j["judge"] == "sim-judge-drizzle")
            sp = sp["self_preference"] or {}
            print(
                f"  {name:<10} {_fmt(sp.get('value'))} [{_fmt(sp.get('ci_low'))}, "
                f"{_fmt(sp.get('ci_high'))}]"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--compare-seed", type=int, default=0)
    ap.add_argument("--no-compare", action="store_true", help="Part 1 only.")
    args = ap.parse_args()
    start = time.perf_counter()
    seeds(args.seeds, args.bootstrap)
    if not args.no_compare:
        compare(args.compare_seed, args.bootstrap)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
