"""Suite-wide test settings."""

from hypothesis import settings

# Shared 2-core CI machines stall at times: property tests check behaviour, not speed.
settings.register_profile("memearena", deadline=None)
settings.load_profile("memearena")
