# gpuenv verify: JAX. A few training steps of a tiny convolutional
# classifier on synthetic MNIST-shaped data, on the first device the process
# sees (gpuenv shows each process one GPU with CUDA_VISIBLE_DEVICES), with
# cuDNN and mixed precision: the same steps as the PyTorch workload, as far
# as JAX allows. It has no layers, optimiser or autocast of its own, so
# they are written out here.

# By default JAX takes most of the GPU at start; the peak would say nothing
# about the model.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
cfg, out = begin("jax")

dev = None
gpu = cfg["device"] != "cpu"
try:
    import jax
    import jax.numpy as jnp

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
    out["phase"] = "device"
    if gpu:
        try:
            devs = jax.devices("gpu")
        except RuntimeError as e:
            out["error"] = "JAX sees no GPU: %s" % e
            out["no_gpu"] = True
            raise SystemExit
        dev = devs[0]
        out["device"] = dev.device_kind
        cc = getattr(dev, "compute_capability", None)
        if cc:
            out["capability"] = str(cc)
        try:
            from jax._src.lib import cuda_versions

            out["cudnn_version"] = cudnn_version(cuda_versions.cudnn_get_version())
        except Exception:  # noqa: BLE001 -- not every jaxlib says
            pass
        # Mixed precision on a GPU: float16, with loss scaling.
        half = jnp.float16
    else:
        dev = jax.devices("cpu")[0]
        out["device"] = "cpu"
        # The CPU's is bfloat16, which needs no loss scaling.
        half = jnp.bfloat16
    amp = bool(cfg["amp"])
    out["amp"] = jnp.dtype(half).name if amp else ""
    # XLA has no switch that turns cuDNN off: without it, the model has no
    # convolutions, the operations cuDNN runs.
    conv = not gpu or bool(cfg["cudnn"])
    out["cudnn"] = gpu and conv
    compute = half if amp else jnp.float32

    out["phase"] = "data"
    # MNIST-shaped (1×28×28, ten classes) and learnable: each class is a
    # fixed random image plus noise, so the loss of a working step falls.
    key = jax.random.PRNGKey(0)
    key, k1 = jax.random.split(key)
    templates = jax.random.normal(k1, (10, 1, 28, 28))
    batches = []
    for _ in range(4):
        key, k1, k2 = jax.random.split(key, 3)
        y = jax.random.randint(k1, (cfg["batch"],), 0, 10)
        x = templates[y] + 0.5 * jax.random.normal(k2, (cfg["batch"], 1, 28, 28))
        batches.append((jax.device_put(x, dev), jax.device_put(y, dev)))

    out["phase"] = "model"

    def init(key, shape, fan_in):
        return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0) / math.sqrt(fan_in)

    ks = jax.random.split(jax.random.PRNGKey(1), 4)
    if conv:
        params = {"c1": init(ks[0], (8, 1, 3, 3), 9), "b1": jnp.zeros(8),
                  "c2": init(ks[1], (16, 8, 3, 3), 72), "b2": jnp.zeros(16),
                  "w": init(ks[2], (16 * 7 * 7, 10), 784), "b": jnp.zeros(10)}
    else:
        params = {"d1": init(ks[0], (14 * 14, 64), 196), "b1": jnp.zeros(64),
                  "w": init(ks[2], (64, 10), 64), "b": jnp.zeros(10)}
    params = jax.device_put(params, dev)

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def forward(p, x):
        p = jax.tree_util.tree_map(lambda a: a.astype(compute), p)
        x = x.astype(compute)
        if conv:
            for c, b in (("c1", "b1"), ("c2", "b2")):
                x = jax.lax.conv_general_dilated(x, p[c], (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
                x = pool(jax.nn.relu(x + p[b][None, :, None, None]))
            x = x.reshape(x.shape[0], -1)
        else:
            x = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4
            x = jax.nn.relu(x.reshape(x.shape[0], -1) @ p["d1"] + p["b1"])
        return (x @ p["w"] + p["b"]).astype(jnp.float32)

    def loss_fn(p, x, y, scale):
        logits = forward(p, x)
        loss = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))
        return loss * scale, loss

    # Dynamic loss scaling, as torch's GradScaler does it: a step whose
    # gradients overflow is skipped and the scale halved; the scale doubles
    # after 2000 good steps.
    scaling = gpu and amp

    @jax.jit
    def train_step(p, m, scale, good, x, y):
        grads, loss = jax.grad(loss_fn, has_aux=True)(p, x, y, scale)
        grads = jax.tree_util.tree_map(lambda g: g / scale, grads)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree_util.tree_leaves(grads)]))
        m2 = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, m, grads)
        p2 = jax.tree_util.tree_map(lambda a, v: a - 0.05 * v, p, m2)
        keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(finite, a, b), new, old)  # noqa: E731
        if scaling:
            scale2 = jnp.where(finite, jnp.where(good + 1 >= 2000, scale * 2, scale), scale / 2)
            good2 = jnp.where(finite & (good + 1 < 2000), good + 1, 0)
        else:
            scale2, good2 = scale, good
        return keep(p2, p), keep(m2, m), scale2, good2, loss

    momentum = jax.tree_util.tree_map(jnp.zeros_like, params)
    scale = jnp.float32(2.0 ** 15 if scaling else 1.0)
    good = jnp.int32(0)
    leaves = jax.tree_util.tree_leaves(params) + [t for b in batches for t in b]

    def devices_of(a):
        ds = a.devices() if callable(getattr(a, "devices", None)) else {a.device()}
        return set(ds)

    off = ["parameter %d" % i for i, a in enumerate(jax.tree_util.tree_leaves(params)) if devices_of(a) != {dev}]
    off += ["input %d" % i for i, (x, y) in enumerate(batches) if devices_of(x) != {dev} or devices_of(y) != {dev}]
    out["tensors_on_device"] = len(leaves) - len(off)
    if off:
        raise RuntimeError("not on %s: %s" % (dev, ", ".join(off)))

    state = [params, momentum, scale, good]

    def step(i):
        x, y = batches[i % len(batches)]
        out["phase"] = "step"
        result = train_step(*state, x, y)
        state[:] = result[:4]
        loss = result[4]
        return float(loss)  # waits for the step

    train(out, cfg["steps"], step)
    out["on_gpu"] = gpu and dev.platform in ("gpu", "cuda")
    out["phase"] = "done"
except SystemExit:
    pass
except BaseException as e:  # noqa: B902 -- the report must always be printed
    failed(out, e)
finally:
    if dev is not None and gpu:
        try:
            stats = dev.memory_stats() or {}
            out["memory_peak"] = int(stats["peak_bytes_in_use"])
            out["memory_free"] = int(stats["bytes_limit"] - stats["bytes_in_use"])
        except Exception:  # noqa: BLE001 -- not every backend keeps statistics
            pass
emit(out)
