"""The echo method's part of the simulated world: a model that restates what it is shown."""

from __future__ import annotations

from memearena.sim.facts import WorldCore, tag_block
from memearena.sim.parts import SimRequest, register_part


class EchoSim:
    def __init__(self, world: WorldCore) -> None:
        self.world = world

    def reply(self, request: SimRequest) -> str:
        text = tag_block(request.prompt, "meme_text") or ""
        return f"The meme says: {text}" if request.profile.cfg.skill >= 0.5 else "A meme."


register_part("echo", EchoSim)
