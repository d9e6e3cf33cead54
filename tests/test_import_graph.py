"""The project's import graph, read from the sources with `ast` (nothing is imported).

Every `import x` and `from x import y` in every `.py` file under `rag/`, `eval/` and `jobs/` counts, at module
level, inside functions (lazy) and under `if TYPE_CHECKING:`; relative imports are resolved against their
package, and `from pkg import name` is an import of the module `pkg.name` when that file exists. Checked:

1. `rag` never imports `eval` or `jobs`, nor loads them by a literal name (`import_module("eval.x")`);
2. no import cycle among the project's modules;
3. `rag.core` is the ground floor: it imports nothing of `rag` outside itself;
4. no arrow climbs between rag's layers (`LAYERS`), and sibling packages of one layer are independent, except
   for the interfaces a package consumes (`ALLOWED`, each with its reason).

Failures name the file, the line and the import statement.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rag", "eval", "jobs")

#: rag's layers, lowest first. A module may import its own package and anything in a lower layer; a package in
#: the same layer or above is a sideways or climbing arrow (unless `ALLOWED` names it). Every package and
#: top-level module of `rag` must be listed (the name after `rag.`; `rag` is the package's own `__init__`).
LAYERS: list[tuple[str, frozenset[str]]] = [
    # stdlib-level helpers: errors, hashing, files, retries, secrets, reply parsing
    ("ground floor", frozenset({"rag", "core"})),
    # the records flowing through a run, and the prompt templates
    ("records", frozenset({"records", "prompts"})),
    # a run folder's files, read and written as records
    ("run folder", frozenset({"folders"})),
    # what stages are built from: datasets and corpora, LLM engines, embedders, metric functions and names
    ("services", frozenset({"data", "llm", "embed", "metrics"})),
    # the pipeline's stages, independent of each other
    ("stages", frozenset({"attack", "query", "retrieve", "rerank", "order", "compress", "generate", "attribute",
                          "judge"})),
    # around one run: stage caches, loaded-model reuse, run-folder fingerprints, config checks, sweep cells
    ("run support", frozenset({"stage_cache", "reuse", "fingerprint", "preflight", "sweep"})),
    ("pipeline", frozenset({"pipeline"})),
    # tools built on runs: the live day, data generation, exports, run loggers, reports, what conf/ offers
    ("tools", frozenset({"live", "datagen", "export", "loggers", "report", "index", "describe"})),
    ("entry point", frozenset({"main", "doctor"})),
]

#: (importing rag package, imported module): sideways imports of an interface the package consumes
ALLOWED: dict[tuple[str, str], str] = {
    # a reranker may reuse what the retriever's index holds (`Reranker.prepare(cache_dir, retriever)`: the
    # dense reranker reads the index's stored vectors): it consumes the Retriever interface, no implementation
    ("rerank", "rag.retrieve.base"): "Reranker.prepare receives the run's Retriever",
    # TrustRAG's filter as a reranker applies the very decisions the TrustRAG strategy applies (one implementation)
    ("rerank", "rag.generate.defense"): "rerank=trustrag_filter runs TrustRAG's defence on the retrieved list",
}

#: callables that load a module or object by its dotted name
DYNAMIC_LOADERS = {"import_module", "__import__", "get_class", "get_method", "get_object", "locate",
                   "_locate"}


@dataclass(frozen=True)
class Import:
    importer: str
    #: the project module imported (`from pkg import name`: `pkg.name` where that file exists, else `pkg`)
    target: str
    path: Path
    line: int
    statement: str
    lazy: bool = False
    type_only: bool = False
    resolved: bool = True

    def where(self) -> str:
        flags = (("inside a function", self.lazy), ("type-checking only", self.type_only))
        notes = [note for note, on in flags if on]
        extra = f" [{', '.join(notes)}]" if notes else ""
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.statement}{extra}"


@cache
def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package) for every project source file."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _in_project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _literal_prefix(node: ast.expr | None) -> str | None:
    """The text a string argument starts with, when it is written out (a constant or an f-string's head)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, path: Path, is_package: bool, lines: list[str]):
        self.module, self.path, self.is_package, self.lines = module, path, is_package, lines
        self.imports: list[Import] = []
        #: (line, statement, name) of modules loaded by a literal dotted name
        self.dynamic: list[tuple[int, str, str]] = []
        self._functions = 0
        self._type_checking = 0

    def _statement(self, node: ast.AST) -> str:
        first = self.lines[node.lineno - 1].strip()
        return first if node.lineno == getattr(node, "end_lineno", node.lineno) else first + " ..."

    def _add(self, node: ast.AST, name: str) -> None:
        if not _in_project(name):
            return
        self.imports.append(Import(self.module, name, self.path, node.lineno, self._statement(node),
                                   lazy=self._functions > 0, type_only=self._type_checking > 0,
                                   resolved=name in modules()))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._type_checking += 1
            for child in node.body:
                self.visit(child)
            self._type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            package = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            base = package[: len(package) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        for alias in node.names:
            submodule = f"{prefix}.{alias.name}"
            self._add(node, submodule if submodule in modules() else prefix)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in DYNAMIC_LOADERS:
            named = [k.value for k in node.keywords if k.arg == "name"]
            arg = node.args[0] if node.args else named[0] if named else None
            text = _literal_prefix(arg)
            if text is not None:
                self.dynamic.append((node.lineno, self._statement(node), text))
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:  # {"_target_": "eval.judges.X"}: instantiate loads it
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == "_target_":
                text = _literal_prefix(value)
                if text is not None:
                    self.dynamic.append((node.lineno, self._statement(node), text))
        self.generic_visit(node)


@cache
def graph() -> tuple[tuple[Import, ...], tuple[tuple[str, Path, int, str, str], ...]]:
    """Every import of a project module, and every module or object loaded by a literal name."""
    imports: list[Import] = []
    dynamic: list[tuple[str, Path, int, str, str]] = []
    for module, (path, is_package) in modules().items():
        source = path.read_text(encoding="utf-8")
        collector = _Collector(module, path, is_package, source.splitlines())
        collector.visit(ast.parse(source, filename=str(path)))
        imports += collector.imports
        dynamic += [(module, path, line, statement, name) for line, statement, name in collector.dynamic]
    return tuple(imports), tuple(dynamic)


def unit(module: str) -> str:
    """The rag package (or top-level module) a rag module belongs to: `rag.retrieve.dense` -> `retrieve`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of() -> dict[str, int]:
    return {name: i for i, (_, names) in enumerate(LAYERS) for name in names}


def _in_core(module: str) -> bool:
    return module == "rag.core" or module.startswith("rag.core.")


def _check(title: str, lines: list[str]) -> None:
    if lines:
        pytest.fail(f"{title} ({len(lines)}):\n  " + "\n  ".join(lines), pytrace=False)


# -- the tests ----------------------------------------------------------------------------------------------
def test_the_graph_is_read_from_every_package():
    imports, _ = graph()
    importers = {i.importer.split(".")[0] for i in imports}
    assert importers == set(PACKAGES), f"no project imports read from {set(PACKAGES) - importers}"
    # the reader sees lazy, type-checking-only and relative imports too
    assert any(i.lazy for i in imports) and any(i.type_only for i in imports)


def test_every_project_import_names_a_module_that_exists():
    imports, _ = graph()
    bad = [f"{i.where()}  ({i.target} is no file under {'/'.join(PACKAGES)})"
           for i in imports if not i.resolved]
    _check("imports of project modules that do not exist", bad)


def test_rag_never_imports_eval_or_jobs():
    imports, dynamic = graph()
    bad = [f"{i.where()}  ({i.importer} -> {i.target})" for i in imports
           if i.importer.split(".")[0] == "rag" and i.target.split(".")[0] in ("eval", "jobs")]
    bad += [f"{path.relative_to(ROOT)}:{line}: {statement}  (loads {name!r} by name)"
            for module, path, line, statement, name in dynamic
            if module.split(".")[0] == "rag" and name.split(".")[0] in ("eval", "jobs")]
    _check("rag must not depend on eval or jobs", bad)


def _cycles(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """One cycle (modules, first == last) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(modules()):
        if v not in index:
            connect(v)
    cycles = []
    for component in components:  # the shortest way from the component's first module back to itself
        start, members = component[0], set(component)
        previous: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in previous:
            nxt = []
            for v in frontier:
                for w in sorted(edges.get(v, {})):
                    if w in members and w not in previous:
                        previous[w] = v
                        nxt.append(w)
            frontier = nxt
        chain = [start]
        while True:
            chain.append(previous[chain[-1]])
            if chain[-1] == start:
                break
        cycles.append(chain[::-1])
    return cycles


def test_no_import_cycles():
    imports, _ = graph()
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for i in imports:
        if i.target != i.importer:
            edges[i.importer].setdefault(i.target, i)
    problems = []
    for chain in _cycles(edges):
        steps = "\n    ".join(edges[a][b].where() for a, b in zip(chain, chain[1:]))
        problems.append(f"{' -> '.join(chain)}\n    {steps}")
    _check("import cycles", problems)


def test_rag_core_is_the_ground_floor():
    imports, _ = graph()
    bad = [f"{i.where()}  ({i.importer} -> {i.target})" for i in imports
           if _in_core(i.importer) and _in_project(i.target) and not _in_core(i.target)]
    _check("rag.core imports nothing of the project outside rag.core", bad)


def test_every_rag_package_has_one_layer():
    placed = [name for _, names in LAYERS for name in names]
    units = {unit(m) for m in modules() if m.split(".")[0] == "rag"}
    problems = [f"{name}: listed in more than one layer"
                for name in sorted(set(placed)) if placed.count(name) > 1]
    problems += [f"{name}: in no layer (add it to LAYERS)" for name in sorted(units - set(placed))]
    problems += [f"{name}: in LAYERS but no such package or module" for name in sorted(set(placed) - units)]
    _check("rag packages and LAYERS disagree", problems)


def _layer_problems() -> tuple[list[str], set[tuple[str, str]]]:
    imports, _ = graph()
    layers = layer_of()
    problems, used = [], set()
    for i in imports:
        if i.importer.split(".")[0] != "rag" or i.target.split(".")[0] != "rag":
            continue
        src, dst = unit(i.importer), unit(i.target)
        if src == dst or src not in layers or dst not in layers or layers[dst] < layers[src]:
            continue
        if (src, i.target) in ALLOWED:
            used.add((src, i.target))
            continue
        kind = "climbs" if layers[dst] > layers[src] else "goes sideways"
        problems.append(f"{i.where()}  ({i.importer} -> {i.target}: {kind} from {LAYERS[layers[src]][0]} "
                        f"to {LAYERS[layers[dst]][0]})")
    return problems, used


def test_no_arrow_climbs_or_goes_sideways_between_rag_layers():
    problems, _ = _layer_problems()
    _check("imports against the layers (tests/test_import_graph.py LAYERS; an interface a package consumes "
           "goes into ALLOWED with its reason)", problems)


def test_every_allowed_sideways_import_is_still_made():
    _, used = _layer_problems()
    _check("ALLOWED lists imports no module makes any more (remove them)",
           [f"{src} -> {module}" for src, module in sorted(set(ALLOWED) - used)])
