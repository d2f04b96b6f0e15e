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


def write(directory, settings, counts, federated, centralised, seconds):
    """results.json, accuracy.png and label_skew.png in directory; returns the table."""
    (directory / "results.json").write_text(json.dumps(
        {"settings": vars(settings), "class_counts": counts.tolist(), "federated": federated,
         "centralised": centralised, "seconds": seconds}, indent=1, default=str))
    plot_accuracy(federated, centralised, 1 / counts.shape[1], directory / "accuracy.png")
    plot_label_skew(counts, settings.alpha, directory / "label_skew.png")
    return table(federated, centralised)
