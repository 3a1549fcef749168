#!/usr/bin/python3
"""Digits data and the PyTorch reference for DigitsTest.

    digits_reference.py export DIR    write train/test .npy from sklearn
    digits_reference.py torch DIR EPOCHS BATCH LR   train the same MLP in
                                      PyTorch, print its held-out accuracy
    digits_reference.py cnn DIR EPOCHS BATCH LR     the same for the CNN
    digits_reference.py sgd-epoch DIR BATCH LR      one epoch of SGD on the
                                      MLP from DIR/init_*.npy, in order,
                                      with DataLoader(drop_last=False) (the
                                      last batch partial); writes
                                      DIR/torch_*.npy and prints the samples

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


def train_torch_cnn(d, epochs, batch, lr):
    """The CNN of DigitsTest: conv-bn-relu-pool, conv-bn-relu, linear."""
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: {e}")
        sys.exit(77)
    torch.manual_seed(0)
    nn = torch.nn
    x = torch.tensor(np.load(f"{d}/x_train.npy")).reshape(-1, 1, 8, 8)
    y = torch.tensor(np.load(f"{d}/y_train.npy"))
    model = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.BatchNorm2d(8),
                          nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, 1, 1), nn.BatchNorm2d(16),
                          nn.ReLU(), nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = len(x) // batch
    model.train()
    for _ in range(epochs):
        for s in range(steps):
            xb, yb = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        xt = torch.tensor(np.load(f"{d}/x_test.npy")).reshape(-1, 1, 8, 8)
        pred = model(xt).argmax(1)
    acc = (pred.numpy() == np.load(f"{d}/y_test.npy")).mean()
    print(f"{acc:.6f}")


def sgd_epoch(d, batch, lr):
    """One epoch, every sample once: the reference for a dynamic batch."""
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: {e}")
        sys.exit(77)
    x = torch.tensor(np.load(f"{d}/x_train.npy"))
    y = torch.tensor(np.load(f"{d}/y_train.npy"))
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n in names:
            params[n].copy_(torch.tensor(np.load(f"{d}/init_{n}.npy")))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=batch,
        shuffle=False, drop_last=False)
    seen = 0
    for xb, yb in loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
        seen += len(xb)
    for n in names:
        np.save(f"{d}/torch_{n}.npy", params[n].detach().numpy())
    print(seen)


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2])
    elif sys.argv[1] == "sgd-epoch":
        sgd_epoch(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif sys.argv[1] == "cnn":
        train_torch_cnn(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                        float(sys.argv[5]))
    else:
        train_torch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                    float(sys.argv[5]))
