"""The CPU formulations of the Mondrian level (kernels/cpu.py) against independent checks: distinct
codes per segment by brute force (Python sets), and the kernel on tables whose categorical columns
take every path of the code masks (one word, several words, the sort) against the reference Mondrian."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuanon.anonymize.criteria import Criteria
from kernels.cpu import MAX_WORDS, CodeMasks, finish_small
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


def test_finish_small_by_hand():
    # rows now at positions 0..5 came from original rows perm; the regroup's order src makes
    # children of sizes 1, 3, 2: child 0 is row src[0] = 2 (original 0), child 2 rows 3, 4 (original 1, 4)
    perm = np.array([5, 3, 0, 1, 4, 2])
    src = np.array([2, 0, 1, 5, 3, 4])
    labels = np.full(6, -1, dtype=np.int64)
    first = []
    s, sz, n = finish_small(src, np.array([1, 3, 2]), perm, 3, labels, first, 7)
    assert s.tolist() == [0, 1, 5] and sz.tolist() == [3] and n == 9
    assert labels.tolist() == [7, 8, -1, -1, 8, -1] and [f.tolist() for f in first] == [[0, 1]]
    # none small, or all small: nothing is finished (the next level does it, as on the device)
    for sizes, m in (([1, 3, 2], 1), ([1, 3, 2], 4)):
        labels[:] = -1
        s, sz, n = finish_small(src, np.array(sizes), perm, m, labels, first, 7)
        assert s is src and sz.tolist() == sizes and n == 7 and (labels == -1).all()


@pytest.mark.parametrize("k", [2, 5])
def test_kernel_finishing_small_children_early_matches_the_reference(k, monkeypatch):
    # a column of heavy ties and a continuous one: children of unequal sizes, some below 2k a level before others
    import kernels.mondrian as km
    finished = []

    def spy(src, sizes, *a):
        out = finish_small(src, sizes, *a)
        finished.append(int(sizes.shape[0] - out[1].shape[0]))
        return out
    monkeypatch.setattr(km, "finish_small", spy)
    rng = np.random.default_rng(k)
    n = 700
    df = pd.DataFrame({"x": rng.geometric(0.3, size=n), "y": rng.exponential(size=n), "s": rng.choice(["p", "q"], size=n)})
    schema, table = _encoded(df, ["x", "y"], None)
    values, is_cat, n_cat, grange, sa_codes, q = _reference_inputs(df, ["x", "y"], table)
    lab, n_parts, _ = _kernel_labels(table, Criteria(k), False)
    p = {"l": 0, "l_kind": "distinct", "c": 1.0, "t": None, "t_distance": "equal", "relaxed": False}
    assert sum(finished) > 0 and np.array_equal(lab, _reference_labels(values, is_cat, n_cat, grange, k, sa_codes, q, p))
