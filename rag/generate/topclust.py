"""TopClustRAG (Bakagianni, Pavlopoulos and Likas, SIGIR 2025 LiveRAG, arXiv 2506.15246): cluster, answer per
cluster, synthesise.

Second on faithfulness at LiveRAG. Followed from the paper (section II and Table IV; we found no public code):

1. cluster: the passages handed to the generator are embedded and split by K-Means; the number of clusters k is
   chosen per question as the one with the highest macro-averaged silhouette coefficient (the mean over
   clusters of each cluster's mean silhouette, Pavlopoulos et al. 2024), robust to unbalanced clusters. Every
   passage falls in exactly one cluster. `n_clusters` fixes k instead (an ablation, not the paper);
2. partial answers: each cluster's top `per_cluster` passages by retrieval rank (paper: r = 5, chosen because
   recall stopped growing after 5) form the context of one answer prompt (Table IV: answer only from the
   context, "I don't know." when nothing is there, the available part and a note on what is missing when
   only part is). All clusters of all questions are one `engine.generate` batch;
3. synthesis: the partial answers that do not say "I don't know" are ranked by relevance to the question and
   become the context of a final prompt with the same instruction (the paper reuses the template). One batch
   over the questions that have an informative partial answer.

Inferred or changed, and why:

* representation: the paper used TF-IDF vectors reduced to 100 dimensions by SVD, for speed, and reports
  contextual embeddings (Stella 1.5B) as comparable (ROUGE-L 0.217 vs 0.214); here the configured sentence
  embedder (all-MiniLM-L6-v2 by default, unit vectors, Euclidean distance for K-Means and the silhouette),
  all questions' passages in one `encode_passages` call;
* the range of k is not given: `min_clusters`..`max_clusters` (2..10), capped at n - 1 (the silhouette needs
  k < n); fewer than 3 passages make one cluster. Ties go to the smaller k. K-Means is faiss's, seeded, with
  `n_init` restarts (the best objective kept);
* ranking the partial answers: the paper scores them with the cross-encoder ms-marco-MiniLM-L6-v2 and keeps the
  "top-ranked" ones without saying how many; here the same embedder scores them (cosine to the question,
  `rank_partials`), and every informative one is kept unless `max_partials` is set;
* no informative partial answer: the paper does not say; the answer is then "I don't know." without a
  synthesis call (`steps["synthesis"]` is null). An empty synthesis output falls back to the best-ranked partial
  answer (`fallback="top_partial"`).

`steps` keeps the clusters (passage ids, the partition), the chosen k and the silhouette of every k tried, the
passages each cluster prompt used, every partial answer with its raw output, the synthesis order and output.
`GenerationResult.passages` lists the passages the cluster prompts used, in input order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput, passage_views
from rag.generate.multistep import MultiStepGenerator, output_record
from rag.generate.parsing import clean_output, says_unknown
from rag.records import GenerationResult, ScoredPassage

if TYPE_CHECKING:
    from rag.embed import Embedder

UNKNOWN = "I don't know."


# -- clustering ---------------------------------------------------------------------------------------------
def pairwise_distances(x: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of `x` (float64, clipped at 0 against rounding)."""
    x = np.asarray(x, dtype=np.float64)
    sq = (x * x).sum(axis=1)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0))


def macro_silhouette(distances: np.ndarray, labels: np.ndarray) -> float:
    """Mean over clusters of the mean silhouette of their members (Pavlopoulos et al., 2024), so a small
    cluster weighs as much as a large one. A member of a singleton cluster scores 0 (as in scikit-learn).
    Needs at least two clusters."""
    clusters = np.unique(labels)
    if len(clusters) < 2:
        raise ValueError("the silhouette needs at least two clusters")
    masks = [labels == c for c in clusters]
    # mean distance of every point to the members of each cluster (a point's own distance 0 included)
    means = np.stack([distances[:, m].mean(axis=1) for m in masks], axis=1)
    per_cluster = []
    for ci, mask in enumerate(masks):
        size = int(mask.sum())
        if size == 1:
            per_cluster.append(0.0)
            continue
        a = means[mask, ci] * size / (size - 1)  # leave the point itself out
        b = np.delete(means[mask], ci, axis=1).min(axis=1)
        denom = np.maximum(a, b)
        s = np.where(denom > 0, (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
        per_cluster.append(float(s.mean()))
    return float(np.mean(per_cluster))


def kmeans_labels(x: np.ndarray, k: int, seed: int = 0, n_init: int = 10, niter: int = 50) -> np.ndarray:
    """faiss K-Means (seeded, best of `n_init` runs), labels renumbered 0.. in order of first appearance so that
    no label is empty."""
    import faiss

    x = np.ascontiguousarray(x, dtype=np.float32)
    km = faiss.Kmeans(x.shape[1], k, niter=niter, nredo=n_init, seed=seed, verbose=False,
                      min_points_per_centroid=1, max_points_per_centroid=1 << 20)
    km.train(x)
    _, assigned = km.index.search(x, 1)
    raw = assigned[:, 0]
    order = {label: i for i, label in enumerate(dict.fromkeys(raw.tolist()))}
    return np.array([order[label] for label in raw.tolist()], dtype=int)


@dataclass
class Clustering:
    """One question's partition of its passages (positions in input order) and how k was chosen."""

    groups: list[list[int]]
    k: int
    #: macro-averaged silhouette of each k tried (empty when k was fixed or there were too few passages)
    silhouette: dict[int, float] = field(default_factory=dict)
    reason: str = ""


def cluster_passages(vectors: np.ndarray | None, n: int, n_clusters: int | None = None, min_clusters: int = 2,
                     max_clusters: int = 10, seed: int = 0, n_init: int = 10, niter: int = 50) -> Clustering:
    """Partition `n` passages: a fixed `n_clusters`, else the k in `min_clusters`..`max_clusters` (at most
    n - 1) with the best macro silhouette; one cluster when no k qualifies."""
    everything = list(range(n))
    if n_clusters is not None:
        k = min(n_clusters, n)
        if k <= 1:
            return Clustering([everything], 1, reason="n_clusters or passages <= 1")
        labels = kmeans_labels(vectors, k, seed, n_init, niter)
        return Clustering(_groups(labels), int(labels.max()) + 1, reason="fixed k")
    candidates = range(max(2, min_clusters), min(max_clusters, n - 1) + 1)
    if not candidates:
        return Clustering([everything], 1, reason=f"{n} passages: no k with 2 <= k < n")
    distances = pairwise_distances(vectors)
    best: tuple[float, np.ndarray] | None = None
    scores: dict[int, float] = {}
    for k in candidates:
        labels = kmeans_labels(vectors, k, seed, n_init, niter)
        if labels.max() < 1:  # identical vectors: K-Means found one cluster
            continue
        scores[k] = macro_silhouette(distances, labels)
        if best is None or scores[k] > best[0] + 1e-12:
            best = (scores[k], labels)
    if best is None:
        return Clustering([everything], 1, scores, reason="K-Means found a single cluster")
    labels = best[1]
    return Clustering(_groups(labels), int(labels.max()) + 1, scores, reason="best macro silhouette")


def _groups(labels: np.ndarray) -> list[list[int]]:
    return [np.flatnonzero(labels == c).tolist() for c in range(int(labels.max()) + 1)]


# -- the strategy -------------------------------------------------------------------------------------------
class TopClustGenerator(MultiStepGenerator):
    name = "topclust"
    default_prompts = {"cluster": "topclust_cluster", "synthesis": "topclust_synthesis"}

    def __init__(self, embedder: Embedder | None = None, n_clusters: int | None = None, min_clusters: int = 2,
                 max_clusters: int = 10, per_cluster: int | None = 5, n_init: int = 10, niter: int = 50,
                 rank_partials: bool = True, max_partials: int | None = None, seed: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        if embedder is None:
            raise ValueError("generator=topclust clusters passage embeddings: set generator.embedder "
                             "(a rag.embed.Embedder)")
        if min_clusters < 2 or max_clusters < min_clusters:
            raise ValueError(f"generator.min_clusters must be >= 2 and <= max_clusters, got {min_clusters}, "
                             f"{max_clusters}")
        for key, value in (("n_clusters", n_clusters), ("per_cluster", per_cluster), ("max_partials", max_partials)):
            if value is not None and value < 1:
                raise ValueError(f"generator.{key} must be null or >= 1, got {value}")
        self.embedder = embedder
        self.n_clusters, self.min_clusters, self.max_clusters = n_clusters, min_clusters, max_clusters
        self.per_cluster, self.n_init, self.niter = per_cluster, n_init, niter
        self.rank_partials, self.max_partials = rank_partials, max_partials
        self.seed = seed

    # -- step 1: clusters ----------------------------------------------------------------------------------
    def cluster(self, items: list[GenerationInput]) -> list[Clustering]:
        """Every question's partition; the passages of those that are clustered are embedded in one call."""
        clustered = [i for i, item in enumerate(items) if self.needs_vectors(len(item.passages))]
        vectors: dict[int, np.ndarray] = {}
        if clustered:
            encoded = self.embedder.encode_passages([p.passage.text for i in clustered for p in items[i].passages])
            offset = 0
            for i in clustered:
                vectors[i] = encoded[offset: offset + len(items[i].passages)]
                offset += len(items[i].passages)
        return [cluster_passages(vectors.get(i), len(item.passages), self.n_clusters, self.min_clusters,
                                 self.max_clusters, self.seed, self.n_init, self.niter)
                for i, item in enumerate(items)]

    def needs_vectors(self, n: int) -> bool:
        """K-Means runs at all: a fixed k of at least 2 over 2+ passages, or a silhouette over 3+ passages."""
        if self.n_clusters is not None:
            return n >= 2 and self.n_clusters >= 2
        return n >= 3

    def representatives(self, passages: list[ScoredPassage], group: list[int]) -> list[int]:
        """The cluster's `per_cluster` best passages by retrieval rank (input position breaks ties and stands in
        for a missing rank), returned in input order so the run's ordering still applies."""
        best = sorted(group, key=lambda i: (passages[i].rank or i + 1, i))
        return sorted(best[: self.per_cluster] if self.per_cluster else best)

    # -- step 3: ranking partial answers -------------------------------------------------------------------
    def relevance(self, questions: list[str], partials: list[list[str]]) -> list[list[float | None]]:
        """Cosine of each informative partial answer to its question (one encoder call for the questions, one
        for the answers); None everywhere when `rank_partials` is off."""
        flat = [p for row in partials for p in row]
        if not self.rank_partials or not flat:
            return [[None] * len(row) for row in partials]
        asking = [i for i, row in enumerate(partials) if row]
        q_vec = dict(zip(asking, self.embedder.encode_queries([questions[i] for i in asking])))
        p_vec = self.embedder.encode_passages(flat)
        out, offset = [], 0
        for i, row in enumerate(partials):
            out.append([float(np.dot(q_vec[i], p_vec[offset + j])) for j in range(len(row))])
            offset += len(row)
        return out

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        if not items:
            return []
        questions = [item.question.question for item in items]
        clusterings = self.cluster(items)
        chosen = [[self.representatives(item.passages, g) for g in c.groups] for item, c in zip(items, clusterings)]

        cluster_t = self.template("cluster")
        owners = [(qi, ci) for qi, groups in enumerate(chosen) for ci in range(len(groups))]
        cluster_reqs = [self.step_request(cluster_t, question=questions[qi],
                                          passages=passage_views([items[qi].passages[j] for j in chosen[qi][ci]]))
                        for qi, ci in owners]
        cluster_out = self.run_step(ctx, cluster_reqs, "topclust clusters")
        outputs: list[list[Any]] = [[] for _ in items]
        for (qi, _), completion in zip(owners, cluster_out):
            outputs[qi].append(completion)
        answers = [[clean_output(c.text) for c in row] for row in outputs]
        informative = [[ci for ci, a in enumerate(row) if a and not says_unknown(a)] for row in answers]
        scores = self.relevance(questions, [[answers[qi][ci] for ci in row] for qi, row in enumerate(informative)])
        order = []
        for row, row_scores in zip(informative, scores):
            ranked = [ci for _, ci in sorted(zip(row_scores, row), key=lambda s: (-(s[0] or 0.0), s[1]))] \
                if self.rank_partials else list(row)
            order.append(ranked[: self.max_partials] if self.max_partials else ranked)

        synth_t = self.template("synthesis")
        pending = [qi for qi, row in enumerate(order) if row]
        synth_reqs = {qi: self.step_request(synth_t, question=questions[qi],
                                            partials=[answers[qi][ci] for ci in order[qi]]) for qi in pending}
        synth_out = dict(zip(pending, self.run_step(ctx, [synth_reqs[qi] for qi in pending], "topclust synthesis")))

        results = []
        for qi, item in enumerate(items):
            ids = [[item.passages[j].passage.passage_id for j in g] for g in clusterings[qi].groups]
            relevance = dict(zip(informative[qi], scores[qi]))
            steps: dict[str, Any] = {
                "clusters": ids, "k": clusterings[qi].k,
                "silhouette": {str(k): round(v, 6) for k, v in clusterings[qi].silhouette.items()},
                "cluster_reason": clusterings[qi].reason,
                "cluster_passages": [[item.passages[j].passage.passage_id for j in g] for g in chosen[qi]],
                "partials": [{"cluster": ci, "answer": answers[qi][ci], "informative": ci in relevance,
                              "relevance": relevance.get(ci), **output_record(c)}
                             for ci, c in enumerate(outputs[qi])],
                "synthesis_order": order[qi],
                "synthesis": output_record(synth_out[qi]) if qi in synth_out else None,
                "llm_calls": len(outputs[qi]) + int(qi in synth_out),
            }
            used = sorted({j for g in chosen[qi] for j in g})
            fallback = None
            if qi in synth_out:
                answer = clean_output(synth_out[qi].text)
                if not answer:
                    answer, fallback = answers[qi][order[qi][0]], "top_partial"
                final_prompt = ctx.engine.render(synth_reqs[qi])
            else:  # no cluster knew: the method's own "I don't know", no synthesis call
                answer = UNKNOWN
                final_prompt = ctx.engine.render(cluster_reqs[owners.index((qi, 0))])
            results.append(GenerationResult(
                answer=cut_words(answer, self.max_answer_words), final_prompt=final_prompt, steps=steps,
                passages=[item.passages[j] for j in used], parse_failed=fallback is not None, fallback=fallback))
        return results
