"""The Arena (MemeArena): contexts, answers, guideline fusion, pairwise battles, leaderboards."""
