"""One place that decides how many threads each numeric library may use.

torch, ONNX Runtime, OpenVINO, FAISS and the tokenizer each assume by default
that the whole machine is theirs, and OpenMP threads spin while they wait. On
a small machine that is busy with something else, spinning threads of one
library starve the others (docs/benchmarks.md). So: every library gets the cores this process may
actually run on (``os.sched_getaffinity``, capped by a container's CPU quota),
OpenMP waits passively, OpenVINO pins its threads to cores only where they
take them all (it pins each process's threads to the same first cores: two
one-thread Ray actors shared one core of two), and the Rust tokenizer stays
single-threaded inside a request.

``set_environment()`` must run before torch, FAISS or ONNX Runtime are
imported (``retriever/__init__.py`` calls it first); ``apply()`` sets the
run-time knobs of whichever libraries are loaded.
"""

from __future__ import annotations

import os
import sys

THREADS_ENV = "SEMSEARCH_THREADS"

#: OpenMP and BLAS settings made before the libraries load (unless already set).
_ENV_DEFAULTS = {
    "OMP_WAIT_POLICY": "PASSIVE",  # no busy-waiting between parallel regions
    "KMP_BLOCKTIME": "0",  # Intel OpenMP's spin time before sleeping, in ms
    "TOKENIZERS_PARALLELISM": "false",
}
_COUNT_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by a container's CPU quota; at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_limit()
    return max(1, min(cores, quota) if quota else cores)


def cgroup_cpu_limit(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """Whole CPUs a cgroup v2 quota allows (``"max"`` or no file: ``None``), rounded up."""
    try:
        quota, period = open(path, encoding="ascii").read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return max(1, -(-int(quota) // int(period)))


def thread_count() -> int:
    """Threads per library: ``$SEMSEARCH_THREADS`` when set, else ``available_cores()``."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            pass
    return available_cores()


def set_environment(threads: int | None = None) -> dict[str, str]:
    """Set OpenMP/BLAS environment defaults; effective only before the libraries load.

    Variables the user has set are left alone.

    Returns:
        The variables as they now stand.
    """
    count = str(threads or thread_count())
    for name, value in _ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)
    for name in _COUNT_VARIABLES:
        os.environ.setdefault(name, count)
    return {name: os.environ[name] for name in (*_ENV_DEFAULTS, *_COUNT_VARIABLES)}


def apply(threads: int | None = None) -> int:
    """Set torch's and FAISS's thread pools, where loaded, to ``threads``.

    Libraries that are not imported yet are not imported here. ONNX Runtime
    and OpenVINO take their counts per session from ``onnxruntime_options``
    and ``openvino_config``.

    Returns:
        The thread count applied.
    """
    count = threads or thread_count()
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != count:
        torch.set_num_threads(count)
    faiss = sys.modules.get("faiss")
    if faiss is not None:
        faiss.omp_set_num_threads(count)
    return count


def onnxruntime_options(threads: int | None = None):
    """``onnxruntime.SessionOptions`` with ``threads`` intra-op threads that do not spin."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or thread_count()
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


def openvino_config(threads: int | None = None) -> dict:
    """OpenVINO CPU compile settings: ``threads`` inference threads, latency-oriented.

    Threads are pinned to cores only when they take every core this process
    may use: OpenVINO pins each process's threads to the same first cores, so
    processes that share the machine (Ray actors of one thread each) would
    share those cores and leave the others idle. A process that owns the
    machine gains from pinning (a server's encoder threads then stay put
    among its request threads; docs/benchmarks.md).
    """
    count = threads or thread_count()
    return {
        "INFERENCE_NUM_THREADS": count,
        "PERFORMANCE_HINT": "LATENCY",
        "NUM_STREAMS": 1,
        "ENABLE_CPU_PINNING": count >= available_cores(),
    }
