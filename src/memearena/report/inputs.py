"""What a report page was made from: the digest of its inputs and the date it shows, recorded
in its head by ``memearena.report.html.render_report``, read back here without the renderer
(a run that finds the same inputs keeps the page)."""

from __future__ import annotations

import html
import re
from pathlib import Path

__all__ = ["INPUTS_HEAD_BYTES", "rendered_inputs"]

INPUTS_HEAD_BYTES = 4096
"""Where a report records its inputs: within this many bytes of its start."""

_INPUTS_META = re.compile(
    r'<meta name="memearena-report-inputs" content="([0-9a-f]{64})" data-date="([^"<>]{0,64})">'
)


def rendered_inputs(path: Path) -> tuple[str, str] | None:
    """The (inputs digest, date) a report file records in its head, or None (no such file, or
    one rendered without them: a hand-edited or older page is never taken as current)."""
    try:
        with open(path, "rb") as f:
            head = f.read(INPUTS_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    found = _INPUTS_META.search(head)
    return (found[1], html.unescape(found[2])) if found else None
