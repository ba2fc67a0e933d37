"""``memearena models check``: one tiny multimodal request to every configured model."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
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


def check_models(cfg: RunConfig, console: Console) -> bool:
    """Ping each model (no cache); print a table; True when every model answered. Endpoint
    failures (refused, unknown host, bad key, unknown model) fail at once, naming the model."""
    warn_missing_keys(cfg, console)
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

    rows = asyncio.run(go())
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
            console_safe(text),
        )
    console.print(table)
    for _name, status, _dt, text in rows:
        if status == "failed":  # the whole reason, on one line (table cells wrap it)
            console.print(
                f"[red]failed:[/red] {console_safe(text)}", highlight=False, soft_wrap=True
            )
    return all(r[1] == "ok" for r in rows)
