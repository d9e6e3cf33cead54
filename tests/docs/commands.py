"""Every command the documentation shows, collected from the files a user reads.

Sources: README.md, docs/*.md and eval/README.md (fenced shell blocks, and inline code spans that start with
`python -m`, `make ` or `.venv-vllm/bin/python -m`), and the usage comments of conf/experiment/*.yaml (comment
lines that hold such a command). A fenced block's lines are commands after joining backslash continuations and
dropping trailing comments; a `VAR=value` line that only sets a variable is applied to the block's later lines
(docs/benchmarks.md sets `$COMMON` that way). A command is identified by its text with runs of whitespace made one
space, which is what `tests/docs/table.py` keys its rows by.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: documentation a user reads, relative to the repository root
DOC_FILES = ("README.md", "docs/*.md", "eval/README.md")
EXPERIMENT_FILES = "conf/experiment/*.yaml"
SHELL_FENCES = {"bash", "sh", "shell", "console"}
INLINE_START = ("python -m ", "make ", ".venv-vllm/bin/python -m ")

_FENCE = re.compile(r"^(\s*)```\s*([\w-]*)\s*$")
_INLINE = re.compile(r"`([^`]+)`")
_ASSIGN = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$")


@dataclass(frozen=True)
class DocCommand:
    """One command as documented: its normalised text and where it is written (file:line)."""

    text: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


def normalise(command: str) -> str:
    return " ".join(command.split())


def _strip_comment(line: str) -> str:
    """The line without a trailing `# ...` comment (a `#` inside quotes is kept)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Backslash continuations joined; each logical line keeps the number of its first physical line."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in lines:
        line = _strip_comment(raw).rstrip()
        if pending is not None:
            number, line = pending[0], pending[1] + " " + line.strip()
            pending = None
        if line.endswith("\\"):
            pending = (number, line[:-1].rstrip())
            continue
        if line.strip():
            out.append((number, line.strip()))
    if pending is not None and pending[1].strip():
        out.append(pending)
    return out


def _assignment(line: str) -> tuple[str, str] | None:
    """`NAME=value` (one shell word, quotes allowed) sets a variable for the block's later lines."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if len(words) == 1 and _ASSIGN.match(words[0]):
        name, value = words[0].split("=", 1)
        return name, value
    return None


def _block_commands(lines: list[tuple[int, str]], where: str) -> list[DocCommand]:
    variables: dict[str, str] = {}
    out = []
    for number, line in _logical_lines(lines):
        assigned = _assignment(line)
        if assigned:
            variables[assigned[0]] = " ".join(assigned[1].split())
            continue
        for name, value in variables.items():
            line = line.replace("${" + name + "}", value).replace("$" + name, value)
        out.append(DocCommand(normalise(line), f"{where}:{number}"))
    return out


def _inline_commands(paragraph: list[tuple[int, str]], where: str) -> list[DocCommand]:
    """Inline code spans of one paragraph that hold a command; a span may run over a line break."""
    if not paragraph:
        return []
    text = "\n".join(line for _, line in paragraph)
    out = []
    for match in _INLINE.finditer(text):
        span = normalise(match.group(1))
        if span.startswith(INLINE_START):
            number = paragraph[0][0] + text[: match.start()].count("\n")
            out.append(DocCommand(span, f"{where}:{number}"))
    return out


def markdown_commands(path: Path) -> list[DocCommand]:
    """Commands of one markdown file: fenced shell blocks, and inline spans that start like a command."""
    rel = path.relative_to(ROOT).as_posix()
    out: list[DocCommand] = []
    fence: str | None = None
    block: list[tuple[int, str]] = []
    paragraph: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = _FENCE.match(line)
        if match and fence is None:
            out.extend(_inline_commands(paragraph, rel))
            paragraph, fence, block = [], match.group(2).lower(), []
            continue
        if match and fence is not None:
            if fence in SHELL_FENCES:
                out.extend(_block_commands(block, rel))
            fence = None
            continue
        if fence is not None:
            block.append((number, line))
        elif line.strip():
            paragraph.append((number, line))
        else:
            out.extend(_inline_commands(paragraph, rel))
            paragraph = []
    out.extend(_inline_commands(paragraph, rel))
    return out


def experiment_commands(path: Path) -> list[DocCommand]:
    """Commands in a conf/experiment YAML's comments (`#   python -m ...`, continuations joined)."""
    rel = path.relative_to(ROOT).as_posix()
    comments = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append((number, stripped.lstrip("#")))
    out = []
    for number, line in _logical_lines(comments):
        if line.startswith(INLINE_START):
            out.append(DocCommand(normalise(line), f"{rel}:{number}"))
    return out


def documented_commands(root: Path = ROOT) -> list[DocCommand]:
    """Every documented command, in file order (a command written twice is listed twice)."""
    out: list[DocCommand] = []
    for pattern in DOC_FILES:
        for path in sorted(root.glob(pattern)):
            out.extend(markdown_commands(path))
    for path in sorted(root.glob(EXPERIMENT_FILES)):
        out.extend(experiment_commands(path))
    return out


if __name__ == "__main__":
    for command in documented_commands():
        print(command)
