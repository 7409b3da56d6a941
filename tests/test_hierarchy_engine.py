"""Hierarchies inside the engine: kernel spans, user hierarchies, automatic hierarchies on Adult.

* The level-synchronous kernel (``kernels.mondrian``) with ``HierarchySpec(levels, frac)`` column
  info against the plain recursive reference (``kernels.reference``, ``hierarchies=``) on random
  tables with random 2- and 3-level hierarchies whose leaves are in leaf order (code = leaf).
* ``Mondrian`` with a user hierarchy (a :class:`Hierarchy` or an ARX CSV file): every output
  cell is the label of the lowest node covering its class's values, recomputed here in plain
  Python from the hierarchy's paths; a class of one value keeps that value; the labels equal
  the reference's; an unknown value is a clear error naming the value and the file.
* ``hierarchies='auto'`` on Adult (contract, section 5.6): the chosen rho of every categorical
  QI maximizes ``U(income | column)`` over :data:`RHO_CANDIDATES`, recomputed here from the
  classes and the frequency hierarchies; fixed ``rho``; precision; schema errors.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuanon import Mondrian
from gpuanon.anonymize.criteria import Criteria
from gpuanon.table.cells import set_text, split_set_text
from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, load_adult
from gpuanon.errors import GpuanonError, InputError, SchemaError
from gpuanon.hierarchy import RHO_CANDIDATES, Hierarchy, frequency_table
from gpuanon.release.verify import verify
from kernels.mondrian import _spans, mondrian_partition
from kernels.reference import mondrian_reference
from kernels.segmented import exclusive_cumsum, segment_ids
from kernels.specs import CategoricalSpec, HierarchySpec, NumericSpec

# ============================================================================ plain helpers


def random_levels(rng, m: int, height: int) -> np.ndarray:
    """``(m, height + 1)`` node ids of a random tree whose every node covers contiguous codes.

    Leaves are ``0 .. m-1`` (code = leaf), then the nodes of level 1, ..., the root last.
    Every level groups runs of consecutive nodes of the level below.
    """
    levels = np.empty((m, height + 1), dtype=np.int64)
    levels[:, 0] = np.arange(m)
    unit = np.arange(m)  # position of every leaf's ancestor among the nodes of the current level
    n_units, offset = m, m
    p_new = float(rng.choice([0.2, 0.5, 0.8]))
    for lev in range(1, height):
        starts = np.concatenate([[0], np.cumsum(rng.random(n_units - 1) < p_new)]).astype(np.int64)
        unit = starts[unit]
        n_units = int(starts[-1]) + 1
        levels[:, lev] = offset + unit
        offset += n_units
    levels[:, height] = offset  # the root
    return levels


def lcn_path_index(paths: list[list[str]]) -> int:
    """First level (index into the paths) where every path agrees."""
    for lev in range(len(paths[0])):
        if all(p[lev] == paths[0][lev] for p in paths):
            return lev
    raise AssertionError("paths do not share a root")


def expected_cell(values, path_of: dict):
    """The contract's cell of a class: its value's text if it has one, else the lowest covering node."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        return set_text(distinct)
    paths = [path_of[str(v)] for v in distinct]
    return paths[0][lcn_path_index(paths)]


def entropy2(counts) -> float:
    n = sum(counts)
    return -sum(c / n * math.log2(c / n) for c in counts if c)


def u_coefficient(x, t) -> float:
    """``U(T|X) = (H(T) - H(T|X)) / H(T)`` with plain counting."""
    n = len(t)
    ht = entropy2(Counter(t).values())
    if ht == 0:
        return 0.0
    joint = Counter(zip(x, t))
    nx = Counter(x)
    h_t_given_x = -sum(c / n * math.log2(c / nx[xv]) for (xv, _), c in joint.items())
    return (ht - h_t_given_x) / ht


def u_prime_nodes(values, nodes, t, path_of) -> float:
    """``U'(T|X)`` of SPEC section 7 (amended) with plain counting: a row whose cell is node
    ``(level, label)`` spreads its unit mass over the leaves under the node, in proportion to the
    original rows of each leaf."""
    n = len(t)
    ht = entropy2(Counter(t).values())
    if ht == 0:
        return 0.0
    counts = Counter(values)
    spread = {}
    q = Counter()
    for node, ti in zip(nodes, t):
        if node not in spread:
            lev, lab = node
            under = [v for v in counts if (v == lab if lev == 0 else path_of[v][lev - 1] == lab)]
            tot = sum(counts[v] for v in under)
            spread[node] = [(v, counts[v] / tot) for v in under]
        for v, w in spread[node]:
            q[(v, ti)] += w
    qx = Counter()
    for (v, _), m in q.items():
        qx[v] += m
    h_t_given_x = -sum(m / n * math.log2(m / qx[v]) for (v, _), m in q.items() if m > 0)
    return (ht - h_t_given_x) / ht


def u_prime_sets(values, cells, t) -> float:
    """``U'(T|X)`` with plain counting when a row's cell is a set of values (a tuple): its unit
    mass spreads over the set's values in proportion to their original rows."""
    n = len(t)
    ht = entropy2(Counter(t).values())
    if ht == 0:
        return 0.0
    counts = Counter(values)
    q = Counter()
    for cell, ti in zip(cells, t):
        tot = sum(counts[v] for v in cell)
        for v in cell:
            q[(v, ti)] += counts[v] / tot
    qx = Counter()
    for (v, _), m in q.items():
        qx[v] += m
    h_t_given_x = -sum(m / n * math.log2(m / qx[v]) for (v, _), m in q.items() if m > 0)
    return (ht - h_t_given_x) / ht


def check_leaf_order(categories, path_of):
    """Every node's leaves are contiguous in the encoder's category order."""
    seen_done = set()
    for lev in range(len(next(iter(path_of.values())))):
        prev = None
        for c in categories:
            node = (lev, path_of[str(c)][lev])
            if node != prev:
                assert node not in seen_done, f"node {node} is not contiguous in {categories}"
                if prev is not None:
                    seen_done.add(prev)
                prev = node


# ============================================================================ kernel vs reference


@st.composite
def hier_problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(2, 80))
    cols = []  # (kind, values float64 (n,), extra)
    n_hier = draw(st.integers(1, 2))
    for _ in range(n_hier):
        m = int(rng.integers(2, 11))
        height = int(draw(st.sampled_from([2, 3])))
        levels = random_levels(rng, m, height)
        present = int(rng.integers(1, m + 1))
        leaves = np.sort(rng.choice(m, present, replace=False))
        codes = rng.choice(leaves, n, p=rng.dirichlet(np.ones(present)))
        cols.append(("hier", codes.astype(np.float64), levels))
    if draw(st.booleans()):
        span = int(rng.choice([2, 5, 30]))
        v = rng.integers(0, span, n).astype(np.float64)
        if draw(st.booleans()):
            v[rng.random(n) < 0.3] = np.nan
        cols.append(("num", v, None))
    if draw(st.booleans()):
        c = int(rng.integers(1, 6))
        cols.append(("cat", rng.integers(0, c, n).astype(np.float64), c))
    order = draw(st.permutations(list(range(len(cols)))))
    cols = [cols[i] for i in order]
    m_sa = int(rng.integers(1, 4))
    sa = rng.choice(m_sa, n, p=rng.dirichlet(np.ones(m_sa))).astype(np.int64)
    k = draw(st.integers(2, 6))
    l = draw(st.sampled_from([0, 0, 2]))
    t = draw(st.sampled_from([None, None, 0.3, 0.6]))
    relaxed = draw(st.booleans())
    return dict(cols=cols, sa=sa, k=k, l=l, t=t, relaxed=relaxed, n=n)


def _kernel_inputs(p):
    n = p["n"]
    d = len(p["cols"])
    keys = np.empty((d, n), dtype=np.uint32)
    col_info, n_cat, grange, is_cat = [], [], [], []
    values = np.empty((n, d), dtype=np.float64)
    hier_ref = {}
    blocks = None
    for j, (kind, v, extra) in enumerate(p["cols"]):
        values[:, j] = v
        if kind == "num":
            miss = np.isnan(v)
            uniq = np.unique(v[~miss])
            kj = np.searchsorted(uniq, np.where(miss, 0.0, v)).astype(np.uint32)
            kj[miss] = np.uint32(0xFFFFFFFF)
            keys[j] = kj
            col_info.append(NumericSpec(uniq))
            n_cat.append(0)
            grange.append(float(uniq.max() - uniq.min()) if uniq.size else 0.0)
            is_cat.append(False)
            if miss.any():
                blocks = miss.astype(np.int64) if blocks is None else blocks * 2 + miss
        else:
            keys[j] = v.astype(np.uint32)
            is_cat.append(True)
            grange.append(0.0)
            if kind == "cat":
                col_info.append(CategoricalSpec())
                n_cat.append(int(extra))
            else:
                levels = extra
                m = levels.shape[0]
                n_under = np.bincount(levels.ravel())
                col_info.append(HierarchySpec(levels, n_under / m))
                n_cat.append(m)
                hier_ref[j] = (levels, n_under, m)
    return keys, col_info, n_cat, np.asarray(grange), is_cat, values, hier_ref, blocks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hier_problems())
def test_kernel_with_hierarchy_spans_equals_reference(p):
    keys, col_info, n_cat, grange, is_cat, values, hier_ref, blocks = _kernel_inputs(p)
    sa, n = p["sa"], p["n"]
    q = np.bincount(sa, minlength=int(sa.max()) + 1) / n
    crit = Criteria(p["k"], p["l"], "distinct", 1.0, p["t"], "equal", q if p["t"] is not None else None)
    hist = crit.needs_histogram
    lab, n_parts, _ = mondrian_partition(
        keys, col_info=col_info, n_categories=n_cat, global_range=grange, k=p["k"],
        allowed=crit.satisfied, blocks=blocks, sa=sa if hist else None,
        n_sa=len(q) if hist else 0, relaxed=p["relaxed"], xp=np)
    ref = mondrian_reference(values, is_cat, n_cat, grange, p["k"], sa=sa, l=p["l"], t=p["t"],
                             q=q, blocks=blocks, relaxed=p["relaxed"], hierarchies=hier_ref)
    assert np.array_equal(np.asarray(lab), ref), f"kernel {lab.tolist()} != reference {ref.tolist()}"
    # how often the hierarchy spans change the partition (vs distinct-codes spans)
    plain_info = [CategoricalSpec() if isinstance(c, HierarchySpec) else c for c in col_info]
    plain, _, _ = mondrian_partition(
        keys, col_info=plain_info, n_categories=n_cat, global_range=grange, k=p["k"],
        allowed=crit.satisfied, blocks=blocks, sa=sa if hist else None,
        n_sa=len(q) if hist else 0, relaxed=p["relaxed"], xp=np)
    event(f"hierarchy spans change the partition: {not np.array_equal(plain, lab)}")
    event(f"partitions: {'1' if n_parts == 1 else '2+'}")


def _spans_of(codes_per_segment, levels):
    sizes = np.array([len(c) for c in codes_per_segment], dtype=np.int64)
    K = np.concatenate([np.asarray(c, dtype=np.uint32) for c in codes_per_segment])[None, :]
    n_under = np.bincount(levels.ravel())
    info = HierarchySpec(levels, n_under / levels.shape[0])
    return _spans(K, sizes, exclusive_cumsum(sizes, np), segment_ids(sizes, np), [info],
                  [levels.shape[0]], np.zeros(1), np, 1 << 25)[:, 0]


def test_spans_are_leaves_under_the_lowest_common_node():
    # leaves a b c d e f (codes 0..5); level 1: G={a,b,c} H={d} I={e,f}; level 2: X={G,H} Y={I}
    lv = np.array([[0, 6, 9, 11], [1, 6, 9, 11], [2, 6, 9, 11], [3, 7, 9, 11],
                   [4, 8, 10, 11], [5, 8, 10, 11]])
    s = _spans_of([[0, 1], [0, 2, 2], [3, 3], [2, 3], [4, 5], [0, 5], [1, 1, 1]], lv)
    # {a,b} -> G (3 leaves), {a,c} -> G, {d} alone -> 0, {c,d} -> X (4), {e,f} -> I (2),
    # {a,f} -> root (6), {b} alone -> 0; distinct-code spans would give 2/6 to all the pairs
    assert s.tolist() == [3 / 6, 3 / 6, 0.0, 4 / 6, 2 / 6, 1.0, 0.0]


# ============================================================================ user hierarchies

JOB_PATHS = {  # leaf -> (level 1, level 2, root); leaves given out of leaf order below
    "nurse": ["medical", "health", "*"],
    "clerk": ["office", "work", "*"],
    "teacher": ["education", "work", "*"],
    "doctor": ["medical", "health", "*"],
    "manager": ["office", "work", "*"],
    "professor": ["education", "work", "*"],
    "surgeon": ["medical", "health", "*"],
    "vet": ["animals", "health", "*"],
}


def job_hierarchy() -> Hierarchy:
    leaves = list(JOB_PATHS)
    return Hierarchy.from_labels(leaves, [JOB_PATHS[v] for v in leaves], name="job")


def job_frame(rng, n: int, n_jobs: int) -> pd.DataFrame:
    jobs = np.array(list(JOB_PATHS)[:n_jobs], dtype=object)
    return pd.DataFrame({
        "age": rng.integers(20, 20 + int(rng.choice([3, 10, 40])), n),
        "job": rng.choice(jobs, n, p=rng.dirichlet(np.ones(len(jobs)))),
        "zip": rng.choice(np.array(["x", "y", "z"], dtype=object), n),
        "disease": rng.choice(np.array(["flu", "cold", "hiv"], dtype=object), n),
    })


def check_user_hierarchy_output(m, df, out, path_of, col="job"):
    kept = m.labels_ >= 0
    assert len(out) == int(kept.sum())
    labels = m.labels_[kept]
    src = df[col].to_numpy()[kept]
    got = out[col].to_numpy()
    for lab in np.unique(labels):
        rows = np.flatnonzero(labels == lab)
        want = expected_cell(src[rows].tolist(), path_of)
        cells = set(got[rows].tolist())
        assert cells == {want}, f"class {lab}: cells {cells}, expected {want!r} for {set(src[rows])}"
        if len(set(src[rows].tolist())) == 1:  # a class of one value publishes its text, whatever its type
            assert isinstance(got[rows[0]], str)


def reference_labels_with_user_hierarchy(m, df, qis, col, path_of, k, l):
    """The reference recursion with levels built from the test's own paths, in the encoder's order."""
    table = m.table_
    n, d = len(df), len(qis)
    values = np.empty((n, d))
    is_cat, n_cat, grange, hier = [], [], [], {}
    for j, (name, c) in enumerate(zip(qis, table.columns)):
        if c.kind == "numeric":
            values[:, j] = df[name].to_numpy(dtype=np.float64)
            is_cat.append(False)
            n_cat.append(0)
            grange.append(float(df[name].max() - df[name].min()))
            continue
        code = {str(v): i for i, v in enumerate(c.categories)}
        values[:, j] = [code[str(v)] for v in df[name]]
        is_cat.append(True)
        n_cat.append(len(c.categories))
        grange.append(0.0)
        if name == col:
            # the hierarchy's leaves that occur, then every other leaf: node ids by (level, label)
            leaves = [str(v) for v in c.categories] + [v for v in path_of if v not in code]
            height = len(path_of[leaves[0]])
            ids, levels = {}, np.empty((len(leaves), height + 1), dtype=np.int64)
            levels[:, 0] = np.arange(len(leaves))
            nxt = len(leaves)
            for lev in range(height):
                for i, leaf in enumerate(leaves):
                    key = (lev, path_of[leaf][lev])
                    if key not in ids:
                        ids[key] = nxt
                        nxt += 1
                    levels[i, lev + 1] = ids[key]
            hier[j] = (levels, np.bincount(levels.ravel()), len(leaves))
    sa = pd.factorize(df["disease"], sort=True)[0]
    return mondrian_reference(values, is_cat, n_cat, grange, k, sa=sa, l=l, hierarchies=hier)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 120), n_jobs=st.integers(2, 8),
       k=st.integers(2, 5), l=st.sampled_from([0, 2]), with_zip=st.booleans())
def test_user_hierarchy_cells_are_lowest_common_nodes(seed, n, n_jobs, k, l, with_zip):
    rng = np.random.default_rng(seed)
    df = job_frame(rng, n, n_jobs)
    if l and df["disease"].nunique() < l or k > n:
        return
    qis = ["age", "job"] + (["zip"] if with_zip else [])
    m = Mondrian(k=k, l=l, quasi_identifiers=qis, sensitive="disease", hierarchies={"job": job_hierarchy()},
                 backend="cpu", progress=False)
    out = m.fit_transform(df)
    assert m.verification_.ok
    check_user_hierarchy_output(m, df, out, JOB_PATHS)
    assert m.hierarchies_["job"]["source"] == "user" and m.hierarchies_["job"]["rho"] is None
    # codes follow a leaf order, and the partition is the reference's with the hierarchy spans
    check_leaf_order(m.table_.columns[1].categories, JOB_PATHS)
    ref = reference_labels_with_user_hierarchy(m, df, qis, "job", JOB_PATHS, k, l)
    assert np.array_equal(m.labels_, ref)
    prec = m.report_["metrics"]["precision"]
    assert prec is not None and 0.0 <= prec <= 1.0


def test_user_hierarchy_from_arx_csv_and_integer_values(tmp_path):
    rng = np.random.default_rng(7)
    n = 300
    df = pd.DataFrame({"age": rng.integers(20, 70, n), "grade": rng.integers(1, 7, n),
                       "job": rng.choice(np.array(list(JOB_PATHS), dtype=object), n),
                       "disease": rng.choice(np.array(["flu", "cold"], dtype=object), n)})
    grade_paths = {"1": ["low", "*"], "2": ["low", "*"], "3": ["low", "*"], "4": ["high", "*"],
                   "5": ["high", "*"], "6": ["high", "*"]}
    gfile, jfile = tmp_path / "grade.csv", tmp_path / "job.csv"
    gfile.write_text("".join(f"{v};{';'.join(p)}\n" for v, p in grade_paths.items()))
    jfile.write_text("".join(f"{v};{';'.join(p)}\n" for v, p in JOB_PATHS.items()))
    m = Mondrian(k=4, quasi_identifiers=["age", "grade", "job"], categorical=["grade"], sensitive="disease",
                 hierarchies={"grade": str(gfile), "job": jfile}, backend="cpu", progress=False)
    out = m.fit_transform(df)
    assert m.verification_.ok
    check_user_hierarchy_output(m, df, out, grade_paths, col="grade")
    check_user_hierarchy_output(m, df, out, JOB_PATHS, col="job")
    assert {type(v) for v in out["grade"]} <= {int, np.int64, str}
    assert m.hierarchies_["grade"]["source"] == str(gfile)
    res = verify(out, ["age", "grade", "job"], "disease", k=4)
    assert res.ok and res.k >= 4
    p = m.report_["metrics"]["precision"]
    assert isinstance(p, float) and 0.0 <= p <= 1.0


def test_unknown_value_names_the_value_and_the_file(tmp_path):
    df = job_frame(np.random.default_rng(1), 60, 8)
    paths = dict(JOB_PATHS)
    del paths["surgeon"]
    f = tmp_path / "jobs.csv"
    f.write_text("".join(f"{v};{';'.join(p)}\n" for v, p in paths.items()))
    assert "surgeon" in set(df["job"])
    m = Mondrian(k=3, quasi_identifiers=["age", "job"], hierarchies={"job": str(f)}, backend="cpu",
                 progress=False)
    with pytest.raises(GpuanonError) as e:
        m.fit(df)
    assert isinstance(e.value, InputError)
    msg = str(e.value)
    assert "'surgeon'" in msg and str(f) in msg and "job" in msg
    # a Hierarchy object lacking the value: the value is named too
    h = Hierarchy.from_labels(list(paths), list(paths.values()), name="job")
    with pytest.raises(InputError, match="'surgeon'"):
        Mondrian(k=3, quasi_identifiers=["age", "job"], hierarchies={"job": h}, backend="cpu",
                 progress=False).fit(df)


def test_hierarchy_schema_errors():
    df = job_frame(np.random.default_rng(2), 40, 4)
    df["y"] = np.arange(40) % 2
    with pytest.raises(SchemaError, match="target"):
        Mondrian(k=3, quasi_identifiers=["age", "job"], hierarchies="auto", backend="cpu",
                 progress=False).fit(df)
    with pytest.raises(SchemaError, match="target"):
        Mondrian(k=3, quasi_identifiers=["age", "job"], hierarchies={"job": "auto"}, backend="cpu",
                 progress=False).fit(df)
    with pytest.raises(SchemaError, match="numeric"):
        Mondrian(k=3, quasi_identifiers=["age", "job"], target="y", hierarchies={"age": job_hierarchy()},
                 backend="cpu", progress=False).fit(df)
    with pytest.raises(SchemaError, match="numeric"):
        Mondrian(k=3, quasi_identifiers=["age", "job"], target="y", hierarchies={"age": "auto"},
                 backend="cpu", progress=False).fit(df)
    with pytest.raises(SchemaError, match="not a quasi-identifier"):
        Mondrian(k=3, quasi_identifiers=["age"], target="y", hierarchies={"job": job_hierarchy()},
                 backend="cpu", progress=False).fit(df)
    with pytest.raises(SchemaError, match="rho"):
        Mondrian(k=3, quasi_identifiers=["age", "job"], target="y", hierarchies="auto", rho=7,
                 backend="cpu", progress=False).fit(df)


# ============================================================================ automatic, Adult

ADULT_CAT = [c for c in ADULT_QUASI_IDENTIFIERS if c not in ("age", "education-num")]


@pytest.fixture(scope="module")
def adult():
    return load_adult()


@pytest.fixture(scope="module")
def paths_by_rho(adult):
    """{column: {rho: {value text: [level-1 label, root]}}} from the frequency tables."""
    out = {}
    for c in ADULT_CAT:
        ft = frequency_table(adult[c], adult["income"], name=c)
        out[c] = {}
        for r in RHO_CANDIDATES:
            fr = ft.hierarchy(r).to_frame()
            out[c][r] = {str(row[0]): list(row[1:]) for row in fr.itertuples(index=False)}
    return out


def _fit_adult(adult, **kw):
    m = Mondrian(k=3, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
                 backend="cpu", progress=False, **kw)
    return m, m.fit_transform(adult)


_SETS: dict = {}


def _class_sets(adult, labels, col):
    """Sorted distinct values of ``col`` in every class (class ids 0 .. n-1), cached."""
    key = (id(labels), col)
    if key not in _SETS:
        pairs = pd.DataFrame({"lab": labels, "v": adult[col].astype(str).to_numpy()}).drop_duplicates()
        sets = pairs.groupby("lab")["v"].agg(lambda s: tuple(sorted(s)))
        assert sets.index.tolist() == list(range(len(sets)))
        _SETS[key] = (labels, sets.tolist())  # keep labels alive: id() stays unique
    return _SETS[key][1]


def _class_cells(adult, labels, col, path_of):
    """Node (level, label) of every row: the lowest node covering its class's values.

    Level 0 is a lone value (the leaf); otherwise the level of the node in the hierarchy."""
    memo, nodes = {}, []
    for vals in _class_sets(adult, labels, col):
        if vals not in memo:
            if len(vals) == 1:
                memo[vals] = (0, vals[0])
            else:
                paths = [path_of[v] for v in vals]
                lev = lcn_path_index(paths)
                memo[vals] = (lev + 1, paths[0][lev])
        nodes.append(memo[vals])
    return [nodes[lab] for lab in labels]


@pytest.fixture(scope="module")
def adult_auto(adult):
    return _fit_adult(adult, hierarchies="auto")


@pytest.mark.slow
def test_adult_auto_chooses_the_rho_with_the_largest_u(adult, adult_auto, paths_by_rho):
    m, out = adult_auto
    assert (m.labels_ >= 0).all() and len(out) == len(adult)
    assert m.verification_.ok and m.report_["achieved"]["k"] >= 3
    assert sorted(m.hierarchies_) == sorted(ADULT_CAT)
    income = adult["income"].tolist()
    labels = m.labels_
    for c in ADULT_CAT:
        info = m.hierarchies_[c]
        assert info["source"] == "auto" and info["rho_fixed"] is False
        values = adult[c].astype(str).tolist()
        u = {r: u_prime_nodes(values, _class_cells(adult, labels, c, paths_by_rho[c][r]), income, paths_by_rho[c][r])
             for r in RHO_CANDIDATES}
        best = max(u.values())
        # no hierarchy (cells: each class's set of values) is a candidate too, and wins when strictly better
        u_none = u_prime_sets(values, [_class_sets(adult, labels, c)[lab] for lab in labels], income)
        assert info["candidates"]["none"] == pytest.approx(u_none, abs=1e-9)
        if u_none > best + 1e-9:
            assert info["rho"] is None and info["choice"] == "none" and info["height"] is None
            assert info["u_after"] == pytest.approx(u_none, abs=1e-9)
            sets = _class_sets(adult, labels, c)  # the output cell: the class's set of values
            assert [tuple(sorted(split_set_text(x))) for x in out[c].astype(str)] == [sets[lab] for lab in labels]
            continue
        assert info["rho"] in RHO_CANDIDATES and info["choice"] == str(info["rho"])
        assert u[info["rho"]] >= best - 1e-12, (c, info["rho"], u)
        first_best = min(r for r in RHO_CANDIDATES if u[r] >= best - 1e-12)
        assert info["rho"] == first_best, (c, u)  # ties: the smaller rho
        for r in RHO_CANDIDATES:
            assert info["candidates"][str(r)] == pytest.approx(u[r], abs=1e-9)
        u0 = u_coefficient(adult[c].astype(str).tolist(), income)
        assert info["u_before"] == pytest.approx(u0, abs=1e-9)
        assert info["u_after"] == pytest.approx(u[info["rho"]], abs=1e-9)
        assert info["loss"] == pytest.approx(1 - u[info["rho"]] / u0, abs=1e-9)
        for r in RHO_CANDIDATES:
            assert info["candidate_loss"][str(r)] == pytest.approx(1 - u[r] / u0, abs=1e-9)
        # the output cells are the chosen hierarchy's lowest common nodes (a lone value kept)
        nodes = _class_cells(adult, labels, c, paths_by_rho[c][info["rho"]])
        want = [adult[c].iat[i] if lev == 0 else lab for i, (lev, lab) in enumerate(nodes)]
        assert out[c].tolist() == want, c
    p = m.report_["metrics"]["precision"]
    assert isinstance(p, float) and 0.0 <= p <= 1.0


def _independent_precision(adult, labels, rho_of, paths_by_rho):
    """Sweeney's precision over the hierarchy columns: 1 - mean(level / height) over cells."""
    total = 0.0
    cols = [c for c in ADULT_CAT if rho_of[c] is not None]  # columns without a hierarchy do not count
    for c in cols:
        nodes = _class_cells(adult, labels, c, paths_by_rho[c][rho_of[c]])
        total += sum(lev for lev, _ in nodes) / 2.0  # frequency hierarchies: height 2
    return 1.0 - total / (len(adult) * len(cols))


def test_adult_auto_precision_is_sweeneys(adult, adult_auto, paths_by_rho):
    m, _ = adult_auto
    rho_of = {c: m.hierarchies_[c]["rho"] for c in ADULT_CAT}
    want = _independent_precision(adult, m.labels_, rho_of, paths_by_rho)
    assert m.report_["metrics"]["precision"] == pytest.approx(want, abs=1e-12)


@pytest.mark.slow
def test_adult_fixed_rho_10(adult, paths_by_rho):
    m, out = _fit_adult(adult, hierarchies="auto", rho=10)
    assert m.verification_.ok and m.report_["achieved"]["k"] >= 3
    res = verify(out, ADULT_QUASI_IDENTIFIERS, "income", k=3)
    assert res.ok
    assert sorted(m.hierarchies_) == sorted(ADULT_CAT)
    for c in ADULT_CAT:
        info = m.hierarchies_[c]
        assert info["rho"] == 10 and info["rho_fixed"] is True
        assert list(info["candidates"]) == ["10"]
        nodes = _class_cells(adult, m.labels_, c, paths_by_rho[c][10])
        want = [adult[c].iat[i] if lev == 0 else lab for i, (lev, lab) in enumerate(nodes)]
        assert out[c].tolist() == want, c
    # education's six groups (contract 5.5) are the only non-leaf, non-root labels it can show
    groups = {tuple(p)[0] for p in paths_by_rho["education"][10].values()}
    assert set(out["education"]) <= set(adult["education"]) | groups | {"*"}
    p = m.report_["metrics"]["precision"]
    assert isinstance(p, float) and 0.0 <= p <= 1.0
    rho_of = {c: 10 for c in ADULT_CAT}
    assert p == pytest.approx(_independent_precision(adult, m.labels_, rho_of, paths_by_rho), abs=1e-12)


def test_auto_on_a_subset_of_columns_and_star_key(adult):
    df = adult.head(3000)
    m = Mondrian(k=5, quasi_identifiers=["age", "education", "race", "gender"], sensitive="income",
                 target="income", hierarchies={"education": "auto"}, backend="cpu", progress=False)
    m.fit_transform(df)
    assert sorted(m.hierarchies_) == ["education"]
    m2 = Mondrian(k=5, quasi_identifiers=["age", "education", "race", "gender"], sensitive="income",
                  target="income", hierarchies={"*": "auto"}, backend="cpu", progress=False)
    m2.fit_transform(df)
    assert sorted(m2.hierarchies_) == ["education", "gender", "race"]


def test_star_key_with_a_file_is_applied_or_refused(tmp_path):
    f = tmp_path / "jobs.csv"
    f.write_text("".join(f"{v};{';'.join(p)}\n" for v, p in JOB_PATHS.items()))
    df = job_frame(np.random.default_rng(3), 60, 8)
    m = Mondrian(k=3, quasi_identifiers=["age", "job"], hierarchies={"*": str(f)}, backend="cpu",
                 progress=False)
    try:
        m.fit(df)
    except GpuanonError:
        return  # refused with a clear error: fine
    assert "job" in m.hierarchies_  # or applied to every categorical QI not named
