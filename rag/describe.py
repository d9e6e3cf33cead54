"""`python -m rag.describe [GROUP [OPTION]]`: what the toolkit can do, read from the YAML files under conf/.

- no argument: every config group and its options, one aligned table, each option with the first sentence of its
  YAML's header comment (`*` marks the option `python -m rag.main` composes by default);
- `GROUP`: that group's options, each with the first sentence of its header;
- `GROUP OPTION`: the option's whole header, its `_target_` class with the first line of the class's docstring, the
  paper and code it follows (where the header or its `system:` block names them), and its settings with their
  default values and the comments the YAML gives them. An option whose `defaults:` list pulls other options in
  (`retriever=fusion`: a BM25 and a dense source) is shown as Hydra composes it, each part's comments included.

A group or option that does not exist is one line naming the closest ones; exit status 2.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from rag.core.components import component_class
from rag.core.entry import CONF_DIR
from rag.core.errors import ConfigError

#: the primary configs (conf/<name>.yaml) and the command that composes each, in the order a group is looked up
ENTRY_POINTS = {"config": "rag.main", "index": "rag.index", "eval": "eval.main", "meta": "eval.meta",
                "pool": "eval.pool", "live": "rag.live", "datagen": "rag.datagen", "serve": "rag.llm.serve",
                "check_model": "rag.llm.check_model"}
#: the description column of the overview is cut to this many characters (a group's own view is not cut)
SUMMARY_WIDTH = 100
_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_][\w.@/-]*|\"[^\"]+\"|'[^']+')\s*:(?:\s+(?P<rest>.*))?$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")
#: what makes a parenthesised part of a header a citation: a year, an arXiv id, "et al." or a code repository
_CITATION = re.compile(r"\b(19|20)\d\d\b|arXiv|et al\.|\bcode\b")


# -- reading conf/ ---------------------------------------------------------------------------------------------------
def groups() -> dict[str, list[str]]:
    """Every config group under conf/ (a folder of YAML files, `hydra/launcher` for nested ones) -> its options."""
    found: dict[str, list[str]] = {}
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        if path.parent != CONF_DIR:
            found.setdefault(path.parent.relative_to(CONF_DIR).as_posix(), []).append(path.stem)
    return found


def option_file(group: str, option: str) -> Path:
    return CONF_DIR / group / f"{option}.yaml"


def header(path: Path) -> list[str]:
    """The comment lines before the first key (a `# @package` line left out), without their `#`."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped.startswith("#"):
            if stripped:
                break
            continue
        if not stripped.lstrip("#").strip().startswith("@package"):
            lines.append(stripped[1:].removeprefix(" "))
    return lines


def package_of(path: Path) -> str | None:
    """The `# @package` a file declares, or None."""
    for line in path.read_text(encoding="utf-8").splitlines()[:3]:
        match = re.match(r"^#\s*@package\s+(\S+)", line)
        if match:
            return match.group(1)
    return None


def summary(lines: list[str]) -> str:
    """The first sentence of a header's first paragraph (which ends at a blank comment line or an indented
    example such as `#   python -m ...`); a full stop inside parentheses ends no sentence."""
    words = []
    for line in lines:
        if not line.strip() or line.startswith("  "):
            break
        words.append(line.strip())
    text = " ".join(words)
    for match in _SENTENCE_END.finditer(text):
        if text.count("(", 0, match.start()) <= text.count(")", 0, match.start()):
            text = text[:match.start()]
            break
    text = re.sub(r"(,? e\.g\.|:)$", "", text.rstrip())  # a sentence that leads into an example below it
    return text + "." if text and text[-1] not in ".!?)" else text


def _parenthesised(text: str) -> Iterator[tuple[int, str]]:
    """(start, inside) of every top-level parenthesised part of `text`."""
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            if depth == 0:
                start = i
            depth += 1
        elif char == ")" and depth:
            depth -= 1
            if depth == 0:
                yield start, text[start + 1:i]


def follows(lines: list[str], system: dict[str, Any] | None = None) -> list[str]:
    """The papers and code a header names: each citation in parentheses with the name right before it, and an
    experiment's `system: {paper, code}`."""
    text = " ".join(line.strip() for line in lines)
    out = []
    for start, inside in _parenthesised(text):
        if _CITATION.search(inside):  # named by its clause: what the header says right before the parentheses
            clause = re.split(r"[.:;)]\s", text[:start])[-1].strip(" ,")
            name = textwrap.shorten(clause, 60, placeholder=" ...") if clause else ""
            out.append(f"{name + ' ' if name else ''}({inside})")
    for key in ("paper", "code"):
        if system and system.get(key):
            out.append(f"{key}: {system[key]}")
    return out


@dataclass
class Comments:
    """What a YAML file says of each of its keys: the comment lines right above it and its inline comment."""

    above: dict[str, list[str]] = field(default_factory=dict)
    inline: dict[str, str] = field(default_factory=dict)

    def merge(self, other: Comments, prefix: str) -> None:
        dot = f"{prefix}." if prefix else ""
        for key, lines in other.above.items():
            self.above.setdefault(dot + key, lines)
        for key, text in other.inline.items():
            self.inline.setdefault(dot + key, text)


def _inline_comment(rest: str) -> str | None:
    """The comment after a value (`k: 20  # why`), outside quotes."""
    quote = None
    for i, char in enumerate(rest):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or rest[i - 1] in " \t"):
            return rest[i + 1:].strip()
    return None


def file_comments(path: Path) -> Comments:
    """The comments of every key of a YAML file, by dotted path (the header and the defaults list left out)."""
    out = Comments()
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    seen_key = False
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            if seen_key:
                pending.append(stripped[1:].strip())
            continue
        if not stripped or stripped.startswith("-"):
            pending = []
            continue
        match = _KEY.match(line)
        if not match:
            pending = []
            continue
        seen_key = True
        indent, key = len(match.group("indent")), match.group("key").strip("'\"")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        dotted = ".".join(k for _, k in stack)
        if pending:
            out.above[dotted] = pending
        inline = _inline_comment(match.group("rest") or "")
        if inline:
            out.inline[dotted] = inline
        pending = []
    return out


def _includes(path: Path, group: str) -> Iterator[tuple[str, str, str | None]]:
    """(group, option, package given in the defaults list or None) of every option a file's defaults list pulls
    in (`override` entries and `_self_` left out)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for entry in data.get("defaults") or []:
        if isinstance(entry, str):
            if entry != "_self_":
                yield group, entry, None
        elif isinstance(entry, dict):
            for key, value in entry.items():
                key = str(key).removeprefix("optional ")
                if key.startswith("override ") or not key.startswith("/") or value is None:
                    continue
                name, _, package = key[1:].partition("@")
                yield name, str(value), package or None


def composed_comments(group: str, option: str, package: str) -> Comments:
    """The comments of an option's keys and of every option its defaults list pulls in, by dotted path relative
    to `package` (where the option's node sits in the composed config); each pulled-in part is introduced by a
    comment naming it."""
    path = option_file(group, option)
    out = file_comments(path)
    for sub_group, sub_option, given in _includes(path, group):
        sub_path = option_file(sub_group, sub_option)
        if not sub_path.is_file():  # an option of a plugin (hydra/launcher's rag_slurm): nothing to read
            continue
        absolute = f"{package}.{given}" if given else (package_of(sub_path) or sub_group.replace("/", "."))
        if absolute != package and not absolute.startswith(f"{package}."):
            continue
        prefix = absolute[len(package) + 1:]
        sub_package = f"{package}.{given}" if given else absolute
        out.merge(composed_comments(sub_group, sub_option, sub_package), prefix)
        if prefix:
            said = textwrap.shorten(summary(header(sub_path)), SUMMARY_WIDTH, placeholder=" ...")
            out.above.setdefault(prefix, []).insert(0, f"{sub_group}={sub_option}" + (f": {said}" if said else ""))
    return out


# -- composing ------------------------------------------------------------------------------------------------------
@cache
def _config_groups(name: str) -> list[str]:
    """The groups conf/<name>.yaml's defaults list names, in its order."""
    data = yaml.safe_load((CONF_DIR / f"{name}.yaml").read_text(encoding="utf-8")) or {}
    out = []
    for entry in data.get("defaults") or []:
        for key in (entry.keys() if isinstance(entry, dict) else []):
            bare = str(key).removeprefix("optional ").removeprefix("override ").lstrip("/").split("@", 1)[0]
            if bare not in out:
                out.append(bare)
    return out


def primary_config(group: str) -> str:
    """The primary config whose defaults list names `group` (conf/config.yaml for the run's groups; a group in a
    folder named after a primary config, conf/datagen/categories, is that config's `categories`)."""
    for name in ENTRY_POINTS:
        if group in _config_groups(name) or (group.startswith(f"{name}/") and
                                             group.split("/", 1)[1] in _config_groups(name)):
            return name
    return "config"


def compose(config_name: str, overrides: list[str]) -> DictConfig:
    """The config Hydra composes from conf/<config_name>.yaml with `overrides`, Hydra's own node included."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=overrides, return_hydra_config=True)


@cache
def run_defaults() -> dict[str, Any]:
    """The option of each group `python -m rag.main` composes when nothing is overridden."""
    try:
        choices = compose("config", []).hydra.runtime.choices
    except Exception:  # noqa: BLE001 - a broken machine-local config: no marks, the rest still reads
        return {}
    return dict(OmegaConf.to_container(choices))  # type: ignore[arg-type]


def _default_options(group: str) -> set[str]:
    if group in ("judge", "metrics"):  # list groups: their defaults are conf/config.yaml's lists
        data = yaml.safe_load((CONF_DIR / "config.yaml").read_text(encoding="utf-8")) or {}
        for entry in data.get("defaults") or []:
            if isinstance(entry, dict) and group in entry:
                value = entry[group]
                return {str(v) for v in (value if isinstance(value, list) else [value]) if v}
        return set()
    choice = run_defaults().get(group)
    return {str(choice)} if choice else set()


# -- showing a config node ------------------------------------------------------------------------------------------
def _scalar(value: Any) -> str:
    """A scalar as YAML writes it; a string quoted only where YAML would read it as something else."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if not isinstance(value, str) or value.startswith("${"):
        return str(value)
    try:
        plain = value != "" and yaml.safe_load(value) == value and ": " not in value and " #" not in value
    except yaml.YAMLError:
        plain = False
    return value if plain else json.dumps(value)


def _flow(node: Any) -> str:
    """A node in YAML's flow style, interpolations as written."""
    if isinstance(node, DictConfig):
        if node._is_interpolation():
            return str(node._value())
        return "{" + ", ".join(f"{k}: {_flow(node._get_node(k))}" for k in node) + "}"
    if isinstance(node, ListConfig):
        if node._is_interpolation():
            return str(node._value())
        return "[" + ", ".join(_flow(node._get_node(i)) for i in range(len(node))) + "]"
    return _scalar(node._value())


def render(node: DictConfig, comments: Comments, path: str = "", indent: int = 2) -> list[str]:
    """A composed node as YAML lines, interpolations as written, each key with the comments its file gives it."""
    lines = []
    pad = " " * indent
    for key in node:
        child = node._get_node(key)
        dotted = f"{path}.{key}" if path else str(key)
        lines.extend(f"{pad}# {line}" if line else f"{pad}#" for line in comments.above.get(dotted, []))
        inline = f"  # {comments.inline[dotted]}" if dotted in comments.inline else ""
        if isinstance(child, DictConfig) and not child._is_interpolation() and len(child) \
                and not child._is_missing():
            lines.append(f"{pad}{key}:{inline}")
            lines.extend(render(child, comments, dotted, indent + 2))
        else:
            lines.append(f"{pad}{key}: {_flow(child)}{inline}")
    return lines


def _as_written(path: Path) -> list[str]:
    """A file's settings as written: everything after its header, comments included."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("#")),
                 len(lines))
    return ["  " + line if line else "" for line in lines[start:]]


def _class_line(target: str) -> str:
    cls = component_class(target)
    if cls is None:
        return f"class: {target} (does not import in this environment)"
    # the class's own docstring, else its module's (an inherited one, such as ABC's, says nothing of it)
    own = cls.__dict__.get("__doc__") if isinstance(cls, type) else getattr(cls, "__doc__", None)
    doc = inspect.cleandoc(own or getattr(inspect.getmodule(cls), "__doc__", None) or "").splitlines()
    return f"class: {target}" + (f": {doc[0]}" if doc else "")


# -- the three views ------------------------------------------------------------------------------------------------
def closest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    return f"; closest: {', '.join(close)}" if close else ""


def _group_order(found: dict[str, list[str]]) -> list[str]:
    """The run's groups in conf/config.yaml's order, then hydra/launcher and Hydra's others, then the groups of
    other commands."""
    run = [g for g in _config_groups("config") if g in found and not g.startswith("hydra/")]
    hydra = sorted((g for g in found if g.startswith("hydra/")), key=lambda g: (g != "hydra/launcher", g))
    return run + hydra + sorted(g for g in found if g not in run and g not in hydra)


def overview() -> list[str]:
    found = groups()
    rows = []
    for group in _group_order(found):
        marked = _default_options(group)
        for option in found[group]:
            said = summary(header(option_file(group, option)))
            rows.append((group, option + (" *" if option in marked else ""),
                         textwrap.shorten(said, SUMMARY_WIDTH, placeholder=" ...") if said else ""))
    width = [max(len(row[i]) for row in rows + [("GROUP", "OPTION", "")]) for i in range(2)]
    lines = [f"{'GROUP':<{width[0]}}  {'OPTION':<{width[1]}}  DESCRIPTION"]
    lines += [f"{g:<{width[0]}}  {o:<{width[1]}}  {d}".rstrip() for g, o, d in rows]
    others = {}
    for group in found:
        name = primary_config(group)
        if name != "config" and group not in run_defaults():
            others.setdefault(f"python -m {ENTRY_POINTS[name]}", []).append(group)
    lines.append("")
    lines.append("* what `python -m rag.main` composes when the group is not overridden (GROUP=OPTION chooses "
                 "another).")
    if others:
        lines.append("Groups of other commands: " + "; ".join(f"{', '.join(g)} ({cmd})" for cmd, g in others.items())
                     + ".")
    lines.append("More: python -m rag.describe GROUP (its options), python -m rag.describe GROUP OPTION (settings).")
    return lines


def describe_group(group: str) -> list[str]:
    found = groups()
    if group not in found:
        owners = [g for g, options in found.items() if group in options]
        hint = f"; {group} is an option of {', '.join(owners)}: python -m rag.describe {owners[0]} {group}" \
            if owners else closest(group, list(found))
        raise ConfigError(f"no config group {group!r} under conf/{hint} (python -m rag.describe lists them)")
    name = primary_config(group)
    marked = _default_options(group)
    width = max(len(o) for o in found[group]) + 2
    lines = [f"{group}: {len(found[group])} options (conf/{group}/), chosen as `python -m {ENTRY_POINTS[name]} "
             f"{group}=OPTION`" + (f"; default: {', '.join(sorted(marked))} (*)" if marked else "")]
    for option in found[group]:
        said = summary(header(option_file(group, option)))
        lines.append(f"  {option + (' *' if option in marked else ''):<{width}}  {said}".rstrip())
    lines.append(f"More: python -m rag.describe {group} OPTION (its settings, class and paper).")
    return lines


def _override(group: str, option: str) -> str:
    """How a command line chooses the option (conf/datagen/categories/ragtifier.yaml: `categories=ragtifier`)."""
    name = primary_config(group)
    return f"{group.removeprefix(f'{name}/')}={option}"


def describe_option(group: str, option: str) -> list[str]:
    found = groups()
    if group not in found:
        describe_group(group)  # raises with the closest names
    if option not in found[group]:
        raise ConfigError(f"no option {option!r} in group {group}{closest(option, found[group])} "
                          f"(python -m rag.describe {group} lists them)")
    path = option_file(group, option)
    lines_of_header = header(path)
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    name = primary_config(group)
    package = package_of(path) or group.removeprefix(f"{name}/").replace("/", ".")
    command = f"python -m {ENTRY_POINTS[name]} {_override(group, option)}"
    node = None
    note = ""
    if raw.get("defaults") and package != "_global_":
        try:
            node = OmegaConf.select(compose(name, [_override(group, option)]), package)
        except Exception as err:  # noqa: BLE001 - a group another command composes in its own way: as written
            note = f" (as written; composing it failed: {str(err).splitlines()[0]})"
    lines = [f"{group}={option} (conf/{group}/{option}.yaml)"]
    lines += [f"  {line}".rstrip() for line in lines_of_header]
    target = (node.get("_target_") if isinstance(node, DictConfig) else None) or raw.get("_target_")
    if target:
        lines.append(_class_line(str(target)))
    cited = follows(lines_of_header, raw.get("system") if isinstance(raw.get("system"), dict) else None)
    lines += [f"follows: {item}" for item in cited]
    if isinstance(node, DictConfig):
        lines.append(f"settings ({package}.*, as `{command}` composes them):")
        lines += render(node, composed_comments(group, option, package))
    else:
        where = "at the top level of the config" if package == "_global_" else f"{package}.*"
        lines.append(f"settings ({where}, used as `{command}`){note}:")
        lines += _as_written(path)
    return lines


def describe(args: list[str]) -> list[str]:
    if not args:
        return overview()
    if len(args) == 1:
        return describe_group(args[0].rstrip("/"))
    return describe_option(args[0].rstrip("/"), args[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag.describe", description="What each config group and option of the toolkit does: "
        "no argument lists every group and option; GROUP its options; GROUP OPTION its settings, class and paper.")
    parser.add_argument("group", nargs="?", help="a config group under conf/ (retriever, llm, hydra/launcher, ...)")
    parser.add_argument("option", nargs="?", help="one of the group's options (bm25, falcon3_10b, ...)")
    args = parser.parse_args(argv)
    try:
        lines = describe([a for a in (args.group, args.option) if a])
    except ConfigError as err:
        print(f"ConfigError: {err}".splitlines()[0], file=sys.stderr, flush=True)
        return 2
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
