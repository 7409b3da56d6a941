"""Running on a Dask cluster, shared by the anonymizer's and DISTPAB's cluster runs.

:mod:`.connect` opening a cluster (``local:N``, ``cuda:N``, ``tcp://host:port``, a client);
:mod:`.runner` tasks pinned to workers and gathered, a lost worker noticed.
"""
