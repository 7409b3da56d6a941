"""Tests of gpuanon.hierarchy: automatic (thesis 2.5), masking and ARX hierarchies.

The contract's section 5 check (Adult, education vs income, rho = 10 -> six groups) is here, with
hand-made frequency tables, exact bucket arithmetic, lowest common nodes against a brute-force
reference, leaf-order contiguity, and ARX CSV reading / writing and its error messages.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuanon.backend import gpu_status, gpu_usable
from gpuanon.datasets import load_adult
from gpuanon.table.encoding import encode
from gpuanon.errors import GpuanonError, InputError
from gpuanon.table.schema import Schema
from gpuanon.hierarchy import (
    MISSING_LABEL,
    RHO_CANDIDATES,
    ROOT,
    FrequencyTable,
    Hierarchy,
    build_hierarchies,
    build_hierarchy_candidates,
    check_rho,
    count_table,
    frequency_hierarchies,
    frequency_hierarchy,
    frequency_table,
    masking_hierarchy,
)
from expected import SIX_GROUPS

ADULT_CATEGORICAL_QIS = ["workclass", "education", "marital-status", "occupation",
                         "relationship", "race", "gender", "native-country"]

# Thesis table 2.2: (education, majority income, "frequency percentage")
TABLE_2_2 = [
    ("Prof-school", ">50K", 0.7398), ("Doctorate", ">50K", 0.7255), ("Masters", ">50K", 0.5491),
    ("Preschool", "<=50K", 0.9879), ("11th", "<=50K", 0.9492), ("1st-4th", "<=50K", 0.9676),
    ("5th-6th", "<=50K", 0.9469), ("9th", "<=50K", 0.9457), ("10th", "<=50K", 0.9373),
    ("7th-8th", "<=50K", 0.9350), ("12th", "<=50K", 0.9269), ("HS-grad", "<=50K", 0.8414),
    ("Some-college", "<=50K", 0.8103), ("Assoc-voc", "<=50K", 0.7467),
    ("Assoc-acdm", "<=50K", 0.7420), ("Bachelors", "<=50K", 0.5871),
]



@pytest.fixture(scope="module")
def adult():
    return load_adult()


@pytest.fixture(scope="module")
def edu10(adult):
    return frequency_hierarchy(adult["education"], adult["income"], rho=10)


def _groups_of(h: Hierarchy, level: int = 1) -> set[frozenset]:
    out: dict[int, set] = {}
    for i, node in enumerate(h.levels[:, level]):
        out.setdefault(int(node), set()).add(h.leaf_labels[i])
    return {frozenset(g) for g in out.values()}


def _sets(h: Hierarchy, rows: list[list[str]]) -> np.ndarray:
    idx = {t: i for i, t in enumerate(h.leaf_labels)}
    m = np.zeros((len(rows), h.n_leaves), dtype=bool)
    for r, row in enumerate(rows):
        for v in row:
            m[r, idx[v]] = True
    return m


# ============================================================================ the contract's check
def test_adult_education_rho10_six_groups(adult, edu10):
    """SPEC section 5.5 (checked): exactly these six groups."""
    assert len(adult) == 32561
    assert edu10.height == 2
    assert edu10.n_leaves == 16
    assert _groups_of(edu10) == SIX_GROUPS
    assert edu10.labels[-1] == ROOT and edu10.rho == 10
    ft = frequency_table(adult["education"], adult["income"])
    assert {frozenset(g) for g in ft.groups(10)} == SIX_GROUPS


def test_adult_education_matches_table_2_2(adult):
    """t* of every value is table 2.2's; buckets at rho = 10 equal those of table 2.2's shares."""
    ft = frequency_table(adult["education"], adult["income"])
    assert ft.target_values == ["<=50K", ">50K"]
    tstar = dict(zip(ft.values, (ft.target_values[t] for t in ft.tstar)))
    buckets = dict(zip(ft.values, ft.buckets(10)))
    share = dict(zip(ft.values, ft.share))
    for value, income, pct in TABLE_2_2:
        assert tstar[value] == income, value
        assert buckets[value] == min(int(pct * 100 // 10), 9), value
        assert abs(share[value] - pct) < 0.02, value  # the thesis's table is from its own copy
    assert share["Preschool"] == 1.0 and buckets["Preschool"] == 9  # the clamp at f = 1


def test_adult_education_counts_are_a_crosstab(adult):
    ft = frequency_table(adult["education"], adult["income"])
    ref = pd.crosstab(adult["education"], adult["income"]).loc[ft.values, ft.target_values]
    np.testing.assert_array_equal(ft.counts, ref.to_numpy())
    assert ft.counts.sum() == len(adult)


@pytest.mark.parametrize("col", ADULT_CATEGORICAL_QIS)
def test_leaf_order_is_the_encoding_order(adult, col):
    """Leaves are stored in the contract's category order (the encoder's), and for every rho that
    order already keeps each group contiguous: the encoder's codes follow the hierarchy."""
    frame = adult[[col, "income"]]
    cats = encode(frame, Schema.from_frame(frame, [col], target="income")).columns[0].categories
    hs = frequency_hierarchies(adult[col], adult["income"], name=col)
    for rho, h in hs.items():
        assert h.leaves == list(cats), (col, rho)
        np.testing.assert_array_equal(h.leaf_order(), np.arange(h.n_leaves))


def test_adult_rho_candidates_coarsen(adult):
    """Groups are (t*, bucket) cells: the number of groups never grows with rho along divisors."""
    hs = frequency_hierarchies(adult["education"], adult["income"])
    assert sorted(hs) == sorted(RHO_CANDIDATES)
    n = {r: len(_groups_of(h)) for r, h in hs.items()}
    assert n[1] >= n[2] >= n[4] >= n[20] >= n[100]
    assert n[5] >= n[10] >= n[20] >= n[100] == 2  # rho = 100: one group per majority target
    assert n[10] == 6


# ============================================================================ hand-made tables
def _frame(counts: dict[str, list[int]], targets: list) -> tuple[pd.Series, pd.Series]:
    vals, tg = [], []
    for v, row in counts.items():
        for t, c in zip(targets, row):
            vals += [v] * c
            tg += [t] * c
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(vals))
    return pd.Series(np.array(vals, dtype=object)[perm]), pd.Series(np.array(tg, dtype=object)[perm])


def test_hand_made_table_2_2_style():
    # target values sorted: 'hi' (code 0) < 'lo' (code 1)
    counts = {"p": [74, 26], "d": [72, 28], "m": [55, 45], "s": [1, 99], "h": [16, 84],
              "b": [41, 59], "c": [19, 81]}
    v, t = _frame(counts, ["hi", "lo"])
    ft = frequency_table(v, t)
    assert ft.target_values == ["hi", "lo"]
    got = {val: (ft.target_values[ts], float(sh), int(b))
           for val, ts, sh, b in zip(ft.values, ft.tstar, ft.share, ft.buckets(10))}
    assert got == {"p": ("hi", 0.74, 7), "d": ("hi", 0.72, 7), "m": ("hi", 0.55, 5),
                   "s": ("lo", 0.99, 9), "h": ("lo", 0.84, 8), "b": ("lo", 0.59, 5),
                   "c": ("lo", 0.81, 8)}
    # contract order: (t*, share, value)
    assert ft.values == ["m", "d", "p", "b", "c", "h", "s"]
    assert ft.groups(10) == [["m"], ["d", "p"], ["b"], ["c", "h"], ["s"]]
    assert ft.groups(20) == [["m"], ["d", "p"], ["b"], ["c", "h", "s"]]
    assert ft.groups(25) == [["m", "d", "p"], ["b"], ["c", "h", "s"]]
    assert ft.groups(50) == [["m", "d", "p"], ["b", "c", "h", "s"]]
    h = ft.hierarchy(10)
    assert h.labels == ["m", "d", "p", "b", "c", "h", "s", "m", "d|p", "b", "c|h", "s", "*"]
    ht = ft.hierarchy(10, labels="target")
    assert ht.labels[7:] == ["hi 50-60%", "hi 70-80%", "lo 50-60%", "lo 80-90%", "lo 90-100%", "*"]


def test_argmax_ties_take_the_lowest_target_code():
    # 'x': 2 and 2 -> t* = 'a' (code 0 of the sorted target values, whatever the row order)
    v = pd.Series(["x", "x", "x", "x", "y", "y", "y"])
    t = pd.Series(["b", "a", "b", "a", "b", "b", "a"])
    ft = frequency_table(v, t)
    assert ft.target_values == ["a", "b"]
    assert dict(zip(ft.values, ft.tstar.tolist())) == {"x": 0, "y": 1}
    assert dict(zip(ft.values, ft.share.tolist()))["x"] == 0.5
    # three-way tie among numeric targets: the smallest number wins
    ft = frequency_table(["z"] * 3, [3, 1, 2])
    assert ft.target_values == [1, 2, 3] and ft.tstar.tolist() == [0]


def test_buckets_are_exact_at_boundaries():
    # f = 29/100: float 100 * 0.29 = 28.999999999999996, the exact bucket at rho = 1 is 29
    ft = FrequencyTable(["v"], [0, 1, 2, 3], np.array([[29, 28, 28, 15]]))
    assert ft.buckets(1).tolist() == [29]
    # f = 7/10 at rho = 10 -> 7 ; f = 3/5 at rho = 20 -> 3 ; f = 1 -> clamped to 100/rho - 1
    ft = FrequencyTable(["a", "b", "c"], [0, 1], np.array([[7, 3], [3, 2], [5, 0]]))
    assert ft.buckets(10).tolist() == [7, 6, 9]
    assert ft.buckets(20).tolist() == [3, 3, 4]
    assert ft.buckets(100).tolist() == [0, 0, 0]
    assert ft.buckets(0.5).tolist() == [140, 120, 199]
    for rho in RHO_CANDIDATES:
        assert ft.buckets(rho).max() <= 100 // rho - 1


def test_buckets_match_a_rational_reference():
    from fractions import Fraction

    rng = np.random.default_rng(7)
    counts = rng.integers(0, 50, size=(400, 3))
    counts[counts.sum(axis=1) == 0, 0] = 1
    ft = FrequencyTable(list(range(400)), [0, 1, 2], counts)
    for rho in RHO_CANDIDATES:
        ref = [min(int(Fraction(100 * int(r.max()), rho * int(r.sum()))), 100 // rho - 1) for r in counts]
        assert ft.buckets(rho).tolist() == ref


@pytest.mark.parametrize("rho", [3, 7, 0, -10, 200, 30, 0.3, float("nan"), "10", True, None])
def test_rho_must_divide_100(rho):
    with pytest.raises(ValueError, match="rho"):
        frequency_hierarchy(["a", "b"], [0, 1], rho=rho)


def test_rho_error_names_rho_and_the_fix():
    with pytest.raises(ValueError) as e:
        check_rho(3)
    assert "rho = 3" in str(e.value) and "1, 2, 4, 5, 10, 20, 25, 50, 100" in str(e.value)
    assert check_rho(10.0) == 10 and check_rho(np.int64(25)) == 25


def test_missing_values_are_their_own_leaf():
    v = pd.Series(["a", None, "a", np.nan, "b"], dtype=object)
    t = pd.Series([0, 1, 0, 1, 1])
    h = frequency_hierarchy(v, t, rho=50)
    assert sorted(h.leaf_labels) == sorted(["a", "b", MISSING_LABEL])
    assert _groups_of(h) == {frozenset({"a"}), frozenset({"b", MISSING_LABEL})}
    np.testing.assert_array_equal(h.leaf_codes(v), [h.leaf_labels.index(x) for x in
                                                    ["a", "NaN", "a", "NaN", "b"]])
    # a missing target value is a target value of its own (sorted last)
    ft = frequency_table(["a", "a", "b"], ["x", None, None])
    assert ft.target_values[0] == "x" and pd.isna(ft.target_values[1])


def test_categorical_dtype_gives_the_same_hierarchy(adult):
    a = frequency_hierarchy(adult["occupation"], adult["income"], rho=5)
    cat = adult["occupation"].astype(pd.CategoricalDtype(list(adult["occupation"].unique()) + ["unused"]))
    b = frequency_hierarchy(cat, adult["income"], rho=5)
    assert a.equals(b) and a.leaves == b.leaves


def test_count_table():
    f = count_table(np.array([0, 1, 1, 2, 2, 2]), np.array([1, 0, 1, 1, 1, 0]), 4, 2)
    assert f.tolist() == [[0, 1], [1, 1], [1, 2], [0, 0]]


def test_group_labels_stay_distinct_when_values_contain_the_separator():
    v = ["a|b", "a", "b", "a"]
    t = [0, 1, 1, 1]
    h = frequency_hierarchy(v, t, rho=50)
    lv1 = [h.labels[i] for i in np.unique(h.levels[:, 1])]
    assert len(set(lv1)) == len(lv1) == 2


def test_build_hierarchies(adult):
    hs = build_hierarchies(adult, ["education", "race"], "income", rho=10)
    assert set(hs) == {"education", "race"}
    assert hs["education"].name == "education" and _groups_of(hs["education"]) == SIX_GROUPS
    cand = build_hierarchy_candidates(adult, ADULT_CATEGORICAL_QIS, "income")
    assert set(cand) == set(ADULT_CATEGORICAL_QIS)
    for col, by_rho in cand.items():
        assert sorted(by_rho) == sorted(RHO_CANDIDATES)
        for rho, h in by_rho.items():
            assert h.rho == rho and h.height == 2 and h.name == col
            assert set(h.leaf_labels) == set(adult[col].astype(str).unique())
            h.validate_against(adult[col])
    assert cand["education"][10].equals(hs["education"])
    with pytest.raises(InputError, match="no column 'nope'"):
        build_hierarchies(adult, ["nope"], "income")


# ============================================================================ lowest common node
def test_lowest_common_node_hand_made(edu10):
    rows = [["HS-grad"], ["HS-grad", "Some-college"], ["HS-grad", "Masters"], ["9th", "12th", "Preschool"],
            ["Bachelors"], ["Doctorate", "Prof-school"], ["Doctorate", "Bachelors"], []]
    node, level = edu10.lowest_common_node(_sets(edu10, rows))
    labels = edu10.labels_of(node).tolist()
    assert labels[0] == "HS-grad" and level[0] == 0 and node[0] == edu10.leaf_labels.index("HS-grad")
    assert set(labels[1].split("|")) == {"HS-grad", "Some-college"} and level[1] == 1
    assert labels[2] == "*" and level[2] == 2 and node[2] == edu10.root
    assert len(labels[3].split("|")) == 8 and level[3] == 1
    assert labels[4] == "Bachelors" and level[4] == 0
    assert set(labels[5].split("|")) == {"Doctorate", "Prof-school"} and level[5] == 1
    assert labels[6] == "*" and level[6] == 2
    assert node[7] == -1 and level[7] == -1 and labels[7] is None
    under = edu10.n_leaves_under_lcn(_sets(edu10, rows))
    assert under.tolist() == [1, 2, 16, 8, 1, 2, 16, 0]
    np.testing.assert_allclose(edu10.span(_sets(edu10, rows)), under / 16.0)
    assert edu10.leaves_under(edu10.root) == 16


def test_lowest_common_node_of_pair_and_in_leaf_order():
    h = Hierarchy.from_labels(list("abcde"), [["G", "X", "*"], ["H", "Y", "*"], ["G", "X", "*"],
                                              ["I", "X", "*"], ["H", "Y", "*"]])
    assert h.leaf_order().tolist() == [0, 2, 3, 1, 4]
    hs = h.in_leaf_order()
    assert hs.leaf_labels == ["a", "c", "d", "b", "e"]
    np.testing.assert_array_equal(hs.leaf_order(), np.arange(5))
    # with codes in leaf order, the min and max code of a class give its lowest common node
    rng = np.random.default_rng(3)
    sets = rng.random((200, 5)) < 0.4
    sets[np.arange(200), rng.integers(0, 5, 200)] = True
    lo = sets.argmax(axis=1)
    hi = 4 - sets[:, ::-1].argmax(axis=1)
    n1, l1 = hs.lowest_common_node(sets)
    n2, l2 = hs.lowest_common_node_of_pair(lo, hi)
    np.testing.assert_array_equal(n1, n2)
    np.testing.assert_array_equal(l1, l2)
    # the same sets, seen through the original hierarchy's leaf indices
    perm = h.leaf_order()
    orig = np.zeros_like(sets)
    orig[:, perm] = sets
    n3, l3 = h.lowest_common_node(orig)
    assert h.labels_of(n3).tolist() == hs.labels_of(n1).tolist()
    np.testing.assert_array_equal(l3, l1)


@st.composite
def random_hierarchies(draw):
    n = draw(st.integers(1, 14))
    height = draw(st.integers(1, 4))
    # node of every leaf at level 1, then parent of every node of level L at level L + 1
    width = n
    assign = np.arange(n)
    paths = [[] for _ in range(n)]
    for lev in range(1, height):
        w = draw(st.integers(1, max(1, width)))
        parent = np.array(draw(st.lists(st.integers(0, w - 1), min_size=width, max_size=width)))
        assign = parent[assign]
        for i in range(n):
            paths[i].append(f"L{lev}_{assign[i]}")
        width = w
    for i in range(n):
        paths[i].append("*")
    perm = draw(st.permutations(range(n)))
    leaves = [f"v{i}" for i in perm]
    paths = [paths[i] for i in perm]
    return Hierarchy.from_labels(leaves, paths)


def _brute_lcn(h: Hierarchy, row: np.ndarray) -> tuple[int, int]:
    present = [i for i in range(h.n_leaves) if row[i]]
    if not present:
        return -1, -1
    for lev in range(h.height + 1):
        nodes = {int(h.levels[i, lev]) for i in present}
        if len(nodes) == 1:
            return nodes.pop(), lev
    raise AssertionError("no common node")


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_hierarchies(), st.data())
def test_lowest_common_node_vs_brute_force(h, data):
    m = data.draw(st.integers(0, 12))
    sets = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=h.n_leaves,
                                                max_size=h.n_leaves), min_size=m, max_size=m)),
                    dtype=bool).reshape(m, h.n_leaves)
    node, level = h.lowest_common_node(sets)
    ref = [_brute_lcn(h, r) for r in sets]
    assert node.tolist() == [r[0] for r in ref]
    assert level.tolist() == [r[1] for r in ref]
    # the node covers every present leaf; no child of it does (brute force: leaves under)
    under = h.n_leaves_under_lcn(sets)
    assert under.tolist() == [int((h.levels[:, lv] == nd).sum()) if nd >= 0 else 0 for nd, lv in ref]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_hierarchies())
def test_leaf_order_keeps_every_node_contiguous(h):
    order = h.leaf_order()
    assert sorted(order.tolist()) == list(range(h.n_leaves))
    pos = np.empty(h.n_leaves, dtype=np.int64)
    pos[order] = np.arange(h.n_leaves)
    for node in range(h.n_nodes):
        lev = h.node_level[node]
        p = np.sort(pos[h.levels[:, lev] == node])
        assert p.size == h.n_under[node] > 0
        assert p[-1] - p[0] == p.size - 1, (node, p)
        if lev == 1:  # within a group of leaves, the stored order is kept
            assert (np.diff(order[p]) > 0).all()
    # the tree's bookkeeping
    assert h.n_under[h.root] == h.n_leaves and h.parent[h.root] == -1
    assert (h.levels[:, 0] == np.arange(h.n_leaves)).all()


@settings(max_examples=100, deadline=None)
@given(random_hierarchies())
def test_arx_round_trip_random(tmp_path_factory, h):
    p = tmp_path_factory.mktemp("arx") / "h.csv"
    h.to_arx_csv(p)
    back = Hierarchy.from_arx_csv(p)
    assert back.equals(h)
    np.testing.assert_array_equal(back.levels, h.levels)
    assert back.labels == h.labels


# ============================================================================ ARX CSV files
def test_arx_round_trip_frequency_hierarchy(tmp_path, edu10):
    p = tmp_path / "education.csv"
    edu10.to_arx_csv(p)
    lines = p.read_text().splitlines()
    assert len(lines) == 16 and all(line.count(";") == 2 and line.endswith(";*") for line in lines)
    back = Hierarchy.from_arx_csv(p, column="education")
    assert back.equals(edu10)
    assert back.labels == edu10.labels
    np.testing.assert_array_equal(back.levels, edu10.levels)
    assert back.name == "education" and back.source == str(p)
    pd.testing.assert_frame_equal(back.to_frame(), edu10.to_frame())


def test_arx_quoting_round_trip(tmp_path):
    h = Hierarchy.from_labels(["a;b", 'say "hi"', "c"], [["g;1", "*"], ["g;1", "*"], ["c", "*"]])
    p = tmp_path / "q.csv"
    h.to_arx_csv(p)
    assert Hierarchy.from_arx_csv(p).equals(h)


def test_arx_unequal_depth_is_padded_and_empty_lines_ignored(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("\ufeffa;G;X;*\n\n  \nb;G;X;*\nc;H;*\r\nd;*;\n")
    h = Hierarchy.from_arx_csv(p, column="c")
    assert h.to_frame().values.tolist() == [["a", "G", "X", "*"], ["b", "G", "X", "*"],
                                             ["c", "H", "H", "*"], ["d", "d", "d", "*"]]
    assert h.height == 3


def _arx_error(tmp_path, text: str, name="bad.csv") -> str:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError) as e:
        Hierarchy.from_arx_csv(p, column="c")
    assert isinstance(e.value, GpuanonError)
    msg = str(e.value)
    assert str(p) in msg
    return msg


def test_arx_malformed_files(tmp_path):
    msg = _arx_error(tmp_path, "a;*\nb;*\n\nlonely\n")
    assert "line 4" in msg and "b;*" not in msg and "lonely;*" in msg
    msg = _arx_error(tmp_path, "a;G;*\nb;G;*\na;H;*\n")
    assert "'a' is listed twice" in msg and "lines 1 and 3" in msg and "one row per value" in msg
    msg = _arx_error(tmp_path, "a;G;*\nb;G;*\nc;G;ANY\n")
    assert "same root" in msg and "line 3" in msg and "'ANY'" in msg
    msg = _arx_error(tmp_path, "a;;*\n")
    assert "line 1" in msg and "field 2 is empty" in msg
    msg = _arx_error(tmp_path, "a;G;X;*\nb;G;Y;*\n")
    assert "'G' at level 1 has two parents" in msg and "line 1" in msg and "line 2" in msg
    msg = _arx_error(tmp_path, "\n\n")
    assert "no rows" in msg
    msg = _arx_error(tmp_path, 'a;"G;*\nb;G;*\n')
    assert "line" in msg
    p = tmp_path / "latin1.csv"
    p.write_bytes("é;*\n".encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8"):
        Hierarchy.from_arx_csv(p)
    with pytest.raises(InputError, match="cannot read"):
        Hierarchy.from_arx_csv(tmp_path / "missing.csv")


def test_validate_against_names_missing_values_and_the_fix(tmp_path):
    p = tmp_path / "zip.csv"
    masking_hierarchy(["13053", "13068"], name="zip").to_arx_csv(p)
    h = Hierarchy.from_arx_csv(p, column="zip")
    h.validate_against(pd.Series([13053, 13068, 13053]))  # integers match by text
    h.validate_against(["13053"])
    data = ["13053"] + [f"1400{i}" for i in range(7)]
    with pytest.raises(InputError) as e:
        h.validate_against(data)
    msg = str(e.value)
    assert "column 'zip'" in msg and "lacks 7 values" in msg
    assert "'14000', '14001', '14002', '14003', '14004' and 2 more" in msg
    assert f"add them to {p}" in msg
    with pytest.raises(InputError, match="'NaN'"):
        h.leaf_codes(pd.Series(["13053", None]))


# ============================================================================ masking
def test_masking_hierarchy_zip():
    h = masking_hierarchy(pd.Series(["13068", "13053", "14850", "13053"], name="zip"))
    assert h.name == "zip" and h.height == 5
    assert h.leaf_labels == ["13053", "13068", "14850"]
    assert h.to_frame().values.tolist() == [
        ["13053", "1305*", "130**", "13***", "1****", "*"],
        ["13068", "1306*", "130**", "13***", "1****", "*"],
        ["14850", "1485*", "148**", "14***", "1****", "*"],
    ]
    node, level = h.lowest_common_node(_sets(h, [["13053", "13068"], ["13053", "14850"],
                                                 ["13068"]]))
    assert h.labels_of(node).tolist() == ["130**", "1****", "13068"]
    assert level.tolist() == [2, 4, 0]
    np.testing.assert_array_equal(h.leaf_order(), np.arange(3))


def test_masking_hierarchy_options_and_errors():
    h = masking_hierarchy([13053, 13068], max_level=1)
    assert h.to_frame().values.tolist() == [["13053", "1305*", "*"], ["13068", "1306*", "*"]]
    assert masking_hierarchy(["12", "13"], max_level=0).height == 1
    assert masking_hierarchy(["12", "13"], max_level=2).equals(masking_hierarchy(["12", "13"]))
    h = masking_hierarchy(pd.Series(["123", None, "124"]))
    assert h.to_frame().values.tolist() == [["123", "12*", "1**", "*"], ["124", "12*", "1**", "*"],
                                            ["NaN", "NaN", "NaN", "*"]]
    with pytest.raises(InputError) as e:
        masking_hierarchy(pd.Series(["13053", "1305", "130531"], name="zip"))
    assert "column 'zip'" in str(e.value) and "one length" in str(e.value)
    assert "'1305' (4 characters)" in str(e.value)
    with pytest.raises(ValueError, match="max_level"):
        masking_hierarchy(["12"], max_level=3)


# ============================================================================ construction checks
def test_from_labels_rejects_bad_trees():
    with pytest.raises(InputError, match="listed twice"):
        Hierarchy.from_labels(["a", "a"], [["*"], ["*"]])
    with pytest.raises(InputError, match="same length"):
        Hierarchy.from_labels(["a", "b"], [["G", "*"], ["*"]])
    with pytest.raises(InputError, match="same root"):
        Hierarchy.from_labels(["a", "b"], [["*"], ["ANY"]])
    with pytest.raises(InputError, match="no leaves"):
        Hierarchy.from_labels([], [])
    with pytest.raises(ValueError, match="tree"):
        Hierarchy(["a", "b"], np.array([[0, 2, 3, 5], [1, 2, 4, 5]]), list("abGXY*"))


def test_to_frame_and_repr(edu10):
    f = edu10.to_frame()
    assert list(f.columns) == ["level0", "level1", "level2"] and len(f) == 16
    assert (f["level2"] == "*").all() and f["level0"].tolist() == edu10.leaf_labels
    assert "education" not in repr(edu10) or "n_leaves=16" in repr(edu10)
    assert "rho=10" in repr(edu10)


def test_lowest_common_node_input_checks(edu10):
    with pytest.raises(ValueError, match=r"\(m, 16\)"):
        edu10.lowest_common_node(np.zeros((2, 3), dtype=bool))
    node, level = edu10.lowest_common_node(np.zeros((0, 16), dtype=bool))
    assert node.shape == (0,) and level.shape == (0,)


# ============================================================================ GPU
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_usable(), reason=f"no usable GPU: {gpu_status()[1]}")
def test_cupy_equals_numpy(adult):
    import cupy as cp

    h = frequency_hierarchy(adult["occupation"], adult["income"], rho=5)
    hs = h.in_leaf_order()
    rng = np.random.default_rng(0)
    sets = rng.random((500, h.n_leaves)) < 0.2
    for hh in (h, Hierarchy.from_labels(h.leaves[::-1], h.to_frame().values[::-1, 1:].tolist()), hs):
        n_np, l_np = hh.lowest_common_node(sets)
        n_cp, l_cp = hh.lowest_common_node(cp.asarray(sets))
        assert isinstance(n_cp, cp.ndarray)
        np.testing.assert_array_equal(n_np, n_cp.get())
        np.testing.assert_array_equal(l_np, l_cp.get())
        np.testing.assert_array_equal(hh.n_leaves_under_lcn(sets), hh.n_leaves_under_lcn(cp.asarray(sets)).get())
    codes = rng.integers(0, 10, 10_000)
    tg = rng.integers(0, 3, 10_000)
    np.testing.assert_array_equal(count_table(codes, tg, 10, 3), count_table(cp.asarray(codes), cp.asarray(tg), 10, 3))


def test_from_codes_of_an_encoded_table(adult):
    """The engine's route: count the codes of the encoded table (no re-hashing of the text)."""
    from gpuanon.table.encoding import encode
    from gpuanon.table.schema import Schema

    cols = ["education", "occupation"]
    t = encode(adult, Schema.from_frame(adult, cols, sensitive="income", target="income"))
    for j, c in enumerate(cols):
        ft = FrequencyTable.from_codes(t.keys[j], t.columns[j].categories,
                                       (t.target, t.target_values), name=c)
        ref = frequency_table(adult[c], adult["income"], name=c)
        assert ft.values == ref.values == list(t.columns[j].categories)
        np.testing.assert_array_equal(ft.counts, ref.counts)
        assert ft.hierarchy(10).equals(ref.hierarchy(10))
