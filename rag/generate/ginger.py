"""GINGER (Łajewska & Balog, SIGIR 2025): grounded, nugget-based responses; Crucible's baseline.

Steps, each ONE engine batch over all questions, every intermediate kept under `steps`:

1. detection (`detected`): facts ("information nuggets") listed from each of the top `max_passages` passages,
   each tied to its passage;
2. clustering (`clusters`): the nuggets of a question embedded with the project's `rag.embed.Embedder` and
   grouped by average-linkage agglomerative clustering on cosine distance (scipy), cut at
   `distance_threshold`;
3. cluster ranking: by the number of distinct passages in the cluster, then by the cosine similarity of its
   centroid to the question (the facts many passages agree on and closest to the request first);
4. summarisation (`summaries`): one sentence per top `max_clusters` cluster, citing the `doc_id`s of the
   passages its nuggets came from;
5. fluency (`fluency`): one rewrite of the ordered sentences; a reply with a different number of sentences
   is not used (fallback `unpolished_sentences`), so every sentence keeps its own citations.

Named fallbacks, counted in `steps.parse_failures[<step>]`: a passage without readable facts ->
`no_facts_from_passage`; an empty summary -> `first_fact`; a fluency reply that does not keep the sentences ->
`unpolished_sentences`. No fact at all for a question -> answer fallback `empty_output`.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput
from rag.generate.multistep import MultiStepGenerator
from rag.generate.parsing import clean_output, first_line
from rag.llm.base import LLMRequest
from rag.records import GenerationResult

_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*(.+?)\s*$")


def parse_facts(text: str, max_facts: int | None = None) -> list[str] | None:
    """Facts written one per line as "- fact" (a first line without the bullet counts: the prompt supplies
    it); None when no line has a letter."""
    facts = []
    for i, line in enumerate((text or "").splitlines()):
        m = _ITEM.match(line)
        item = m.group(1) if m else (line.strip() if i == 0 else "")
        if re.search(r"[A-Za-z]", item) and len(item.split()) >= 2:
            facts.append(item.rstrip())
    facts = list(dict.fromkeys(facts))[:max_facts] if max_facts else list(dict.fromkeys(facts))
    return facts or None


def parse_numbered(text: str, expected: int) -> list[str] | None:
    """Exactly `expected` numbered lines ("1. ...", the first number supplied by the prompt), else None."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\d+)[.)]\s*(.+)$", line)
        if m:
            out.append(m.group(2).strip())
        elif i == 0:
            out.append(line)
    return out if len(out) == expected and all(re.search(r"[A-Za-z]", s) for s in out) else None


def cluster_labels(vectors: np.ndarray, distance_threshold: float) -> list[int]:
    """Average-linkage agglomerative clusters on cosine distance (vectors are unit-normalised)."""
    n = len(vectors)
    if n == 0:
        return []
    if n == 1:
        return [0]
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import pdist

    distances = np.clip(pdist(vectors, metric="cosine"), 0.0, 2.0)
    labels = fcluster(linkage(distances, method="average"), t=distance_threshold, criterion="distance")
    return [int(x) - 1 for x in labels]


class GingerGenerator(MultiStepGenerator):
    name = "ginger"
    default_prompts = {"detect": "ginger_detect", "summarize": "ginger_summarize", "fluency": "ginger_fluency"}

    def __init__(self, embedder: Any = None, max_passages: int = 5, facts_per_passage: int = 5,
                 distance_threshold: float = 0.35, max_clusters: int = 5, fluency: bool = True,
                 max_passage_words: int = 200, detect_max_tokens: int = 128, summarize_max_tokens: int = 64,
                 fluency_max_tokens: int = 256, **kwargs: Any):
        super().__init__(**kwargs)
        if embedder is None:
            raise ValueError("generator.embedder is required (a rag.embed.Embedder for nugget clustering)")
        self.embedder = embedder
        self.max_passages, self.facts_per_passage = max_passages, facts_per_passage
        self.distance_threshold, self.max_clusters, self.fluency = distance_threshold, max_clusters, fluency
        self.max_passage_words = max_passage_words
        self.limits = {"detect": detect_max_tokens, "summarize": summarize_max_tokens, "fluency": fluency_max_tokens}

    @property
    def uses_ordering(self) -> bool:
        return False

    def _batch(self, ctx: GenerationContext, step: str, variables: list[dict[str, Any]]) -> list[str]:
        template = self.template(step)
        requests: list[LLMRequest] = [self.step_request(template, self.limits[step], **v) for v in variables]
        return [c.text for c in self.run_step(ctx, requests, f"ginger {step}")]

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        if not items:
            return []
        n = len(items)
        failures = [Counter() for _ in items]
        calls = [0] * n
        tops = [item.passages[: self.max_passages] for item in items]
        # 1. detection
        jobs = [(i, p) for i, ps in enumerate(tops) for p in ps]
        outs = self._batch(ctx, "detect", [{"question": items[i].question.question,
                                            "passage": cut_words(p.passage.text, self.max_passage_words)}
                                           for i, p in jobs])
        cue = self.template("detect").extra.get("cue", "")
        facts: list[list[dict[str, Any]]] = [[] for _ in items]
        detected: list[list[dict[str, Any]]] = [[] for _ in items]
        for (i, p), out in zip(jobs, outs):
            calls[i] += 1
            parsed = parse_facts(f"{cue} {out}", self.facts_per_passage)
            if parsed is None:
                failures[i]["detection"] += 1  # fallback: no_facts_from_passage
            detected[i].append({"passage_id": p.passage.passage_id, "doc_id": p.passage.doc_id, "output": out,
                                "facts": parsed or [], "parse_failed": parsed is None})
            facts[i].extend({"text": f, "doc_id": p.passage.doc_id, "passage_id": p.passage.passage_id}
                            for f in parsed or [])
        # 2-3. clustering and ranking (one embedder call for all facts and questions)
        flat = [f["text"] for fs in facts for f in fs]
        vectors = self.embedder.encode_passages(flat) if flat else np.zeros((0, 1), dtype=np.float32)
        qvecs = self.embedder.encode_queries([item.question.question for item in items])
        clusters: list[list[dict[str, Any]]] = []
        offset = 0
        for i in range(n):
            vec = vectors[offset: offset + len(facts[i])]
            offset += len(facts[i])
            labels = cluster_labels(vec, self.distance_threshold)
            groups: dict[int, list[int]] = {}
            for j, lab in enumerate(labels):
                groups.setdefault(lab, []).append(j)
            ranked = []
            for members in groups.values():
                centroid = vec[members].mean(axis=0)
                norm = float(np.linalg.norm(centroid)) or 1.0
                ranked.append({"facts": [facts[i][j]["text"] for j in members],
                               "doc_ids": list(dict.fromkeys(facts[i][j]["doc_id"] for j in members)),
                               "passages": len({facts[i][j]["passage_id"] for j in members}),
                               "relevance": round(float(centroid @ qvecs[i]) / norm, 6)})
            ranked.sort(key=lambda c: (-c["passages"], -c["relevance"]))
            clusters.append(ranked)
        # 4. one summary sentence per top cluster
        jobs2 = [(i, c) for i in range(n) for c in clusters[i][: self.max_clusters]]
        outs = self._batch(ctx, "summarize", [{"question": items[i].question.question, "facts": c["facts"]}
                                              for i, c in jobs2])
        sentences: list[list[dict[str, Any]]] = [[] for _ in items]
        for (i, c), out in zip(jobs2, outs):
            calls[i] += 1
            text = clean_output(first_line(out))
            if not text:
                failures[i]["summarize"] += 1  # fallback: first_fact
                text = c["facts"][0]
            text = text if text[-1] in ".!?" else text + "."
            sentences[i].append({"text": text, "citations": c["doc_ids"], "nugget": c["facts"][0],
                                 "confidence": None})
        summaries = [[dict(s) for s in ss] for ss in sentences]
        # 5. fluency pass
        fluency: list[dict[str, Any] | None] = [None] * n
        if self.fluency:
            todo = [i for i in range(n) if len(sentences[i]) > 1]
            outs = self._batch(ctx, "fluency", [{"question": items[i].question.question,
                                                 "sentences": [s["text"] for s in sentences[i]]} for i in todo])
            cue = self.template("fluency").extra.get("cue", "")
            for i, out in zip(todo, outs):
                calls[i] += 1
                rewritten = parse_numbered(f"{cue} {out}", len(sentences[i]))
                fluency[i] = {"output": out, "used": rewritten is not None}
                if rewritten is None:
                    failures[i]["fluency"] += 1  # fallback: unpolished_sentences
                    continue
                for s, text in zip(sentences[i], rewritten):
                    s["text"] = text if text[-1] in ".!?" else text + "."
        results = []
        for i in range(n):
            kept, words = [], 0
            for s in sentences[i]:
                w = len(s["text"].split())
                if self.max_answer_words and words + w > self.max_answer_words:
                    if kept:
                        break
                    s = {**s, "text": cut_words(s["text"], self.max_answer_words)}
                    w = len(s["text"].split())
                kept.append(s)
                words += w
            steps = {"detected": detected[i], "clusters": clusters[i], "summaries": summaries[i],
                     "fluency": fluency[i], "parse_failures": dict(failures[i]),
                     "llm_calls": calls[i]}
            fallback = None if kept else "empty_output"
            results.append(GenerationResult(answer=" ".join(s["text"] for s in kept), final_prompt="", steps=steps,
                                            passages=list(tops[i]), parse_failed=fallback is not None,
                                            fallback=fallback, sentences=kept))
        return results
