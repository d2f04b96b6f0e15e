"""The fortunes job: the GPT-style character model (gpt.py) pretrained briefly in this process on
fortunes-min's own file (the source, which no device holds), then fine-tuned by FedAvg through
torchnative-coordinator across device processes that each hold a distinct fortune file (a topic
of their own), with the federated job's plumbing (federated_job.run_job); each round's global
model's perplexity on held-out text: the last tenth of every device's file, which no device
trains on. Then that model under shifted sources, as it is and with Tent (text_shift.py)."""
import time

import torch

import fortunes
import text_shift
from cnn import shuffled_batches
from federated_job import Job, run_job
from gpt import CONTEXT, char_gpt, perplexity
from torchnative.nn import federated

SOURCE = "fortunes"
# The devices' files, the first --text-devices of them: large ones, on distinct topics.
DEVICE_FILES = ("computers", "science", "songs-poems", "definitions", "people", "politics", "work", "men-women")


def model():
    return char_gpt(fortunes.VOCABULARY)


def device_flags(settings):
    return ["--model", "gpt", "--name", "text device", "--rounds", str(settings.text_rounds),
            "--epochs", str(settings.text_epochs), "--batch-size", str(settings.text_batch_size),
            "--lr", str(settings.text_lr), "--optimizer", "adam", "--seed", str(settings.seed)]


def load(settings):
    """The source's sequences, the devices' shards [(inputs, targets)] from the training part of
    their files, and the held-out sequences of all their files together."""
    files = fortunes.fortune_files()
    source = fortunes.sequences(fortunes.read_fortunes(files[SOURCE]), CONTEXT, settings.text_sequences)
    shards, held_out = [], []
    for name in DEVICE_FILES[:settings.text_devices]:
        training, held = fortunes.split(files[name])
        shards.append(fortunes.sequences(training, CONTEXT, settings.text_sequences))
        held_out.append(fortunes.sequences(held, CONTEXT, settings.text_held_out))
    return source, shards, tuple(torch.cat(part) for part in zip(*held_out))


def pretrain(inputs, targets, settings):
    """The source model: text_pretrain_epochs passes of the devices' local steps (Adam) here."""
    source = model()
    trainer = federated.Engine(source, lr=settings.text_lr, optimizer=torch.optim.Adam,
                               epochs=settings.text_pretrain_epochs)
    trainer.local_steps(shuffled_batches(inputs, targets, settings.text_batch_size, seed=settings.seed))
    return source


def run(settings, directory):
    """Pretraining, then settings.text_rounds FedAvg rounds, then the last global model under
    shifted sources; the files, the source model's held-out perplexity, one record per round
    (round_record, with its global model's perplexity) and one per shifted text (text_shift.run)."""
    start = time.perf_counter()
    (inputs, targets), shards, (held_inputs, held_targets) = load(settings)
    names = DEVICE_FILES[:settings.text_devices]
    print(f"fortunes: source '{SOURCE}' ({len(inputs)} sequences of {CONTEXT} characters); devices' files "
          + ", ".join(f"{index} '{name}' ({len(shard[0])})" for index, (name, shard) in enumerate(zip(names, shards)))
          + f"; held out: {len(held_inputs)} sequences from their last tenths", flush=True)
    source = pretrain(inputs, targets, settings)
    pretrained = perplexity(source, held_inputs, held_targets)
    print(f"text source model: {settings.text_pretrain_epochs} passes over '{SOURCE}', held-out perplexity "
          f"{pretrained:.4f}, {time.perf_counter() - start:.1f} s", flush=True)
    job = Job("text", model, settings.text_rounds, settings.round_timeout, device_flags(settings),
              ("perplexity", "held-out perplexity"))
    records, global_model = run_job(job, shards, directory,
                                    lambda trained: perplexity(trained, held_inputs, held_targets), initial=source)
    shifted = text_shift.run(global_model, (held_inputs, held_targets), settings)
    return {"source": SOURCE, "files": list(names), "pretrained": pretrained, "rounds": records, "shift": shifted}
