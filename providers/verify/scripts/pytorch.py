# gpuenv verify: PyTorch. Allocates two matrices on the first GPU, multiplies
# them and waits for the result; prints one JSON line, whatever happens.
import json
import sys

# The current directory (sys.path[0] under -c) may hold a file named like the
# framework; only installed packages may answer the import.
sys.path = [p for p in sys.path if p not in ("", ".")]
import time

out = {"gpuenv_verify": 1, "framework": "pytorch", "on_gpu": False}
try:
    import torch

    out["version"] = torch.__version__
    out["build_cuda"] = torch.version.cuda or ""
    if not torch.cuda.is_available():
        out["error"] = "torch.cuda.is_available() is False"
        out["no_gpu"] = True
        if not torch.version.cuda:
            out["error"] += " (a CPU-only build)"
    else:
        start = time.perf_counter()
        dev = torch.device("cuda", 0)
        a = torch.randn(1024, 1024, device=dev)
        b = torch.randn(1024, 1024, device=dev)
        c = a @ b
        torch.cuda.synchronize(dev)
        out["seconds"] = time.perf_counter() - start
        out["device"] = torch.cuda.get_device_name(dev)
        out["on_gpu"] = bool(c.is_cuda)
except BaseException as e:  # noqa: B902 -- the report must always be printed
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
sys.stdout.flush()
