"""A run in TREC's formats: answers for the TREC RAG tracks (2024-2026), NeuCLIR reports, and run files per stage.

    python -m rag.export.trec RUN                       # TREC 2025 RAG answers (format 1), checked, trec_rag25.jsonl
    python -m rag.export.trec RUN --format rag26 --run-id my-run   # TREC 2026, rag_output_trec_rag_2026.jsonl
    python -m rag.export.trec RUN --format runs         # run.retrieval.trec, run.rerank.trec, qrels.trec

Answer formats (one JSON object per topic and line):

- `rag25` (TREC 2025 RAG, format 1): `{"metadata": {"team_id", "run_id", "type", "narrative_id", "narrative",
  "prompt"}, "references": [segment ids, ranked, at most 100], "answer": [{"text", "citations": [indices into
  references]}]}`; `rag25_ids` (format 2): the same with citations as segment ids. What changed since 2024: the
  topic moved into `metadata` (`narrative_id`, `narrative`, with `team_id` and the run `type`), `response_length`
  is gone, up to 100 references instead of 20 (the ranked list of the retrieval stage), citations listed from the
  best-supporting one (ours: the order the answer cites them in), and format 2's segment-id citations.
- `rag26` (TREC RAG 2026, written to the track's file name `rag_output_trec_rag_2026.jsonl`): `{"metadata":
  {"team_id", "narrative_id", "narrative", "run_id", "run_desc"}, "references": [doc ids], "answer": [{"text",
  "citations": [indices]}]}`, the rules of the track guidelines (TREC-RAG/trec-rag-skills, `rag-task.md`) and of
  the organizers' checker (autojudge-base's `rag26` spec): exactly those five metadata keys (no `type`, no
  `prompt`: the guidelines forbid extra keys); `run_id` at most 20 characters of `A-Za-z0-9-_.`, not starting with
  a period; `run_desc` from `--run-desc`, else the cell's Hydra overrides (`.hydra/overrides.yaml`, filtered as
  `RunFolder.run_tag` filters them, not capped); at most three citations per sentence (the first three in the
  answer's order, which is our strongest-first order; the rest dropped, logged); `references` only the documents
  cited, in ranked order, citations re-indexed into them (the guidelines: "Do not include uncited documents");
  at most 1,024 words, counted as the checker counts (the sentences joined with spaces, split on whitespace, no
  NFKC), cut at a sentence boundary from the end. Document ids are kept as given (ClimbMix's `shard_<n>_<row>`;
  `--climbmix-ids` checks them). An answer with no sentence is `"answer": [], "references": []`, which the
  organizers accept (a warning); a sentence citing nothing is kept with `"citations": []`, so an answer with no
  citation at all has no references. The cited strategies (Crucible, GINGER) and answers with `[n]` markers carry
  their own citations; every other strategy's come from the attribution stage (`attribution=post_cite` cites every
  sentence, as the demo does; rag/attribute/).
- `rag24` (TREC 2024 RAG): `{"run_id", "topic_id", "topic", "references": [doc ids, at most 20],
  "response_length", "answer": [{"text", "citations": [indices]}]}`.
- `neuclir`: `{"request_id", "run_id", "sentences": [{"text", "citations": [doc ids]}]}`.

Sentences come from the answer text; `[n]` markers (our prompts label passages `[1]..[k]` in prompt order) become
citations and are removed from the sentence text. Cited strategies (Crucible, GINGER) store `sentences: [{text,
citations: [doc_id], ...}]` in the record; each sentence is exported with its own citations (a blank one is
left out). Answers longer than the tracks' limit (400 words in 2024 and 2025, 1,024 in 2026) lose sentences from
the end, as the track's checker does (logged).

Every TREC export is checked by the rules of the track's validator (castorini/ragnarok's `rag24_validation.py`
and `rag25_validation.py`; for 2026 the guidelines and the organizers' checker, autojudge-base's
`report_tool check --spec rag26`; `validate`): a record that breaks one is one error line naming its line and
topic, and nothing is written; warnings (a missing optional field, a reference outside MS MARCO v2.1's id
pattern when `--msmarco-ids` asks for it, an empty 2026 answer) are logged. `--topics FILE` checks topic ids
(and, for 2024 and 2026, topic texts, which 2026 wants copied exactly) against the track's topics file (2026:
`trec_rag_2026_queries.tsv`). tests/export/test_rag26.py runs the organizers' checker itself on every export.

Run files (`--format runs`, for folders written before runs wrote them; every run writes them itself,
`RunFolder.write_rankings`): `qid Q0 docid rank score tag`, one line per item of the stored retrieved list
(`run.retrieval.trec`) and reranked, cut list (`run.rerank.trec`), at the judgments' level (`rag.data.qrels`:
document ids at the rank of their best passage, or passage ids), scores strictly decreasing in rank order
(`rag.records.stage_ranking`), the tag from the cell's overrides (`RunFolder.run_tag`); `qrels.trec` holds the
judgments. trec_eval, ranx and ir_measures read the folder as it is.
"""

from __future__ import annotations

import argparse
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.core.errors import DataError
from rag.core.io import atomic_write_jsonl
from rag.core.secrets import mask_text
from rag.core.text import marked_sentences
from rag.folders import RunFolder
from rag.records import AnswerRecord, load_answer_records

log = logging.getLogger(__name__)

#: an MS MARCO v2.1 segment id, as the track's validators check references
MARCO_SEGMENT = re.compile(r"^msmarco_v2\.1_doc_\d+_\d+#\d+_\d+$")
#: a ClimbMix-400b document id (TREC RAG 2026: `<parquet shard>_<row>`); the checker's rag26 `docid_pattern`
CLIMBMIX_DOC = re.compile(r"^shard_\d+_\d+$")
#: the tracks' limits: words per answer, references per topic
RESPONSE_LIMIT = 400
REFERENCE_LIMIT = {"rag24": 20, "rag25": 100, "rag25_ids": 100}
RUN_TYPES = ("automatic", "manual")
#: TREC RAG 2026 (rag-task.md; autojudge-base's track_specs.yml, spec rag26): words per answer, citations per
#: sentence, the metadata keys (all required, no others), the run id's form, the file name the track asks for
RAG26_WORD_LIMIT = 1024
RAG26_CITATIONS = 3
RAG26_METADATA = ("team_id", "narrative_id", "narrative", "run_id", "run_desc")
RAG26_RUN_ID = re.compile(r"^(?!\.)[A-Za-z0-9_.-]{1,20}$")
RAG26_FILE = "rag_output_trec_rag_2026.jsonl"


def response_words(text: str) -> int:
    """Words of one answer sentence as the track counts them (NFKC-normalised, split on whitespace)."""
    return len(unicodedata.normalize("NFKC", text.strip()).split())


def checker_words(text: str) -> int:
    """Words of one answer sentence as TREC RAG 2026 counts them: split on whitespace, no normalisation (the
    checker splits the space-joined sentences, `track_spec.length_count`, which adds up to the same)."""
    return len(text.split())


def _record(record: AnswerRecord | Mapping[str, Any]) -> AnswerRecord:
    return record if isinstance(record, AnswerRecord) else AnswerRecord.from_json(record)


def cited_sentences(record: AnswerRecord) -> list[tuple[str, list[str]]]:
    """(sentence, cited doc ids in the order cited) of an answer: a cited strategy's own sentences, else the
    answer's sentences with their `[n]` markers read as the prompt's passages n."""
    if record.sentences is not None:
        return [(str(s.get("text", "")).strip(), list(dict.fromkeys(str(d) for d in s.get("citations") or [])))
                for s in record.sentences if str(s.get("text") or "").strip()]
    label_doc = {label: (p.doc_IDs or [""])[0] for label, p in enumerate(record.passages, start=1)}
    return [(text, list(dict.fromkeys(label_doc[n] for n in labels if n in label_doc)))
            for text, labels in marked_sentences(record.answer)]


def within_limit(sentences: list[tuple[str, list[str]]], topic: str, limit: int = RESPONSE_LIMIT,
                 count: Callable[[str], int] = response_words) -> list[tuple[str, list[str]]]:
    """The sentences, those past `limit` words (as `count` counts them) dropped from the end (the track checker's
    fix), logged."""
    kept, words = list(sentences), sum(count(t) for t, _ in sentences)
    while words > limit and kept:
        words -= count(kept.pop()[0])
    if len(kept) < len(sentences):
        log.warning("topic %s: answer over %d words; %d sentence(s) dropped from its end", topic, limit,
                    len(sentences) - len(kept))
    return kept


def to_trec(record: AnswerRecord | dict[str, Any], run_id: str) -> dict[str, Any]:
    """TREC 2024 RAG: references are the prompt's documents (then any other cited one), citations indices."""
    record = _record(record)
    references: list[str] = []
    for passage in record.passages:
        doc_id = (passage.doc_IDs or [""])[0]
        if doc_id not in references:
            references.append(doc_id)
    answer = []
    for text, cited in within_limit(cited_sentences(record), record.id):
        references += [d for d in cited if d not in references]  # a cited document is always a reference
        answer.append({"text": text, "citations": sorted({references.index(d) for d in cited})})
    return {"run_id": run_id, "topic_id": record.id, "topic": record.question, "references": references,
            "response_length": sum(response_words(a["text"]) for a in answer), "answer": answer}


def rag25_references(record: AnswerRecord, sentences: list[tuple[str, list[str]]]) -> list[str]:
    """The ranked list of the retrieval stage as handed to the generator (the reranked, cut list, at most 100),
    then any other document the answer cites (IterDRAG's own retrievals)."""
    ranked = [str(p.get("doc_id")) for p in record.reranked if isinstance(p, Mapping)] or \
        [(p.doc_IDs or [""])[0] for p in record.passages]
    references = list(dict.fromkeys(ranked))[: REFERENCE_LIMIT["rag25"]]
    return references + [d for _, cited in sentences for d in cited if d not in references]


def to_rag25(record: AnswerRecord | dict[str, Any], run_id: str, team_id: str = "ragtifier",
             citations: str = "indices", run_type: str = "automatic") -> dict[str, Any]:
    """TREC 2025 RAG, format 1 (`citations="indices"`) or format 2 (`"ids"`)."""
    record = _record(record)
    sentences = within_limit(cited_sentences(record), record.id)
    references = list(dict.fromkeys(rag25_references(record, sentences)))
    answer = [{"text": text, "citations": [references.index(d) for d in cited] if citations == "indices"
               else list(cited)} for text, cited in sentences]
    metadata = {"team_id": team_id, "run_id": run_id, "type": run_type, "narrative_id": record.id,
                "narrative": record.question}
    if record.final_prompt:
        metadata["prompt"] = record.final_prompt
    return {"metadata": metadata, "references": references, "answer": answer}


def to_rag26(record: AnswerRecord | dict[str, Any], run_id: str, team_id: str = "ragtifier", run_desc: str = ""
             ) -> dict[str, Any]:
    """TREC RAG 2026: at most three citations per sentence (the first three: ours are listed strongest first),
    references only the cited documents (ranked order, then any other), re-indexed, at most 1,024 words."""
    record = _record(record)
    full = [(text, [d for d in cited if d]) for text, cited in cited_sentences(record)]
    capped = [(text, cited[:RAG26_CITATIONS]) for text, cited in full]
    dropped = sum(len(cited) - RAG26_CITATIONS for _, cited in full if len(cited) > RAG26_CITATIONS)
    if dropped:
        log.warning("topic %s: %d citation(s) past the first %d of a sentence dropped", record.id, dropped,
                    RAG26_CITATIONS)
    sentences = within_limit(capped, record.id, RAG26_WORD_LIMIT, checker_words)
    cited = {d for _, c in sentences for d in c}
    references = [d for d in dict.fromkeys(rag25_references(record, sentences)) if d in cited]
    metadata = {"team_id": team_id, "narrative_id": record.id, "narrative": record.question, "run_id": run_id,
                "run_desc": run_desc}
    return {"metadata": metadata, "references": references,
            "answer": [{"text": text, "citations": [references.index(d) for d in c]} for text, c in sentences]}


def to_neuclir(record: AnswerRecord | dict[str, Any], run_id: str) -> dict[str, Any]:
    """A NeuCLIR-style report: the answer's sentences, each with the doc ids it cites."""
    trec = to_trec(record, run_id)
    refs = trec["references"]
    return {"request_id": trec["topic_id"], "run_id": run_id,
            "sentences": [{"text": a["text"], "citations": [refs[i] for i in a["citations"]]}
                          for a in trec["answer"]]}


#: format -> (record, run_id, team_id, run_desc) -> one output row
FORMATS: dict[str, Callable[[AnswerRecord, str, str, str], dict[str, Any]]] = {
    "rag25": lambda r, run_id, team_id, desc: to_rag25(r, run_id, team_id),
    "rag25_ids": lambda r, run_id, team_id, desc: to_rag25(r, run_id, team_id, citations="ids"),
    "rag26": lambda r, run_id, team_id, desc: to_rag26(r, run_id, team_id, desc),
    "rag24": lambda r, run_id, team_id, desc: to_trec(r, run_id),
    "neuclir": lambda r, run_id, team_id, desc: to_neuclir(r, run_id)}


def output_name(fmt: str) -> str:
    """The default file name in the run folder: the name the 2026 track asks for, else `trec_<format>.jsonl`."""
    return RAG26_FILE if fmt == "rag26" else f"trec_{fmt}.jsonl"


def run_description(folder: RunFolder) -> str:
    """`metadata.run_desc` when `--run-desc` gives none: what the cell changed (its Hydra overrides, secrets
    masked, without the where-and-how settings the run tag leaves out too), which is what tells our runs apart;
    whole, unlike the run tag, which is capped for the run files' tag column."""
    import yaml

    path = folder.dir / ".hydra" / "overrides.yaml"
    try:
        overrides = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else []
    except (OSError, yaml.YAMLError):
        overrides = []
    kept = sorted(str(o) for o in overrides or [] if not str(o).lstrip("+~").startswith(RunFolder.TAG_EXCLUDED))
    if not kept:
        return "ragtifier RAG pipeline, default configuration"
    return "ragtifier RAG pipeline, overrides: " + mask_text(", ".join(kept))


# -- the track validators' rules ------------------------------------------------------------------------------
def _rag24_problems(row: Any, topics: Mapping[str, str] | None, msmarco_ids: bool) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    warnings: list[str] = []
    missing = [f for f in ("run_id", "topic_id", "topic", "references", "response_length", "answer") if f not in row]
    if missing:
        return [f'missing "{missing[0]}" field'], warnings
    if topics is not None:
        if str(row["topic_id"]) not in topics:
            return [f"unknown topic ({row['topic_id']})"], warnings
        if row["topic"] != topics[str(row["topic_id"])]:
            errors.append("topic text does not match the official topic")
    refs = row["references"] if isinstance(row["references"], list) else []
    if not isinstance(row["references"], list):
        errors.append("references must be a list")
    for ref in [r for r, n in Counter(map(str, refs)).items() if n > 1]:
        errors.append(f"duplicate document {ref} in references")
    if msmarco_ids:
        errors += [f"invalid reference docno {r}" for r in refs if not MARCO_SEGMENT.match(str(r))]
    if len(refs) > REFERENCE_LIMIT["rag24"]:
        errors.append(f"too many references ({len(refs)}, max {REFERENCE_LIMIT['rag24']})")
    errors += _answer_problems(row["answer"], refs, "indices")
    length = sum(response_words(str(s.get("text", ""))) for s in row["answer"] if isinstance(s, Mapping)) \
        if isinstance(row["answer"], list) else 0
    if length > RESPONSE_LIMIT:
        warnings.append(f"answer is too long ({length} words)")
    if row["response_length"] != length:
        warnings.append(f"reported response_length {row['response_length']} is not the answer's {length} words")
    return errors, warnings


def _references(row: Any, errors: list[str], warnings: list[str]) -> list[Any]:
    """A 2025/2026 record's references (an error when not a list), warning once per duplicate."""
    refs = row.get("references")
    if not isinstance(refs, list):
        errors.append("references must be a list")
        return []
    warnings += [f"duplicate reference {r}" for r, n in Counter(map(str, refs)).items() if n > 1]
    return refs


def _metadata(row: Any, errors: list[str]) -> Mapping[str, Any] | None:
    """A report's `metadata` object, or None with the error said."""
    md = row.get("metadata")
    if isinstance(md, Mapping):
        return md
    errors.append("metadata must be an object")
    return None


def _rag25_problems(row: Any, topics: Mapping[str, str] | None, msmarco_ids: bool, citations: str
                    ) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    warnings: list[str] = []
    md = _metadata(row, errors)
    if md is not None:
        missing = sorted({"team_id", "run_id", "narrative_id"} - set(md))
        if missing:
            errors.append(f"metadata missing keys: {', '.join(missing)}")
        elif topics is not None and str(md["narrative_id"]) not in topics:
            errors.append(f"metadata.narrative_id {md['narrative_id']!r} not in the topics file")
        if "type" in md and md["type"] not in RUN_TYPES:
            errors.append(f"invalid metadata.type {md['type']!r} (one of {', '.join(RUN_TYPES)})")
        warnings += [f"optional metadata.{k} is missing" for k in ("type", "narrative", "prompt") if k not in md]
    refs = _references(row, errors, warnings)
    if len(refs) > REFERENCE_LIMIT["rag25"]:
        errors.append(f"too many references ({len(refs)}, max {REFERENCE_LIMIT['rag25']})")
    if msmarco_ids:
        warnings += [f"reference {r} is not an MS MARCO v2.1 segment id" for r in refs
                     if not MARCO_SEGMENT.match(str(r))]
    errors += _answer_problems(row.get("answer", []), refs, citations)
    answer = row.get("answer") if isinstance(row.get("answer"), list) else []
    length = sum(response_words(str(s.get("text", ""))) for s in answer if isinstance(s, Mapping))
    if length > RESPONSE_LIMIT:
        warnings.append(f"answer is too long ({length} words, max {RESPONSE_LIMIT})")
    return errors, warnings


def _rag26_problems(row: Any, topics: Mapping[str, str] | None, climbmix_ids: bool) -> tuple[list[str], list[str]]:
    """The 2026 guidelines' validation rules (rag-task.md) and the organizers' checker's rag26 spec; where the
    checker only warns (uncited references, a fourth citation) or does not look (extra metadata keys: its spec
    has `forbid_extra_metadata: false`), the guidelines' "must" / "do not" makes it an error here."""
    errors: list[str] = []
    warnings: list[str] = []
    md = _metadata(row, errors)
    if md is not None:
        missing = [k for k in RAG26_METADATA if k not in md or md[k] is None or not str(md[k]).strip()]
        if missing:
            errors.append(f"metadata missing or empty keys: {', '.join(missing)}"
                          + (" (--run-desc)" if "run_desc" in missing else ""))
        extra = sorted(set(md) - set(RAG26_METADATA))
        if extra:
            errors.append(f"metadata keys the track forbids: {', '.join(extra)}")
        if "run_id" in md and not RAG26_RUN_ID.match(str(md["run_id"])):
            errors.append(f"metadata.run_id {md['run_id']!r} is not 1-20 characters of A-Z a-z 0-9 - _ . "
                          "(not starting with a period): --run-id")
        if topics is not None and "narrative_id" in md:
            if str(md["narrative_id"]) not in topics:
                errors.append(f"metadata.narrative_id {md['narrative_id']!r} not in the topics file")
            elif md.get("narrative") != topics[str(md["narrative_id"])]:
                errors.append("metadata.narrative is not the topic's text copied exactly")
    refs = _references(row, errors, warnings)
    if climbmix_ids:
        errors += [f"reference {r} is not a ClimbMix document id (shard_<n>_<row>)" for r in refs
                   if not CLIMBMIX_DOC.match(str(r))]
    answer = row.get("answer")
    errors += _answer_problems(answer, refs, "indices")
    sentences = [s for s in answer if isinstance(s, Mapping)] if isinstance(answer, list) else []
    if isinstance(answer, list) and not answer:
        warnings.append("empty answer (the track accepts it: no response for the topic)")
    for i, sentence in enumerate(sentences):
        if isinstance(sentence.get("text"), str) and not sentence["text"].strip():
            errors.append(f"answer[{i}].text is blank")
        cites = sentence.get("citations")
        if isinstance(cites, list) and len(cites) > RAG26_CITATIONS:
            errors.append(f"answer[{i}] has {len(cites)} citations (max {RAG26_CITATIONS})")
    cited = {c for s in sentences if isinstance(s.get("citations"), list)
             for c in s["citations"] if isinstance(c, int)}
    uncited = [str(r) for i, r in enumerate(refs) if i not in cited]
    if uncited:
        errors.append(f"references never cited: {', '.join(uncited[:3])}{' ...' if len(uncited) > 3 else ''}")
    length = sum(checker_words(str(s.get("text", ""))) for s in sentences)
    if length > RAG26_WORD_LIMIT:
        errors.append(f"answer is too long ({length} words, max {RAG26_WORD_LIMIT})")
    return errors, warnings


def _answer_problems(answer: Any, refs: list[Any], citations: str) -> list[str]:
    if not isinstance(answer, list):
        return ["answer must be a list"]
    errors = []
    for i, sentence in enumerate(answer):
        if not isinstance(sentence, Mapping):
            errors.append(f"answer[{i}] must be an object")
            continue
        if not isinstance(sentence.get("text"), str):
            errors.append(f"answer[{i}].text missing or not a string")
        cites = sentence.get("citations")
        if not isinstance(cites, list):
            errors.append(f"answer[{i}].citations missing or not a list")
        elif citations == "indices":
            if not all(isinstance(c, int) and not isinstance(c, bool) for c in cites):
                errors.append(f"answer[{i}].citations must be integers (indices into references)")
            else:
                errors += [f"answer[{i}].citations index out of range: {c}" for c in cites if not 0 <= c < len(refs)]
        elif not all(isinstance(c, str) for c in cites):
            errors.append(f"answer[{i}].citations must be strings (segment ids)")
        else:
            errors += [f"answer[{i}].citation not among the references: {c}" for c in cites if c not in refs]
    return errors


def _topic_of(row: Any, fmt: str) -> str:
    if not isinstance(row, Mapping):
        return "?"
    if fmt.startswith(("rag25", "rag26")):
        md = row.get("metadata")
        return str(md.get("narrative_id", "?")) if isinstance(md, Mapping) else "?"
    return str(row.get("topic_id", "?"))


def validate(rows: Sequence[Any], fmt: str, topics: Mapping[str, str] | None = None, msmarco_ids: bool = False,
             where: str = "export", climbmix_ids: bool = False) -> tuple[list[str], list[str]]:
    """The track validator's rules over a whole export: (errors, warnings), one line per bad record each
    (`<where>:<line> topic <id>: problem; problem`), plus one per topic answered twice, and, with `topics`,
    a warning per topic without an answer. `msmarco_ids` / `climbmix_ids` check references against the
    collection's id pattern (2024-2025 / 2026)."""
    errors: list[str] = []
    warnings: list[str] = []
    run_ids: set[str] = set()
    answered: Counter[str] = Counter()
    for line, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            errors.append(f"{where}:{line}: not a JSON object")
            continue
        if fmt == "rag24":
            bad, notes = _rag24_problems(row, topics, msmarco_ids)
            run_ids.add(str(row.get("run_id")))
        elif fmt == "rag26":
            bad, notes = _rag26_problems(row, topics, climbmix_ids)
        else:
            bad, notes = _rag25_problems(row, topics, msmarco_ids, "ids" if fmt == "rag25_ids" else "indices")
        topic = _topic_of(row, fmt)
        answered[topic] += 1
        if bad:
            errors.append(f"{where}:{line} topic {topic}: {'; '.join(bad)}")
        if notes:
            warnings.append(f"{where}:{line} topic {topic}: {'; '.join(notes)}")
    if len(run_ids) > 1:
        errors.append(f"{where}: run tag inconsistent ({', '.join(sorted(run_ids))})")
    errors += [f"{where}: {n} responses for topic {t} (one allowed)" for t, n in answered.items() if n > 1]
    if topics is not None:
        warnings += [f"{where}: no response for topic {t}" for t in topics if t not in answered]
    return errors, warnings


def read_topics(path: Path) -> dict[str, str]:
    """Topic id -> text from a track's topics file (2024 and 2026 TSV, 2025 JSONL), with the dataset loader's
    rules."""
    from rag.data.collections import TrecTopics

    return {q.id: q.question for q in TrecTopics(str(path)).load()}


def export(answers: Path, out: Path, run_id: str, fmt: str = "rag25", team_id: str = "ragtifier",
           topics: Path | None = None, msmarco_ids: bool = False, run_desc: str = "",
           climbmix_ids: bool = False) -> int:
    """Convert, check with the track's rules (TREC formats) and write atomically; a bad record is a DataError."""
    rows = [FORMATS[fmt](r, run_id, team_id, run_desc) for r in load_answer_records(answers)]
    if fmt != "neuclir":
        errors, warnings = validate(rows, fmt, read_topics(topics) if topics else None, msmarco_ids, str(out),
                                    climbmix_ids)
        for warning in warnings:
            log.warning("%s", warning)
        if errors:
            raise DataError("\n".join(errors))
    atomic_write_jsonl(out, rows)
    return len(rows)


# -- run files ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, help="a run folder (or its answers.jsonl)")
    parser.add_argument("--out", type=Path, help=f"output file (default: <run>/trec_<format>.jsonl, for rag26 "
                                                 f"<run>/{RAG26_FILE}); for --format runs, the folder "
                                                 "(default: the run folder)")
    parser.add_argument("--format", choices=[*FORMATS, "runs"], default="rag25",
                        help="rag25 (TREC 2025 RAG, citations as indices), rag25_ids (citations as segment ids), "
                             "rag26 (TREC RAG 2026), rag24 (TREC 2024 RAG), neuclir (NeuCLIR-style reports), "
                             "runs (TREC run files of both stages and qrels.trec)")
    parser.add_argument("--run-id", default=None, help="run_id field (default: the run folder name); for --format "
                                                       "runs, the run tag (default: the cell's overrides)")
    parser.add_argument("--team-id", default="ragtifier", help="metadata.team_id of the 2025 and 2026 formats")
    parser.add_argument("--run-desc", default=None,
                        help="metadata.run_desc of rag26 (default: the cell's overrides, .hydra/overrides.yaml)")
    parser.add_argument("--topics", type=Path, default=None,
                        help="the track's topics file (2024 and 2026 TSV, 2025 JSONL): topic ids (and 2024 and "
                             "2026 texts) checked")
    parser.add_argument("--msmarco-ids", action="store_true",
                        help="check references against MS MARCO v2.1's segment id pattern, as the track does")
    parser.add_argument("--climbmix-ids", action="store_true",
                        help="rag26: check references against ClimbMix's id pattern (shard_<n>_<row>), as the "
                             "2026 checker does")
    args = parser.parse_args(argv)
    answers = RunFolder(args.answers).answers_path if args.answers.is_dir() else args.answers
    try:
        if args.format == "runs":
            folder = RunFolder(answers.parent)
            target = RunFolder(args.out) if args.out else folder
            target.dir.mkdir(parents=True, exist_ok=True)
            files = target.write_rankings(load_answer_records(answers), args.run_id or folder.run_tag(),
                                          folder.qrels_level())
            print("wrote " + ", ".join(str(p) for p in files.values()))
            return
        out = args.out or answers.parent / output_name(args.format)
        run_desc = args.run_desc if args.run_desc is not None else run_description(RunFolder(answers.parent))
        n = export(answers, out, args.run_id or answers.parent.name, args.format, args.team_id, args.topics,
                   args.msmarco_ids, run_desc, args.climbmix_ids)
    except DataError as err:
        raise SystemExit(f"DataError: {err}") from None
    print(f"wrote {n} topics to {out}")


if __name__ == "__main__":
    main()
