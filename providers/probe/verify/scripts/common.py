# gpuenv verify: what every framework's workload shares. gpuenv runs this
# file followed by the framework's own, as one script under python -c:
# argv is FRAMEWORK CONFIG, CONFIG being JSON: device ("cuda" or "cpu"),
# cudnn and amp (booleans), steps, batch. The workload prints one JSON line,
# whatever happens.
import json
import sys

# The current directory (sys.path[0] under -c) may hold a file named like the
# framework; only installed packages may answer the import.
sys.path = [p for p in sys.path if p not in ("", ".")]
import math
import os
import time


def begin(framework):
    """The configuration, and the report as far as it is known before the
    framework is imported: who the process runs as."""
    cfg = {"device": "cuda", "cudnn": True, "amp": True, "steps": 20, "batch": 64}
    if len(sys.argv) > 2:
        cfg.update(json.loads(sys.argv[2]))
    out = {"gpuenv_verify": 1, "framework": framework, "on_gpu": False, "phase": "import", "config": cfg}
    try:
        out["identity"] = {"uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()), "home": os.environ.get("HOME", "")}
    except OSError:
        pass
    return cfg, out


def cudnn_version(v):
    """cuDNN's version number as major.minor.patch: 8902 before cuDNN 9,
    90100 since."""
    if v >= 90000:
        return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
    return "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)


def train(out, steps, step):
    """Runs step(i) for each step, which returns the loss once the step has
    finished on the device, and times it; the loss must stay finite and
    fall. The report gets the losses and the median step after the first,
    which compiles and autotunes."""
    losses, times = [], []
    for i in range(steps):
        start = time.perf_counter()
        value = step(i)
        times.append(time.perf_counter() - start)
        losses.append(value)
        if not math.isfinite(value):
            raise FloatingPointError("the loss is %s at step %d" % (value, i + 1))
    out["phase"] = "check"
    out["losses"] = losses
    rest = sorted(times[1:]) or times
    out["step_seconds"] = rest[len(rest) // 2]
    out["first_step_seconds"] = times[0]
    out["seconds"] = sum(times)
    out["steps"] = len(losses)
    k = max(1, len(losses) // 4)
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    if not last < first:
        raise ArithmeticError("the loss did not fall: %.4f over the first %d steps, %.4f over the last %d" % (first, k, last, k))


def failed(out, e):
    out["error"] = "%s: %s" % (type(e).__name__, e)
    out["error_type"] = type(e).__name__


def emit(out):
    print(json.dumps(out))
    sys.stdout.flush()
