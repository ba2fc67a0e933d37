"""memearena: evaluate how well multimodal LLMs understand harmful memes, and audit their judges."""

__version__ = "0.1.0"
