"""Agent prompts (Jinja2 templates), output schemas, parsers and the bounded re-ask."""

from memearena.prompts.ask import AskResult, ModelPoolLike, ask
from memearena.prompts.budget import shown_pair, truncate_to_tokens
from memearena.prompts.parsers import (
    extract_json_objects,
    final_block,
    parse_answer,
    parse_contexts,
    parse_guideline,
    parse_verdicts,
)
from memearena.prompts.render import (
    DELIMITER_TAGS,
    RESERVED_KEYS,
    ROLE_TEMPLATES,
    build_messages,
    defang,
    reask_message,
    register_templates,
    render,
    template_hashes,
    template_path,
)
from memearena.prompts.schemas import (
    LEVELS,
    Answer,
    Context,
    CriterionVerdict,
    verdict_response_format,
)
from memearena.prompts.scores import (
    ABSTAIN,
    Score,
    defang_score_fields,
    first_rating_at,
    parse_score,
    parse_score_at,
    quoted_in,
    ratings_in,
)

__all__ = [
    "ABSTAIN",
    "DELIMITER_TAGS",
    "LEVELS",
    "RESERVED_KEYS",
    "ROLE_TEMPLATES",
    "Answer",
    "AskResult",
    "Context",
    "CriterionVerdict",
    "ModelPoolLike",
    "Score",
    "ask",
    "build_messages",
    "defang",
    "defang_score_fields",
    "extract_json_objects",
    "final_block",
    "first_rating_at",
    "parse_answer",
    "parse_contexts",
    "parse_guideline",
    "parse_score",
    "parse_score_at",
    "parse_verdicts",
    "quoted_in",
    "ratings_in",
    "reask_message",
    "register_templates",
    "render",
    "shown_pair",
    "template_hashes",
    "template_path",
    "truncate_to_tokens",
    "verdict_response_format",
]
