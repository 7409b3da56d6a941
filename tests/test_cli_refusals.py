"""Crashes and silently accepted options a new user hit on real tables (issue "Round three", items 4, 6
and the messages of 9): each is one ``gpuanon: error:`` line naming the option and the fix, exit
status 2, nothing written. In process (``gpuanon.cli.main``), each refused before any real work."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuanon.cli import main
from gpuanon.datasets import load_adult

QI = "age,education"


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUANON_BACKEND", "cpu")


@pytest.fixture(scope="module")
def adult300(tmp_path_factory):
    """The first 300 rows of the bundled Adult table as a CSV."""
    p = tmp_path_factory.mktemp("adult") / "a300.csv"
    load_adult().iloc[:300].to_csv(p, index=False)
    return p


def refused(capsys, argv, *words, outputs=()) -> str:
    """Run the command; it exits 2 with one error line holding every word, and leaves no output."""
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("gpuanon: error:")]
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    for o in outputs:
        assert not o.exists(), o
        assert not [p for p in o.parent.iterdir() if p.name.startswith(f".{o.name}")]
    return lines[0]


# ---------------------------------------------------------------------------- item 4: crashes
def test_parquet_map_pass_through_column_is_written_back(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src, out = tmp_path / "m.parquet", tmp_path / "o.parquet"
    df = load_adult().iloc[:60][["age", "education", "income"]]
    tbl = pa.Table.from_pandas(df, preserve_index=False)
    maps = pa.array([[("a", i), ("b", -i)] for i in range(60)], type=pa.map_(pa.string(), pa.int64()))
    pq.write_table(tbl.append_column("m", maps), src)
    assert main(["anonymize", str(src), "--qi", QI, "--k", "5", "--out", str(out), "-q"]) == 0, capsys.readouterr()
    back = pq.read_table(out)
    assert back.schema.field("m").type == pa.map_(pa.string(), pa.int64())
    assert back.column("m").to_pylist() == maps.to_pylist()  # rows keep their order


def test_config_number_for_a_text_key(adult300, tmp_path, capsys):
    cfg = tmp_path / "job.toml"
    cfg.write_text("qi = 5\nk = 5\n")
    out = tmp_path / "o.csv"
    refused(capsys, ["anonymize", adult300, "--config", cfg, "--out", out], "qi = 5", "is not text",
            'qi = "age,zip"', outputs=[out])
    cfg.write_text("hierarchy = 5\nk = 5\n")
    refused(capsys, ["anonymize", adult300, "--config", cfg, "--out", out], "hierarchy = 5", "zip=zip.csv",
            outputs=[out])


def test_config_naming_a_folder(adult300, tmp_path, capsys):
    out = tmp_path / "o.csv"
    refused(capsys, ["anonymize", adult300, "--qi", QI, "--k", "5", "--config", tmp_path, "--out", out],
            "config", "is a folder", "TOML file", outputs=[out])


def test_risk_infinite_weight(adult300, tmp_path, capsys):
    src, rep = tmp_path / "w.csv", tmp_path / "r.json"
    df = pd.read_csv(adult300).assign(w=10.0)
    df.loc[3, "w"] = np.inf
    df.to_csv(src, index=False)
    refused(capsys, ["risk", src, "--qi", QI, "--weights", "w", "--report", rep], "weights column 'w'",
            "infinite", outputs=[rep])


@pytest.mark.parametrize("opt", [["--sampling-fraction", "1e-300"], ["--sampling-fraction", "1e-12"],
                                 ["--population", str(10 ** 20)]])
def test_risk_population_beyond_the_models(adult300, tmp_path, capsys, opt):
    rep = tmp_path / "r.json"
    refused(capsys, ["risk", adult300, "--qi", QI, *opt, "--report", rep],
            opt[0].lstrip("-").replace("-", " ").replace("population", "population size"), "10,000,000,000",
            outputs=[rep])


def test_attack_known_fraction_outside_0_1(tmp_path, capsys):
    rng = np.random.default_rng(0)
    orig, pert, rep = tmp_path / "o.csv", tmp_path / "p.csv", tmp_path / "r.json"
    x = pd.DataFrame(rng.normal(size=(40, 3)), columns=list("abc"))
    x.to_csv(orig, index=False)
    (x + 0.1).assign(row_id=np.arange(40)).to_csv(pert, index=False)
    refused(capsys, ["attack", "--original", orig, "--perturbed", pert, "--known-fraction", "2", "--report", rep],
            "--known-fraction", "(0, 1]", outputs=[rep])


def test_federate_negative_alpha_before_any_simulation(adult300, tmp_path, capsys):
    rep = tmp_path / "r.json"
    refused(capsys, ["federate", adult300, "--target", "income", "--split", "dirichlet", "--alpha", "-1",
                     "--report", rep], "--alpha", "positive", "--alpha 0.5", outputs=[rep])


def test_federate_more_silos_than_rows_fill(adult300, tmp_path, capsys):
    rep = tmp_path / "r.json"
    err = refused(capsys, ["federate", adult300, "--target", "income", "--silos", "1000", "--report", rep],
                  "--silos 1000", "210 training rows", outputs=[rep])
    assert "--silos 105 or fewer" in err  # 70% of 300 rows, two rows a silo


def test_simulation_runs_one_client_per_core(monkeypatch):
    """Ray starts a worker per concurrent client: with a whole CPU per client, at most one per core."""
    import flwr.simulation

    from gpuanon.federated.run import make_config, run_simulation

    seen = {}

    def fake(**kw):
        seen.update(kw)

    monkeypatch.setattr(flwr.simulation, "run_simulation", fake)
    cfg = make_config("adult", rows=3000, silos=50, rounds=1, local_epochs=1)
    with pytest.raises(RuntimeError, match="without a result"):
        run_simulation(cfg)
    assert seen["num_supernodes"] == 50
    assert seen["backend_config"]["client_resources"]["num_cpus"] == 1.0


# ---------------------------------------------------------------------------- item 6: options ignored
@pytest.mark.parametrize("extra, words", [
    (["--dates", "when"], ["--dates when", "no column 'when'"]),
    (["--numeric", "fnlwgt"], ["--numeric fnlwgt", "not a quasi-identifier", "add it to --qi"]),
    (["--categorical", "race"], ["--categorical race", "not a quasi-identifier"]),
    (["--sensitive", "income", "--l", "2", "--c", "3"], ["c = 3", "--l-kind recursive", "leave --c out"]),
    (["--sensitive", "income", "--l", "2", "--l-kind", "recursive", "--c", "-1"], ["c must be a finite number > 0",
                                                                                    "--c 3"]),
    (["--sensitive", "income", "--l", "2", "--l-kind", "recursive", "--c", "nan"], ["c must be a finite number",
                                                                                     "got nan"]),
    (["--target-expr", ""], ["--target-expr is empty"]),
    (["--identifiers", "fnlwgt", "--target", "fnlwgt"], ["--target fnlwgt", "--identifiers"]),
    (["--target", "income", "--hierarchy", "education=h.csv", "--hierarchy", "education=h.csv"],
     ["--hierarchy", "'education' twice"]),
])
def test_anonymize_options_that_would_be_ignored(adult300, tmp_path, capsys, extra, words):
    out = tmp_path / "o.csv"
    refused(capsys, ["anonymize", adult300, "--qi", QI, "--k", "5", *extra, "--out", out], *words, outputs=[out])


def test_mondrian_refuses_a_kind_for_a_non_qi_and_c_without_recursive():
    from gpuanon import Mondrian, SchemaError

    df = load_adult().iloc[:300]
    with pytest.raises(SchemaError, match="'fnlwgt' is declared numeric .* not a quasi-identifier"):
        Mondrian(k=5, quasi_identifiers=["age", "education"], numeric=["fnlwgt"], backend="cpu").fit(df)
    with pytest.raises(SchemaError, match="c = 2 applies to recursive"):
        Mondrian(k=5, l=2, c=2.0, quasi_identifiers=["age", "education"], sensitive="income", backend="cpu").fit(df)
    with pytest.raises(SchemaError, match="target 'fnlwgt' is also an identifier"):
        Mondrian(k=5, quasi_identifiers=["age"], target="fnlwgt", identifiers=["fnlwgt"], backend="cpu").fit(df)


@pytest.mark.parametrize("extra, words", [
    (["--target", "income"], ["--target income", "--original"]),
    (["--sensitive", "income", "--t", "2"], ["t must be a number in (0, 1]", "got 2"]),
    (["--sensitive", "income", "--l", "2", "--c", "3"], ["c = 3", "--l-kind recursive"]),
])
def test_check_options_as_anonymize_takes_them(adult300, tmp_path, capsys, extra, words):
    rep = tmp_path / "r.json"
    refused(capsys, ["check", adult300, "--qi", QI, "--k", "2", *extra, "--report", rep], *words, outputs=[rep])


def test_evaluate_empty_protections_is_not_the_default_grid(adult300, tmp_path, capsys):
    out = tmp_path / "o.csv"
    refused(capsys, ["evaluate", adult300, "--qi", QI, "--target", "income", "--protections", "", "--out", out],
            "--protections", "no protections", outputs=[out, tmp_path / "o.json"])


def test_federate_empty_compare_is_not_one_run(adult300, tmp_path, capsys):
    rep = tmp_path / "r.json"
    refused(capsys, ["federate", adult300, "--target", "income", "--compare", "", "--report", rep],
            "no protections", outputs=[rep])


def test_sweep_reversed_k_range(adult300, tmp_path, capsys):
    out = tmp_path / "s.csv"
    refused(capsys, ["sweep", adult300, "--qi", QI, "--sensitive", "income", "--k-values", "15-3", "--out", out],
            "--k-values '15-3'", "empty range", "3-15", outputs=[out])


def test_risk_of_a_header_only_table(adult300, tmp_path, capsys):
    src, rep = tmp_path / "h.csv", tmp_path / "r.json"
    pd.read_csv(adult300).iloc[:0].to_csv(src, index=False)
    refused(capsys, ["risk", src, "--qi", QI, "--report", rep], "no rows", outputs=[rep])


def test_risk_original_with_fewer_rows_than_the_table(adult300, tmp_path, capsys):
    orig, rep = tmp_path / "a100.csv", tmp_path / "r.json"
    pd.read_csv(adult300).iloc[:100].to_csv(orig, index=False)
    refused(capsys, ["risk", adult300, "--qi", QI, "--original", orig, "--report", rep],
            "--original", "100 rows", "300", outputs=[rep])


def test_perturb_more_entities_than_rows(adult300, tmp_path, capsys):
    out = tmp_path / "p.csv"
    refused(capsys, ["perturb", adult300, "--entities", "1000", "--out", out], "--entities 1000",
            "--entities 150 or fewer", outputs=[out])


def test_perturb_one_feature(adult300, tmp_path, capsys):
    out = tmp_path / "p.csv"
    refused(capsys, ["perturb", adult300, "--features", "age", "--out", out], "at least 2", "--features age,",
            outputs=[out])


def test_hierarchy_build_of_too_many_values(adult300, tmp_path, capsys):
    out = tmp_path / "h.csv"
    refused(capsys, ["hierarchy", "build", adult300, "--column", "fnlwgt", "--target", "income", "--out", out],
            "--column fnlwgt", "300 distinct values", outputs=[out])


def test_hierarchy_build_target_is_the_column(adult300, tmp_path, capsys):
    out = tmp_path / "h.csv"
    refused(capsys, ["hierarchy", "build", adult300, "--column", "education", "--target", "education",
                     "--out", out], "--target education", "another --target", outputs=[out])


# ---------------------------------------------------------------------------- item 9: the messages
def test_values_in_messages_carry_no_numpy_type(adult300, tmp_path, capsys):
    out = tmp_path / "o.csv"
    err = refused(capsys, ["evaluate", adult300, "--qi", "education,race", "--target", "age", "--protections", "raw",
                           "--out", out], "target value", "occurs once", outputs=[out])
    assert "np." not in err
    pop = tmp_path / "pop.csv"
    pd.read_csv(adult300).iloc[:100].to_csv(pop, index=False)
    err = refused(capsys, ["risk", adult300, "--qi", QI, "--population-table", pop], "population table")
    assert "np." not in err and "(first: 76, 'Masters')" in err
    orig = tmp_path / "ages.csv"  # the same rows, no age 76 (an --original of other rows is refused)
    pd.read_csv(adult300).replace({"age": {76: 75}}).to_csv(orig, index=False)
    assert main(["check", str(adult300), "--qi", "education,race", "--sensitive", "age", "--k", "2",
                 "--original", str(orig)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "FAIL sensitive value 76 is not in the reference table" in lines


def test_protection_option_not_a_number_says_whole_number(adult300, tmp_path, capsys):
    out = tmp_path / "o.csv"
    err = refused(capsys, ["evaluate", adult300, "--qi", QI, "--target", "income", "--protections", "k=3,l=x",
                           "--out", out], "'l=x' is not a whole number", "l=2", outputs=[out])
    assert "a int" not in err


def test_negative_population_says_so(adult300, capsys):
    err = refused(capsys, ["risk", adult300, "--qi", QI, "--population", "-1000"], "population size -1000",
                  "not a whole number >= 1")
    assert "below the 0 rows" not in err


# ---------------------------------------------------------------------------- item 9: the rest of the messages
def test_entropy_refusal_names_the_entropy(adult300, tmp_path, capsys):
    out = tmp_path / "o.csv"
    err = refused(capsys, ["anonymize", adult300, "--qi", "age", "--sensitive", "education", "--l", "9", "--l-kind",
                           "entropy", "--k", "3", "--out", out], "entropy of 'education'", "below log(9)", "--l 7",
                  outputs=[out])
    assert "distinct value" not in err
    counts = pd.read_csv(adult300)["education"].value_counts().to_numpy()
    p = counts / counts.sum()
    assert f"{-(p * np.log(p)).sum():.4f} nats" in err  # the entropy, worked here
    refused(capsys, ["anonymize", adult300, "--qi", "age", "--sensitive", "race", "--l", "2", "--l-kind", "entropy",
                     "--k", "3", "--out", out], "entropy of 'race'", "no l above 1", outputs=[out])


def test_ragged_hierarchy_row_is_named(adult300, tmp_path, capsys):
    values = sorted(pd.read_csv(adult300)["education"].unique())
    rows = [f"{v};G{i % 3};*" for i, v in enumerate(values)]
    rows[4] = f"{values[4]};G1;H;*"  # one row a level longer: the others padded, G1 gets two parents
    h, out = tmp_path / "edu.csv", tmp_path / "o.csv"
    h.write_text("\n".join(rows) + "\n")
    refused(capsys, ["anonymize", adult300, "--qi", "age,education", "--hierarchy", f"education={h}", "--k", "5",
                     "--out", out], "edu.csv, line 5", "4 fields", "have 3", "same number of fields", outputs=[out])


def test_semicolon_separator_on_a_comma_file_hints_comma(adult300, tmp_path, capsys):
    out = tmp_path / "o.csv"
    refused(capsys, ["anonymize", adult300, "--qi", "age", "--k", "5", "--sep", ";", "--out", out], "--sep ','",
            outputs=[out])


def test_constant_distpab_feature_is_one_plain_line(adult300, tmp_path, capsys):
    src, out = tmp_path / "c.csv", tmp_path / "p.csv"
    pd.read_csv(adult300).assign(const=5).to_csv(src, index=False)
    assert main(["perturb", str(src), "--features", "age,fnlwgt,const", "--centralized", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "gpuanon: constant feature column(s) 'const': left out of the DISTPAB search" in err
    assert "UserWarning" not in err and ".py:" not in err


def test_cpu_backend_without_a_gpu_is_a_plain_choice(adult300, tmp_path, capsys, monkeypatch):
    from gpuanon import backend as B

    if B.gpu_usable():
        pytest.skip("a GPU is usable here")
    monkeypatch.delenv("GPUANON_BACKEND")
    monkeypatch.setattr(B, "_driver_present", lambda: (False, "no NVIDIA driver or device found"))
    monkeypatch.setattr(B, "_SAID", set())
    assert main(["anonymize", str(adult300), "--qi", QI, "--k", "5", "--out", str(tmp_path / "o.csv")]) == 0
    err = capsys.readouterr().err
    assert "gpuanon: backend cpu (auto, no GPU here: no NVIDIA driver or device found)" in err
    assert "fell back" not in err


def test_risk_takes_risk_threshold_as_anonymize_does(adult300, tmp_path, capsys):
    import json

    for opt in ("--risk-threshold", "--threshold"):
        rep = tmp_path / f"r{opt}.json"
        assert main(["risk", str(adult300), "--qi", QI, opt, "0.5", "--report", str(rep), "-q"]) == 0
        assert json.loads(rep.read_text())["risk"]["sample"]["prosecutor"]["threshold"] == 0.5
    refused(capsys, ["risk", adult300, "--qi", QI, "--risk-threshold", "2"], "--risk-threshold 0.2")


def test_numpy_numbers_in_parameter_errors_are_plain():
    from gpuanon.anonymize.criteria import check_criteria_values

    with pytest.raises(Exception) as exc:
        check_criteria_values(np.float64(2.5), "distinct", 1.0, None, "auto")
    assert "got 2.5;" in str(exc.value) and "np." not in str(exc.value)
