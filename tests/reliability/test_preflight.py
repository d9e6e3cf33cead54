"""Issue 9, fault 4: a sweep's cells are all checked before any is launched, on the basic launcher and on the real
local SLURM (nothing submitted); `rerank.k > retriever.k` is refused for single runs too. No model is loaded:
every case must stop before any work."""

from __future__ import annotations

import subprocess

import pytest

from rag.preflight import check_cells, check_config
from tests.cluster.helpers import rag_env, rag_main, sweep_dirs
from tests.conftest import compose_config

SLURM_CPU = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.mem_gb=2",
             "hydra.launcher.cpus_per_task=1", "hydra.launcher.timeout_min=5"]


def _env(tmp_path):
    env = rag_env(tmp_path)
    for name in ("PINECONE_API_KEY", "PINECONE_HOST", "OPENSEARCH_HOST"):
        env.pop(name, None)
    return env


def _problem_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("preflight:")]


def test_a_data_folder_that_does_not_exist_is_named_with_its_variable(tmp_path):
    """Issue 52: without `paths.data_dir` (RAG_DATA_DIR unset) the lines named `dataset.questions.path` and
    `dataset.corpus.path`, each as a missing file, not the setting that is wrong."""
    nowhere = tmp_path / "no_data_here"
    problems = check_config(compose_config(["dataset=hotpotqa", f"paths.data_dir={nowhere}"], tmp_path), environ={})
    assert problems == [f"paths.data_dir={nowhere}: no such folder, so dataset.questions.path, dataset.corpus.path "
                        f"cannot be read; set RAG_DATA_DIR=/path/to/data (or paths.data_dir=/path/to/data), the "
                        f"folder holding liverag_dm/, hotpotqa_musique/, squad/"]


def test_checks_from_composed_configs(hotpot_data, tmp_path):
    cfg = compose_config(["retriever=pinecone", "retriever.k=2", "rerank.k=10",
                          "dataset.corpus.path=missing/corpus.jsonl", "llm.model_path=/nonexistent/model.gguf"],
                         tmp_path)
    problems = check_config(cfg, environ={})
    text = "\n".join(problems)
    assert "PINECONE_API_KEY is not set" in text
    assert "missing/corpus.jsonl" in text
    assert "/nonexistent/model.gguf" in text
    assert "rerank.k=10 > retriever.k=2" in text
    assert check_config(compose_config(["dataset=hotpotqa"], tmp_path), environ={}) == []
    deep = [compose_config([f"retriever.k={k}", "cache.retrieval_depth=10"], tmp_path) for k in (5, 20)]
    assert any("cache.retrieval_depth=10" in p.message for p in check_cells(deep, environ={}))


def test_sweep_without_key_launches_nothing(hotpot_data, tmp_path):
    proc = rag_main(["-m", "retriever=pinecone", "rerank.k=5,10", "dataset=hotpotqa", "logger=none"],
                    _env(tmp_path), timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = _problem_lines(proc)
    assert len(lines) == 1 and "PINECONE_API_KEY" in lines[0] and "all cells" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert sweep_dirs(tmp_path / "outputs") == []  # not even a sweep folder


def test_one_line_per_problem_naming_cells(hotpot_data, tmp_path):
    proc = rag_main(["-m", "dataset=hotpotqa", "retriever.k=2", "rerank.k=1,10", "logger=none",
                     "dataset.questions.path=nowhere/q.json"], _env(tmp_path), timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = _problem_lines(proc)
    assert any("rerank.k=10 > retriever.k=2" in ln and "cell(s) 1" in ln for ln in lines), lines
    assert any("nowhere/q.json" in ln and "all cells" in ln for ln in lines), lines
    assert len(lines) == 2


def test_single_run_refuses_rerank_k_above_retriever_k(hotpot_data, tmp_path):
    proc = rag_main(["dataset=hotpotqa", "retriever.k=2", "rerank.k=10", "logger=none",
                     f"hydra.run.dir={tmp_path / 'run'}"], _env(tmp_path), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "rerank.k=10 > retriever.k=2" in out and "Traceback" not in out
    assert not (tmp_path / "run" / "answers.jsonl").exists() and not (tmp_path / "cache" / "index").exists()


def test_key_a_component_does_not_take_is_named(hotpot_data, tmp_path):
    cfg = compose_config(["generator=ginger", "+generator.max_docs=3", "+retriever.kk=4"], tmp_path)
    text = "\n".join(check_config(cfg, environ={}))
    assert "generator.max_docs: GingerGenerator takes no argument 'max_docs'" in text  # **kwargs followed to base
    assert "retriever.kk:" in text and "retriever.k:" not in text
    # judges keep their **options and validate them themselves: no report
    assert not [p for p in check_config(compose_config(["judge=full"], tmp_path), environ={}) if "argument" in p]


def test_typos_wrong_types_and_sampling_out_of_range_are_refused_before_any_work(hotpot_data, tmp_path):
    """Issue 25, faults 4 and 8: `+retreiver.k=5` ran at k=20, `generator.temperature=-1` was sent to the
    endpoint, `rerank.k=abc` ended in `TypeError: '<' not supported between 'str' and 'int'`."""
    problems = check_config(compose_config(["+retreiver.k=5", "rerank.k=abc", "generator.temperature=-1",
                                            "generator.max_tokens=0", "retriever.k=5.5", "judge=[liverag]",
                                            "+judge.liverag.params.top_p=1.5"], tmp_path), environ={})
    text = "\n".join(problems)
    assert "retreiver: no config reads a top-level key 'retreiver'" in text and "did you mean retriever?" in text
    assert "rerank.k='abc': must be an integer" in text and "retriever.k=5.5: must be an integer" in text
    assert "generator.temperature=-1: must be at least 0" in text and "generator.max_tokens=0: must be at least 1" \
        in text
    assert "judge.liverag.params.top_p=1.5: must be in (0, 1]" in text
    assert len(problems) == 6, problems
    # every shipped option of every group passes as it is (InstructRAG on the questions its demonstrations are not)
    for override in ("experiment=demo", "judge=full", "generator=crucible", "generator=instructrag dataset.limit=275",
                     "rerank=bge", "retriever=dense", "llm=llamacpp_server", "llm=smollm2_135m"):
        assert check_config(compose_config(override.split(), tmp_path), environ={}) == [], override
    proc = rag_main(["dataset=hotpotqa", "rerank.k=abc", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"],
                    _env(tmp_path), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "rerank.k='abc': must be an integer" in out and "Traceback" not in out
    assert not (tmp_path / "run" / "answers.jsonl").exists()


def test_multirun_sets_a_key_of_swept_group_options(hotpot_data, tmp_path):
    """Hydra composes a multirun's master config with the *default* generator, which has no `max_docs`: the key
    is applied as `++generator.max_docs` and each cell is checked; ginger, which lacks it, is named."""
    proc = rag_main(["-m", "dataset=hotpotqa", "logger=none", "generator=crucible,crucible_verified,ginger",
                     "generator.max_docs=3"], _env(tmp_path), timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "not in struct" not in proc.stderr and "applied as ++generator.max_docs=3" in proc.stderr
    assert _problem_lines(proc) == ["preflight: generator.max_docs: GingerGenerator takes no argument 'max_docs' "
                                    "(a typo, or a key meant for another option of this group) [cell(s) 2]"]


def _slurm_jobs_writing_under(folder) -> list[str]:
    """Jobs SLURM knows (queued, running or recently ended) whose files lie under `folder`: this test's only (the
    documented-commands session submits its own jobs to the same controller meanwhile)."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, timeout=30).stdout
    return [line.split()[0] for line in out.splitlines() if str(folder) in line]


@pytest.mark.slurm
def test_slurm_sweep_without_key_submits_nothing(slurm, hotpot_data, tmp_path):
    proc = rag_main(["-m", *SLURM_CPU, "retriever=pinecone", "rerank.k=5,10", "dataset=hotpotqa", "logger=none"],
                    _env(tmp_path), timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert any("PINECONE_API_KEY" in ln for ln in _problem_lines(proc))
    assert _slurm_jobs_writing_under(tmp_path) == []
    assert sweep_dirs(tmp_path / "outputs") == []


def test_a_missing_data_folder_in_a_sweep_with_demonstrations_is_one_line_per_setting(tmp_path):
    """`experiment=poisoning` without RAG_DATA_DIR: InstructRAG's demonstrations live in a data file too; its
    declared-split check must not raise past the preflight (it did, with a traceback), and the one data-folder line
    names the demonstrations' setting beside the dataset's."""
    nowhere = tmp_path / "no_data_here"
    cfg = compose_config(["experiment=poisoning", "generator=instructrag", f"paths.data_dir={nowhere}"], tmp_path)
    problems = check_config(cfg, environ={})
    assert len(problems) == 1 and problems[0].startswith(f"paths.data_dir={nowhere}: no such folder"), problems
    assert "dataset.questions.path" in problems[0] and "generator.demo_questions.path" in problems[0]


def test_a_query_source_name_with_a_typo_is_refused_naming_the_setting(tmp_path):
    """Issue 52: `query.sparse_source=bm25x` beside a fusion of `sparse` and `dense` sent the keyword queries to every
    source, silently. The default names against the default fusion, and a single retriever, stay accepted."""
    typo = compose_config(["query=rewrite", "retriever=fusion", "query.sparse_source=bm25x"], tmp_path)
    assert [p for p in check_config(typo, environ={}) if "query." in p] == [
        "query.sparse_source=bm25x: retriever.sources has no such source (it has sparse, dense); its queries would "
        "search every source. Name one of the fusion's sources"]
    for overrides in (["query=rewrite", "retriever=fusion"], ["query=preqrag", "retriever=bm25"],
                      ["query=rewrite", "retriever=fusion", "query.sparse_source=x", "query.dense_source=y"]):
        cfg = compose_config(overrides, tmp_path)
        assert not [p for p in check_config(cfg, environ={}) if p.startswith("query.")], overrides
