"""Sphinx configuration for the llm-envs docs."""

import sys
from pathlib import Path

# Document the source tree these docs sit in, whichever copy pip installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llm_envs

project = "llm-envs"
author = "llm-envs developers"
release = llm_envs.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"llm-envs {release}"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes sections as :ivar: fields: dataclass and NamedTuple fields are then
# documented once, not twice (autodoc documents them as members too).
napoleon_use_ivar = True
nitpicky = False
