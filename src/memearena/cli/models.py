"""``memearena models check``: one tiny multimodal request to every configured model."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import logging
import os
import time

from PIL import Image, ImageDraw
from rich.console import Console
from rich.table import Table

from memearena.config import RunConfig
from memearena.errors import MemearenaError
from memearena.models import ModelPool
from memearena.models.types import ImagePart
from memearena.prompts import build_messages
from memearena.report.safe import console_safe, name_cell
from memearena.sim.serve import demo_world


def ping_image() -> ImagePart:
    """A tiny drawn image (a red square on white) as a data URL."""
    im = Image.new("RGB", (64, 64), "white")
    ImageDraw.Draw(im).rectangle((16, 16, 48, 48), fill="red")
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    raw = buf.getvalue()
    url = "data:image/png;base64," + base64.b64encode(raw).decode()
    return ImagePart(url, hashlib.sha256(raw).hexdigest())


def missing_keys(cfg: RunConfig) -> list[str]:
    """One warning per configured model whose ``api_key_env`` variable is unset or empty."""
    out = []
    for name, m in cfg.models.items():
        env = getattr(m, "api_key_env", None)
        if env and not os.environ.get(env):
            out.append(f"model {name!r}: environment variable {env} is not set (its API key)")
    return out


def warn_missing_keys(cfg: RunConfig, console: Console) -> list[str]:
    """Print the ``missing_keys`` warnings (escaped); returns them."""
    found = missing_keys(cfg)
    for w in found:
        console.print(
            f"[yellow]warning:[/yellow] {console_safe(w)}", highlight=False, soft_wrap=True
        )
    return found


def _reason(name: str, text: str) -> str:
    """A failure without its ``model 'name' (id at endpoint): `` prefix (the table's first
    column names the model; the line below the table keeps the whole message)."""
    head = f"model {name!r} ("
    if text.startswith(head) and "): " in text:
        text = text.split("): ", 1)[1]
    if " (check " in text:  # what to check is on the line below too
        text = text.split(" (check ", 1)[0] + " (see below)"
    return text


def check_models(cfg: RunConfig, console: Console) -> bool:
    """Ping each model (no cache); print a table; True when every model answered. Endpoint
    failures (refused, unknown host, bad key, unknown model) fail at once, naming the model."""
    # A missing key fails its row below, naming the variable: no warning ahead of the table.
    messages = build_messages("common/ping.j2", image=ping_image())
    pool = ModelPool(cfg.models, responder=demo_world(cfg.seed))

    async def one(name: str) -> tuple[str, str, float, str]:
        t0 = time.perf_counter()
        try:
            c = await pool.complete(name, messages, role="ping")
        except MemearenaError as e:
            return name, "failed", time.perf_counter() - t0, str(e)
        status = "refused" if c.refusal else ("empty" if not c.text.strip() else "ok")
        return name, status, time.perf_counter() - t0, c.text.strip()[:60]

    async def go() -> list[tuple[str, str, float, str]]:
        try:
            return await asyncio.gather(*(one(n) for n in cfg.models))
        finally:
            await pool.aclose()

    # Each failure is this command's output (its row and its line below), not also a log line.
    log = logging.getLogger("memearena.models")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        rows = asyncio.run(go())
    finally:
        log.setLevel(level)
    table = Table(title="models check")
    for col in ("model", "provider", "status", "latency", "reply / error"):
        table.add_column(col)
    for name, status, dt, text in rows:
        colour = "green" if status == "ok" else "red"
        table.add_row(  # names and replies are untrusted: shown inert (no markup, no escapes)
            name_cell(name),
            cfg.models[name].provider,
            f"[{colour}]{status}[/]",
            f"{dt * 1000:.0f} ms",
            # A failure's model is in the first column; its whole reason is on a line below.
            console_safe(_reason(name, text) if status == "failed" else text),
        )
    console.print(table)
    for _name, status, _dt, text in rows:
        if status == "failed":  # the whole reason, on one line (table cells wrap it)
            console.print(
                f"[red]failed:[/red] {console_safe(text)}", highlight=False, soft_wrap=True
            )
    return all(r[1] == "ok" for r in rows)
