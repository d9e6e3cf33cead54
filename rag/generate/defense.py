"""TrustRAG's retrieval-side defence: K-means on passage embeddings plus n-gram (ROUGE-L) duplicate filtering.

Corpus-poisoning attacks plant several near-identical passages written to be retrieved for one question.
TrustRAG (Zhou et al., 2025; HuichiZhou/TrustRAG `defend_module.py`, `k_mean_filtering` and
`group_n_gram_filtering`) exploits that they sit close together in embedding space:

1. (`kmeans_ngram` only) if no pair of passages overlaps by more than `ngram_threshold` ROUGE-L F1, nothing
   looks planted and every passage is kept;
2. the embeddings are standardised, L2-normalised and split by K-means (k=2);
3. each cluster's mean pairwise cosine similarity (on the raw embeddings) is compared with
   `similarity_threshold`: a cluster above it is suspicious and dropped; if both are, every passage is dropped;
4. (`kmeans_ngram` only) inside the kept clusters, n-gram duplicates are dropped as `group_n_gram_filtering`
   drops them (`ngram_duplicates`: both members of a pair, and later passages close to the first one dropped).

Checked against `defend_module.py` line by line (TrustRAG's repository as forked in TomRahav/TrustRAG, 2025):
steps 1-4, the thresholds (ROUGE-L F1 0.25, cosine 0.88), the standardise-then-normalise before K-means (k=2,
10 restarts, 500 iterations), the mean pairwise cosine on the raw embeddings, and the branches (both clusters
dense: drop all; one dense: keep the other, deduplicated; none: keep both, each deduplicated; a lone passage
beside a dense cluster: drop all when it is close to that cluster's first passage, else keep it alone; a lone
passage beside a sparse cluster: keep that cluster as it is) follow it. Deviations: fewer than 3 passages are
kept as they are (two singleton clusters carry no density signal); K-means is a small seeded numpy
implementation (k-means++), not scikit-learn's; ROUGE-L tokenises lower-cased alphanumerics with the Snowball
stemmer (rouge_score's Porter stemmer there); the embedder is a config choice (TrustRAG: the [CLS] vector of
SimCSE-BERT; here all-MiniLM-L6-v2 by default); and the filter sees the passages handed to the generator, where
TrustRAG's `main_trustrag.py` filters the top k plus the planted texts and cuts to k afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from typing import Any

import numpy as np

FILTERS = ("none", "kmeans", "kmeans_ngram")


# -- ROUGE-L ------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except ImportError:  # PyStemmer is a dependency of BM25; without it ROUGE-L runs unstemmed
        return None


def rouge_tokens(text: str) -> list[str]:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    stemmer = _stemmer()
    return stemmer.stemWords(tokens) if stemmer and tokens else tokens


def lcs_length(a: list[str], b: list[str]) -> int:
    """Longest common subsequence length, bit-parallel (Allison-Dix / Hyyro): O(len(a) * len(b) / 64), so
    pairwise ROUGE-L over 512-word passages stays cheap in pure Python."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def rouge_l(a: str | list[str], b: str | list[str]) -> float:
    """ROUGE-L F1 between two texts (or token lists)."""
    ta = rouge_tokens(a) if isinstance(a, str) else a
    tb = rouge_tokens(b) if isinstance(b, str) else b
    lcs = lcs_length(ta, tb)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(tb), lcs / len(ta)
    return 2 * precision * recall / (precision + recall)


def any_ngram_duplicate(tokens: list[list[str]], threshold: float) -> bool:
    """Whether any two passages overlap by more than `threshold` ROUGE-L F1 (stops at the first such pair)."""
    return any(rouge_l(a, b) > threshold for a, b in combinations(tokens, 2))


def ngram_duplicates(tokens: list[list[str]], indices: list[int], threshold: float) -> set[int]:
    """Members of `indices` dropped as n-gram duplicates, in the order of TrustRAG's `group_n_gram_filtering`: each
    passage not yet dropped is compared with the passages after it; at the first one above `threshold` ROUGE-L F1
    both are dropped, and the first passage ever dropped this way becomes a reference that every later passage
    not yet dropped is compared with too (above `threshold`: dropped)."""
    dropped: set[int] = set()
    reference: int | None = None
    for position, i in enumerate(indices):
        if i in dropped:
            continue
        for j in indices[position + 1:]:
            if rouge_l(tokens[i], tokens[j]) > threshold:
                dropped.update((i, j))
                reference = i if reference is None else reference
                break
        if reference is not None and rouge_l(tokens[i], tokens[reference]) > threshold:
            dropped.add(i)
    return dropped


# -- K-means ------------------------------------------------------------------------------------------------
def kmeans_two(x: np.ndarray, n_init: int = 10, max_iter: int = 500, seed: int = 0) -> np.ndarray:
    """Labels (0/1) of the best of `n_init` seeded k-means++ runs with k=2 (lowest inertia)."""
    rng = np.random.default_rng(seed)
    best_inertia, best_labels = np.inf, np.zeros(len(x), dtype=int)
    for _ in range(n_init):
        first = x[rng.integers(len(x))]
        dist = ((x - first) ** 2).sum(axis=1)
        second = x[rng.choice(len(x), p=dist / dist.sum())] if dist.sum() > 0 else first
        centers = np.stack([first, second])
        for _ in range(max_iter):
            labels = ((x[:, None, :] - centers[None]) ** 2).sum(axis=-1).argmin(axis=1)
            moved = np.stack([x[labels == k].mean(axis=0) if (labels == k).any() else centers[k] for k in (0, 1)])
            if np.allclose(moved, centers):
                break
            centers = moved
        sq = ((x[:, None, :] - centers[None]) ** 2).sum(axis=-1)
        labels = sq.argmin(axis=1)
        inertia = float(sq[np.arange(len(x)), labels].sum())
        if inertia < best_inertia - 1e-12:
            best_inertia, best_labels = inertia, labels
    return best_labels


def _standardise(x: np.ndarray) -> np.ndarray:
    """StandardScaler then row L2-normalisation, as TrustRAG prepares embeddings for K-means."""
    std = x.std(axis=0)
    z = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    return z / np.where(norms > 0, norms, 1.0)


def _mean_pairwise_cosine(emb: np.ndarray, members: list[int]) -> float | None:
    if len(members) < 2:
        return None
    sub = emb[members]
    sub = sub / np.maximum(np.linalg.norm(sub, axis=1, keepdims=True), 1e-12)
    sims = sub @ sub.T
    upper = sims[np.triu_indices(len(members), k=1)]
    return float(upper.mean())


def _cosine(emb: np.ndarray, i: int, j: int) -> float:
    a, b = emb[i], emb[j]
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))


def filter_tokens(texts: list[str], mode: str) -> list[list[str]]:
    """ROUGE-L tokens of one question's passages, when the mode uses them (kmeans_ngram)."""
    return [rouge_tokens(t) for t in texts] if mode == "kmeans_ngram" else []


def needs_embeddings(texts: list[str], mode: str, ngram_threshold: float,
                     tokens: list[list[str]] | None = None) -> bool:
    """Whether `trustrag_filter` clusters these passages. With kmeans_ngram it does only when two passages overlap
    (rule 1), so a batch embeds just those questions' passages: on 275 LiveRAG dev questions over BM25 at k=20,
    21 of them (420 passages instead of 5,500)."""
    if mode == "none" or len(texts) < 3:
        return False
    if mode == "kmeans":
        return True
    return any_ngram_duplicate(tokens if tokens is not None else filter_tokens(texts, mode), ngram_threshold)


@dataclass
class FilterDecision:
    """Which passages (by position) survived, and why; stored in `steps["filter"]`."""

    kept: list[int]
    removed: list[int] = field(default_factory=list)
    reason: str = ""
    cluster_similarity: list[float | None] = field(default_factory=list)
    clusters: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "removed": self.removed, "reason": self.reason,
                "cluster_similarity": self.cluster_similarity, "clusters": self.clusters}


def trustrag_filter(texts: list[str], embeddings: np.ndarray | None, mode: str = "kmeans_ngram",
                    similarity_threshold: float = 0.88, ngram_threshold: float = 0.25,
                    seed: int = 0, tokens: list[list[str]] | None = None) -> FilterDecision:
    """Decide which of one question's passages to keep (see the module docstring for the rules). `embeddings` may be
    None where `needs_embeddings` says no; `tokens`: `filter_tokens(texts, mode)`, when the caller has them."""
    if mode not in FILTERS:
        raise ValueError(f"generator.filter must be one of {FILTERS}, got {mode!r}")
    everything = list(range(len(texts)))
    if mode == "none":
        return FilterDecision(everything, reason="filter disabled")
    if len(texts) < 3:
        return FilterDecision(everything, reason="fewer than 3 passages")
    use_ngram = mode == "kmeans_ngram"
    tokens = tokens if tokens is not None else filter_tokens(texts, mode)
    if use_ngram and not any_ngram_duplicate(tokens, ngram_threshold):
        return FilterDecision(everything, reason="no n-gram overlap above threshold")
    if embeddings is None:
        raise ValueError("the K-means filter needs passage embeddings (configure generator.embedder)")
    emb = np.asarray(embeddings, dtype=np.float64)
    labels = kmeans_two(_standardise(emb), seed=seed)
    groups = [[i for i in everything if labels[i] == k] for k in (0, 1)]
    sims = [_mean_pairwise_cosine(emb, g) for g in groups]

    def decide(kept: list[int], reason: str, dedupe: list[list[int]] = ()) -> FilterDecision:
        dropped: set[int] = set()
        if use_ngram:
            for group in dedupe:
                dropped |= ngram_duplicates(tokens, group, ngram_threshold)
        final = sorted(i for i in kept if i not in dropped)
        return FilterDecision(final, [i for i in everything if i not in final], reason, sims, labels.tolist())

    thr = similarity_threshold
    if not groups[0] or not groups[1]:  # identical embeddings: one cluster
        only = groups[0] or groups[1]
        dense = (sims[0] if groups[0] else sims[1]) or 0.0
        return decide([], "single dense cluster") if dense > thr else decide(only, "single sparse cluster", [only])
    for single, other in ((1, 0), (0, 1)):
        if sims[single] is None:  # one cluster is a single passage
            if sims[other] is not None and sims[other] > thr:
                if _cosine(emb, groups[other][0], groups[single][0]) > thr:
                    return decide([], "all passages similar")
                return decide(groups[single], f"cluster {other} dense")
            return decide(groups[other], f"cluster {single} is a lone passage")
    dense, sparse = (1, 0) if sims[1] > sims[0] else (0, 1)
    if sims[sparse] > thr:
        return decide([], "both clusters dense")
    if sims[dense] < thr:
        return decide(groups[0] + groups[1], "no dense cluster", [groups[0], groups[1]])
    return decide(groups[sparse], f"cluster {dense} dense", [groups[sparse]])


def defend_lists(texts: list[list[str]], embedder: Any, mode: str = "kmeans_ngram",
                 similarity_threshold: float = 0.88, ngram_threshold: float = 0.25,
                 seed: int = 0) -> list[FilterDecision]:
    """Filter decisions for several questions' passages (`texts[q]`). The passages of every question the filter
    clusters (`needs_embeddings`) are embedded in one `embedder.encode_passages` call; the others never are."""
    tokens = [filter_tokens(row, mode) for row in texts]
    embeddings: list[np.ndarray | None] = [None] * len(texts)
    clustered = [i for i, (row, tok) in enumerate(zip(texts, tokens))
                 if embedder is not None and needs_embeddings(row, mode, ngram_threshold, tok)]
    if clustered:
        vectors = embedder.encode_passages([t for i in clustered for t in texts[i]])
        offset = 0
        for i in clustered:
            embeddings[i] = vectors[offset: offset + len(texts[i])]
            offset += len(texts[i])
    return [trustrag_filter(row, e, mode, similarity_threshold, ngram_threshold, seed, tokens=tok)
            for row, e, tok in zip(texts, embeddings, tokens)]

