"""Cluster job helpers for sweeps launched through hydra-submitit-launcher (SLURM or local).

    python -m jobs.status SWEEP_DIR      # job state of every cell, which have metrics.json, failures' stderr
    python -m jobs.resubmit SWEEP_DIR    # rerun failed / missing cells into their own folders (resumes)
    sbatch jobs/single_run.sbatch ...    # one resumable run outside a sweep
"""
