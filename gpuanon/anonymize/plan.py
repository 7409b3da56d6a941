"""The plan of a Mondrian run: where the estimator's parameters become what the pipeline checks.

:class:`Plan` is made once per fit, by ``Plan.of(estimator, n_rows)``: the one place where every
parameter is validated (:func:`check_parameters`, k against the table's ``n_rows`` included; one
message per parameter naming the fix), for both runners. The runner that sees the table adds its
roles with :meth:`Plan.with_roles` (on the whole frame in one process, on a sample of the first
shard on a cluster). The plan then gives the criteria (:meth:`Plan.criteria`), the verifier's
keywords (:meth:`Plan.verify_keywords`), the hierarchy plan and its leaf orders
(:meth:`Plan.hierarchy_plan`, :meth:`Plan.leaf_orders`), the whole-table check and the block
suppression (:meth:`Plan.check_whole_table`, :meth:`Plan.suppression_reason`). Both runners (one
process: :mod:`.pipeline`; a Dask cluster: :mod:`gpuanon.distributed.mondrian`) take it, and the
fit record carries it (``FitResult.plan``): later readers take ``result.plan.k`` and the like.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..backend import is_device_frame, to_host, to_scalar
from ..errors import PrivacyError, SchemaError, shown
from ..hierarchy import hierarchy_plan, leaf_orders
from ..table.schema import Schema
from .criteria import (Criteria, blocks_reason, check_criteria_values, check_suppression, missing_code,
                       resolve_t_distance, whole_table_error)
from .generalize import FORMATS

MODES = ("strict", "relaxed")


def check_input(df, device_ok: bool = True) -> None:
    """A frame with rows (pandas; a cuDF frame too where ``device_ok``): one clear error otherwise."""
    if not (isinstance(df, pd.DataFrame) or (device_ok and is_device_frame(df))):
        raise SchemaError(f"input must be a pandas DataFrame, got {type(df).__name__}")
    if len(df) == 0:
        raise SchemaError("the input table is empty (0 rows); give a table with rows")


def _check_int(name: str, value, lo: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise SchemaError(f"{name} must be an integer >= {lo}, got {value!r}; {fix}")
    return int(value)


def check_format(output_format: str) -> str:
    """``output_format`` if it is one of :data:`FORMATS`, else the one-line error."""
    if output_format not in FORMATS:
        raise SchemaError(f"format '{output_format}' is not one of {', '.join(FORMATS)}")
    return output_format


def check_parameters(est, n_rows: int) -> None:
    """The estimator's parameters that need no roles, checked against a table of ``n_rows`` rows."""
    k = _check_int("k", est.k, 2, "k-anonymity needs k >= 2 (e.g. --k 3)")
    check_k(k, n_rows)
    check_criteria_values(est.l, est.l_kind, est.c, est.t, est.t_distance)
    if est.mode not in MODES:
        raise SchemaError(f"mode '{est.mode}' is not one of strict, relaxed")
    check_format(est.output_format)
    ms = est.max_suppression
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= 1:
        raise SchemaError(f"max_suppression must be a fraction in [0, 1], got {shown(ms)}; e.g. 0.01")


def check_k(k: int, n_rows: int) -> None:
    """k larger than the table: one message, whichever runner sees it."""
    if int(k) > n_rows:
        raise PrivacyError(f"k = {k} is larger than the table ({n_rows} rows); choose k <= {n_rows}")


@dataclass(frozen=True)
class Plan:
    """A validated estimator's parameters, the roles as asked, and the table's roles (``schema``,
    None until :meth:`with_roles`)."""

    k: int
    l: int
    l_kind: str
    c: float
    t: float | None
    t_distance: str  # as asked ('auto' resolved by :meth:`criteria`)
    mode: str
    output_format: str
    max_suppression: float
    optimize: bool
    hierarchies: Any
    rho: Any
    roles: dict  # the roles and kinds as asked: Schema.from_frame's keywords
    schema: Any = None

    @classmethod
    def of(cls, est, n_rows: int) -> "Plan":
        """``est``'s parameters (a :class:`~gpuanon.Mondrian` or anything with its parameter names),
        validated against a table of ``n_rows`` rows: the one validation of both runners."""
        check_parameters(est, n_rows)
        roles = dict(quasi_identifiers=est.quasi_identifiers, sensitive=est.sensitive, target=est.target,
                     identifiers=est.identifiers, numeric=est.numeric, categorical=est.categorical,
                     sensitive_ordered=est.sensitive_ordered)
        return cls(int(est.k), int(est.l or 0), est.l_kind, float(est.c), None if est.t is None else float(est.t),
                   est.t_distance, est.mode, est.output_format, est.max_suppression, bool(est.optimize),
                   est.hierarchies, est.rho, roles)

    def with_format(self, output_format: str) -> "Plan":
        """This plan publishing in ``output_format`` (a format set after the fit, e.g. by
        ``set_params``, applies to the next ``transform``); an unknown format is refused."""
        if output_format == self.output_format:
            return self
        return replace(self, output_format=check_format(output_format))

    def with_roles(self, df, resident=None, factorized: dict | None = None) -> "Plan":
        """This plan with the roles and kinds of ``df``'s columns (a pandas frame: the table, or a
        sample of it; ``resident``: a device-resident input's part on the device, see
        :func:`gpuanon.table.resident.split_resident`); one clear error per problem. ``factorized``: as
        ``Schema.from_frame``'s."""
        schema = Schema.from_frame(df, **self.roles, factorized=factorized, resident=resident)
        cols = list(df.columns) if resident is None else resident.columns
        if self.output_format == "minmax":
            for c in schema.numeric_qis:
                for suffix in ("_min", "_max"):
                    if f"{c}{suffix}" in cols:
                        raise SchemaError(
                            f"column '{c}{suffix}' already exists, and the minmax format would write "
                            f"quasi-identifier '{c}' there; rename it or use --format range")
        if (self.l or self.t is not None) and schema.sensitive is None:
            raise SchemaError("l-diversity and t-closeness need a sensitive attribute; pass --sensitive COL")
        return replace(self, schema=schema)

    @property
    def relaxed(self) -> bool:
        return self.mode == "relaxed"

    # ------------------------------------------------------------------ hierarchies
    def hierarchy_plan(self, columns) -> dict:
        """``{column: Hierarchy or 'auto'}`` from the ``hierarchies`` parameter, validated against
        ``columns`` (a frame, or anything giving a categorical QI's values by name)."""
        return hierarchy_plan(self.hierarchies, self.rho, columns, self.schema)

    @staticmethod
    def leaf_orders(plan: dict) -> dict:
        """Each hierarchy column's code order (its leaves in the hierarchy's order)."""
        return leaf_orders(plan)

    # ------------------------------------------------------------------ criteria and checks
    def criteria(self, sa_ordered: bool, sa_values, q=None) -> Criteria:
        """The criteria on partition sizes and histograms (``q``: the whole table's sensitive
        distribution, used with t only)."""
        return Criteria(self.k, self.l, self.l_kind, self.c, self.t, resolve_t_distance(self.t_distance, sa_ordered),
                        q if self.t is not None else None, missing_code(sa_values))

    def verify_keywords(self, crit: Criteria) -> dict:
        """The independent verifier's keywords (:func:`gpuanon.release.verify.verify_encoded`, ``verify``)."""
        return dict(k=self.k, l=self.l, l_kind=self.l_kind, c=self.c, t=self.t, t_distance=crit.t_distance)

    def check_whole_table(self, crit: Criteria, n_rows: int, whole_hist, xp) -> None:
        """PrivacyError (the fix named) when the whole table (``whole_hist``: 1 x sensitive values)
        already fails l or t: no partition can then meet them."""
        if not to_scalar(crit.satisfied(xp.full(1, n_rows, dtype=xp.int64), whole_hist, xp)[0]):
            raise whole_table_error(self.l_kind, self.l, self.c, self.schema.sensitive, to_host(whole_hist),
                                    crit.sa_missing)

    def suppression_reason(self, crit: Criteria, failed: bool, suppressed: int, n_rows: int) -> str:
        """The reason for the ``suppressed`` rows of missing-value blocks that fail the criteria alone
        (``failed``: some block does; '' when none does); PrivacyError when they exceed
        ``max_suppression`` or are the whole table."""
        reason = blocks_reason(suppressed, crit) if failed else ""
        check_suppression(suppressed, n_rows, self.max_suppression, reason)
        return reason
