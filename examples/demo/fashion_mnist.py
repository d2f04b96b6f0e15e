"""Fashion-MNIST from Debian's dataset-fashion-mnist (the Makefile installs it), as torchvision
reads it: the demo's data, and the fixture of the tests that train on it
(tests/python/test_training_apis.py's fashion_mnist_root)."""
import gzip
import shutil
import subprocess
import warnings
from pathlib import Path

PACKAGE = "dataset-fashion-mnist"
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


class NotInstalled(FileNotFoundError):
    """Debian's dataset-fashion-mnist is not installed."""


def torchvision_root(directory):
    """torchvision's layout, directory/FashionMNIST/raw/*-ubyte, built from Debian's
    dataset-fashion-mnist (links to its files, or the files unpacked where it ships them
    gzipped); returns directory. A layout already there is kept. NotInstalled without the package."""
    directory = Path(directory)
    raw = directory / "FashionMNIST" / "raw"
    if all((raw / name).exists() for name in FILES):
        return directory
    listing = subprocess.run(["dpkg", "-L", PACKAGE], capture_output=True, text=True)
    if listing.returncode != 0:
        raise NotInstalled(f"Debian's {PACKAGE} is not installed (dpkg -L {PACKAGE} fails)")
    installed = {Path(line).name: Path(line) for line in listing.stdout.splitlines() if Path(line).is_file()}
    raw.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        if name in installed:
            (raw / name).unlink(missing_ok=True)
            (raw / name).symlink_to(installed[name])
        else:
            assert name + ".gz" in installed, f"{PACKAGE} lists neither {name} nor {name}.gz"
            with gzip.open(installed[name + ".gz"]) as packed, open(raw / name, "wb") as unpacked:
                shutil.copyfileobj(packed, unpacked)
    return directory


def load(root, train):
    """The training (train=True, 60,000) or test (10,000) images as float32 N x 1 x 28 x 28 in
    [0, 1], and their labels (int64), through torchvision's FashionMNIST."""
    # Only the demo's processes load images; the tests' fixture needs the files alone. torchvision
    # warns that the shim refuses its compiled image decoders (linked against upstream's libc10):
    # FashionMNIST reads its files with torch alone.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to load image Python extension")
        import torchvision

    dataset = torchvision.datasets.FashionMNIST(str(root), train=train)
    return dataset.data.unsqueeze(1).float() / 255.0, dataset.targets.long()
