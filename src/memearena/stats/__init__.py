"""Statistics for pairwise evaluation: ratings, confidence intervals, judge agreement and bias.

Pure computation on battles or verdicts; nothing here touches the store or calls a model.

    from memearena.stats import load_battles, leaderboard, bradley_terry, ndcg
"""

from memearena.stats.active import next_pairs
from memearena.stats.agreement import (
    Estimate,
    SelfPreference,
    Verdict,
    VerdictMetrics,
    VerdictRow,
    cohen_kappa,
    krippendorff_alpha,
    nominal_alpha,
    position_consistency,
    prefer_first_rate,
    prefer_longer_rate,
    relative_longer_rate,
    self_preference,
)
from memearena.stats.battles import (
    WINNERS,
    Battle,
    BattleTable,
    LoadedBattles,
    SkippedLine,
    load_battles,
    parse_battle_table,
    parse_battles,
    read_battle_table,
)
from memearena.stats.bt import BTResult, bradley_terry, bt_probability, resample
from memearena.stats.cluster import (
    BattleCodes,
    ClusteredCounts,
    ClusteredCountsBuilder,
    ClusterIndex,
    cluster_weights,
    clustered_counts,
)
from memearena.stats.counts import PairCounts
from memearena.stats.elo import online_elo, online_elo_codes
from memearena.stats.errors import DisconnectedComparisonError, StatsError, UnboundedRatingsError
from memearena.stats.judge_bias import (
    BIAS_CATEGORIES,
    BIAS_TYPES,
    BiasFigure,
    BiasPair,
    BiasTable,
    BiasTerms,
    BiasTermsBuilder,
    bias_conformity,
    bias_deviation,
    bias_table,
    bias_terms,
    bootstrap_weights,
)
from memearena.stats.leaderboard import (
    LeaderboardAccumulator,
    LeaderboardRow,
    group_battles,
    grouped_leaderboards,
    leaderboard,
    leaderboard_fit,
    leaderboard_rows,
    rank_upper_bounds,
)
from memearena.stats.proportion import MIN_CELL, wilson_interval
from memearena.stats.rank_table import TableRanking, rank_table
from memearena.stats.ranking import (
    kendall_tau,
    kendall_tau_scores,
    ndcg,
    ndcg_scores,
    spearman_rho,
)
from memearena.stats.style import LengthControlled, LengthObservations, length_controlled_bt
from memearena.stats.winrate import average_win_rate, win_rate_matrix

__all__ = [
    "BIAS_CATEGORIES",
    "BIAS_TYPES",
    "MIN_CELL",
    "WINNERS",
    "BTResult",
    "Battle",
    "BattleCodes",
    "BattleTable",
    "BiasFigure",
    "BiasPair",
    "BiasTable",
    "BiasTerms",
    "BiasTermsBuilder",
    "ClusterIndex",
    "ClusteredCounts",
    "ClusteredCountsBuilder",
    "DisconnectedComparisonError",
    "Estimate",
    "LeaderboardAccumulator",
    "LeaderboardRow",
    "LengthControlled",
    "LengthObservations",
    "LoadedBattles",
    "PairCounts",
    "SelfPreference",
    "SkippedLine",
    "StatsError",
    "TableRanking",
    "UnboundedRatingsError",
    "Verdict",
    "VerdictMetrics",
    "VerdictRow",
    "average_win_rate",
    "bias_conformity",
    "bias_deviation",
    "bias_table",
    "bias_terms",
    "bootstrap_weights",
    "bradley_terry",
    "bt_probability",
    "cluster_weights",
    "clustered_counts",
    "cohen_kappa",
    "group_battles",
    "grouped_leaderboards",
    "kendall_tau",
    "kendall_tau_scores",
    "krippendorff_alpha",
    "leaderboard",
    "leaderboard_fit",
    "leaderboard_rows",
    "length_controlled_bt",
    "load_battles",
    "ndcg",
    "ndcg_scores",
    "next_pairs",
    "nominal_alpha",
    "online_elo",
    "online_elo_codes",
    "parse_battle_table",
    "parse_battles",
    "position_consistency",
    "prefer_first_rate",
    "prefer_longer_rate",
    "rank_table",
    "rank_upper_bounds",
    "read_battle_table",
    "relative_longer_rate",
    "resample",
    "self_preference",
    "spearman_rho",
    "wilson_interval",
    "win_rate_matrix",
]
