"""scikit-learn's estimator contract for Mondrian and DISTPAB.

scikit-learn's own checks (``parametrize_with_checks``) run on both estimators. DISTPAB passes
every check with ``noise=0``; with noise, the two checks that compare a row's output across
differently ordered or subset inputs are expected to fail (the reason is given with them).
Mondrian reads column roles from a pandas DataFrame: the checks, which feed NumPy arrays and
sparse matrices, are expected to fail, each with its reason; the ones that pass are checked to
pass (non-strict xfail would hide a pass, so the list is compared with a run below).
Both stand on ``gpuanon.estimator.Estimator``, not scikit-learn's ``BaseEstimator`` (a fit does not
import scikit-learn): scikit-learn warns about that when it collects its checks, which run as before;
the base is compared with scikit-learn's own below.
"""

from __future__ import annotations

import pickle
import warnings
from operator import methodcaller

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

import gpuanon
from gpuanon import Mondrian
from gpuanon.perturb import DISTPAB

_FRAME = ("Mondrian reads column roles (quasi-identifiers, sensitive, target) from a pandas DataFrame's "
          "column names; the check passes a NumPy array, which is refused with a one-line SchemaError")
_SPARSE = "Mondrian takes a pandas (or cuDF) DataFrame; a sparse matrix has no columns to give roles"
_NAN = (_FRAME + "; with a frame, missing values are data (missing-value blocks, published as missing), "
        "not an error")
_ONE_TABLE = (_FRAME + "; with a frame, transform publishes only the table fit partitioned, and refuses "
              "another (a subset or a reordering)")

#: every scikit-learn check that cannot apply to Mondrian, with its reason
MONDRIAN_EXPECTED_FAILURES = {
    **dict.fromkeys([
        "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
        "check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_complex_data",
        "check_dtype_object", "check_estimators_empty_data_messages", "check_pipeline_consistency",
        "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_transformer_data_not_an_array",
        "check_transformer_general", "check_transformer_preserve_dtypes", "check_fit2d_1sample",
        "check_fit2d_1feature", "check_dict_unchanged", "check_fit_idempotent", "check_fit_check_is_fitted",
        "check_n_features_in", "check_fit2d_predict1d"], _FRAME),
    **dict.fromkeys(["check_estimator_sparse_tag", "check_estimator_sparse_array",
                     "check_estimator_sparse_matrix"], _SPARSE),
    "check_estimators_nan_inf": _NAN,
    "check_methods_sample_order_invariance": _ONE_TABLE,
    "check_methods_subset_invariance": _ONE_TABLE,
}

_NOISE = ("with noise > 0 each row's noise is the next draw of the entity's random stream, so a row's "
          "output depends on its position; noise=0 passes this check")


def _expected_failures(est) -> dict:
    if isinstance(est, Mondrian):
        return MONDRIAN_EXPECTED_FAILURES
    if est.noise:
        return dict.fromkeys(["check_methods_sample_order_invariance", "check_methods_subset_invariance"], _NOISE)
    return {}


ESTIMATORS = [DISTPAB(noise=0.0, backend="cpu"), DISTPAB(backend="cpu"), Mondrian(k=2, backend="cpu", progress=False)]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant columns, small tables: warned about, not refused
        check(estimator)


@pytest.mark.parametrize("est", ESTIMATORS[1:], ids=["DISTPAB", "Mondrian"])
def test_expected_failures_do_fail(est):
    """Each expected failure fails (an xfail that passes would hide a check the estimator meets)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed == set(_expected_failures(est))


def _adult_fit():
    from gpuanon.datasets import load_adult

    df = load_adult().head(1500)
    m = Mondrian(k=5, quasi_identifiers=["age", "education", "gender"], sensitive="income", backend="cpu",
                 progress=False)
    return m, df, m.fit_transform(df)


def _distpab_fit():
    X = np.random.default_rng(0).normal(size=(400, 4)) @ np.random.default_rng(1).normal(size=(4, 4))
    return DISTPAB(noise=0.2, random_state=5, backend="cpu").fit(X), X


def test_top_level_export_and_keyword_only():
    assert gpuanon.DISTPAB is DISTPAB and "DISTPAB" in gpuanon.__all__
    with pytest.raises(TypeError):
        DISTPAB(0.3)


def test_transform_before_fit_is_not_fitted_error():
    with pytest.raises(NotFittedError):
        DISTPAB(backend="cpu").transform(np.ones((4, 2)))
    with pytest.raises(NotFittedError):
        DISTPAB(backend="cpu").perturb(np.ones((4, 2)))
    with pytest.raises(NotFittedError):
        Mondrian(k=2).transform(None)


def test_transform_changes_no_fitted_state():
    m, df, out = _adult_fit()
    before = dict(m.__dict__)
    res = m.result_
    fields = dict(res.__dict__)
    seconds, transfers = dict(res.timings), res.transfers.to_dict()
    assert m.transform(df).equals(out)
    assert m.__dict__.keys() == before.keys()
    assert [k for k in before if m.__dict__[k] is not before[k]] == []
    assert [k for k in fields if res.__dict__[k] is not fields[k]] == []
    assert res.timings == seconds and res.transfers.to_dict() == transfers
    d, X = _distpab_fit()
    before = dict(d.__dict__)
    d.transform(X)
    assert d.__dict__.keys() == before.keys() and all(d.__dict__[k] is before[k] for k in before)


def test_fitted_estimators_pickle():
    m, df, out = _adult_fit()
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.backend_.xp is np and m2.table_.xp is np
    assert np.array_equal(m2.labels_, m.labels_) and m2.report_ == m.report_
    assert m2.transform(df).equals(out)
    d, X = _distpab_fit()
    d2 = pickle.loads(pickle.dumps(d))
    assert np.array_equal(d2.transform(X), d.transform(X))
    assert all(np.array_equal(a, b) for a, b in zip(d2.perturb(X, entity=2), d.perturb(X, entity=2)))


@pytest.mark.slow
def test_fitted_estimators_run_on_a_dask_worker_process():
    """A worker in another process: the fitted estimators travel pickled and run there."""
    distributed = pytest.importorskip("distributed")
    m, df, out = _adult_fit()
    d, X = _distpab_fit()
    with distributed.Client(processes=True, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        got_frame = client.submit(methodcaller("transform", df), m).result()
        got_rows = client.submit(methodcaller("transform", X), d).result()
    assert got_frame.equals(out)
    assert np.array_equal(got_rows, d.transform(X))


def test_pipeline_rows_stay_aligned():
    """DISTPAB in a Pipeline scores as with shuffle=False (the shuffle belongs to publishing)."""
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    X, y = make_classification(n_samples=1000, n_features=6, n_informative=4, random_state=0)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)

    def score(**kw):
        pipe = make_pipeline(DISTPAB(random_state=0, backend="cpu", **kw), KNeighborsClassifier())
        return pipe.fit(Xtr, ytr).score(Xte, yte)

    default, unshuffled = score(), score(shuffle=False)
    assert default == unshuffled and default > 0.8  # rows out of line with y scored 0.54 here


@pytest.mark.slow
def test_a_cluster_fitted_mondrian_pickles():
    pytest.importorskip("distributed")
    from gpuanon.datasets import load_adult

    df = load_adult().head(3000)
    m = Mondrian(k=5, quasi_identifiers=["age", "education", "gender"], sensitive="income", backend="cpu",
                 progress=False, cluster="local:2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = m.fit_transform(df)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.report_ == m.report_ and m2.transform(df).equals(out)


def _sklearn_twin(est):
    """The same estimator on scikit-learn's own bases (TransformerMixin, BaseEstimator): the reference."""
    from sklearn.base import BaseEstimator, TransformerMixin

    cls = type(est)
    twin = type(cls.__name__, (TransformerMixin, BaseEstimator), {"__init__": cls.__init__, "fit": cls.fit})
    return twin(**est.get_params(deep=False))


TWINNED = [Mondrian(k=5, quasi_identifiers=["age", "education", "gender", "race", "marital-status", "occupation"],
                    sensitive="income", hierarchies={"education": "auto"}, backend="cpu", progress=False),
           Mondrian(), DISTPAB(noise=float("nan"), angles=list(range(0, 180, 2))), DISTPAB()]


@pytest.mark.parametrize("est", TWINNED, ids=["Mondrian", "Mondrian-default", "DISTPAB", "DISTPAB-default"])
def test_the_base_behaves_as_scikit_learns(est):
    """gpuanon.estimator.Estimator (scikit-learn-free) against scikit-learn's BaseEstimator + TransformerMixin:
    parameters, repr, tags, clone, set_params and its error, pickling, NotFittedError's message."""
    from sklearn.base import clone
    from sklearn.utils import get_tags
    from sklearn.utils.validation import check_is_fitted

    twin = _sklearn_twin(est)
    assert repr(est) == repr(twin) and est.get_params(deep=True).keys() == twin.get_params(deep=True).keys()
    assert get_tags(est) == get_tags(twin)
    c = clone(est)
    assert type(c) is type(est) and repr(c) == repr(est) and c is not est
    assert all(c.get_params()[k] is not v for k, v in est.get_params().items() if isinstance(v, (list, dict)))
    with pytest.raises(ValueError) as ours:
        est.set_params(no_such=1)
    with pytest.raises(ValueError) as theirs:
        twin.set_params(no_such=1)
    assert str(ours.value) == str(theirs.value)
    p = pickle.loads(pickle.dumps(c.set_params(backend="cpu")))
    assert repr(p) == repr(c) and p.backend == "cpu"
    with pytest.raises(NotFittedError) as ours:
        est.transform(None)
    with pytest.raises(NotFittedError) as theirs:
        check_is_fitted(twin, "result_")
    assert str(ours.value) == str(theirs.value)


def test_nested_parameters_in_a_pipeline():
    from sklearn.model_selection import GridSearchCV
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    pipe = make_pipeline(DISTPAB(random_state=0, backend="cpu"), KNeighborsClassifier())
    pipe.set_params(distpab__noise=0.0, distpab__shuffle=False)
    assert pipe.get_params()["distpab__noise"] == 0.0 and pipe.steps[0][1].shuffle is False
    X = np.random.default_rng(0).normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    search = GridSearchCV(pipe, {"distpab__noise": [0.0, 0.5]}, cv=3).fit(X, y)
    assert search.best_params_["distpab__noise"] in (0.0, 0.5) and search.best_estimator_.steps[0][1].noise in (0.0, 0.5)
