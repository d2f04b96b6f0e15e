"""The demo's results: a table on stdout, results.json, and PNG plots (matplotlib, Agg)."""
import json

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)


def table(federated, centralised):
    """Round by round: the global model's test accuracy, the baseline's after as many passes,
    and the seconds each had taken by then (federated: when the coordinator closed the round)."""
    lines = ["| round | federated accuracy | centralised accuracy | federated s | centralised s |",
             "|---:|---:|---:|---:|---:|"]
    for fed, central in zip(federated, centralised):
        lines.append(f"| {fed['round']} | {fed['accuracy']:.4f} | {central['accuracy']:.4f} | "
                     f"{fed['seconds']:.1f} | {central['seconds']:.1f} |")
    return "\n".join(lines)


def adaptation_table(records, methods):
    """Batch size, corruption and severity: each method's accuracy on the same corrupted images,
    the best in bold."""
    lines = ["| batch | corruption | severity | " + " | ".join(methods) + " |",
             "|---:|---|---:|" + "---:|" * len(methods)]
    for record in records:
        best = max(record["accuracy"].values())
        cells = [f"**{record['accuracy'][m]:.4f}**" if record["accuracy"][m] == best else f"{record['accuracy'][m]:.4f}"
                 for m in methods]
        lines.append(f"| {record['batch_size']} | {record['corruption']} | {record['severity']} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_adaptation(records, methods, chance, path):
    """Grouped bars, one panel per batch size: per corruption and severity, each method's accuracy."""
    batch_sizes = sorted({record["batch_size"] for record in records})
    figure, panels = plt.subplots(len(batch_sizes), 1, figsize=(9, 3.2 * len(batch_sizes)), squeeze=False)
    width = 0.8 / len(methods)
    for axes, batch_size in zip(panels[:, 0], batch_sizes):
        shown = [record for record in records if record["batch_size"] == batch_size]
        for offset, method in enumerate(methods):
            axes.bar([i + offset * width for i in range(len(shown))], [r["accuracy"][method] for r in shown],
                     width, label=method)
        axes.set_xticks([i + 0.4 - width / 2 for i in range(len(shown))],
                        [f"{r['corruption']}\n{r['severity']}" for r in shown], fontsize="small")
        axes.axhline(chance, color="grey", linestyle=":", label="chance")
        axes.set_ylabel("test accuracy (corrupted)")
        axes.set_ylim(0, 1)
        axes.set_title(f"test-time adaptation of the federated model, batches of {batch_size}")
        axes.legend(fontsize="small", ncol=3, loc="upper right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def plot_accuracy(federated, centralised, chance, path):
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot([r["round"] for r in federated], [r["accuracy"] for r in federated], "o-",
              label=f"FedAvg, {federated[-1]['contributors']} devices (global model)")
    axes.plot([r["round"] for r in centralised], [r["accuracy"] for r in centralised], "s-",
              label="centralised, same data and passes")
    axes.axhline(chance, color="grey", linestyle=":", label="chance")
    axes.set_xlabel("round (centralised: as many passes over the data)")
    axes.set_ylabel("test accuracy")
    axes.set_ylim(0, 1)
    axes.set_title("Fashion-MNIST, BatchNorm CNN")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def plot_label_skew(counts, alpha, path):
    """Each device's examples by class: a stacked bar per device."""
    figure, axes = plt.subplots(figsize=(6, 4))
    bottom = [0] * len(counts)
    for label in range(counts.shape[1]):
        axes.bar(range(len(counts)), counts[:, label], bottom=bottom, label=str(label))
        bottom = [b + c for b, c in zip(bottom, counts[:, label])]
    axes.set_xlabel("device")
    axes.set_ylabel("examples")
    axes.set_title(f"label skew: Dirichlet(alpha={alpha})")
    axes.legend(title="class", fontsize="small", loc="center left", bbox_to_anchor=(1, 0.5))
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def write(directory, settings, counts, federated, centralised, adaptation, methods, seconds):
    """results.json, accuracy.png, label_skew.png and adaptation.png in directory; returns the
    two tables (rounds, then adaptation)."""
    (directory / "results.json").write_text(json.dumps(
        {"settings": vars(settings), "class_counts": counts.tolist(), "federated": federated,
         "centralised": centralised, "adaptation": adaptation, "seconds": seconds}, indent=1, default=str))
    chance = 1 / counts.shape[1]
    plot_accuracy(federated, centralised, chance, directory / "accuracy.png")
    plot_label_skew(counts, settings.alpha, directory / "label_skew.png")
    plot_adaptation(adaptation, methods, chance, directory / "adaptation.png")
    return table(federated, centralised) + "\n\n" + adaptation_table(adaptation, methods)
