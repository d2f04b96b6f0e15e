"""The baseline: the same model trained on the union of the devices' data in one process, with
the devices' local steps (Engine.local_steps: the same optimizer, learning rate, batch size and
epochs per round), for as many passes over the data as the federated job makes."""
import time

from cnn import accuracy, batchnorm_cnn, sgd, shuffled_batches
from torchnative.nn import federated


def run(images, labels, test_images, test_labels, settings):
    """settings.rounds rounds of settings.epochs passes; one record per round, as the federated
    job's: its number, the test accuracy after it, seconds since the start."""
    model = batchnorm_cnn()
    trainer = federated.Engine(model, lr=settings.lr, optimizer=sgd(settings.momentum), epochs=settings.epochs)
    records, start = [], time.perf_counter()
    for number in range(1, settings.rounds + 1):
        batches = shuffled_batches(images, labels, settings.batch_size, seed=settings.seed + number)
        metrics, _ = trainer.local_steps(batches)
        records.append({"round": number, "accuracy": accuracy(model, test_images, test_labels),
                        "seconds": time.perf_counter() - start})
        print(f"centralised round {number}/{settings.rounds} ({settings.epochs} pass(es) over {len(labels)} "
              f"examples): loss {metrics['loss_before']:.3f} -> "
              f"{metrics['loss_after']:.3f}, test accuracy {records[-1]['accuracy']:.4f}, "
              f"{records[-1]['seconds']:.1f} s", flush=True)
    return records
