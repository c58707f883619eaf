# gpuenv verify: TensorFlow. A few training steps of a tiny convolutional
# classifier on synthetic MNIST-shaped data, on the first device the process
# sees (gpuenv shows each process one GPU with CUDA_VISIBLE_DEVICES), with
# cuDNN and mixed precision: the same steps as the PyTorch workload, as far
# as TensorFlow allows.

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
cfg, out = begin("tensorflow")


def device_of(t):
    """The device a tensor or variable is placed on, upper-case; Keras 3
    variables keep theirs on the variable they wrap."""
    for obj in (t, getattr(t, "value", None)):
        d = getattr(obj, "device", None)
        if isinstance(d, str) and d:
            return d.upper()
    return ""


tf = None
gpu = cfg["device"] != "cpu"
try:
    import tensorflow as tf

    out["version"] = tf.__version__
    info = tf.sysconfig.get_build_info()
    out["build_cuda"] = str(info.get("cuda_version", "") or "")
    out["phase"] = "device"
    gpus = tf.config.list_physical_devices("GPU")
    if gpu and not gpus:
        out["error"] = "TensorFlow sees no GPU"
        out["no_gpu"] = True
        if not info.get("is_cuda_build", False):
            out["error"] += " (a CPU-only build)"
        raise SystemExit
    if gpu:
        # Without memory growth TensorFlow takes the whole GPU at once, and
        # the peak would say nothing about the model.
        tf.config.experimental.set_memory_growth(gpus[0], True)
        name = "/GPU:0"
        details = tf.config.experimental.get_device_details(gpus[0])
        out["device"] = details.get("device_name", gpus[0].name)
        if details.get("compute_capability"):
            out["capability"] = "%d.%d" % tuple(details["compute_capability"])
        out["cudnn_version"] = str(info.get("cudnn_version", "") or "")
        amp_policy = "mixed_float16"
    else:
        tf.config.set_visible_devices([], "GPU")
        name = "/CPU:0"
        out["device"] = "cpu"
        amp_policy = "mixed_bfloat16"
    amp = bool(cfg["amp"])
    out["amp"] = amp_policy.replace("mixed_", "") if amp else ""
    tf.keras.mixed_precision.set_global_policy(amp_policy if amp else "float32")
    # TensorFlow has no switch that turns cuDNN off: without it, the model
    # has no convolutions, the layers cuDNN runs.
    out["cudnn"] = gpu and bool(cfg["cudnn"])

    with tf.device(name):
        out["phase"] = "data"
        # MNIST-shaped (28×28×1, ten classes) and learnable: each class is
        # a fixed random image plus noise, so the loss of a working step
        # falls.
        g = tf.random.Generator.from_seed(0)
        templates = g.normal((10, 28, 28, 1))
        batches = []
        for _ in range(4):
            y = g.uniform((cfg["batch"],), 0, 10, dtype=tf.int32)
            x = tf.gather(templates, y) + 0.5 * g.normal((cfg["batch"], 28, 28, 1))
            batches.append((tf.identity(x), tf.identity(y)))

        out["phase"] = "model"
        tf.keras.utils.set_random_seed(0)
        L = tf.keras.layers
        if not gpu or cfg["cudnn"]:
            layers = [L.Conv2D(8, 3, padding="same", activation="relu"), L.MaxPooling2D(2),
                      L.Conv2D(16, 3, padding="same", activation="relu"), L.MaxPooling2D(2)]
        else:
            layers = [L.AveragePooling2D(2), L.Flatten(), L.Dense(64, activation="relu")]
        model = tf.keras.Sequential([L.Input((28, 28, 1))] + layers + [L.Flatten(), L.Dense(10), L.Activation("linear", dtype="float32")])
        opt = tf.keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
        if gpu and amp:
            opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)
        want = name.strip("/").upper()
        off = ["variable " + v.name for v in model.trainable_variables if want not in device_of(v)]
        off += ["input %d" % i for i, (x, y) in enumerate(batches) if want not in device_of(x)]
        out["tensors_on_device"] = len(model.trainable_variables) + len(batches) - len(off)
        if off:
            raise RuntimeError("not on %s: %s" % (name, ", ".join(off)))

        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
                scaled = loss
                if gpu and amp:
                    # Keras 2 scales and unscales by hand; Keras 3's
                    # optimizer unscales in apply_gradients.
                    scaled = opt.get_scaled_loss(loss) if hasattr(opt, "get_scaled_loss") else opt.scale_loss(loss)
            grads = tape.gradient(scaled, model.trainable_variables)
            if gpu and amp and hasattr(opt, "get_unscaled_gradients"):
                grads = opt.get_unscaled_gradients(grads)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        def step(i):
            x, y = batches[i % len(batches)]
            out["phase"] = "step"
            return float(train_step(x, y).numpy())  # waits for the step

        train(out, cfg["steps"], step)
    out["on_gpu"] = gpu
    out["phase"] = "done"
except SystemExit:
    pass
except BaseException as e:  # noqa: B902 -- the report must always be printed
    failed(out, e)
finally:
    if tf is not None and gpu and out.get("phase") not in ("import", "device"):
        try:
            info = tf.config.experimental.get_memory_info("GPU:0")
            out["memory_peak"] = int(info["peak"])
        except Exception:  # noqa: BLE001
            pass
emit(out)
