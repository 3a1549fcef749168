#!/usr/bin/python3
"""Digits data and the PyTorch reference for DigitsTest.

    digits_reference.py export DIR    write train/test .npy from sklearn
    digits_reference.py torch DIR EPOCHS BATCH LR   train the same MLP in
                                      PyTorch, print its held-out accuracy

Exit code 77 (skip) when sklearn or torch is missing.
"""
import sys

try:
    import numpy as np
    from sklearn.datasets import load_digits
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)


def export(d):
    digits = load_digits()  # 1797 8x8 images, shipped with sklearn
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    perm = np.random.RandomState(0).permutation(len(x))
    x, y = x[perm], y[perm]
    n_train = 1500
    np.save(f"{d}/x_train.npy", x[:n_train])
    np.save(f"{d}/y_train.npy", y[:n_train])
    np.save(f"{d}/x_test.npy", x[n_train:])
    np.save(f"{d}/y_test.npy", y[n_train:])


def train_torch(d, epochs, batch, lr):
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: {e}")
        sys.exit(77)
    torch.manual_seed(0)
    x = torch.tensor(np.load(f"{d}/x_train.npy"))
    y = torch.tensor(np.load(f"{d}/y_train.npy"))
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = len(x) // batch
    for _ in range(epochs):
        for s in range(steps):
            xb, yb = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    with torch.no_grad():
        pred = model(torch.tensor(np.load(f"{d}/x_test.npy"))).argmax(1)
    acc = (pred.numpy() == np.load(f"{d}/y_test.npy")).mean()
    print(f"{acc:.6f}")


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2])
    else:
        train_torch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                    float(sys.argv[5]))
