"""The package's import graph, read from the source with ``ast``: no cycle between modules,
and no import that goes up the layer order docs/architecture.md states (its "Layers" block).

Imports under ``if TYPE_CHECKING:`` count too: a cycle that only the type checker sees is
still two modules that cannot be understood apart.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
README = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
PACKAGE = "gpudefrag"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (``from a.b import c`` counts ``a.b.c`` when
    that is a module, else ``a.b``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == PACKAGE}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in known else base)
    return {m for m in out if m in known and m != here}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}
    known = set(files)
    return {name: imported_modules(path, known) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first repeated at the end), or ``None``."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def readme_layers() -> dict[str, int]:
    """Top-level part of the package -> its layer (lower layers first) from the README's
    ``Layers`` block: lines ``<n>. name, name  (comment)``."""
    text = README.read_text()
    block = re.search(r"## Layers\n.*?```\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no '## Layers' section with a fenced block"
    layers: dict[str, int] = {}
    for line in block.group(1).splitlines():
        m = re.match(r"\s*(\d+)\.\s+([\w, ]+?)\s*(?:\(.*\))?$", line)
        if m:
            for name in m.group(2).split(","):
                layers[name.strip()] = int(m.group(1))
    return layers


def top_part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_import_cycle() -> None:
    assert find_cycle(import_graph()) is None, (
        f"import cycle: {' -> '.join(find_cycle(import_graph()) or [])}"
    )


def test_imports_go_down_the_layers() -> None:
    layers = readme_layers()
    graph = import_graph()
    unplaced = sorted({top_part(m) for m in graph} - layers.keys())
    assert not unplaced, f"docs/architecture.md's Layers block does not place: {', '.join(unplaced)}"
    upward = [
        f"{m} (layer {layers[top_part(m)]}) imports {n} (layer {layers[top_part(n)]})"
        for m, deps in sorted(graph.items())
        for n in sorted(deps)
        if layers[top_part(n)] > layers[top_part(m)]
    ]
    assert not upward, "imports going up the layers:\n" + "\n".join(upward)


def test_the_checks_see_cycles_and_upward_imports() -> None:
    # The checker itself: a made-up graph with a cycle is caught, one without is not.
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    graph = import_graph()
    assert "gpudefrag.model.cluster" in graph["gpudefrag.sim.core"]  # it reads real imports
    assert graph["gpudefrag.model.cluster"] <= {m for m in graph if m.startswith("gpudefrag.model.")}


MAX_MODULE_LINES = 400
MAX_SIM_FUNCTION_LINES = 60


def test_sim_modules_and_functions_stay_small() -> None:
    # The simulator is components with one job each: no module over 400 lines, no function
    # (or method) over 60 lines in sim/.
    too_long = []
    for path in sorted((SRC / PACKAGE / "sim").glob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_SIM_FUNCTION_LINES:
                    too_long.append(f"{path.name}:{node.lineno} {node.name}: {size} lines")
    assert not too_long, "\n".join(too_long)


def test_the_kubernetes_driver_needs_no_simulator_or_experiment() -> None:
    """``k8s/`` builds its decisions from profiles, not from a suite's configuration: it imports
    nothing from ``experiments/`` or ``sim/`` (even under ``if TYPE_CHECKING``)."""
    graph = import_graph()
    bad = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if m.startswith(f"{PACKAGE}.k8s")
        for d in deps
        if d.startswith((f"{PACKAGE}.experiments", f"{PACKAGE}.sim"))
    )
    assert not bad, "; ".join(bad)


def test_the_product_holds_no_fake_cluster() -> None:
    """The fake API server, kubelet, job controller and auditor live in ``fakecluster/`` (their
    own distribution), so the built wheel holds none of them: no module of the package is one,
    and none imports them (``k8s-demo`` and ``k8s-bench`` load them by name, when installed)."""
    files = list((SRC / PACKAGE).rglob("*.py"))
    assert not [p for p in files if "fake" in p.relative_to(SRC / PACKAGE).as_posix()]
    assert not [
        p
        for p in files
        if "import gpudefrag_fakecluster" in p.read_text() or "from gpudefrag_fakecluster" in p.read_text()
    ]


def test_no_module_of_the_package_is_over_400_lines() -> None:
    """Small modules with one job each: none of the package over 400 lines."""
    too_long = [
        f"{p.relative_to(SRC).as_posix()}: {n} lines"
        for p in sorted((SRC / PACKAGE).rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not too_long, "\n".join(too_long)
