"""The PyTorch half of bench/gpu_bench.sh (bench/gpu_bench.cpp is est's): training steps/s of
the Estimator tutorial's CNN at each --cnn-batches size and of the ResNet-style net of
bench/resnet_model.h at --resnet-batch, on one device, with the same shapes, synthetic batches
already on the device (a ring of 8), SGD and cross-entropy, torch.backends.cudnn.benchmark =
True. Steady state: --warmup steps, then --repeats runs of --steps steps with the device
synchronised at the ends only; the median run is printed.

The same rows as est's, for a like-for-like comparison:
  - mode=eager: plain PyTorch; mode=graph: the whole step (forward, backward, SGD update)
    captured once in a torch.cuda.CUDAGraph and replayed after copying each batch into its
    static inputs, as est's nn::CapturedStep does (GPU only);
  - precision=float32: TF32 off for cuBLAS and cuDNN (PyTorch allows it for cuDNN convolutions
    by default); precision=tf32: on for both (GPU only). Both set through
    torch.backends.{cuda.matmul,cudnn.conv}.fp32_precision where this torch has it, else the
    allow_tf32 flags, and said on the `torch precision` line;
  - the ResNet channels_last (NHWC, as est's) under --resnet-policy: mixed_bfloat16 is
    torch.autocast(dtype=torch.bfloat16) (precision=bfloat16, TF32 on for what stays float32),
    float32 is plain float32 with TF32 off.

Lines: `torch train model=<cnn|resnet> batch=<B> mode=<eager|graph> precision=<p>
steps_per_sec=<x> examples_per_sec=<y> loss=<last>` (or `error="..."`/`skipped="..."`), after
`torch device=...` and `torch precision ...` lines; a device torch cannot use prints
`torch device=... error="..."` and exits 0."""
import argparse
import statistics
import sys
import time

import torch
from torch import nn

RING = 8


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(32 * 13 * 13, 64), nn.ReLU(), nn.Linear(64, 10))


class ResNetish(nn.Module):
    """Stem conv-BN-relu, `blocks` residual blocks of conv-BN-relu-conv-BN + input, relu, global
    average pooling, dense 10: bench/resnet_model.h's shapes (BN momentum 0.99 in TF's terms)."""

    def __init__(self, width, blocks):
        super().__init__()

        def conv_bn(cin):
            return nn.Sequential(nn.Conv2d(cin, width, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(width, eps=1e-3, momentum=0.01))
        self.stem = conv_bn(3)
        self.blocks = nn.ModuleList(nn.ModuleList([conv_bn(width), conv_bn(width)])
                                    for _ in range(blocks))
        self.dense = nn.Linear(width, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        for first, second in self.blocks:
            x = torch.relu(x + second(torch.relu(first(x))))
        return self.dense(x.mean((2, 3)))


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def set_tensor_float_32(enabled):
    """TF32 for cuBLAS and cuDNN convolutions; returns how it was set, for the output."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision") and hasattr(torch.backends.cudnn, "conv"):
        value = "tf32" if enabled else "ieee"
        matmul.fp32_precision = value
        torch.backends.cudnn.conv.fp32_precision = value
        return f"fp32_precision={value}"
    matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    return f"allow_tf32={enabled}"


def measure(args, device, name, batch, mode, precision, steps, make_model, image_shape,
            channels_last):
    key = f"torch train model={name} batch={batch} mode={mode} precision={precision}"
    if device.type != "cuda" and (mode == "graph" or precision == "tf32"):
        why = "CUDA graphs need a GPU" if mode == "graph" else "TF32 is a GPU mode"
        print(f'{key} skipped="{why}"', flush=True)
        return
    if device.type == "cuda":
        set_tensor_float_32(precision != "float32")
    try:
        torch.manual_seed(0)
        net = make_model().to(device)
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        net = net.to(memory_format=fmt)
        images = [torch.rand((batch, *image_shape), device=device).contiguous(memory_format=fmt)
                  for _ in range(RING)]
        labels = [torch.randint(0, 10, (batch,), device=device) for _ in range(RING)]
        optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        autocast = precision == "bfloat16"
        state = {"next": 0, "loss": None}

        def step(x, y):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = loss_fn(net(x), y)
            loss.backward()
            optimizer.step()
            return loss

        def eager(count):
            for _ in range(count):
                i = state["next"] % RING
                state["next"] += 1
                optimizer.zero_grad(set_to_none=True)
                state["loss"] = step(images[i], labels[i])

        run = eager
        if mode == "graph":  # torch.cuda.graphs' whole-network capture recipe
            static_x, static_y = images[0].clone(), labels[0].clone()
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    optimizer.zero_grad(set_to_none=True)
                    step(static_x, static_y)
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            optimizer.zero_grad(set_to_none=True)
            with torch.cuda.graph(graph):
                static_loss = step(static_x, static_y)

            def replay(count):
                for _ in range(count):
                    i = state["next"] % RING
                    state["next"] += 1
                    static_x.copy_(images[i])
                    static_y.copy_(labels[i])
                    graph.replay()
                state["loss"] = static_loss

            run = replay

        run(args.warmup)
        rates = []
        for _ in range(args.repeats):
            synchronize(device)
            start = time.perf_counter()
            run(steps)
            synchronize(device)
            rates.append(steps / (time.perf_counter() - start))
        rate = statistics.median(rates)
        print(f"{key} steps_per_sec={rate:.2f} examples_per_sec={rate * batch:.1f} "
              f"loss={state['loss'].item():.4f}", flush=True)
    except Exception as e:  # noqa: BLE001 -- reported per line, the other figures still run
        message = " ".join(str(e).split()).replace('"', "'")
        print(f'{key} error="{type(e).__name__}: {message}"', flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cnn-batches", default="64,1024")
    parser.add_argument("--precisions", default="float32,tf32",
                        help="the CNN's: float32 (TF32 off), tf32 (TF32 on; GPU only)")
    parser.add_argument("--resnet-batch", type=int, default=256)
    parser.add_argument("--resnet-size", type=int, default=32)
    parser.add_argument("--resnet-width", type=int, default=64)
    parser.add_argument("--resnet-blocks", type=int, default=3)
    parser.add_argument("--resnet-policy", choices=["mixed_bfloat16", "float32"],
                        default="mixed_bfloat16")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print(f'torch device=cuda error="torch {torch.__version__} sees no GPU '
                  f'(torch.cuda.is_available() is False; a CPU-only build?)"', flush=True)
            return 0
        device = torch.device("cuda", 0)
        torch.backends.cudnn.benchmark = True
        print(f'torch device=cuda:0 name="{torch.cuda.get_device_name(0)}" '
              f"torch={torch.__version__} cudnn_benchmark=True", flush=True)
    else:
        device = torch.device("cpu")
        print(f"torch device=cpu threads={args.threads} torch={torch.__version__}", flush=True)
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in ("float32", "tf32"):
            parser.error(f"--precisions: {p!r} is not float32 or tf32")
    how = ""
    if device.type == "cuda":
        how = (f"(float32: {set_tensor_float_32(False)}, tf32: {set_tensor_float_32(True)}, "
               "for cuBLAS and cuDNN convolutions)")
    resnet = "bfloat16 autocast, TF32 on" if args.resnet_policy == "mixed_bfloat16" else \
        "float32, TF32 off"
    print(f"torch precision: float32 rows run with TF32 off, tf32 rows with it on {how}; "
          f"the ResNet under {resnet}", flush=True)
    for batch in (int(b) for b in args.cnn_batches.split(",")):
        for precision in precisions:
            for mode in ("eager", "graph"):
                measure(args, device, "cnn", batch, mode, precision, args.steps, cnn,
                        (1, 28, 28), False)
    if args.resnet_batch > 0:
        size = args.resnet_size
        precision = "bfloat16" if args.resnet_policy == "mixed_bfloat16" else "float32"
        measure(args, device, "resnet", args.resnet_batch, "eager", precision,
                max(1, args.steps // 4), lambda: ResNetish(args.resnet_width, args.resnet_blocks),
                (3, size, size), True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
