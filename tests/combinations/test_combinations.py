"""Every cell of the Cartesian product runs or is refused in one line: the combinations of options as a test.

The cells are a pairwise covering design generated from `conf/` (tests/combinations/design.py): every pair of
options from two different config groups is in at least one cell, apart from the combinations
tests/combinations/table.py declares costly (each naming the test that covers the same code) or refused (each
run as a cell of its own). The pairwise cells run as one multirun, `python -m rag.main -m +combo=c000,...` (each cell
a config of a `combo` group written from its command line), in one child forked from the preloaded server of
tests/docs/runner.py; each other launcher runs its own cells as one multirun; edge and refused cells run alone as
the command a user types. Cells answer one or two questions against the instant endpoint of
tests/instant_endpoint.py (engines that run here, llama.cpp on the shipped GGUFs, answer for real). Each must end in
exactly one of two ways:
- it completes: answers for every question, metrics.json with every configured metric and judge, each value finite
  and inside the range rag.metrics.registry declares, the retrieval run file, an attack's planted passages where it
  planted any; or
- it is refused before any index is built or any model is called, in one line naming both settings (table.py's
  REFUSALS), and nothing is written but the run folder's config.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import string
from pathlib import Path

import pytest

from tests.combinations import design as d
from tests.combinations import table as t
from tests.conftest import ROOT
from tests.docs import runner
from tests.docs.fixtures import FIXTURES, build_tiny_bge, close_services
from tests.docs.store import Store
from tests.docs.table import SWAPS
from tests.instant_endpoint import InstantEndpoint

GROUPS = {g: d.options(g) for g in d.GROUPS}
#: how long one multirun of cells may take: the pairwise one is 200 cells in one process, building every dataset's
#: dense index on the way; beside three other CI sessions on 2 cores it ran past pytest's 1800 s (CI at 9e32713)
SWEEP_SECONDS = 3600


def build() -> d.Design:
    """The design: pairwise in-process cells, a multirun per other launcher, edge cells, one cell per refusal."""
    out = d.Design(pairwise=d.cheapen(d.pairwise_cells(GROUPS, t.allowed), GROUPS, t.allowed, t.cost))
    for shift, launcher in enumerate(d.launchers()[1:], start=1):
        out.by_launcher[launcher] = d.launcher_cells(GROUPS, t.allowed, shift * 3)
    base = {g: opts[0] if g != "dataset" else "hotpotqa" for g, opts in GROUPS.items()}
    base.update(judge="nuggets", llm="openai_compatible", logger="none", metrics="f1", attack="none",
                retriever="bm25", rerank="none", generator="simple", substitutions="none", query="none",
                compress="none", attribution="none")
    out.edges = [
        ("judge.repeats=2 with nugget-based judges", {**base, "judge": "argue"},
         ["judge=[nuggets,argue]", "judge.repeats=2"]),
        ("attack.n_passages=0 plants nothing", {**base, "attack": "poisonedrag"}, ["attack.n_passages=0"]),
        ("attack.n_passages=1", {**base, "attack": "poisonedrag"}, ["attack.n_passages=1"]),
        ("dataset.hop=multi keeps LiveRAG's two-document questions", {**base, "dataset": "liverag_dev"},
         ["dataset.hop=multi"]),
        ("generator.fit_window: IterDRAG fitted to a 1,024-token context",
         {**base, "generator": "iterdrag", "judge": "none"},
         ["llm.n_ctx=1024"]),
        ("generator.fit_window: IRCoT fitted to a 1,024-token context",
         {**base, "generator": "ircot", "judge": "none"},
         ["llm.n_ctx=1024"]),
        ("retriever.k beyond the corpus (994 passages)", base, ["retriever.k=2000", "cache.retrieval_depth=2000"]),
        ("generation.repeats=2 with judges and the no-answer rate", {**base, "judge": "liverag"},
         ["generation.repeats=2", "generation.repeat_temperature=0.8", "metrics=[f1,no_answer]"]),
    ]
    out.refused = [(r.name, {**base, **r.example}) for r in t.REFUSALS]
    out.refused.append(("rerank.k above retriever.k", {**base, "rerank": "dense"}))
    return out


DESIGN = build()
EDGE_REFUSALS = {"rerank.k above retriever.k": (["retriever.k=3", "rerank.k=5"], r"rerank\.k.*retriever\.k")}


def override(group: str, option: str) -> str:
    """`group=option` as a user types it; the list groups (judge, metrics) as a list."""
    if group == "judge":
        return f"judge=[{option}]" if option != "none" else "judge=none"
    if group == "metrics":
        return "metrics=none" if option == "none" else f"metrics=[{','.join(dict.fromkeys(['f1', option]))}]"
    return f"{group}={option}"


def command(cell: d.Cell, store: Store, extra: list[str] = ()) -> str:
    """The cell's command line as it runs here: the user's overrides, the declared needs and stand-ins."""
    stand_in = {"llm": "openai_compatible"} if cell.get("llm") in t.GPU_ENGINES else {}
    words = ["python -m rag.main", *(override(g, stand_in.get(g, cell[g])) for g in d.GROUPS if g in cell)]
    fields = {"tiny_bge": str(store.tiny_bge), "endpoint": store.endpoint.url}
    for (group, option), need in t.NEEDS.items():
        if cell.get(group) == option:
            names = [name for _, name, _, _ in string.Formatter().parse(need) if name]
            fields.update({n: str(FIXTURES[n](store)) for n in names if n in FIXTURES})
            words.append(need.format(**fields))
    llm = cell.get("llm", "")
    real = llm in t.REAL_ENGINES
    if llm in t.GPU_ENGINES:  # answered by the instant endpoint (the stand-in above), under its model name
        words.append(f"llm.model={store.endpoint.model}")
    if real:
        nodes = t.REAL_SCALE + ([t.REAL_ATTACKER] if cell.get("attack", "none") != "none" else [])
        words += [shlex.quote(n.format(endpoint=store.endpoint.url)) for n in nodes]
    if cell.get("rerank") == "rank_r1":
        words.append(shlex.quote("rerank.llm=${llm}"))
    words.append(f"dataset.limit={t.QUESTIONS['real' if real else 'instant']}")
    text = " ".join([*words, *extra])
    embedded = cell.get("substitutions") == "embedded"  # the product's own stand-ins for hosted parts apply
    for item in SWAPS:
        if not (embedded and item.pattern in t.EMBEDDED_SWAPS_ITSELF):
            text = re.sub(item.pattern, lambda m, r=item.replacement: m.expand(r.format(**fields)), text)
    if not embedded:
        for pattern, replacement in t.HOSTED_SWAPS.items():
            text = text.replace(pattern, replacement)
    return text


@pytest.fixture(scope="module")
def store(tmp_path_factory, shared_cache):
    base = tmp_path_factory.mktemp("combinations")
    models = ("instant", "claude-haiku-4-5-20251001", "gpt-5.4-mini")
    with InstantEndpoint(model="instant", models=models) as endpoint:
        try:
            yield Store(base, shared_cache, endpoint, build_tiny_bge(base / "tiny-bge"))
        finally:
            close_services()


_PREPARED: set[str] = set()


def prepare(cell: d.Cell, store: Store, text: str) -> None:
    """What an option needs run before it: `retriever=sharded` searches shards `python -m rag.index` built from
    the dataset's corpus file (its documented command, with the corpus's own fields), once per corpus."""
    if cell.get("retriever") != "sharded":
        return
    from omegaconf import OmegaConf

    from tests.conftest import compose_config

    overrides = [w for w in shlex.split(text)[3:] if w.startswith(("dataset", "paths.", "attack", "retriever"))]
    cfg = compose_config(overrides)
    corpus = cfg.dataset.corpus
    if not corpus.get("path") or "JsonlCorpus" not in str(corpus.get("_target_")):
        return  # refused by the preflight (rag/preflight/prebuilt.py): nothing to build
    path = Path(str(corpus.path))
    path = path if path.is_absolute() else Path(str(cfg.paths.data_dir)) / path
    base = OmegaConf.select(cfg, "retriever.base._target_", default="")
    fields = [f"index.{f}={corpus.get(f)}" for f in ("id_field", "text_field", "title_field") if corpus.get(f)]
    words = [f"python -m rag.index corpus={path} retriever={'dense' if 'Dense' in base else 'bm25'}",
             "index.num_shards=2", f"index.name={corpus.get('name') or path.name.split('.')[0]}",
             f"index.chunk_words={'null' if corpus.get('chunk_words') is None else corpus.get('chunk_words')}",
             f"index.overlap_words={corpus.get('overlap_words') or 0}",
             *fields]
    command_text = " ".join(words)
    if command_text in _PREPARED:
        return
    result, _ = _run(store, f"prepare-{len(_PREPARED)}", command_text)
    assert result.returncode == 0, result.tail()
    _PREPARED.add(command_text)


def _run(store: Store, name: str, text: str, timeout: float = 900) -> tuple[runner.Result, Path]:
    home = store.base / name
    home.mkdir(parents=True, exist_ok=True)
    result = runner.run(text, cwd=ROOT, env=store.env(home), log_dir=home / "log", timeout=timeout)
    return result, home


def _run_folder(home: Path, result: runner.Result) -> Path:
    found = sorted({p.parent for p in (home / "outputs").rglob("metrics.json") if ".submitit" not in p.parts})
    assert len(found) == 1, f"expected one run folder, found {found}\n{result.tail()}"
    return found[0]


# -- what a completed cell promises ----------------------------------------------------------------------------
def expected_columns(run_dir: Path) -> dict[str, str]:
    """Metric name prefix -> what configured it: every metric node and every judge of the run's own config."""
    from omegaconf import OmegaConf

    from rag.judge.base import Judge
    from rag.judge.run import build_judge, judge_nodes
    from rag.metrics.base import RunShape, build_metrics

    cfg = OmegaConf.create(json.loads((run_dir / "config.json").read_text()))  # as the run completed it
    out: dict[str, str] = {}
    k = int(cfg.retriever.k)
    shape = RunShape(k_retrieval=k, k_rerank=int(cfg.rerank.get("k") or k))
    for metric in build_metrics(cfg.metrics):
        for name in metric.run_metrics(shape).values():
            out[name] = f"metrics.{type(metric).__name__}"
    for key, node in judge_nodes(cfg.judge).items():
        judge: Judge = build_judge(key, node)
        out[judge.metric_prefix] = f"judge.{key}"
    return out


def check_completed(cell: d.Cell, run_dir: Path, n_questions: int, result: runner.Result) -> None:
    from rag.metrics.registry import REGISTRY

    answers = [json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines() if line.strip()]
    assert len(answers) == n_questions, f"{len(answers)} answers for {n_questions} questions\n{result.tail()}"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    numbers = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for prefix, source in expected_columns(run_dir).items():
        present = [k for k in numbers if k.startswith(prefix)]
        unscored = numbers.get(f"unscored/{prefix}")
        assert present or unscored, f"{source}: no column {prefix}* in metrics.json, and no unscored/{prefix}" \
            f"\n{result.tail()}"
        values = [numbers[k] for k in present if k.endswith("/all") and REGISTRY.kind(k) == "per_answer"]
        skipped = sum(numbers[k] for k in present if "skipped" in k or "unscored" in k)
        assert not values or any(math.isfinite(v) for v in values) or skipped, \
            f"{source}: every {prefix}*/all value is NaN and nothing says why: it scored nothing"
    for key, value in numbers.items():
        spec = REGISTRY.spec(key)
        assert spec.in_range(value), f"metrics.json {key}={value} outside {spec.range} ({spec.pattern})"
    assert (run_dir / "run.retrieval.trec").is_file(), f"no retrieval run file in {run_dir}"
    if cell.get("attack", "none") != "none" and "attack.n_passages=0" not in result.command:
        attack = json.loads((run_dir / "attack.json").read_text())
        assert attack.get("targets"), f"attack.json names no target: the attack planted nothing\n{attack}"
        assert any(k.startswith("attack/") for k in numbers), "an attacked run without its attack metrics"


def _cell_id(cell: d.Cell) -> str:
    return ",".join(f"{g}={cell[g]}" for g in d.GROUPS if g in cell)


@pytest.fixture(scope="module")
def pairwise_sweep(store):
    """The pairwise cells as one multirun in one process (Hydra's basic launcher, `python -m rag.main -m`): loaded
    corpora, indexes and models are reused across cells as in any sweep (`cache.reuse_loaded: auto`)."""
    return run_sweep(store, "pairwise", DESIGN.pairwise, None)


@pytest.mark.timeout(SWEEP_SECONDS + 300)  # the first cell's setup runs the whole sweep (`pairwise_sweep`)
@pytest.mark.parametrize("number", range(len(DESIGN.pairwise)),
                         ids=[f"c{i:03d}:{_cell_id(c)}" for i, c in enumerate(DESIGN.pairwise)])
def test_cell_completes(number, pairwise_sweep):
    cell = DESIGN.pairwise[number]
    result, sweep = pairwise_sweep
    n = t.QUESTIONS["real" if cell["llm"] in t.REAL_ENGINES else "instant"]
    check_completed(cell, sweep_cell(sweep, number, result), n, result)


@pytest.mark.parametrize("name", [n for n, _, _ in DESIGN.edges])
def test_edge_values(name, store):
    _, cell, extra = next(e for e in DESIGN.edges if e[0] == name)
    result, home = _run(store, "edge-" + name.split()[0].replace(".", "_") + str(hash(name) % 1000),
                        command(cell, store, extra))
    assert result.returncode == 0, result.tail()
    folder = _run_folder(home, result)
    check_completed(cell, folder, t.QUESTIONS["instant"], result)
    if "dataset.hop=multi" in extra:  # only multi-document questions (the second LiveRAG question is single-doc)
        hops = [json.loads(row)["hop"] for row in (folder / "answers.jsonl").read_text().splitlines()]
        assert set(hops) == {"multi"}, hops
    if "llm.n_ctx=1024" in extra:  # IterDRAG / IRCoT shortened their own prompts (demonstrations, then passages)
        steps = [json.loads(row)["steps"] for row in (folder / "answers.jsonl").read_text().splitlines()]
        assert any(s["window_fits"] for s in steps), [s.get("window_fits") for s in steps]
    if "judge.repeats=2" in extra:  # every nugget-based judge repeated, over the run's one nugget set
        metrics = json.loads((folder / "metrics.json").read_text())
        for judge in ("nuggets", "argue"):
            assert any(k.startswith(f"noise/{judge}") for k in metrics), f"no repeats stored for {judge}"
        for row in (folder / "answers.jsonl").read_text().splitlines():
            judges = json.loads(row)["judges"]
            sets = {r.get("nugget_set") for j in ("nuggets", "argue") for r in judges[j]["repeats"]}
            assert sets == {judges["nuggets"]["nugget_set"]}, sets


@pytest.mark.parametrize("name", [n for n, _ in DESIGN.refused])
def test_refused_in_one_line_before_any_work(name, store):
    cell = dict(next(c for n, c in DESIGN.refused if n == name))
    extra, pattern = EDGE_REFUSALS.get(name, ([], None))
    refusal = next((r for r in t.REFUSALS if r.name == name), None)
    text = command(cell, store, extra)
    if refusal is not None:  # as the user typed it: the refusal comes before any stand-in would matter
        text = " ".join(w for w in shlex.split(text) if not w.startswith("retriever=bm25")) + \
            f" retriever={cell['retriever']}"
        pattern = refusal.line
    result, home = _run(store, "refused-" + name.replace(" ", "_"), text)
    output = result.stdout + result.stderr
    assert result.returncode == 2, result.tail()
    assert t.one_line(output, pattern), f"not one refusal line matching {pattern!r}\n{result.tail()}"
    built = [p for p in home.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".npy", ".faiss", ".pkl")
             and "log" not in p.parts]
    assert not built, f"a refused cell wrote {built}"
    assert not (home / "outputs").exists() or not list((home / "outputs").rglob("answers*.jsonl"))


def test_the_design_covers_every_pair_across_groups():
    """Every pair of options from two different groups is in a cell that runs, or is declared (refused: its own
    cell; costly: the test named in table.py)."""
    wanted = d.all_pairs(GROUPS)
    ran = d.covered(DESIGN.pairwise)
    declared = {p for p in wanted if not t.allowed(dict(p))}
    missing = sorted(wanted - ran - declared)
    assert not missing, f"{len(missing)} pairs in no cell, e.g. {missing[:10]}"
    for launcher, cells in DESIGN.by_launcher.items():
        seen = {(g, o) for c in cells for g, o in c.items()}
        lacking = [(g, o) for g, opts in GROUPS.items() for o in opts if (g, o) not in seen and t.allowed({g: o})]
        assert not lacking, f"hydra/launcher={launcher} never runs {lacking}"
    print(f"{len(DESIGN.pairwise)} cells cover {len(ran)} of {len(wanted)} pairs; {len(declared)} declared")


def test_a_new_option_joins_the_design(tmp_path, monkeypatch):
    """An option file added to conf/ is a level of the design with no test change."""
    conf = tmp_path / "conf"
    for group in d.GROUPS:
        (conf / group).mkdir(parents=True)
        for option in d.options(group):
            (conf / group / f"{option}.yaml").write_text("")
    (conf / "ordering" / "shuffled.yaml").write_text("")
    monkeypatch.setattr(d, "CONF", conf)
    groups = {g: d.options(g) for g in d.GROUPS}
    assert "shuffled" in groups["ordering"]
    cells = d.pairwise_cells(groups, t.allowed)
    assert {("ordering", "shuffled"), ("generator", "iterdrag")} in [set(p) for p in d.covered(cells)] or \
        any(c["ordering"] == "shuffled" and c["generator"] == "iterdrag" for c in cells)


def test_removing_a_refusal_row_fails_the_design():
    """A refusal row is what keeps its combination out of the completing cells: without it, the refused
    combination is planned as a cell that must complete (and the product refuses it, so that cell fails)."""
    row = t.REFUSALS[0]
    cells = d.pairwise_cells(GROUPS, lambda c: not any(x.when(c) for x in t.COSTLY))
    assert any(row.when(c) for c in cells)
    assert not any(row.when(c) for c in DESIGN.pairwise)


# -- the launchers ---------------------------------------------------------------------------------------------
#: the engine nodes a real-engine cell sets to the instant endpoint (judge.llm, attack.llm), as a config option of
#: the sweep's own search path: merged onto `${llm}` a node would keep the run engine's keys, so the cell's body
#: empties the node first (as conf/experiment/ragtifier.yaml does for its judge)
INSTANT_OPTION = "instant_endpoint"


def cell_config(text: str) -> dict:
    """A cell's command line as a config of the `combo` group (`# @package _global_`): group overrides become
    its defaults list (after the body, `_self_`), every other setting its body, so one multirun
    (`+combo=c0,c1,...`) runs many cells; an engine node given whole (`judge.llm={...}`) is the instant option."""
    import yaml

    defaults: list = ["_self_"]
    overrides: list = []  # Hydra takes overrides of the primary config's choices last in a defaults list
    values: dict = {}
    for word in shlex.split(text)[3:]:
        key, _, value = word.partition("=")
        group = key.lstrip("+")
        if group in d.GROUPS or "@" in group:
            if key.startswith("+"):
                defaults.append({f"/{group}": yaml.safe_load(value)})
            else:
                overrides.append({f"override /{group}": yaml.safe_load(value)})
            continue
        node = values
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if leaf == "llm" and value.startswith("{"):
            node[leaf] = None
            defaults.append({f"/llm@{key}": INSTANT_OPTION})
            continue
        node[leaf] = value if "${" in value else yaml.safe_load(value)
    return {"defaults": [*defaults, *overrides], **values}


def write_combos(store: Store, folder: Path, cells: list[d.Cell]) -> list[str]:
    """The cells as options of a `combo` config group under `folder` (a search path), after preparing what they
    need; returns their option names."""
    import yaml

    (folder / "combo").mkdir(parents=True, exist_ok=True)
    (folder / "llm").mkdir(exist_ok=True)
    engine = {k: str(v).format(endpoint=store.endpoint.url) for k, v in t.INSTANT_ENGINE.items()}
    (folder / "llm" / f"{INSTANT_OPTION}.yaml").write_text(yaml.safe_dump(engine, sort_keys=False))
    names = []
    for i, cell in enumerate(cells):
        text = command(cell, store)
        prepare(cell, store, text)
        names.append(f"c{i:03d}")
        body = yaml.safe_dump(cell_config(text), sort_keys=False)
        (folder / "combo" / f"{names[-1]}.yaml").write_text("# @package _global_\n" + body)
    return names


def run_sweep(store: Store, name: str, cells: list[d.Cell], launcher: str | None) -> tuple[runner.Result, Path | None]:
    """The cells as one multirun (`+combo=...`), on `launcher` (None: Hydra's in-process basic launcher)."""
    from tests.docs.store import LOCAL_CONF

    conf = store.base / name / "conf"
    names = write_combos(store, conf, cells)
    paths = f"[file://{conf},file://{LOCAL_CONF}]" if launcher == "slurm" else f"[file://{conf}]"
    text = f"python -m rag.main -m +combo={','.join(names)} hydra.searchpath={paths}"
    if launcher:
        text += f" hydra/launcher={launcher}"
    if launcher == "local":  # the sweep-end options: its cells battle before the summary, judged by the endpoint
        judge = ["llm=openai_compatible", f"llm.base_url={store.endpoint.url}",
                 f"llm.model={store.endpoint.model}", f"battle.bootstrap={BATTLE_BOOTSTRAP}"]
        text += " hydra.callbacks.sweep_summary.battles=true " + shlex.quote(
            "hydra.callbacks.sweep_summary.battles_overrides=[" + ",".join(f'"{o}"' for o in judge) + "]")
    else:  # a summary of unrelated cells is no comparison anyone makes; the launcher sweeps keep theirs
        text += " hydra.callbacks.sweep_summary.enabled=false"
    result, home = _run(store, name, text, timeout=SWEEP_SECONDS)
    sweeps = sorted({p.parent for p in (home / "outputs").rglob("multirun.yaml")})
    return result, sweeps[0] if sweeps else None


def sweep_cell(sweep: Path | None, number: int, result: runner.Result) -> Path:
    assert sweep is not None, result.tail()
    folders = [p for p in sweep.iterdir() if p.is_dir() and p.name.startswith(f"{number}_")]
    assert len(folders) == 1 and (folders[0] / "metrics.json").is_file(), \
        f"cell {number} did not complete\n{result.tail()}"
    return folders[0]


#: the local sweep's battles: 16 cells, every pair on every topic in both orders; the intervals' resamples kept few
BATTLE_BOOTSTRAP = 50


@pytest.mark.timeout(SWEEP_SECONDS + 300)
def test_the_local_sweep_battles_at_its_end(launcher_sweeps):
    """`hydra.callbacks.sweep_summary.battles=true` with the local launcher's cells (over several datasets): every
    complete cell is rated within its question set, or listed as unrated when no other cell answered its
    questions, and the summary and the report have the ranking."""
    result, sweep = launcher_sweeps["local"]
    assert sweep is not None, result.tail()
    data = json.loads((sweep / "battles" / "ratings.json").read_text())
    complete = {p.parent.name for p in sweep.glob("*/metrics.json")}
    rated, unrated = {c["cell"] for c in data["cells"]}, {c["cell"] for c in data.get("unrated", [])}
    assert rated | unrated == complete and not rated & unrated, result.tail()
    sets = [c["questions"] for c in data["cells"]]
    assert all(sets.count(label) >= 2 for label in sets)  # a rating only beside another cell of its set
    assert not {c["questions"] for c in data.get("unrated", [])} & set(sets)
    assert data["ratings"]["bootstrap"] == BATTLE_BOOTSTRAP and data["rates"]["n_judgments"] > 0
    assert "Battles (" in (sweep / "summary.md").read_text()
    assert (sweep / "report" / "battles.png").is_file(), result.tail()


LAUNCHER_CELLS = [(launcher, i) for launcher, cells in DESIGN.by_launcher.items() for i in range(len(cells))]


@pytest.fixture(scope="module")
def launcher_sweeps(store):
    """launcher -> (the result of its one multirun over its cells, the sweep folder); None without SLURM."""
    from tests.cluster.helpers import slurm_unavailable_reason

    return {launcher: None if launcher == "slurm" and slurm_unavailable_reason()
            else run_sweep(store, f"launcher-{launcher}", cells, launcher)
            for launcher, cells in DESIGN.by_launcher.items()}


@pytest.mark.timeout(SWEEP_SECONDS + 300)  # the first cell's setup runs every launcher's sweep
@pytest.mark.parametrize("launcher,number", [
    pytest.param(lr, i, id=f"{lr}-c{i:02d}", marks=[pytest.mark.slurm] if lr == "slurm" else [])
    for lr, i in LAUNCHER_CELLS])
def test_launcher_cell_completes(launcher, number, launcher_sweeps):
    """Each launcher runs its cells as one multirun (hydra/launcher=local: submitit's local processes; slurm: CI's
    one-node SLURM); together they hold every option of every group beside that launcher."""
    if launcher_sweeps[launcher] is None:
        pytest.skip("SLURM not available: start it with .ci/slurm/setup.sh")
    result, sweep = launcher_sweeps[launcher]
    cell = DESIGN.by_launcher[launcher][number]
    n = t.QUESTIONS["real" if cell["llm"] in t.REAL_ENGINES else "instant"]
    check_completed(cell, sweep_cell(sweep, number, result), n, result)
