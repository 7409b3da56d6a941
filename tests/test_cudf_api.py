"""Every cuDF attribute gpuanon uses exists in the pinned cuDF release (read from its wheel, never imported).

cuDF needs a GPU to import, so CI cannot call it. Instead the cuDF wheel pinned by the ``gpu-cu12``
extra of ``pyproject.toml`` (``cudf-cu12==26.10.*``: pip picks the newest 26.10.x) is downloaded
once per run without its dependencies (about 2.8 MB, under a second from PyPI), and its Python
sources are read as syntax trees:

* every attribute chain of ``gpuanon/backend.py`` rooted at a name bound to the cuDF module
  (``import cudf`` or ``cudf = cudf_module()``), e.g. ``cudf.CategoricalIndex.from_codes``, must
  resolve through the wheel's imports, classes and base classes, and the keywords of a call must
  be parameters of the function it reaches;
* methods called on cuDF objects, which the syntax cannot type, are listed in ``OBJECT_METHODS``
  (class and method) and checked the same way; a name assigned from ``cudf.Class(...)`` or
  ``cudf.Class.method(...)`` in backend.py is typed as that class, so its method calls are
  checked too;
* no module but backend.py names ``cudf.`` in code.

The download is skipped (with the reason printed) only when pip cannot reach the package index;
any other failure of the download, and any missing attribute, fails.

What it cannot catch: behaviour (what a call does with its arguments, dtypes, nulls), attributes
made at run time (``setattr``, compiled extensions), methods called on cuDF objects that are
neither listed nor typed from an assignment, and cuDF calls reached through a variable other than
the module (``be.frame``).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BACKEND = REPO / "gpuanon" / "backend.py"

#: methods called on cuDF frames, series and indexes (in backend.py and in the modules that hand
#: cuDF objects to it: anonymize/generalize.py, anonymize/mondrian.py, perturb/distpab.py, io.py)
OBJECT_METHODS = {
    "DataFrame": ("memory_usage", "to_pandas", "to_arrow", "to_cupy", "reset_index", "take", "__getitem__",
                  "columns", "isna"),
    "Series": ("memory_usage", "to_pandas", "to_cupy", "reset_index", "take", "where", "isna", "sum", "dtype", "cat"),
    "Index": ("memory_usage", "to_pandas"),  # a categorical's categories (gpuanon/table/resident.py)
}

NETWORK_MARKS = ("Could not fetch URL", "Failed to establish a new connection", "NewConnectionError",
                 "Network is unreachable", "Temporary failure in name resolution", "Name or service not known",
                 "Max retries exceeded", "timed out", "ConnectTimeout", "ProxyError", "SSLError",
                 "Connection refused", "No route to host")


def pinned_cudf_spec() -> str:
    """The cuDF requirement of the ``gpu-cu12`` extra, e.g. ``cudf-cu12==26.10.*``."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    specs = [s for s in meta["project"]["optional-dependencies"]["gpu-cu12"] if re.match(r"cudf-cu12\b", s)]
    assert len(specs) == 1 and "==" in specs[0], f"gpu-cu12 must pin cudf-cu12 with ==, got {specs}"
    return specs[0].replace(" ", "")


@pytest.fixture(scope="session")
def cudf_wheel(tmp_path_factory) -> Path:
    """The pinned cuDF wheel, downloaded once per run (Linux x86-64, CPython 3.11 abi3: the
    sources are the same on every platform)."""
    dest = tmp_path_factory.mktemp("cudf_wheel")
    spec = pinned_cudf_spec()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
           "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--disable-pip-version-check",
           "--timeout", "30", "-d", str(dest), spec]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        msg = f"pip download {spec} took over 300 s (network?)"
        print(msg)
        pytest.skip(msg)
    wheels = sorted(dest.glob("cudf_cu12-*.whl"))
    if p.returncode != 0 or not wheels:
        out = (p.stdout + p.stderr).strip()
        if any(m in out for m in NETWORK_MARKS):
            msg = f"cannot download {spec} (no network to the package index): {out.splitlines()[-1]}"
            print(msg)
            pytest.skip(msg)
        pytest.fail(f"pip download {spec} failed (exit {p.returncode}):\n{out[-3000:]}")
    return wheels[-1]


# ------------------------------------------------------------------------------ the wheel's sources
class CudfSource:
    """cuDF's Python modules from a wheel, resolved by name through imports and base classes."""

    def __init__(self, files: dict[str, str]):
        self.files = files  # module name -> source text
        self.trees: dict[str, ast.Module] = {}

    @classmethod
    def from_wheel(cls, wheel: Path) -> "CudfSource":
        files = {}
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("cudf/") and name.endswith(".py"):
                    mod = name[:-3].replace("/", ".")
                    mod = mod[: -len(".__init__")] if mod.endswith(".__init__") else mod
                    files[mod] = z.read(name).decode("utf-8")
        return cls(files)

    def tree(self, mod: str) -> ast.Module | None:
        if mod not in self.files:
            return None
        if mod not in self.trees:
            self.trees[mod] = ast.parse(self.files[mod])
        return self.trees[mod]

    @staticmethod
    def _top(body):
        """Module-level statements, looking inside ``if`` / ``try`` / ``with`` blocks."""
        for st in body:
            yield st
            for attr in ("body", "orelse", "finalbody", "handlers"):
                if isinstance(st, (ast.If, ast.Try, ast.With)) or (attr == "body" and isinstance(st, ast.ExceptHandler)):
                    yield from CudfSource._top(getattr(st, attr, []) or [])

    def _package(self, mod: str) -> str:
        is_pkg = any(k.startswith(mod + ".") for k in self.files)
        return mod if is_pkg else mod.rpartition(".")[0]

    def name(self, mod: str, name: str, depth: int = 0):
        """What ``name`` is in module ``mod``: ('module', m), ('class', m, node), ('function', m, node),
        ('value', m) or None."""
        t = self.tree(mod)
        if t is None or depth > 30:
            return None
        for st in self._top(t.body):
            if isinstance(st, ast.ClassDef) and st.name == name:
                return ("class", mod, st)
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name:
                return ("function", mod, st)
            if isinstance(st, ast.ImportFrom):
                for a in st.names:
                    if (a.asname or a.name) == name:
                        base = st.module or ""
                        if st.level:
                            pkg = self._package(mod)
                            for _ in range(st.level - 1):
                                pkg = pkg.rpartition(".")[0]
                            base = f"{pkg}.{base}" if base else pkg
                        if f"{base}.{a.name}" in self.files:
                            return ("module", f"{base}.{a.name}")
                        if not base.startswith("cudf"):
                            return ("value", base)  # from another package (pandas, pylibcudf, ...)
                        return self.name(base, a.name, depth + 1)
            if isinstance(st, ast.Import):
                for a in st.names:
                    if (a.asname or a.name.partition(".")[0]) == name:
                        return ("module", a.name if a.asname else a.name.partition(".")[0])
            targets = (st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign)
                       else [])
            if any(isinstance(x, ast.Name) and x.id == name for x in targets):
                return ("value", mod)
        if f"{mod}.{name}" in self.files:
            return ("module", f"{mod}.{name}")
        return None

    def expr(self, mod: str, node: ast.expr):
        if isinstance(node, ast.Name):
            return self.name(mod, node.id)
        if isinstance(node, ast.Attribute):
            base = self.expr(mod, node.value)
            return None if base is None else self.member(base, node.attr)
        return None

    def member(self, obj, attr: str, seen=None):
        """``attr`` of a resolved module or class (through base classes), or None."""
        if obj[0] == "module":
            return self.name(obj[1], attr)
        if obj[0] != "class":
            return ("value", None) if obj[0] == "value" and obj[1] and not obj[1].startswith("cudf") else None
        mod, cls = obj[1], obj[2]
        seen = set() if seen is None else seen
        if (mod, cls.name) in seen:
            return None
        seen.add((mod, cls.name))
        for st in cls.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == attr:
                return ("function", mod, st)
            if isinstance(st, ast.ClassDef) and st.name == attr:
                return ("class", mod, st)
            targets = (st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign)
                       else [])
            if any(isinstance(x, ast.Name) and x.id == attr for x in targets):
                return ("value", mod)
        for b in cls.bases:
            rb = self.expr(mod, b)
            if rb is not None and rb[0] == "class":
                found = self.member(rb, attr, seen)
                if found is not None:
                    return found
        return None


def keyword_problems(target, keywords: list[str]) -> list[str]:
    """Keywords a resolved function (or a class's ``__init__``) does not accept."""
    fn = target[2] if target and target[0] == "function" else None
    if fn is None:
        return []
    a = fn.args
    if a.kwarg is not None:
        return []
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    return [k for k in keywords if k not in names]


# ------------------------------------------------------------------------------ what backend.py uses
def cudf_names(tree: ast.Module) -> set[str]:
    """Names bound to the cuDF module: ``import cudf [as x]`` and ``x = cudf_module()``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.asname or a.name for a in node.names if a.name == "cudf"}
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Name) and node.value.func.id == "cudf_module":
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def _chain(node: ast.expr, roots: set[str]) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in roots and parts:
        return parts[::-1]
    return None


def used_attributes(source: str) -> tuple[list[tuple], list[tuple]]:
    """``(chains, typed)``: the cuDF attribute chains of ``source`` with the keywords of their calls,
    and ``(class, method, keywords)`` for methods called on names assigned from a cuDF class."""
    tree = ast.parse(source)
    roots = cudf_names(tree)
    calls = {id(n.func): [k.arg for k in n.keywords if k.arg] for n in ast.walk(tree) if isinstance(n, ast.Call)}
    chains, seen = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "_parent", None), ast.Attribute):
            ch = _chain(node, roots)
            if ch and id(node) not in seen:
                chains.append((tuple(ch), calls.get(id(node), []), node.lineno))
        for child in ast.iter_child_nodes(node):
            child._parent = node
    # keep only the longest chain of each expression (cudf.A.B, not also cudf.A)
    longest = [c for c in chains if not any(o[0][:len(c[0])] == c[0] and len(o[0]) > len(c[0]) and o[2] == c[2]
                                            for o in chains)]
    typed = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        kinds: dict[str, str] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                ch = _chain(node.value.func, roots)
                if ch and ch[0][:1].isupper():
                    kinds.update({t.id: ch[0] for t in node.targets if isinstance(t, ast.Name)})
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id in kinds:
                typed.append((kinds[node.func.value.id], node.func.attr, [k.arg for k in node.keywords if k.arg]))
    return longest, typed


def cudf_problems(source: str, src: CudfSource) -> list[str]:
    """Every cuDF attribute of ``source`` (and of :data:`OBJECT_METHODS`) the wheel lacks."""
    problems = []
    chains, typed = used_attributes(source)
    for chain, kws, line in chains:
        obj = ("module", "cudf")
        for i, part in enumerate(chain):
            obj = src.member(obj, part)
            if obj is None:
                problems.append(f"line {line}: cudf.{'.'.join(chain[:i + 1])} does not exist")
                break
        else:
            target = src.member(obj, "__init__") if obj[0] == "class" else obj
            problems += [f"line {line}: cudf.{'.'.join(chain)}() has no keyword {k!r}"
                         for k in keyword_problems(target, kws)]
    listed = [(c, m, []) for c, ms in OBJECT_METHODS.items() for m in ms]
    for cls_name, meth, kws in listed + typed:
        cls = src.name("cudf", cls_name)
        found = None if cls is None else src.member(cls, meth)
        if found is None:
            problems.append(f"cudf.{cls_name}.{meth} does not exist")
        else:
            problems += [f"cudf.{cls_name}.{meth}() has no keyword {k!r}" for k in keyword_problems(found, kws)]
    # keywords of the listed methods where backend.py calls them (x.to_arrow(preserve_index=False))
    tree = ast.parse(source)
    other_modules = {a.asname or a.name.partition(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                     for a in n.names if a.name != "cudf"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.keywords:
            root = node.func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in other_modules:
                continue  # pd.Categorical.from_codes(validate=...) is pandas
            owners = [c for c, ms in OBJECT_METHODS.items() if node.func.attr in ms]
            kws = [k.arg for k in node.keywords if k.arg]
            fails = [(c, keyword_problems(src.member(src.name("cudf", c), node.func.attr), kws)) for c in owners]
            if owners and all(bad for _, bad in fails):
                problems.append(f"line {node.lineno}: .{node.func.attr}() of cudf.{owners[0]} has no keyword "
                                f"{fails[0][1][0]!r}")
    return problems


@pytest.fixture(scope="session")
def cudf_source(cudf_wheel) -> CudfSource:
    return CudfSource.from_wheel(cudf_wheel)


# ------------------------------------------------------------------------------ tests
def test_pinned_spec_is_one_release():
    spec = pinned_cudf_spec()
    assert re.fullmatch(r"cudf-cu12==\d+\.\d+\.(\*|\d+)", spec), spec
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    cu13 = [s for s in meta["project"]["optional-dependencies"]["gpu-cu13"] if s.startswith("cudf-cu13")]
    assert [s.replace("cudf-cu13", "cudf-cu12").replace(" ", "") for s in cu13] == [spec], \
        "gpu-cu12 and gpu-cu13 must pin the same cuDF release"


@pytest.mark.slow
def test_backend_cudf_attributes_exist(cudf_source, cudf_wheel):
    source = BACKEND.read_text()
    chains, _ = used_attributes(source)
    assert len(chains) >= 5, f"expected backend.py's cuDF calls, found {chains}"
    problems = cudf_problems(source, cudf_source)
    assert not problems, f"{cudf_wheel.name}:\n" + "\n".join(problems)


@pytest.mark.slow
def test_the_check_catches_calls_cudf_lacks(cudf_source):
    """The checker itself: the calls of an older backend.py (absent from cuDF 26.10) are caught,
    and the ones it replaced them with pass."""
    bad = '''
def f(df, values, proto):
    cudf = cudf_module()
    a = cudf.DataFrame.from_pandas(df)
    b = cudf.Series.from_categorical(proto, codes=values)
    c = cudf.CategoricalIndex.from_codes(values, categories=proto, ordered=False, validate=True)
    s = cudf.Series(values)
    s.no_such_method()
    return df.to_arrow(no_such_keyword=False)
'''
    problems = cudf_problems(bad, cudf_source)
    text = "\n".join(problems)
    for expected in ("cudf.DataFrame.from_pandas does not exist", "cudf.Series.from_categorical does not exist",
                     "has no keyword 'validate'", "cudf.Series.no_such_method does not exist",
                     "has no keyword 'no_such_keyword'"):
        assert expected in text, text
    good = '''
def f(df, values, cats):
    import cudf
    a = cudf.from_pandas(df)
    codes = cudf.Series(values)
    codes = codes.where(codes >= 0)
    b = cudf.Series(cudf.CategoricalIndex.from_codes(codes, categories=cats, ordered=False))
    return cudf.read_parquet("x"), df.to_arrow(preserve_index=False), df.memory_usage(deep=True)
'''
    assert cudf_problems(good, cudf_source) == []


def _cudf_chains_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.relative_to(REPO)}:{n.lineno}: cudf.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "cudf"]


@pytest.mark.slow
def test_only_backend_calls_cudf():
    """No module but backend.py names ``cudf.`` in code (comments and strings do not count)."""
    found = []
    for folder in ("gpuanon", "kernels", "bench", "tests"):
        for path in sorted((REPO / folder).rglob("*.py")):
            # hidden folders (bench/.ab: other revisions exported by bench/ab.py) are not this tree's code
            if path != BACKEND and not any(part.startswith(".") for part in path.relative_to(REPO).parts):
                found += _cudf_chains_in(path)
    assert not found, "cuDF is called outside gpuanon/backend.py:\n" + "\n".join(found)
