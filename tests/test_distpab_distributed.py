"""DISTPAB on a Dask LocalCluster: the same parameters and output as in one process."""

import importlib.util
import warnings
from functools import partial

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

from gpuanon.errors import BackendError, SchemaError  # noqa: E402
from gpuanon.perturb import DISTPAB, perturb_distributed  # noqa: E402
from gpuanon.perturb.distributed import make_client  # noqa: E402

pytestmark = pytest.mark.slow  # Dask clusters

FEATURES = ["f0", "f1", "f2", "f3", "f4"]


def entity_frame(n, seed):
    rng = np.random.default_rng(seed)
    L = np.random.default_rng(99).normal(size=(5, 5))
    X = rng.normal(size=(n, 5)) @ L * 2.0 + 3.0 + seed
    df = pd.DataFrame(X, columns=FEATURES)
    df["label"] = (np.arange(n) + seed) % 2
    df["row_id"] = np.arange(n) + 100_000 * seed
    return df


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c, cl = make_client(2)
    yield c
    c.close()
    cl.close()


@pytest.fixture(scope="module")
def frames():
    return [entity_frame(n, s) for n, s in ((700, 1), (250, 2), (1100, 3))]


def test_same_parameters_and_output_as_centralized(client, frames):
    outs, rep = perturb_distributed(frames, FEATURES, label="label", noise=0.0, random_state=4,
                                    client=client, shuffle=False, passengers=["row_id"])
    allX = pd.concat(frames, ignore_index=True)[FEATURES].to_numpy()
    central = DISTPAB(noise=0.0, shuffle=False, random_state=4).fit(allX)
    assert (rep["angle_degrees"], rep["axis"]) == (central.angle_degrees_, central.axis_)
    assert rep["phi"] == pytest.approx(central.phi_, abs=1e-12)
    np.testing.assert_allclose(rep["variances"], central.variances_, atol=1e-12)
    assert rep["n_entities"] == 3 and rep["rows_per_entity"] == [700, 250, 1100]
    assert rep["features"] == FEATURES and rep["backend"] == "cpu" and rep["n_workers"] == 2
    Xc, _ = central.perturb(allX)
    got = pd.concat(outs, ignore_index=True)
    assert list(got.columns) == FEATURES + ["label", "row_id"]
    assert np.max(np.abs(got[FEATURES].to_numpy() - Xc)) < 1e-10 * np.max(np.abs(Xc))
    np.testing.assert_array_equal(got["row_id"], pd.concat(frames)["row_id"])
    d = len(FEATURES)
    for b in rep["bytes_per_entity_each"]:
        assert 8 * (1 + d + d * d) <= b["sent"] < 8 * (1 + d + d * d) + 1024
        assert 8 * (d + 1) ** 2 <= b["received"] < 8 * ((d + 1) ** 2 + 2 * d + 1) + 2048
    assert rep["bytes_per_entity"] == max(b["sent"] + b["received"] for b in rep["bytes_per_entity_each"])
    assert set(rep["seconds"]) >= {"stats", "search", "perturb", "total"}


def test_noise_and_shuffle_match_in_process_entities(client, frames):
    outs, rep = perturb_distributed(frames, FEATURES, label="label", passengers="row_id",
                                    noise=0.3, random_state=9, client=client)
    model = DISTPAB(noise=0.3, random_state=9).fit_entities([f[FEATURES] for f in frames])
    for i, (f, o) in enumerate(zip(frames, outs)):
        Xp, perm = model.perturb(f[FEATURES], entity=i)
        np.testing.assert_array_equal(o[FEATURES].to_numpy(), Xp)
        np.testing.assert_array_equal(o["row_id"].to_numpy(), f["row_id"].to_numpy()[perm])
        np.testing.assert_array_equal(o["label"].to_numpy(), (o["row_id"].to_numpy() % 100_000 + i + 1) % 2)
        assert not np.array_equal(perm, np.arange(len(f)))


def test_frames_built_on_the_workers_and_own_cluster(frames):
    builders = [partial(entity_frame, n, s) for n, s in ((700, 1), (250, 2), (1100, 3))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs, rep = perturb_distributed(builders, FEATURES, label="label", random_state=2, noise=0.0,
                                        shuffle=False)
    ref, rep2 = perturb_distributed(frames, FEATURES, label="label", random_state=2, noise=0.0,
                                    shuffle=False, n_workers=1)
    assert rep["n_workers"] == 2 and rep2["n_workers"] == 1
    for a, b in zip(outs, ref):
        pd.testing.assert_frame_equal(a, b)


def test_bad_features_fail_before_any_cluster_starts(frames):
    bad = [f.assign(f1=f["f1"].astype(str)) for f in frames]
    with pytest.raises(SchemaError, match="'f1'"):
        perturb_distributed(bad, FEATURES, label="label")


@pytest.mark.skipif(importlib.util.find_spec("dask_cuda") is not None, reason="dask-cuda is installed")
def test_cuda_cluster_without_dask_cuda_is_a_clear_error(frames):
    with pytest.raises(BackendError, match="dask-cuda"):
        perturb_distributed(frames, FEATURES, cluster="cuda")
