"""The demo's model: a small BatchNorm CNN for 28 x 28 grey images, and its test accuracy."""
import functools

import torch
from torch import nn

CLASSES = 10


def batchnorm_cnn():
    """The same initial weights in every process (seeded): the task's initial model, the
    devices' and the centralised baseline's."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, CLASSES))


def accuracy(model, images, labels, batch_size=1000):
    """The fraction of images the model (in eval mode: BatchNorm's running statistics) labels right."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            predicted = model(images[start:start + batch_size]).argmax(dim=1)
            correct += (predicted == labels[start:start + batch_size]).sum().item()
    return correct / len(images)


def shuffled_batches(images, labels, batch_size, seed):
    """(images, labels) batches of batch_size (the last may be smaller) in a seeded random order."""
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))
    return [(images[chunk], labels[chunk]) for chunk in order.split(batch_size)]


def sgd(momentum):
    """The local optimizer of the devices and of the baseline, as Engine takes it: (parameters, lr=lr)."""
    return functools.partial(torch.optim.SGD, momentum=momentum)
