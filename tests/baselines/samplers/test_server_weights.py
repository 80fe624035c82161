"""New weights for vLLM servers, against fake servers on loopback: the requests each push sends.

A ``http.server`` plays every vLLM server and records what it is asked. The
folder push runs for real (safetensors written, two servers asked to reload).
The NCCL push cannot run without GPUs; here it runs as far as it goes on CPU:
vLLM's own trainer-side engine (``NCCLTrainerWeightTransferEngine``) drives our
HTTP client and weight source, with the two GPU steps replaced (opening the
NCCL endpoint, and the broadcast, which here only reads the tensors through
vLLM's check that they match the announced names, dtypes and shapes).
"""

from __future__ import annotations

import json

import pytest

from baselines.samplers.openai_policy import ServerError
from baselines.samplers.server_weights import NCCLWeightSync, RemoteWeightSync, server_root
from tests.loopback import JSON, LoopbackServer

torch = pytest.importorskip("torch")


class FakeVLLM(LoopbackServer):
    """Records ``(method, path, body)`` of each request; answers 200 unless ``fail`` says not."""

    def __init__(self, world_size=1, fail=None):
        super().__init__()
        self.calls = []
        self.fail = fail or {}  # path -> status
        self.world_size = world_size

    def respond(self, method, path, headers, body):
        self.calls.append((method, path, body))
        status = self.fail.get(path, 200)
        answer = {"world_size": self.world_size} if path.startswith("/get_world") else {}
        data = json.dumps(answer if status == 200 else {"detail": "Not Found"})
        return status, JSON, data.encode()

    def paths(self):
        return [path for _, path, _ in self.calls]


class FakeConfig:
    def save_pretrained(self, folder):
        (folder / "config.json").write_text('{"model_type": "fake"}')


def tied_state_dict():
    embed = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    return {
        "model.embed_tokens.weight": embed,
        "model.norm.weight": torch.ones(3),
        "lm_head.weight": embed,  # tied: the same tensor
    }


def test_server_root():
    assert server_root("http://h:8000/v1") == server_root("http://h:8000/v1/") == "http://h:8000"
    assert server_root("http://h:8000") == "http://h:8000"


def test_folder_push_writes_once_and_reloads_every_server(tmp_path):
    from safetensors.torch import load_file

    with FakeVLLM() as a, FakeVLLM() as b:
        sync = RemoteWeightSync(f"{a.url},{b.url}", tmp_path / "w", FakeConfig())
        sync(tied_state_dict())
        first = tmp_path / "w" / "weights_000001"
        for server in (a, b):
            assert server.calls == [
                (
                    "POST",
                    "/collective_rpc",
                    {"method": "reload_weights", "kwargs": {"weights_path": str(first)}},
                ),
                ("POST", "/reset_prefix_cache", {}),
            ]
        tensors = load_file(first / "model.safetensors")
        assert sorted(tensors) == sorted(tied_state_dict())
        assert torch.equal(tensors["lm_head.weight"], tensors["model.embed_tokens.weight"])
        assert (first / "config.json").exists()

        untied = {k: v for k, v in tied_state_dict().items() if k != "lm_head.weight"}
        sync(untied)  # a tied model whose state dict leaves the head out gets it back
        second = tmp_path / "w" / "weights_000002"
        assert "lm_head.weight" in load_file(second / "model.safetensors")
        assert [p.name for p in (tmp_path / "w").iterdir()] == ["weights_000002"]
        assert a.paths()[2:] == b.paths()[2:] == ["/collective_rpc", "/reset_prefix_cache"]


def test_a_server_without_dev_endpoints_gets_a_clear_error(tmp_path):
    with FakeVLLM() as good, FakeVLLM(fail={"/collective_rpc": 404}) as bad:
        sync = RemoteWeightSync([good.url, bad.url], tmp_path / "w", FakeConfig())
        with pytest.raises(ServerError) as error:
            sync(tied_state_dict())
    message = str(error.value)
    assert f"POST {server_root(bad.url)}/collective_rpc -> 404" in message
    assert "start the server with VLLM_SERVER_DEV_MODE=1" in message


def test_a_dead_server_is_named(tmp_path, free_port):
    sync = RemoteWeightSync(f"http://127.0.0.1:{free_port}/v1", tmp_path / "w", FakeConfig())
    with pytest.raises(
        ServerError, match=f"check that the server is up at http://127.0.0.1:{free_port}"
    ):
        sync(tied_state_dict())


def test_nccl_refuses_to_start_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError) as error:
        NCCLWeightSync("http://127.0.0.1:8000/v1")
    assert "needs CUDA" in str(error.value)
    assert "use --sampler-weight-transfer folder with --sampler-weights-dir" in str(error.value)


def test_nccl_push_drives_the_weight_transfer_routes(monkeypatch):
    pytest.importorskip("vllm")
    from vllm.distributed.weight_transfer import nccl_engine

    import baselines.samplers.server_weights as server_weights

    endpoints, broadcasts = [], []

    def open_endpoint(init_info):  # the trainer's NCCL rank 0, which needs a GPU
        endpoints.append(init_info)
        return object()

    def broadcast(self, source, meta):  # what goes over NCCL, checked by vLLM against meta
        broadcasts.append({n: t.clone() for n, t in self._checked_iter(source, meta)})

    monkeypatch.setattr(server_weights, "_cuda_available", lambda: True)
    monkeypatch.setattr(nccl_engine, "open_trainer_endpoint", open_endpoint)
    monkeypatch.setattr(nccl_engine.NCCLTrainerWeightTransferEngine, "_broadcast", broadcast)

    with FakeVLLM(world_size=2) as a, FakeVLLM(world_size=1) as b:
        sync = NCCLWeightSync([a.url, b.url], device="cpu")
        assert a.calls == []  # connecting waits for the first push
        weights = tied_state_dict()
        sync(weights)
        sync({k: v + 1 for k, v in weights.items()})

    # One NCCL group per server: this process is rank 0, the server's GPUs follow.
    assert [(e.world_size, e.rank, e.master_address) for e in endpoints] == [
        (3, 0, "127.0.0.1"),
        (2, 0, "127.0.0.1"),
    ]
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    update = {"names": names, "dtype_names": ["float32"] * 3, "shapes": [[4, 3], [3], [4, 3]]}
    for server, endpoint in zip((a, b), endpoints, strict=True):
        (get, init, *rounds) = server.calls
        assert get == ("GET", "/get_world_size", None)
        assert init[1] == "/init_weight_transfer_engine"
        assert init[2]["init_info"] == {
            "master_address": "127.0.0.1",
            "master_port": endpoint.master_port,
            "rank_offset": 1,
            "world_size": endpoint.world_size,
            "packed": True,
            "packed_buffer_size_bytes": endpoint.packed_buffer_size_bytes,
            "packed_num_buffers": endpoint.packed_num_buffers,
        }
        one_round = [
            ("POST", "/start_weight_update", {}),
            ("POST", "/update_weights", {"update_info": update}),
            ("POST", "/finish_weight_update", {}),
            ("POST", "/reset_prefix_cache", {}),
        ]
        assert rounds == one_round * 2
    assert len(broadcasts) == 4  # two servers, two pushes
    assert list(broadcasts[0]) == names
    assert torch.equal(broadcasts[2]["model.norm.weight"], torch.full((3,), 2.0))
    assert sync._source.weights == {}  # no reference to the trainer's tensors between pushes
