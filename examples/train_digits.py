"""The main job for now: train a softmax-regression classifier on scikit-learn's digits
with upstream's torch Python API running on torchnative's torch._C, then report.

Gradients are written out by hand (autograd lands in a later issue); every tensor
operation below goes through the shim's operator door.
"""
import time

import numpy as np
from sklearn.datasets import load_digits

import torch

digits = load_digits()
features = torch.from_numpy(digits.data.astype(np.float32) / 16.0)
labels = torch.from_numpy(digits.target.astype(np.int64))
n = features.shape[0]
split = int(n * 0.8)
x_train, x_test = features[:split], features[split:]
y_train, y_test = labels[:split], labels[split:]
classes = torch.arange(10)
one_hot = (y_train.view(-1, 1) == classes.view(1, -1)).float()

weights = torch.zeros(64, 10)
bias = torch.zeros(10)
learning_rate = 0.5
start = time.perf_counter()
for epoch in range(100):
    probabilities = torch.softmax(x_train @ weights + bias, dim=1)
    error = (probabilities - one_hot) / split
    weights -= learning_rate * (x_train.t() @ error)
    bias -= learning_rate * error.sum(dim=0)
    if epoch % 25 == 0 or epoch == 99:
        loss = -(one_hot * torch.log_softmax(x_train @ weights + bias, dim=1)).sum() / split
        print(f"epoch {epoch:3d}  train loss {loss.item():.4f}")
elapsed = time.perf_counter() - start
predicted = (x_test @ weights + bias).argmax(dim=1)
accuracy = (predicted == y_test).float().mean().item()
print(f"torch from {torch.__file__}")
print(f"torch._C from {torch._C.__file__}")
print(f"trained softmax regression on {split} digits in {elapsed:.2f} s; held-out accuracy {accuracy:.3f} on {n - split} digits")
