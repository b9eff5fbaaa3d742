"""webshop search: ranks as upstream's pyserini 0.17 / Anserini 0.14.3 / Lucene 8.11 index ranks them.

The fixture ``tests/fixtures/webshop_anserini/ranks.json`` was made with the real Anserini over the built-in
catalogue (``make.py`` and README.md there say how and with which versions).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentbench_async.envs.webshop.analysis import STOP_WORDS, Analyzer, tokenize
from agentbench_async.envs.webshop.catalog import load_catalog
from agentbench_async.envs.webshop.porter import porter_stem
from agentbench_async.envs.webshop.search import SearchIndex, byte4_to_int, document_text, int_to_byte4
from agentbench_async.envs.webshop.tasks import builtin_dir

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "webshop_anserini" / "ranks.json"
HAND_MADE_PROBES = 19  # the first analyzer probes of make.py (ANALYZER_PROBES); the rest are seeded random strings


@cache
def _fixture() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@cache
def _builtin_index() -> SearchIndex:
    catalog = load_catalog(builtin_dir())
    return SearchIndex((p.asin, document_text(p.title, p.description, p.bullets, p.options)) for p in catalog.products)


def test_the_fixture_is_of_the_committed_catalogue() -> None:
    made = _fixture()["made_with"]
    assert made["lucene"] == "8.11.0" and made["anserini_jar"] == "anserini-0.14.3-fatjar.jar"
    import hashlib

    assert hashlib.sha256((builtin_dir() / "items_shuffle.json").read_bytes()).hexdigest() == made["catalog_sha256"]
    assert _builtin_index().size == made["documents"]


def test_page_one_equals_anserini_for_at_least_99_percent_of_the_fixture_queries() -> None:
    index = _builtin_index()
    queries = _fixture()["queries"]
    assert len(queries) >= 1000
    same_page = same_count = 0
    for q in queries:
        hits = index.search(q["q"])
        same_page += [index.ids[i] for i in hits[:10]] == q["asins"]
        same_count += len(hits) == q["n"]  # "Total results: n" on the results page
    assert same_page / len(queries) >= 0.99, f"page 1 equal for {same_page}/{len(queries)}"
    assert same_count / len(queries) >= 0.99, f"result count equal for {same_count}/{len(queries)}"


def test_scores_are_lucene_s_float32_numbers() -> None:
    index = _builtin_index()
    exact = 0
    queries = _fixture()["queries"]
    for q in queries:
        ours = index.search_scored(q["q"])[:10]
        exact += [index.ids[i] for i, _ in ours] == q["asins"] and all(
            np.float32(s) == np.float32(t) for (_, s), t in zip(ours, q["scores"])
        )
    assert exact / len(queries) >= 0.99, f"page 1 with bit-identical scores for {exact}/{len(queries)}"


def test_analyzer_makes_anserini_s_terms() -> None:
    probes = _fixture()["analyzer"]
    analyzer = Analyzer()
    hand_made, fuzz = probes[:HAND_MADE_PROBES], probes[HAND_MADE_PROBES:]
    for text, terms in hand_made:
        assert analyzer.terms(text) == terms, text
    same = sum(analyzer.terms(text) == terms for text, terms in fuzz)
    # the rest: random strings of emoji, marks and scripts (what differs: README, Hebrew quotes, odd emoji)
    assert same / len(fuzz) >= 0.99, f"{same}/{len(fuzz)}"


def test_porter_stems_as_lucene_for_every_word_of_the_catalogue_and_queries() -> None:
    stems = _fixture()["stems"]
    assert len(stems) > 500
    assert {w: porter_stem(w) for w in stems} == stems


@pytest.mark.parametrize(
    ("word", "stem"),
    [("assembly", "assembl"), ("technology", "technolog"), ("generously", "gener"), ("ponies", "poni"),
     ("sized", "size"), ("hopping", "hop"), ("controll", "control"), ("yyy", "yyi"), ("ab", "ab")],
)
def test_lucene_porter_not_snowball(word: str, stem: str) -> None:
    assert porter_stem(word) == stem


def test_tokenizer_follows_the_unicode_word_rules() -> None:
    assert tokenize("l'eau 6.76oz 3.5x2.5 1,000 a:b 1:2 x-large gluten_free __ e.g. U.S.A.") == [
        "l'eau", "6.76oz", "3.5x2.5", "1,000", "a:b", "1", "2", "x", "large", "gluten_free", "e.g", "U.S.A"]
    assert tokenize("women’s co\u00adop café 中文 テキスト 👍🏽 🇺🇸 ™") == [
        "women’s", "co\u00adop", "café", "中", "文", "テキスト", "👍🏽", "🇺🇸", "™"]
    assert [len(t) for t in tokenize("a" * 300)] == [255, 45]  # Lucene's maxTokenLength


def test_possessives_case_and_stop_words() -> None:
    analyzer = Analyzer()
    assert analyzer.terms("MEN'S Women’s the OF and İSTANBUL ΣΟΦΟΣ") == ["men", "women", "istanbul", "σοφοσ"]
    assert all(analyzer.terms(w) == [] for w in STOP_WORDS)


def test_norms_are_lucene_s_one_byte_lengths() -> None:
    assert [int_to_byte4(n) for n in (0, 1, 23, 24, 25, 40, 41, 42)] == [0, 1, 23, 24, 25, 40, 40, 41]
    assert [byte4_to_int(int_to_byte4(n)) for n in (40, 41, 100, 1000, 10_000)] == [40, 40, 96, 984, 9_240]  # Lucene 8.11 SmallFloat


def test_documents_whose_lengths_share_a_norm_tie_and_ties_go_by_asin() -> None:
    filler = " ".join(f"w{i}" for i in range(60))
    index = SearchIndex([
        ("B0000000C", "widget " + " ".join(filler.split()[:40])),  # 41 terms
        ("B0000000B", "widget " + " ".join(filler.split()[:39])),  # 40 terms: same norm byte as 41
        ("B0000000A", "widget " + " ".join(filler.split()[:45])),  # 46 terms: a longer norm, lower score
        ("B0000000D", "widget"),
    ])
    assert [index.ids[i] for i in index.search("widget")] == ["B0000000D", "B0000000B", "B0000000C", "B0000000A"]
    (_, s41), (_, s40) = index.search_scored("widget")[1:3]
    assert s41 == s40


def test_only_matching_documents_best_first_repeats_boosted() -> None:
    index = SearchIndex([("B1", "red running shoe"), ("B2", "blue running shoe"), ("B3", "red dress"),
                         ("B4", "shoe rack shoe shoe"), ("B5", "garden hose")])
    assert index.search("red shoe") == [0, 2, 3, 1]
    assert index.search("the of and") == []  # stop words only
    assert index.search("zeppelin") == []
    assert index.search("hose hose dress") == [4, 2]  # a repeated word is one clause boosted twice


def test_search_keeps_at_most_fifty_hits_in_asin_order_on_ties() -> None:
    index = SearchIndex([(f"B{119 - i:03d}", f"widget number {i}") for i in range(120)] + [("C000", "gadget")])
    assert [index.ids[i] for i in index.search("widget")] == [f"B{i:03d}" for i in range(50)]
    assert SearchIndex([]).search("widget") == []
