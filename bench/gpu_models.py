"""Random-initialized model folders of the shapes ``bench/trl_step.py --device cuda`` measures.

A device machine has no hub and cannot take SmolLM2's 98 MB GGUF file along,
so the GPU measurements run on random weights of the same shapes (speed and
memory depend on the shape, not on the weights):

* ``smollm2-shape``: SmolLM2-135M-Instruct's Llama shape (hidden 576, 30
  layers, 9 heads, 3 key/value heads, vocabulary 49,152, tied embeddings);
* ``llama-1.17b``: a 1.17B Llama shape (hidden 2048, 22 layers, 32 heads, 4
  key/value heads, MLP 5632, vocabulary 49,152).

Each folder gets the tiny checkpoint's byte-level tokenizer (the bench's
batches are random token ids; the tokenizer only names the padding token).

Run from the repository root::

    python bench/gpu_models.py /tmp/gpu-models   # prints the two folders
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

SHAPES = {
    "smollm2-shape": {
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "tie_word_embeddings": True,
    },
    "llama-1.17b": {
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "tie_word_embeddings": False,
    },
}
VOCAB = 49152


def build(root: Path, name: str) -> Path:
    """Write the random model ``name`` (a key of :data:`SHAPES`) under ``root``; its folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from baselines.models import tiny_checkpoint

    folder = root / name
    if (folder / "config.json").is_file():
        return folder
    tokenizer = tiny_checkpoint(root / "tiny")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        **SHAPES[name],
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    model_files = {"config.json", "generation_config.json"}
    for item in tokenizer.iterdir():  # the tokenizer's files, not the tiny model's
        if item.is_file() and item.name not in model_files and item.suffix != ".safetensors":
            shutil.copy(item, folder / item.name)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    args = parser.parse_args()
    for name in SHAPES:
        print(build(args.root, name))


if __name__ == "__main__":
    main()
