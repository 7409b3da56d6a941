"""Fixtures of the cluster tests: in-process Dask LocalClusters of 2 and 3 workers, and Adult's
first 5,000 rows with and without missing values. Made only for a test that asks for them; a
module's own fixture of the same name wins. And, for every test, the package logger as it was: a
command run in process (``gpuanon.cli.main``) sets its handler and stops its propagation."""

import logging
import warnings

import pytest

from expected import with_missing
from gpuanon.datasets import load_adult


def _logger_put_back():
    log = logging.getLogger("gpuanon")
    saved = (list(log.handlers), log.propagate, log.level)
    yield
    log.handlers[:], log.propagate = saved[0], saved[1]
    log.setLevel(saved[2])


@pytest.fixture(autouse=True)
def _package_logger_put_back():
    yield from _logger_put_back()


@pytest.fixture(autouse=True, scope="module")
def _package_logger_put_back_after_module():
    """The same around a module: a module-scoped fixture that runs a command in process (before any
    test's own fixture) does not leave the logger silent for the modules after it."""
    yield from _logger_put_back()


@pytest.fixture(scope="module")
def clients():
    """``{2: client, 3: client}``: in-process LocalClusters, closed after the module."""
    from gpuanon.cluster.connect import make_client

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (2, 3):
            out[n] = make_client(n)
    yield {n: c for n, (c, _) in out.items()}
    for c, cl in out.values():
        c.close()
        cl.close()


@pytest.fixture(scope="module")
def adult():
    return load_adult().iloc[:5000].reset_index(drop=True)


@pytest.fixture(scope="module")
def adult_missing(adult):
    return with_missing(adult)
