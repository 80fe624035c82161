"""Reading agent text: the XML-contract fields (:mod:`~llm_envs.parsing.tags`) and Python code.

:mod:`llm_envs.parsing.python_code` cleans code out of prose and fences and
finds functions in it; :mod:`llm_envs.parsing.quoting` quotes program text for
feedback.
"""

# The package's face is the tags module's public names, listed once there.
from llm_envs.parsing.tags import *  # noqa: F403
from llm_envs.parsing.tags import __all__ as __all__
