"""The cluster helpers shared by DISTPAB and distributed Mondrian."""

import logging
import warnings

import pytest

pytest.importorskip("distributed")

from gpuanon.cluster.connect import open_cluster, parse_cluster  # noqa: E402
from gpuanon.cluster.connect import worker_addresses  # noqa: E402
from gpuanon.errors import BackendError, InputError  # noqa: E402

pytestmark = pytest.mark.slow  # Dask clusters


@pytest.mark.parametrize("spec,want", [("local:3", ("local", 3)), ("LOCAL", ("local", None)),
                                       ("cuda:2", ("cuda", 2)), ("tcp://10.0.0.5:8786", ("address", None)),
                                       ("tls://sched:8786", ("address", None))])
def test_parse_cluster(spec, want):
    assert parse_cluster(spec) == want


@pytest.mark.parametrize("spec,msg", [("local:x", "whole number"), ("local:0", "whole number"),
                                      ("yarn:3", "not understood"), ("", "local:N"), (3, "local:N")])
def test_parse_cluster_errors(spec, msg):
    with pytest.raises(InputError, match=msg):
        parse_cluster(spec)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_local_cluster_and_an_existing_client():
    got = _Lines()
    lg = logging.getLogger("gpuanon")
    old = lg.level
    lg.addHandler(got)
    lg.setLevel(logging.INFO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_cluster("local:3", backend="cpu") as h:
            assert len(h.workers) == 3 and h.owned
            assert h.workers == worker_addresses(h.client)
            with open_cluster(h.client) as inner:  # a client handed in is used, never closed
                assert inner.workers == h.workers and not inner.owned
            assert h.client.status == "running"
        assert h.client.status == "closed"
    lg.removeHandler(got)
    lg.setLevel(old)
    assert any("dask: LocalCluster (3 CPU worker processes), 3 worker(s)" in line for line in got.lines)


def test_unreachable_scheduler_is_a_clear_error():
    with pytest.raises(BackendError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        with open_cluster("tcp://127.0.0.1:9", connect_timeout=1):
            pass
