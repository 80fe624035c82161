"""``python -m llm_envs.scaffold NAME [DIR]``: the same as ``llm-envs new-env``."""

import sys

from llm_envs.scaffold.new_env import main

raise SystemExit(main(sys.argv[1:]))
