"""DISTPAB (SPEC section 8): statistics, rotation, search, perturbation, frames."""

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from gpuanon.errors import InputError, SchemaError
from gpuanon.perturb import (DEFAULT_ANGLES, DISTPAB, local_stats, merge_stats, perturb_frame,
                             rotation_matrices, search)
from gpuanon.perturb.distpab import (TIE_TOL, finalize, homogeneous_matrix, merge_all, perturb_block,
                                     variance_table)


def correlated(m, n, seed=0, shift=0.0, scale=1.0):
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(n, n))
    return (rng.normal(size=(m, n)) @ L) * scale + shift


def givens(n, i, j, theta_deg):
    c, s = np.cos(np.deg2rad(theta_deg)), np.sin(np.deg2rad(theta_deg))
    G = np.eye(n)
    G[i, i] = G[j, j] = c
    G[j, i] = s
    G[i, j] = -s
    return G


def explicit_rotation(n, theta_deg):
    R = np.eye(n)
    for i, j in itertools.combinations(range(n), 2):  # lexicographic, left to right
        R = R @ givens(n, i, j, theta_deg)
    return R


def zscore(X, model):
    return (X - model.mean_) / np.where(model.scale_ > 0, model.scale_, 1.0)


# ----------------------------------------------------------------------------------- constants

def test_default_angles_are_the_172_of_the_spec():
    assert len(DEFAULT_ANGLES) == 172
    assert set(DEFAULT_ANGLES) == set(range(1, 180)) - {30, 45, 60, 90, 120, 135, 150}
    assert list(DEFAULT_ANGLES) == sorted(DEFAULT_ANGLES)


# ----------------------------------------------------------------------------------- statistics

def test_merged_comoment_equals_comoment_of_concatenated_rows():
    X = correlated(3001, 6, seed=1, shift=1e3, scale=5.0)
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc
    for cuts in ([1500], [1, 2, 3000], [7, 100, 999, 2000, 2999]):
        parts = np.split(X, cuts)
        merged = merge_all([local_stats(p, block_rows=97) for p in parts])
        assert merged.n == len(X)
        np.testing.assert_allclose(merged.mean, X.mean(axis=0), rtol=1e-12)
        assert np.max(np.abs(merged.comoment - C)) <= 1e-8 * np.max(np.abs(C))
    # sequential pairwise merge gives the same as the tree
    s = local_stats(X[:10])
    for p in np.split(X[10:], [5, 900, 1800]):
        s = merge_stats(s, local_stats(p))
    assert np.max(np.abs(s.comoment - C)) <= 1e-8 * np.max(np.abs(C))


def test_local_stats_of_float32_blocks_matches_float64():
    X = correlated(5000, 4, seed=2, shift=10.0).astype(np.float32)
    s = local_stats(X, block_rows=333)
    X64 = X.astype(np.float64)
    Xc = X64 - X64.mean(axis=0)
    np.testing.assert_allclose(s.comoment, Xc.T @ Xc, rtol=1e-10)
    assert s.mean.dtype == np.float64 and s.comoment.dtype == np.float64


def test_finalize_gives_correlation_of_zscored_data():
    X = correlated(800, 5, seed=3, shift=2.0, scale=3.0)
    mean, sigma, S, const = finalize(local_stats(X))
    np.testing.assert_allclose(mean, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(sigma, X.std(axis=0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(S, np.corrcoef(X, rowvar=False), atol=1e-12)
    assert not const.any()


# ----------------------------------------------------------------------------------- rotations

@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_rotations_are_orthogonal_and_proper(n):
    R = rotation_matrices(DEFAULT_ANGLES, n)
    assert R.shape == (172, n, n)
    RRt = np.einsum("aij,akj->aik", R, R)
    assert np.max(np.abs(RRt - np.eye(n))) < 1e-12
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-10)


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_rotation_is_the_lexicographic_left_to_right_givens_product(n):
    angles = [1, 17, 44, 91, 133, 179]
    R = rotation_matrices(angles, n)
    for a, theta in enumerate(angles):
        assert np.max(np.abs(R[a] - explicit_rotation(n, theta))) < 1e-12
    if n >= 3:  # the order matters: the reversed product is a different matrix
        rev = np.eye(n)
        for i, j in reversed(list(itertools.combinations(range(n), 2))):
            rev = rev @ givens(n, i, j, 17)
        assert np.max(np.abs(R[1] - rev)) > 1e-3


# ----------------------------------------------------------------------------------- closed form

@pytest.mark.parametrize("angle,axis", [(1, 0), (37, 2), (100, 4), (179, 1), (61, 3)])
def test_closed_form_variance_equals_brute_force(angle, axis):
    X = correlated(2500, 5, seed=4, shift=3.0, scale=2.0)
    mean, sigma, S, _ = finalize(local_stats(X))
    t = np.random.default_rng(5).uniform(size=5)
    H = homogeneous_matrix(angle, axis, t, 5)
    Xp = perturb_block(X, mean, sigma, H, 0.0, None)
    Z, Zp = (X - mean) / sigma, (Xp - mean) / sigma
    brute = np.var(Z - Zp, axis=0, ddof=1)
    closed = variance_table(S, [angle])[0, axis]
    assert np.max(np.abs(brute - closed)) < 1e-9
    # and the same by explicit matrices, without the homogeneous form
    F = np.eye(5)
    F[axis, axis] = -1
    R = explicit_rotation(5, angle)
    assert np.max(np.abs(Zp - (Z @ F + t) @ R.T)) < 1e-10
    A = R @ F
    direct = 1 - 2 * np.diag(A @ S) + np.diag(A @ S @ A.T)
    assert np.max(np.abs(direct - closed)) < 1e-12


def test_homogeneous_matrix_is_reflect_translate_rotate():
    n = 4
    rng = np.random.default_rng(6)
    z, t = rng.normal(size=n), rng.uniform(size=n)
    H = homogeneous_matrix(23, 2, t, n)
    F = np.eye(n)
    F[2, 2] = -1
    y = np.append(z, 1.0) @ H
    np.testing.assert_allclose(y[:n], (z @ F + t) @ explicit_rotation(n, 23).T, atol=1e-12)
    assert y[n] == 1.0
    np.testing.assert_array_equal(H[:, n], np.append(np.zeros(n), 1.0))


# ----------------------------------------------------------------------------------- search

def python_search(S, angles, selection):
    n = S.shape[0]
    table = np.empty((len(angles), n))
    for a, theta in enumerate(angles):
        R = explicit_rotation(n, theta)
        for ax in range(n):
            F = np.eye(n)
            F[ax, ax] = -1
            A = R @ F
            table[a, ax] = min(1 - 2 * (A @ S)[j, j] + (A @ S @ A.T)[j, j] for j in range(n))
    if selection == "maximin":
        best_a, best_phi = None, -np.inf
        for a in range(len(angles)):
            p = min(table[a])
            if p > best_phi + TIE_TOL:
                best_a, best_phi = a, p
        row = table[best_a]
        best_ax = next(ax for ax in range(n) if row[ax] <= min(row) + TIE_TOL)
    else:
        best_a = best_ax = None
        best = -np.inf
        for a in range(len(angles)):
            for ax in range(n):
                if table[a, ax] > best + TIE_TOL:
                    best, best_a, best_ax = table[a, ax], a, ax
    return table, best_a, best_ax


@pytest.mark.parametrize("selection", ["maximin", "max"])
@pytest.mark.parametrize("seed", [0, 1])
def test_search_equals_python_double_loop(selection, seed):
    X = correlated(400, 4, seed=10 + seed)
    S = np.corrcoef(X, rowvar=False)
    angles = list(range(1, 180, 4))
    res = search(S, angles, selection=selection)
    table, a, ax = python_search(S, angles, selection)
    assert np.max(np.abs(res.table - table)) < 1e-12
    assert (res.angle, res.axis) == (angles[a], ax)
    assert abs(res.phi - table[a, ax]) < 1e-12
    assert abs(res.variances.min() - res.phi) < 1e-12


def test_max_selection_is_at_least_maximin():
    S = np.corrcoef(correlated(500, 6, seed=12), rowvar=False)
    r1, r2 = search(S, selection="maximin"), search(S, selection="max")
    assert r2.phi >= r1.phi - 1e-15
    assert r1.phi == pytest.approx(r1.table.min(axis=1).max(), abs=0)
    with pytest.raises(ValueError, match="selection"):
        search(S, selection="best")


def test_search_ties_pick_smallest_angle_and_axis():
    # identity S is symmetric in the axes: every axis of the best angle ties
    res = search(np.eye(3), [10, 20, 170])
    assert res.axis == 0
    per_angle = res.table.min(axis=1)
    assert res.angle_index == int(np.flatnonzero(per_angle >= per_angle.max() - TIE_TOL)[0])


# ----------------------------------------------------------------------------------- estimator

@pytest.mark.parametrize("sizes", [[997], [400, 597], [1, 2, 50, 300, 13, 431, 200]])
def test_distributed_equals_centralized_without_noise_or_shuffle(sizes):
    X = correlated(sum(sizes), 6, seed=20, shift=5.0, scale=3.0)
    central = DISTPAB(noise=0.0, shuffle=False, random_state=3).fit(X)
    Xc, perm = central.perturb(X)
    np.testing.assert_array_equal(perm, np.arange(len(X)))
    parts = np.split(X, np.cumsum(sizes)[:-1])
    dist = DISTPAB(noise=0.0, shuffle=False, random_state=3).fit_entities(parts)
    assert dist.n_entities_ == len(sizes)
    assert (dist.angle_degrees_, dist.axis_) == (central.angle_degrees_, central.axis_)
    assert dist.phi_ == pytest.approx(central.phi_, abs=1e-12)
    np.testing.assert_array_equal(dist.translation_, central.translation_)
    out = np.concatenate([dist.perturb(p, entity=i)[0] for i, p in enumerate(parts)])
    assert np.max(np.abs(out - Xc)) < 1e-10 * np.max(np.abs(Xc))
    assert np.max(np.abs(out - X)) > 0.1  # it did perturb


def test_geometric_step_preserves_pairwise_distances_in_z_space():
    X = correlated(300, 5, seed=21, shift=-2.0, scale=4.0)
    model = DISTPAB(noise=0.0, shuffle=False, random_state=1).fit(X)
    Xp, _ = model.perturb(X)
    Z, Zp = zscore(X, model), zscore(Xp, model)
    D = np.linalg.norm(Z[:, None] - Z[None], axis=-1)
    Dp = np.linalg.norm(Zp[:, None] - Zp[None], axis=-1)
    assert np.max(np.abs(D - Dp)) < 1e-10
    assert np.max(np.abs(Z - Zp)) > 0.1


def test_fitted_attributes_and_variances():
    X = correlated(2000, 5, seed=22, shift=1.0)
    model = DISTPAB(random_state=0).fit(X)
    assert model.variances_.shape == (5,) and model.phi_ == pytest.approx(model.variances_.min(), abs=1e-12)
    assert model.angle_degrees_ in DEFAULT_ANGLES and 0 <= model.axis_ < 5
    assert np.all((model.translation_ >= 0) & (model.translation_ < 1))
    np.testing.assert_allclose(model.rotation_, explicit_rotation(5, model.angle_degrees_), atol=1e-12)
    assert model.bytes_per_entity_ == 8 * (1 + 5 + 25) + 8 * (36 + 10 + 1)
    assert model.n_entities_ == 1 and model.constant_columns_ == []
    # Phi is the maximin of the variance table of the data's own correlation matrix
    S = np.corrcoef(X, rowvar=False)
    assert model.phi_ == pytest.approx(variance_table(S).min(axis=-1).min(axis=1).max(), abs=1e-9)


def test_reproducible_with_a_seed_and_different_with_another():
    X = correlated(500, 4, seed=23)
    a1, p1 = DISTPAB(random_state=11).fit_perturb(X)
    a2, p2 = DISTPAB(random_state=11).fit_perturb(X)
    b, pb = DISTPAB(random_state=12).fit_perturb(X)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(p1, p2)
    assert not np.array_equal(p1, pb)
    assert np.max(np.abs(np.sort(a1, axis=0) - np.sort(b, axis=0))) > 1e-3
    m = DISTPAB(random_state=11).fit(X)
    e0, _ = m.perturb(X, entity=0)
    e1, _ = m.perturb(X, entity=1)
    assert not np.array_equal(e0, e1)  # each entity has its own noise and shuffle
    np.testing.assert_array_equal(e0, a1)


def test_randomized_expansion_pushes_away_from_zero_with_sign_zero_positive():
    d = 3
    mean, sigma = np.array([1.0, -2.0, 0.0]), np.array([2.0, 1.0, 0.5])
    H = np.eye(d + 1)
    X = np.vstack([mean, mean + sigma * [0.5, -0.25, 2.0], mean - sigma])
    rng = np.random.default_rng(0)
    geo = perturb_block(X, mean, sigma, H, 0.0, None)
    noisy = perturb_block(X, mean, sigma, H, 0.3, rng)
    np.testing.assert_allclose(geo, X)
    zg, zn = (geo - mean) / sigma, (noisy - mean) / sigma
    assert np.all(np.abs(zn) > np.abs(zg))
    assert np.all(np.sign(zn[1:]) == np.sign(zg[1:]))
    assert np.all(zn[0] > 0)  # Y = 0 exactly: sign(0) = +1


def test_constant_column_passes_through():
    X = correlated(400, 4, seed=24)
    X = np.insert(X, 2, 5.25, axis=1)
    df = pd.DataFrame(X, columns=["a", "b", "k", "c", "d"])
    with pytest.warns(UserWarning, match="'k'"):
        model = DISTPAB(random_state=0).fit(df)
    Xp, perm = model.perturb(df)
    np.testing.assert_array_equal(Xp[:, 2], 5.25)
    assert model.constant_columns_ == ["k"] and model.variances_[2] == 0 and model.scale_[2] == 0
    assert model.axis_ != 2 and model.rotation_[2, 2] == 1.0 and model.translation_[2] == 0
    assert np.all(np.abs(np.delete(Xp, 2, axis=1) - np.delete(X[perm], 2, axis=1)) > 0)
    # the search on the others equals the search without the constant column
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = DISTPAB(random_state=0).fit(np.delete(X, 2, axis=1))
    assert (ref.angle_degrees_, ref.phi_) == (model.angle_degrees_, model.phi_)


def test_float32_in_float32_out_and_blocks_do_not_change_the_result():
    X = correlated(1000, 5, seed=25, shift=100.0).astype(np.float32)
    big = DISTPAB(random_state=4, block_rows=1 << 20).fit(X)
    small = DISTPAB(random_state=4, block_rows=64).fit(X)
    a, pa = big.perturb(X)
    b, pb = small.perturb(X)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_noise_prefetch_and_tiles_do_not_change_the_result(monkeypatch):
    import gpuanon.perturb.apply as dp

    X = correlated(3000, 4, seed=29)
    model = DISTPAB(noise=0.3, random_state=8, block_rows=1000).fit(X)
    ref, pref = model.perturb(X)
    for tile, prefetch in ((64, True), (64, False), (1000, False), (7, True)):
        monkeypatch.setattr(dp, "_CPU_TILE_ROWS", tile)
        monkeypatch.setattr(dp, "_PREFETCH_NOISE", prefetch)
        got, perm = model.perturb(X)
        np.testing.assert_array_equal(perm, pref)
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)


def test_missing_values_and_bad_input_are_refused():
    X = correlated(50, 3, seed=26)
    X[4, 1] = np.nan
    with pytest.raises(InputError, match="'1'.*missing"):
        DISTPAB().fit(X)
    with pytest.raises(InputError, match="at least 2 rows"):
        DISTPAB().fit(np.ones((1, 3)))
    with pytest.raises(NotFittedError):
        DISTPAB().transform(np.ones((3, 3)))
    with pytest.raises(InputError, match="every feature column is constant"):
        with pytest.warns(UserWarning):
            DISTPAB().fit(np.ones((5, 2)))


# ----------------------------------------------------------------------------------- frames

def test_non_numeric_features_raise_schema_error_listing_them():
    df = pd.DataFrame({"a": [1.0, 2, 3], "s": ["x", "y", "z"], "c": pd.Categorical(["u", "v", "u"]),
                       "b": [3, 1, 2]})
    with pytest.raises(SchemaError) as e:
        perturb_frame(df, ["a", "s", "b", "c"])
    msg = str(e.value)
    assert "'s'" in msg and "'c'" in msg and "'a'" not in msg and "'b'" not in msg
    assert "--features" in msg and "xclude" in msg
    with pytest.raises(SchemaError, match="'s'"):
        DISTPAB().fit(df)
    with pytest.raises(SchemaError, match="did you mean 'a'"):
        perturb_frame(df, ["aa", "b"])
    df2 = df.assign(a=[1.0, np.nan, 3])
    with pytest.raises(SchemaError, match="'a' \\(1 missing\\)"):
        perturb_frame(df2, ["a", "b"])


def test_label_and_passengers_travel_with_their_rows_through_the_shuffle():
    n = 600
    X = correlated(n, 4, seed=27, shift=2.0)
    df = pd.DataFrame(X, columns=["f0", "f1", "f2", "f3"])
    df.insert(2, "row_id", np.arange(n))
    df["label"] = (np.arange(n) * 7919) % 3
    df["junk"] = "dropped"
    out, model = perturb_frame(df, ["f0", "f1", "f2", "f3"], label="label", passengers=["row_id"],
                               noise=0.0, random_state=5)
    assert list(out.columns) == ["f0", "f1", "row_id", "f2", "f3", "label"]
    assert isinstance(out.index, pd.RangeIndex)
    ids = out["row_id"].to_numpy()
    assert not np.array_equal(ids, np.arange(n)) and sorted(ids) == list(range(n))
    np.testing.assert_array_equal(out["label"].to_numpy(), (ids * 7919) % 3)
    # with noise 0 the geometric step inverts exactly: each perturbed row is its own row's image
    H = model.homogeneous_
    Zp = zscore(out[["f0", "f1", "f2", "f3"]].to_numpy(), model)
    Z = (Zp - H[4, :4]) @ np.linalg.inv(H[:4, :4])
    np.testing.assert_allclose(Z * model.scale_ + model.mean_, X[ids], atol=1e-9)


def test_perturb_frame_with_noise_keeps_label_pairing():
    n = 300
    df = pd.DataFrame(correlated(n, 3, seed=28), columns=["a", "b", "c"])
    df["id"] = np.arange(n)
    df["y"] = df["id"] % 2
    out, _ = perturb_frame(df, ["a", "b", "c"], label="y", passengers="id", random_state=1)
    np.testing.assert_array_equal(out["y"].to_numpy(), out["id"].to_numpy() % 2)
    assert out["a"].dtype == np.float64



# ----------------------------------------------------------------------------------- benchmark

@pytest.mark.slow
def test_bench_quick_prints_one_json_document(tmp_path):
    import json
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = tmp_path / "b.json"
    p = subprocess.run([sys.executable, os.path.join("bench", "bench_distpab.py"), "--quick", "--modes",
                        "inprocess", "--repeat", "1", "--out", str(out)],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert json.loads(out.read_text()) == doc and doc["errors"] == []
    assert [r["n"] for r in doc["search"]] == [8, 28]
    (h,) = doc["hepmass"]
    assert h["rows"] == 200_000 and h["n_entities"] == 4 and h["output_dtype"] == "float32"
    assert set(h["seconds"]) >= {"extract_and_copy_up", "stats", "search", "perturb_and_copy_down", "total"}
    assert h["peak_rss_bytes"] > 0
    t = h["transfers"]  # on the CPU: what would cross; the rows go up once and come down once
    assert t["stages"]["copy_up"]["to_device"]["bytes"] == t["stages"]["copy_down"]["to_host"]["bytes"] == 200_000 * 28 * 4
    assert doc["targets"][0]["name"] == "search_n28" and doc["targets"][0]["measured"] > 0

# ----------------------------------------------------------------------------------- GPU

def _gpu_ok():
    from gpuanon.backend import gpu_status

    return gpu_status()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_ok()[0], reason=f"no usable GPU: {_gpu_ok()[1]}")
def test_gpu_matches_cpu():
    X = correlated(50_000, 6, seed=30, shift=2.0).astype(np.float32)
    cpu = DISTPAB(noise=0.0, shuffle=True, random_state=2, backend="cpu").fit(X)
    gpu = DISTPAB(noise=0.0, shuffle=True, random_state=2, backend="gpu", block_rows=10_000).fit(X)
    assert gpu.backend_.name == "gpu"
    assert (gpu.angle_degrees_, gpu.axis_) == (cpu.angle_degrees_, cpu.axis_)
    np.testing.assert_allclose(gpu.search_.table, cpu.search_.table, atol=1e-12)
    a, pa = cpu.perturb(X)
    b, pb = gpu.perturb(X)
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    noisy = DISTPAB(noise=0.3, random_state=2, backend="gpu").fit(X)
    c, _ = noisy.perturb(X)
    assert c.dtype == np.float32 and np.isfinite(c).all()


def test_estimator_contract_in_a_pipeline():
    from sklearn.base import clone
    from sklearn.datasets import load_wine
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    X, y = load_wine(return_X_y=True)
    d = DISTPAB(noise=0.1, random_state=3, backend="cpu")
    assert clone(d).get_params() == d.get_params()
    Xp = d.fit_transform(X)
    assert isinstance(Xp, np.ndarray) and Xp.shape == X.shape
    Xq, perm = DISTPAB(noise=0.1, random_state=3, backend="cpu").fit_perturb(X)  # published: shuffled
    assert not np.array_equal(perm, np.arange(len(X))) and np.array_equal(Xp[perm], Xq)  # transform: in order
    assert not hasattr(d, "permutation_")
    pipe = make_pipeline(DISTPAB(noise=0.1, random_state=0, backend="cpu"), KNeighborsClassifier())
    assert pipe.fit(X, y).score(X, y) > 0.6


def test_distpab_modules_by_job_and_names_kept():
    """The three steps live in their modules; distpab and gpuanon.perturb re-export the same objects."""
    import gpuanon.perturb as pkg
    from gpuanon.perturb import angle_search, apply, distpab, stats

    from expected import layout_problems

    assert layout_problems("gpuanon.perturb") == []
    for mod in (stats, angle_search, apply):
        for name in mod.__all__:
            assert getattr(distpab, name) is getattr(mod, name), name
            assert name in distpab.__all__, name
    for name in pkg.__all__:
        if hasattr(distpab, name):
            assert getattr(pkg, name) is getattr(distpab, name), name

