#!/usr/bin/env bash
# The GPU measurements of docs/trainer.md ("On a GPU"), prepared to run in one
# call of a few minutes on a lent GPU machine (torch and transformers there, no
# network, no trl). Measures bench/trl_step.py --device cuda at SmolLM2's shape
# and a 1.17B Llama shape (random weights, bench/gpu_models.py), microbatches
# of 2048 and 8192 tokens, each IS layout (padded; packed, which on CUDA runs
# FlexAttention with a document mask, or flash-attn where installed), with the
# chunked logprobs (the default) and once with full logits, 3 timed rounds.
#
# Here, once (wheels of what the device lacks; pure Python, a few MB):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 -d .whl \
#     trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
#     gymnasium==1.4.0 pettingzoo==1.27.0 farama-notifications==0.0.6 cloudpickle==3.1.1
# There (the device tool's run, carrying .whl):
#   bash bench/gpu_step.sh
# Each run is cut at STEP_TIMEOUT seconds (default 100) so the whole fits the
# call; the log goes to $OUT/gpu_step.log.
set -uo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
export PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/gpu-step-out}"
mkdir -p "$OUT"
LOG="$OUT/gpu_step.log"
STEP_TIMEOUT="${STEP_TIMEOUT:-100}"
MODELS="${MODELS:-/tmp/gpu-models}"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$LOG"
python3 bench/gpu_models.py "$MODELS" | tee -a "$LOG" || exit 1

run() {
    echo "== $*" | tee -a "$LOG"
    timeout "$STEP_TIMEOUT" python3 bench/trl_step.py --device cuda --rounds 3 "$@" 2>&1 \
        | grep -v -i "warning" | tee -a "$LOG"
}

for shape in smollm2-shape:16 llama-1.17b:8; do
    model="$MODELS/${shape%%:*}"
    groups="${shape##*:}"
    for tokens in 2048 8192; do
        for layout in padded packed; do
            run --model "$model" --groups "$groups" --max-tokens "$tokens" --packing "$layout"
        done
    done
    # The logprob path alone: full logits, on the default layout and microbatch.
    run --model "$model" --groups "$groups" --logprob-chunk-tokens 0
done
echo "done" | tee -a "$LOG"
