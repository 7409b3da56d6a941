"""The house rules of docs/architecture.md that a machine can check: no module reads another
module's private names, no module grows past 500 lines, and the stages import in one direction:
every import counts, inside functions too (no circle; an import from a later stage only where
:data:`UPWARD` names it, with its reason). An import stands at its module's top: inside a function
only where :data:`LAZY_DEPENDENCIES` (optional or slow-to-load libraries) or :data:`LAZY_IMPORTS`
(file, module) list it with its reason, and a module is imported by name only where
:data:`IMPORT_BY_NAME` says why."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.glob("gpuanon/**/*.py"), *ROOT.glob("kernels/*.py")])


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(path: pathlib.Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    pkg = _module_name(path).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    base = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_names():
    bad = []
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        own = _module_name(path)
        aliases = {}  # local name -> project module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = _resolve(path, node)
                if not src.split(".")[0] in ("gpuanon", "kernels"):
                    continue
                for a in node.names:
                    if _private(a.name) and src != own:
                        bad.append(f"{path.relative_to(ROOT)}: from {src} import {a.name}")
                    aliases[a.asname or a.name] = f"{src}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in ("gpuanon", "kernels"):
                        aliases[a.asname or a.name.split(".")[0]] = a.asname and a.name or a.name.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
                target = aliases.get(node.value.id)
                if target is not None and (ROOT / (target.replace(".", "/") + ".py")).exists() or \
                        target is not None and (ROOT / target.replace(".", "/") / "__init__.py").exists():
                    bad.append(f"{path.relative_to(ROOT)}: {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


#: modules above 450 lines (the cap is 500), each with why it is one module; docs/architecture.md lists them
LONG_MODULES = {
    "gpuanon/backend.py": "the one importer of CuPy / cuDF / cuML and the one counted copy and sync: "
                          "splitting it would spread what every device trip must pass through",
    "gpuanon/hierarchy/tree.py": "the Hierarchy type: its levels, construction from labels and its queries on one "
                                 "lowest-common-node kernel",
    "kernels/mondrian.py": "the fused partition kernel and the cut rule it shares with the cluster run",
    "gpuanon/perturb/distpab.py": "the estimator DISTPAB with its frame checks, beside the three steps it re-exports",
    "gpuanon/perturb/frontier.py": "one experiment: the noise sweep of DISTPAB and its two baselines, models and "
                                   "attacks per point",
    "gpuanon/release/verify.py": "the independent verifier (encoded and text), which must import nothing of the "
                                 "anonymizer",
    "gpuanon/risk/classes.py": "the published classes on both backends: cells packed into words, the checked hash",
    "gpuanon/table/dictionaries.py": "the four reductions of the table's dictionaries (chunk, combine, finalize, "
                                     "encode) that one process and the cluster both run",
    "gpuanon/distributed/worker.py": "what a worker holds: a Shard and a Home, with the methods the tasks call",
    "kernels/segmented.py": "the segmented reductions and their one CUDA kernel with its launch and contract",
    "gpuanon/risk/population.py": "a port of ARX's three population models and Dankar's rule, kept line for line",
}


def test_no_module_above_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in SOURCES if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_modules_above_450_lines_have_a_reason():
    """A module past 450 lines is listed in LONG_MODULES with why it is one module (and a listed one that is
    no longer that long leaves the list)."""
    long = {str(p.relative_to(ROOT)) for p in SOURCES if len(p.read_text().splitlines()) > 450}
    assert not long - set(LONG_MODULES), f"over 450 lines without a reason: {sorted(long - set(LONG_MODULES))}"
    assert not set(LONG_MODULES) - long, f"listed but 450 lines or fewer now: {sorted(set(LONG_MODULES) - long)}"


def _imports(path: pathlib.Path) -> set:
    """Project modules a module imports, at load time or inside a function (every import statement)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            src = _resolve(path, node)
            if src.split(".")[0] not in ("gpuanon", "kernels"):
                continue
            for a in node.names:  # "from . import verify" names a module
                cand = f"{src}.{a.name}"
                out.add(cand if _exists(cand) else src)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] in ("gpuanon", "kernels")}
    return {m for m in out if _exists(m)}


def _exists(mod: str) -> bool:
    p = ROOT / mod.replace(".", "/")
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _graph() -> dict:
    graph = {_module_name(p): _imports(p) for p in SOURCES}
    # a package's __init__ re-exporting its own modules is not a cycle of the stages
    return {mod: {m for m in deps if not mod.startswith(m + ".") and m != mod} for mod, deps in graph.items()}


def test_no_import_cycles_between_modules():
    graph = _graph()
    state, cycles = {}, []

    def visit(m, stack):
        state[m] = 1
        for n in graph.get(m, ()):
            if state.get(n) == 1:
                cycles.append(" -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n, stack + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "\n".join(cycles)


#: the stages in import order (docs/architecture.md, "Packages"): a module imports its own stage and
#: earlier ones; the foundations are gpuanon's loose modules (backend, errors, estimator) and its rooms
#: by concept: the table model, writing the output, a release's classes, the models, opening a cluster
#: (``report`` imports the foundations alone, so it stands with the other readers of tables at 2; a
#: package of gpuanon missing here fails the test rather than passing as a foundation)
STAGES = {"kernels": 0, "foundations": 1, "gpuanon.table": 1, "gpuanon.output": 1, "gpuanon.release": 1,
          "gpuanon.models": 1, "gpuanon.cluster": 1, "gpuanon.datasets": 1, "gpuanon.hierarchy": 2, "gpuanon.metrics": 2,
          "gpuanon.attack": 2, "gpuanon.risk": 2, "gpuanon.report": 2,
          "gpuanon.anonymize": 3, "gpuanon.perturb": 3, "gpuanon.distributed": 4, "gpuanon.evaluate": 4,
          "gpuanon.federated": 5, "gpuanon.cli": 6, "gpuanon.__main__": 6, "gpuanon": 6}

#: every import of a later stage, and why it is there (docs/architecture.md says the same); none since
#: opening a cluster and its Runner are foundations shared by the anonymizer's and DISTPAB's cluster runs
UPWARD: dict = {}


def _stage(mod: str) -> str:
    parts = mod.split(".")
    if parts[0] == "kernels":
        return "kernels"
    if mod == "gpuanon":
        return mod
    if f"gpuanon.{parts[1]}" in STAGES:
        return f"gpuanon.{parts[1]}"
    assert not (ROOT / "gpuanon" / parts[1]).is_dir(), \
        f"package gpuanon.{parts[1]} has no stage: rank it in STAGES (and in docs/architecture.md)"
    return "foundations"


def test_imports_of_a_later_stage_are_the_documented_ones():
    up = {(m, n) for m, deps in _graph().items() for n in deps
          if STAGES[_stage(n)] > STAGES[_stage(m)] and _stage(n) != _stage(m)}
    assert not up - UPWARD.keys(), f"new imports of a later stage: {sorted(up - UPWARD.keys())}"
    assert not UPWARD.keys() - up, f"listed but gone (remove them here and in docs): {sorted(UPWARD.keys() - up)}"


def test_the_library_never_imports_the_command_line():
    bad = sorted((m, n) for m, deps in _graph().items() for n in deps
                 if n.startswith("gpuanon.cli") and not m.startswith(("gpuanon.cli", "gpuanon.__main__")))
    assert not bad, bad


#: no function grows past FUNCTION_LINES (docstring included); the one exception, no longer than this,
#: is the fused single-node kernel, whose levels share one set of device arrays
FUNCTION_LINES = 120
LONG_FUNCTIONS = {
    "kernels/mondrian.py:mondrian_partition": 168,
}


def test_no_function_above_120_lines():
    long = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = n
    grown = {f: n for f, n in long.items() if n > LONG_FUNCTIONS.get(f, FUNCTION_LINES)}
    assert not grown, f"functions above {FUNCTION_LINES} lines (cut them into stages): {grown}"


#: third-party modules a function may import where it needs them, with why (start-up: seconds measured
#: after pandas, which every command loads anyway, on the 2-core machine; ``gpuanon --version`` and a
#: 60-row ``gpuanon anonymize`` load none of them, see tests/test_startup.py)
LAZY_DEPENDENCIES = {
    "cupy": "optional GPU dependency (the gpu extras), absent on a CPU machine",
    "cupyx": "optional GPU dependency (CuPy's SciPy functions), absent on a CPU machine",
    "cudf": "optional GPU dependency (cuDF frames), absent on a CPU machine",
    "cuml": "optional GPU dependency (cuML models of evaluate), absent on a CPU machine",
    "torch": "optional dependency (PyTorch): the MLP of evaluate and federate",
    "flwr": "optional dependency (Flower): federated runs only",
    "xgboost": "optional dependency (XGBoost): one model of evaluate",
    "threadpoolctl": "optional (comes with scikit-learn, not declared): DISTPAB's one-BLAS-thread limit",
    "distributed": "start-up (Dask's distributed, ~1 s): only when a cluster is opened",
    "sklearn": "start-up (~2-3 s): scikit-learn's model code only in the steps that fit a model",
    "scipy": "start-up (~1-3 s): scipy.special / .stats / .optimize only in the steps that use them",
    "matplotlib": "start-up (~0.5 s): plots only",
    "jinja2": "start-up (~0.1 s): HTML pages only",
    "markupsafe": "Jinja2's companion, loaded with it for a page",
    "tabulate": "start-up (~0.1 s): Markdown tables only",
    "pyarrow.parquet": "start-up (~30 ms): Parquet files only (pandas loads pyarrow, .compute and .csv itself)",
    "urllib.request": "start-up (~50 ms, http and ssl): the cluster dashboard's probe only",
}

#: (file, or folder ending in /, imported module, why): the project imports inside a function
LAZY_IMPORTS = [
    ("gpuanon/cli/", "gpuanon", "the command line's per-subcommand import: `gpuanon --version` and the parser "
                                "of every subcommand load no subcommand's code"),
    ("gpuanon/cli/", "pandas", "the command line's per-subcommand import (pandas ~0.3 s, not for --version)"),
    ("gpuanon/cli/", "numpy", "the command line's per-subcommand import (not for --version)"),
    ("gpuanon/federated/run.py", "gpuanon.federated.client_app", "imports Flower at its top (optional)"),
    ("gpuanon/federated/run.py", "gpuanon.federated.server_app", "imports Flower at its top (optional)"),
    ("gpuanon/federated/compare.py", "gpuanon.federated.client_app", "imports Flower at its top (optional)"),
    ("gpuanon/federated/__init__.py", "gpuanon.federated.compare", "the package's name `compare` is both the "
                                      "submodule and its function: importing the function at the top hides the module"),
]

#: the modules that import a module by its name (importlib.import_module), and why
IMPORT_BY_NAME = {
    "gpuanon/__init__.py": "the public names loaded on first use: `import gpuanon` loads no pandas",
    "gpuanon/anonymize/runners.py": "the runner registry: cluster= loads the module that registers OnCluster",
    "gpuanon/backend.py": "CuPy, or the device double, named by the backend",
    "gpuanon/cluster/connect.py": "dask-cuda for a cuda:N cluster (optional)",
}


def _inner_imports(path: pathlib.Path):
    """(line, imported module) of every import statement inside a function of ``path``."""
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                yield from ((node.lineno, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(path, node)
                yield from ((node.lineno, f"{src}.{a.name}" if _exists(f"{src}.{a.name}") else src)
                            for a in node.names)


def _within(mod: str, parent: str) -> bool:
    return mod == parent or mod.startswith(parent + ".")


def test_imports_inside_functions_are_the_listed_ones():
    bad, used = set(), set()
    for path in SOURCES:
        rel = str(path.relative_to(ROOT))
        for line, mod in _inner_imports(path):
            if any(_within(mod, dep) for dep in LAZY_DEPENDENCIES):
                used.update(dep for dep in LAZY_DEPENDENCIES if _within(mod, dep))
                continue
            entry = next((e for e in LAZY_IMPORTS if (rel == e[0] or e[0].endswith("/") and rel.startswith(e[0]))
                          and _within(mod, e[1])), None)
            if entry is None:
                bad.add(f"{rel}:{line}: imports {mod} inside a function: import it at the module's top, or list "
                        f"it in LAZY_DEPENDENCIES / LAZY_IMPORTS of tests/test_layout.py with its reason")
            else:
                used.add(entry)
    assert not bad, "\n".join(sorted(bad))
    unused = [e for e in [*LAZY_DEPENDENCIES, *LAZY_IMPORTS] if e not in used]
    assert not unused, f"listed but unused (remove them): {unused}"


def test_modules_are_imported_by_name_only_where_listed():
    found = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and (getattr(node.func, "attr", None) == "import_module"
                                               or getattr(node.func, "id", None) in ("import_module", "__import__")):
                found.add(str(path.relative_to(ROOT)))
    assert found == set(IMPORT_BY_NAME), \
        f"import by name outside the list: {sorted(found - set(IMPORT_BY_NAME))}; gone: {sorted(set(IMPORT_BY_NAME) - found)}"
