"""A tiny random model behind an OpenAI-compatible chat endpoint on 127.0.0.1, for tests.

``python -m tests.verifiers.model_server LOG READY`` (from the repository root,
with torch and transformers) builds the tiny Qwen2-style model of
:func:`baselines.models.tiny_checkpoint`, serves ``POST /v1/chat/completions``
with ``transformers``' ``generate`` (sampled, seeded per request, so the
texts are real generations), writes its ``/v1`` URL to the file ``READY``
once it listens (:func:`tests.loopback.announce`: no print can pose as it),
and appends every request's messages and the text it answered to ``LOG``
(JSON lines). It serves until it is terminated.

Imports are lazy so that collecting this module (doctests) needs neither torch
nor transformers: the verifiers tests run it with another interpreter.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.loopback import JSON, LoopbackServer, announce


class TinyChatServer(LoopbackServer):
    """``/v1/chat/completions`` answered by a model's ``generate``; every exchange logged."""

    def __init__(self, model: Any, tokenizer: Any, log: Path) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.log = log
        self.lock = threading.Lock()  # one generation at a time, in request order
        self.count = 0

    def respond(
        self, method: str, path: str, headers: Mapping[str, str], body: Any
    ) -> tuple[int, Mapping[str, str], bytes]:
        if method == "GET" and path.endswith("/models"):
            return 200, JSON, json.dumps({"object": "list", "data": [{"id": "tiny"}]}).encode()
        if method != "POST" or not path.endswith("/chat/completions"):
            return 404, JSON, b'{"error": {"message": "not found"}}'
        import torch

        messages = [{"role": m["role"], "content": _text(m["content"])} for m in body["messages"]]
        with self.lock:
            self.count += 1
            seed = self.count
            prompt = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
            torch.manual_seed(seed)
            with torch.no_grad():
                output = self.model.generate(
                    **prompt,
                    do_sample=True,
                    temperature=float(body.get("temperature") or 1.0),
                    max_new_tokens=int(body.get("max_tokens") or 16),
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new = output[0, prompt["input_ids"].shape[1] :]
            finished = bool(len(new)) and int(new[-1]) == self.tokenizer.eos_token_id
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            with self.log.open("a", encoding="utf-8") as log:
                log.write(json.dumps({"messages": messages, "text": text}) + "\n")
        answer = {
            "id": f"chatcmpl-{seed}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "tiny"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop" if finished else "length",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": int(prompt["input_ids"].shape[1]),
                "completion_tokens": len(new),
                "total_tokens": int(prompt["input_ids"].shape[1]) + len(new),
            },
        }
        return 200, JSON, json.dumps(answer).encode()


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def main(log: str, ready: str) -> None:
    """Serve the tiny model until terminated; announce the ``/v1`` URL in ``ready``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from baselines.models import tiny_checkpoint

    # One thread: the model is tiny, and vf-eval and the test share the machine.
    torch.set_num_threads(1)
    folder = tiny_checkpoint()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with TinyChatServer(model, tokenizer, Path(log)) as server:
        announce(server.url, Path(ready))
        threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
