"""prompts."""
