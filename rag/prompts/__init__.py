"""Prompt templates live as YAML files in this folder: `source`, `system`, `user` (Jinja2), plain-text stops.

Keeping the text out of Python lets a reader compare a prompt with its paper line by line, and lets a user
point `prompt_dir` at their own variants without touching code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

PROMPT_DIR = Path(__file__).parent
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    source: str
    user: str
    system: str = ""
    #: stop sequences added when the engine renders plain text for a base model
    stop_plain: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def messages(self, **variables: Any) -> list[dict[str, str]]:
        out = []
        if self.system.strip():
            out.append({"role": "system", "content": _ENV.from_string(self.system).render(**variables).strip()})
        out.append({"role": "user", "content": _ENV.from_string(self.user).render(**variables).strip()})
        return out


@cache
def load_prompt(name: str, prompt_dir: str | None = None) -> PromptTemplate:
    """Load `<prompt_dir>/<name>.yaml` (default: the package's prompts)."""
    path = Path(prompt_dir or PROMPT_DIR) / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"prompt {name!r} not found at {path}")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = [k for k in ("source", "user") if k not in data]
    if missing:
        raise ValueError(f"{path}: prompt file lacks {', '.join(missing)}")
    known = {"source", "user", "system", "stop_plain"}
    return PromptTemplate(name=name, source=data["source"], user=data["user"], system=data.get("system", ""),
                          stop_plain=tuple(data.get("stop_plain", ())),
                          extra={k: v for k, v in data.items() if k not in known})
