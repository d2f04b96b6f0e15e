"""Tent on the fortunes model's LayerNorms under a shifted source: the fortunes job's last global
model meets text unlike its devices' training text and is scored as it is (the source) and
adapting as it serves with Tent (adapt.wrap(model, adapt.Tent()): entropy minimisation of its
next-character predictions over the affine parameters of its LayerNorms, one Adam step per batch,
online along the stream; each batch scored by the predictions of the call that takes its step,
as the image Tent is scored).

The texts: the job's held-out text as it is (no shift: what Tent does where nothing moved), the
same with a seeded share of its input characters replaced by random symbols (typos; the targets
stay the clean next characters, as a corrupted image keeps its label), and a fortune file that
neither the source nor any device held (Zippy the Pinhead's capitalised outbursts)."""
import copy
import math
import time

import torch

import fortunes
from gpt import CONTEXT, perplexity
from torchnative import adapt

UNSEEN_FILE = "zippy"


def with_typos(inputs, rate, seed):
    """inputs with each character replaced, with probability rate (seeded), by a symbol drawn
    uniformly from the alphabet (the unknown symbol excluded)."""
    generator = torch.Generator().manual_seed(seed)
    hit = torch.rand(inputs.shape, generator=generator) < rate
    symbols = torch.randint(0, len(fortunes.ALPHABET), inputs.shape, generator=generator)
    return torch.where(hit, symbols, inputs)


def shifted_texts(held_out, settings):
    """{name: (inputs, targets)}: the held-out text, it with typos, and the unseen file (as many
    sequences as the held-out text)."""
    inputs, targets = held_out
    unseen = fortunes.read_fortunes(fortunes.fortune_files()[UNSEEN_FILE])
    return {"held-out": held_out,
            f"held-out, {settings.text_typos:.0%} typos": (with_typos(inputs, settings.text_typos, settings.seed),
                                                           targets),
            f"'{UNSEEN_FILE}' (unseen file)": fortunes.sequences(unseen, CONTEXT, len(inputs))}


def mean_entropy(model, inputs, batch_size):
    """The mean entropy of model's next-character predictions over inputs, without adapting."""
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(inputs), batch_size):
            batch = inputs[start:start + batch_size]
            total += adapt.softmax_entropy(model(batch)).item() * len(batch)
    return total / len(inputs)


def evaluate(source, inputs, targets, settings):
    """The source's perplexity and entropy on the text, and Tent's along it (a copy of the source
    wrapped, online; then offline for its entropy); how far Tent moved the LayerNorms (2-norm)."""
    record = {"sequences": len(inputs), "source": perplexity(source, inputs, targets, settings.text_batch_size),
              "entropy_source": mean_entropy(source, inputs, settings.text_batch_size)}
    tent = adapt.wrap(copy.deepcopy(source), method=adapt.Tent(), lr=settings.text_tent_lr,
                      optimizer=torch.optim.Adam).online()
    record["tent"] = perplexity(tent, inputs, targets, settings.text_batch_size)
    tent.offline()
    record["entropy_tent"] = mean_entropy(tent, inputs, settings.text_batch_size)
    record["tent_change"] = math.sqrt(sum(offset.double().pow(2).sum().item()
                                          for offset in tent.delta.offset().values()))
    record["tent_steps"] = tent.counts.steps
    return record


def run(source, held_out, settings):
    """One record per shifted text (evaluate's, with its name and seconds), printed as it ends."""
    records = []
    for name, (inputs, targets) in shifted_texts(held_out, settings).items():
        start = time.perf_counter()
        record = dict(shift=name, **evaluate(source, inputs, targets, settings),
                      seconds=time.perf_counter() - start)
        print(f"text under shift, {name}: {record['sequences']} sequences, perplexity source {record['source']:.4f}, "
              f"Tent {record['tent']:.4f} ({record['tent_steps']} steps, LayerNorms moved {record['tent_change']:.4f}, "
              f"entropy {record['entropy_source']:.4f} -> {record['entropy_tent']:.4f}), {record['seconds']:.1f} s",
              flush=True)
        records.append(record)
    return records
