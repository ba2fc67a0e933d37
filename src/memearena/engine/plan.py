"""The dry run: the method's own code path against stand-ins, so the plan counts the calls the
run would make, exactly (for a run without re-asks or refusals), for every method alike. A
method whose path follows the answers (Adapt) also gives the range the count can take
(``Method.planned_range``): the plan's count is then its point estimate.

Every model is stood in for by a simulated one of the same name; input tokens are counted on
the real prompts, output tokens are at least the role's typical reply (``Method.typical_output``,
capped by a model's ``max_tokens``), and cost uses each model's real price. No endpoint is
called."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memearena.config import RunConfig, SimModelConfig
from memearena.models.backends import SimResponder, openai_messages
from memearena.models.types import GenParams, Message
from memearena.sim.catalogue import served_models
from memearena.sim.wire import parse_messages
from memearena.store import CallRecord

__all__ = ["AsServed", "PlannedCalls", "planned_from_calls", "stand_in_config"]


@dataclass(frozen=True)
class PlannedCalls:
    """The calls a run would make, per model, with estimated tokens and cost."""

    per_model: dict[str, dict[str, float]]
    calls_low: int | None = None
    """The fewest calls the run can make, where the method's path follows the answers and it
    gives a range (``Method.planned_range``); None where the count is exact."""
    calls_high: int | None = None
    """The most calls the run can make (the same)."""
    range_note: str = ""
    """What the range assumes, in one sentence (the method's)."""

    @property
    def calls(self) -> int:
        """Total planned calls."""
        return int(sum(v["calls"] for v in self.per_model.values()))

    @property
    def cost_usd(self) -> float:
        """Total estimated cost in USD."""
        return sum(v["cost_usd"] for v in self.per_model.values())

    def with_range(self, low: int, high: int, note: str = "") -> PlannedCalls:
        """The same plan with the range of calls the run can make (``calls`` is its point
        estimate, inside the range)."""
        low, high = min(low, self.calls), max(high, self.calls)
        return replace(self, calls_low=low, calls_high=high, range_note=note)


_CLEAN = {"refusal_rate": 0.0, "format_error_rate": 0.0, "latency_ms": 0.0}


def stand_in_config(cfg: RunConfig) -> RunConfig:
    """The config a dry run executes: every model stood in for by a simulated one of the same
    name, no cache, so the plan follows the real prompts and never calls an endpoint.

    A simulated model keeps its profile, without refusals, format errors or latency (the plan
    counts no re-asks); an endpoint model the simulated world serves by that name
    (``sim-serve``'s catalogue) is stood in for by that simulated model with its whole profile,
    refusals and format errors included (the simulated server gives them, and the world answers
    a request the same way wherever it is asked), so a plan against the simulated server is the
    run it will make, re-asks included; any other model by a default simulated model of its
    family, without refusals or format errors. Where a method's path depends on the answers
    (Adapt's mining votes and refinement chains), a plan for a model the simulator does not
    know is an estimate."""
    known = served_models()  # every method's registered demo models too
    stand_ins: dict[str, Any] = {}
    for name, m in cfg.models.items():
        if isinstance(m, SimModelConfig):
            stand_ins[name] = m.model_copy(update=_CLEAN)
        elif name in known or getattr(m, "model", None) in known:
            served = known.get(name) or known[m.model]  # type: ignore[union-attr]
            stand_ins[name] = served.model_copy(update={"latency_ms": 0.0, "price": m.price})
        else:
            stand_ins[name] = SimModelConfig(provider="sim", family=m.family, price=m.price)
    return cfg.model_copy(update={"models": stand_ins, "cache": False})


def planned_from_calls(
    cfg: RunConfig, calls: Iterable[CallRecord], typical_output: Mapping[str, int]
) -> PlannedCalls:
    """Tally a dry run's simulated calls per model and price them for the real config: input
    tokens as counted, output tokens at least the role's typical reply (capped by the model's
    ``max_tokens``), a batched model at its batch discount."""
    per_model: dict[str, dict[str, float]] = {}
    for c in calls:
        row = per_model.setdefault(
            c.model, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        )
        row["calls"] += 1
        row["input_tokens"] += c.input_tokens
        typical = typical_output.get(c.role, 0)
        cap = getattr(cfg.models.get(c.model), "max_tokens", None) or typical
        row["output_tokens"] += max(c.output_tokens, min(typical, cap))
    for name, row in per_model.items():
        model_cfg = cfg.models.get(name)
        if model_cfg is None or model_cfg.price is None:
            continue
        share = getattr(model_cfg, "batch_discount", 1) if getattr(model_cfg, "batch", False) else 1
        price = model_cfg.price
        row["cost_usd"] = (
            share * (row["input_tokens"] * price.input + row["output_tokens"] * price.output) / 1e6
        )
    return PlannedCalls(per_model)


class AsServed:
    """The simulated world as an endpoint model meets it: a stand-in's request goes through
    the chat-completions wire format first (what ``sim-serve`` reads back), so the stand-in's
    replies are those the simulated server gives, and a plan against it is the run it makes."""

    def __init__(self, world: SimResponder, endpoints: Iterable[str]) -> None:
        self.world = world
        self.endpoints = frozenset(endpoints)

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        """The world's reply, to the request as the endpoint would have read it."""
        if model in self.endpoints:
            messages = parse_messages(openai_messages(messages))
        return str(self.world.respond(model, role, messages, params))
