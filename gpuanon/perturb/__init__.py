"""Perturbation of numeric data: DISTPAB (distributed) and its centralized form.

>>> from gpuanon.perturb import DISTPAB
>>> DISTPAB(noise=0.3).noise
0.3
"""

from .distpab import (DEFAULT_ANGLES, DISTPAB, PerturbParams, SearchResult, Stats, finalize,
                      homogeneous_matrix, local_stats, merge_all, merge_stats, perturb_block,
                      perturb_entity, perturb_frame, rotation_matrices, search, variance_table)
from .distributed import perturb_distributed

__all__ = [
    "DEFAULT_ANGLES",
    "DISTPAB",
    "PerturbParams",
    "SearchResult",
    "Stats",
    "finalize",
    "homogeneous_matrix",
    "local_stats",
    "merge_all",
    "merge_stats",
    "perturb_block",
    "perturb_distributed",
    "perturb_entity",
    "perturb_frame",
    "rotation_matrices",
    "search",
    "variance_table",
]
