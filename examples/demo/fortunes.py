"""Text from Debian's fortunes package (the Makefile installs it): fortune files, one topic
each, as character-level (inputs, next characters) sequences."""
import subprocess
import string
from pathlib import Path

import torch

PACKAGE = "fortunes"
# Printable ASCII and the newline; any other character becomes UNKNOWN.
ALPHABET = "\n" + string.printable[:95]
UNKNOWN = len(ALPHABET)
VOCABULARY = len(ALPHABET) + 1
CODES = {character: code for code, character in enumerate(ALPHABET)}


class NotInstalled(FileNotFoundError):
    """Debian's fortunes is not installed."""


def fortune_files():
    """{name: path} of the package's fortune files (the text, not their .dat indexes)."""
    listing = subprocess.run(["dpkg", "-L", PACKAGE, "fortunes-min"], capture_output=True, text=True)
    if listing.returncode != 0:
        raise NotInstalled(f"Debian's {PACKAGE} is not installed (dpkg -L {PACKAGE} fails)")
    paths = [Path(line) for line in listing.stdout.splitlines() if "/games/fortunes/" in line]
    return {path.name: path for path in paths if path.is_file() and not path.is_symlink() and not path.suffix}


def read_fortunes(path):
    """The file's fortunes (they are separated by lines holding '%')."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    return [fortune.strip("\n") for fortune in text.split("\n%\n") if fortune.strip()]


def encode(text):
    return torch.tensor([CODES.get(character, UNKNOWN) for character in text], dtype=torch.int64)


def sequences(fortunes, context, count):
    """Up to count (inputs, targets) pairs of context characters from the fortunes joined as the
    file has them, in consecutive, non-overlapping windows; targets are the inputs shifted by one."""
    codes = encode("\n%\n".join(fortunes))
    windows = min(count, (len(codes) - 1) // context)
    inputs = codes[:windows * context].reshape(windows, context)
    targets = codes[1:windows * context + 1].reshape(windows, context)
    return inputs, targets


def split(path, held_out=0.1):
    """A file's fortunes in two: the first for training, the last `held_out` share held out."""
    fortunes = read_fortunes(path)
    cut = len(fortunes) - max(1, int(len(fortunes) * held_out))
    return fortunes[:cut], fortunes[cut:]
