"""The attacks on the GPU backend, run on the CuPy double (tests/cupy_double.py): the same report as on the
CPU, bit for bit, on raw, generalized (Mondrian) and DISTPAB releases and the hand-worked 12-row table;
every copy and sync counted (none escapes), and the syncs of each attack a small budget that does not grow
with the number of blocks."""

import numpy as np
import pandas as pd
import pytest

from gpuanon import backend as B
from gpuanon.attack import device, evaluate

cupy_double = pytest.importorskip("cupy_double")

AUX = (["age", "workclass", "education", "marital-status"], ["occupation", "race", "gender", "native-country"])
#: syncs per attack kind on the double (linkability: the two sides' group counts, the (A, B) pairs'
#: unique, the counts' one copy; inference, per secret: the groups, per table of targets the number of
#: (target, group) pairs sharing a key and the targets left for the full search, the credits' one copy);
#: singling out: per mode, the counts of the successes, the baseline and the control, one copy each; they do
#: not grow with the blocks or the attacks
SYNC_BUDGET = {"attack_linkability": 4, "attack_inference": 6, "attack_singling_out": 6}


def _without_clock(r: dict) -> dict:
    r = dict(r)
    r.pop("cpu_seconds", None)
    return r


def _both(release, original, control, **kw):
    """The CPU's report, the double's report and the double's counts."""
    cpu = _without_clock(evaluate(release, original, control, **kw))
    dev = cupy_double.DeviceDouble()
    with B.use_device_module(dev), B.count_transfers() as tl:
        gpu = _without_clock(evaluate(release, original, control, backend="gpu", **kw))
    return cpu, gpu, dev.stats.summary(), tl.to_dict()


def _check_counts(s: dict, tr: dict, n_secrets: int = 1) -> None:
    assert s["syncs_escaped"] == 0 and s["uploads_escaped"] == 0, s["escaped_sites"]
    for st, budget in SYNC_BUDGET.items():
        if st in s["stages"]:
            syncs = s["stages"][st]["syncs_counted"] + s["stages"][st]["syncs_implicit"]
            assert syncs <= budget * (n_secrets if st == "attack_inference" else 1), (st, s["stages"][st])
            assert s["stages"][st]["syncs_counted"] == tr["stages"][st]["syncs"]  # the report's log agrees


@pytest.fixture(scope="module")
def adult_halves():
    from gpuanon.datasets import load_adult

    df = load_adult().sample(3000, random_state=1).reset_index(drop=True)
    return df.iloc[:1500].reset_index(drop=True), df.iloc[1500:2700].reset_index(drop=True)


@pytest.mark.parametrize("n_neighbours", [1, 3])
def test_raw_release(adult_halves, n_neighbours):
    o, c = adult_halves
    cpu, gpu, s, tr = _both(o, o, c, attacks=["singling-out", "linkability", "inference"], n_attacks=400,
                            secrets=["income", "age"], aux=AUX, n_neighbours=n_neighbours, seed=5)
    assert gpu == cpu
    assert cpu["linkability"]["n_success"] > 0 and cpu["inference"]["income"]["n_success"] > 0
    _check_counts(s, tr, 2)


def test_generalized_release_with_missing_values(adult_halves):
    from gpuanon import Mondrian

    o, c = adult_halves
    o = o.copy()
    o.loc[o.index % 17 == 0, "age"] = np.nan  # missing values among the targets and in the release
    qi = ["age", "education", "marital-status", "race", "gender"]
    rel = Mondrian(k=5, quasi_identifiers=qi, backend="cpu", progress=False).fit_transform(o)
    kw = dict(attacks=["singling-out", "linkability", "inference"], n_attacks=300, secrets=["income", "age"],
              quasi_identifiers=qi + ["hours-per-week"], seed=2)
    for k in (1, 2):
        cpu, gpu, s, tr = _both(rel, o, c, n_neighbours=k, **kw)
        assert gpu == cpu
        assert 0 < cpu["linkability"]["ties_kept"]["n_success"]
        _check_counts(s, tr, 2)


def test_distpab_release(adult_halves):
    from gpuanon.perturb.distpab import DISTPAB

    o, c = adult_halves
    num = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    xp_, _ = DISTPAB(noise=0.3, random_state=0, backend="cpu", shuffle=False).fit_perturb(o[num].to_numpy(float))
    rel = pd.DataFrame(xp_, columns=num)
    cpu, gpu, s, tr = _both(rel, o[num], c[num], attacks=["singling-out", "linkability", "inference"], n_attacks=300,
                            secrets=["capital-gain"], aux=(num[:3], num[3:]), seed=1)
    assert gpu == cpu
    _check_counts(s, tr)


def test_blocks_by_free_memory_give_the_same_report_and_syncs(adult_halves, monkeypatch):
    o, c = adult_halves
    kw = dict(attacks=["singling-out", "linkability", "inference"], n_attacks=300, secrets=["income"], aux=AUX, seed=4)
    cpu, gpu, s_one, _ = _both(o, o, c, **kw)
    monkeypatch.setattr(device, "MAX_BLOCK_BYTES", 1 << 16)  # dozens of blocks per attack
    _, gpu_many, s_many, tr = _both(o, o, c, **kw)
    assert gpu == cpu and gpu_many == cpu
    for st in SYNC_BUDGET:  # the syncs do not grow with the blocks
        assert s_many["stages"][st]["syncs_counted"] == s_one["stages"][st]["syncs_counted"]
        assert s_many["stages"][st]["syncs_implicit"] == s_one["stages"][st]["syncs_implicit"]
    for st in SYNC_BUDGET:  # more blocks: more operations
        assert s_many["stages"][st]["ops"] > s_one["stages"][st]["ops"], st
    _check_counts(s_many, tr)


def test_hand_worked_table_on_the_device():
    from test_attack_hand import CITY, CONTROL, ORIG, RELEASE

    kw = dict(hierarchies={"city": CITY}, seed=3, n_attacks=12, secrets=["inc"], aux=(["age", "city"], ["job", "hours"]))
    cpu, gpu, s, tr = _both(RELEASE, ORIG, CONTROL, **kw)
    assert gpu == cpu
    # the hand-worked counts of tests/test_attack_hand.py
    assert gpu["linkability"]["n_success"] == 2 and gpu["linkability"]["ties_kept"]["n_success"] == 12
    assert gpu["inference"]["inc"]["n_success"] == pytest.approx(7.5)
    _check_counts(s, tr)


def test_device_distances_are_the_cpus_floats():
    """Every (target, release row) distance on the double equals the CPU's dense distance, as floats."""
    from gpuanon.attack.distance import distances, kinds
    from test_attack_search import _tables

    for seed in range(4):
        e = _tables(seed, generalized=seed % 2 == 1)
        dev = cupy_double.DeviceDouble()
        with B.use_device_module(dev):
            cells = device.Cells(e, dev)
            for t in (e.original, e.control):
                rows = np.arange(t.n)
                want = distances(e, e.columns, t, rows, kinds(e, e.columns))
                got = device.distances(cells, e.columns, kinds(e, e.columns), device._nan_of(e.columns, t),
                                       device._rel_of(cells, e.columns),
                                       device._tgt_of(cells, e.columns, t, B.to_device(rows, dev)))
                assert np.array_equal(B.to_host(got), want)


def test_command_line_backend_gpu_on_the_double(tmp_path, monkeypatch):
    """``gpuanon attack --release ... --backend gpu``: the report of ``--backend cpu`` (timing aside)."""
    import json

    from gpuanon.cli import main
    from test_attack_hand import CITY, CONTROL, ORIG, RELEASE

    monkeypatch.delenv("GPUANON_BACKEND", raising=False)
    paths = {k: tmp_path / f"{k}.csv" for k in ("release", "original", "control")}
    RELEASE.to_csv(paths["release"], index=False)
    ORIG.to_csv(paths["original"], index=False)
    CONTROL.to_csv(paths["control"], index=False)
    CITY.to_arx_csv(tmp_path / "city.csv")
    docs = {}
    for be in ("cpu", "gpu"):
        rep = tmp_path / f"{be}.json"
        argv = ["attack", "--release", str(paths["release"]), "--original", str(paths["original"]), "--control",
                str(paths["control"]), "--secret", "inc", "--n-attacks", "12", "--aux", "age,city|job,hours",
                "--hierarchy", f"city={tmp_path / 'city.csv'}", "--seed", "3", "--report", str(rep), "--backend", be,
                "-q"]
        dev = cupy_double.DeviceDouble()
        with B.use_device_module(dev):
            assert main(argv) == 0
        if be == "gpu":
            assert dev.stats.summary()["stages"]["attack_linkability"]["syncs_counted"] == 1
        docs[be] = _without_clock(json.loads(rep.read_text()))
    assert docs["gpu"] == docs["cpu"]
    assert docs["gpu"]["linkability"]["n_success"] == 2


@pytest.mark.parametrize("seed", range(6))
def test_small_tables_full_of_ties(seed, monkeypatch):
    """tests/test_attack_search.py's random tables (ties, missing values, intervals, '*', set cells): the
    device's key search, its full search of the rest and its chunks give the CPU's reports."""
    rng = np.random.default_rng(seed)

    def frame(m):
        return pd.DataFrame({"a": rng.integers(0, 4, m).astype(float), "b": rng.choice(["x", "y", "z"], m),
                             "c": rng.choice(["p", "q"], m), "d": rng.integers(0, 3, m) * 0.5,
                             "s": rng.choice(["u", "v", "w"], m)})

    orig, ctrl = frame(80), frame(70)
    rel = orig.copy()
    rel.loc[rng.random(80) < 0.1, "d"] = np.nan
    orig.loc[rng.random(80) < 0.05, "a"] = np.nan
    ctrl.loc[rng.random(70) < 0.2, "b"] = "new"  # a key no release row has: the full search
    if seed % 2:
        lo = rel["a"].fillna(0).astype(int)
        rel["a"] = [f"{x}-{x + 1}" if i % 3 else "*" for i, x in enumerate(lo)]
        rel.loc[rng.random(80) < 0.3, "c"] = "p|q"
        rel.loc[rng.random(80) < 0.3, "s"] = "u|v"
    monkeypatch.setattr(device, "MAX_BLOCK_BYTES", 1 << 11 if seed % 3 == 0 else 1 << 33)
    kw = dict(attacks=["singling-out", "linkability", "inference"], n_attacks=60, secrets=["s", "d"],
              aux=(["a", "b"], ["c", "d"]), seed=seed)
    for k in (1, 2):
        cpu, gpu, s, tr = _both(rel, orig, ctrl, n_neighbours=k, **kw)
        assert gpu == cpu
        _check_counts(s, tr, 2)


def test_gpu_check_attacks_part_on_the_double():
    """bench/gpu_check.py's attacks part, its GPU code path on the double: equal to the CPU, syncs counted."""
    import importlib.util
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench"
    sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location("_gpu_attack", bench / "_gpu_attack.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.run_attacks({"part": "attacks", "backend": "gpu", "double": True, "rows": 3000, "n_attacks": 200,
                           "compare_cpu": True})
    for kind, r in res["kinds"].items():
        assert r["equal_to_cpu"], kind
        assert r["warm_transfers"]["to_host"]["calls"] == {"linkability": 1, "inference": 3, "singling-out": 6}[kind]
    assert res["double_counts"]["syncs_escaped"] == 0
    assert "equal to CPU True" in mod.attack_figures(res)
