# gpuenv verify: PyTorch. A few training steps of a tiny convolutional
# classifier on synthetic MNIST-shaped data, on the first device the process
# sees (gpuenv shows each process one GPU with CUDA_VISIBLE_DEVICES), with
# cuDNN and mixed precision.
cfg, out = begin("pytorch")


def memory(torch, dev):
    """Free and total device memory now, and the peak this process held."""
    try:
        free, total = torch.cuda.mem_get_info(dev)
        out["memory_free"], out["memory_total"] = int(free), int(total)
    except Exception:  # noqa: BLE001 -- older builds lack mem_get_info
        pass
    try:
        out["memory_peak"] = int(torch.cuda.max_memory_allocated(dev))
    except Exception:  # noqa: BLE001
        pass


torch = None
dev = None
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    out["version"] = torch.__version__
    out["build_cuda"] = torch.version.cuda or ""
    out["phase"] = "device"
    gpu = cfg["device"] != "cpu"
    if gpu and not torch.cuda.is_available():
        out["error"] = "torch.cuda.is_available() is False"
        out["no_gpu"] = True
        if not torch.version.cuda:
            out["error"] += " (a CPU-only build)"
        raise SystemExit
    if gpu:
        dev = torch.device("cuda", 0)
        torch.backends.cudnn.enabled = bool(cfg["cudnn"])
        props = torch.cuda.get_device_properties(dev)
        out["device"] = props.name
        out["capability"] = "%d.%d" % (props.major, props.minor)
        out["memory_total"] = int(props.total_memory)
        if torch.backends.cudnn.is_available():
            out["cudnn_version"] = cudnn_version(torch.backends.cudnn.version())
        out["cudnn"] = bool(cfg["cudnn"]) and torch.backends.cudnn.is_available()
        # Mixed precision on a GPU: float16 with loss scaling.
        amp_dtype = torch.float16
    else:
        dev = torch.device("cpu")
        out["device"] = "cpu"
        out["cudnn"] = False
        # The CPU's autocast is bfloat16, which needs no loss scaling.
        amp_dtype = torch.bfloat16
    amp = bool(cfg["amp"])
    out["amp"] = str(amp_dtype).replace("torch.", "") if amp else ""

    out["phase"] = "data"
    # MNIST-shaped (1×28×28, ten classes) and learnable: each class is a
    # fixed random image plus noise, so the loss of a working step falls.
    g = torch.Generator().manual_seed(0)
    templates = torch.randn(10, 1, 28, 28, generator=g)
    batches = []
    for _ in range(4):
        y = torch.randint(0, 10, (cfg["batch"],), generator=g)
        x = templates[y] + 0.5 * torch.randn(cfg["batch"], 1, 28, 28, generator=g)
        batches.append((x.to(dev), y.to(dev)))

    out["phase"] = "model"
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 10),
    ).to(dev)
    # "Expected all tensors to be on the same device" starts with a tensor
    # left behind: every parameter and every input must be on dev.
    off = ["parameter " + n for n, p in model.named_parameters() if p.device != dev]
    off += ["input %d" % i for i, (x, y) in enumerate(batches) if x.device != dev or y.device != dev]
    out["tensors_on_device"] = sum(1 for _ in model.parameters()) + 2 * len(batches) - len(off)
    if off:
        raise RuntimeError("not on %s: %s" % (dev, ", ".join(off)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(enabled=gpu and amp)

    def step(i):
        x, y = batches[i % len(batches)]
        out["phase"] = "forward"
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=amp_dtype, enabled=amp):
            loss = F.cross_entropy(model(x).float(), y)
        out["phase"] = "backward"
        scaler.scale(loss).backward()
        out["phase"] = "optimizer"
        scaler.step(opt)
        scaler.update()
        return loss.item()  # waits for the step

    train(out, cfg["steps"], step)
    if gpu:
        torch.cuda.synchronize(dev)
    out["on_gpu"] = gpu
    out["phase"] = "done"
except SystemExit:
    pass
except BaseException as e:  # noqa: B902 -- the report must always be printed
    failed(out, e)
finally:
    if torch is not None and dev is not None and dev.type == "cuda":
        memory(torch, dev)
emit(out)
