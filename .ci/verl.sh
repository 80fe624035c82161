#!/usr/bin/env bash
# CI: the verl adapter (baselines/verl) in an environment of its own, then tests/verl in it.
#
# verl 0.9.1 pins transformers>=5.5.3,<5.11 and ours is newer, so verl cannot
# join the main environment. This builds a second virtualenv outside the
# repository (VERL_VENV, default $TMPDIR/llm-envs-verl-venv) from scratch: the CPU build of
# torch first (a local file), verl without the packages only its GPU trainer
# imports (wandb, tensorboard, peft, pybind11, pylatexenc, torchdata), llm-envs
# itself without extras, what the episode server and the tests use, and the
# package `llm-envs new-env guessnum` writes. Then runs tests/verl. pip then
# reports those left-out packages as "dependency conflicts" (an ERROR line);
# nothing here imports them.
#
# --no-compile: byte-compiling every installed file (torch's thousands) costs
# more than the few modules the one test process imports compile on the fly.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VERL_VENV:-${TMPDIR:-/tmp}/llm-envs-verl-venv}"
export LLM_ENVS_DATA_DIR="${LLM_ENVS_DATA_DIR:-$(cd .. && pwd)/shared/data}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_ROOT_USER_ACTION=ignore

started=$(date +%s)
echo "== verl: build $VENV"
python -m venv --clear "$VENV"
pip="$VENV/bin/python -m pip"
# The CPU build of torch first: anything that pulls torch from the index otherwise
# downloads several GB of CUDA packages.
$pip install -qq --no-compile torch==2.13.0
# verl without its dependencies, then those its agent loop and RLHFDataset import
# (its own pins), and llm-envs' own (gymnasium, pettingzoo), its episode server's
# (the serve extra; openenv-core --no-deps, as in .ci/run) and the tests'.
$pip install -qq --no-compile --no-deps verl==0.9.1 openenv-core==0.3.0
$pip install -qq --no-compile \
    "transformers>=5.5.3,<5.11,!=5.6.0" "tensordict>=0.8.0,<=0.10.0,!=0.9.0" "ray>=2.41.0" \
    "numpy>=2.0.0" "pyarrow>=19.0.0" hydra-core datasets pandas accelerate codetiming dill \
    cachetools pillow packaging \
    "gymnasium>=1.4" "pettingzoo>=1.27" \
    "fastapi>=0.104" "uvicorn>=0.24" "websockets>=15.0.1" "httpx>=0.28.1" "requests>=2.25" \
    "fastmcp>=3.0" pytest hypothesis
# llm-envs itself, without extras.
$pip install -qq --no-compile --no-deps -e .
# A family from a package of its own, the one `llm-envs new-env` writes, installed as a user
# installs theirs: tests/verl/test_own_package.py takes it by name in the verl bridge.
scaffold="$(mktemp -d)"
"$VENV/bin/python" -m llm_envs.scaffold guessnum "$scaffold/guessnum" >/dev/null
$pip install -qq --no-compile --no-deps "$scaffold/guessnum"
rm -rf "$scaffold"
echo "== verl: environment built in $(($(date +%s) - started)) s"
"$VENV/bin/python" -c "from importlib.metadata import version as v; \
print('verl', v('verl'), 'transformers', v('transformers'), 'torch', v('torch'))"

echo "== verl: tests/verl"
"$VENV/bin/python" -m pytest tests/verl -p no:cacheprovider
echo "== verl: done in $(($(date +%s) - started)) s"
