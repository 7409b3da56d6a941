"""The table's dictionaries as chunk / combine / finalize (gpuanon.table.dictionaries): profiled in 1, 2
or 3 chunks of any split, combined in any order, they are one process's (``encode``), and every
chunk's keys, block ids and codes are the rows of one process's."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

from expected import with_missing
from gpuanon.datasets import load_adult
from gpuanon.table.dictionaries import combine, encode_chunk, finalize, profile_chunk
from gpuanon.table.encoding import encode
from gpuanon.errors import SchemaError
from gpuanon.table.schema import Schema

QI = ["age", "education", "marital-status", "race", "hours-per-week", "tie", "id", "day", "f32", "date"]


@pytest.fixture(scope="module")
def table():
    df = with_missing(load_adult().sample(3000, random_state=3).reset_index(drop=True))
    rng = np.random.default_rng(4)
    n = len(df)
    # two categories with the same majority target value and share: their order is the values'
    df["tie"] = np.where(np.arange(n) % 2 == 0, "q", "p")
    df["income"] = np.where(np.arange(n) % 4 < 2, df["income"].iloc[0], df["income"].iloc[1])
    ids = (2**53 + rng.integers(-2000, 2000, n)).astype(np.int64)
    ids[: n // 2] = 2**53 - rng.integers(0, 2000, n // 2)  # the first rows: none beyond 2**53
    df["id"] = ids
    df["day"] = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 700, n), unit="D")
    df.loc[rng.random(n) < 0.03, "day"] = pd.NaT
    df["f32"] = rng.normal(size=n).astype(np.float32)
    df["date"] = [datetime.date(2020, 1, 1) + datetime.timedelta(days=int(d)) for d in rng.integers(0, 90, n)]
    df["occ"] = df["occupation"].where(rng.random(n) > 0.05, None)
    return df


@pytest.fixture(scope="module")
def schema(table):
    return Schema.from_frame(table, QI, sensitive="occ", target="income")


def _same_columns(got, ref):
    for a, b in zip(got, ref, strict=True):
        assert (a.name, a.kind, a.n_missing, a.integer) == (b.name, b.kind, b.n_missing, b.integer), a.name
        assert [str(x) for x in a.categories] == [str(x) for x in b.categories], a.name
        np.testing.assert_equal((a.lo, a.hi), (b.lo, b.hi))
        if a.kind == "numeric":
            np.testing.assert_array_equal(a.info, b.info)
            assert (a.exact is None) == (b.exact is None), a.name
            if a.exact is not None:
                np.testing.assert_array_equal(a.exact.values, b.exact.values)
                assert a.exact.to_dict() == b.exact.to_dict() and a.exact.date_objects == b.exact.date_objects


@pytest.mark.parametrize("n_chunks", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_any_split_in_any_order_gives_one_process_dictionaries(table, schema, n_chunks, seed):
    rng = np.random.default_rng(seed)
    cuts = sorted(rng.choice(np.arange(1, len(table)), n_chunks - 1, replace=False).tolist())
    bounds = [0, *cuts, len(table)]
    parts = [profile_chunk(table.iloc[a:b], schema, check=True) for a, b in zip(bounds[:-1], bounds[1:])]
    order = rng.permutation(n_chunks)
    d = finalize(combine([parts[i][0] for i in order]), schema)
    ref = encode(table, schema)
    _same_columns(d.columns, ref.columns)
    assert [str(v) for v in d.sa_values] == [str(v) for v in ref.sa_values]
    assert [str(v) for v in d.target_values] == [str(v) for v in ref.target_values]
    assert d.n_blocks == ref.n_blocks > 1 and d.n_rows == ref.n_rows
    assert d.columns[QI.index("tie")].categories == ["p", "q"]
    assert d.columns[QI.index("id")].exact is not None  # none beyond 2**53 in the first rows, some after
    got = [encode_chunk(c, d) for _, c in parts]
    for key in ("keys", "blocks", "sa", "target"):
        np.testing.assert_array_equal(np.concatenate([g[key] for g in got], axis=-1), getattr(ref, key), key)


def test_a_chunk_without_missing_values_gets_the_block_of_none(table, schema):
    """A chunk with no missing value at all still adds the pattern of none (its rows' block)."""
    full = table[QI + ["occ", "income"]].dropna()
    holes = table[table["age"].isna() & table["hours-per-week"].isna()].head(3)
    parts = [profile_chunk(p, schema) for p in (full.head(50), holes)]
    d = finalize(combine([p for p, _ in parts]), schema)
    ref = encode(pd.concat([full.head(50), holes]), schema)
    assert d.n_blocks == ref.n_blocks == 2
    np.testing.assert_array_equal(np.concatenate([encode_chunk(c, d)["blocks"] for _, c in parts]), ref.blocks)


def test_shards_of_different_column_types_are_refused(schema):
    s = Schema.from_frame(pd.DataFrame({"x": [1, 2]}), ["x"])
    big = pd.DataFrame({"x": np.array([2**62, 3], dtype=np.int64)})
    for other in (pd.DataFrame({"x": [1.5, 2.0]}), pd.DataFrame({"x": np.array([2**63 + 5], dtype=np.uint64)})):
        with pytest.raises(SchemaError, match="quasi-identifier 'x' holds values of different types in different"):
            combine([profile_chunk(big, s)[0], profile_chunk(other, s)[0]])
    with pytest.raises(SchemaError, match="float32 in some shards"):
        combine([profile_chunk(pd.DataFrame({"x": np.array([1.0], np.float32)}), s)[0],
                 profile_chunk(pd.DataFrame({"x": [1.0]}), s)[0]])


def test_chunks_on_the_device_double(table, schema):
    """The same on the strict CuPy stand-in: the chunk's keys are made and remapped on the device."""
    pytest.importorskip("cupy")
    from cupy_double import DeviceDouble

    from gpuanon import backend as B

    dev = DeviceDouble()
    ref = encode(table, schema)
    with B.use_device_module(dev):
        parts = [profile_chunk(table.iloc[a:b], schema, dev) for a, b in ((0, 1000), (1000, 3000))]
        d = finalize(combine([parts[1][0], parts[0][0]]), schema)
        got = [encode_chunk(c, d, dev) for _, c in parts]
        keys = np.concatenate([B.to_host(g["keys"]) for g in got], axis=1)
    np.testing.assert_array_equal(keys, ref.keys)
    s = dev.stats.summary()
    assert s["syncs_escaped"] == 0 and s["uploads_escaped"] == 0, s["escaped_sites"]
