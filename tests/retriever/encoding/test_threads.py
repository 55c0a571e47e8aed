"""Thread settings: one count from the CPU affinity, passive OpenMP, applied to each library."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retriever.encoding import threads


def test_available_cores_follows_the_affinity_and_the_quota():
    quota = threads.cgroup_cpu_limit()
    affinity = len(os.sched_getaffinity(0))
    assert threads.available_cores() == (min(affinity, quota) if quota else affinity)


@pytest.mark.parametrize(
    "content, cores",
    [("max 100000\n", None), ("150000 100000\n", 2), ("50000 100000", 1), ("400000 100000", 4), ("garbage", None)],
)
def test_a_container_cpu_quota_is_read_as_whole_cpus(tmp_path, content, cores):
    path = tmp_path / "cpu.max"
    path.write_text(content)
    assert threads.cgroup_cpu_limit(str(path)) == cores
    assert threads.cgroup_cpu_limit(str(tmp_path / "absent")) is None


def test_thread_count_honours_the_environment(monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "3")
    assert threads.thread_count() == 3
    monkeypatch.setenv(threads.THREADS_ENV, "nonsense")
    assert threads.thread_count() == threads.available_cores()


def test_importing_the_package_sets_passive_openmp_before_the_libraries_load():
    """A fresh interpreter restricted to one core: every library gets one thread, none spins."""
    code = (
        "import os, json\n"
        "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "import retriever, faiss, torch\n"
        "from retriever.encoding import threads\n"
        "threads.apply()\n"
        "print(json.dumps({k: os.environ.get(k) for k in ('OMP_WAIT_POLICY', 'OMP_NUM_THREADS', 'KMP_BLOCKTIME')}"
        " | {'torch': torch.get_num_threads(), 'faiss': faiss.omp_get_max_threads()}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "SEMSEARCH_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    settings = json.loads(out.strip().splitlines()[-1])
    assert settings == {
        "OMP_WAIT_POLICY": "PASSIVE",
        "OMP_NUM_THREADS": "1",
        "KMP_BLOCKTIME": "0",
        "torch": 1,
        "faiss": 1,
    }


def test_user_settings_are_kept(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert threads.set_environment(4)["OMP_WAIT_POLICY"] == "ACTIVE"


def test_runtime_options_use_the_count():
    pytest.importorskip("onnxruntime")
    options = threads.onnxruntime_options(2)
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert threads.openvino_config(3)["INFERENCE_NUM_THREADS"] == 3


def test_embedder_applies_its_count_to_torch(tiny_model_dir):
    import torch

    from retriever import Embedder

    before = torch.get_num_threads()
    try:
        Embedder(tiny_model_dir, backend="torch", threads=1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_torch_loaded_late_for_passages_gets_the_embedders_count(tiny_model_dir, tmp_path):
    """Torch for passages, another runtime for queries: torch loads on the first passage batch, with the count.

    In a fresh interpreter, where torch is not imported before the embedder (a Ray actor's case).
    """
    from retriever import Embedder
    from retriever.encoding.backends import choice

    exported = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)  # the export the decision needs
    choice.save_choice(
        tmp_path,
        choice.choice_key(exported.weights_sha256),
        {"backend": "torch-fp32", "query_backend": "onnx-fp32", "measured": {}},
    )
    code = (
        "import sys\n"
        "from retriever import Embedder\n"
        "from retriever.encoding.embedder import QUERY_BATCH\n"
        f"embedder = Embedder({str(tiny_model_dir)!r}, cache_dir={str(tmp_path)!r}, threads=1)\n"
        "assert (embedder.backend, embedder.query_backend) == ('torch-fp32', 'onnx-fp32')\n"
        "assert 'torch' not in sys.modules\n"
        "embedder.embed([f'passage {i}' for i in range(QUERY_BATCH + 1)])\n"
        "import torch\n"
        "print(embedder.passage_backend.name, torch.get_num_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "SEMSEARCH_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip().splitlines()[-1] == "torch-fp32 1"


def test_openvino_pins_threads_only_when_they_take_every_core():
    """Pinned OpenVINO threads of processes that share the cores (Ray actors) would land on the same first ones."""
    openvino = pytest.importorskip("openvino")
    from openvino import opset13

    data = opset13.parameter([1, 4], openvino.Type.f32, name="x")
    model = openvino.Model([opset13.relu(data)], [data], "relu")
    cores = threads.available_cores()
    for count, pinned in [(cores, True), (cores - 1, False)][: 2 if cores > 1 else 1]:
        compiled = openvino.Core().compile_model(model, "CPU", threads.openvino_config(count))
        assert compiled.get_property("INFERENCE_NUM_THREADS") == count
        assert compiled.get_property("ENABLE_CPU_PINNING") is pinned, count
