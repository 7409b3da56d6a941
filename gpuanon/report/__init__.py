"""Reports: the JSON report of a run, self-contained HTML pages with PNG plots, markdown tables.

- :mod:`~gpuanon.report.assemble`: the report dict of an anonymization (``Mondrian.report_``) and
  what the ``anonymize`` command adds to it;
- :mod:`~gpuanon.report.pages`: HTML pages from the Jinja2 templates in ``templates/`` (``render_page``
  fills any of them; :mod:`gpuanon.federated.report` uses it for the federated page): the run's
  parameters and achieved k / l / t, a bar chart of ``U(target | column)`` before and after for
  each QI (the thesis's figures 5.2 to 5.5), the class-size histogram, the metrics table; the
  model evaluation's page;
- :mod:`~gpuanon.report.plots`: the plots, as base64 PNG data URIs (no external files, no network);
- :mod:`~gpuanon.report.markdown`: GitHub markdown tables through ``pandas.DataFrame.to_markdown``.

Examples
--------
>>> from gpuanon import Mondrian
>>> from gpuanon.datasets import load_adult
>>> m = Mondrian(k=5, quasi_identifiers=["age", "education"], sensitive="income",
...              target="income", backend="cpu", progress=False)
>>> _ = m.fit_transform(load_adult().head(3000))
>>> html = render_html(m.report_)
>>> html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html
True
"""

from .assemble import anonymization_report, command_report
from .markdown import markdown_table
from .pages import render_evaluation_html, render_html, render_page
from .plots import accuracy_bars, class_size_histogram, drop_vs_metric, entropy_bar_chart, png_uri, pyplot

__all__ = ["accuracy_bars", "anonymization_report", "class_size_histogram", "command_report", "drop_vs_metric",
           "entropy_bar_chart", "markdown_table", "png_uri", "pyplot", "render_evaluation_html", "render_html",
           "render_page"]
