"""Config plumbing of `python -m rag.datagen`: its categories group lives in conf/datagen/categories/.

`conf/datagen.yaml` puts conf/datagen on Hydra's search path through the `datagen_conf_dir` resolver registered
here, so that the presets are selected as `categories=ragtifier` while the project's `llm`, `retriever` and
`paths` groups come from conf/ as for `rag.main`.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

OmegaConf.register_new_resolver("datagen_conf_dir", lambda: str(CONF_DIR / "datagen"), replace=True)
