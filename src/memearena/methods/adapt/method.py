"""Adapt as a method of the run lifecycle (``memearena.engine.protocol.Method``).

Its stages are ``memearena.methods.adapt.stages`` (and the stage modules it runs); its analysis
(records -> the ``adapt`` section, pure) is ``memearena.methods.adapt.analysis``; its view is
``memearena.methods.adapt.view``. What is Adapt's own here: the simulated world's Adapt switches
(the null world, and the refined images it must recognise), the lineage, scores and
human-labelling files, and what an incomplete Adapt run lacks."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from memearena.config import RunConfig
from memearena.engine.protocol import Finished, Inputs, MethodRun, RunContext
from memearena.engine.rundir import atomic_write, load_memes
from memearena.engine.status import ModelStatus, RunStatus, spend_cap_problem
from memearena.engine.steps import seeded_rng
from memearena.errors import ConfigError
from memearena.jsonsafe import dumps_strict
from memearena.methods.adapt import sim as sim  # its simulated part registers
from memearena.methods.adapt import view
from memearena.methods.adapt.result import AdaptResult
from memearena.methods.adapt.stages import TYPICAL_OUTPUT_TOKENS, AdaptOutcome, AdaptPipeline
from memearena.report.safe import csv_safe

if TYPE_CHECKING:
    from rich.console import Console

    from memearena.store import RunStore

__all__ = ["HUMAN_KEY_FILE", "HUMAN_LABELS_FILE", "Adapt", "adapt_status", "csv_cell"]


class Adapt:
    """Mining, misbeliefs, references, scoring and refinement of one model's weaknesses."""

    name: ClassVar[str] = "adapt"
    title: ClassVar[str] = "Adapt"
    keys: ClassVar[tuple[str, ...]] = ("adapt",)
    outputs: ClassVar[tuple[str, ...]] = ("adapt_chains.jsonl", "adapt_scores.jsonl")
    typical_output: ClassVar[Mapping[str, int]] = TYPICAL_OUTPUT_TOKENS
    result: ClassVar[type[AdaptResult]] = AdaptResult

    def __init__(self, cfg: RunConfig, options: Mapping[str, Any]) -> None:
        if cfg.adapt is None:
            raise ConfigError("config: adapt: section is missing")
        self.cfg = cfg
        self.acfg = cfg.adapt

    def models(self) -> list[str]:
        a = self.acfg
        roles = [
            a.miner,
            a.text_judge,
            a.image_examiner,
            a.instruction_writer,
            a.narrator,
            a.reference_model,
            a.reference_judge,
            *a.scorers,
            a.refiner,
            a.checker,
            *a.targets,
        ]
        if a.retrieval == "embeddings" and a.embedding_model:
            roles.append(a.embedding_model)
        return roles

    def prepare(self, console: Console | None) -> None:
        return None

    def load(self, store: RunStore | None, run_dir: Path) -> Inputs:
        return Inputs(list(load_memes(self.cfg, store).memes))

    def setup_world(self, world: Any) -> bool:
        world.adapt.null_world = self.acfg.sim.null_world
        # The null world answers the same requests differently: its replies must never be
        # cached alongside (or replayed as) the ordinary world's.
        return not self.acfg.sim.null_world

    async def run(self, ctx: RunContext) -> MethodRun:
        # The simulated world is told which meme an image shows (a refined meme is the erased
        # image under new text) only for models it runs itself: an endpoint, the simulated
        # server included, sees the image and nothing more, and so does a dry run's stand-in.
        in_process = not (set(self.models()) & ctx.stand_ins)
        on_image = ctx.world.adapt.register_image if in_process else None
        pipe = AdaptPipeline(
            ctx.cfg,
            ctx.inputs.memes,
            ctx.pool,
            ctx.store,
            ctx.progress,
            on_image,
            dry_run=ctx.planning,
        )
        outcome = await pipe.run()
        return MethodRun(outcome, outcome.stopped)

    def finish(self, ctx: RunContext, run: MethodRun, *, bootstrap: int | None) -> Finished:
        from memearena.methods.adapt.analysis import adapt_section

        outcome: AdaptOutcome = run.outcome
        section = adapt_section(ctx.cfg, outcome, bootstrap=bootstrap, store=ctx.store)
        write_adapt_files(ctx.run_dir, ctx.cfg, outcome)
        status = adapt_status(ctx.cfg, outcome, ctx.store, max_cost=ctx.max_cost)
        return Finished({"adapt": section}, status)

    def planned_range(self, run: MethodRun, calls: int) -> tuple[int, int, str]:
        """The calls a run can make, given the dry run's ``calls`` over its outcome: the
        re-ask and chain-length bounds. The plan's mining, references and scoring of the
        originals are kept (its taxonomy, items and seeds are the run's); each refinement chain
        may stop at its first step making one call (its refiner's; a loop and its control, and
        different targets, may share that request) or walk all ``steps``, each with every
        rewrite checked (``max_rewrites``), a fresh reference, the answer and every scorer; any
        call may be re-asked ``max_reasks`` times, or not at all."""
        acfg = self.acfg
        outcome: AdaptOutcome = run.outcome
        chains = outcome.chains
        refinement = outcome.stage_calls.get("refinement", 0)
        kept = max(calls - refinement, 0)
        firsts = {(c.get("category"), c.get("repeat"), c.get("seed")) for c in chains}
        per_step = 2 * acfg.max_rewrites + acfg.reference_candidates + 1 + 1 + len(acfg.scorers)
        low = kept + len(firsts)
        high = (kept + len(chains) * acfg.steps * per_step) * (1 + acfg.max_reasks)
        note = (
            "the plan's taxonomy, items and seeds kept; each refinement chain from its first "
            f"step to all {acfg.steps}, every call re-asked up to {acfg.max_reasks} times or not"
        )
        return low, high, note

    @staticmethod
    def summary(console: Console, board: Mapping[str, Any]) -> None:
        section = board.get("adapt")
        if isinstance(section, dict) and section.get("models") is not None:
            view.print_adapt_summary(console, section)


def adapt_status(
    cfg: RunConfig, outcome: AdaptOutcome, store: RunStore, *, max_cost: float | None
) -> RunStatus:
    """Complete when every target's answers were scored and nothing waits for a re-run;
    nothing scored at all is "nothing usable" (exit 1), like every method's."""
    assert cfg.adapt is not None
    spent, upper = store.spend()
    problems: list[str] = []
    if outcome.stopped:
        problems.append(spend_cap_problem(max_cost))
    asked: Counter[str] = Counter(o["target"] for o in outcome.originals)
    scored: Counter[str] = Counter(
        o["target"] for o in outcome.originals if o.get("outcome") == "scored"
    )
    rows = [
        ModelStatus(t, "target", asked[t], scored[t], asked[t] - scored[t])
        for t in cfg.adapt.targets
    ]
    if not outcome.stopped:
        if not any(scored.values()):
            problems.append(
                f"no target answer was scored ({len(outcome.originals)} answers, "
                f"{outcome.assigned} (meme, category) items): nothing usable"
            )
        else:
            for r in rows:
                if r.done == 0:
                    problems.append(f"target {r.model!r}: no answer scored (0 of {r.planned})")
        if outcome.pending:
            problems.append(
                f"{outcome.pending} step(s) left undone by model failures: re-run the same "
                "command to retry them"
            )
    n = sum(scored.values())
    flagged = (
        f", {len(outcome.flagged):,} meme(s) not scored: erasure over adapt.erase_max_mask"
        if outcome.flagged
        else ""
    )
    return RunStatus(
        complete=not problems,
        problems=problems,
        spent_usd=spent,
        spent_upper_bound_usd=upper,
        max_cost=max_cost,
        stopped=outcome.stopped,
        models=rows,
        produced=f"{n:,} scored answers, {len(outcome.chains):,} refinement chains{flagged}",
    )


def write_adapt_files(run_dir: Path, cfg: RunConfig, outcome: AdaptOutcome) -> None:
    """``adapt_chains.jsonl`` (the lineage), ``adapt_scores.jsonl`` and the human-labelling
    export, each written whole or not at all."""
    atomic_write(
        run_dir / "adapt_chains.jsonl",
        "".join(dumps_strict(c, ensure_ascii=False) + "\n" for c in outcome.chains),
    )
    atomic_write(
        run_dir / "adapt_scores.jsonl",
        "".join(dumps_strict(o, ensure_ascii=False) + "\n" for o in outcome.originals),
    )
    if cfg.adapt is not None and cfg.adapt.human_export:
        from memearena.data import load_datasets

        loaded = load_datasets(cfg.data, cfg.image, check_images=False)
        images = {m.uid: str(m.image_path) if m.image_path else "" for m in loaded.memes}
        _human_export(run_dir, cfg, outcome, images)


HUMAN_LABELS_FILE = "adapt_human_labels.csv"
"""Blind labelling sheet: item, image, text, and empty ``harmful`` / ``category`` columns."""
HUMAN_KEY_FILE = "adapt_human_key.csv"
"""What each item of the labelling sheet is (kept apart so the labellers stay blind)."""
HUMAN_IMAGES_DIR = "adapt_human_images"
"""The sheet's images, copied under neutral names (``item-00001.png``): a path such as
``img/erased/m10.png`` would tell a labeller which items are rewrites, and of which meme."""


def csv_cell(value: object) -> object:
    """A cell a spreadsheet will show as text, never evaluate (formula injection)."""
    return csv_safe("" if value is None else value)


def _refined_image(run_dir: Path, shown: dict[str, Any] | None) -> str | None:
    """Where the image a rewrite was shown with is ("": it went out with none; None: the
    meme's own image)."""
    if not shown or shown.get("source") in ("original", "no image"):
        return None
    if not shown.get("path"):
        return ""
    path = Path(shown["path"])
    return str(path if path.is_absolute() else run_dir / path)


def _human_export(run_dir: Path, cfg: RunConfig, outcome: Any, memes: dict[str, Any]) -> int:
    """Refined items and their matched originals, shuffled, for blind harmfulness labels."""
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for c in outcome.chains:
        for s in c["steps"]:
            if not s.get("text"):
                continue
            items.setdefault(
                ("refined", s["text"]),
                {
                    "kind": "refined",
                    "meme": s["meme"],
                    "text": s["text"],
                    "category": c["category"],
                    # Labelled on what the target saw: the erased image, never the original.
                    "image": _refined_image(run_dir, s.get("image")),
                },
            )
            items.setdefault(
                ("original", s["meme"]),
                {
                    "kind": "original",
                    "meme": s["meme"],
                    "text": s["parent_text"],
                    "category": c["category"],
                },
            )
    rows = sorted(items.values(), key=lambda r: (r["meme"], r["kind"], r["text"]))
    seeded_rng(cfg.seed, "adapt.human_export").shuffle(rows)
    labels: list[list[object]] = [["item", "image", "text", "harmful", "category"]]
    key: list[list[object]] = [["item", "kind", "meme", "category", "text", "image"]]
    shown = run_dir / HUMAN_IMAGES_DIR
    staging = run_dir / f".{HUMAN_IMAGES_DIR}.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for i, r in enumerate(rows, start=1):
        item = f"item-{i:05d}"
        image = r["image"] if r.get("image") is not None else memes.get(r["meme"])
        listed = _neutral_copy(Path(image), staging, item) if image else ""
        labels.append([item, csv_cell(listed), csv_cell(r["text"]), "", ""])
        key.append(
            [
                item,
                r["kind"],
                csv_cell(r["meme"]),
                csv_cell(r["category"]),
                csv_cell(r["text"]),
                csv_cell(image),
            ]
        )
    # The images of the previous export go as the new ones take their place.
    old = run_dir / f".{HUMAN_IMAGES_DIR}.old"
    shutil.rmtree(old, ignore_errors=True)
    if shown.exists():
        shown.rename(old)
    staging.rename(shown)
    shutil.rmtree(old, ignore_errors=True)
    for name, table in ((HUMAN_LABELS_FILE, labels), (HUMAN_KEY_FILE, key)):
        buf = _Buffer()
        csv.writer(buf).writerows(table)
        atomic_write(run_dir / name, buf.text())
    return len(rows)


def _neutral_copy(src: Path, staging: Path, item: str) -> str:
    """A copy of ``src`` under the item's own name in the sheet's image folder (a copy, not a
    link: a labelling tool that edits an image in place must never reach the dataset); its
    path relative to the run directory, or "" when the image is gone."""
    dst = staging / f"{item}{src.suffix.lower()}"
    try:
        shutil.copyfile(src, dst)
    except OSError:
        return ""
    return f"{HUMAN_IMAGES_DIR}/{dst.name}"


class _Buffer:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def text(self) -> str:
        return "".join(self.parts)
