"""The lowest-common-node kernel, the kernel's typed column specs, binding hierarchies to a fit's
table, and the layout rules of the hierarchy package."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuanon.backend import gpu_status, gpu_usable, to_device, to_host
from gpuanon.anonymize.criteria import Criteria
from gpuanon.table.encoding import encode, kernel_specs
from gpuanon.hierarchy import (
    ColumnHierarchy,
    Hierarchy,
    bind_hierarchy,
    frequency_hierarchy,
    hierarchy_plan,
    initial_hierarchies,
    masking_hierarchy,
)
from gpuanon.table.schema import Schema
from kernels.hierarchy import lowest_common_node
from kernels.mondrian import mondrian_partition
from kernels.specs import CategoricalSpec, HierarchySpec, NumericSpec, check_specs

ROOT = Path(__file__).resolve().parents[1]


@st.composite
def trees(draw):
    """A random tree as each leaf's path of labels (groups of groups, then '*')."""
    n = draw(st.integers(1, 14))
    height = draw(st.integers(1, 4))
    paths = [[] for _ in range(n)]
    parent = list(range(n))  # node ids of the level below, per leaf
    for lev in range(1, height):
        n_groups = draw(st.integers(1, max(1, len(set(parent)))))
        below = sorted(set(parent))
        group_of = {b: draw(st.integers(0, n_groups - 1)) for b in below}
        parent = [group_of[p] for p in parent]
        for i in range(n):
            paths[i].append(f"L{lev}G{parent[i]}")
    for i in range(n):
        paths[i].append("*")
    return Hierarchy.from_labels([f"v{i}" for i in range(n)], paths)


def _naive_lcn(levels, a, b):
    """The lowest level where the two leaves' paths meet, walking up one level at a time."""
    for lev in range(levels.shape[1]):
        if levels[a, lev] == levels[b, lev]:
            return int(levels[a, lev]), lev
    raise AssertionError("the root must be shared")


@settings(max_examples=200, deadline=None)
@given(trees(), st.integers(0, 2**31 - 1))
def test_lowest_common_node_equals_walking_up(h, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, h.n_leaves, 50)
    b = rng.integers(0, h.n_leaves, 50)
    node, level = lowest_common_node(h.levels, a, b, np)
    assert node.dtype == np.int64 and level.dtype == np.int64
    ref = [_naive_lcn(h.levels, int(x), int(y)) for x, y in zip(a, b)]
    assert node.tolist() == [r[0] for r in ref] and level.tolist() == [r[1] for r in ref]
    # the Hierarchy API is the same kernel
    n2, l2 = h.lowest_common_node_of_pair(a, b)
    assert n2.tolist() == node.tolist() and l2.tolist() == level.tolist()


@settings(max_examples=200, deadline=None)
@given(trees(), st.integers(0, 2**31 - 1))
def test_lowest_common_node_of_sets_is_the_smallest_covering_node(h, seed):
    """The smallest node whose leaves include the set (brute force over every node)."""
    rng = np.random.default_rng(seed)
    sets = rng.random((30, h.n_leaves)) < 0.3
    node, level = h.lowest_common_node(sets)
    under = np.stack([(h.levels == v).any(axis=1) for v in range(h.n_nodes)])  # (nodes, leaves)
    for r in range(sets.shape[0]):
        if not sets[r].any():
            assert node[r] == -1 and level[r] == -1
            continue
        covering = [v for v in range(h.n_nodes) if under[v][sets[r]].all()]
        best = min(covering, key=lambda v: h.n_under[v])
        assert node[r] == best and level[r] == h.node_level[best]


def test_the_kernel_takes_typed_specs_only():
    lv, frac = np.zeros((2, 2), np.int64), np.ones(3)
    vals = np.array([1.0, 2.0])
    spec = NumericSpec(vals)
    assert check_specs([spec, CategoricalSpec(), HierarchySpec(lv, frac)])[0] is spec
    for older in (None, "f32", vals, ("hierarchy", lv, frac)):  # the untyped descriptions are gone
        with pytest.raises(TypeError, match="column 1: .* is not a kernels.specs spec"):
            check_specs([spec, older])
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.values = None


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(17, 90, n).astype(np.int64),
        "w": rng.normal(0, 1, n).astype(np.float32),
        "job": rng.choice(["nurse", "clerk", "teacher", "cook", "pilot"], n),
        "zip": rng.choice(["13053", "13068", "14850", "14853"], n),
        "y": rng.choice(["no", "yes"], n),
    })


def test_kernel_specs_is_the_one_builder():
    df = _frame()
    schema = Schema.from_frame(df, ["age", "w", "job", "zip"], sensitive="y", target="y")
    zip_h = masking_hierarchy(df["zip"], name="zip")
    plan = hierarchy_plan({"zip": zip_h, "job": "auto"}, 50, df, schema)
    table = encode(df, schema, np, orders={"zip": [zip_h.leaves[i] for i in zip_h.leaf_order()]})
    specs = kernel_specs(table)
    assert [type(s).__name__ for s in specs] == ["NumericSpec", "NumericSpec", "CategoricalSpec", "CategoricalSpec"]
    assert specs[0].values is not None and specs[1].values is None  # rank keys / float32 keys
    fit = dataclasses.replace(table)
    bound, tables = initial_hierarchies(fit, plan, 50, np)
    assert set(bound) == {"zip", "job"} and set(tables) == {"job"}
    fit.bind_hierarchies(bound)
    specs = kernel_specs(fit)
    assert isinstance(specs[2], HierarchySpec) and isinstance(specs[3], HierarchySpec)
    np.testing.assert_array_equal(specs[3].frac, zip_h.n_under / zip_h.n_leaves)
    assert specs[3].levels is bound["zip"].code_levels
    # the shared table is untouched; its Columns carry no hierarchy (a Column never changes)
    assert table.hierarchies == {} and fit.hierarchies["zip"].hierarchy is zip_h
    assert not any(hasattr(c, "hierarchy") for c in fit.columns)
    with pytest.raises(TypeError):
        fit.hierarchies["age"] = bound["zip"]  # a read-only mapping: rebind instead
    with pytest.raises(ValueError, match="not categorical QIs"):
        fit.bind_hierarchies({"age": bound["zip"]})
    fit.bind_hierarchies({})
    assert fit.hierarchies == {}


def test_a_hierarchy_spec_changes_the_partition():
    df = _frame(600, seed=3)
    schema = Schema.from_frame(df, ["age", "w", "job", "zip"], sensitive="y", target="y")
    table = dataclasses.replace(encode(df, schema, np))
    h = frequency_hierarchy(df["job"], df["y"], rho=50, name="job")
    table.bind_hierarchies({"job": bind_hierarchy(h, table.columns[2], np)})
    specs = kernel_specs(table)
    crit = Criteria(4, 2, "distinct", 1.0, None, "equal", None)
    kw = dict(n_categories=[c.n_categories for c in table.columns],
              global_range=np.asarray([c.global_range for c in table.columns]), k=4,
              allowed=crit.satisfied, sa=table.sa, n_sa=table.n_sa, xp=np)
    a, na, _ = mondrian_partition(table.keys, col_info=specs, **kw)
    c, nc, _ = mondrian_partition(table.keys, col_info=[CategoricalSpec() if isinstance(s, HierarchySpec) else s
                                                        for s in specs], **kw)
    assert na > 1 and nc > 1  # real partitions

def test_bind_hierarchy_names_missing_values():
    df = _frame()
    table = encode(df, Schema.from_frame(df, ["job"]), np)
    h = Hierarchy.from_labels(["nurse", "clerk"], [["*"], ["*"]], name="job")
    with pytest.raises(Exception, match="lacks 3 values"):
        bind_hierarchy(h, table.columns[0], np)
    full = Hierarchy.from_labels(list(table.columns[0].categories), [["*"]] * 5, name="job")
    ch = bind_hierarchy(full, table.columns[0], np)
    assert isinstance(ch, ColumnHierarchy) and ch.code_levels.shape == (5, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ch.hierarchy = h


# ============================================================================ layout
def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            yield n.level, n.module or "", [a.name for a in n.names]
        elif isinstance(n, ast.Import):
            for a in n.names:
                yield 0, a.name, []


def test_hierarchy_package_layout():
    files = sorted((ROOT / "gpuanon" / "hierarchy").glob("*.py")) + [ROOT / "kernels" / "hierarchy.py",
                                                                     ROOT / "kernels" / "specs.py"]
    for f in files:
        assert len(f.read_text().splitlines()) <= 500, f"{f.name} is over 500 lines"
        for level, module, names in _imports(f):
            private = [x for x in names if x.startswith("_") and not x.startswith("__")]
            assert not private, f"{f} imports private names {private} from {module}"
            if f.parent.name == "kernels":
                assert level == 1 or not module.startswith("gpuanon"), f"{f} imports {module}"


# ============================================================================ GPU
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_usable(), reason=f"no usable GPU: {gpu_status()[1]}")
def test_lowest_common_node_on_the_gpu():
    from gpuanon.backend import get_backend

    cp = get_backend("gpu", quiet=True).xp
    h = masking_hierarchy([f"{i:04d}" for i in range(0, 10_000, 7)])
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, h.n_leaves, 20_000), rng.integers(0, h.n_leaves, 20_000)
    node, level = lowest_common_node(h.levels, a, b, np)
    node_d, level_d = lowest_common_node(to_device(h.levels, cp), to_device(a, cp), to_device(b, cp), cp)
    np.testing.assert_array_equal(node, to_host(node_d))
    np.testing.assert_array_equal(level, to_host(level_d))
