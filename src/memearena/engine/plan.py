"""The dry run: the method's own code path against stand-ins, so the plan counts the calls the
run would make, exactly (for a run without re-asks or refusals), for every method alike.

Every model is stood in for by a simulated one of the same name; input tokens are counted on
the real prompts, output tokens are at least the role's typical reply (``Method.typical_output``,
capped by a model's ``max_tokens``), and cost uses each model's real price. No endpoint is
called."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memearena.config import RunConfig, SimModelConfig
from memearena.store import CallRecord

__all__ = ["PlannedCalls", "planned_from_calls", "stand_in_config"]


@dataclass(frozen=True)
class PlannedCalls:
    """The calls a run would make, per model, with estimated tokens and cost."""

    per_model: dict[str, dict[str, float]]

    @property
    def calls(self) -> int:
        """Total planned calls."""
        return int(sum(v["calls"] for v in self.per_model.values()))

    @property
    def cost_usd(self) -> float:
        """Total estimated cost in USD."""
        return sum(v["cost_usd"] for v in self.per_model.values())


def stand_in_config(cfg: RunConfig) -> RunConfig:
    """The config a dry run executes: every model stood in for by a simulated one of the same
    name (a simulated model keeps its profile, without refusals, format errors or latency), no
    cache, so the plan follows the real prompts and never calls an endpoint."""
    stand_ins: dict[str, Any] = {}
    for name, m in cfg.models.items():
        if isinstance(m, SimModelConfig):
            stand_ins[name] = m.model_copy(
                update={"refusal_rate": 0.0, "format_error_rate": 0.0, "latency_ms": 0.0}
            )
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
