"""Distributed Mondrian on a Dask LocalCluster: identical to one process (contract section 12)."""

import json
import os
import signal
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")

from gpuanon import Mondrian  # noqa: E402
from gpuanon.datasets import make_hepmass  # noqa: E402
from gpuanon.table.dictionaries import combine, encode_chunk, finalize, profile_chunk  # noqa: E402
from gpuanon.distributed.levels import radix_select  # noqa: E402
from gpuanon.distributed.mondrian import run_distributed  # noqa: E402
from gpuanon.table.encoding import encode  # noqa: E402
from gpuanon.errors import InputError, SchemaError  # noqa: E402
from gpuanon.table.schema import Schema  # noqa: E402
from expected import flat  # noqa: E402

pytestmark = pytest.mark.slow  # Dask clusters


ADULT_QI = ["age", "education", "marital-status", "gender", "race", "hours-per-week"]


@pytest.fixture(scope="module")
def hepmass():
    return make_hepmass(4000, random_state=2)


def shards(df, cuts):
    b = [0, *cuts, len(df)]
    return [df.iloc[a:z] for a, z in zip(b[:-1], b[1:])]


def as_text(out):
    return {c: out[c].astype(object).where(out[c].notna(), None).tolist() for c in out.columns}


def check_same(m, df, res):
    """Partition ids, output, verification and metrics equal to the single-process run."""
    out = m.fit_transform(df)
    np.testing.assert_array_equal(res.labels, m.labels_)
    assert res.n_partitions == m.n_partitions_
    assert list(res.cluster.output.columns) == list(out.columns)
    assert as_text(res.cluster.output) == as_text(out)
    v, w = res.verification, m.verification_
    # the same cells and sensitive codes: the same sums, so the same floats (l_entropy, t)
    assert (v.n_classes, v.k, v.l, v.l_entropy, v.t, v.n_rows) == (w.n_classes, w.k, w.l, w.l_entropy, w.t, w.n_rows)
    assert v.size_stats == pytest.approx(w.size_stats)
    a, b = res.metrics, m.metrics_
    for key in ("n_classes", "n_rows_out", "n_suppressed", "dm", "class_size"):
        assert a[key] == b[key], key
    assert "not_on_cluster" not in a  # every metric, entropy coefficients and Gionis-Tassa included
    assert set(a) == set(b)
    for key in b:  # equal up to the order of floating-point sums
        assert flat(a[key]) == pytest.approx(flat(b[key]), rel=1e-9, abs=1e-12), key


CASES = {
    "k": dict(k=5),
    "l": dict(k=4, l=3, sensitive="marital-status", quasi_identifiers=["age", "education", "gender", "race",
                                                                          "hours-per-week"]),
    "t": dict(k=5, t=0.25, sensitive="income"),
    "t-many-values": dict(k=5, t=0.3, sensitive="occupation"),
    "entropy-l": dict(k=4, l=3, l_kind="entropy", sensitive="occupation"),
    "relaxed": dict(k=6, mode="relaxed"),
    "minmax": dict(k=5, output_format="minmax"),
    "mean": dict(k=5, output_format="mean"),
    "recursive-l": dict(k=5, l=2, l_kind="recursive", c=3.0, sensitive="occupation"),
}


@pytest.mark.parametrize("workers,cuts", [(2, [700]), (3, [1900, 2100])])
@pytest.mark.parametrize("case", sorted(CASES))
def test_adult_identical_to_one_process(clients, adult, case, workers, cuts):
    kw = {"quasi_identifiers": ADULT_QI, "target": "income", **CASES[case]}
    m = Mondrian(backend="cpu", progress=False, **kw)
    res = run_distributed(m, clients[workers], frames=shards(adult, cuts), local_rows=250)
    assert res.cluster.info["levels"] >= 3 and res.cluster.info["n_workers"] == workers  # many levels ran distributed
    check_same(m, adult, res)


@pytest.mark.parametrize("workers", [2, 3])
def test_missing_values_identical(clients, adult_missing, workers):
    m = Mondrian(k=5, quasi_identifiers=ADULT_QI, sensitive="income", l=2, target="income", backend="cpu",
                 progress=False, max_suppression=0.05)
    res = run_distributed(m, clients[workers], frames=shards(adult_missing, [1200, 3900][: workers - 1]),
                          local_rows=400)
    check_same(m, adult_missing, res)
    assert res.cluster.info["groups"] > 1


def test_missing_values_suppressed_block(clients, adult_missing):
    df = adult_missing.copy()
    df.loc[[3, 4000], ["age", "hours-per-week"]] = np.nan  # a pattern of 2 rows (maybe more): fails k = 5?
    m = Mondrian(k=25, quasi_identifiers=ADULT_QI, target="income", backend="cpu", progress=False,
                 max_suppression=0.05)
    res = run_distributed(m, clients[3], frames=shards(df, [100, 2500]), local_rows=600)
    m.fit(df)
    assert m.n_suppressed_ > 0 and res.n_suppressed == m.n_suppressed_
    check_same(m, df, res)


@pytest.mark.parametrize("workers,cuts,local_rows", [(2, [1500], None), (3, [300, 3100], 200)])
def test_hepmass_identical(clients, hepmass, workers, cuts, local_rows):
    m = Mondrian(k=10, quasi_identifiers=[f"f{i}" for i in range(28)], target="label", sensitive="label",
                 t=0.2, backend="cpu", progress=False)
    res = run_distributed(m, clients[workers], frames=shards(hepmass, cuts), local_rows=local_rows)
    check_same(m, hepmass, res)


def test_parquet_directory_in_and_out(clients, adult, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for i, part in enumerate(shards(adult, [1000, 1300, 4000])):
        part.to_parquet(src / f"part-{i}.parquet", index=False)
    out_dir = tmp_path / "out"
    m = Mondrian(k=5, quasi_identifiers=ADULT_QI, target="income", backend="cpu", progress=False,
                 identifiers=["fnlwgt"])
    res = run_distributed(m, clients[2], paths=src, out_dir=out_dir, gather=False, local_rows=500)
    assert res.labels is None and res.cluster.output is None
    files = sorted(os.listdir(out_dir))
    assert files == [f"part-{i:05d}.parquet" for i in range(4)]
    got = pd.concat([pd.read_parquet(out_dir / f) for f in files], ignore_index=True)
    ref = m.fit_transform(adult)
    assert "fnlwgt" not in got.columns
    assert as_text(got) == as_text(ref)
    assert len(pd.read_parquet(out_dir / files[1])) == 300  # one output file per input file, its rows in order
    import pyarrow.parquet as pq

    meta = json.loads(pq.read_schema(out_dir / files[0]).metadata[b"gpuanon"])
    assert meta["format"] == "range" and [c["name"] for c in meta["encoding"]["columns"]] == ADULT_QI
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".out.tmp")]
    with pytest.raises(InputError, match="exists"):
        run_distributed(m, clients[2], paths=src, out_dir=out_dir)


@pytest.mark.parametrize("kw", [dict(k=5, target="income"),
                                dict(k=4, l=2, sensitive="income", mode="relaxed", output_format="minmax")],
                         ids=["k-range", "l-relaxed-minmax"])
def test_part_files_are_the_same_bytes_on_any_number_of_workers(clients, adult_missing, tmp_path, kw):
    """A part file's bytes depend on its shard's rows alone: the same shards on 2 and 3 workers (other
    homes, other classes per home) give byte-identical parts, and a one-shard run's part is the file
    one process writes for that table (a text column's dictionary: the texts its rows use, in order
    of first appearance)."""
    from gpuanon.output.io import write_table

    src = tmp_path / "in"
    src.mkdir()
    for i, part in enumerate(shards(adult_missing, [1700, 3100])):
        part.to_parquet(src / f"part-{i}.parquet", index=False)
    m = Mondrian(quasi_identifiers=ADULT_QI, backend="cpu", progress=False, max_suppression=0.05, **kw)

    def part_bytes(paths, w, tag):
        out = tmp_path / tag
        run_distributed(m, clients[w], paths=paths, out_dir=out, gather=False, local_rows=300)
        return {f: (out / f).read_bytes() for f in sorted(os.listdir(out))}

    two, three = part_bytes(src, 2, "two"), part_bytes(src, 3, "three")
    assert len(two) == 3 and two == three
    one_shard = part_bytes([src / "part-0.parquet"], 3, "one-shard")["part-00000.parquet"]
    out = m.fit_transform(pd.read_parquet(src / "part-0.parquet"))
    write_table(out, tmp_path / "one.parquet", metadata=m.output_metadata_)
    assert one_shard == (tmp_path / "one.parquet").read_bytes()


def test_empty_shards(clients, adult):
    m = Mondrian(k=5, quasi_identifiers=ADULT_QI, target="income", backend="cpu", progress=False)
    res = run_distributed(m, clients[3], frames=[adult.iloc[:0], adult.iloc[:2000], adult.iloc[2000:2000],
                                                  adult.iloc[2000:]], local_rows=400)
    check_same(m, adult, res)


def test_encoding_equals_single_process(adult_missing):
    df = adult_missing
    schema = Schema.from_frame(df, ADULT_QI, "income", "income")
    parts = [profile_chunk(p, schema, check=True) for p in shards(df, [10, 2000])]
    enc = finalize(combine([p for p, _ in parts]), schema)
    ref = encode(df, schema)
    for a, b in zip(enc.columns, ref.columns):
        assert (a.name, a.kind, a.lo, a.hi, a.n_missing, a.integer) == (b.name, b.kind, b.lo, b.hi, b.n_missing,
                                                                         b.integer) or a.kind == "categorical"
        assert [str(x) for x in a.categories] == [str(x) for x in b.categories]
        if a.kind == "numeric":
            np.testing.assert_array_equal(a.info, b.info)
    assert enc.sa_values == ref.sa_values and enc.n_blocks == ref.n_blocks
    got = [encode_chunk(c, enc) for _, c in parts]
    np.testing.assert_array_equal(np.concatenate([g["keys"] for g in got], axis=1), ref.keys)
    np.testing.assert_array_equal(np.concatenate([g["blocks"] for g in got]), ref.blocks)
    np.testing.assert_array_equal(np.concatenate([g["sa"] for g in got]), ref.sa)


def test_radix_selection_is_exact():
    rng = np.random.default_rng(0)
    groups = [rng.integers(0, 2**rng.integers(1, 33), size=rng.integers(1, 60)).astype(np.uint64) for _ in range(40)]
    groups += [np.full(7, 12345, dtype=np.uint64), np.array([0, 2**32 - 1], dtype=np.uint64)]
    shards_ = [[g[i::3] for g in groups] for i in range(3)]  # every group spread over three shards

    def count_round(prefix, shift, bits):
        total = np.zeros((len(groups), 1 << bits), dtype=np.int64)
        for sh in shards_:
            for p, v in enumerate(sh):
                m = (v >> np.uint64(shift + bits)) == prefix[p] if shift + bits < 64 else np.ones(len(v), bool)
                total[p] += np.bincount(((v[m] >> np.uint64(shift)) & np.uint64((1 << bits) - 1)).astype(np.int64),
                                        minlength=1 << bits)
        return total

    lo = np.array([g.min() for g in groups], dtype=np.uint64)
    hi = np.array([g.max() for g in groups], dtype=np.uint64)
    rank = np.array([(len(g) - 1) // 2 for g in groups])
    got, rounds = radix_select(count_round, lo, hi, rank)
    want = np.array([np.sort(g)[r] for g, r in zip(groups, rank)], dtype=np.uint64)
    np.testing.assert_array_equal(got, want)
    assert rounds == 4


def test_the_package_keeps_the_house_rules():
    from expected import layout_problems

    assert layout_problems("gpuanon.distributed") == []


def test_clear_errors(clients, adult):
    m = Mondrian(k=5, quasi_identifiers=ADULT_QI, backend="cpu", progress=False, hierarchies="auto")
    with pytest.raises(SchemaError, match="automatic hierarchies need a target column"):
        run_distributed(m, clients[2], frames=[adult])  # the single-process check and message
    m = Mondrian(k=5, quasi_identifiers=ADULT_QI, backend="cpu", progress=False)
    with pytest.raises(InputError, match="local:N"):
        run_distributed(m, "locl:2", frames=[adult])
    with pytest.raises(InputError, match="whole number"):
        run_distributed(m, "local:0", frames=[adult])
    with pytest.raises(InputError, match="no .parquet files"):
        run_distributed(m, clients[2], paths=os.path.dirname(__file__) + "/..//gpuanon/data")


def test_whole_table_failing_l_is_the_same_error(clients, adult):
    m = Mondrian(k=4, l=2, l_kind="entropy", sensitive="income", quasi_identifiers=ADULT_QI, backend="cpu",
                 progress=False)
    with pytest.raises(Exception) as one:
        m.fit(adult)
    with pytest.raises(type(one.value)) as dist:
        run_distributed(m, clients[2], frames=shards(adult, [2000]))
    assert str(dist.value) == str(one.value)


def test_every_shard_is_checked_not_only_the_sample(clients, adult):
    df = adult.copy()
    df["hours-per-week"] = df["hours-per-week"].astype("float64")
    df.loc[4500, "hours-per-week"] = np.inf  # far beyond the first shard's sample
    m = Mondrian(k=5, quasi_identifiers=ADULT_QI, backend="cpu", progress=False)
    with pytest.raises(SchemaError, match="'hours-per-week' holds infinite values"):
        run_distributed(m, clients[2], frames=shards(df, [3000]))


def fit_both(df, **kw):
    """The estimator with ``cluster='local:2'`` and in one process: equal labels and output; both
    estimators and outputs."""
    m = Mondrian(cluster="local:2", **kw)
    out = m.fit_transform(df)
    ref = Mondrian(**kw)
    ref_out = ref.fit_transform(df)
    np.testing.assert_array_equal(m.labels_, ref.labels_)
    assert as_text(out) == as_text(ref_out)
    return m, out, ref, ref_out


def test_estimator_with_cluster(adult):
    m, out, ref, ref_out = fit_both(adult, k=5, quasi_identifiers=ADULT_QI, target="income", sensitive="income", l=2,
                                    backend="cpu", progress=False)
    rep = m.report_
    assert out.attrs["gpuanon"] == ref_out.attrs["gpuanon"] == m.output_metadata_
    for key in ("n_rows_out", "n_partitions", "n_classes", "achieved", "class_size", "encoding", "roles"):
        assert rep[key] == ref.report_[key], key
    assert rep["cluster"]["n_workers"] == 2 and rep["cluster"]["levels"] >= 1
    with pytest.raises(SchemaError, match="another"):
        m.transform(adult.iloc[:100])


def test_worker_dying_mid_run_is_recovered_from(adult, tmp_path, monkeypatch):
    """A worker killed after the first level's statistics: its shard is rebuilt on the other worker
    and the level redone; the output is the run's without the kill, no leftovers."""
    import gpuanon.distributed.stages as dm
    import gpuanon.distributed.tasks as dt
    from gpuanon.cluster.runner import Runner
    from distributed import Client, LocalCluster

    src = tmp_path / "in"
    src.mkdir()
    for i, part in enumerate(shards(adult, [2500])):
        part.to_parquet(src / f"part-{i}.parquet", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cl = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
        client = Client(cl)
    try:
        victim = sorted(client.scheduler_info(n_workers=-1)["workers"])[1]
        pid = client.run(os.getpid, workers=[victim])[victim]
        real = dm.representative_rows
        calls = []

        def kill_then_go_on(*a, **k):
            if not calls:
                os.kill(pid, signal.SIGKILL)
            calls.append(1)
            return real(*a, **k)

        monkeypatch.setattr(dm, "representative_rows", kill_then_go_on)
        monkeypatch.setattr(Runner, "POLL_SECONDS", 0.5)
        m = Mondrian(k=5, quasi_identifiers=ADULT_QI, backend="cpu", progress=False)
        res = run_distributed(m, client, paths=src, out_dir=tmp_path / "out", local_rows=100)
        rec = res.cluster.info["recovery"]
        assert len(rec) == 1 and rec[0]["workers_lost"] == [victim] and rec[0]["shards_rebuilt"] == [1]
        assert sorted(os.listdir(tmp_path)) == ["in", "out"]
        ref = Mondrian(k=5, quasi_identifiers=ADULT_QI, backend="cpu", progress=False).fit(adult)
        assert (res.labels == ref.labels_).all()
    finally:
        client.close()
        cl.close()
