"""The architecture contract, checked on the source: the import graph of sentune/ (module-level and
function-level imports) has no cycle and keeps its layers' direction; the trainer names no method and no
method-specific column; every method and task is reachable from its registry alone."""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sentune"

# A layer may import only layers listed before it (and itself); cli and __main__ may import anything.
LAYERS = ["errors", "data", "core", "postprocess", "modules", "tasks", "methods", "train", "analysis", "search", "adapt", "export", "serve"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def import_graph() -> dict[str, set[str]]:
    """Every sentune module -> the sentune modules it imports anywhere in its body (function-level too)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.startswith("sentune")}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sentune"):
                for alias in node.names:  # `from sentune.methods import sg` imports the module sentune.methods.sg
                    target = f"{node.module}.{alias.name}"
                    edges.add(target if is_module(target) else node.module)
        edges.discard(name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_find_cycle_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 40 and graph["sentune.training.trainer"]  # the graph really covers the package
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "sentune"


def test_layers_import_only_downwards():
    wrong = []
    for module, edges in import_graph().items():
        layer = layer_of(module)
        if layer not in LAYERS:
            continue  # cli, __main__, the package root
        allowed = set(LAYERS[: LAYERS.index(layer) + 1])
        wrong += [f"{module} -> {target}" for target in edges if layer_of(target) not in allowed and layer_of(target) != "sentune"]
    assert not wrong, "imports against the layer order " + " < ".join(LAYERS) + ":\n" + "\n".join(sorted(wrong))


def _strings_and_names(path: Path) -> set[str]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    out = set()
    for token in tokens:
        if token.type == tokenize.STRING:
            out.add(ast.literal_eval(token.string) if not token.string.startswith(("f", "F", "rb", "b")) else token.string)
        elif token.type == tokenize.NAME:
            out.add(token.string)
    return {s for s in out if isinstance(s, str)}


def test_trainer_names_no_method_and_no_method_column():
    from sentune.methods.registry import REGISTRY, get_method

    columns = {c for name in REGISTRY for c in get_method(name).columns}
    modules = {target.split(":")[0] for target in REGISTRY.values()}
    words = _strings_and_names(PACKAGE / "training" / "trainer.py")
    assert not (words & set(REGISTRY)), f"the trainer names methods: {words & set(REGISTRY)}"
    assert not (words & columns), f"the trainer names method columns: {words & columns}"
    assert not (words & modules), f"the trainer names method modules: {words & modules}"
    assert not any(t.startswith("sentune.methods.") and t.split(".")[2] in modules for t in import_graph()["sentune.training.trainer"])


def _code_strings(path: Path) -> list[str]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_no_code_outside_the_data_layer_builds_a_data_path():
    """Every file a method or evaluator reads is a named record of the catalogs (tasks.yaml, sets.yaml)."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if layer_of(module_name(path)) == "data":
            continue
        offenders += [f"{path.relative_to(PACKAGE)}: {s!r}" for s in _code_strings(path) if "senteval/" in s or "corpora/" in s]
    assert not offenders, offenders


def test_no_module_names_the_default_models_size():
    """sentune works on any encoder: no code or docstring in sentune/ states the default model's width (384)
    or layer count (6 layers) as if every model had them; sizes are read from the model's config."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.search(r"\b384\b|\b6[ -]layers?\b|\bsix layers\b", line, flags=re.IGNORECASE):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
