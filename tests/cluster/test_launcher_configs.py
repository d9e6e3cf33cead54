"""The launcher configs compose, take cluster specifics from `cluster:` (conf/local/default.yaml) and turn
into the sbatch script submitit would submit; the sweep-summary callback is registered and runs (fast)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.utils import setup_globals
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tests.conftest import CONF_DIR


def _hydra_cfg(*overrides: str):
    setup_globals()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def _sbatch_text(launcher_cfg, folder: Path) -> str:
    """The sbatch file submitit writes for these launcher params (same mapping as the plugin's launch())."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    launcher = instantiate(launcher_cfg)
    params = dict(launcher.params)
    params.pop("submitit_folder")
    max_num_timeout = params.pop("max_num_timeout")
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_max_num_timeout=max_num_timeout)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
    return executor._executor._make_submission_file_text("python -m x", "uid")


def test_slurm_launcher_defaults_and_cluster_block(tmp_path):
    cfg = _hydra_cfg("hydra/launcher=slurm", "+cluster.partition=gpu", "+cluster.account=proj",
                     "+cluster.gpus_per_node=2", "+cluster.timeout_min=90",
                     "+cluster.setup=[module load cuda,conda activate rag]")
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert launcher["_target_"].endswith("SlurmLauncher")
    assert launcher["partition"] == "gpu" and launcher["account"] == "proj"
    assert launcher["gpus_per_node"] == 2 and launcher["timeout_min"] == 90
    assert launcher["signal_delay_s"] == 300 and launcher["max_num_timeout"] == 3
    assert launcher["setup"] == ["module load cuda", "conda activate rag"]
    text = _sbatch_text(cfg.hydra.launcher, tmp_path)
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=proj", "#SBATCH --gpus-per-node=2",
                 "#SBATCH --time=90", "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32GB",
                 "module load cuda", "conda activate rag"):
        assert line in text, (line, text)
    # submitit's preemption / time-out signal, sent signal_delay_s before the limit
    assert "#SBATCH --signal=USR2@300" in text


@pytest.mark.parametrize("gpus", ["null", "0"])
def test_gpus_can_be_switched_off_for_cpu_clusters(tmp_path, gpus):
    cfg = _hydra_cfg("hydra/launcher=slurm", f"hydra.launcher.gpus_per_node={gpus}", "hydra.launcher.mem_gb=2",
                     "hydra.launcher.cpus_per_task=1")
    text = _sbatch_text(cfg.hydra.launcher, tmp_path)
    assert "--gres" not in text and "--partition" not in text
    assert ("--gpus-per-node" not in text) if gpus == "null" else ("#SBATCH --gpus-per-node=0" in text)
    assert "#SBATCH --mem=2GB" in text and "#SBATCH --cpus-per-task=1" in text


def test_gres_string_instead_of_a_count(tmp_path):
    cfg = _hydra_cfg("hydra/launcher=slurm", "hydra.launcher.gpus_per_node=null",
                     "hydra.launcher.gres=gpu:a100:1")
    text = _sbatch_text(cfg.hydra.launcher, tmp_path)
    assert "#SBATCH --gres=gpu:a100:1" in text and "--gpus-per-node" not in text


def test_local_launcher():
    cfg = _hydra_cfg("hydra/launcher=local")
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert launcher["_target_"].endswith("LocalLauncher")
    assert launcher["submitit_folder"].endswith("/.submitit/%j") and launcher["gpus_per_node"] == 0


def test_sweep_summary_callback_is_registered_and_writes_the_summary(tmp_path):
    cfg = _hydra_cfg("logger=none")
    callbacks = OmegaConf.to_container(cfg.hydra.callbacks)
    assert callbacks["sweep_summary"]["_target_"] == "eval.sweep_callback.SweepSummaryCallback"
    callback = instantiate(cfg.hydra.callbacks.sweep_summary)
    sweep = tmp_path / "sweep"
    cell = sweep / "0_rerank.k=2"
    (cell / ".hydra").mkdir(parents=True)
    (cell / ".hydra" / "overrides.yaml").write_text("- rerank.k=2\n")
    (cell / "metrics.json").write_text('{"answer/f1/all": 0.25}')
    master = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "logger": {"_target_": "x.RunLogger"}})
    callback.on_multirun_end(config=master)
    assert "0.25" in (sweep / "summary.csv").read_text()
    assert not (sweep / "wandb").exists()  # the cells did not use W&B: neither does the summary
