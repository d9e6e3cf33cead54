"""Secrets by reference, never by value; and masking, for what slips through anyway.

A credential reaches the toolkit only through an environment variable or a credentials file that a config
*names* (`llm.api_key_env`, `retriever.password_env`, `retriever.netrc_file`), the way W&B, Hugging Face and the
cloud SDKs read theirs. A secret given by value is refused before Hydra, W&B or a folder name sees it, one line
each saying which variable to set instead (`refuse_secret_arguments` on the command line of every entry point,
`value_problem` on every setting of a composed config, both through `rag.core.entry`). A value is a secret when

- its setting's name says so (`api_key`, `password`, `token`, `secret`, `credentials`, `auth`: the last words of
  the name decide, so `max_tokens`, `tokenizer`, `top_logprobs`, `eos_token` and `api_key_env` are not);
- it is a URL with credentials of any shape (`https://user:pass@host`, `https://TOKEN@host`, `https://:PASS@host`,
  percent-encoded), or a host setting's `TOKEN@host`;
- it has the shape of a known key (`sk-...`, `sk-ant-...`, `pcsk_...`, `hf_...`, `AKIA...`, `ghp_...`, a JWT, a
  PEM private key), whatever its setting is called;
- or it stands where a variable's *name* belongs (`*_env`) and is no variable name.

Masking remains for text the project does not control (log records, an exception's message, a cache key):
`redact` (dicts), `mask_text` (free text; a masked YAML value is written `'***'`, so the YAML stays valid),
`mask_url`, and the `rag.mask` resolver of sweep folder names.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MASK = "***"

# -- what a secret looks like ------------------------------------------------------------------------------------
#: last words of a setting's name that hold a secret (`auth_token`, `password`, `credentials`, `Authorization`)
_SECRET_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "token", "credential",
                           "credentials", "apikey", "authorization", "auth", "bearer", "cookie"})
#: words before `key` that make it a credential (`api_key`, `secret_access_key`, `private_key`); a bare `key` too
_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "auth", "client", "subscription", "license",
                             "master", "signing", "encryption", "session", "bearer", "service", "account"})
#: words before `token` that name a vocabulary entry, not a credential (`eos_token`, `pad_token`)
_VOCABULARY_TOKENS = frozenset({"eos", "bos", "pad", "unk", "sep", "cls", "mask", "stop", "special", "start",
                                "end", "image", "audio", "think", "split", "first", "last", "max", "min"})
#: last words that make the setting a *reference* to a secret (a variable's or a file's name), never a value
_REFERENCE_WORDS = frozenset({"env", "file", "path", "dir", "field", "fields", "var", "variable", "name",
                              "names", "url", "host", "type", "mode", "method", "region", "profile", "keys"})
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")

#: the random part of an `sk-` key: 20 or more characters with a digit and a capital letter (so that a folder
#: called `sk-learn-experiments` is not a key)
_KEY_BODY = r"(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[A-Z])[A-Za-z0-9_\-]{20,}"
#: values shaped like the keys of known services, whatever setting they stand in (longest prefixes first)
KEY_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((what, re.compile(pattern)) for what, pattern in (
    ("an Anthropic API key (sk-ant-...)", r"(?<![A-Za-z0-9])sk-ant-" + _KEY_BODY),
    ("an OpenAI-style API key (sk-...)", r"(?<![A-Za-z0-9])sk-" + _KEY_BODY),
    ("a Pinecone API key (pcsk_...)", r"(?<![A-Za-z0-9])pcsk_[A-Za-z0-9_]{16,}"),
    ("a Hugging Face token (hf_...)", r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),
    ("an AWS access key id (AKIA.../ASIA...)", r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])"),
    ("a GitHub token (ghp_...)", r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ("a Slack token (xox.-...)", r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("a Google API key (AIza...)", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    ("a W&B API key (local-...)", r"(?<![A-Za-z0-9])local-[0-9a-f]{40}(?![0-9a-f])"),
    ("a JSON Web Token (eyJ...)", r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+"),
    ("a private key (-----BEGIN ... PRIVATE KEY-----)", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
))
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER_OR_FLAG = re.compile(r"^([-+]?\d+(\.\d*)?([eE][-+]?\d+)?|true|false|null|none|'?\*\*\*'?)$", re.I)
#: a URL's userinfo of any shape (RFC 3986: everything between `//` and the last `@` before the host, no `/?#`):
#: `user:password@`, a token as the user name (`https://TOKEN@host`), a password alone (`https://:PASS@host`),
#: percent-encoded (`https://us%3Aer:p%40ss@host`)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<cred>[^/?#@\s'\"]+)@")
#: the same without a scheme, in a setting that holds a host or a URL (`backend.service.host=TOKEN@search.org`)
_BARE_CREDENTIALS = re.compile(r"^(?P<cred>[^/?#@\s'\"]+)@[^\s/@]")
_HOST_WORDS = frozenset({"host", "url", "uri", "endpoint", "hosts", "urls", "address"})


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(name) if w]


def is_secret_name(name: str) -> bool:
    """True for config names whose values are secrets: the last words of the last dotted part decide
    (`llm.extra_body.api_key`, `auth_token`, `password`; not `max_tokens`, `eos_token`, `api_key_env`)."""
    words = _words(str(name).lstrip("+~").rsplit(".", 1)[-1])
    if not words or words[-1] in _REFERENCE_WORDS:
        return False
    last, before = words[-1], (words[-2] if len(words) > 1 else "")
    if last == "key":
        return not before or before in _KEY_QUALIFIERS
    if last == "token":
        return before not in _VOCABULARY_TOKENS
    return last in _SECRET_WORDS


def is_reference_name(name: str) -> bool:
    """`*_env`: a setting that holds the *name* of an environment variable."""
    words = _words(str(name).lstrip("+~").rsplit(".", 1)[-1])
    return bool(words) and words[-1] == "env"


def key_shape(text: str) -> str | None:
    """What known key `text` contains (`an OpenAI-style API key (sk-...)`), or None."""
    for what, pattern in KEY_SHAPES:
        if pattern.search(text):
            return what
    return None


def has_url_credentials(text: str, name: str = "") -> bool:
    """A URL with userinfo of any shape in `text`; for a setting `name` that holds a host or a URL, a scheme-less
    `userinfo@host` too."""
    text = str(text)
    if _URL_CREDENTIALS.search(text):
        return True
    words = _words(str(name).rsplit(".", 1)[-1])
    return bool(words) and words[-1] in _HOST_WORDS and bool(_BARE_CREDENTIALS.match(text.strip()))


def is_secret_value(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not _NUMBER_OR_FLAG.match(value.strip()) \
        and not value.startswith("${")


# -- refusing secrets given by value --------------------------------------------------------------------------
#: config nodes that read a credential themselves (through a `*_env` setting): the advice names theirs
_COMPONENTS = ("llm", "judge_llm", "retriever", "service", "serve", "logger", "embedder", "reranker")
_KEPT = "it would stay in Hydra's .hydra/ files, W&B's run files and sweep folder names"
KEPT_IN_CONFIG = "it would stay in every copy of the config: .hydra/, config.json, W&B's run files"


def _component(parts: list[str]) -> str:
    """The config node a setting belongs to: `llm.extra_body.api_key` -> `llm`, `backend.service.host` ->
    `backend.service`, `judge.llm.base_url` -> `judge.llm`."""
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in _COMPONENTS:
            return ".".join(parts[: i + 1])
    return parts[0] if parts else ""


def component_of(name: str) -> str:
    """The config node that reads the credential of setting `name` (`llm.base_url` -> `llm`)."""
    return _component(str(name).lstrip("+~").split(".")[:-1])


def advice(name: str, password: bool = False, variables: dict[str, str] | None = None) -> str:
    """Where a credential for setting `name` goes instead: the variable (or file) its component names;
    `variables` are the component's own `*_env` settings when known (`{"api_key_env": "RAG_LLM_API_KEY"}`)."""
    parts = str(name).lstrip("+~").split(".")
    node = _component(parts[:-1])
    leaf = node.rsplit(".", 1)[-1]
    variables = {k: v for k, v in (variables or {}).items()
                 if isinstance(v, str) and _VARIABLE_NAME.match(v) and not key_shape(v)}
    if "env_set" in parts:
        return f"export {parts[-1]} in the shell (a SLURM job inherits it) instead of setting it in the config"
    if leaf == "logger" or parts[0] == "wandb":
        return "export WANDB_API_KEY (or run `wandb login`, which keeps it in ~/.netrc)"
    if leaf in ("retriever", "service") and password and "api_key_env" not in variables:
        named = (f" (this {node} reads {variables['user_env']} and {variables['password_env']})"
                 if {"user_env", "password_env"} <= set(variables) else "")
        return (f"export the user and password and name the variables: {node}.user_env=<VAR> "
                f"{node}.password_env=<VAR> ({node}.access=basic){named}, or name a netrc file: "
                f"{node}.netrc_file=~/.netrc")
    if leaf in ("llm", "judge_llm", "serve", "retriever", "service"):
        if "api_key_env" in variables:
            return (f"export the key as {variables['api_key_env']}, the variable {node}.api_key_env names (or name "
                    f"another: {node}.api_key_env=<VAR>)")
        return f"export it and name the variable: {node}.api_key_env=<VAR>"
    return "export it as an environment variable and give the variable's name to the component's *_env setting"


def value_problem(name: str, value: Any, kept: str = _KEPT, variables: dict[str, str] | None = None) -> str | None:
    """Why setting `name` may not hold `value` (one line, never the value), or None; `kept` says where it would
    have stayed, `variables` the `*_env` settings of its component (named in the advice)."""
    name = str(name).lstrip("+~")
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null", "none")):
        return None
    text = str(value)
    if is_secret_name(name):
        return f"{name}: a secret is never given by value ({kept}); {advice(name, _is_password(name), variables)}"
    if is_reference_name(name):
        names = [v for v in re.split(r"[,\s\[\]()]+", text) if v and v not in ("choice", "null")]
        if not all(_VARIABLE_NAME.match(v) and not key_shape(v) for v in names):
            return (f"{name} takes the name of an environment variable, not a value: export the value as a "
                    f"variable and give its name ({name}=OPENAI_API_KEY, say)")
        return None
    structured = text.lstrip().startswith(("{", "["))  # `+llm.extra_body={api_key: ...}`
    inner = next((m.group("name") for m in _ASSIGNMENT.finditer(text) if structured
                  and is_secret_name(m.group("name")) and is_secret_value(m.group("value"))), None)
    if inner:
        return (f"{name}.{inner}: a secret is never given by value ({kept}); "
                f"{advice(f'{name}.{inner}', _is_password(inner), variables)}")
    if has_url_credentials(text, name):
        return (f"{name}: the URL carries credentials (whatever stands before @: user:password, a token, a "
                f"password; {kept}); give the URL without them, and the credentials by reference: "
                f"{advice(name, True, variables)}")
    what = key_shape(text)
    if what:
        return f"{name}: the value looks like {what} ({kept}); {advice(name, False, variables)}"
    return None


def _is_password(name: str) -> bool:
    return bool(set(_words(name.rsplit(".", 1)[-1])) & {"password", "passwd", "pwd", "passphrase"})


def secret_arguments(argv: Iterable[str], variables: Any = None) -> list[str]:
    """One line per command-line argument that carries a secret (`+llm.extra_body.api_key=...`,
    `backend.service.host=https://user:pass@host`, `http://TOKEN@host`, `llm.model=sk-...`,
    `llm.api_key_env=sk-...`); `variables(node)` gives a component's `*_env` settings, named in the advice."""
    lines: list[str] = []
    for arg in argv:
        arg = str(arg)
        name, eq, value = arg.partition("=")
        problem = None
        if eq and not name.startswith("-"):
            name = name.strip()
            problem = value_problem(name, value.strip().strip("'\""),
                                    variables=variables(component_of(name)) if variables else None)
        elif has_url_credentials(arg) or key_shape(arg):  # a flag's value (`--config-dir=...`) or a bare word
            what = key_shape(arg) or "a URL with credentials"
            problem = f"an argument holds {what} ({_KEPT}); {advice('')}"
        if problem:
            lines.append(problem)
    return lines


def refuse_secret_arguments(argv: Iterable[str] | None = None, variables: Any = None) -> None:
    """Every entry point's first act: a command line that carries a secret ends here, exit status 2, one line per
    argument saying which variable to set instead, before Hydra, a logger or a folder name sees it."""
    lines = secret_arguments(sys.argv[1:] if argv is None else argv, variables)
    if lines:
        for line in lines:
            print(f"ConfigError: refused: {line}", file=sys.stderr)
        sys.exit(2)


# -- masking what slips through -----------------------------------------------------------------------------
def redact(obj: Any) -> Any:
    """A copy of a (nested) config dict with secret-looking values and URL credentials masked."""
    if isinstance(obj, dict):
        return {k: (MASK if is_secret_name(str(k)) and is_secret_value(v) else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return mask_shapes(mask_url(obj))
    return obj


def mask_url(text: str) -> str:
    """`https://user:pass@host/...` (or `https://TOKEN@host`) -> `https://***@host/...`."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{MASK}@", str(text))


def mask_shapes(text: str) -> str:
    """Values shaped like known keys (`sk-...`, `pcsk_...`) -> `***`."""
    for _, pattern in KEY_SHAPES:
        text = pattern.sub(MASK, text)
    return text


#: `name=value` (overrides, folder names), `name: value` (YAML, logs) and `"name": "value"` (JSON)
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z0-9_.+\-~]+?)(?P<sep>=|:[ \t]+|\"[ \t]*:[ \t]*\")"
                         r"(?P<quote>['\"]?)(?P<value>[^\s,'\"\]\}]+)")
#: what may follow a YAML-style `name: value` for the value to be the setting's value (end of line, a flow
#: mapping's `,` / `}` / `]`, a comment): `retriever.api_key: PineconeRetriever takes no argument` is a sentence
_YAML_VALUE_END = re.compile(r"[ \t]*($|[\n\r,}\]#])")


def _mask_assignment(match: re.Match) -> str:
    if not (is_secret_name(match.group("name")) and is_secret_value(match.group("value"))):
        return match.group(0)
    sep, quote = match.group("sep"), match.group("quote")
    if sep.startswith(":") and not quote:
        if not _YAML_VALUE_END.match(match.string, match.end()):
            return match.group(0)  # the words of a message after a setting's name, not its value
        return f"{match.group('name')}{sep}'{MASK}'"  # a plain `***` would be a YAML alias: quoted, it parses
    return f"{match.group('name')}{sep}{quote}{MASK}"


def mask_text(text: str, known: Iterable[str] = ()) -> str:
    """Mask secrets in free text: key-like assignments, URL credentials, key-shaped values and any `known`
    secret value."""
    out = _ASSIGNMENT.sub(_mask_assignment, mask_shapes(mask_url(str(text))))
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


def folder_safe(name: str) -> str:
    """A path given as an override (`rerank.model_path=/models/bge`) stays one folder name: `/` becomes `%2F`."""
    return name.replace("/", "%2F")


def register_resolver() -> None:
    """`${rag.mask:...}`: the masked text, for folder names built from overrides (`hydra.sweep.subdir`), one folder
    (`folder_safe`), capped at `MAX_NAME_BYTES` (a sweep with many fixed overrides would otherwise name a folder
    the file system refuses)."""
    from omegaconf import OmegaConf

    from rag.core.hashing import cap_name

    if not OmegaConf.has_resolver("rag.mask"):
        OmegaConf.register_new_resolver("rag.mask", lambda text: cap_name(folder_safe(mask_text(str(text), _KNOWN))))
