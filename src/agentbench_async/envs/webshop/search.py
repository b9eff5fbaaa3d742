"""WebShop's product search, ranked exactly as upstream's pyserini 0.17 / Anserini 0.14.3 / Lucene 8.11 index ranks.

Upstream indexes one document per product, ``Title + Description + BulletPoints[0] + option text``
(lower-cased), with Anserini's ``DefaultEnglishAnalyzer`` (``analysis.py``) and searches it with
``LuceneSearcher.search(keywords, k=50)``: a bag-of-words OR query (a word repeated n times is one clause
boosted n times), Lucene's ``BM25Similarity(k1=0.9, b=0.4)``, hits sorted by score, ties by the document id
(the ASIN) ascending. This module computes the same numbers the same way:

* document length = the number of terms after analysis, stored as Lucene's one-byte norm
  (``SmallFloat.intToByte4``: exact up to 23, then 4 significant bits) and read back through a 256-entry
  table, ``1 / (k1 * (1 - b + b * length / avgdl))``, all in float32 as Lucene computes it;
* idf = ``log(1 + (docCount - df + 0.5) / (df + 0.5))`` in double, stored as float32; avgdl =
  ``sumTotalTermFreq / docCount`` (docCount: documents with at least one term);
* a term's score = ``w - w / (1 + tf * normInverse)`` with ``w = boost * idf``, float32 throughout
  (Lucene 8.11's ``BM25Scorer.score``); a document's score = the clause scores summed in double, then float32;
* only documents sharing a term with the query are hits; the top ``k`` by (score desc, ASIN asc).

Scores printed by pyserini are different numbers (Anserini's ``ScoreTiesAdjusterReranker`` rounds them to 4
decimals and lowers each tie by 1e-6 afterwards); it never reorders hits, so the ranking is Lucene's.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .analysis import Analyzer

TOP_K = 50  # upstream: search_engine.search(keywords, k=50)
K1 = 0.9  # Anserini's BM25 defaults (pyserini SimpleSearcher)
B = 0.4

_F32 = np.float32


def int_to_byte4(i: int) -> int:
    """Lucene's ``SmallFloat.intToByte4``: a non-negative int in one byte (exact below 24, then 4 bits of it)."""
    if i < _NUM_FREE_VALUES:
        return i
    return _NUM_FREE_VALUES + _long_to_int4(i - _NUM_FREE_VALUES)


def byte4_to_int(b: int) -> int:
    """Lucene's ``SmallFloat.byte4ToInt``: the length a norm byte stands for."""
    if b < _NUM_FREE_VALUES:
        return b
    return _NUM_FREE_VALUES + _int4_to_long(b - _NUM_FREE_VALUES)


def _long_to_int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_NUM_FREE_VALUES = 255 - _long_to_int4(2**31 - 1)  # 24
_LENGTH_TABLE = np.array([byte4_to_int(b) for b in range(256)], dtype=np.float32)


def document_text(title: str, description: str, bullets: Sequence[str], options: Mapping[str, Sequence[str]]) -> str:
    """The indexed text of one product (upstream ``convert_product_file_format.py``)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in options.items())
    first_bullet = bullets[0] if bullets else ""
    return " ".join([title, description, first_bullet, option_text]).lower()


class SearchIndex:
    """Lucene's BM25 index over (ASIN, text) documents; ``search`` returns document positions, best first."""

    def __init__(self, documents: Iterable[tuple[str, str]], *, k1: float = K1, b: float = B) -> None:
        self.analyzer = Analyzer()
        vocab: dict[str, int] = {}
        ids: list[str] = []
        # postings, document by document: term ids and frequencies (4-byte arrays, not lists of Python ints: the
        # full WebShop catalogue has ~10**8), and per document its number of distinct terms and of terms
        term_ids, freqs, distinct, lengths = array("i"), array("i"), array("i"), array("q")
        for asin, text in documents:
            ids.append(asin)
            terms = self.analyzer.terms(text)
            lengths.append(len(terms))
            counts = Counter(terms)
            distinct.append(len(counts))
            for term, tf in counts.items():
                term_ids.append(vocab.setdefault(term, len(vocab)))
                freqs.append(tf)
        self.size = len(ids)
        self.ids = ids
        self._vocab = vocab
        # ties: the id field's sorted doc values (UTF-8 bytes, ascending)
        self._by_tie_rank = np.array(sorted(range(self.size), key=lambda i: ids[i].encode("utf-8")), dtype=np.int64)
        self._tie_rank = np.empty(self.size, dtype=np.int64)
        self._tie_rank[self._by_tie_rank] = np.arange(self.size)
        terms_arr = np.frombuffer(term_ids, dtype=np.int32)
        order = np.argsort(terms_arr, kind="stable")  # by term, each term's documents ascending
        offsets = np.searchsorted(terms_arr[order], np.arange(len(vocab) + 1))  # term t: postings offsets[t]:offsets[t+1]
        self._offsets: list[int] = offsets.tolist()  # read per query term: Python ints are cheaper than numpy's
        self._docs = np.repeat(np.arange(self.size, dtype=np.int32), np.frombuffer(distinct, dtype=np.int32))[order]
        tf = np.frombuffer(freqs, dtype=np.int32)[order].astype(np.float32)
        del term_ids, freqs, terms_arr, order
        length = np.frombuffer(lengths, dtype=np.int64)
        doc_count = int(np.count_nonzero(length))
        k1f, bf = _F32(k1), _F32(b)
        avgdl = _F32(length.sum() / doc_count) if doc_count else _F32(1)
        norm_inverse = _F32(1) / (k1f * ((_F32(1) - bf) + bf * _LENGTH_TABLE / avgdl))  # BM25Similarity's cache
        norms = np.array([int_to_byte4(n) for n in range(int(length.max(initial=0)) + 1)], dtype=np.uint8)
        # tf * normInverse per posting: the product Lucene computes at query time, in float32
        self._tf_norm = tf * norm_inverse[norms[length[self._docs]]]
        df = np.diff(offsets).astype(np.float64)
        self._idf = np.log(1 + (doc_count - df + 0.5) / (df + 0.5)).astype(np.float32)

    def scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions of the documents matching the query, their float32 scores), in no particular order."""
        clauses = Counter(t for t in self.analyzer.terms(query) if t in self._vocab)
        if not clauses:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        docs, parts = [], []
        offsets = self._offsets
        for term, boost in clauses.items():
            t = self._vocab[term]
            start, end = offsets[t], offsets[t + 1]
            weight = _F32(boost) * self._idf[t]
            docs.append(self._docs[start:end])
            parts.append(weight - weight / (_F32(1) + self._tf_norm[start:end]))
        if len(docs) == 1:
            return docs[0].astype(np.int64), parts[0]
        # Lucene's BooleanScorer adds the clause scores in a double, then casts to float
        total = np.bincount(np.concatenate(docs), weights=np.concatenate(parts).astype(np.float64), minlength=self.size)
        # the matches are the documents scoring > 0: a clause scores 0 only if tf * normInverse < 2**-24, a
        # document ~10**7 times longer than the average
        hits = np.flatnonzero(total > 0)
        return hits, total[hits].astype(np.float32)

    def search_scored(self, query: str, k: int = TOP_K) -> list[tuple[int, float]]:
        """The (at most ``k``) best (position, Lucene score) pairs: score descending, ties by ASIN ascending."""
        hits, scores = self.scores(query)
        if len(scores) > k:  # the hits scoring at least the k-th best (ties on the edge included)
            keep = scores >= np.partition(scores, len(scores) - k)[len(scores) - k]
            hits, scores = hits[keep], scores[keep]
        # one int64 key per hit orders both ways at once: a positive float32's bits order as its value, and
        # the low half is the complement of the ASIN's rank
        keys = (scores.view(np.int32).astype(np.int64) << 32) | (self.size - self._tie_rank[hits])
        if len(keys) > k:
            keys = np.partition(keys, len(keys) - k)[len(keys) - k:]
        keys = np.sort(keys)[::-1]
        positions = self._by_tie_rank[self.size - (keys & 0xFFFFFFFF)]
        best = (keys >> 32).astype(np.int32).view(np.float32)
        return list(zip(positions.tolist(), best.tolist()))

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        """Positions of the (at most ``k``) best matching documents; only documents sharing a query term."""
        return [position for position, _ in self.search_scored(query, k)]
