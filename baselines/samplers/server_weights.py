"""New weights for running vLLM servers, after every optimizer step: through a folder, or NCCL.

Two ways to get a trainer's weights into ``vllm serve`` processes:

================  ============================================================
``folder``        :class:`RemoteWeightSync`: the weights are written once as
                  safetensors into a folder the servers can read; each server
                  is asked to reload them (``POST /collective_rpc`` with
                  ``reload_weights``) and to drop its prefix cache. Works
                  anywhere, CPU included; costs a disk write and a read per
                  server.
``nccl``          :class:`NCCLWeightSync`: vLLM's weight-transfer API. The
                  trainer process joins one NCCL group per server (its GPUs
                  rank 1 and up, the trainer rank 0) and broadcasts the
                  tensors GPU to GPU; the HTTP routes
                  ``/init_weight_transfer_engine``, ``/start_weight_update``,
                  ``/update_weights`` and ``/finish_weight_update`` drive each
                  round. CUDA only.
================  ============================================================

Both need the server's development endpoints (``VLLM_SERVER_DEV_MODE=1``);
``nccl`` also needs the server started with ``--weight-transfer-config
'{"backend": "nccl"}'`` and vLLM installed next to the trainer (its NCCL
sender). Both send the whole model under the Hugging Face names, with
``lm_head.weight`` added for tied embeddings (a reload without it keeps the
old head).

Nothing here imports torch or vLLM at import time.
"""

from __future__ import annotations

import json
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, get_args

from baselines.samplers.openai_policy import ServerError
from baselines.samplers.server_pool import split_urls

__all__ = [
    "WEIGHT_TRANSFERS",
    "NCCLWeightSync",
    "RemoteWeightSync",
    "WeightTransfer",
    "server_root",
]

WeightTransfer = Literal["folder", "nccl"]
"""How new weights reach vLLM servers (see the module docstring)."""
WEIGHT_TRANSFERS: tuple[str, ...] = get_args(WeightTransfer)

_DEV_MODE_HINT = (
    " (the development endpoints are missing: start the server with VLLM_SERVER_DEV_MODE=1)"
)


def server_root(base_url: str) -> str:
    """The server's root URL, where vLLM's development endpoints live, from its ``/v1`` URL.

    Example:
        >>> server_root("http://10.0.0.2:8000/v1/")
        'http://10.0.0.2:8000'
    """
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


def _request(root: str, path: str, body: Mapping[str, Any] | None, timeout: float) -> Any:
    """POST ``body`` as JSON (or GET when it is None); the answer's JSON, or None when empty."""
    url = root + path
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if body is None else "POST"
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        hint = _DEV_MODE_HINT if exc.code in (404, 405) else ""
        raise ServerError(f"{method} {url} -> {exc.code}: {detail}{hint}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ServerError(
            f"{method} {url} failed: {reason}; check that the server is up at {root}"
        ) from exc
    return json.loads(raw) if raw.strip() else None


def _server_tensors(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """The state dict as a server loads it: detached, and with a head of its own when tied."""
    tensors = {name: tensor.detach() for name, tensor in state_dict.items()}
    if "lm_head.weight" not in tensors and "model.embed_tokens.weight" in tensors:
        # Tied embeddings: a reload without the head would keep the old one.
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    return tensors


def write_weights_folder(
    state_dict: Mapping[str, Any], config: Any, target: str | Path, tokenizer: Any = None
) -> Path:
    """Write full weights as a model folder: ``model.safetensors`` (fp32), ``config.json``.

    What a vLLM server reloads, and, with the ``tokenizer`` saved beside it,
    a folder ``from_pretrained`` loads (a league's snapshots). Tied embeddings
    get a head of their own.
    """
    from safetensors.torch import save_file

    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, Any] = {}
    seen: set[int] = set()
    for name, tensor in _server_tensors(state_dict).items():
        value = tensor.float().cpu().contiguous()
        # safetensors refuses tensors that share memory (tied embeddings): copy them.
        if value.data_ptr() in seen:
            value = value.clone()
        seen.add(value.data_ptr())
        tensors[name] = value
    save_file(tensors, str(target / "model.safetensors"))
    config.save_pretrained(target)
    if tokenizer is not None:
        tokenizer.save_pretrained(target)
    return target


class RemoteWeightSync:
    """Push new weights to vLLM servers through a folder they all see.

    Each call writes the state dict once, as ``model.safetensors`` in a fresh
    sub-folder of ``folder`` (with the model's ``config.json``), then asks every
    server, all at once, to reload it (``POST /collective_rpc`` with method
    ``reload_weights`` and that ``weights_path``) and to reset its prefix cache
    (``POST /reset_prefix_cache``); the previous sub-folder is then deleted.
    The servers must run with ``VLLM_SERVER_DEV_MODE=1``.

    Args:
        base_urls: the servers' OpenAI base URLs (``http://host:8000/v1``), a
            list or one comma-separated string; the development endpoints live
            at each one's root.
        folder: a folder the trainer writes and every server reads.
        config: the model's Hugging Face config (saved next to the weights).
        timeout: seconds per request.
    """

    def __init__(
        self,
        base_urls: str | Sequence[str],
        folder: str | Path,
        config: Any,
        timeout: float = 600,
    ) -> None:
        self.roots = [server_root(u) for u in split_urls(base_urls)]
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.timeout = timeout
        self.version = 0
        self._previous: Path | None = None

    def __repr__(self) -> str:
        return f"RemoteWeightSync({self.roots!r}, {str(self.folder)!r})"

    def __call__(self, state_dict: Mapping[str, Any]) -> None:
        """Write the weights once and make every server load them."""
        self.version += 1
        target = self.folder / f"weights_{self.version:06d}"
        write_weights_folder(state_dict, self.config, target)
        with ThreadPoolExecutor(max_workers=len(self.roots)) as pool:
            list(pool.map(lambda root: self._reload(root, target), self.roots))
        if self._previous is not None:
            shutil.rmtree(self._previous, ignore_errors=True)
        self._previous = target

    def _reload(self, root: str, target: Path) -> None:
        body = {"method": "reload_weights", "kwargs": {"weights_path": str(target)}}
        _request(root, "/collective_rpc", body, self.timeout)
        _request(root, "/reset_prefix_cache", {}, self.timeout)


class _ServerControl:
    """vLLM's weight-sync control plane of one server over HTTP, with this package's errors.

    It has the four methods of vLLM's ``VLLMWeightSyncClient`` protocol
    (structural, so no vLLM import), posting to the routes of
    ``vllm/entrypoints/rl/online/api_router.py``.
    """

    def __init__(self, root: str, timeout: float) -> None:
        self.root = root
        self.timeout = timeout

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        _request(self.root, "/init_weight_transfer_engine", {"init_info": init_info}, self.timeout)

    def start_weight_update(self) -> None:
        _request(self.root, "/start_weight_update", {}, self.timeout)

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        _request(self.root, "/update_weights", {"update_info": update_info}, self.timeout)

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        body = {} if weight_version is None else {"weight_version": weight_version}
        _request(self.root, "/finish_weight_update", body, self.timeout)

    def shutdown_weight_transfer_engine(self) -> None:
        _request(self.root, "/shutdown_weight_transfer_engine", {}, self.timeout)


def _address_towards(root: str) -> str:
    """This machine's address on the network route to ``root`` (nothing is sent)."""
    host = urllib.parse.urlsplit(root).hostname or "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 9))  # UDP connect only picks the route and the local address
        return str(probe.getsockname()[0])


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _state_dict_source(device: Any) -> Any:
    """A vLLM ``WeightSource`` over a state dict that is replaced before every send.

    ``metadata()`` and iteration both follow the current ``weights`` in the same
    order, which vLLM's NCCL sender checks tensor by tensor.
    """
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

    class StateDictSource(WeightSource):
        def __init__(self) -> None:
            self.weights: dict[str, Any] = {}

        def metadata(self) -> list[Any]:
            return [ParamMeta(n, t.dtype, tuple(t.shape)) for n, t in self.weights.items()]

        def __iter__(self) -> Any:
            for name, tensor in self.weights.items():
                yield name, tensor.to(device).contiguous()

    return StateDictSource()


class NCCLWeightSync:
    """Push new weights to vLLM servers over NCCL, with vLLM's weight-transfer API (GPUs only).

    The first call connects: for each server it asks ``GET /get_world_size``
    (its GPUs ``W``), opens an NCCL group of ``W + 1`` ranks with this process
    as rank 0 (vLLM's ``NCCLTrainerWeightTransferEngine.trainer_init``, which
    also calls the server's ``/init_weight_transfer_engine``), and keeps it.
    Every call then broadcasts the state dict to each server in turn
    (``send_weights``: ``/start_weight_update``, ``/update_weights`` while the
    tensors go over NCCL, ``/finish_weight_update``) and resets its prefix
    cache. Tensors are sent in the dtype they have (a bf16 server converts
    fp32 weights as it loads them).

    The servers must run with ``VLLM_SERVER_DEV_MODE=1`` and
    ``--weight-transfer-config '{"backend": "nccl"}'``, and must reach this
    machine at ``master_address`` on a free port chosen here.

    Args:
        base_urls: the servers' OpenAI base URLs, a list or a comma-separated string.
        master_address: this machine's address as the servers see it; None
            picks the local address on the route to each server.
        device: the GPU the tensors are sent from; None is the current CUDA device.
        packed: send the tensors packed into large buffers (vLLM's default)
            instead of one broadcast per tensor.
        timeout: seconds per HTTP request.

    Raises:
        RuntimeError: no CUDA here (NCCL runs between GPUs).
        ImportError: vLLM is not installed in the trainer's environment.
    """

    def __init__(
        self,
        base_urls: str | Sequence[str],
        *,
        master_address: str | None = None,
        device: Any = None,
        packed: bool = True,
        timeout: float = 600,
    ) -> None:
        if not _cuda_available():
            raise RuntimeError(
                "sampler_weight_transfer='nccl' needs CUDA (NCCL sends between GPUs), and "
                "this process has none; use --sampler-weight-transfer folder with "
                "--sampler-weights-dir"
            )
        try:
            import vllm.distributed.weight_transfer.nccl_engine  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "sampler_weight_transfer='nccl' needs vLLM next to the trainer too (its NCCL "
                f"sender): pip install vllm ({exc})"
            ) from exc
        self.roots = [server_root(u) for u in split_urls(base_urls)]
        self.master_address = master_address
        self.device = device
        self.packed = packed
        self.timeout = timeout
        self.version = 0
        self._engines: list[Any] = []
        self._source: Any = None

    def __repr__(self) -> str:
        return f"NCCLWeightSync({self.roots!r})"

    def _connect(self) -> None:
        import torch
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        device = self.device if self.device is not None else torch.cuda.current_device()
        self._source = _state_dict_source(device)
        for root in self.roots:
            answer = _request(root, "/get_world_size", None, self.timeout) or {}
            address = self.master_address or _address_towards(root)
            port = _free_port(address)
            info = NCCLTrainerInitInfo(
                master_address=address,
                master_port=port,
                world_size=int(answer["world_size"]) + 1,
                packed=self.packed,
                rank=0,
            )
            try:
                engine = NCCLTrainerWeightTransferEngine.trainer_init(
                    info, client=_ServerControl(root, self.timeout), source=self._source
                )
            except Exception as exc:
                raise RuntimeError(
                    f"could not open NCCL weight transfer to {root}: {exc}. The server needs "
                    'VLLM_SERVER_DEV_MODE=1 and --weight-transfer-config \'{"backend": '
                    f'"nccl"}}\', and must reach {address}:{port} (set master_address if '
                    "that is not this machine's address for it)"
                ) from exc
            self._engines.append(engine)

    def __call__(self, state_dict: Mapping[str, Any]) -> None:
        """Broadcast the weights to every server (connecting on the first call)."""
        if not self._engines:
            self._connect()
        self._source.weights = _server_tensors(state_dict)
        self.version += 1
        for root, engine in zip(self.roots, self._engines, strict=True):
            engine.send_weights()
            _request(root, "/reset_prefix_cache", {}, self.timeout)
        self._source.weights = {}  # hold no reference to the trainer's tensors between steps

    def close(self) -> None:
        """Leave the NCCL groups; the servers keep serving the last weights."""
        for root, engine in zip(self.roots, self._engines, strict=False):
            engine.shutdown()
            _ServerControl(root, self.timeout).shutdown_weight_transfer_engine()
        self._engines = []
