#!/usr/bin/env bash
# The verifiers adapter's tests (tests/verifiers, and the doctests of
# llm_envs/bridges/verifiers.py) in a virtualenv of their own.
#
# verifiers 0.4.0 pins mcp==2.0.0 and openai<3, older than the main
# environment's (fastmcp, for the episode server, needs mcp>=2.3): it gets a
# virtualenv with llm-envs (without dependencies but its light ones),
# verifiers, textarena (the Tic Tac Toe cases) and pytest, installed by uv
# (pip takes a minute more). The tiny model's server needs torch and
# transformers, which stay out of it: it runs under the main interpreter, the
# `python` this script finds on PATH (LLM_ENVS_SERVER_PYTHON). The package
# `llm-envs new-env guessnum` writes is installed into it too.
#
# The virtualenv is rebuilt every run; VERIFIERS_VENV names another place for
# it, and VERIFIERS_VENV_REUSE=1 keeps an existing one (local iterations).
set -euo pipefail
cd "$(dirname "$0")/.."

export LLM_ENVS_DATA_DIR="${LLM_ENVS_DATA_DIR:-$(cd .. && pwd)/shared/data}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_ROOT_USER_ACTION=ignore
export LLM_ENVS_SERVER_PYTHON="${LLM_ENVS_SERVER_PYTHON:-$(command -v python)}"
venv="${VERIFIERS_VENV:-${TMPDIR:-/tmp}/llm-envs-verifiers-venv}"

start=$SECONDS
if [[ "${VERIFIERS_VENV_REUSE:-0}" != 1 || ! -x "$venv/bin/vf-eval" ]]; then
    echo "== verifiers virtualenv: $venv"
    python -m venv --clear "$venv"
    "$venv/bin/python" -m pip install -q uv
    uv=("$venv/bin/uv" pip install -q --python "$venv/bin/python")
    "${uv[@]}" --no-deps -e .
    "${uv[@]}" "verifiers==0.4.0" "textarena>=0.7.4" "pettingzoo>=1.27" "gymnasium>=1.4" \
        "numpy>=1.26" "pytest>=8" "hypothesis>=6.100"
    echo "== built in $((SECONDS - start)) s"
fi
# A family from a package of its own, the one `llm-envs new-env` writes, installed as a user
# installs theirs (on every run, into a reused virtualenv too): tests/verifiers/test_own_package.py.
# new-env refuses a name Python imports already: the previous run's copy goes first.
"$venv/bin/uv" pip uninstall -q --python "$venv/bin/python" guessnum 2>/dev/null || true
scaffold="$(mktemp -d)"
"$venv/bin/python" -m llm_envs.scaffold guessnum "$scaffold/guessnum" >/dev/null
"$venv/bin/uv" pip install -q --python "$venv/bin/python" --no-deps "$scaffold/guessnum"
rm -rf "$scaffold"

echo "== tests/verifiers"
"$venv/bin/python" -m pytest -p no:cacheprovider tests/verifiers llm_envs/bridges/verifiers.py
echo "== done in $((SECONDS - start)) s"
