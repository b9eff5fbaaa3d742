"""The statistics behind the report: OA with the paper's weights, intervals, pass@k, paired tests."""

from __future__ import annotations

import math

import pytest

from agentbench_async.analytics.stats import (
    bootstrap_interval,
    mcnemar_exact,
    overall_score,
    pass_at_k,
    pass_hat_k,
    score_interval,
    wilcoxon_signed_rank,
    wilson_interval,
)

ORDER = ("os", "db", "kg", "card_game", "ltp", "alfworld", "webshop", "mind2web")


@pytest.mark.parametrize(
    ("scores", "paper_oa"),
    [
        ((42.4, 32.0, 58.8, 74.5, 16.6, 78.0, 61.1, 29.0), 4.01),  # gpt-4, AgentBench Table 3
        ((32.6, 36.7, 25.9, 33.7, 10.5, 16.0, 64.1, 20.0), 2.32),  # gpt-3.5-turbo
    ],
)
def test_overall_score_reproduces_the_paper(scores: tuple[float, ...], paper_oa: float) -> None:
    oa, complete = overall_score(dict(zip(ORDER, scores)))
    assert complete
    assert round(oa, 2) == paper_oa


def test_overall_score_over_some_environments_is_partial() -> None:
    oa, complete = overall_score({"os": 42.4, "db": 32.0, "echo": 100.0})
    assert not complete
    assert oa == pytest.approx((42.4 / 10.8 + 32.0 / 13.0) / 2)


def test_wilson_interval_matches_the_textbook_values() -> None:
    lo, hi = wilson_interval(4, 9)
    assert (round(lo, 4), round(hi, 4)) == (0.1888, 0.7333)
    assert wilson_interval(0, 10)[0] == 0.0
    assert round(wilson_interval(10, 10)[0], 4) == 0.7225
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_bootstrap_is_reproducible_and_brackets_the_mean() -> None:
    values = [1.0, 0.5, 0.25, 0.0, 0.0, 0.75, 0.8, 0.1]
    first = bootstrap_interval(values)
    assert first == bootstrap_interval(values)
    mean = sum(values) / len(values)
    assert first[0] < mean < first[1]
    assert 0.0 <= first[0] and first[1] <= 1.0
    assert score_interval(values)[2] == "bootstrap"
    assert score_interval([1.0, 0.0, 1.0])[2] == "wilson"


def test_pass_at_k_and_pass_hat_k() -> None:
    assert pass_at_k(4, 2, 1) == pytest.approx(0.5)
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_at_k(3, 0, 3) == 0.0 and pass_hat_k(3, 3, 3) == 1.0


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(3, 0) == pytest.approx(0.25)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 2) == pytest.approx(2 * sum(math.comb(12, i) for i in range(3)) / 2**12)


def test_wilcoxon_exact_and_normal() -> None:
    assert wilcoxon_signed_rank([1, 2, 3, 4, 5]).p_value == pytest.approx(0.0625)  # all 32 sign patterns, 2 as extreme
    tied = wilcoxon_signed_rank([0.5, 0.5, -0.5, 1.0, 0.0])
    assert tied.n == 4 and tied.method == "exact" and tied.p_value == pytest.approx(8 / 16)  # ranks 2,2,2,4: W+=8; 4 patterns >= 8, 4 <= 2
    assert wilcoxon_signed_rank([0.0, 0.0]).p_value == 1.0
    big = wilcoxon_signed_rank([0.1 * (i % 7 + 1) for i in range(80)])
    assert big.method == "normal" and big.p_value < 1e-10
    balanced = wilcoxon_signed_rank([(-1) ** i * (i // 2 + 1) for i in range(100)])
    assert balanced.method == "normal" and balanced.p_value > 0.5


def test_mcnemar_exact_with_thousands_of_discordant_pairs() -> None:
    # a float sum of C(n, i) overflowed past ~1,030 discordant pairs (compare on a big file failed)
    assert mcnemar_exact(600, 500) == pytest.approx(0.0028195449914, rel=1e-9)
    assert mcnemar_exact(5000, 5000) == 1.0
    assert 0.0 < mcnemar_exact(2600, 2400) < 0.01
