"""Per-method analysis: a method's records from the store -> its ``leaderboard.json`` section.

Pure functions of records and ``memearena.stats``; rendering lives in ``memearena.report``.
"""
