"""Information-loss metrics (SPEC section 7) against plain brute-force references.

Every metric is recomputed here with plain Python loops over records (no numpy tricks, no
library code), on hand-made tables whose answers are also worked out by hand in the comments,
and then on Adult, where the anonymizer's own summary and the output-table summary must agree.
"""

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from gpuanon import Mondrian
from gpuanon import backend as B
from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, load_adult
from gpuanon.metrics import (
    compute_metrics,
    entropy_bits,
    entropy_loss,
    ncp,
    precision,
    summary_from_labels,
    summary_from_output,
    uncertainty_coefficient,
)

METRIC_KEYS = ("entropy_loss", "entropy_coefficient_before", "entropy_coefficient_after", "entropy_loss_labels",
               "entropy_coefficient_before_labels", "entropy_coefficient_after_labels", "gionis_tassa",
               "ncp", "dm", "c_avg", "cm", "precision", "class_size")


# ---------------------------------------------------------------------------------------------
# plain references: loops over records, nothing clever
# ---------------------------------------------------------------------------------------------

def ref_entropy(values):
    """Shannon entropy (bits) of the empirical distribution of a list of values."""
    n = len(values)
    h = 0.0
    for c in Counter(values).values():
        p = c / n
        h -= p * math.log2(p)
    return h


def ref_u(target, x):
    """U(T|X) = (H(T) - H(T|X)) / H(T), by counting (x, t) pairs record by record."""
    n = len(target)
    h_t = ref_entropy(target)
    if h_t == 0:
        return 0.0
    by_x = {}
    for xi, ti in zip(x, target):
        by_x.setdefault(xi, []).append(ti)
    h_t_given_x = 0.0
    for ts in by_x.values():
        h_t_given_x += len(ts) / n * ref_entropy(ts)
    return (h_t - h_t_given_x) / h_t


def cell_set(cell, kind, original_values):
    """The set of ORIGINAL values a generalized cell stands for.

    numeric: every original value v with lo <= v <= hi (cell: number, 'lo-hi' text or (lo, hi));
    categorical: the '|'-joined set. A missing cell stands for the missing value only.
    """
    if kind == "numeric":
        if isinstance(cell, tuple):
            lo, hi = cell
        elif cell is None or (isinstance(cell, float) and math.isnan(cell)):
            return ("<missing>",)
        elif isinstance(cell, str) and cell.startswith("["):  # '[lo, hi]': a negative lower bound
            lo, hi = (float(p) for p in cell.strip("[]").split(","))
        elif isinstance(cell, str) and "-" in cell[1:]:  # 'lo-hi' with lo >= 0
            lo, hi = (float(p) for p in cell.split("-"))
        else:
            lo = hi = float(cell)
        if isinstance(lo, float) and math.isnan(lo):
            return ("<missing>",)
        return tuple(v for v in original_values if not _missing(v) and lo <= v <= hi)
    text = "NaN" if _missing(cell) else str(cell)
    known = {str(v) for v in original_values}
    return (text,) if text in known else tuple("NaN" if p == "\\N" else p for p in text.split("|"))


def _missing(v):
    return v is None or (isinstance(v, float) and math.isnan(v))


def _key(v, kind):
    """Original value as compared against cell_set entries."""
    if _missing(v):
        return "<missing>" if kind == "numeric" else "NaN"
    return float(v) if kind == "numeric" else str(v)


def ref_domain(original_col, kind, n_bins=256):
    """The element of D_X of every original value, by plain loops (section 7, amended).

    categorical: the value itself (missing is 'NaN'); numeric with at most n_bins distinct present
    values: the value; more: equal-frequency bins, edge i = the sorted present rows' value at
    position i * n // n_bins, a value's bin = (edges <= value) - 1; missing: its own element.
    """
    keys = [_key(v, kind) for v in original_col]
    if kind == "categorical":
        return keys
    present = sorted(v for v in keys if v != "<missing>")
    if len(set(present)) <= n_bins:
        return keys
    edges = sorted({present[i * len(present) // n_bins] for i in range(n_bins)})
    out = []
    for v in keys:
        out.append("<missing>" if v == "<missing>" else sum(1 for e in edges if e <= v) - 1)
    return out


def ref_u_from_joint(q):
    """U(T|X) of a dict {(x, t): mass}, by plain loops."""
    n = sum(q.values())
    px, pt = Counter(), Counter()
    for (x, t), v in q.items():
        px[x] += v
        pt[t] += v
    h_t = -sum(v / n * math.log2(v / n) for v in pt.values() if v > 0)
    if h_t == 0:
        return 0.0
    h_xt = -sum(v / n * math.log2(v / n) for v in q.values() if v > 0)
    h_x = -sum(v / n * math.log2(v / n) for v in px.values() if v > 0)
    return (h_t - (h_xt - h_x)) / h_t


def ref_u_prime(original, out, c, kind, target, n_bins=256, cells=None):
    """U'(T | X) of section 7 (amended), record by record: every output row spreads its unit mass
    over D_X in proportion to the original rows inside its cell; suppressed rows (the original's
    target counts minus the output's) count with the cell '*'."""
    orig = original[c].tolist()
    dom = ref_domain(orig, kind, n_bins)
    keys = [_key(v, kind) for v in orig]
    distinct = _distinct(orig, kind)
    cells = out_cells(out, c, kind) if cells is None else cells
    q = Counter()
    spread = {}  # cell -> {element of D_X: share of the cell's original rows}; cells repeat per class
    for cell, t in zip(cells, out[target].tolist()):
        ck = ("<missing>",) if _missing(cell) else cell
        if ck not in spread:
            if kind == "categorical" and _key(cell, kind) == "*" and "*" not in keys:
                members = set(keys)
            else:
                members = set(cell_set(cell, kind, distinct))
            inside = [i for i, kk in enumerate(keys) if kk in members]
            share = Counter()
            for i in inside:
                share[dom[i]] += 1.0 / len(inside)
            spread[ck] = share
        for x, w in spread[ck].items():
            q[(x, t)] += w
    sup = Counter(original[target].tolist())
    sup.subtract(Counter(out[target].tolist()))
    for t, n_t in sup.items():
        for i in range(len(keys)):
            q[(dom[i], t)] += n_t / len(keys)
    return ref_u_from_joint(q)


def ref_gionis_tassa(original_col, out_cells, kind):
    """sum over output records of H(v | a) with P(v | a) counted over the ORIGINAL column."""
    counts = Counter(_key(v, kind) for v in original_col)
    distinct = _distinct(original_col, kind)
    total = 0.0
    for cell in out_cells:
        a = set(cell_set(cell, kind, distinct))
        mass = sum(counts[v] for v in a)
        for v in a:
            p = counts[v] / mass
            if p > 0:
                total -= p * math.log2(p)
    return total


def ref_ncp_column(original_col, out_cells, kind):
    """Mean over output records of the NCP of its cell on one column."""
    present = [v for v in original_col if not _missing(v)]
    distinct = _distinct(original_col, kind)
    domain = len(distinct)
    total = 0.0
    for cell in out_cells:
        if kind == "numeric":
            a = cell_set(cell, kind, distinct)
            if a == ("<missing>",) or len(a) == 0:
                continue
            lo, hi = _bounds(cell)
            total += (hi - lo) / (max(present) - min(present))
        else:
            a = cell_set(cell, kind, distinct)
            total += 0.0 if len(a) == 1 else len(a) / domain
    return total / len(out_cells)


def _distinct(original_col, kind):
    """Distinct original values: sorted numbers (numeric) or the categories in first-seen order."""
    if kind == "numeric":
        return sorted({v for v in original_col if not _missing(v)})
    return list(dict.fromkeys("NaN" if _missing(v) else v for v in original_col))


def _bounds(cell):
    if isinstance(cell, tuple):
        return cell
    if isinstance(cell, str) and cell.startswith("["):  # "[lo, hi]" (a bound may be negative)
        lo, hi = cell[1:-1].split(",")
        return float(lo), float(hi)
    if isinstance(cell, str) and "-" in cell[1:]:
        lo, hi = cell.split("-")
        return float(lo), float(hi)
    return float(cell), float(cell)


def ref_classes(out, qi_columns):
    """Equivalence classes of the output: lists of row positions with equal QI tuples."""
    columns = [out[c].tolist() for c in qi_columns]
    classes = {}
    for i in range(len(out)):
        key = tuple("<missing>" if _missing(col[i]) else str(col[i]) for col in columns)
        classes.setdefault(key, []).append(i)
    return list(classes.values())


def ref_dm(classes, n_suppressed, n_original):
    return sum(len(ec) ** 2 for ec in classes) + n_suppressed * n_original


def ref_cm(classes, target_out, n_suppressed, n_original):
    """(sum_EC (|EC| - count of its majority target value) + suppressed) / N; a tie keeps ONE value."""
    penalty = 0
    for ec in classes:
        counts = Counter(target_out[i] for i in ec)
        penalty += len(ec) - max(counts.values())
    return (penalty + n_suppressed) / n_original


def ref_precision(levels, heights):
    n, m = len(levels), len(heights)
    s = 0.0
    for row in levels:
        for j, h in enumerate(row):
            s += h / heights[j]
    return 1.0 - s / (n * m)


def out_cells(out, c, kind):
    """Per-record generalized cell of QI c, whatever the format (minmax pairs become tuples)."""
    if c in out.columns:
        return [None if _missing(v) else v for v in out[c].tolist()]
    return [(float(a), float(b)) for a, b in zip(out[f"{c}_min"], out[f"{c}_max"])]


def reference_metrics(out, original, qis, kinds, target, k):
    """Every section-7 metric of an output table, by plain loops (the test's own oracle)."""
    qcols = []
    for c in qis:
        qcols += [c] if c in out.columns else [f"{c}_min", f"{c}_max"]
    classes = ref_classes(out, qcols)
    n_in, n_out = len(original), len(out)
    n_sup = n_in - n_out
    t_out, t_orig = out[target].tolist(), original[target].tolist()
    before, after, gt, ncps, den = {}, {}, {}, {}, 0.0
    before_l, after_l = {}, {}
    for c in qis:
        orig = original[c].tolist()
        cells = out_cells(out, c, kinds[c])
        before[c] = ref_u(t_orig, ref_domain(orig, kinds[c]))
        after[c] = ref_u_prime(original, out, c, kinds[c], target)
        before_l[c] = ref_u(t_orig, [_key(v, kinds[c]) for v in orig])
        after_l[c] = ref_u(t_out, [str(x) for x in cells])
        gt[c] = ref_gionis_tassa(orig, cells, kinds[c])
        ncps[c] = ref_ncp_column(orig, cells, kinds[c])
        den += n_out * ref_entropy([_key(v, kinds[c]) for v in orig])
    return {
        "n_classes": len(classes), "n_suppressed": n_sup,
        "entropy_coefficient_before": before, "entropy_coefficient_after": after,
        "entropy_loss": 1.0 - sum(after.values()) / sum(before.values()),
        "entropy_coefficient_before_labels": before_l, "entropy_coefficient_after_labels": after_l,
        "entropy_loss_labels": 1.0 - sum(after_l.values()) / sum(before_l.values()),
        "gionis_tassa": {"total_bits": sum(gt.values()), "normalized": sum(gt.values()) / den,
                         "per_column_bits": gt},
        "ncp": sum(ncps.values()) / len(qis), "ncp_per_column": ncps,
        "dm": ref_dm(classes, n_sup, n_in), "c_avg": (n_out / len(classes)) / k,
        "cm": ref_cm(classes, t_out, n_sup, n_in),
    }


def assert_close(got, want, path="", rel=1e-9, abs_=1e-9):
    """Recursive comparison of metric dicts (floats to rel/abs tolerance, lists exactly)."""
    if isinstance(want, dict):
        assert isinstance(got, dict), path
        for key in want:
            assert key in got, f"{path}.{key} missing"
            assert_close(got[key], want[key], f"{path}.{key}", rel, abs_)
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=rel, abs=abs_), path
    else:
        assert got == want, path


# ---------------------------------------------------------------------------------------------
# hand-made table 1: 8 people, 3 classes, no suppression
# ---------------------------------------------------------------------------------------------

T1_KINDS = {"age": "numeric", "color": "categorical"}


@pytest.fixture
def t1():
    original = pd.DataFrame({
        "age": [20, 25, 30, 35, 40, 45, 50, 60],  # range 60 - 20 = 40
        "color": ["a", "a", "b", "b", "c", "c", "a", "d"],  # domain of 4: a x3, b x2, c x2, d x1
        "income": ["lo", "lo", "hi", "lo", "hi", "hi", "lo", "hi"],  # 4 lo, 4 hi: H(T) = 1 bit
    })
    # classes A = rows {0, 1}, B = {2, 3, 4}, C = {5, 6, 7}; output rows shuffled on purpose
    rows = [  # (original row, age cell, color cell)
        (5, "45-60", "a|c|d"), (0, "20-25", "a"), (3, "30-40", "b|c"), (6, "45-60", "a|c|d"),
        (2, "30-40", "b|c"), (1, "20-25", "a"), (7, "45-60", "a|c|d"), (4, "30-40", "b|c"),
    ]
    out = pd.DataFrame({"age": [r[1] for r in rows], "color": [r[2] for r in rows],
                        "income": [original["income"][r[0]] for r in rows]})
    return original, out


def t1_metrics(original, out, **kw):
    s = summary_from_output(out, original, ["age", "color"], T1_KINDS, target="income")
    return compute_metrics(s, k=2, **kw)


def test_entropy_coefficient_by_hand(t1):
    original, out = t1
    m = t1_metrics(original, out)
    # before: age has 8 distinct values -> H(T|age) = 0 -> U = 1.
    # color: a -> (lo, lo, lo) H = 0; b -> (hi, lo) H = 1; c -> (hi, hi) 0; d -> (hi) 0;
    #   H(T|color) = 2/8 * 1 = 0.25 -> U = 0.75.
    # after (section 7 as amended: each row's mass spread over the original rows inside its cell):
    # age: A [20, 25] covers 20, 25 (lo, lo): each value gets lo 1. B [30, 40] covers 30, 35, 40 and
    #   holds (hi, lo, hi): each value gets hi 2/3, lo 1/3; C [45, 60] likewise -> H(T|X') =
    #   6/8 * h(1/3) = 0.688722 -> U' = 0.311278.
    # color (a 3, b 2, c 2, d 1): A {a} (lo, lo) -> a: lo 2. B {b, c}: n = 4, w = (1/2, 1/2), rows
    #   (hi, lo, hi) -> b: hi 1, lo 1/2; c: hi 1, lo 1/2. C {a, c, d}: n = 6, w = (1/2, 1/3, 1/6), rows
    #   (hi, lo, hi) -> a: hi 1, lo 1/2; c: hi 2/3, lo 1/3; d: hi 1/3, lo 1/6.
    #   totals a (lo 5/2, hi 1), b (1/2, 1), c (5/6, 5/3), d (1/6, 1/3):
    #   H(T|X') = 3.5/8 h(5/7) + (1.5 + 2.5 + 0.5)/8 h(1/3) = 0.894157 -> U' = 0.105843.
    # loss = 1 - (0.311278 + 0.105843) / 1.75 = 0.761645.
    def h(p):
        return -p * math.log2(p) - (1 - p) * math.log2(1 - p)

    u_age = 1 - 0.75 * h(1 / 3)
    u_color = 1 - (3.5 / 8 * h(5 / 7) + 4.5 / 8 * h(1 / 3))
    assert u_age == pytest.approx(0.311278, abs=1e-6) and u_color == pytest.approx(0.105843, abs=1e-6)
    assert m["entropy_coefficient_before"] == pytest.approx({"age": 1.0, "color": 0.75})
    assert m["entropy_coefficient_after"] == pytest.approx({"age": u_age, "color": u_color})
    assert m["entropy_loss"] == pytest.approx(1 - (u_age + u_color) / 1.75)
    assert m["entropy_loss"] == pytest.approx(0.761645, abs=1e-6)
    # the label reading (diagnostic): both columns induce the partition A, B, C -> U = 0.311278 each
    assert m["entropy_coefficient_before_labels"] == pytest.approx({"age": 1.0, "color": 0.75})
    assert m["entropy_coefficient_after_labels"] == pytest.approx({"age": u_age, "color": u_age})
    assert m["entropy_loss_labels"] == pytest.approx(0.644254, abs=1e-6)
    # the plain record loops agree
    t = original["income"].tolist()
    assert ref_u(t, original["age"].tolist()) == pytest.approx(1.0)
    assert ref_u(t, original["color"].tolist()) == pytest.approx(0.75)
    assert ref_u(out["income"].tolist(), out["color"].tolist()) == pytest.approx(u_age)
    assert ref_u_prime(original, out, "color", "categorical", "income") == pytest.approx(u_color)
    assert ref_u_prime(original, out, "age", "numeric", "income") == pytest.approx(u_age)


def test_uncertainty_coefficient_and_entropy_bits_match_loops():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 5, 300).tolist()
    t = [(xi * 3 + int(rng.integers(0, 3))) % 4 for xi in x]  # T depends on X, noisily
    joint = np.zeros((5, 4))
    for xi, ti in zip(x, t):
        joint[xi, ti] += 1
    assert uncertainty_coefficient(joint) == pytest.approx(ref_u(t, x), rel=1e-12)
    assert entropy_bits(list(Counter(t).values())) == pytest.approx(ref_entropy(t), rel=1e-12)
    # a constant target carries no information: U = 0, not a division by zero
    assert uncertainty_coefficient([[3, 0], [5, 0]]) == 0.0
    # X determines T: U = 1; X independent of T: U = 0
    assert uncertainty_coefficient([[4, 0], [0, 4]]) == pytest.approx(1.0)
    assert uncertainty_coefficient([[2, 2], [3, 3]]) == pytest.approx(0.0, abs=1e-12)


def test_entropy_loss_thesis_mgm_arithmetic():
    # thesis table 5.3 (MGM): sum before = 1.132, sum after = 0.935; 1 - 0.935 / 1.132 = 0.17403
    before = [0.361, 0.221, 0.266, 0.279, 0.005]
    after = [0.259, 0.242, 0.209, 0.218, 0.007]
    assert entropy_loss(before, after) == pytest.approx(0.174, abs=1e-3)
    assert entropy_loss(before, after) == pytest.approx(1 - sum(after) / sum(before), rel=1e-12)
    assert entropy_loss([0.0, 0.0], [0.1, 0.2]) == 0.0  # nothing to lose
    assert entropy_loss(before, before) == pytest.approx(0.0, abs=1e-15)


def test_gionis_tassa_by_hand(t1):
    original, out = t1
    m = t1_metrics(original, out)["gionis_tassa"]
    # age (8 distinct values, count 1 each): A [20, 25] -> 2 values, 1 bit x 2 records = 2;
    #   B [30, 40] -> 30, 35, 40: log2 3 = 1.584963 x 3; C [45, 60] -> 45, 50, 60: same x 3.
    #   total = 2 + 6 log2 3 = 11.509775.
    # color (a 3, b 2, c 2, d 1): A {a} -> 0; B {b, c} -> counts 2, 2: 1 bit x 3 = 3;
    #   C {a, c, d} -> 3/6, 2/6, 1/6: 1.459148 x 3 = 4.377444. total = 7.377444.
    # normalizer: H(age) = log2 8 = 3, H(color) = 1.905639; 8 * (3 + 1.905639) = 39.245112.
    age = 2 + 6 * math.log2(3)
    h_c = -(0.5 * math.log2(0.5) + (1 / 3) * math.log2(1 / 3) + (1 / 6) * math.log2(1 / 6))
    color = 3 + 3 * h_c
    assert age == pytest.approx(11.509775, abs=1e-6) and color == pytest.approx(7.377444, abs=1e-6)
    assert m["per_column_bits"] == pytest.approx({"age": age, "color": color})
    assert m["total_bits"] == pytest.approx(age + color)
    h_color = ref_entropy(original["color"].tolist())
    assert h_color == pytest.approx(1.905639, abs=1e-6)
    assert m["normalized"] == pytest.approx((age + color) / (8 * (3 + h_color)))
    # plain loops
    assert ref_gionis_tassa(original["age"].tolist(), out["age"].tolist(), "numeric") == pytest.approx(age)
    assert ref_gionis_tassa(original["color"].tolist(), out["color"].tolist(), "categorical") == pytest.approx(color)


def test_gionis_tassa_counts_over_the_original_column():
    # P(v | a) is counted over the ORIGINAL column, not over the class's own members:
    # the class {0, 1} generalized to 20-30 also "covers" the two 25s of another class.
    original = pd.DataFrame({"age": [20, 30, 25, 25, 40, 40], "c": ["a", "b", "a", "a", "a", "c"],
                             "y": [0, 1, 0, 1, 0, 1]})
    out = pd.DataFrame({"age": ["20-30", "20-30", "25", "25", "40", "40"],
                        "c": ["a|b", "a|b", "a", "a", "a|c", "a|c"], "y": [0, 1, 0, 1, 0, 1]})
    kinds = {"age": "numeric", "c": "categorical"}
    m = compute_metrics(summary_from_output(out, original, ["age", "c"], kinds, target="y"), k=2)
    gt = m["gionis_tassa"]
    # age: [20, 30] covers 20 (1), 25 (2), 30 (1): H = 1.5 bits x 2 records = 3 (members only: 2);
    #   {25}, {40}: 0.
    # c (a 4, b 1, c 1): {a, b} -> 4/5, 1/5: h(0.2) = 0.721928 x 2; {a}: 0; {a, c}: 0.721928 x 2.
    h02 = -(0.2 * math.log2(0.2) + 0.8 * math.log2(0.8))
    assert gt["per_column_bits"]["age"] == pytest.approx(3.0)
    assert gt["per_column_bits"]["c"] == pytest.approx(4 * h02)
    assert 4 * h02 == pytest.approx(2.887712, abs=1e-6)
    # normalized by sum_j N * H(column j): H(age) = 1.918296, H(c) = 1.251629 -> 6 * 3.169925
    den = 6 * (ref_entropy(original["age"].tolist()) + ref_entropy(original["c"].tolist()))
    assert den == pytest.approx(19.019550, abs=1e-5)
    assert gt["normalized"] == pytest.approx((3.0 + 4 * h02) / den)
    assert ref_gionis_tassa(original["age"].tolist(), out["age"].tolist(), "numeric") == pytest.approx(3.0)


def test_gionis_tassa_single_category_classes_are_exactly_zero():
    # every class holds one category, of 37, 39 and 47 rows: counts that leave a rounding residue in
    # log2(s) - s log2(s) / s; the conditional entropy is exactly 0 on every backend (the first
    # H100 run found 5.8e-11 on the CPU against 3.9e-11 on the GPU for Adult's sex)
    original = pd.DataFrame({"c": np.repeat(["a", "b", "c"], [37, 39, 47]), "y": np.arange(123) % 2})
    m = compute_metrics(summary_from_output(original.copy(), original, ["c"], {"c": "categorical"}, target="y"), k=2)
    assert m["gionis_tassa"]["per_column_bits"]["c"] == 0.0


def test_ncp_by_hand_with_weights(t1):
    original, out = t1
    # age, range 40: A 5/40 = 0.125 (x2), B 10/40 = 0.25 (x3), C 15/40 = 0.375 (x3)
    #   -> (0.25 + 0.75 + 1.125) / 8 = 0.265625
    # color, domain 4: A one value -> 0; B {b, c} -> 2/4 (x3); C {a, c, d} -> 3/4 (x3)
    #   -> (1.5 + 2.25) / 8 = 0.46875
    m = t1_metrics(original, out)
    assert m["ncp_per_column"] == pytest.approx({"age": 0.265625, "color": 0.46875})
    assert m["ncp"] == pytest.approx((0.265625 + 0.46875) / 2)  # 0.3671875, equal weights
    assert m["ncp_weights"] == pytest.approx({"age": 0.5, "color": 0.5})
    # weights are normalized: (3, 1) and (6, 2) both mean (0.75, 0.25) -> 0.19921875 + 0.1171875
    for w in ({"age": 3, "color": 1}, {"age": 6.0, "color": 2.0}):
        mw = t1_metrics(original, out, weights=w)
        assert mw["ncp"] == pytest.approx(0.31640625)
        assert mw["ncp_weights"] == pytest.approx({"age": 0.75, "color": 0.25})
    # a QI left out of the weights weighs 0
    assert t1_metrics(original, out, weights={"age": 1})["ncp"] == pytest.approx(0.265625)
    # plain loops
    assert ref_ncp_column(original["age"].tolist(), out["age"].tolist(), "numeric") == pytest.approx(0.265625)
    assert ref_ncp_column(original["color"].tolist(), out["color"].tolist(), "categorical") == pytest.approx(0.46875)
    # the labels-based helper agrees on the same partition (labels per ORIGINAL row)
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2])
    assert ncp(original, ["age", "color"], labels, T1_KINDS) == pytest.approx(0.3671875)
    assert ncp(original, ["age", "color"], labels, T1_KINDS, weights={"age": 3, "color": 1}) == pytest.approx(0.31640625)


def test_ncp_single_value_classes_are_zero():
    original = pd.DataFrame({"x": [1, 1, 5, 5, 9, 9], "c": ["u", "u", "v", "v", "w", "w"], "y": [0, 1] * 3})
    out = original.copy()  # every class one value on every QI: nothing generalized
    kinds = {"x": "numeric", "c": "categorical"}
    m = compute_metrics(summary_from_output(out, original, ["x", "c"], kinds, target="y"), k=2)
    assert m["ncp"] == 0.0 and m["ncp_per_column"] == {"x": 0.0, "c": 0.0}
    assert m["gionis_tassa"]["total_bits"] == pytest.approx(0.0, abs=1e-12)
    assert m["entropy_loss"] == pytest.approx(0.0, abs=1e-12)
    assert m["dm"] == 3 * 2 ** 2 and m["n_classes"] == 3
    # one class holding everything: numeric NCP 1, categorical |domain| / |domain| = 1
    full = pd.DataFrame({"x": ["1-9"] * 6, "c": ["u|v|w"] * 6, "y": original["y"]})
    m = compute_metrics(summary_from_output(full, original, ["x", "c"], kinds, target="y"), k=2)
    assert m["ncp"] == pytest.approx(1.0)
    assert m["dm"] == 36 and m["c_avg"] == pytest.approx(3.0)


def test_dm_cavg_cm_by_hand(t1):
    original, out = t1
    m = t1_metrics(original, out)
    # sizes 2, 3, 3: DM = 4 + 9 + 9 = 22; C_avg = (8 / 3) / 2 = 1.333333
    # CM: A (lo, lo) 0; B (hi, lo, hi) 1; C (hi, lo, hi) 1 -> 2 / 8 = 0.25
    assert m["n_classes"] == 3 and m["n_suppressed"] == 0
    assert m["dm"] == 22.0
    assert m["c_avg"] == pytest.approx(4 / 3)
    assert m["cm"] == pytest.approx(0.25)
    classes = ref_classes(out, ["age", "color"])
    assert sorted(map(len, classes)) == [2, 3, 3]
    assert ref_dm(classes, 0, 8) == 22 and ref_cm(classes, out["income"].tolist(), 0, 8) == 0.25


def test_cm_ties_and_suppression():
    # 7 original rows; the last one (age missing) is suppressed: the output has 6 rows.
    original = pd.DataFrame({"age": [10, 11, 12, 13, 20, 21, np.nan],
                             "y": ["a", "a", "b", "b", "a", "b", "a"]})
    out = pd.DataFrame({"age": ["10-13"] * 4 + ["20-21"] * 2, "y": ["a", "a", "b", "b", "a", "b"]})
    m = compute_metrics(summary_from_output(out, original, ["age"], {"age": "numeric"}, target="y"), k=2)
    # class 1: 2 a, 2 b -> a tie: ONE majority kept, penalty 2 (not 4, not 0)
    # class 2: 1 a, 1 b -> penalty 1; suppressed 1.  CM = (2 + 1 + 1) / 7 = 0.571429
    # DM = 4^2 + 2^2 + 1 * 7 = 27;  C_avg = (6 / 2) / 2 = 1.5
    assert m["n_suppressed"] == 1 and m["n_rows_out"] == 6
    assert m["cm"] == pytest.approx(4 / 7)
    assert m["cm"] != pytest.approx((4 + 2 + 1) / 7) and m["cm"] != pytest.approx(1 / 7)
    assert m["dm"] == 27.0
    assert m["c_avg"] == pytest.approx(1.5)
    classes = ref_classes(out, ["age"])
    assert ref_cm(classes, out["y"].tolist(), 1, 7) == pytest.approx(4 / 7)
    assert ref_dm(classes, 1, 7) == 27
    # NCP over the non-missing range 10..21 (11): (4 * 3/11 + 2 * 1/11) / 6 = 14/66 = 0.212121
    assert m["ncp"] == pytest.approx(14 / 66)


def test_precision_by_hand():
    # N = 3 records, 2 QIs with hierarchies of heights 2 and 4.
    levels = [[0, 1], [1, 2], [2, 4]]
    heights = [2, 4]
    # sum h / |DGH| = 0 + 0.25 + 0.5 + 0.5 + 1 + 1 = 3.25; precision = 1 - 3.25 / 6 = 0.458333
    assert precision(levels, heights) == pytest.approx(1 - 3.25 / 6)
    assert precision(levels, heights) == pytest.approx(ref_precision(levels, heights))
    assert precision([[0, 0], [0, 0]], heights) == 1.0  # nothing generalized
    assert precision([[2, 4]], heights) == 0.0  # everything at the top of its hierarchy
    rng = np.random.default_rng(3)
    hs = [3, 5, 2]
    lv = [[int(rng.integers(0, h + 1)) for h in hs] for _ in range(40)]
    assert precision(lv, hs) == pytest.approx(ref_precision(lv, hs), rel=1e-12)


def test_precision_through_compute_metrics(t1):
    # compute_metrics scores precision when a column summary carries hierarchy levels per class
    original, out = t1
    s = summary_from_output(out, original, ["age", "color"], T1_KINDS, target="income")
    assert compute_metrics(s, k=2)["precision"] is None  # no hierarchy: no precision
    # classes in order of first appearance in `out`: C (3 rows), A (2), B (3)
    assert s.sizes.tolist() == [3, 2, 3]
    s.columns[1].levels = np.array([2, 0, 1])
    s.columns[1].height = 2
    levels = [[2]] * 3 + [[0]] * 2 + [[1]] * 3  # one level per record
    # 1 - (3 * 1 + 2 * 0 + 3 * 0.5) / 8 = 0.4375
    assert compute_metrics(s, k=2)["precision"] == pytest.approx(ref_precision(levels, [2]))
    assert ref_precision(levels, [2]) == pytest.approx(0.4375)


def test_minmax_output_is_scored_like_range_output(t1):
    original, out = t1
    lo = [float(c.split("-")[0]) for c in out["age"]]
    hi = [float(c.split("-")[1]) for c in out["age"]]
    mm = pd.DataFrame({"age_min": lo, "age_max": hi, "color": out["color"], "income": out["income"]})
    a = t1_metrics(original, out)
    b = compute_metrics(summary_from_output(mm, original, ["age", "color"], T1_KINDS, target="income"), k=2)
    assert_close(b, {k_: v for k_, v in a.items() if k_ != "class_size"})


# ---------------------------------------------------------------------------------------------
# Adult: the anonymizer's own summary, the output-table summary and the plain loops agree
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def adult():
    return load_adult()


def _fit(df, fmt, k=5, **kw):
    m = Mondrian(k=k, quasi_identifiers=ADULT_QUASI_IDENTIFIERS, sensitive="income", target="income",
                 output_format=fmt, backend="cpu", progress=False, **kw)
    return m, m.fit_transform(df)


@pytest.mark.parametrize("fmt", ["range", "minmax"])
def test_summary_paths_agree_on_adult(adult, fmt):
    m, out = _fit(adult, fmt)
    a = compute_metrics(summary_from_labels(m.table_, m.labels_), k=5)
    b = compute_metrics(summary_from_output(out, adult, ADULT_QUASI_IDENTIFIERS, m.schema_.kinds,
                                            target="income"), k=5)
    assert set(a) == set(b)
    assert_close(b, a)
    assert_close(m.report_["metrics"], a)
    assert a["n_classes"] == m.report_["n_classes"]
    assert a["n_rows_out"] == len(out) == len(adult) - a["n_suppressed"]
    assert a["class_size"]["min"] >= 5
    assert sum(a["class_size"]["histogram"]["counts"]) == a["n_classes"]
    # the labels-based NCP helper agrees with the summary's NCP
    assert ncp(adult, ADULT_QUASI_IDENTIFIERS, m.labels_, m.schema_.kinds) == pytest.approx(a["ncp"], rel=1e-9)


def test_adult_slice_against_plain_loops(adult):
    df = adult.head(1500)
    m, out = _fit(df, "range")
    want = reference_metrics(out, df, ADULT_QUASI_IDENTIFIERS, m.schema_.kinds, "income", k=5)
    assert_close(m.report_["metrics"], want)


def _adult_with_missing(adult):
    df = adult.head(3000).copy()
    df["age"] = df["age"].astype(float)
    df["education-num"] = df["education-num"].astype(float)
    df.loc[[5, 17, 250], "age"] = np.nan  # a block of 3 < k: suppressed
    df.loc[[40, 41], "education-num"] = np.nan  # a block of 2 < k: suppressed
    df.loc[list(range(100, 108)), ["age", "education-num"]] = np.nan  # a block of 8 >= k: kept
    return df


@pytest.mark.parametrize("fmt", ["range", "minmax"])
def test_suppressed_rows_enter_dm_and_cm(adult, fmt):
    df = _adult_with_missing(adult)
    m, out = _fit(df, fmt, max_suppression=0.5)
    n = len(df)
    assert m.report_["n_suppressed"] == 5 and len(out) == n - 5
    a = compute_metrics(summary_from_labels(m.table_, m.labels_), k=5)
    b = compute_metrics(summary_from_output(out, df, ADULT_QUASI_IDENTIFIERS, m.schema_.kinds,
                                            target="income"), k=5)
    assert_close(b, a)
    assert a["n_suppressed"] == b["n_suppressed"] == 5
    qcols = [c for c in out.columns if c.split("_m")[0] in ADULT_QUASI_IDENTIFIERS]
    classes = ref_classes(out, qcols)
    sizes = [len(ec) for ec in classes]
    assert a["dm"] == sum(s * s for s in sizes) + 5 * n
    t = out["income"].tolist()
    assert a["cm"] == pytest.approx(ref_cm(classes, t, 5, n))
    assert a["cm"] * n == pytest.approx(ref_cm(classes, t, 0, n) * n + 5)
    # the block of 8 rows with both numbers missing stands as a class of its own
    age_col = "age" if fmt == "range" else "age_min"
    assert out[age_col].isna().sum() == 8
    if fmt == "range":
        assert_close(a, reference_metrics(out, df, ADULT_QUASI_IDENTIFIERS, m.schema_.kinds, "income", k=5))


def test_report_has_every_metric(adult):
    m, _ = _fit(adult.head(3000), "range")
    met = m.report_["metrics"]
    for key in METRIC_KEYS:
        assert key in met, key
    qis = set(ADULT_QUASI_IDENTIFIERS)
    assert set(met["entropy_coefficient_before"]) == qis
    assert set(met["entropy_coefficient_after"]) == qis
    assert all(0.0 <= v <= 1.0 for v in met["entropy_coefficient_before"].values())
    assert all(0.0 <= v <= 1.0 for v in met["entropy_coefficient_after"].values())
    assert set(met["gionis_tassa"]) >= {"total_bits", "normalized", "per_column_bits"}
    assert set(met["class_size"]) >= {"min", "median", "max", "histogram"}
    assert met["precision"] is None  # Mondrian builds no hierarchies
    assert 0.0 <= met["ncp"] <= 1.0 and 0.0 <= met["cm"] <= 1.0 and met["c_avg"] >= 1.0


def test_relaxed_mode_metrics_count_output_equivalence_classes():
    df = pd.DataFrame({"age": [30] * 6 + [31, 32], "y": ["p", "q"] * 4})
    m = Mondrian(k=2, quasi_identifiers=["age"], target="y", mode="relaxed", backend="cpu", progress=False)
    out = m.fit_transform(df)
    # output: age '30' x 6 (ONE class of 6), '31-32' x 2 -> DM = 36 + 4 = 40, 2 classes
    classes = ref_classes(out, ["age"])
    assert sorted(map(len, classes)) == [2, 6]
    assert m.report_["n_classes"] == 2
    met = m.report_["metrics"]
    assert met["n_classes"] == 2
    assert met["dm"] == ref_dm(classes, 0, 8) == 40


def test_output_summary_of_categories_containing_the_separator():
    df = pd.DataFrame({"c": ["a|b", "a|b", "a|b", "c"], "y": ["p", "q", "q", "p"]})
    m = Mondrian(k=2, quasi_identifiers=["c"], target="y", backend="cpu", progress=False)
    out = m.fit_transform(df)  # one class: every cell is {'a|b', 'c'}, written 'c|a\\|b' (escaped)
    from gpuanon.metrics import split_set_text

    assert out["c"].nunique() == 1 and sorted(split_set_text(out["c"][0])) == ["a|b", "c"]
    a = compute_metrics(summary_from_labels(m.table_, m.labels_), k=2)
    b = compute_metrics(summary_from_output(out, df, ["c"], m.schema_.kinds, target="y"), k=2)
    assert_close(b, a)


def test_class_size_histogram_bins_have_equal_width():
    from gpuanon.metrics import ClassSummary

    sizes = np.arange(10, 60)  # one class of every size 10..59: a flat histogram
    m = compute_metrics(ClassSummary(sizes, None, [], int(sizes.sum()), 0), k=10)
    h = m["class_size"]["histogram"]
    assert sum(h["counts"]) == 50 and h["edges"][0] <= 10 and h["edges"][-1] > 59
    widths = np.diff(h["edges"])
    assert (widths[:-1] == widths[0]).all(), h["edges"]


def _many_values_frame(n=1500, seed=3):
    """Columns of mostly distinct values (a few repeats, a heavy value, missing values) and one of
    few values, a 3-valued target."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n).round(3)  # mostly distinct, some repeats
    a[rng.random(n) < 0.03] = np.nan
    b = np.where(rng.random(n) < 0.1, 0.5, rng.normal(size=n))  # a heavy value
    c = rng.integers(0, 10**6, n)
    d = rng.integers(0, 5, n).astype(float)  # few values
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d, "y": rng.choice(["p", "q", "r"], n)})


def test_sorted_by_target_is_the_sort():
    # the rows of each target value sorted, and the column merged from them: np.sort's keys (a
    # target code outside 0 .. nt - 1: the column sorted whole)
    from gpuanon.metrics.runs import release_buffers, sorted_by_target

    rng = np.random.default_rng(5)
    keys = rng.integers(0, 1000, 5000).astype(np.uint32)  # many repeats
    target = rng.integers(0, 3, 5000).astype(np.int32)
    for nt, tg in ((3, target), (2, np.minimum(target, 1)), (2, target)):
        srt, parts = sorted_by_target(keys, tg, nt)
        assert np.array_equal(srt, np.sort(keys))
        for t in range(nt):
            assert np.array_equal(parts[t], np.sort(keys[tg == t]))
    release_buffers()


@pytest.mark.parametrize("n_targets", [3, 2])
def test_sorted_rows_split_by_target_same_metrics(n_targets, monkeypatch):
    # where NumPy's sort is slow (gpuanon.cpu.host_sort_is_slow) the sorted-rows path sorts each target
    # value's rows and merges them; elsewhere it sorts the column and the target's rows again: the
    # same summary arrays and metrics either way, whichever this host takes
    import gpuanon.metrics.sorted_rows as sorted_rows_mod
    import gpuanon.metrics.summary as summary_mod

    df = _many_values_frame()
    if n_targets == 2:
        df["y"] = df["y"].replace("r", "q")
    m = Mondrian(k=4, quasi_identifiers=["a", "b", "c", "d"], target="y", output_format="minmax",
                 backend="cpu", progress=False, max_suppression=0.5)
    m.fit(df)
    monkeypatch.setattr(summary_mod, "CACHE_LIMIT", 0)
    got = []
    for slow in (True, False):
        monkeypatch.setattr(sorted_rows_mod, "host_sort_is_slow", lambda slow=slow: slow)
        m.table_.column_stats.clear()
        s = summary_from_labels(m.table_, m.labels_)
        got.append((s, compute_metrics(s, k=4)))
    assert got[0][1] == got[1][1]
    for c0, c1 in zip(got[0][0].columns, got[1][0].columns):
        for f in ("lo", "hi", "gt_h", "u_before", "h_bits", "domain_counts", "joint_before", "joint_after"):
            x, y = getattr(c0, f), getattr(c1, f)
            assert (x is None) == (y is None), (c0.name, f)
            if x is not None:
                assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True), (c0.name, f)


@pytest.mark.parametrize("fmt", ["range", "minmax"])
@pytest.mark.parametrize("n_targets", [3, 2, 0])
def test_sorted_rows_path_equals_value_path(fmt, n_targets, monkeypatch):
    # the CPU reads a column of many distinct values off its sorted rows (gpuanon.metrics.sorted_rows):
    # forced here on a small table, every summary array and metric equals the value-space path's
    # exactly, and the plain loops' metrics
    import gpuanon.metrics.summary as summary_mod

    df = _many_values_frame()
    if n_targets == 2:
        df["y"] = df["y"].replace("r", "q")
    qis = ["a", "b", "c", "d"]
    m = Mondrian(k=4, quasi_identifiers=qis, target="y" if n_targets else None, output_format=fmt,
                 backend="cpu", progress=False, max_suppression=0.5)
    out = m.fit_transform(df)
    taken = []
    real = summary_mod.sorted_rows

    def spy(keys, limit, *a):
        srt, sr = real(keys, limit, *a)
        taken.append(sr is not None)
        return srt, sr

    monkeypatch.setattr(summary_mod, "sorted_rows", spy)

    logs = []

    def run(limit):
        monkeypatch.setattr(summary_mod, "CACHE_LIMIT", limit)
        m.table_.column_stats.clear()
        with B.count_transfers(simulate=True) as log, B.stage("metrics"):
            s = summary_from_labels(m.table_, m.labels_)
            met = compute_metrics(s, k=4)
        logs.append(log.to_dict())
        return s, met

    s0, want = run(1 << 16)
    assert taken == [False] * 4
    taken.clear()
    s1, got = run(0)
    assert sorted(taken) == [False, True, True, True]  # column d: few values, the value-space path
    assert got == want
    # the counted reads say what a device would read: the same whichever path the CPU took
    assert logs[1] == logs[0] and logs[0]["stages"]["metrics"]["to_host"]["calls"] > 0, logs
    for c0, c1 in zip(s0.columns, s1.columns):
        for f in ("lo", "hi", "gt_h", "u_before", "h_bits", "domain_counts", "joint_before", "joint_after"):
            x, y = getattr(c0, f), getattr(c1, f)
            assert (x is None) == (y is None), (c0.name, f)
            if x is not None:
                assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True), (c0.name, f)
    if fmt == "range" and n_targets:
        assert_close(got, reference_metrics(out, df, qis, m.schema_.kinds, "y", k=4))
