"""Crucible (Dietz, Li et al., 2026): nugget-first generation with one citation per sentence.

Steps, each ONE engine batch over all unfinished questions, every intermediate kept under `steps`:

1. ideation: a query-focused summary of each of the top `max_docs` passages (`summaries`), then Q&A nuggets
   from request + summary (`ideation`);
2. bank (`rag.generate.nugget_bank`): paraphrases merged by embedding similarity plus an LLM check of
   borderline pairs, popularity = documents producing the nugget, top `bank.size` (`bank`, `merge`);
3. ranking (`rag.generate.nugget_rank`): classifier or documented fallback quality, fused with popularity;
4. nugget-first retrieval (the run's retriever, reranker and cut through `ctx.retrieve`, all nuggets of all
   questions in one call, cached like IterDRAG's sub-queries) and extraction of one self-contained sentence per
   (nugget, passage), with extraction confidence exp(mean token log-probability) (`extraction`);
5. selection and assembly: the `k` most confident sentences per nugget, in nugget-score order, each citing the
   `doc_id` of its passage only; whole sentences until `max_answer_words`;
6. verified variant (`verify: true`): each selected sentence is checked against its cited passage
   (support / partial / none); unsupported ones are dropped and replaced by the nugget's next candidate, for
   up to `verify_rounds` rounds (`verification`, `dropped`).

Named fallbacks, each counted in `steps.parse_failures[<step>]`: an empty summary -> `passage_as_summary`; a
document without readable nuggets -> `no_nuggets_from_document`; an unreadable paraphrase check ->
`not_merged`; an extraction that is empty or NONE -> `no_sentence`; an unreadable support label ->
`unverified_dropped`. At answer level (`GenerationResult.fallback`): no nugget at all -> `request_as_nugget`
(the request itself is the one nugget); no sentence at all -> `empty_output`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput
from rag.generate.multistep import MultiStepGenerator
from rag.generate.nugget_bank import SAME_SCHEMA, Nugget, NuggetBank, parse_qa_nuggets
from rag.generate.nugget_rank import NuggetRanker
from rag.generate.parsing import clean_output, first_line
from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.records import GenerationResult, ScoredPassage

SUPPORT_LABELS = ("support", "partial", "none")
_LABEL = re.compile(r"\b(support(?:ed|s)?|partial(?:ly)?|none|not|no|yes|unsupported)\b", re.IGNORECASE)
_LABEL_MAP = {"support": "support", "supported": "support", "supports": "support", "yes": "support",
              "partial": "partial", "partially": "partial", "none": "none", "not": "none", "no": "none",
              "unsupported": "none"}


#: structured output for the support check where the engine supports it (small models otherwise often reply
#: with nothing or prose); the parser also reads a bare label word
SUPPORT_SCHEMA = {"type": "object", "properties": {"label": {"type": "string", "enum": list(SUPPORT_LABELS)}},
                  "required": ["label"], "additionalProperties": False}
_JSON_LABEL = re.compile(r'"label"\s*:\s*"([^"]*)"', re.IGNORECASE)


def parse_support_label(text: str) -> str | None:
    """support / partial / none from a {"label": ...} object or the first label word of a reply, or None."""
    found = _JSON_LABEL.search(text or "")
    m = _LABEL.search(found.group(1) if found else (text or ""))
    return _LABEL_MAP[m.group(1).lower()] if m else None


def sequence_confidence(token_logprobs: list[float] | None) -> float:
    """Sequence likelihood normalised by length: exp(mean token log-probability); 0.0 without tokens."""
    if not token_logprobs:
        return 0.0
    return math.exp(sum(token_logprobs) / len(token_logprobs))


def parse_sentence(text: str, min_words: int = 3) -> str | None:
    """The extracted sentence (first line, label stripped, ending in punctuation), or None for NONE/empty."""
    line = clean_output(first_line(text or "")).strip().strip('"')
    line = re.sub(r"^sentence\s*:\s*", "", line, flags=re.IGNORECASE)
    if not line or re.match(r"^\W*none\b", line, re.IGNORECASE) or len(line.split()) < min_words:
        return None
    return line if line[-1] in ".!?" else line + "."


@dataclass
class _State:
    item: GenerationInput
    docs: list[ScoredPassage]
    steps: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    failures: Counter = field(default_factory=Counter)
    bank: list[Nugget] = field(default_factory=list)
    fallback: str | None = None
    used: dict[str, ScoredPassage] = field(default_factory=dict)


class CrucibleGenerator(MultiStepGenerator):
    name = "crucible"
    default_prompts = {"summary": "crucible_summary", "nuggets": "crucible_nuggets", "same": "crucible_same",
                       "extract": "crucible_extract", "support": "crucible_support"}

    def __init__(self, embedder: Any = None, max_docs: int = 10, nuggets_per_doc: int = 5,
                 bank: Mapping[str, Any] | None = None, ranker: Mapping[str, Any] | None = None,
                 passages_per_nugget: int = 2, k: int = 1, verify: bool = False, verify_rounds: int = 2,
                 keep_partial: bool = True, verifier: LLMEngine | None = None, max_passage_words: int = 200,
                 summary_max_tokens: int = 96, nuggets_max_tokens: int = 160, check_max_tokens: int = 12,
                 extract_max_tokens: int = 64, verify_max_tokens: int = 16, **kwargs: Any):
        super().__init__(**kwargs)
        if embedder is None:
            raise ValueError("generator.embedder is required (a rag.embed.Embedder for the nugget bank)")
        if k < 1 or max_docs < 1 or passages_per_nugget < 1:
            raise ValueError("generator.k, generator.max_docs and generator.passages_per_nugget must be >= 1")
        self.embedder = embedder
        self.bank = NuggetBank(embedder, **dict(bank or {}))
        self.ranker = NuggetRanker(**dict(ranker or {}))
        self.max_docs, self.nuggets_per_doc, self.passages_per_nugget, self.k = (
            max_docs, nuggets_per_doc, passages_per_nugget, k)
        self.verify, self.verify_rounds, self.keep_partial, self.verifier = verify, verify_rounds, keep_partial, verifier
        self.max_passage_words = max_passage_words
        self.limits = {"summary": summary_max_tokens, "nuggets": nuggets_max_tokens, "same": check_max_tokens,
                       "extract": extract_max_tokens, "support": verify_max_tokens}
        if verify:
            self.name = "crucible_verified"

    def check_engine(self, engine: LLMEngine) -> None:
        engine.require_logprobs(f"generator {self.name} (extraction confidence)")

    @property
    def uses_ordering(self) -> bool:
        return False  # documents are read in retrieval order, which decides ties in the bank

    def _passage(self, p: ScoredPassage) -> str:
        return cut_words(p.passage.text, self.max_passage_words)

    def _ask(self, ctx: GenerationContext, step: str, pairs: list[tuple[_State, dict[str, Any]]],
             logprobs: bool = False, engine: LLMEngine | None = None) -> list[Completion]:
        """One batch of `step` requests; counts calls per question."""
        template = self.template(step)
        requests: list[LLMRequest] = []
        for state, variables in pairs:
            request = self.step_request(template, self.limits[step], **variables)
            if logprobs:
                request = dataclasses.replace(request, params=dataclasses.replace(request.params, logprobs=True))
            schema = {"support": SUPPORT_SCHEMA, "same": SAME_SCHEMA}.get(step)
            if schema is not None and (engine or ctx.engine).supports_json_schema:
                request = dataclasses.replace(request, params=dataclasses.replace(request.params, json_schema=schema))
            requests.append(request)
            state.calls += 1
        if not requests:
            return []
        return (engine or ctx.engine).generate(requests, desc=f"{self.name} {step}")

    # -- steps ------------------------------------------------------------------------------------------------
    def ideate(self, ctx: GenerationContext, states: list[_State]) -> list[list[Nugget]]:
        pairs = [(s, {"request": s.item.question.question, "passage": self._passage(d)}) for s in states
                 for d in s.docs]
        outs = self._ask(ctx, "summary", pairs)
        summaries: dict[int, list[str]] = {id(s): [] for s in states}
        for (state, variables), out in zip(pairs, outs):
            text = clean_output(out.text)
            if not text:
                state.failures["summary"] += 1
                text = variables["passage"]  # fallback: passage_as_summary
            summaries[id(state)].append(text)
        for state in states:
            state.steps["summaries"] = [{"doc_id": d.passage.doc_id, "passage_id": d.passage.passage_id,
                                         "summary": t} for d, t in zip(state.docs, summaries[id(state)])]
        pairs = [(s, {"request": s.item.question.question, "summary": t, "max_nuggets": self.nuggets_per_doc})
                 for s in states for t in summaries[id(s)]]
        outs = self._ask(ctx, "nuggets", pairs)
        cue = self.template("nuggets").extra.get("cue", "")
        raw: dict[int, list[Nugget]] = {id(s): [] for s in states}
        ideation: dict[int, list[dict[str, Any]]] = {id(s): [] for s in states}
        doc_index: Counter = Counter()
        for (state, _v), out in zip(pairs, outs):
            doc = state.docs[doc_index[id(state)]]
            doc_index[id(state)] += 1
            parsed = parse_qa_nuggets(f"{cue} {out.text}", self.nuggets_per_doc)
            if parsed is None:
                state.failures["ideation"] += 1  # fallback: no_nuggets_from_document
            for q, a in parsed or []:
                raw[id(state)].append(Nugget(q, a, doc.passage.doc_id, doc.passage.passage_id))
            ideation[id(state)].append({"doc_id": doc.passage.doc_id, "output": out.text,
                                        "nuggets": [{"question": q, "answer": a} for q, a in parsed or []],
                                        "parse_failed": parsed is None})
        for state in states:
            state.steps["ideation"] = ideation[id(state)]
        return [raw[id(s)] for s in states]

    def build_bank(self, ctx: GenerationContext, states: list[_State], raw: list[list[Nugget]]) -> None:
        template_owner = {}

        def check(pairs: list[tuple[Nugget, Nugget]]) -> list[str]:
            asks = [(template_owner[id(a)], {"first": a, "second": b}) for a, b in pairs]
            return [c.text for c in self._ask(ctx, "same", asks)]

        for state, nuggets in zip(states, raw):
            for n in nuggets:
                template_owner[id(n)] = state
        banks, stats = self.bank.build(raw, check)
        for state, bank, stat in zip(states, banks, stats):
            if stat.llm_parse_failures:
                state.failures["paraphrase_check"] += stat.llm_parse_failures  # fallback: not_merged
            if not bank:  # fallback: the request itself is the one nugget
                state.fallback = "request_as_nugget"
                first = state.docs[0].passage if state.docs else None
                bank = [Nugget(state.item.question.question, "", first.doc_id if first else "",
                               first.passage_id if first else "", doc_ids=[first.doc_id] if first else [])]
            state.bank = self.ranker.rank(bank, state.item.question.question, len(state.docs))
            state.steps["merge"] = stat.to_dict()
            state.steps["ranking"] = {"mode": self.ranker.mode, "model_path": self.ranker.model_path,
                                      "fusion_weight": self.ranker.fusion_weight}
            state.steps["bank"] = [n.to_dict() for n in state.bank]

    def support_passages(self, ctx: GenerationContext, states: list[_State]) -> list[list[list[ScoredPassage]]]:
        """Passages per (question, nugget): the run's retrieval for "question answer", else the nugget's sources."""
        queries = [f"{n.question} {n.answer}".strip() for s in states for n in s.bank]
        if ctx.retrieve is not None and queries:
            ranked = ctx.retrieve(queries)
        else:
            by_doc = [{d.passage.doc_id: d for d in s.docs} for s in states]
            ranked = [[by_doc[i][doc] for doc in n.doc_ids if doc in by_doc[i]]
                      for i, s in enumerate(states) for n in s.bank]
        out, pos = [], 0
        for state in states:
            out.append([list(r)[: self.passages_per_nugget] for r in ranked[pos: pos + len(state.bank)]])
            pos += len(state.bank)
            state.steps["retrieval"] = "run retriever" if ctx.retrieve is not None else "source passages"
        return out

    def extract(self, ctx: GenerationContext, states: list[_State],
                passages: list[list[list[ScoredPassage]]]) -> list[list[list[dict[str, Any]]]]:
        """Candidates per (question, nugget), most confident first."""
        pairs, where = [], []
        for si, state in enumerate(states):
            for ni, nugget in enumerate(state.bank):
                for p in passages[si][ni]:
                    pairs.append((state, {"question": nugget.question, "passage": self._passage(p)}))
                    where.append((si, ni, p))
        outs = self._ask(ctx, "extract", pairs, logprobs=True)
        cands: list[list[list[dict[str, Any]]]] = [[[] for _ in s.bank] for s in states]
        logs: list[list[dict[str, Any]]] = [[] for _ in states]
        for (si, ni, p), out in zip(where, outs):
            sentence = parse_sentence(out.text)
            conf = round(sequence_confidence(out.token_logprobs), 6)
            logs[si].append({"nugget": ni, "passage_id": p.passage.passage_id, "doc_id": p.passage.doc_id,
                             "output": out.text, "sentence": sentence, "confidence": conf,
                             "tokens": len(out.token_logprobs or [])})
            if sentence is None:
                states[si].failures["extraction"] += 1  # fallback: no_sentence
                continue
            states[si].used[p.passage.passage_id] = p
            cands[si][ni].append({"text": sentence, "citations": [p.passage.doc_id],
                                  "passage_id": p.passage.passage_id, "confidence": conf})
        for si, state in enumerate(states):
            state.steps["extraction"] = logs[si]
            for ni in range(len(state.bank)):
                cands[si][ni].sort(key=lambda c: -c["confidence"])
        return cands

    def verify_candidates(self, ctx: GenerationContext, states: list[_State],
                          cands: list[list[list[dict[str, Any]]]]) -> list[list[list[dict[str, Any]]]]:
        """Keep, per nugget, up to k candidates whose cited passage supports them, trying the next candidate
        in place of a dropped one; one batch per round."""
        passages = {pid: p for s in states for pid, p in s.used.items()}
        kept: list[list[list[dict[str, Any]]]] = [[[] for _ in s.bank] for s in states]
        nxt = [[0 for _ in s.bank] for s in states]
        logs: list[list[dict[str, Any]]] = [[] for _ in states]
        dropped = [0 for _ in states]
        for round_no in range(1, self.verify_rounds + 1):
            todo = []
            for si, state in enumerate(states):
                for ni in range(len(state.bank)):
                    need = self.k - len(kept[si][ni])
                    while need > 0 and nxt[si][ni] < len(cands[si][ni]):
                        todo.append((si, ni, cands[si][ni][nxt[si][ni]]))
                        nxt[si][ni] += 1
                        need -= 1
            if not todo:
                break
            asks = [(states[si], {"sentence": c["text"], "passage": self._passage(passages[c["passage_id"]])})
                    for si, _ni, c in todo]
            outs = self._ask(ctx, "support", asks, engine=self.verifier)
            for (si, ni, cand), out in zip(todo, outs):
                label = parse_support_label(out.text)
                if label is None:
                    states[si].failures["verification"] += 1  # fallback: unverified_dropped
                ok = label == "support" or (label == "partial" and self.keep_partial)
                logs[si].append({"round": round_no, "nugget": ni, "sentence": cand["text"],
                                 "passage_id": cand["passage_id"], "label": label, "output": out.text, "kept": ok})
                if ok:
                    kept[si][ni].append({**cand, "support": label})
                else:
                    dropped[si] += 1
        for si, state in enumerate(states):
            state.steps["verification"] = logs[si]
            state.steps["dropped"] = dropped[si]
        return kept

    def assemble(self, state: _State, chosen: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        sentences, seen, words = [], set(), 0
        for ni, nugget in enumerate(state.bank):
            for cand in chosen[ni][: self.k]:
                key = " ".join(cand["text"].lower().split())
                if key in seen:
                    continue
                n_words = len(cand["text"].split())
                if self.max_answer_words and words + n_words > self.max_answer_words:
                    if sentences:
                        return sentences
                    cand = {**cand, "text": cut_words(cand["text"], self.max_answer_words)}
                    n_words = len(cand["text"].split())
                seen.add(key)
                words += n_words
                sentences.append({"text": cand["text"], "citations": list(cand["citations"]),
                                  "nugget": f"{nugget.question} {nugget.answer}".strip(),
                                  "confidence": cand["confidence"], "passage_id": cand["passage_id"]})
        return sentences

    # -- the run ----------------------------------------------------------------------------------------------
    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        self.check_engine(ctx.engine)
        if not items:
            return []
        states = [_State(item, list(item.passages[: self.max_docs])) for item in items]
        raw = self.ideate(ctx, states)
        self.build_bank(ctx, states, raw)
        passages = self.support_passages(ctx, states)
        cands = self.extract(ctx, states, passages)
        chosen = self.verify_candidates(ctx, states, cands) if self.verify else cands
        results = []
        for si, state in enumerate(states):
            sentences = self.assemble(state, chosen[si])
            fallback = state.fallback or (None if sentences else "empty_output")
            state.steps["parse_failures"] = dict(state.failures)
            state.steps["llm_calls"] = state.calls
            cited = [state.used[s["passage_id"]] for s in sentences]
            used = list(state.docs)
            seen = {p.passage.passage_id for p in used}
            for p in cited:
                if p.passage.passage_id not in seen:
                    used.append(p)
                    seen.add(p.passage.passage_id)
            answer = " ".join(s["text"] for s in sentences)
            results.append(GenerationResult(
                answer=answer, final_prompt="", steps=state.steps, passages=used,
                parse_failed=fallback is not None, fallback=fallback, sentences=sentences))
        return results
