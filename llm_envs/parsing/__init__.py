"""Reading agent text: the XML-contract fields (:mod:`~llm_envs.parsing.tags`) and Python code.

:mod:`llm_envs.parsing.python_code` cleans code out of prose and fences and
finds functions in it; :mod:`llm_envs.parsing.quoting` quotes program text for
feedback.
"""

from llm_envs.parsing.tags import (
    TagSpan,
    find_tag,
    first_tag_start,
    normalize,
    scan_tags,
    start_at_first_tag,
    strip_code_fence,
    strip_think_tags,
)

__all__ = [
    "TagSpan",
    "find_tag",
    "first_tag_start",
    "normalize",
    "scan_tags",
    "start_at_first_tag",
    "strip_code_fence",
    "strip_think_tags",
]
