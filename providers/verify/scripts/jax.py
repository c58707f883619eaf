# gpuenv verify: JAX. Multiplies two matrices on the first GPU and blocks
# until the result is ready; prints one JSON line, whatever happens.
import json
import sys

# The current directory (sys.path[0] under -c) may hold a file named like the
# framework; only installed packages may answer the import.
sys.path = [p for p in sys.path if p not in ("", ".")]
import time

out = {"gpuenv_verify": 1, "framework": "jax", "on_gpu": False}
try:
    import jax

    out["version"] = jax.__version__
    try:
        from importlib import metadata

        for major in ("13", "12", "11"):
            try:
                metadata.version("jax-cuda%s-plugin" % major)
                out["build_cuda"] = major
                break
            except metadata.PackageNotFoundError:
                pass
    except ImportError:
        pass
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as e:
        gpus = []
        out["error"] = "JAX sees no GPU: %s" % e
        out["no_gpu"] = True
    if gpus:
        start = time.perf_counter()
        key = jax.random.PRNGKey(0)
        a = jax.device_put(jax.random.normal(key, (1024, 1024)), gpus[0])
        c = (a @ a).block_until_ready()
        out["seconds"] = time.perf_counter() - start
        out["device"] = gpus[0].device_kind
        out["on_gpu"] = gpus[0].platform in ("gpu", "cuda")
    elif "error" not in out:
        out["error"] = "JAX sees no GPU"
        out["no_gpu"] = True
except BaseException as e:  # noqa: B902 -- the report must always be printed
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
sys.stdout.flush()
