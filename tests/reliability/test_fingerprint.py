"""Issue 9, fault 1: a run folder holds answers of one config only. A rerun with another config stops before any
work with one line naming the differing keys; `resume=overwrite` starts the folder afresh; the same config
resumes; `jobs.resubmit` reruns a sweep cell with the cell's own config, so it resumes. Fault 8's status and
dry-run messages are checked on the same sweep.

Real `python -m rag.main` subprocesses on HotpotQA with the real Gemma 270M model (one question each)."""

from __future__ import annotations

import json
import re

import pytest
from omegaconf import OmegaConf

from rag.core.io import read_jsonl
from rag.fingerprint import FINGERPRINT_FILE, fingerprint
from tests.cluster.helpers import CHEAP, rag_env, rag_main, run_module, sweep_dirs
from tests.conftest import compose_config

ARGS = [*CHEAP, "dataset.limit=1", "logger=none"]


def test_fingerprint_ignores_paths_logger_and_flush_size_but_not_answers_settings(tmp_path):
    base = fingerprint(compose_config(["retriever.k=5"], tmp_path))
    same = fingerprint(compose_config(["retriever.k=5", "logger=none", "generation.chunk_size=3",
                                       "cache.stages=false", "judge=none"], tmp_path / "elsewhere"))
    assert same["hash"] == base["hash"]
    for override in ("retriever.k=4", "generator=trustrag", "seed=1", "dataset.limit=3", "llm.n_ctx=4096"):
        assert fingerprint(compose_config(["retriever.k=5", override], tmp_path))["hash"] != base["hash"], override
    assert not any(k.startswith(("paths.", "logger.")) or k.endswith("data_dir") for k in base["config"])


def test_a_server_restarted_on_another_port_resumes_its_folder(tmp_path):
    """llm.base_url says where the endpoint listens, not what answers: another port is the same config (issue
    25); the model name the endpoint serves is still fingerprinted."""
    server = ["llm=llamacpp_server", "llm.model=gemma-3-270m"]
    first = fingerprint(compose_config([*server, "llm.base_url=http://127.0.0.1:8080/v1"], tmp_path))
    moved = fingerprint(compose_config([*server, "llm.base_url=http://127.0.0.1:8131/v1"], tmp_path))
    assert first["hash"] == moved["hash"] and "llm.base_url" not in first["config"]
    other = fingerprint(compose_config(["llm=llamacpp_server", "llm.model=smollm2",
                                        "llm.base_url=http://127.0.0.1:8080/v1"], tmp_path))
    assert other["hash"] != first["hash"]


@pytest.mark.slow
def test_rerun_with_another_config_is_refused_before_any_work(hotpot_data, tmp_path):
    run_dir = tmp_path / "run"
    first = rag_main([*ARGS, f"hydra.run.dir={run_dir}"], rag_env(tmp_path))
    assert first.returncode == 0, first.stderr[-3000:]
    answers = (run_dir / "answers.jsonl").read_bytes()
    metrics = (run_dir / "metrics.json").read_bytes()
    assert json.loads((run_dir / FINGERPRINT_FILE).read_text())["config"]["retriever.k"] == 5

    # another config into the same folder, with an empty cache: refused before any index is built
    fresh_cache = tmp_path / "cache2"
    proc = rag_main([*ARGS, "retriever.k=4", "generator=trustrag", f"hydra.run.dir={run_dir}"],
                    rag_env(tmp_path, fresh_cache))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if "ConfigError" in ln]
    assert "retriever.k (5 -> 4)" in line and "generator._target_" in line and "TrustRAG" in line
    assert "resume=overwrite" in line and "new folder" in line
    assert (run_dir / "answers.jsonl").read_bytes() == answers and (run_dir / "metrics.json").read_bytes() == metrics
    assert not (fresh_cache / "index").exists()  # no work was done

    # the same config resumes: nothing to generate, the answers are kept
    again = rag_main([*ARGS, f"hydra.run.dir={run_dir}"], rag_env(tmp_path))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 answers already written, 0 to go" in again.stdout + again.stderr
    assert read_jsonl(run_dir / "answers.jsonl") == read_jsonl(tmp_path / "run" / "answers.jsonl")

    # resume=overwrite starts afresh with the new config
    over = rag_main([*ARGS, "retriever.k=4", "resume=overwrite", f"hydra.run.dir={run_dir}"], rag_env(tmp_path))
    assert over.returncode == 0, over.stderr[-3000:]
    assert "resuming" not in over.stdout + over.stderr
    assert json.loads((run_dir / FINGERPRINT_FILE).read_text())["config"]["retriever.k"] == 4
    new_metrics = json.loads((run_dir / "metrics.json").read_text())
    # @4 is the run's own k now (recall at the metrics.recall_at cutoffs comes from the deep list as before)
    assert "recall/retrieval@4/all" in new_metrics and new_metrics["n_questions"] == 1
    [row] = read_jsonl(run_dir / "answers.jsonl")
    assert len(row["retrieved"]) == 4
    assert not list(run_dir.glob(".replaced-*"))


@pytest.mark.slow
def test_resubmitted_cell_reruns_its_own_config_and_resumes(hotpot_data, tmp_path):
    """A local-launcher sweep cell whose metrics.json was removed: `jobs.status` says so and counts its answers,
    `--dry-run` submits nothing, and `jobs.resubmit` reruns the cell's own config, which resumes (a fingerprint
    mismatch would refuse it)."""
    env = rag_env(tmp_path)
    proc = rag_main(["-m", "hydra/launcher=local", *ARGS, "retriever.k=5"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path / "outputs")
    [cell] = [p for p in sweep.iterdir() if (p / ".hydra").is_dir()]
    (cell / "metrics.json").unlink()

    status = run_module("jobs.status", [str(sweep), "--json"], env)
    [row] = [json.loads(line) for line in status.stdout.splitlines()]
    assert row["state"] == "incomplete" and row["answers"] == 1, row

    dry = run_module("jobs.resubmit", [str(sweep), "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing run" in dry.stdout and "DRY RUN:" in dry.stdout
    assert not re.search(r"^\s*(submitted|ok|failed)\b", dry.stdout, re.M), dry.stdout
    assert not (cell / "metrics.json").exists()

    rerun = run_module("jobs.resubmit", [str(sweep), "--launcher", "local"], env, timeout=900)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert (cell / "metrics.json").is_file()
    logs = "".join(p.read_text() for p in (sweep / ".resubmit").glob("*.err")) + \
        "".join(p.read_text() for p in (sweep / ".resubmit").glob("*.out"))
    assert "1 answers already written, 0 to go" in logs, logs[-3000:]


def test_check_run_dir_refuses_overwrites_and_resumes(tmp_path):
    """The folder rules without a model: another config is refused, `resume=overwrite` clears only another
    config's outputs (a requeued job with the same command line keeps its own), a legacy folder is judged by
    its config.json."""
    from omegaconf import OmegaConf

    from rag.core.errors import ConfigError
    from rag.fingerprint import check_run_dir

    a = compose_config(["retriever.k=5"], tmp_path)
    b = compose_config(["retriever.k=4"], tmp_path)
    run_dir = tmp_path / "run"
    check_run_dir(a, run_dir)
    (run_dir / "answers.partial.jsonl").write_text('{"id": "q1"}\n')
    with pytest.raises(ConfigError, match=r"retriever\.k \(5 -> 4\).*resume=overwrite"):
        check_run_dir(b, run_dir)
    assert (run_dir / "answers.partial.jsonl").is_file()
    OmegaConf.update(a, "resume", "overwrite")
    check_run_dir(a, run_dir)  # same config: resumed, not cleared
    assert (run_dir / "answers.partial.jsonl").is_file()
    OmegaConf.update(b, "resume", "overwrite")
    check_run_dir(b, run_dir)
    assert not (run_dir / "answers.partial.jsonl").exists() and not list(run_dir.glob(".replaced-*"))
    assert json.loads((run_dir / FINGERPRINT_FILE).read_text())["config"]["retriever.k"] == 4

    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "answers.jsonl").write_text('{"id": "q1"}\n')
    with pytest.raises(ConfigError, match="without a fingerprint"):
        check_run_dir(compose_config([], tmp_path), legacy)
    (legacy / "config.json").write_text(json.dumps(OmegaConf.to_container(a, resolve=True)))
    OmegaConf.update(a, "resume", "auto")
    check_run_dir(a, legacy)  # its config.json matches: resumed
    with pytest.raises(ConfigError):
        check_run_dir(compose_config(["retriever.k=3"], tmp_path), legacy)


def test_a_larger_dataset_limit_extends_the_folder_and_a_smaller_one_is_refused(tmp_path):
    """A pilot on 2 questions grows to 5 in its own folder (both resume modes keep its answers); 5 back to 3 is
    refused like any other change, since the rewritten answers.jsonl would drop answers already made."""
    from omegaconf import OmegaConf

    from rag.core.errors import ConfigError
    from rag.fingerprint import check_run_dir

    run_dir = tmp_path / "run"
    check_run_dir(compose_config(["dataset.limit=2"], tmp_path), run_dir)
    (run_dir / "answers.jsonl").write_text('{"id": "q1"}\n{"id": "q2"}\n')
    for limit, mode in (("5", "auto"), ("null", "overwrite")):
        check_run_dir(compose_config([f"dataset.limit={limit}", f"resume={mode}"], tmp_path), run_dir)
        assert (run_dir / "answers.jsonl").is_file(), (limit, mode)
    assert json.loads((run_dir / FINGERPRINT_FILE).read_text())["config"]["dataset.limit"] is None
    with pytest.raises(ConfigError, match=r"dataset\.limit \(null -> 3\)"):
        check_run_dir(compose_config(["dataset.limit=3"], tmp_path), run_dir)
    # a larger limit together with another change is another config
    check_run_dir(compose_config(["dataset.limit=2"], tmp_path), tmp_path / "other")
    (tmp_path / "other" / "answers.jsonl").write_text('{"id": "q1"}\n')
    with pytest.raises(ConfigError, match=r"dataset\.limit \(2 -> 5\).*retriever\.k"):
        check_run_dir(compose_config(["dataset.limit=5", "retriever.k=4"], tmp_path), tmp_path / "other")
    over = compose_config(["dataset.limit=5", "retriever.k=4"], tmp_path)
    OmegaConf.update(over, "resume", "overwrite")
    check_run_dir(over, tmp_path / "other")
    assert not (tmp_path / "other" / "answers.jsonl").exists()


def test_dataset_offset_is_another_config_and_its_default_keeps_older_folders(tmp_path):
    """Another slice of the questions is another config; offset 0 hashes as folders written before the key
    existed did, so they keep resuming."""
    base = fingerprint(compose_config(["dataset.limit=2"], tmp_path))
    assert "dataset.offset" not in base["config"]
    assert fingerprint(compose_config(["dataset.limit=2", "dataset.offset=0"], tmp_path))["hash"] == base["hash"]
    sliced = fingerprint(compose_config(["dataset.limit=2", "dataset.offset=2"], tmp_path))
    assert sliced["hash"] != base["hash"] and sliced["config"]["dataset.offset"] == 2


def test_prompt_thread_setting_added_later_keeps_older_folders(tmp_path):
    """`llm.n_threads_batch` joined the llama.cpp configs after folders had fingerprints: at its default it hashes
    as before; a set value is fingerprinted like any other key."""
    base = fingerprint(compose_config(["dataset.limit=2", "llm=gemma3_270m"], tmp_path))
    assert "llm.n_threads_batch" not in base["config"] and "llm.n_threads" in base["config"]
    pinned = fingerprint(compose_config(["dataset.limit=2", "llm=gemma3_270m", "llm.n_threads_batch=2"], tmp_path))
    assert pinned["hash"] != base["hash"] and pinned["config"]["llm.n_threads_batch"] == 2


def test_raising_dataset_limit_adds_only_the_new_questions(hotpot_data, shared_cache, tmp_path):
    """End to end on HotpotQA, retrieval only (no model): 2 questions, then 4 into the same folder. The first
    two records are kept byte for byte and only two questions are retrieved."""
    from rag.fingerprint import check_run_dir
    from rag.pipeline import Pipeline

    args = [f"paths.cache_dir={shared_cache}", "dataset=hotpotqa", "generator=none", "retriever.k=5",
            "rerank.k=2", "logger=none", "cache.stages=false"]
    run_dir = tmp_path / "run"
    first_cfg = compose_config([*args, "dataset.limit=2"])
    check_run_dir(first_cfg, run_dir)
    Pipeline(first_cfg).run(run_dir)
    first = read_jsonl(run_dir / "answers.jsonl")

    cfg = compose_config([*args, "dataset.limit=4"])
    check_run_dir(cfg, run_dir)
    metrics = Pipeline(cfg).run(run_dir)
    rows = read_jsonl(run_dir / "answers.jsonl")
    assert len(rows) == 4 == metrics["n_questions"] and rows[:2] == first
    # only the new questions were retrieved (this execution's own counters, issue 36) ...
    from rag.folders import RunFolder

    assert [h["retrieval_calls"] for h in RunFolder(run_dir).work_history()] == [2, 2]
    assert metrics["retrieval_calls"] == 4  # ... and metrics.json holds the work of all four answers
    assert json.loads((run_dir / FINGERPRINT_FILE).read_text())["config"]["dataset.limit"] == 4


def test_the_default_metric_list_keeps_older_folders_and_any_other_list_is_another_config(tmp_path):
    """Per-answer metrics became a config list after folders had fingerprints: the default list (what every
    older answer was scored with) hashes as before, a different list (scores of other metrics) does not."""
    base = fingerprint(compose_config(["dataset.limit=2"], tmp_path))
    assert not [k for k in base["config"] if k.startswith("metrics.") and "recall_at" not in k]
    older = OmegaConf.to_container(compose_config(["dataset.limit=2"], tmp_path), resolve=True)
    for name in ("f1", "em", "recall"):
        del older["metrics"][name]  # the config as it was composed before the metrics group existed
    assert fingerprint(older)["hash"] == base["hash"]
    fewer = fingerprint(compose_config(["dataset.limit=2", "metrics=[f1,recall]"], tmp_path))
    assert fewer["hash"] != base["hash"] and fewer["config"]["metrics.f1._target_"] == "rag.metrics.qa.TokenF1"
