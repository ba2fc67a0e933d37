"""The echo method's export table: one row per restatement on record (``TABLES``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memearena.export import MEME, REQUEST_HASH, MethodTables, Table, columns, open_store

KIND = "echo.restate"


def _restatements(run_dir: Path) -> Iterator[dict[str, Any]]:
    with open_store(run_dir) as store:
        for key, value in store.artifacts(KIND):  # meme|request
            meme, _, request = key.rpartition("|")
            yield {"meme": meme, "text": value.get("text"), "request_hash": request}


TABLES = MethodTables(
    tables=(
        Table(
            "restatements",
            "restatement of a meme's text",
            "run.db artifacts",
            columns(
                MEME, ("text", "string", "The restatement (untrusted model output)."), REQUEST_HASH
            ),
            read=_restatements,
        ),
    ),
)
