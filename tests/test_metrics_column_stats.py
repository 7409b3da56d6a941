"""A column's whole-table statistics as chunk / combine / finalize (gpuanon.metrics.columns): one
process runs them on one chunk, a cluster on its shards' (gpuanon.distributed.metrics). The same
integer counts must give the same floats, so the cluster's ColumnStats equal one process's exactly
(``==``, ``array_equal``), whatever the row split."""

import numpy as np
import pytest

import gpuanon.metrics.columns as columns_mod

from gpuanon.datasets import ADULT_QUASI_IDENTIFIERS, load_adult
from gpuanon.distributed.metrics import combine_value_counts, stats_from_counts, value_target_counts
from gpuanon.table.encoding import encode
from gpuanon.metrics.columns import (ValueTargets, column_stats, combine_value_targets, stats_from_value_targets,
                                     value_target_chunk, value_target_matrix, value_target_runs)
from gpuanon.table.schema import Schema
from kernels.counts import count_values
from kernels.keys import MISSING


def _equal(a, b) -> list:
    """Fields of two ColumnStats that differ (exactly; ``rep`` is a cache, not compared)."""
    out = []
    for f in ("vals", "counts", "u_raw", "h_x", "joint_before"):
        x, y = getattr(a, f), getattr(b, f)
        if (x is None) != (y is None) or (x is not None and not np.array_equal(np.asarray(x), np.asarray(y))):
            out.append(f)
    for f in ("bin_start", "bin_counts", "cum", "start_cum", "binned", "has_missing"):
        if not np.array_equal(np.asarray(getattr(a.domain, f)), np.asarray(getattr(b.domain, f))):
            out.append("domain." + f)
    return out


def _columns():
    """``(keys (columns x rows), numeric flags, target codes, nt)``: Adult's QIs (target salary) and
    synthetic numeric columns of a 3-valued target: binned, heavy values, missing, few values."""
    df = load_adult().iloc[:6000].reset_index(drop=True)
    t = encode(df, Schema.from_frame(df, list(ADULT_QUASI_IDENTIFIERS), target="income"))
    adult = (np.stack(t.keys), [c.kind == "numeric" for c in t.columns], np.asarray(t.target), len(t.target_values))
    rng = np.random.default_rng(7)
    n = 5000
    many = rng.integers(0, 4000, n)
    heavy = np.where(rng.random(n) < 0.5, 11, rng.integers(0, 3000, n))
    missing = many.copy()
    missing[rng.random(n) < 0.1] = MISSING
    few = rng.integers(0, 30, n)
    keys = np.stack([many, heavy, missing, few, rng.permutation(n)]).astype(np.uint32)
    synth = (keys, [True, True, True, True, False], rng.integers(0, 3, n), 3)
    return {"adult": adult, "synthetic": synth}


COLUMNS = _columns()


@pytest.mark.parametrize("name", sorted(COLUMNS))
@pytest.mark.parametrize("with_target", [True, False])
@pytest.mark.parametrize("splits", [1, 2, 3])
@pytest.mark.parametrize("by_runs", [False, True])
def test_cluster_statistics_equal_one_process_exactly(name, with_target, splits, by_runs, monkeypatch):
    # by_runs: the one process reads the rows per (value, target) from each target's runs, as the
    # CPU does from RUNS_ROWS rows on (the same bits as the searches the cluster's finalize makes)
    monkeypatch.setattr(columns_mod, "RUNS_ROWS", 0 if by_runs else 1 << 62)
    keys, numeric, target, nt = COLUMNS[name]
    if not with_target:
        target, nt = None, 1
    tc = None if target is None else count_values(target, nt, np)
    n = keys.shape[1]
    # shards: contiguous row ranges, and for 3 splits rows dealt at random (order must not matter)
    if splits == 3:
        part = np.random.default_rng(splits).integers(0, splits, n)
        shards = [np.flatnonzero(part == s) for s in range(splits)]
    else:
        shards = np.array_split(np.arange(n), splits)
    chunks = [value_target_counts(keys[:, r], None if target is None else target[r], nt, np) for r in shards]
    dense = combine_value_counts(chunks, nt)
    for j in range(keys.shape[0]):  # a loop over columns
        one = column_stats(keys[j], target, nt, tc, np, numeric=numeric[j])
        vt = combine_value_targets([c[j] for c in chunks])
        direct = stats_from_value_targets(vt, nt, tc, numeric[j], np)
        cluster = stats_from_counts(*dense[j], tc, target is not None, numeric[j], np)
        assert not _equal(one, direct), (name, j, _equal(one, direct))
        assert not _equal(one, cluster), (name, j, _equal(one, cluster))
        if target is not None:
            assert one.u_raw == cluster.u_raw and one.joint_before.shape == (one.domain.n_bins, nt)
            want = np.zeros((one.vals.shape[0], nt), dtype=np.int64)
            np.add.at(want, (np.searchsorted(one.vals, keys[j]), target), 1)
            np.testing.assert_array_equal(dense[j][1], want)  # the combined counts are the table's


def test_combine_of_one_chunk_is_that_chunk_and_order_does_not_matter():
    keys, _, target, nt = COLUMNS["synthetic"]
    vt = value_target_runs(value_target_chunk(keys[0], target, nt, np))
    assert combine_value_targets([vt]) is vt
    half = keys.shape[1] // 2
    a = value_target_runs(value_target_chunk(keys[0, :half], target[:half], nt, np))
    b = value_target_runs(value_target_chunk(keys[0, half:], target[half:], nt, np))
    ab, ba = combine_value_targets([a, b]), combine_value_targets([b, a])
    for x, y in ((ab, ba), (ab, vt)):
        vx, mx = value_target_matrix(x, nt)
        vy, my = value_target_matrix(y, nt)
        np.testing.assert_array_equal(vx, vy)
        np.testing.assert_array_equal(mx, my)


def test_a_target_of_one_value_keeps_its_joint_counts():
    keys, numeric, _, _ = COLUMNS["synthetic"]
    target = np.zeros(keys.shape[1], dtype=np.int64)
    tc = count_values(target, 1, np)
    one = column_stats(keys[3], target, 1, tc, np, numeric=True)
    vals, m = combine_value_counts([value_target_counts(keys[3:4], target, 1, np)], 1)[0]
    cluster = stats_from_counts(vals, m, tc, True, True, np)
    assert not _equal(one, cluster)
    np.testing.assert_array_equal(one.joint_before[:, 0], one.domain.bin_counts)
    assert isinstance(value_target_chunk(keys[3], target, 1, np), ValueTargets)


def test_the_device_chunk_equals_the_cpu_chunk():
    """On the strict CuPy double: a shard's chunk made on the device (the cluster's worker on a GPU)
    and one process's statistics there equal the CPU's, with no read the backend does not count."""
    pytest.importorskip("cupy", reason="the device double reads CuPy's API from the cupy-cuda12x wheel")
    from cupy_double import DeviceDouble
    from gpuanon import backend as B

    keys, numeric, target, nt = COLUMNS["synthetic"]
    tc = count_values(target, nt, np)
    cpu = value_target_counts(keys, target, nt, np)
    dev = DeviceDouble()
    with B.use_device_module(dev):
        got = value_target_counts(dev.asarray(keys), dev.asarray(target), nt, dev)
        one = [column_stats(dev.asarray(keys[j]), dev.asarray(target), nt, dev.asarray(tc), dev, numeric=numeric[j])
               for j in range(keys.shape[0])]
        one = [type(s)(*(B.to_host(v) if hasattr(v, "shape") else v for v in s)) for s in one]
        assert dev.stats.summary()["syncs_escaped"] == 0
    for c, g in zip(cpu, got):
        np.testing.assert_array_equal(value_target_matrix(c, nt)[1], value_target_matrix(g, nt)[1])
    for j in range(keys.shape[0]):
        want = column_stats(keys[j], target, nt, tc, np, numeric=numeric[j])
        for f in ("vals", "counts", "u_raw", "h_x", "joint_before"):
            np.testing.assert_array_equal(np.asarray(getattr(want, f)), np.asarray(getattr(one[j], f)), err_msg=f)
