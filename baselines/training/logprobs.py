"""Logprobs of the taken tokens without the full logits of a microbatch.

The trainer needs ``log softmax(h W^T / t)[target]`` at each token: one number
per token. Computing it from the model's ``logits`` materializes ``tokens x
vocabulary`` floats (SmolLM2: 49,152 per token, 400 MB for a 2,048-token
microbatch in fp32), keeps them for the backward pass, and makes a second
tensor of that size for the softmax in the backward. Here the vocabulary
projection runs chunk by chunk on the last hidden states:

* forward: per chunk of tokens, the chunk's logits, their logsumexp and the
  target's logit; only the logsumexp (one float per token) is kept;
* backward: per chunk, the logits again, then ``d logprob / d logits = onehot -
  softmax`` scaled by the incoming gradient, into the hidden states' and the
  projection weight's gradients.

The peak is one chunk's logits instead of the microbatch's, for one more
matrix product (the projection, again, in the backward). The gradients are
those of the full computation up to float rounding (tested).

:func:`selective_logprobs` runs a transformers causal LM this way when it can
tell how (a decoder and a bias-free output projection, no logit soft-capping or
scaling, not wrapped by DDP, whose hooks run only through the wrapper's
forward); :func:`supports_selective_logprobs` says whether it can.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "TokenLogprobs",
    "selective_logprobs",
    "supports_selective_logprobs",
    "token_logprobs",
]

DEFAULT_CHUNK_TOKENS = 2048
"""Tokens per chunk (the trainer's default microbatch): 400 MB of SmolLM2 logits in fp32."""

# Config attributes that change logits after the projection: those models keep
# the full path.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


class TokenLogprobs(torch.autograd.Function):
    """``log softmax(hidden @ weight.T / temperature)[targets]``, chunk by chunk (see module)."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        temperature: float,
        chunk: int,
    ) -> torch.Tensor:
        """The logprobs; keeps the logsumexp of each token, not its logits."""
        # The backward pass makes the logits again, under the same autocast (on any
        # device: a CPU autocasts to bf16 too), so that they match the kept logsumexp.
        device = hidden.device.type
        ctx.autocast = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
        logprobs = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(logprobs)
        for start in range(0, hidden.shape[0], chunk):
            end = start + chunk
            logits = _logits(hidden[start:end], weight, temperature)
            lse[start:end] = torch.logsumexp(logits, dim=-1)
            picked = logits.gather(-1, targets[start:end].unsqueeze(-1)).squeeze(-1)
            logprobs[start:end] = picked - lse[start:end]
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.temperature = temperature
        ctx.chunk = chunk
        return logprobs

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        """The hidden states' and the projection's gradients, the logits made again per chunk."""
        device, enabled, dtype = ctx.autocast
        with torch.autocast(device, dtype=dtype, enabled=enabled):
            return TokenLogprobs._gradients(ctx, grad)

    @staticmethod
    def _gradients(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, targets, lse = ctx.saved_tensors
        temperature, chunk = ctx.temperature, ctx.chunk
        need_hidden, need_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if need_weight else None
        grad = grad.float()
        for start in range(0, hidden.shape[0], chunk):
            end = start + chunk
            logits = _logits(hidden[start:end], weight, temperature)
            # d logprob / d logits = onehot(target) - softmax; times the incoming
            # gradient, and 1 / temperature for the division.
            g = torch.exp(logits - lse[start:end].unsqueeze(-1))
            g.mul_(-grad[start:end].unsqueeze(-1))
            g.scatter_add_(-1, targets[start:end].unsqueeze(-1), grad[start:end].unsqueeze(-1))
            if temperature != 1.0:
                g.div_(temperature)
            if grad_hidden is not None:
                grad_hidden[start:end] = (g.to(weight.dtype) @ weight).to(hidden.dtype)
            if grad_weight is not None:
                grad_weight.add_(g.t().to(hidden.dtype) @ hidden[start:end])
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        return grad_hidden, grad_weight, None, None, None


def _logits(hidden: torch.Tensor, weight: torch.Tensor, temperature: float) -> torch.Tensor:
    logits = (hidden @ weight.t()).float()
    return logits / temperature if temperature != 1.0 else logits


def token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk: int = DEFAULT_CHUNK_TOKENS,
) -> torch.Tensor:
    """Logprobs (fp32) of ``targets`` under ``softmax(hidden @ weight.T / temperature)``.

    Args:
        hidden: ``(N, H)`` last hidden states.
        weight: ``(V, H)`` the output projection.
        targets: ``(N,)`` token ids.
        temperature: divides the logits.
        chunk: tokens whose logits exist at once.

    Example:
        >>> hidden = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
        >>> weight = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        >>> token_logprobs(hidden, weight, torch.tensor([0, 1])).exp()
        tensor([0.5761, 0.7870])
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    result: torch.Tensor = TokenLogprobs.apply(hidden, weight, targets, temperature, chunk)
    return result


def supports_selective_logprobs(model: Any) -> bool:
    """Whether :func:`selective_logprobs` can run ``model`` (else: the model's own logits)."""
    if hasattr(model, "module"):
        return False  # DDP (and similar wrappers) sync gradients only through their forward
    decoder = getattr(model, "get_decoder", None)
    head = getattr(model, "get_output_embeddings", None)
    if decoder is None or head is None:
        return False
    try:
        projection = head()
        base = decoder()
    except (AttributeError, NotImplementedError):
        return False
    if not isinstance(projection, torch.nn.Linear) or projection.bias is not None:
        return False
    if base is None or base is model:
        return False
    config = getattr(model, "config", None)
    text = getattr(config, "get_text_config", lambda: config)()
    return not any(getattr(text, name, None) for name in _LOGIT_TRANSFORMS)


def selective_logprobs(
    model: Any,
    targets: torch.Tensor,
    keep: torch.Tensor | None,
    *,
    temperature: float = 1.0,
    chunk: int = DEFAULT_CHUNK_TOKENS,
    **inputs: Any,
) -> torch.Tensor:
    """Logprobs of ``targets`` (``(B, T)``) from the model's hidden states, chunk by chunk.

    With ``keep`` (sequence positions), only those positions are projected;
    the others get 0, as with ``logits_to_keep``.
    """
    hidden = model.get_decoder()(**inputs).last_hidden_state
    weight = model.get_output_embeddings().weight
    if keep is not None:
        hidden = hidden[:, keep]
        picked = targets[:, keep]
    else:
        picked = targets
    rows, length, size = hidden.shape
    logprobs = token_logprobs(
        hidden.reshape(rows * length, size),
        weight,
        picked.reshape(-1),
        temperature=temperature,
        chunk=chunk,
    ).reshape(rows, length)
    if keep is None:
        return logprobs
    full = torch.zeros(targets.shape, dtype=torch.float32, device=targets.device)
    full[:, keep] = logprobs
    return full
