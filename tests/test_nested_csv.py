"""Nested Parquet columns (refused in a role, passed through otherwise) and the Arrow CSV writer."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from expected import one_error_line, run_cli
from gpuanon.output.io import write_table


@pytest.fixture
def nested(tmp_path):
    n = 40
    t = pa.table({"age": [20 + i for i in range(n)], "zip": [f"z{i % 4}" for i in range(n)],
                  "addr": [{"street": f"s, \"{i}\"", "no": i} if i % 7 else None for i in range(n)],
                  "tags": [[f"t{i}", "x"] if i % 3 else [] for i in range(n)]})
    p = tmp_path / "nested.parquet"
    pq.write_table(t, p)
    return p, t


@pytest.mark.slow
@pytest.mark.parametrize("role", [("--qi", "age,addr"), ("--qi", "age,tags"), ("--sensitive", "addr")])
def test_a_nested_column_in_a_role_is_refused_with_one_line(tmp_path, nested, role):
    args = [str(nested[0]), "--k", "5", "--out", str(tmp_path / "o.csv"), *role]
    if role[0] != "--qi":
        args += ["--qi", "age"]
    line = one_error_line(run_cli("anonymize", *args, cwd=tmp_path))
    col = role[1].split(",")[-1]
    assert f"'{col}' is a nested column" in line and "flatten" in line


@pytest.mark.slow
def test_nested_columns_pass_through_to_parquet_and_to_csv_as_json(tmp_path, nested):
    src, t = nested
    for ext in ("parquet", "csv", "csv.gz"):
        r = run_cli("anonymize", str(src), "--qi", "age,zip", "--k", "5", "--out", str(tmp_path / f"o.{ext}"),
                    cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    back = pq.read_table(tmp_path / "o.parquet")
    assert back.schema.field("addr").type == t.schema.field("addr").type
    assert pa.types.is_list(back.schema.field("tags").type)
    assert back.column("addr").to_pylist() == t.column("addr").to_pylist()
    assert back.column("tags").to_pylist() == t.column("tags").to_pylist()
    for ext in ("csv", "csv.gz"):
        df = pd.read_csv(tmp_path / f"o.{ext}", keep_default_na=False, na_values=[""])
        addr = [None if pd.isna(v) else json.loads(v) for v in df["addr"]]
        assert addr == t.column("addr").to_pylist()
        assert [json.loads(v) for v in df["tags"]] == t.column("tags").to_pylist()


def test_csv_reads_back_as_pandas_wrote_it(tmp_path):
    """The values, dtypes and missing cells read back from the CSV equal those of pandas' own to_csv."""
    df = pd.DataFrame({
        "f": [1.0, 0.1, 1e-5, 1e16, 123456789.123, np.nan, 2 / 3, 5e-324],
        "whole": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -0.0, -8.0], "whole_na": [1.0, np.nan, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        "i": np.arange(8), "n": pd.array([1, None, 3, 4, 5, 6, 7, 8], dtype="Int64"),
        "s": ["a", "b,c", 'q"x', "n\nl", None, "x", " sp", "é"],
        "b": [True, False, True, False, True, True, False, True],
        "c": pd.Categorical(["x", "y", "x", "y", "x", None, "x", "y,z"]),
        "mixed": [1, "a", None, 2.5, "b", "c", "d", "e"]})
    for ext in ("csv", "csv.gz"):
        write_table(df, tmp_path / f"new.{ext}")
        df.to_csv(tmp_path / f"old.{ext}", index=False)
        new = pd.read_csv(tmp_path / f"new.{ext}", float_precision="round_trip")
        old = pd.read_csv(tmp_path / f"old.{ext}", float_precision="round_trip")
        assert new.dtypes.tolist() == old.dtypes.tolist()
        pd.testing.assert_frame_equal(new, old)
    assert new["whole"].dtype == np.float64 and new["s"].iloc[3] == "n\nl" and pd.isna(new["s"].iloc[4])
    assert new["f"].tolist()[:5] == df["f"].tolist()[:5] and new["f"].iloc[7] == 5e-324
