"""`memearena adapt CONFIG`: dry run, a run that resumes, the budget stop, outputs, the human
labelling round trip, and the report's Adapt section."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from adapt_helpers import run_pipeline, small_config
from typer.testing import CliRunner

from memearena.cli import app
from memearena.methods.adapt.analysis import adapt_section
from memearena.methods.adapt.view import adapt_view
from memearena.report.html import render_report

runner = CliRunner()

CONFIG = """
run: cli-adapt
seed: 1
models:
  t-good: {provider: sim, skill: 0.85, family: good}
  t-weak: {provider: sim, skill: 0.4, family: weak, category_skill: {Race: 0.05}}
  judge:
    {provider: sim, skill: 0.85, noise: 0.1, family: judge, price: {input: PRICE, output: PRICE}}
  refiner: {provider: sim, skill: 0.7, family: refiner}
  checker: {provider: sim, skill: 0.9, family: checker}
data:
  - {format: demo, limit: 8}
adapt:
  targets: [t-good, t-weak]
  miner: judge
  text_judge: judge
  image_examiner: judge
  instruction_writer: judge
  narrator: judge
  reference_model: judge
  reference_judge: judge
  scorers: [judge]
  refiner: refiner
  checker: checker
  repeats: 2
  steps: 3
  reference_candidates: 2
  bootstrap: 100
"""


def write_config(tmp: Path, price: float = 0.0) -> Path:
    p = tmp / "adapt.yaml"
    p.write_text(CONFIG.replace("PRICE", str(price)))
    return p


def test_dry_run_plans_calls_and_calls_nothing(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, price=2.5)
    r = runner.invoke(app, ["adapt", str(cfg), "--dry-run", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    assert "planned calls" in r.output and "judge" in r.output
    assert not (tmp_path / "runs").exists()


def test_a_run_writes_its_outputs_and_resumes(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    out = tmp_path / "runs"
    r = runner.invoke(app, ["adapt", str(cfg), "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    run = out / "cli-adapt"
    board = json.loads((run / "leaderboard.json").read_text())
    sec = board["adapt"]
    row = sec["models"][0]
    for key in (
        "model",
        "avg_score",
        "avg_score_ci",
        "failure_rate",
        "failure_rate_ci",
        "refined_failure_rate",
        "refined_failure_rate_ci",
        "control_failure_rate",
    ):
        assert key in row
    assert set(sec["by_category"]) <= set(t["name"] for t in sec["taxonomy"])
    for w in sec["weaknesses"]:
        assert set(w) >= {"model", "category", "misbelief", "steps", "score_drop"}
        assert w["score_drop"] > 0
    assert sec["simulated"]["category_skill"] == {"t-weak": {"Race": 0.05}}
    assert (run / "adapt_chains.jsonl").read_text().strip()
    html = (run / "report.html").read_text()
    assert 'id="adapt"' in html and "Conditional loop vs unconditional control" in html
    # A standalone Adapt run's report has what every method's has: run facts, usage, errors.
    assert board["run"]["name"] == "cli-adapt" and board["run"]["config_sha256"] in html
    assert sum(u["calls"] for u in sec["usage"].values()) > 0 and "errors" in sec
    assert 'id="adapt-usage"' in html and 'id="adapt-errors"' in html
    again = runner.invoke(app, ["adapt", str(cfg), "--out", str(out), "--no-progress"])
    assert again.exit_code == 0 and "0 new model calls" in again.output
    assert json.loads((run / "leaderboard.json").read_text())["adapt"]["models"] == sec["models"]


def test_the_budget_stops_cleanly_and_a_rerun_resumes(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, price=2000.0)  # about a dollar a call
    out = tmp_path / "runs"
    r = runner.invoke(
        app, ["adapt", str(cfg), "--out", str(out), "--no-progress", "--max-cost", "20"]
    )
    assert r.exit_code == 3, r.output
    assert "stopped" in r.output
    r = runner.invoke(app, ["adapt", str(cfg), "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output


def test_bad_config_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(CONFIG.replace("PRICE", "0").replace("refiner: refiner", "refiner: nobody"))
    r = runner.invoke(app, ["adapt", str(p)])
    assert r.exit_code == 2
    assert "adapt.refiner: model 'nobody' is not defined" in r.output
    assert "Traceback" not in r.output


def test_human_labels_round_trip(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    out = tmp_path / "runs"
    assert (
        runner.invoke(app, ["adapt", str(cfg), "--out", str(out), "--no-progress"]).exit_code == 0
    )
    run = out / "cli-adapt"
    with (run / "adapt_human_labels.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    with (run / "adapt_human_key.csv").open(newline="") as f:
        key = {r["item"]: r for r in csv.DictReader(f)}
    assert rows and set(rows[0]) == {"item", "image", "text", "harmful", "category"}
    kinds = {key[r["item"]]["kind"] for r in rows}
    assert kinds == {"refined", "original"}  # blind: the sheet itself does not say which
    # A refined item is labelled on the image its target saw: the text-erased one, listed
    # under the item's own name, so that no path tells a rewrite from an original or names
    # its meme; the key says where each image came from.
    assert {p.name for p in (run / "adapt_human_images").iterdir()} == {
        Path(r["image"]).name for r in rows
    }
    for r in rows:
        assert r["image"] == f"adapt_human_images/{r['item']}.png", r
        source = key[r["item"]]["image"]
        erased = "/erased/" in source
        assert erased == (key[r["item"]]["kind"] == "refined"), r
        assert (run / r["image"]).read_bytes() == Path(source).read_bytes()
        # A copy, not a link: editing the sheet's image never reaches the dataset.
        assert not (run / r["image"]).samefile(source)
    # A second export replaces the first's images, none left over.
    assert (
        runner.invoke(app, ["adapt", str(cfg), "--out", str(out), "--no-progress"]).exit_code == 0
    )
    assert len(list((run / "adapt_human_images").iterdir())) == len(rows)
    assert not [p for p in run.iterdir() if p.name.startswith(".adapt_human_images")]
    # Labellers: every original harmful, refined ones harmful only if a group name survived.
    labelled = run / "labels.csv"
    with labelled.open("w", newline="") as f:
        w = csv.DictWriter(f, ["item", "image", "text", "harmful", "category"])
        w.writeheader()
        for r in rows:
            kind = key[r["item"]]["kind"]
            r["harmful"] = "1" if kind == "original" or "VELLMARIAN" in r["text"] else "0"
            w.writerow(r)
        w.writerow({"item": "item-99999", "harmful": "1"})
    got = runner.invoke(app, ["adapt", "labels", str(run), str(labelled), "--json"])
    assert got.exit_code == 0, got.output
    doc = json.loads(got.output)
    assert doc["original"]["harmful_share"] == 1.0
    assert 0.0 <= doc["refined"]["harmful_share"] < 1.0
    assert doc["problems"] == [f"line {len(rows) + 2}: unknown item 'item-99999'"]
    for m in doc["models"]:
        assert m["rewrites"] > 0 and m["agent_failure_rate"] is not None


def test_the_report_section_escapes_untrusted_text(tmp_path: Path) -> None:
    cfg = small_config(steps=1)
    out, _, _ = run_pipeline(cfg, tmp_path)
    sec = adapt_section(cfg, out, bootstrap=50)
    evil = '<script>alert("x")</script>'
    sec["chains"][0]["steps"][0]["text"] = evil
    sec["taxonomy"][0]["name"] = evil
    view = adapt_view({"adapt": sec})
    assert view is not None and view["chains"][0]["steps"][0]["text"] == evil
    html = render_report({"adapt": sec})
    assert evil not in html and "&lt;script&gt;" in html


def test_self_scoring_is_flagged_and_a_panel_reports_agreement(tmp_path: Path) -> None:
    cfg = small_config(steps=1, scorers=["sim-judge-harbor", "sim-aurora"])
    out, _, _ = run_pipeline(cfg, tmp_path)
    sec = adapt_section(cfg, out, bootstrap=50)
    by = {m["model"]: m for m in sec["models"]}
    assert by["sim-aurora"]["scored_by_itself"] == ["sim-aurora"]
    assert by["sim-ember"]["scored_by_itself"] == []
    # With another scorer present, a target's own score is left out of its score.
    for o in out.originals:
        if o["target"] == "sim-aurora" and o["outcome"] == "scored":
            assert o["score"] == o["by_scorer"]["sim-judge-harbor"]
            assert not o["self_scored"]
    (agree,) = sec["scorer_agreement"]
    assert agree["scorers"] == ["sim-judge-harbor", "sim-aurora"] and agree["pairs"] > 0


def test_rewritten_text_can_be_drawn_onto_the_erased_image(tmp_path: Path) -> None:
    cfg = small_config(steps=1, render_text=True)
    out, _, scripted = run_pipeline(cfg, tmp_path)
    steps = [s for c in out.chains for s in c["steps"] if s.get("text")]
    assert steps
    world = scripted.world.adapt
    for s in steps:
        # Each rewrite went out on its own drawn image, which the world knows shows that
        # rewrite (and not the original caption).
        assert s["image"]["rendered"] and s["image"]["source"] == "dataset"
        assert world.caption_shown(s["image"]["sha256"]) == s["text"]

    from memearena.data import load_datasets, prepare_image
    from memearena.methods.adapt.erase import render_caption
    from memearena.models.types import ImagePart

    meme = load_datasets(cfg.data, cfg.image).memes[0]
    assert meme.erased_image is not None
    img = prepare_image(meme.erased_image)
    base = ImagePart(img.data_url, img.sha256)
    drawn = render_caption(base, "a softer caption")
    assert drawn.data_url.startswith("data:image/png;base64,")
    assert drawn.sha256 == render_caption(base, "a softer caption").sha256  # deterministic
    assert drawn.sha256 != render_caption(base, "another caption").sha256
    assert drawn.sha256 != base.sha256
