"""The PyTorch peer of bench/cnn_bench: the CNN of TensorFlow's Estimator multi-worker tutorial
(conv2d 32 3x3 relu, max pool 2, flatten, dense 64 relu, dense 10, sparse softmax cross-entropy,
SGD) on Fashion-MNIST, trained at the given batch sizes and evaluated at batch 1000.

Run with Debian's interpreter and OpenBLAS's OpenMP build, as bench/run_cnn_bench.sh does:
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 bench/torch_cnn.py
Prints one line per measurement: `torch <train|eval> batch=<B> examples_per_sec=<median>`."""
import argparse
import gzip
import statistics
import time

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"


def load(split):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(f"{DATA}/{prefix}-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(f"{DATA}/{prefix}-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(32 * 13 * 13, 64), nn.ReLU(), nn.Linear(64, 10))


def train_rate(net, images, labels, batch, steps):
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    n = images.shape[0] // batch

    def run(count, offset):
        for i in range(count):
            j = (offset + i) % n
            x, y = images[j * batch:(j + 1) * batch], labels[j * batch:(j + 1) * batch]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            optimizer.step()

    run(10, 0)  # warm-up
    start = time.perf_counter()
    run(steps, 10)
    return steps * batch / (time.perf_counter() - start)


def eval_rate(net, images, batch, steps):
    n = images.shape[0] // batch
    with torch.no_grad():
        net(images[:batch])  # warm-up
        start = time.perf_counter()
        for i in range(steps):
            j = i % n
            net(images[j * batch:(j + 1) * batch]).argmax(1)
        return steps * batch / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--examples", type=int, default=32000, help="examples per timed run")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    train_x, train_y = load("train")
    test_x, _ = load("test")
    net = model()
    for batch in (64, 256):
        rates = [train_rate(net, train_x, train_y, batch, args.examples // batch) for _ in range(args.repeats)]
        print(f"torch train batch={batch} examples_per_sec={statistics.median(rates):.1f}", flush=True)
    net.eval()
    rates = [eval_rate(net, test_x, 1000, args.examples // 1000) for _ in range(args.repeats)]
    print(f"torch eval batch=1000 examples_per_sec={statistics.median(rates):.1f}", flush=True)


if __name__ == "__main__":
    main()
