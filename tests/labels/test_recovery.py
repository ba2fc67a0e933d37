"""On simulated annotators of known noise, the agreement figures recover what was planted."""

from __future__ import annotations

import math
from pathlib import Path

from memearena.labels import LabelStore, queue_items
from memearena.labels.agreement import agreement
from memearena.labels.simulated import simulate_labels
from memearena.sim.annotators import demo_annotators


def test_judge_kappa_and_annotator_alpha_recover_their_planted_values(
    small_arena: Path, tmp_path: Path
) -> None:
    planted = simulate_labels(small_arena, demo_annotators(3), queues=["battles"])
    try:
        figures = agreement(small_arena, n_boot=400)
        assert planted.kappa and len(planted.kappa) == 4  # the demo panel's four judges
        spread = max(planted.kappa.values()) - min(planted.kappa.values())
        assert spread > 0.02  # the judges disagree with the panel's truth by different amounts
        for judge, kappa in planted.kappa.items():
            (row,) = figures.figure("kappa", judge=judge, field="all")
            assert row["ci_low"] <= kappa <= row["ci_high"], (judge, kappa, row)
            assert row["ci_high"] - row["ci_low"] < 0.2
        (alpha,) = figures.figure("alpha", queue="battles", field="overall")
        want = planted.alpha["battles.overall"]
        assert alpha["ci_low"] <= want <= alpha["ci_high"], (want, alpha)
        assert not math.isnan(want) and 0.2 < want < 0.8
    finally:
        # The fixture's run is shared: leave no labels behind for other tests.
        (small_arena / "labels.sqlite").unlink()
        for suffix in ("-wal", "-shm"):
            (small_arena / f"labels.sqlite{suffix}").unlink(missing_ok=True)


def test_a_label_of_an_item_the_run_no_longer_has_is_kept_and_reported(
    small_arena: Path, tmp_path: Path
) -> None:
    items = queue_items(small_arena, "battles")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("battles.jsonl", "leaderboard.json", "run.db"):
        (run / name).write_bytes((small_arena / name).read_bytes())
    with LabelStore(run) as store:
        store.add(queue="battles", item_key=items[0].key, annotator="ana", answer={"overall": "A"})
        store.add(
            queue="battles", item_key="gone." + "0" * 60, annotator="ana", answer={"overall": "B"}
        )
    figures = agreement(run, n_boot=50)
    assert figures.orphans == {"battles": ["gone." + "0" * 60]}
    assert figures.queues["battles"]["orphan_labels"] == 1
    assert figures.queues["battles"]["labelled"] == 1
    assert len(LabelStore(run, create=False).labels()) == 2


def test_the_notebook_gets_the_figures_as_a_frame(small_arena: Path, tmp_path: Path) -> None:
    import pytest

    pd = pytest.importorskip("pandas")
    import memearena

    items = queue_items(small_arena, "battles")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("battles.jsonl", "leaderboard.json", "run.db"):
        (run / name).write_bytes((small_arena / name).read_bytes())
    with LabelStore(run) as store:
        for it in items[:20]:
            store.add(
                queue="battles", item_key=it.key, annotator="ana", answer={"correctness": "A"}
            )
    frame = memearena.label_agreement(run, bootstrap=50).to_pandas()
    assert isinstance(frame, pd.DataFrame)
    kappa = frame[(frame.figure == "kappa") & (frame.field == "correctness")]
    assert len(kappa) == 4 and {"value", "ci_low", "ci_high"} <= set(frame.columns)
    assert (kappa.ci_low <= kappa.value).all() and (kappa.value <= kappa.ci_high).all()
