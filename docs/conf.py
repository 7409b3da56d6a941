"""Sphinx configuration of the documentation site (built from docs/ with warnings as errors).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (tests/test_docs.py runs it).
The pages are MyST Markdown; the API reference is autodoc over the installed ``gpuanon``. Nothing in
the build reaches the network (no intersphinx, the theme's assets are in its wheel).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's gpuanon, also when it is not installed

project = "gpuanon"
author = "the gpuanon developers"
copyright = "the gpuanon developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 4                 # [text](page.md#a-heading) links, as GitHub renders them


autodoc_typehints = "none"               # the docstrings say the types in words
autodoc_member_order = "bysource"
autodoc_mock_imports = ["cupy", "cudf", "cuml", "dask_cuda"]
napoleon_numpy_docstring = True
napoleon_google_docstring = False

html_theme = "pydata_sphinx_theme"
html_title = "gpuanon"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": ["globaltoc.html"]}   # every page at hand (the pages are one level deep)
html_static_path = []
