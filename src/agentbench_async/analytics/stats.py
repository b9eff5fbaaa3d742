"""Statistics with the standard library only: intervals, pass@k / pass^k, paired tests, the AgentBench OA.

Everything is deterministic: the bootstrap uses ``random.Random(seed)`` (Mersenne Twister, the same on
every Python version), so a report computed twice gives the same interval.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240101

# The paper's weights (Table 3): OA = mean over environments of score_percent / weight_inv.
WEIGHT_INV: dict[str, float] = {
    "os": 10.8,
    "db": 13.0,
    "kg": 13.9,
    "card_game": 12.0,
    "ltp": 3.5,
    "alfworld": 13.0,
    "webshop": 30.7,
    "mind2web": 11.6,
}
ABBREV: dict[str, str] = {
    "os": "OS",
    "db": "DB",
    "kg": "KG",
    "card_game": "DCG",
    "ltp": "LTP",
    "alfworld": "HH",
    "webshop": "WS",
    "mind2web": "WB",
}


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default); (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - half) / denom), min(1.0, (centre + half) / denom)


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (fixed seed, so reproducible)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    if n == 1 or min(values) == max(values):
        return float(values[0]), float(values[0])
    rng = random.Random(seed)
    vals = list(values)
    means = sorted(math.fsum(rng.choices(vals, k=n)) / n for _ in range(resamples))
    alpha = (1 - level) / 2
    lo = means[int(math.floor(alpha * (resamples - 1)))]
    hi = means[int(math.ceil((1 - alpha) * (resamples - 1)))]
    return lo, hi


def score_interval(values: Sequence[float]) -> tuple[float, float, str]:
    """The 95% interval of a mean score: Wilson when every value is 0 or 1, bootstrap otherwise."""
    if all(v in (0.0, 1.0) for v in values):
        return (*wilson_interval(sum(1 for v in values if v == 1.0), len(values)), "wilson")
    return (*bootstrap_interval(values), "bootstrap")


def overall_score(scores: Mapping[str, float]) -> tuple[float, bool]:
    """AgentBench's OA from per-environment scores in PERCENT: mean of score / weight_inv.

    Returns (OA, complete): complete is False when not all eight environments are present (then OA is
    the mean over the given ones, a partial score). Unknown environments are ignored.
    """
    known = {env: s for env, s in scores.items() if env in WEIGHT_INV}
    if not known:
        return math.nan, False
    oa = math.fsum(s / WEIGHT_INV[env] for env, s in known.items()) / len(known)
    return oa, len(known) == len(WEIGHT_INV)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with n tries of which c succeeded: P(at least one of k succeeds)."""
    if k > n:
        raise ValueError(f"k={k} > n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k for one task: P(all k of k tries drawn from the n succeed) = C(c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"k={k} > n={n}")
    return math.comb(c, k) / math.comb(n, k)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Exact (binomial) two-sided McNemar p-value from the discordant pair counts."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    k = min(a_only, b_only)
    # exact integers (a float sum of C(n, i) overflows past n ~ 1,030 discordant pairs); int / int rounds correctly
    tail, term = 0, 1
    for i in range(k + 1):
        tail += term
        term = term * (n - i) // (i + 1)
    return min(1.0, 2 * tail / 2**n)


@dataclass(frozen=True)
class WilcoxonResult:
    n: int  # pairs with a non-zero difference
    w_plus: float  # sum of the ranks of positive differences
    p_value: float
    method: str  # "exact" | "normal"


_EXACT_LIMIT = 60


def wilcoxon_signed_rank(diffs: Sequence[float]) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test of paired differences (zeros dropped, average ranks for ties).

    Exact null distribution (dynamic programming over doubled ranks, valid with ties) for up to 60
    non-zero differences; normal approximation with tie and continuity correction above.
    """
    d = [x for x in diffs if x != 0 and not math.isnan(x)]
    n = len(d)
    if n == 0:
        return WilcoxonResult(0, 0.0, 1.0, "exact")
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks = [0.0] * n
    tie_sizes: list[int] = []
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        avg = (i + j + 2) / 2
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        tie_sizes.append(j - i + 1)
        i = j + 1
    w_plus = math.fsum(r for r, x in zip(ranks, d) if x > 0)
    total = n * (n + 1) / 2
    if n <= _EXACT_LIMIT:
        doubled = [int(round(2 * r)) for r in ranks]
        top = sum(doubled)
        counts = [0] * (top + 1)
        counts[0] = 1
        for r in doubled:
            for s in range(top, r - 1, -1):
                counts[s] += counts[s - r]
        observed = int(round(2 * w_plus))
        mirrored = top - observed
        lo, hi = min(observed, mirrored), max(observed, mirrored)
        extreme = sum(counts[: lo + 1]) + sum(counts[hi:]) if lo != hi else sum(counts)
        return WilcoxonResult(n, w_plus, min(1.0, extreme / 2**n), "exact")
    mean = total / 2
    var = n * (n + 1) * (2 * n + 1) / 24 - sum(t**3 - t for t in tie_sizes) / 48
    if var <= 0:
        return WilcoxonResult(n, w_plus, 1.0, "normal")
    z = (abs(w_plus - mean) - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return WilcoxonResult(n, w_plus, min(1.0, p), "normal")
