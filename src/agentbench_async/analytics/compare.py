"""Compare two models (or two runs/files) episode by episode: flipped tasks and paired significance tests.

Each side is one model in one deciding configuration (configs.py): a model with two configurations in a file is
two sides, never one pooled side. Episodes are paired on (env, split, task_id, repeat). Pairs where either side ended with an
infrastructure failure (env_error, model_error, cancelled) are left out and counted. Success is tested
with the exact McNemar test (binomial on the discordant pairs); scores with the Wilcoxon signed-rank test.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from rich.console import Console
from rich.table import Table

from .configs import config_table, overall_labels
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
    flips: pl.DataFrame  # env, split, task_id, repeat, class_a, score_a, class_b, score_b, direction, run_a, run_b
    only_a: int  # episodes without a partner in B
    only_b: int
    infra_pairs: int  # pairs left out because one side was an infrastructure failure
    # pairs whose failure class differs (invalid_format -> completed_wrong, ...), one row per (class_a, class_b):
    # episodes, the environments, an example task (env/task_id/repeat); the matrix A class x B class (class_matrix)
    class_changes: pl.DataFrame | None = None


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a model in one of its deciding configurations (configs.py)."""

    model: str
    config_id: str
    config: str  # what tells this configuration apart from the model's others in its file ('' when it has one)

    @property
    def name(self) -> str:
        return f"{self.model} ({self.config})" if self.config else self.model


def sides(res: Results) -> list[Side]:
    """Every model x configuration of the opened files, labelled as the report labels OA rows."""
    table = overall_labels(config_table(res))
    return [Side(r["model"], r["config_id"], r["config"]) for r in table.sort("model", "config").iter_rows(named=True)]


def pick_side(res: Results, model: str | None, config: str | None, *, exclude: Side | None = None, which: str) -> Side:
    """The side asked for: ``model`` (else the only model left) in ``config`` (a label as the report prints it, or
    the start of a config id; else its only configuration). Several candidates are refused with the choices."""
    where = ", ".join(map(str, res.paths))
    every = sides(res)
    models = sorted({s.model for s in every})
    flag = "--model-a" if which == "A" else "--model-b"
    config_flag = "--config-a" if which == "A" else "--config-b"
    if model is not None and model not in models:
        raise ReportError(f"model {model!r} ({which}) is not in {where}; it has: {', '.join(models) or 'no episodes'}")
    candidates = [s for s in every if (model is None or s.model == model) and s != exclude]
    if config is not None:
        candidates = [s for s in candidates if config in (s.config, s.name, s.config_id) or (len(config) >= 4 and s.config_id.startswith(config))]
        if not candidates:
            known = "; ".join(f"{s.name}: {s.config_id[:8]}" for s in every if model is None or s.model == model)
            raise ReportError(f"no configuration {config!r} ({which}) in {where}; it has: {known}")
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ReportError(f"no model to compare in {where} (it has: {', '.join(models) or 'no episodes'})")
    if len({s.model for s in candidates}) > 1:
        raise ReportError(f"{where} has several models ({', '.join(sorted({s.model for s in candidates}))}); choose one with {flag}")
    listed = "; ".join(f"{s.config} (id {s.config_id[:8]})" for s in candidates)
    raise ReportError(f"{candidates[0].model} has {len(candidates)} configurations in {where} ({listed}); scores of different "
                      f"configurations are never pooled: choose one with {config_flag} (its label or id)")


def pick_sides(res_a: Results, res_b: Results, same_file: bool, model_a: str | None, model_b: str | None,
               config_a: str | None, config_b: str | None) -> tuple[Side, Side]:
    """The two sides of ``agentbench compare``: with one file, two models (or one model in two configurations)."""
    if same_file:
        every = sides(res_a)
        if model_a is None and model_b is None and config_a is None and config_b is None and len(every) == 2:
            return every[0], every[1]
        a = pick_side(res_a, model_a, config_a, which="A", exclude=None if model_b is None and config_b is None else
                      _only(res_a, model_b, config_b))  # fmt: skip
        return a, pick_side(res_a, model_b, config_b, exclude=a, which="B")
    return pick_side(res_a, model_a, config_a, which="A"), pick_side(res_b, model_b, config_b, which="B")


def _only(res: Results, model: str | None, config: str | None) -> Side | None:
    try:
        return pick_side(res, model, config, which="B")
    except ReportError:
        return None


def _side(res: Results, side: Side, suffix: str) -> pl.DataFrame:
    return res.episodes.filter((pl.col("model") == side.model) & (pl.col("config_id") == side.config_id)).select(
        *KEY,
        pl.col("status").alias(f"status_{suffix}"),
        pl.col("failure_class").alias(f"class_{suffix}"),
        pl.col("infra").alias(f"infra_{suffix}"),
        pl.col("counted_score").alias(f"score_{suffix}"),
        pl.col("success").fill_null(False).alias(f"success_{suffix}"),
        pl.col("run_id").alias(f"run_{suffix}"),
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


def compare_results(res_a: Results, res_b: Results, side_a: Side, side_b: Side, label_a: str, label_b: str) -> Comparison:
    a, b = _side(res_a, side_a, "a"), _side(res_b, side_b, "b")
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
    ).select(*KEY, "class_a", "score_a", "class_b", "score_b", "direction", "run_a", "run_b")
    return Comparison(label_a, label_b, per_env, _summarise("all", pairs), flips, only_a, only_b, infra, _class_changes(pairs))


def _class_changes(pairs: pl.DataFrame) -> pl.DataFrame:
    """Paired episodes whose failure class differs, counted per (class_a, class_b), most first, with an example task."""
    changed = pairs.filter(pl.col("class_a") != pl.col("class_b")).sort(KEY)
    return (
        changed.group_by("class_a", "class_b", maintain_order=True)
        .agg(pl.len().alias("episodes"), pl.col("env").unique().sort().str.join(", ").alias("envs"),
             pl.format("{}/{}/{}/{}", "env", "split", "task_id", "repeat").first().alias("example"),
             pl.col("run_a").first().alias("example_run_a"), pl.col("run_b").first().alias("example_run_b"))  # fmt: skip
        .sort(["episodes", "class_a", "class_b"], descending=[True, False, False])
    )


def class_matrix(changes: pl.DataFrame) -> tuple[list[str], list[str], dict[tuple[str, str], int]]:
    """The failure-class changes as a matrix: A's classes (rows), B's (columns), (class_a, class_b) -> pairs."""
    cells = {(r["class_a"], r["class_b"]): r["episodes"] for r in changes.iter_rows(named=True)}
    return sorted({a for a, _ in cells}), sorted({b for _, b in cells}), cells


def class_change_lines(cmp: Comparison, most: int = 10) -> list[str]:
    """``N pairs: invalid_format (A) -> completed_wrong (B), e.g. db/dev/3/0`` for the most common changes."""
    changes = cmp.class_changes if cmp.class_changes is not None else pl.DataFrame()
    return [f"{r['episodes']} pair{'s' if r['episodes'] != 1 else ''}: {r['class_a']} (A) -> {r['class_b']} (B) in {r['envs']}, "
            f"e.g. {r['example']}" for r in changes.head(most).iter_rows(named=True)]  # fmt: skip


def p_text(p: float) -> str:
    """A p-value as a table cell: ``< 0.0001`` below that, else four decimals."""
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}"


def p_is(p: float) -> str:
    """A p-value in a sentence: ``p < 0.0001``, ``p = 0.0312``."""
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.4f}"


def render_comparison(cmp: Comparison, console: Console, max_flips: int = 40) -> None:
    a, b = cmp.label_a, cmp.label_b
    table = Table(title=f"A = {a}   vs   B = {b}   (paired episodes; infrastructure failures left out)", title_justify="left")
    for col in ("env", "pairs", "A ok", "B ok", "A only", "B only", "McNemar p", "A mean %", "B mean %", "Wilcoxon p"):
        table.add_column(col, justify="left" if col == "env" else "right")
    for e in [*cmp.per_env, cmp.total] if len(cmp.per_env) > 1 else cmp.per_env:
        style = "bold" if e is cmp.total else None
        table.add_row(e.env, str(e.pairs), str(e.success_a), str(e.success_b), str(e.a_only), str(e.b_only), p_text(e.mcnemar_p),
                      f"{100 * e.mean_a:.1f}", f"{100 * e.mean_b:.1f}", p_text(e.wilcoxon.p_value),
                      style=style)
    print_table(console, table, keys=1)  # nothing cut at 80 columns: compact, or split repeating env
    console.print("[dim]ok = successes; McNemar: exact test on success; Wilcoxon: signed-rank test on scores "
                  "(exact up to 60 non-zero differences, normal approximation above)[/]")
    t = cmp.total
    verdict = ("the success difference is significant at 5%" if t.mcnemar_p < 0.05 else "the success difference is not significant at 5%")
    console.print(f"{t.pairs} pairs: {t.a_only} tasks only A solved, {t.b_only} only B solved; {verdict} (exact McNemar {p_is(t.mcnemar_p)}).")
    extra = []
    if cmp.infra_pairs:
        extra.append(f"{cmp.infra_pairs} pairs left out (infrastructure failure on a side)")
    if cmp.only_a or cmp.only_b:
        extra.append(f"{cmp.only_a} episodes only in A, {cmp.only_b} only in B (not paired)")
    if extra:
        console.print("; ".join(extra) + ".")
    _render_class_changes(cmp, console)
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


def _render_class_changes(cmp: Comparison, console: Console) -> None:
    """The failure-class changes between A and B: the matrix A class x B class, and the most common changes in words."""
    changes = cmp.class_changes if cmp.class_changes is not None else pl.DataFrame()
    if changes.is_empty():
        console.print("No paired episode changed failure class.")
        return
    rows, cols, cells = class_matrix(changes)
    table = Table(title=f"Failure-class changes ({int(changes['episodes'].sum())} pairs): A class (rows) x B class (columns)",
                  title_justify="left")  # fmt: skip
    table.add_column("A \\ B")
    for col in cols:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(row, *[str(cells.get((row, col), "")) for col in cols])
    print_table(console, table, keys=1)
    for line in class_change_lines(cmp):
        console.print(line, markup=False, highlight=False)
