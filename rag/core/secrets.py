"""Keep secrets out of logs, config dumps and outputs: keys are read from the environment only, and any
config value under a secret-looking name is masked before it is written anywhere."""

from __future__ import annotations

import re
from typing import Any

_SECRET_NAME = re.compile(r"(api[_-]?key|token|secret|password|passwd|credential|auth)(?!_env)", re.I)


def redact(obj: Any) -> Any:
    """A copy of a (nested) config dict with secret-looking values masked."""
    if isinstance(obj, dict):
        return {k: ("***" if _SECRET_NAME.search(str(k)) and isinstance(v, str) and v else redact(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj
