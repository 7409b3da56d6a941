"""Move the loose foundation modules into packages by concept, and rewrite every reference to them.

Run from the repository root (``python bench/tools/move_rooms.py``; ``--check`` only says what it
would change and exits 1 when something is left to do). It is deterministic and idempotent:

1. ``git mv`` each file of :data:`MOVES` to its package (a file already moved is skipped) and
   writes the package's ``__init__.py`` (a docstring) where there is none;
   carries the definitions of :data:`EXTRACTS` into their new module (the cluster's ``Runner``, shared
   by the anonymizer's and DISTPAB's cluster runs, next to opening a cluster): what the origin still
   uses it imports from there, imports it no longer uses are dropped;
2. rewrites the imports of every Python file (``gpuanon/``, ``kernels/``, ``tests/``, ``bench/``,
   ``scripts/``, ``docs/conf.py``): ``from gpuanon.x import``, ``import gpuanon.x``,
   ``from gpuanon import x``, relative imports (``from ..x import``, ``from . import x``; in a moved
   file an import written for its old place is read from there), keeping each import's style
   (relative stays relative) and its trailing comment; ``from .tasks import Runner`` and
   ``tasks.Runner`` (a module alias) follow a carried definition;
3. rewrites dotted names and paths in every text file of those folders, ``docs/``, ``README.md`` and
   ``pyproject.toml``: ``gpuanon.x.name`` in strings (``monkeypatch`` / ``mock.patch`` targets,
   Sphinx ``automodule``), ``gpuanon/x.py`` and ``distributed/cluster.py`` paths in the docs.

A second run changes nothing; after other branches are merged it rewrites their new references to
the old paths. Recorded results (``bench/results/``) are history and are left as they were.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import re
import subprocess
import sys

#: old file -> new file (the package is made where it is missing)
MOVES = {
    "gpuanon/schema.py": "gpuanon/table/schema.py",
    "gpuanon/dictionaries.py": "gpuanon/table/dictionaries.py",
    "gpuanon/encoding.py": "gpuanon/table/encoding.py",
    "gpuanon/exact.py": "gpuanon/table/exact.py",
    "gpuanon/cells.py": "gpuanon/table/cells.py",
    "gpuanon/io.py": "gpuanon/output/io.py",
    "gpuanon/csv_out.py": "gpuanon/output/csv_out.py",
    "gpuanon/jsonsafe.py": "gpuanon/output/jsonsafe.py",
    "gpuanon/classes.py": "gpuanon/release/classes.py",
    "gpuanon/verify.py": "gpuanon/release/verify.py",
    "gpuanon/origin.py": "gpuanon/release/origin.py",
    "gpuanon/nn.py": "gpuanon/models/nn.py",
    "gpuanon/distributed/cluster.py": "gpuanon/cluster/connect.py",
}

#: the new packages' ``__init__.py`` docstrings
PACKAGES = {
    "gpuanon/table": "The table model: column roles, dictionaries, the encoded table, exact values and the cell format.\n\n"
                     ":mod:`.schema` column roles and kinds and every input check; :mod:`.dictionaries` the table's\n"
                     "dictionaries as chunk / combine / finalize reductions; :mod:`.encoding` the encoded table;\n"
                     ":mod:`.exact` exact ordered values (integers beyond 2**53, dates and times); :mod:`.cells` the\n"
                     "published cell format.",
    "gpuanon/output": "Writing what a run publishes: tables and reports written atomically, fast CSV, strict JSON.\n\n"
                      ":mod:`.io` atomic writes of tables and reports; :mod:`.csv_out` CSV through Arrow;\n"
                      ":mod:`.jsonsafe` values as strict JSON accepts them.",
    "gpuanon/release": "A release's equivalence classes: their statistics, their verification, its original.\n\n"
                       ":mod:`.classes` per-class statistics of an encoded table; :mod:`.verify` k, l and t recomputed\n"
                       "from an output table alone; :mod:`.origin` whether a table could be a release's original.",
    "gpuanon/models": "The learning models shared by the evaluation and federated learning.\n\n"
                      ":mod:`.nn` one PyTorch multi-layer perceptron for every backend.",
    "gpuanon/cluster": "Running on a Dask cluster, shared by the anonymizer's and DISTPAB's cluster runs.\n\n"
                       ":mod:`.connect` opening a cluster (``local:N``, ``cuda:N``, ``tcp://host:port``, a client);\n"
                       ":mod:`.runner` tasks pinned to workers and gathered, a lost worker noticed.",
}

#: definitions carried out of a module into another: (from, to, names); a definition already at its
#: destination is replaced by the one still found at its origin (a merged branch's newer copy)
EXTRACTS = [
    ("gpuanon/distributed/tasks.py", "gpuanon/cluster/runner.py",
     ["_checked", "call_method", "call_function", "nbytes", "WorkerLost", "Runner", "_is_loss"]),
    ("gpuanon/distributed/recovery.py", "gpuanon/cluster/runner.py", ["move_slots", "workers_left"]),
]
#: a private name carried out of its module and still used there takes a public name
RENAMES = {"_checked": "checked"}

#: the docstrings of the modules that EXTRACTS makes
NEW_MODULES = {
    "gpuanon/cluster/runner.py":
        "Tasks pinned to the workers of a cluster and gathered, a lost worker noticed: the :class:`Runner`.\n\n"
        "Shared by the anonymizer's cluster run (:mod:`gpuanon.distributed`) and DISTPAB's entities\n"
        "(:mod:`gpuanon.perturb.distributed`). A task on an object a worker holds (a shard, a home) checks\n"
        "its serial number (:func:`checked`): a worker that died and came back would rebuild it from its\n"
        "source, empty, and the run must stop rather than go on with it. A worker that leaves is raised as\n"
        ":class:`WorkerLost`; its slots go to the workers that remain (:func:`workers_left`,\n"
        ":func:`move_slots`).",
}

#: folders and files whose text is rewritten (bench/results/ is history: left alone)
ROOTS = ("gpuanon", "kernels", "tests", "bench", "scripts", "docs", ".ci", "README.md", "pyproject.toml")
SKIP = ("bench/results/", "bench/tools/move_rooms.py", "tests/test_move_rooms.py")
TEXT = (".py", ".md", ".rst", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".sh", ".html", ".j2", "")


def dotted(path: str) -> str:
    parts = list(pathlib.PurePosixPath(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {dotted(old): dotted(new) for old, new in MOVES.items()}
NEW_TO_OLD = {new: old for old, new in MOVES.items()}
NEW_TO_OLD.update({dst: src for src, dst, _ in EXTRACTS if dst not in NEW_TO_OLD})
#: (module, name) -> (module, name) of every definition that EXTRACTS carries
SYMBOLS = {(dotted(src), n): (dotted(dst), RENAMES.get(n, n)) for src, dst, names in EXTRACTS for n in names}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def map_module(mod: str) -> str:
    """The module's name after the moves (``mod`` itself when it did not move)."""
    for old in sorted(MODULES, key=len, reverse=True):
        if mod == old or mod.startswith(old + "."):
            return MODULES[old] + mod[len(old):]
    return mod


def exists(mod: str) -> bool:
    p = pathlib.Path(*mod.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def package_of(path: str) -> list[str]:
    parts = dotted(path).split(".")
    return parts if path.endswith("__init__.py") else parts[:-1]


def resolve(path: str, level: int, module: str | None) -> str:
    pkg = package_of(path)
    base = pkg[: len(pkg) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def spell(path: str, target: str, relative: bool) -> str:
    """``target`` as the ``from`` part of an import in ``path``: relative where the original was."""
    pkg, tgt = package_of(path), target.split(".")
    if not relative or tgt[0] != pkg[0]:
        return target
    common = 0
    while common < min(len(pkg), len(tgt)) and pkg[common] == tgt[common]:
        common += 1
    return "." * (len(pkg) - common + 1) + ".".join(tgt[common:])


def move_files(dry: bool) -> list[str]:
    done = []
    for old, new in MOVES.items():
        if pathlib.Path(old).exists() and not pathlib.Path(new).exists():
            done.append(f"git mv {old} {new}")
            if not dry:
                pathlib.Path(new).parent.mkdir(parents=True, exist_ok=True)
                git("mv", old, new)
    for pkg, doc in PACKAGES.items():
        init = pathlib.Path(pkg) / "__init__.py"
        if not init.exists():
            done.append(f"write {init}")
            if not dry:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text(f'"""{doc}\n"""\n')
                git("add", str(init))
    return done


def _defined(node) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for tg in targets for n in ast.walk(tg) if isinstance(n, ast.Name)]
    return []


def _bound(node) -> list[str]:
    """Names a top-level import binds."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return []


def _span(lines: list[str], node) -> tuple[int, int]:
    """0-based [first, last) lines of a top-level definition: its decorators and the comments just above."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return first, node.end_lineno


def _used(tree_or_nodes) -> set:
    return {n.id for node in tree_or_nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _rename(text: str) -> str:
    for old, new in RENAMES.items():
        text = re.sub(r"(?<![\w.])" + re.escape(old) + r"\b", new, text)
    return text


def _import_line(src: str, dst: str, node, names: set) -> str | None:
    """``node`` (a top-level import of ``src``) as ``dst`` needs it: only the ``names`` it uses."""
    if not isinstance(node, (ast.Import, ast.ImportFrom)) or getattr(node, "module", None) == "__future__":
        return None
    keep = [a for a in node.names if (a.asname or a.name.split(".")[0]) in names]
    if not keep:
        return None
    if isinstance(node, ast.Import):
        return "import " + ", ".join(_alias(a) for a in keep)
    mod = map_module(resolve(src, node.level, node.module) if node.level else node.module)
    return f"from {spell(dst, mod, bool(node.level))} import " + ", ".join(_alias(a) for a in keep)


def _top(line: str) -> str:
    return line.split()[1].split(".")[0]


def _own(line: str) -> bool:
    return line.startswith(("from .", "from gpuanon", "import gpuanon", "from kernels", "import kernels"))


def _insert_after_imports(text: str, new_lines: list[str], group: bool = False) -> str:
    """``new_lines`` after the last top-level import (``group``: after the last of their own kind,
    the project's or the outside world's, the latter's group begun after ``from __future__``)."""
    if not new_lines:
        return text
    if group and len({_own(x) for x in new_lines}) > 1:
        for kind in (False, True):
            text = _insert_after_imports(text, [x for x in new_lines if _own(x) == kind], True)
        return text
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    at = 0
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if group and imports:
        kind = _own(new_lines[0])
        same = [n for n in imports if _own(ast.get_source_segment(text, n)) == kind
                and getattr(n, "module", None) != "__future__"]
        third = [n for n in same if _top(ast.get_source_segment(text, n)) not in sys.stdlib_module_names]
        if same and not kind and third and all(_top(x) in sys.stdlib_module_names for x in new_lines):
            at = third[0].lineno - 1  # the standard library's imports before the third parties'
            i = same.index(third[0])
            new_lines = new_lines + ([""] if i == 0 else [])
            if i:
                at = same[i - 1].end_lineno
        elif same:
            at = same[-1].end_lineno
        elif kind:
            at = imports[-1].end_lineno
            new_lines = [""] + new_lines
        else:
            future = [n for n in imports if getattr(n, "module", None) == "__future__"]
            at = future[-1].end_lineno if future else imports[0].lineno - 1
            new_lines = ([""] if future else []) + new_lines + ([] if future else [""])
        return "".join(lines[:at]) + "".join(x + "\n" for x in new_lines) + "".join(lines[at:])
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            at = node.end_lineno
        elif at == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            at = node.end_lineno  # the docstring
    block = "".join(line + "\n" for line in new_lines)
    return "".join(lines[:at]) + block + "".join(lines[at:])


def extract(src: str, dst: str, names: list[str], dry: bool) -> list[str]:
    """Carry the top-level definitions ``names`` out of ``src`` into ``dst`` (see :data:`EXTRACTS`)."""
    sp = pathlib.Path(src)
    if not sp.exists():
        return []
    text = sp.read_text()
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    nodes = [n for n in tree.body if set(_defined(n)) & set(names)]
    if not nodes:
        return []
    if dry:
        return [f"carry {', '.join(sorted({d for n in nodes for d in _defined(n)}))} from {src} to {dst}"]
    moved = {d for n in nodes for d in _defined(n)}
    spans = [_span(lines, n) for n in nodes]
    pieces = [_rename("".join(lines[a:b])).rstrip() + "\n" for a, b in spans]
    # the source without them (and the blank lines that followed them)
    keep, skip = [], set()
    for a, b in spans:
        skip.update(range(a, b))
        while b < len(lines) and not lines[b].strip():
            skip.add(b)
            b += 1
    rest = "".join(line for i, line in enumerate(lines) if i not in skip).rstrip() + "\n"
    # the destination: made with its docstring, or the definitions replaced
    dp = pathlib.Path(dst)
    if dp.exists():
        dtext = dp.read_text()
        dtree = ast.parse(dtext)
        dlines = dtext.splitlines(keepends=True)
        drop = set()
        for n in dtree.body:
            if set(_defined(n)) & (moved | {RENAMES.get(m, m) for m in moved}):
                a, b = _span(dlines, n)
                drop.update(range(a, b))
                while b < len(dlines) and not dlines[b].strip():
                    drop.add(b)
                    b += 1
        dtext = "".join(line for i, line in enumerate(dlines) if i not in drop).rstrip() + "\n"
    made = not dp.exists()
    if made:
        dtext = f'"""{NEW_MODULES[dst]}\n"""\n\nfrom __future__ import annotations\n'
    dtext = dtext.rstrip() + "\n\n\n" + "\n\n".join(pieces)
    # the imports the carried definitions need, as the source had them
    dtree = ast.parse(dtext)
    have = {b for n in dtree.body for b in _bound(n) + _defined(n)}
    need = _used(n for n in dtree.body if set(_defined(n)) & {RENAMES.get(m, m) for m in moved}) - have
    stale = [d for n in tree.body if n not in nodes for d in _defined(n) if d in need and d != "__all__"]
    if stale:
        raise SystemExit(f"move_rooms: {dst} would need {', '.join(stale)} from {src}; carry them too (EXTRACTS)")
    top = {ast.get_source_segment(dtext, n) for n in dtree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    new_imports = [line for n in tree.body if (line := _import_line(src, dst, n, need)) and line not in top]
    dtext = _insert_after_imports(dtext, new_imports, group=True)
    dp.parent.mkdir(parents=True, exist_ok=True)
    dp.write_text(dtext)
    # the source: imports it no longer uses dropped, what it still uses imported from the destination
    rest = _rename(rest) if any(old in moved for old in RENAMES) else rest
    rtree = ast.parse(rest)
    still = _used(rtree.body) & {RENAMES.get(m, m) for m in moved}
    rest = _drop_unused_imports(rest, _used(nodes))
    rest = re.sub(r"__all__ = \[[^\]]*\]", lambda m: "__all__ = [" + ", ".join(
        f'"{x}"' for x in re.findall(r'"([^"]+)"', m.group(0)) if x not in moved) + "]", rest)
    if still:
        rest = _insert_after_imports(rest, [f"from {spell(src, dotted(dst), True)} import {', '.join(sorted(still))}"])
    sp.write_text(rest)
    git("add", dst, src)
    return [f"carry {', '.join(sorted(moved))} from {src} to {dst}"]


def _drop_unused_imports(text: str, candidates: set) -> str:
    """Top-level imports of ``candidates`` (names the carried code used) that ``text`` no longer uses."""
    tree = ast.parse(text)
    used = _used(n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom)))
    used |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    lines = text.splitlines(keepends=True)
    for node in reversed(tree.body):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.ImportFrom)
                                                                  and node.module == "__future__"):
            continue
        gone = [a for a in node.names if (a.asname or a.name.split(".")[0]) in candidates - used]
        if not gone:
            continue
        left = [a for a in node.names if a not in gone]
        a, b = node.lineno - 1, node.end_lineno
        if not left:
            new = []
        elif isinstance(node, ast.Import):
            new = ["import " + ", ".join(_alias(x) for x in left) + "\n"]
        else:
            new = [f"from {'.' * node.level}{node.module or ''} import " + ", ".join(_alias(x) for x in left) + "\n"]
        lines[a:b] = new
    return "".join(lines)


def _line_offsets(text: str) -> list[int]:
    offs, pos = [0], 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        offs.append(pos)
    return offs


def _alias(a: ast.alias) -> str:
    return a.name + (f" as {a.asname}" if a.asname else "")


def _import_from(path: str, node: ast.ImportFrom, seg: str, indent: str) -> str | None:
    """The rewritten statement, or None when it stands."""
    moved_file = path in NEW_TO_OLD
    if node.level:
        base = resolve(path, node.level, node.module)
        stale = not exists(base) or (node.module is None and any(
            not exists(f"{base}.{a.name}") and f"{base}.{a.name}" not in MODULES for a in node.names))
        if moved_file and stale:
            base = resolve(NEW_TO_OLD[path], node.level, node.module)
    else:
        base = node.module or ""
    if base.split(".")[0] != "gpuanon":
        return None
    groups: dict[str, list[ast.alias]] = {}
    for a in node.names:
        full = f"{base}.{a.name}"
        sym = SYMBOLS.get((base, a.name)) or SYMBOLS.get((map_module(base), a.name))
        if sym is not None:  # a definition carried to another module
            target = sym[0]
            a = ast.alias(name=sym[1], asname=a.asname or (a.name if sym[1] != a.name and
                                                           not a.name.startswith("_") else None))
        elif full in MODULES:  # "from gpuanon import io": the name is a module that moved
            target = MODULES[full].rsplit(".", 1)[0]
            a = ast.alias(name=MODULES[full].rsplit(".", 1)[1], asname=a.asname or (
                None if MODULES[full].rsplit(".", 1)[1] == a.name else a.name))
        else:
            target = map_module(base)
        groups.setdefault(target, []).append(a)
    spelled = {t: spell(path, t, bool(node.level)) for t in groups}
    head = re.match(r"from\s+([.\w]+)\s+import", seg)
    if len(groups) == 1:
        (target, names), = groups.items()
        same = [_alias(a) for a in names] == [_alias(a) for a in node.names]
        if same:
            if head.group(1) == spelled[target]:
                return None
            return seg[: head.start(1)] + spelled[target] + seg[head.end(1):]
    return ("\n" + indent).join(f"from {spelled[t]} import {', '.join(_alias(a) for a in names)}"
                                for t, names in groups.items())


def rewrite_imports(path: str, text: str) -> str:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    offs = _line_offsets(text)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        start = offs[node.lineno - 1] + node.col_offset
        end = offs[node.end_lineno - 1] + node.end_col_offset
        seg = text[start:end]
        indent = text[offs[node.lineno - 1]:start]
        if isinstance(node, ast.ImportFrom):
            new = _import_from(path, node, seg, indent if not indent.strip() else "")
        else:
            names = [ast.alias(name=map_module(a.name), asname=a.asname) for a in node.names]
            new = None if all(a.name == b.name for a, b in zip(names, node.names)) else \
                "import " + ", ".join(_alias(a) for a in names)
        if new is not None and new != seg:
            edits.append((start, end, new))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def rewrite_attributes(path: str, text: str) -> str:
    """``tasks.Runner`` (a module's alias, then a definition it no longer holds) -> ``Runner``, imported
    from its new module just after the alias is."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: (a.name, node) for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom):
            base = resolve(path, node.level, node.module) if node.level else node.module or ""
            aliases.update({a.asname or a.name: (f"{base}.{a.name}", node) for a in node.names})
    offs = _line_offsets(text)
    edits, needed = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            mod, stmt = aliases[node.value.id]
            sym = SYMBOLS.get((mod, node.attr))
            if sym is None:
                continue
            start = offs[node.lineno - 1] + node.col_offset
            edits.append((start, offs[node.end_lineno - 1] + node.end_col_offset, sym[1]))
            needed.setdefault(id(stmt), (stmt, set()))[1].add(sym)
    for stmt, syms in needed.values():
        end = offs[stmt.end_lineno - 1] + stmt.end_col_offset
        line_end = text.index("\n", end) if "\n" in text[end:] else len(text)
        indent = text[offs[stmt.lineno - 1]:offs[stmt.lineno - 1] + stmt.col_offset]
        rel = isinstance(stmt, ast.ImportFrom) and stmt.level > 0
        tail = text[end:line_end].strip()  # the alias's own "# noqa: E402" holds for the import beside it
        tail = f"  {tail}" if tail.startswith("# noqa") else ""
        new = "".join(f"\n{indent}from {spell(path, m, rel)} import {n}{tail}" for m, n in sorted(syms))
        edits.append((line_end, line_end, new))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _text_rules() -> list[tuple[re.Pattern, str]]:
    rules = []
    for (mod, name), (new_mod, new_name) in SYMBOLS.items():
        if not name.startswith("_"):
            rules.append((re.compile(r"(?<![\w.])" + re.escape(f"{mod}.{name}") + r"(?!\w)"), f"{new_mod}.{new_name}"))
    for old in sorted(MOVES, key=len, reverse=True):
        rules.append((re.compile(r"(?<![\w.])" + re.escape(dotted(old)) + r"(?!\w)"), dotted(MOVES[old])))
        rules.append((re.compile(r"(?<![\w./])" + re.escape(old) + r"(?!\w)"), MOVES[old]))
        # a path joined in Python: ROOT / "gpuanon" / "verify.py"
        joined = r"\s*/\s*".join(r"([\"'])" + re.escape(c) + r"\1" if i == 0 else r"\1" + re.escape(c) + r"\1"
                                 for i, c in enumerate(old.split("/")))
        rules.append((re.compile(joined), " / ".join(r"\1" + c + r"\1" for c in MOVES[old].split("/"))))
        short = old.split("/", 1)[1]
        if "/" in short:  # "distributed/cluster.py" in the docs' prose
            rules.append((re.compile(r"(?<![\w./])" + re.escape(short) + r"(?!\w)"), MOVES[old].split("/", 1)[1]))
    return rules


RULES = _text_rules()


def rewrite_text(path: str, text: str) -> str:
    for pat, new in RULES:
        text = pat.sub(new, text)
    if path == "gpuanon/__init__.py":  # the lazy public names: ("verify": (".verify", None))
        for old, new in MODULES.items():
            if old.count(".") == 1:
                text = text.replace(f'(".{old.split(".")[1]}",', f'(".{new.split(".", 1)[1]}",')
    return text


def files() -> list[str]:
    out = git("ls-files", "--cached", "--others", "--exclude-standard", "--", *ROOTS).split("\n")
    return sorted({f for f in out if f and pathlib.Path(f).is_file() and not f.startswith(SKIP)
                   and pathlib.Path(f).suffix in TEXT})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when something is left to do")
    args = ap.parse_args(argv)
    if not pathlib.Path("gpuanon/__init__.py").is_file():
        print("move_rooms: run from the repository root (where gpuanon/ is)", file=sys.stderr)
        return 2
    todo = move_files(args.check)
    for src, dst, names in EXTRACTS:
        todo += extract(src, dst, names, args.check)
    for path in files():
        try:
            text = pathlib.Path(path).read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite_attributes(path, rewrite_imports(path, text)) if path.endswith(".py") else text
        new = rewrite_text(path, new)
        if new != text:
            todo.append(f"rewrite {path}")
            if not args.check:
                pathlib.Path(path).write_text(new)
    print("\n".join(todo) if todo else "move_rooms: nothing to do")
    return 1 if args.check and todo else 0


if __name__ == "__main__":
    sys.exit(main())
