"""Keep secrets out of logs, config dumps, folder names and outputs.

Keys are meant to be read from the environment only. Where one is passed anyway (`+retriever.api_key=...`),
values under key-like names (`*key*`, `*token*`, `*secret*`, `*password*`, `*credential*`) and credentials
inside URLs (`https://user:pass@host`) are masked everywhere the project writes or prints them: config dumps
(`redact`), text such as log lines and Hydra's YAML files (`mask_text`), and sweep folder names (the
`rag.mask` resolver in `hydra.sweep.subdir`). Numbers are never masked (`max_tokens=8` is not a secret).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MASK = "***"

_SECRET_WORDS = re.compile(r"(key|token|secret|passw(or)?d|credential|auth)", re.I)
#: names that look key-like but hold no secret: variable *names* (`api_key_env`), lists of keys, counts
_NOT_SECRET = re.compile(r"(_env|_keys|^keys|_field|tokenizer\w*|keywords?)$", re.I)
_NUMBER_OR_FLAG = re.compile(r"^([-+]?\d+(\.\d*)?([eE][-+]?\d+)?|true|false|null|none|\*\*\*)$", re.I)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<cred>[^/@\s:'\"]+:[^/@\s'\"]+)@")
#: `name=value` (overrides, folder names), `name: value` (YAML, logs) and `"name": "value"` (JSON)
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z0-9_.+\-~]+?)(?P<sep>=|:[ \t]+|\"[ \t]*:[ \t]*\")"
                         r"(?P<quote>['\"]?)(?P<value>[^\s,'\"\]\}]+)")


def is_secret_name(name: str) -> bool:
    """True for config names whose values are secrets (the last dotted part decides)."""
    last = str(name).lstrip("+~").rsplit(".", 1)[-1]
    return bool(_SECRET_WORDS.search(last)) and not _NOT_SECRET.search(last)


def is_secret_value(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not _NUMBER_OR_FLAG.match(value.strip()) \
        and not value.startswith("${")


def redact(obj: Any) -> Any:
    """A copy of a (nested) config dict with secret-looking values and URL credentials masked."""
    if isinstance(obj, dict):
        return {k: (MASK if is_secret_name(str(k)) and is_secret_value(v) else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return mask_url(obj)
    return obj


def mask_url(text: str) -> str:
    """`https://user:pass@host/...` -> `https://***@host/...`."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{MASK}@", str(text))


#: what may follow a YAML-style `name: value` for the value to be the setting's value (end of line, a flow
#: mapping's `,` / `}` / `]`, a comment): `retriever.api_key: PineconeRetriever takes no argument` is a sentence
_YAML_VALUE_END = re.compile(r"[ \t]*($|[\n\r,}\]#])")


def _mask_assignment(match: re.Match) -> str:
    if not (is_secret_name(match.group("name")) and is_secret_value(match.group("value"))):
        return match.group(0)
    sep = match.group("sep")
    if sep.startswith(":") and not match.group("quote") and not _YAML_VALUE_END.match(match.string, match.end()):
        return match.group(0)  # the words of a message after a setting's name, not its value
    return f"{match.group('name')}{sep}{match.group('quote')}{MASK}"


def mask_text(text: str, known: Iterable[str] = ()) -> str:
    """Mask secrets in free text: key-like assignments, URL credentials and any `known` secret value."""
    out = _ASSIGNMENT.sub(_mask_assignment, mask_url(str(text)))
    for value in sorted(set(known), key=len, reverse=True):
        if len(value) >= 4:
            out = out.replace(value, MASK)
    return out


def secrets_in_overrides(overrides: Iterable[str]) -> set[str]:
    """Secret values passed on a command line (`+llm.api_key=...`, `llm.base_url=https://u:p@host`)."""
    found: set[str] = set()
    for override in overrides:
        name, eq, value = str(override).partition("=")
        value = value.strip().strip("'\"")
        if eq and is_secret_name(name) and is_secret_value(value):
            found.add(value)
        for match in _URL_CREDENTIALS.finditer(str(override)):
            found.add(match.group("cred"))
    return found


def mask_overrides(overrides: Iterable[str]) -> list[str]:
    return [mask_text(o) for o in overrides]


def mask_file(path: str | Path, known: Iterable[str] = ()) -> bool:
    """Rewrite a text file (atomically) with its secrets masked; True when something changed."""
    from rag.core.io import atomic_write_text

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return False
    masked = mask_text(text, known)
    if masked == text:
        return False
    atomic_write_text(path, masked)
    return True


def mask_hydra_files(run_dir: str | Path, overrides: Iterable[str], extra: Iterable[str | Path] = ()) -> None:
    """Hydra writes a run's overrides (an API key among them) into `<run_dir>/.hydra/*.yaml` (and a sweep's
    `multirun.yaml`, passed in `extra`): mask them there, and in every later log line."""
    known = secrets_in_overrides(overrides)
    add_known_secrets(known)
    for path in [*(Path(run_dir) / ".hydra").glob("*.yaml"), *map(Path, extra)]:
        try:
            mask_file(path, known)
        except OSError as err:
            log.warning("cannot mask secrets in %s: %s", path, err)


# -- logging: every record is masked, whichever handler (Hydra's, submitit's) prints it ------------------------
_KNOWN: set[str] = set()
_installed = False


def add_known_secrets(values: Iterable[str]) -> None:
    _KNOWN.update(v for v in values if len(v) >= 4)


def install_log_masking() -> None:
    """Mask secrets in every log record (a record factory survives Hydra's logging reconfiguration)."""
    global _installed
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: leave it to the handler to report
            return record
        masked = mask_text(message, _KNOWN)
        if masked != message:
            record.msg, record.args = masked, None
        return record

    logging.setLogRecordFactory(factory)
    _installed = True


def register_resolver() -> None:
    """`${rag.mask:...}`: the masked text, for folder names built from overrides (`hydra.sweep.subdir`), capped
    at `MAX_NAME_BYTES` (a sweep with many fixed overrides would otherwise name a folder the file system
    refuses)."""
    from omegaconf import OmegaConf

    from rag.core.hashing import cap_name

    if not OmegaConf.has_resolver("rag.mask"):
        OmegaConf.register_new_resolver("rag.mask", lambda text: cap_name(mask_text(str(text), _KNOWN)))
