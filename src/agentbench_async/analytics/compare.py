"""Compare two models (or two runs/files) episode by episode: flipped tasks and paired significance tests.

Episodes are paired on (env, split, task_id, repeat). Pairs where either side ended with an
infrastructure failure (env_error, model_error, cancelled) are left out and counted. Success is tested
with the exact McNemar test (binomial on the discordant pairs); scores with the Wilcoxon signed-rank test.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from rich.console import Console
from rich.table import Table

from .loading import ReportError, Results
from .stats import WilcoxonResult, mcnemar_exact, wilcoxon_signed_rank
from .terminal import print_table

KEY = ["env", "split", "task_id", "repeat"]


@dataclass
class EnvComparison:
    env: str
    pairs: int
    success_a: int
    success_b: int
    a_only: int  # A succeeded, B did not
    b_only: int
    mcnemar_p: float
    mean_a: float
    mean_b: float
    wilcoxon: WilcoxonResult


@dataclass
class Comparison:
    label_a: str
    label_b: str
    per_env: list[EnvComparison]
    total: EnvComparison
    flips: pl.DataFrame  # env, split, task_id, repeat, status_a, score_a, status_b, score_b, direction
    only_a: int  # episodes without a partner in B
    only_b: int
    infra_pairs: int  # pairs left out because one side was an infrastructure failure


def pick_model(res: Results, wanted: str | None, *, exclude: str | None = None, which: str) -> str:
    models = sorted(res.episodes["model"].unique().to_list())
    if wanted is not None:
        if wanted not in models:
            raise ReportError(f"model {wanted!r} ({which}) is not in {', '.join(map(str, res.paths))}; it has: {', '.join(models) or 'no episodes'}")
        return wanted
    candidates = [m for m in models if m != exclude]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ReportError(f"no model to compare in {', '.join(map(str, res.paths))} (it has: {', '.join(models) or 'no episodes'})")
    flag = "--model-a" if which == "A" else "--model-b"
    raise ReportError(f"{', '.join(map(str, res.paths))} has several models ({', '.join(candidates)}); choose one with {flag}")


def _side(res: Results, model: str, suffix: str) -> pl.DataFrame:
    return res.episodes.filter(pl.col("model") == model).select(
        *KEY,
        pl.col("status").alias(f"status_{suffix}"),
        pl.col("failure_class").alias(f"class_{suffix}"),
        pl.col("infra").alias(f"infra_{suffix}"),
        pl.col("counted_score").alias(f"score_{suffix}"),
        pl.col("success").fill_null(False).alias(f"success_{suffix}"),
    )


def _summarise(env: str, pairs: pl.DataFrame) -> EnvComparison:
    sa, sb = pairs["success_a"].to_list(), pairs["success_b"].to_list()
    a_only = sum(1 for x, y in zip(sa, sb) if x and not y)
    b_only = sum(1 for x, y in zip(sa, sb) if y and not x)
    scores_a, scores_b = pairs["score_a"].to_list(), pairs["score_b"].to_list()
    n = len(sa)
    return EnvComparison(
        env=env, pairs=n, success_a=sum(sa), success_b=sum(sb), a_only=a_only, b_only=b_only,
        mcnemar_p=mcnemar_exact(a_only, b_only),
        mean_a=sum(scores_a) / n if n else float("nan"), mean_b=sum(scores_b) / n if n else float("nan"),
        wilcoxon=wilcoxon_signed_rank([b - a for a, b in zip(scores_a, scores_b)]),
    )


def compare_results(res_a: Results, res_b: Results, model_a: str, model_b: str, label_a: str, label_b: str) -> Comparison:
    a, b = _side(res_a, model_a, "a"), _side(res_b, model_b, "b")
    joined = a.join(b, on=KEY, how="full", coalesce=True)
    only_a = joined.filter(pl.col("status_b").is_null()).height
    only_b = joined.filter(pl.col("status_a").is_null()).height
    both = joined.filter(pl.col("status_a").is_not_null() & pl.col("status_b").is_not_null())
    infra = both.filter(pl.col("infra_a") | pl.col("infra_b")).height
    pairs = both.filter(~pl.col("infra_a") & ~pl.col("infra_b")).sort(KEY)
    per_env = [_summarise(str(env), g) for (env,), g in pairs.group_by(["env"], maintain_order=True)]
    flips = pairs.filter((pl.col("success_a") != pl.col("success_b")) | (pl.col("score_a") != pl.col("score_b"))).with_columns(
        pl.when(pl.col("success_a") & ~pl.col("success_b")).then(pl.lit(f"{label_a} only"))
        .when(pl.col("success_b") & ~pl.col("success_a")).then(pl.lit(f"{label_b} only"))
        .when(pl.col("score_a") > pl.col("score_b")).then(pl.lit(f"{label_a} higher"))
        .otherwise(pl.lit(f"{label_b} higher")).alias("direction")
    ).select(*KEY, "class_a", "score_a", "class_b", "score_b", "direction")
    return Comparison(label_a, label_b, per_env, _summarise("all", pairs), flips, only_a, only_b, infra)


def _p(p: float) -> str:
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def render_comparison(cmp: Comparison, console: Console, max_flips: int = 40) -> None:
    a, b = cmp.label_a, cmp.label_b
    table = Table(title=f"A = {a}   vs   B = {b}   (paired episodes; infrastructure failures left out)", title_justify="left")
    for col in ("env", "pairs", "A ok", "B ok", "A only", "B only", "McNemar p", "A mean %", "B mean %", "Wilcoxon p"):
        table.add_column(col, justify="left" if col == "env" else "right")
    for e in [*cmp.per_env, cmp.total] if len(cmp.per_env) > 1 else cmp.per_env:
        style = "bold" if e is cmp.total else None
        table.add_row(e.env, str(e.pairs), str(e.success_a), str(e.success_b), str(e.a_only), str(e.b_only), _p(e.mcnemar_p),
                      f"{100 * e.mean_a:.1f}", f"{100 * e.mean_b:.1f}", _p(e.wilcoxon.p_value),
                      style=style)
    print_table(console, table, keys=1)  # nothing cut at 80 columns: compact, or split repeating env
    console.print("[dim]ok = successes; McNemar: exact test on success; Wilcoxon: signed-rank test on scores "
                  "(exact up to 60 non-zero differences, normal approximation above)[/]")
    t = cmp.total
    verdict = ("the success difference is significant at 5%" if t.mcnemar_p < 0.05 else "the success difference is not significant at 5%")
    console.print(f"{t.pairs} pairs: {t.a_only} tasks only A solved, {t.b_only} only B solved; {verdict} (exact McNemar p={_p(t.mcnemar_p)}).")
    extra = []
    if cmp.infra_pairs:
        extra.append(f"{cmp.infra_pairs} pairs left out (infrastructure failure on a side)")
    if cmp.only_a or cmp.only_b:
        extra.append(f"{cmp.only_a} episodes only in A, {cmp.only_b} only in B (not paired)")
    if extra:
        console.print("; ".join(extra) + ".")
    if cmp.flips.is_empty():
        console.print("No task flipped.")
        return
    flips = Table(title=f"Flipped tasks ({cmp.flips.height}; first {min(max_flips, cmp.flips.height)} shown)", title_justify="left")
    for col in ("env", "task", "repeat", "A class", "A score", "B class", "B score", "who did better"):
        flips.add_column(col)
    for r in cmp.flips.head(max_flips).iter_rows(named=True):
        flips.add_row(r["env"], r["task_id"], str(r["repeat"]), r["class_a"], f"{r['score_a']:g}", r["class_b"], f"{r['score_b']:g}",
                      r["direction"])
    print_table(console, flips, keys=2)
