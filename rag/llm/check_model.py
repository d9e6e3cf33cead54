"""`python -m rag.llm.check_model llm=<name>`: does the configured endpoint still serve the configured model?

Why: hosted providers retire model ids (RAGtifier's `claude-3-5-haiku-20241022` is gone), and a retired id fails
only at a run's first request, possibly hours into a SLURM queue. This asks the endpoint which models it serves
(`ConcurrentAPIEngine.check_model`: Anthropic's and OpenAI-compatible `GET /v1/models`) and answers in one line:
status 0 when the model is served, 2 when it is not, when the key is refused or when nothing answers. Only
engines behind an endpoint can be asked; in-process engines (llama.cpp, vLLM) are refused in one line.
"""

from __future__ import annotations

import sys

import hydra
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig

from rag.core.errors import ConfigError, ServiceError
from rag.core.secrets import add_known_secrets, install_log_masking, secrets_in_overrides
from rag.llm.hosted import ConcurrentAPIEngine

install_log_masking()
add_known_secrets(secrets_in_overrides(sys.argv[1:]))


def check(cfg: DictConfig, setting: str = "llm.model") -> str:
    """The one-line verdict for the engine `cfg.llm` configures; raises `ServiceError` / `ConfigError` (one line)
    when the model is not served or the endpoint cannot be asked."""
    target = str(cfg.llm.get("_target_", ""))
    cls = get_class(target) if target else None
    if not (isinstance(cls, type) and issubclass(cls, ConcurrentAPIEngine)):
        raise ConfigError(f"llm: {target or 'no _target_'} runs its model in this process: there is no endpoint to "
                          f"ask (check_model is for hosted and OpenAI-compatible engines)")
    try:
        engine = instantiate(cfg.llm)
    except InstantiationException as err:  # the constructor's own one-line refusal (llm.limit_param=...)
        raise (err.__cause__ if isinstance(err.__cause__, (ConfigError, ServiceError)) else err) from None
    try:
        return engine.check_model(setting)
    finally:
        engine.close()


@hydra.main(version_base="1.3", config_path="../../conf", config_name="check_model")
def main(cfg: DictConfig) -> None:
    try:
        line = check(cfg)
    except (ServiceError, ConfigError) as err:
        print(f"{type(err).__name__}: {err}".splitlines()[0], file=sys.stderr, flush=True)
        sys.exit(2)
    print(line, flush=True)


if __name__ == "__main__":
    from rag.core.entry import guard_command_line

    guard_command_line("check_model")
    main()
