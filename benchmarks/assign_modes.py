"""Which nugget-assignment mode reads the answer? `list` (a JSON label list per window, nuggetizer's way) against
`logprobs` (one nugget per request, the label from first-token probabilities), on a check that needs no human
labels: each question's nuggets are the sentences of its own gold answer (LiveRAG dev, DataMorgana), assigned
once against that gold answer (they should be supported) and once against another question's gold answer (they
should not). A mode that reads the answer supports its own answer's nuggets and not the other's; one that copies
a pattern labels both alike. Also: how often a nugget's label changes when the nugget list is reversed (the
position dependence issue 23 item 6 describes; zero by construction in logprobs mode).

    python benchmarks/assign_modes.py --llm gemma3_270m --questions 40 --json out.json

Prints a markdown row per mode: support rate on own / other answers, their difference, the AUC of "own vs other"
from the support labels (list) or support probabilities (logprobs), unreadable nuggets, position changes, LLM calls
and seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.nuggets import AutoNuggetizer  # noqa: E402
from rag.data.questions import DataMorganaQA  # noqa: E402
from rag.llm.factory import EngineFactory  # noqa: E402


def gold_nuggets(answer: str, max_nuggets: int = 4) -> list[dict[str, str]]:
    """The gold answer's sentences as nuggets (the first vital), at most `max_nuggets`."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", answer) if len(s.split()) >= 3]
    return [{"text": s, "importance": "vital" if i == 0 else "okay"} for i, s in enumerate(sentences[:max_nuggets])]


def auc(positive: list[float], negative: list[float]) -> float:
    """P(score of an own-answer nugget > score of an other-answer nugget), ties counting half."""
    pos, neg = np.asarray(positive)[:, None], np.asarray(negative)[None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def engine_for(llm: str, factory: EngineFactory):
    """The configured engine (`conf/llm/<llm>.yaml`), with the project's response cache."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"llm={llm}", "llm.n_ctx=2048"])
    return factory.get(cfg.llm)


def run_mode(engine, mode: str, items, other_items) -> dict:
    nuggetizer = AutoNuggetizer(assignment=mode)
    before_calls, start = engine.usage.calls, time.perf_counter()
    own = nuggetizer.assign(engine, items)
    other = nuggetizer.assign(engine, other_items)
    reversed_own = nuggetizer.assign(engine, [(q, a, list(reversed(n))) for q, a, n in items])
    seconds, calls = time.perf_counter() - start, engine.usage.calls - before_calls

    def scores(assigned):
        if mode == "logprobs":
            return [n.get("label_probabilities", {}).get("support", 0.0) for a in assigned for n in a.nuggets]
        return [1.0 if n["assignment"] == "support" else 0.0 for a in assigned for n in a.nuggets]

    labels_own = [n["assignment"] for a in own for n in a.nuggets]
    labels_other = [n["assignment"] for a in other for n in a.nuggets]
    flipped = [n["assignment"] for a in reversed_own for n in reversed(a.nuggets)]
    return {"mode": mode, "nuggets": len(labels_own),
            "support_own": float(np.mean([x == "support" for x in labels_own])),
            "support_other": float(np.mean([x == "support" for x in labels_other])),
            "auc": auc(scores(own), scores(other)),
            "unreadable": sum(x == "failed" for x in labels_own + labels_other + flipped),
            "position_changes": float(np.mean([a != b for a, b in zip(labels_own, flipped)])),
            "distinct_sequences_own": len({tuple(n["assignment"] for n in a.nuggets) for a in own}),
            "llm_calls": calls, "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm", default="gemma3_270m")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache-dir", default=str(ROOT / "cache"))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    questions = DataMorganaQA("liverag_dm/dev_qa.tsv", data_dir=args.data_dir).load()
    picked = [q for q in questions if len(gold_nuggets(q.answer)) >= 2][: args.questions]
    items = [(q.question, q.answer, gold_nuggets(q.answer)) for q in picked]
    # another question's gold answer: the next picked question's (a cyclic shift)
    other = [(q.question, picked[(i + 1) % len(picked)].answer, gold_nuggets(q.answer)) for i, q in enumerate(picked)]
    factory = EngineFactory(Path(args.cache_dir))
    engine = engine_for(args.llm, factory)
    rows = []
    try:
        for mode in ("list", "logprobs"):
            rows.append({"llm": args.llm, "questions": len(picked), **run_mode(engine, mode, items, other)})
    finally:
        factory.close()
    print("| llm | mode | nuggets | support own | support other | own - other | AUC | unreadable | "
          "label changes when reversed | distinct label sequences (own) | LLM calls | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['llm']} | {r['mode']} | {r['nuggets']} | {r['support_own']:.2f} | {r['support_other']:.2f} | "
              f"{r['support_own'] - r['support_other']:+.2f} | {r['auc']:.3f} | {r['unreadable']} | "
              f"{r['position_changes']:.2f} | {r['distinct_sequences_own']} / {r['questions']} | {r['llm_calls']} | "
              f"{r['seconds']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
