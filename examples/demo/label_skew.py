"""Non-IID devices: each class's examples dealt among the devices in proportions drawn from a
Dirichlet distribution (label skew, Hsu et al. 2019); a small alpha gives each device a few
dominant classes."""
import numpy as np


def dirichlet_label_skew(labels, devices, alpha, seed, min_examples):
    """The indices of `labels` each of `devices` devices holds (a list of sorted arrays): for every
    class, its examples in a seeded random order cut in Dirichlet(alpha) proportions. Drawn again
    (from the same generator) until every device holds at least min_examples."""
    labels = np.asarray(labels)
    generator = np.random.default_rng(seed)
    for _ in range(1000):
        shards = [[] for _ in range(devices)]
        for label in np.unique(labels):
            members = generator.permutation(np.flatnonzero(labels == label))
            proportions = generator.dirichlet(np.full(devices, alpha))
            cuts = (np.cumsum(proportions)[:-1] * len(members)).astype(int)
            for shard, part in zip(shards, np.split(members, cuts)):
                shard.extend(part.tolist())
        if min(map(len, shards)) >= min_examples:
            return [np.sort(np.array(shard, dtype=np.int64)) for shard in shards]
    raise ValueError(f"1000 Dirichlet({alpha}) draws over {len(labels)} examples left a device with fewer "
                     f"than {min_examples}: give the devices more examples or a larger alpha")


def class_counts(labels, shards, classes=10):
    """How many examples of each class every shard holds: a devices x classes array."""
    labels = np.asarray(labels)
    return np.stack([np.bincount(labels[shard], minlength=classes) for shard in shards])
