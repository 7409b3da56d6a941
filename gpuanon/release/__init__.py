"""A release's equivalence classes: their statistics, their verification, its original.

:mod:`.classes` per-class statistics of an encoded table; :mod:`.verify` k, l and t recomputed
from an output table alone; :mod:`.origin` whether a table could be a release's original.
"""
