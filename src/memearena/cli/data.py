"""``memearena data check CONFIG``: validate every item of a run config's datasets.

Exit status: 0 every item is usable, 1 some items failed (listed), 2 the config or a dataset file
is invalid (one line on stderr).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # imported by the command itself: `memearena rank` and `--help` never need them
    from rich.console import Console

    from memearena.config import DatasetConfig, ImageConfig
    from memearena.data import Duplicate, ItemError, LoadResult


@dataclass
class _Checked:
    cfg: DatasetConfig
    result: LoadResult
    ok: int
    harmful: int
    not_harmful: int
    unlabelled: int
    errors: list[ItemError]


def _check_dataset(cfg: DatasetConfig, image_cfg: ImageConfig, result: LoadResult) -> _Checked:
    """Prepare every loaded image exactly as a run would; failures join the item errors."""
    from memearena.data import ImageError, ItemError, demo_dir, prepare_image

    errors = list(result.errors)
    ok = harmful = not_harmful = unlabelled = 0
    source = str(cfg.path) if cfg.path is not None else str(demo_dir() / "memes.jsonl")
    for meme in result.memes:
        paths = [meme.image_path] if meme.image_path is not None else []
        if isinstance(meme.annotations.get("biased_image"), str):
            paths.append(Path(meme.annotations["biased_image"]))
        try:
            for p in paths:
                prepare_image(p, image_cfg)
        except ImageError as e:
            errors.append(ItemError(source, meme.id, e.reason))
            continue
        ok += 1
        if meme.harmful is True:
            harmful += 1
        elif meme.harmful is False:
            not_harmful += 1
        else:
            unlabelled += 1
    return _Checked(cfg, result, ok, harmful, not_harmful, unlabelled, errors)


def _name(cfg: DatasetConfig) -> str:
    return f"{cfg.format}: {cfg.path}" if cfg.path is not None else f"{cfg.format}: bundled"


def _render(
    console: Console, checked: list[_Checked], cross: list[ItemError], merged: LoadResult
) -> None:
    from rich.table import Table
    from rich.text import Text

    from memearena.report.safe import NAME_CHARS, clip, strip_control

    table = Table(title="Datasets", show_lines=False)
    table.add_column("dataset", overflow="fold")
    for col in ("ok", "harmful", "not harmful", "unlabelled", "errors"):
        table.add_column(col, justify="right")
    table.add_column("errors by kind", overflow="fold")
    for c in checked:
        kinds = Counter(e.kind for e in c.errors)
        by_kind = ", ".join(f"{k} ×{n}" for k, n in sorted(kinds.items()))
        table.add_row(
            Text(strip_control(_name(c.cfg))),
            str(c.ok),
            str(c.harmful),
            str(c.not_harmful),
            str(c.unlabelled),
            Text(str(len(c.errors)), style="red" if c.errors else ""),
            Text(by_kind),
        )
    console.print(table)
    if merged.duplicates:
        console.print(Text(_duplicates_line(merged.duplicates)), soft_wrap=True)
    errors = [e for c in checked for e in c.errors] + cross
    if errors:
        console.print(Text(f"{len(errors)} item error(s):", style="bold red"))
        for e in errors:
            # Text (not markup): file names and reasons may contain [brackets].
            line = f"{e.source}  {clip(e.item, NAME_CHARS)}  {clip(e.reason, 2000)}"
            console.print(Text(strip_control(line)), soft_wrap=True)
    else:
        total = sum(c.ok for c in checked) - sum(d.count - 1 for d in merged.duplicates)
        console.print(Text(f"all {total} items ok", style="bold green"))


def _duplicates_line(dups: list[Duplicate]) -> str:
    copies = sum(d.count - 1 for d in dups)
    shown = ", ".join(f"{d.uid} ×{d.count}" for d in dups[:5])
    more = f", … (+{len(dups) - 5})" if len(dups) > 5 else ""
    return (
        f"{len(dups)} item(s) found more than once with identical rows, kept once "
        f"({copies} extra copies merged): {shown}{more}"
    )


def check_command(
    config: Annotated[Path, typer.Argument(help="Run config (YAML) whose datasets to check.")],
) -> None:
    """Validate every item of the config's datasets and print a summary table.

    Each image is prepared exactly as a run would send it. Exit 0 if every item is ok, 1 if some
    items failed (they are listed), 2 if the config or a dataset file is invalid.
    """
    from rich.console import Console

    from memearena.config import load_config
    from memearena.data import load_dataset, merge_results
    from memearena.errors import MemearenaError

    try:
        run_cfg = load_config(config)
        results = [(d, load_dataset(d, run_cfg.image, check_images=True)) for d in run_cfg.data]
        merged = merge_results(results)
        # Errors only the merge finds: items whose copies in two datasets disagree.
        cross = merged.errors[sum(len(r.errors) for _, r in results) :]
        checked = [_check_dataset(d, run_cfg.image, r) for d, r in results]
    except MemearenaError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    _render(Console(highlight=False), checked, cross, merged)
    if cross or any(c.errors for c in checked):
        raise typer.Exit(1)
