"""Config groups composed as lists (`judge=[liverag,nuggets]`, `metrics=[f1,em,recall]`): each YAML adds one node
`<group>.<name>` with `_target_` beside the group's shared settings; these two functions read and build them, so
every such group reports a bad entry in the same one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from omegaconf import OmegaConf

from rag.core.errors import ConfigError

T = TypeVar("T")


def component_class(target: str) -> Any:
    """The class a `_target_` names, or None when it cannot be imported (instantiate then says why)."""
    try:
        from hydra.utils import get_class

        return get_class(target)
    except Exception:  # noqa: BLE001 - an unknown target is reported by instantiate with its own message
        return None


def component_nodes(group: str, cfg: Any, settings: Sequence[str], what: str) -> dict[str, dict[str, Any]]:
    """The component entries of a list group's node (mappings with `_target_`), by config key, resolved;
    `settings` are the group's shared keys, `what` names one entry in errors ("a judge")."""
    plain = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg
    if plain is None:
        return {}
    if not isinstance(plain, Mapping):
        raise ConfigError(f"{group}: expected a mapping, got {type(plain).__name__}")
    out = {}
    for key, node in plain.items():
        if key in settings:
            continue
        if not isinstance(node, Mapping) or "_target_" not in node:
            raise ConfigError(f"{group}.{key}: not {what} (a config of one needs `_target_`); settings are "
                              f"{', '.join(settings)}")
        out[str(key)] = dict(node)
    return out


def build_component(group: str, key: str, node: Mapping[str, Any], base: type[T]) -> T:
    """One component from its node: `_target_` names a subclass of `base`; `name` defaults to the config key."""
    from hydra.utils import get_class

    node = dict(node)
    target = node.pop("_target_")
    node.setdefault("name", key)
    try:
        cls = get_class(target)
    except Exception as err:  # noqa: BLE001 - Hydra raises several types for a bad path
        raise ConfigError(f"{group}.{key}._target_={target}: cannot import ({err})") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConfigError(f"{group}.{key}._target_={target} is not a {base.__module__}.{base.__qualname__}")
    try:
        return cls(**node)
    except TypeError as err:
        raise ConfigError(f"{group}.{key}: {err}") from None
