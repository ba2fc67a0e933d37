"""Statistics for pairwise evaluation: ratings, confidence intervals, judge agreement and bias.

Pure computation on battles or verdicts; nothing here touches the store or calls a model.

    from memearena.stats import load_battles, leaderboard, bradley_terry, ndcg
"""

from memearena.stats.active import next_pairs
from memearena.stats.agreement import (
    Estimate,
    SelfPreference,
    Verdict,
    cohen_kappa,
    krippendorff_alpha,
    nominal_alpha,
    position_consistency,
    prefer_first_rate,
    prefer_longer_rate,
    self_preference,
)
from memearena.stats.battles import (
    WINNERS,
    Battle,
    LoadedBattles,
    SkippedLine,
    load_battles,
    parse_battles,
)
from memearena.stats.bt import BTResult, bradley_terry, bt_probability, resample
from memearena.stats.counts import PairCounts
from memearena.stats.elo import online_elo
from memearena.stats.errors import DisconnectedComparisonError, StatsError, UnboundedRatingsError
from memearena.stats.judge_bias import (
    BIAS_CATEGORIES,
    BIAS_TYPES,
    BiasFigure,
    BiasPair,
    BiasTable,
    bias_conformity,
    bias_deviation,
    bias_table,
)
from memearena.stats.leaderboard import (
    LeaderboardRow,
    group_battles,
    grouped_leaderboards,
    leaderboard,
    leaderboard_fit,
)
from memearena.stats.ranking import kendall_tau, ndcg, spearman_rho
from memearena.stats.winrate import average_win_rate, win_rate_matrix

__all__ = [
    "BIAS_CATEGORIES",
    "BIAS_TYPES",
    "WINNERS",
    "BTResult",
    "Battle",
    "BiasFigure",
    "BiasPair",
    "BiasTable",
    "DisconnectedComparisonError",
    "Estimate",
    "LeaderboardRow",
    "LoadedBattles",
    "PairCounts",
    "SelfPreference",
    "SkippedLine",
    "StatsError",
    "UnboundedRatingsError",
    "Verdict",
    "average_win_rate",
    "bias_conformity",
    "bias_deviation",
    "bias_table",
    "bradley_terry",
    "bt_probability",
    "cohen_kappa",
    "group_battles",
    "grouped_leaderboards",
    "kendall_tau",
    "krippendorff_alpha",
    "leaderboard",
    "leaderboard_fit",
    "load_battles",
    "ndcg",
    "next_pairs",
    "nominal_alpha",
    "online_elo",
    "parse_battles",
    "position_consistency",
    "prefer_first_rate",
    "prefer_longer_rate",
    "resample",
    "self_preference",
    "spearman_rho",
    "win_rate_matrix",
]
