"""The CPU formulations of the Mondrian level (kernels/cpu.py) against independent checks: distinct
codes per segment by brute force (Python sets), and the kernel on tables whose categorical columns
take every path of the code masks (one word, several words, the sort) against the reference Mondrian."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuanon.anonymize.criteria import Criteria
from kernels.cpu import MAX_WORDS, CodeMasks, KeyRows, mark_left, split_children, strict_split
from test_kernel_vs_reference import _encoded, _kernel_labels, _reference_inputs, _reference_labels


def test_code_masks_layout_packs_fields_and_sends_the_rest_to_a_sort():
    m = CodeMasks([7, 60, 2, 100, 300])
    assert m.parts[:4] == [[(0, 0, 7)], [(1, 0, 60)], [(0, 7, 2)], [(2, 0, 64), (3, 0, 36)]]
    assert m.parts[4] == [] and m.n_words == MAX_WORDS  # 300 codes: 5 words, no room left


@pytest.mark.parametrize("seed", range(6))
def test_distinct_counts_equal_python_sets(seed):
    rng = np.random.default_rng(seed)
    ncats = [int(c) for c in rng.choice([1, 2, 5, 63, 64, 65, 130, 256, 257, 1000], size=5)]
    n, P = int(rng.integers(0, 400)), int(rng.integers(1, 40))
    K = np.stack([rng.integers(0, c, size=n) for c in ncats]).astype(np.uint32)
    starts = np.sort(rng.integers(0, n + 1, size=P))  # empty segments, rows before the first start
    m = CodeMasks(ncats)
    cols = list(range(len(ncats)))
    dense = bool(starts[0] == 0 and (np.diff(np.append(starts, n)) > 0).all())
    got = m.counts(m.words(K, cols), starts, K, cols, P, dense)
    ends = np.append(starts[1:], n)
    want = [[len(set(K[i, a:b].tolist())) for a, b in zip(starts, ends)] for i in cols]
    assert got.tolist() == want


def test_code_masks_set_one_bit_per_column_and_none_past_the_count():
    m = CodeMasks([7, 60, 2, 100])
    K = np.array([[0, 6, 7, 99], [59, 0, 60, 3], [1, 0, 2, 1], [64, 99, 100, 2**32 - 1]], dtype=np.uint32)
    w = m.words(K, [0, 1, 2, 3])
    for r in range(4):
        want = np.zeros(m.n_words, dtype=object)
        for i, parts in enumerate(m.parts):
            code = int(K[i, r])
            for p, (word, off, bits) in enumerate(parts):
                if p * 64 <= code < p * 64 + bits:
                    want[word] |= 1 << (off + code - p * 64)
        assert [int(x) for x in w[:, r]] == list(want), r


@pytest.mark.parametrize("seed", range(8))
def test_strict_split_equals_the_median_rule_by_hand(seed):
    rng = np.random.default_rng(seed)
    d, P = 3, int(rng.integers(1, 30))
    sizes = rng.integers(1, 12, size=P)
    gaps = rng.integers(0, 3, size=P) * int(seed % 2)  # odd seeds: pending partitions among others
    starts = np.cumsum(gaps + np.append(0, sizes[:-1]))
    n = int(starts[-1] + sizes[-1] + rng.integers(0, 3) * (seed % 2))
    hi = [2, 300, 2**31][seed % 3]  # uint32 keys with few bits, more bits, and int64 keys
    K = rng.integers(0, hi, size=(d, n)).astype(np.uint32)
    col = rng.integers(0, d, size=P)
    if seed % 4 == 0:
        col[:] = col[0]
    total = int(sizes.sum())
    rows, loc, pofs, nleft, left = strict_split(K, col, sizes, starts, total, n, int(K.max()).bit_length(), True)
    pos = np.arange(n)[rows]
    assert pos.tolist() == [int(s) + i for s, z in zip(starts, sizes) for i in range(z)]
    assert loc.tolist() == [p for p, z in enumerate(sizes) for _ in range(z)]
    for p in range(P):
        v = K[col[p], starts[p]:starts[p] + sizes[p]].tolist()
        m = sorted(v)[(len(v) - 1) // 2]
        side = [x < m for x in v] if m == max(v) else [x <= m for x in v]  # the contract's cut
        got = left[pofs[p]:pofs[p] + sizes[p]].tolist()
        assert got == side and nleft[p] == sum(side), (p, v)
    ok = rng.random(P) < 0.5
    g = mark_left(np.zeros(n, dtype=bool), rows, left, ok, sizes, loc)
    want = np.zeros(n, dtype=bool)
    want[pos] = left & ok[loc]
    assert np.array_equal(g, want)


def test_key_rows_narrow_only_codes_that_fit():
    K = np.array([[1, 200, 3], [4, 5, 6]], dtype=np.uint32)
    assert KeyRows(K, narrow=True).regroup(K, np.array([2, 0])).dtype == np.uint8
    assert KeyRows(K * 300, narrow=True).regroup(K * 300, np.array([2, 0])).tolist() == [[900, 300], [1800, 1200]]
    assert KeyRows(K * 300, narrow=True).dtype == np.uint16 and KeyRows(K, narrow=False).dtype is None


@pytest.mark.parametrize("k", [2, 5])
def test_kernel_with_wide_categorical_columns_equals_reference(k):
    rng = np.random.default_rng(k)
    n = 600
    df = pd.DataFrame({
        "a": rng.integers(0, 40, size=n).astype(np.int64),
        "c3": pd.Categorical(rng.choice([f"x{i}" for i in range(3)], size=n)),
        "c70": pd.Categorical(rng.choice([f"y{i:03d}" for i in range(70)], size=n)),
        "c300": pd.Categorical(rng.choice([f"z{i:03d}" for i in range(300)], size=n)),
        "s": rng.choice(["p", "q", "r"], size=n),
    })
    qis = ["a", "c3", "c70", "c300"]
    schema, table = _encoded(df, qis, None)
    values, is_cat, n_cat, grange, sa_codes, q = _reference_inputs(df, qis, table)
    crit = Criteria(k)
    lab, n_parts, _ = _kernel_labels(table, crit, False)
    p = {"l": 0, "l_kind": "distinct", "c": 1.0, "t": None, "t_distance": "equal", "relaxed": False}
    ref = _reference_labels(values, is_cat, n_cat, grange, k, sa_codes, q, p)
    assert n_parts > 10 and np.array_equal(lab, ref)


def test_split_children_by_hand():
    # two cut partitions of 3 rows (positions 0-2, 3-5) and a finished one (6-7); the current rows
    # came from original rows perm. Partition 0: left child {0}, right {1, 2}; partition 1: left
    # {3, 4}, right {5}. Kept (min size 2): every left child, then every right child, in order.
    perm = np.array([5, 3, 0, 1, 4, 2, 6, 7])
    go_left = np.array([1, 0, 0, 1, 1, 0, 0, 0], dtype=bool)
    cut, sizes, starts = np.array([True, True, False]), np.array([3, 3, 2]), np.array([0, 3, 6])
    labels = np.full(8, -1, dtype=np.int64)
    first = []
    src, sz, n = split_children(go_left, cut, sizes, starts, perm, 2, labels, first, 7)
    assert src.tolist() == [3, 4, 1, 2] and sz.tolist() == [2, 2] and n == 9
    # the small children: the left of partition 0 (row 0, original 5), the right of 1 (row 5, original 2)
    assert labels.tolist() == [-1, -1, 8, -1, -1, 7, -1, -1] and [f.tolist() for f in first] == [[5, 2]]
    # none small, or all small: nothing is finished (the next level does it, as on the device)
    for m in (1, 4):
        labels[:] = -1
        src, sz, n = split_children(go_left, cut, sizes, starts, perm, m, labels, first, 7)
        assert src.tolist() == [0, 3, 4, 1, 2, 5] and sz.tolist() == [1, 2, 2, 1] and n == 7
        assert (labels == -1).all()


@pytest.mark.parametrize("k", [2, 5])
def test_kernel_finishing_small_children_early_matches_the_reference(k, monkeypatch):
    # a column of heavy ties and a continuous one: children of unequal sizes, some below 2k a level before others
    import kernels.mondrian as km
    finished = []

    def spy(go_left, cut, *a):
        out = split_children(go_left, cut, *a)
        finished.append(int(2 * np.count_nonzero(cut) - out[1].shape[0]))
        return out
    monkeypatch.setattr(km, "split_children", spy)
    rng = np.random.default_rng(k)
    n = 700
    df = pd.DataFrame({"x": rng.geometric(0.3, size=n), "y": rng.exponential(size=n), "s": rng.choice(["p", "q"], size=n)})
    schema, table = _encoded(df, ["x", "y"], None)
    values, is_cat, n_cat, grange, sa_codes, q = _reference_inputs(df, ["x", "y"], table)
    lab, n_parts, _ = _kernel_labels(table, Criteria(k), False)
    p = {"l": 0, "l_kind": "distinct", "c": 1.0, "t": None, "t_distance": "equal", "relaxed": False}
    assert sum(finished) > 0 and np.array_equal(lab, _reference_labels(values, is_cat, n_cat, grange, k, sa_codes, q, p))


def test_float32_keys_by_hand_and_as_the_generic_formulation():
    """The CPU's float32 keys against the IEEE rule by hand (a negative value's bits flipped, else
    the sign bit set; -0.0 as +0.0; NaN the missing key) and against the formulation other
    namespaces take (the same function through a namespace that is not NumPy itself)."""
    import types

    from kernels.keys import MISSING, float32_keys

    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
                        3.4e38, -3.4e38, 1.0, -1.0, 0.5, -0.5], dtype=np.float32)
    x = np.concatenate([special, np.random.default_rng(0).standard_normal(5000).astype(np.float32)])
    keys = float32_keys(x)
    bits = [int(b) for b in (x + np.float32(0.0)).view(np.uint32)]
    want = [int(MISSING) if v != v else (~b & 0xFFFFFFFF) if b >> 31 else b | 0x80000000 for v, b in zip(x, bits)]
    assert keys.dtype == np.uint32 and keys.tolist() == want
    assert keys[0] == keys[1] and keys[4] == keys[5] == MISSING
    order = np.argsort(x[~np.isnan(x)], kind="stable")
    assert np.all(np.diff(keys[~np.isnan(x)][order].astype(np.int64)) >= 0)  # unsigned order is numeric order
    generic = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    for arr in (x, x[:0], np.full(3, np.nan, np.float32), x.astype(np.float64)):
        np.testing.assert_array_equal(float32_keys(arr), float32_keys(arr, generic))
