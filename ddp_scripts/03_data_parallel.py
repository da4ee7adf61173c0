"""03 · DataParallel: 01_single_device.py plus one line, nn.DataParallel (one process, all GPUs).

    python 03_data_parallel.py --epochs 3 --batch-size 32 [--out metrics.json]

Devices: one process, on the GPU where CUDA exists (03: split over every visible GPU), else on the
CPU. Run by this series' tests on the CPU only; the GPU path is checked by tools/gpu_check.py
(README, "Verified on").

Written by notebooks/03_data_parallel.ipynb — edit it there.
"""

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def positive_int(text):
    """An argparse type: a whole number > 0. A bad value is a one-line error and exit code 2."""
    value = int(text)  # not a whole number: argparse says "invalid positive_int value"
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text}")
    return value


def non_negative_int(text):
    """An argparse type: a whole number >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def class_count(text):
    """An argparse type: a number of classes, at least 2."""
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2, got {text}")
    return value


def positive_float(text):
    """An argparse type: a finite number > 0. (A check `value <= 0` lets nan through: nan <= 0 is False.)"""
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def writable_file(text):
    """An argparse type: a file we can create, checked at start-up, not after the training it would save."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is a folder")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass  # a file can be created there (and is removed again)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {error.strerror or error}") from None
    return path


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=positive_int, default=3)
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per step, split over the GPUs")
    parser.add_argument("--dataset-size", type=positive_int, default=1024, help="training samples")
    parser.add_argument("--num-classes", type=class_count, default=10)
    parser.add_argument("--lr", type=positive_float, default=0.01)
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--out", type=writable_file, help="write the per-epoch metrics to this JSON file")
    return parser.parse_args()


def make_datasets(train_size, num_classes, seed):
    """Synthetic, learnable data: image = 0.1 * template[label] + noise. Same seed, same data."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, 3, 32, 32, generator=generator)
    val_size = max(train_size // 4, num_classes)
    labels = torch.randint(num_classes, (train_size + val_size,), generator=generator)
    images = 0.1 * templates[labels] + torch.randn(len(labels), 3, 32, 32, generator=generator)
    return (TensorDataset(images[:train_size], labels[:train_size]),
            TensorDataset(images[train_size:], labels[train_size:]))


class Model(nn.Module):
    """The source post's model, without the Softmax: CrossEntropyLoss wants raw logits."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv2d = nn.Conv2d(3, 16, 3)
        self.fc = nn.Linear(30 * 30 * 16, num_classes)

    def forward(self, x):
        return self.fc(self.conv2d(x).flatten(1))


def stop_if_not_finite(loss, model, epoch, step):
    """Stop at the first nan or inf, before optimizer.step() writes it into the weights."""
    checks = [loss.isfinite()] + [p.grad.isfinite().all() for p in model.parameters() if p.grad is not None]
    if not torch.stack(checks).all():  # one device sync per step, not one per parameter
        what = "loss" if not loss.isfinite() else "gradients"
        raise SystemExit(f"stopping: non-finite {what} at epoch {epoch}, step {step} "
                         f"(loss {loss.item():.4g}); try a smaller --lr")


def train_one_epoch(model, loader, loss_fn, optimizer, device, epoch):
    """One pass over the training set; returns its loss and accuracy."""
    model.train()
    total_loss, correct, seen = 0.0, 0, 0
    for step, (images, labels) in enumerate(loader):
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        stop_if_not_finite(loss, model, epoch, step)
        optimizer.step()
        total_loss += loss.item() * len(labels)
        correct += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
    return total_loss / seen, correct / seen


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct, seen = 0, 0
    for images, labels in loader:
        correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
        seen += len(labels)
    return correct / seen


def train(args, device):
    """Build the data, the model and the optimiser, train for --epochs, and write --out."""
    torch.manual_seed(args.seed)
    train_set, val_set = make_datasets(args.dataset_size, args.num_classes, args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)
    model = nn.DataParallel(Model(args.num_classes).to(device))  # the one line: split each batch over all GPUs
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    history = []
    for epoch in range(args.epochs):
        started = time.perf_counter()
        loss, accuracy = train_one_epoch(model, train_loader, loss_fn, optimizer, device, epoch)
        val_accuracy = evaluate(model, val_loader, device)
        history.append(dict(epoch=epoch, loss=loss, accuracy=accuracy, val_accuracy=val_accuracy,
                            seconds=time.perf_counter() - started))
        print(f"epoch {epoch}  loss {loss:.4f}  accuracy {accuracy:.1%}  "
              f"val accuracy {val_accuracy:.1%}  ({history[-1]['seconds']:.1f} s on {device})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(device=str(device), device_ids=model.device_ids, history=history),
                                       indent=1))


def main():
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train(args, device)


if __name__ == "__main__":
    main()
