"""The echo method's one stage: ask the model to restate each meme (one step per meme)."""

from __future__ import annotations

from typing import Any

from memearena.engine.steps import bounded_map, run_step
from memearena.errors import ParseError
from memearena.prompts import ask, build_messages

KIND = "echo.restate"


def _parse(text: str) -> str:
    if not text.strip():
        raise ParseError("empty reply")
    return text.strip()


async def restate_all(ctx: Any) -> dict[str, dict[str, Any]]:
    """Every meme's restatement (reused from the store when its request is unchanged)."""
    cfg = ctx.cfg.echo
    out: dict[str, dict[str, Any]] = {}

    async def one(meme: Any) -> dict[str, Any] | None:
        messages = build_messages("echo/restate", text=meme.text)
        key = f"{meme.id}|{ctx.pool.request_key(cfg.model, messages)}"

        async def call() -> Any:
            return await ask(ctx.pool, cfg.model, KIND, messages, _parse, max_reasks=cfg.max_reasks)

        return await run_step(ctx.store, KIND, key, call, lambda v, _: {"text": v})

    async for meme, value in bounded_map(one, ctx.inputs.memes, window=8):
        if value is not None:
            out[meme.id] = {"meme": meme.text, **value}
    return out
