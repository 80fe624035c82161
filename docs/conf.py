"""Sphinx configuration for the llm-envs docs."""

import sys
from pathlib import Path

# Document the source tree these docs sit in, whichever copy pip installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llm_envs
from llm_envs.registration import BUILTIN_ENVIRONMENTS

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
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist", "substitution"]
# Lists of families come from the registry ({{ env_families }} in a page), so that none goes
# stale; tests/test_docs.py finds hand-written ones. This project's families only: a package
# installed where the docs are built is not one of them.
myst_substitutions = {
    "env_families": ", ".join(
        f"`{name}`" for name in dict.fromkeys(e.family for e in BUILTIN_ENVIRONMENTS)
    ),
}
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

# A docstring under a field (a config's, baselines/config.py) is prose whose first
# line may hold a colon ("the run's folder: ..."); napoleon would read the text
# before it as the attribute's type. The annotation is its type: keep the text.
_ATTRIBUTE_DOCSTRINGS: dict[str, list[str]] = {}


def _keep_attribute_docstring(app, what, name, obj, options, lines):
    if what == "attribute":
        _ATTRIBUTE_DOCSTRINGS[name] = list(lines)


def _restore_attribute_docstring(app, what, name, obj, options, lines):
    if what == "attribute" and name in _ATTRIBUTE_DOCSTRINGS:
        lines[:] = _ATTRIBUTE_DOCSTRINGS.pop(name)


def setup(app):
    """Run napoleon (priority 500) on everything but attribute docstrings."""
    app.connect("autodoc-process-docstring", _keep_attribute_docstring, priority=400)
    app.connect("autodoc-process-docstring", _restore_attribute_docstring, priority=600)
