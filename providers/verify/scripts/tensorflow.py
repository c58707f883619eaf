# gpuenv verify: TensorFlow. Multiplies two matrices placed on the first GPU
# and copies the result back; prints one JSON line, whatever happens.
import json
import sys

# The current directory (sys.path[0] under -c) may hold a file named like the
# framework; only installed packages may answer the import.
sys.path = [p for p in sys.path if p not in ("", ".")]
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
out = {"gpuenv_verify": 1, "framework": "tensorflow", "on_gpu": False}
try:
    import tensorflow as tf

    out["version"] = tf.__version__
    info = tf.sysconfig.get_build_info()
    out["build_cuda"] = str(info.get("cuda_version", "") or "")
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        out["error"] = "TensorFlow sees no GPU"
        out["no_gpu"] = True
        if not info.get("is_cuda_build", False):
            out["error"] += " (a CPU-only build)"
    else:
        start = time.perf_counter()
        with tf.device("/GPU:0"):
            a = tf.random.normal((1024, 1024))
            b = tf.random.normal((1024, 1024))
            c = tf.linalg.matmul(a, b)
        c.numpy()
        out["seconds"] = time.perf_counter() - start
        details = tf.config.experimental.get_device_details(gpus[0])
        out["device"] = details.get("device_name", gpus[0].name)
        out["on_gpu"] = "GPU" in c.device.upper()
except BaseException as e:  # noqa: B902 -- the report must always be printed
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
sys.stdout.flush()
