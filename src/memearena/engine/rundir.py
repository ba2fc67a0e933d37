"""The run directory: one writer (the lock), the store, the dataset binding, the config snapshot.

A run directory is bound to the datasets it was created over (``run_identity``); everything
else (models, prompts, parameters, seed, method options) may change between runs, and the steps
a change affects are recomputed. Every run start records the config (no secrets: keys are only
environment-variable names) and the prompt templates' hashes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memearena.config import RunConfig
from memearena.data import LoadResult, VerifiedImages, load_datasets
from memearena.errors import DataError, IncompatibleRunError, MemearenaError
from memearena.prompts import template_hashes
from memearena.store import RunLock, RunStore

__all__ = [
    "RUN_DB",
    "atomic_write",
    "check_compatible",
    "load_memes",
    "open_run_dir",
    "run_facts",
    "run_identity",
    "snapshot_config",
]

RUN_DB = "run.db"
"""The run's database inside its directory."""


def atomic_write(path: Path, text: str | Iterable[str]) -> None:
    """Write ``path`` whole or not at all (a kill never leaves half a file); readable by others
    (mkstemp's 0600 would hide the file). ``text`` may be pieces, written one at a time, so a
    long file is never held whole."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            if isinstance(text, str):
                f.write(text)
            else:
                f.writelines(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


VERIFIED_IMAGES = "data.verified_images"
"""Meta entry: the images verified by earlier runs (``VerifiedImages.records``, JSON)."""


def load_memes(cfg: RunConfig, store: RunStore | None = None) -> LoadResult:
    """Load every dataset of the config; per-item problems are recorded in the store. With a
    store, images verified by an earlier run and unchanged since are not decoded again."""
    verified = _verified_images(store) if store is not None else None
    loaded = load_datasets(cfg.data, cfg.image, check_images=True, verified=verified)
    if store is not None:
        for err in loaded.errors:
            store.record_error("data", f"{err.source}|{err.item}", err.reason)
        if verified is not None and verified.changed:
            store.set_meta(VERIFIED_IMAGES, json.dumps(verified.records, separators=(",", ":")))
    if not loaded.memes:
        raise DataError(no_usable_items([(e.source, e.item, e.reason) for e in loaded.errors]))
    return loaded


def _verified_images(store: RunStore) -> VerifiedImages:
    raw = store.get_meta(VERIFIED_IMAGES)
    try:
        records = json.loads(raw) if raw else {}
    except ValueError:  # a damaged record is only a cache: verified afresh
        records = {}
    return VerifiedImages(records if isinstance(records, dict) else {})


def no_usable_items(errors: Sequence[tuple[str, str, str]]) -> str:
    """The one-line error of datasets that gave no item: how many were refused and the first
    reason (``memearena data check CONFIG`` lists them all)."""
    if not errors:
        return "no usable items in the configured datasets (they hold none)"
    source, item, reason = errors[0]
    return (
        f"no usable items in the configured datasets: {len(errors):,} refused; the first, "
        f"{item} of {source}: {reason} (memearena data check CONFIG lists every one)"
    )


def run_identity(config: dict[str, Any]) -> list[list[Any]]:
    """What a run directory is bound to: its datasets' sources (format, path, image root, field
    mapping). Everything else (models, prompts, parameters, seed, method options, which items of
    those sources are kept) may change between runs: the steps it affects are recomputed."""
    out: list[list[Any]] = []
    for d in config.get("data") or []:
        out.append([d.get("format"), d.get("path"), d.get("image_root"), d.get("fields") or None])
    return sorted(out, key=lambda x: json.dumps(x, default=str))


def check_compatible(cfg: RunConfig, store: RunStore, run_dir: Path) -> None:
    """Refuse a run directory whose run read other datasets (``run_identity``)."""
    prev = store.latest_snapshot()
    if prev is None:
        return
    old = run_identity(prev["config"])
    new = run_identity(json.loads(cfg.model_dump_json()))
    if old != new:
        raise IncompatibleRunError(
            f"{run_dir}: holds a run over other datasets ({_sources(old)}; this config: "
            f"{_sources(new)}); use another --out or run name"
        )


def _sources(identity: list[list[Any]]) -> str:
    return ", ".join(f"{fmt}:{path}" if path else str(fmt) for fmt, path, *_ in identity)


def run_facts(cfg: RunConfig) -> dict[str, Any]:
    """What a report says about the run: name, date, seed, version, config (no secrets: keys
    are only env-var names) with its hash, and the prompt templates' hashes."""
    from memearena.version import __version__

    config = json.loads(cfg.model_dump_json())
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return {
        "name": cfg.run,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": cfg.seed,
        "version": __version__,
        "config_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "config": config,
        "prompt_hashes": template_hashes(),
    }


def snapshot_config(cfg: RunConfig, store: RunStore) -> None:
    """Record the config (no secrets: keys are only env-var names) and prompt hashes."""
    store.save_snapshot(json.loads(cfg.model_dump_json()), template_hashes())


@contextmanager
def open_run_dir(cfg: RunConfig, run_dir: Path) -> Iterator[RunStore]:
    """Take the run directory for this process (a second one refuses at once, before anything
    is opened), open its store, check it holds a run over the same datasets, and record the
    config snapshot. The lock is held until the block ends. A run refused before any call (a
    MemearenaError: a missing API key, no usable items) leaves no directory behind when this
    invocation created it: the folders it made are removed once the lock is released."""
    created = _missing_dirs(run_dir)
    refused = False
    try:
        # One writer per run directory, whatever the method: two would pay twice for every
        # pending call and interleave their outputs.
        with RunLock(run_dir):
            store = RunStore(run_dir / RUN_DB)
            try:
                before = store.last_call_id()
                check_compatible(cfg, store, run_dir)
                snapshot_config(cfg, store)
                try:
                    yield store
                except MemearenaError:
                    refused = store.last_call_id() == before
                    raise
            finally:
                store.close()
    except MemearenaError:
        if created and refused:
            _remove_created(created)
        raise


def _missing_dirs(run_dir: Path) -> list[Path]:
    """``run_dir`` and those of its parents that do not exist yet, deepest first."""
    out: list[Path] = []
    at = Path(run_dir).absolute()
    while not at.exists() and at != at.parent:
        out.append(at)
        at = at.parent
    return out


def _remove_created(created: list[Path]) -> None:
    """Remove the run directory this invocation created, then the parents it created if they
    are empty (another process may have put something there meanwhile: that is kept)."""
    shutil.rmtree(created[0], ignore_errors=True)
    for parent in created[1:]:
        try:
            parent.rmdir()
        except OSError:
            break
