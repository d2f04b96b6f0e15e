"""The demo's results: a table on stdout, results.json, and PNG plots (matplotlib, Agg)."""
import json

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)


def table(federated, centralised, peers):
    """Round by round: the global model's test accuracy, the baseline's after as many passes, the
    peers' average's (for its rounds), and the seconds each had taken by then (federated: when the
    coordinator closed the round)."""
    lines = ["| round | federated accuracy | centralised accuracy | peers accuracy | federated s | centralised s | "
             "peers s |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for index, (fed, central) in enumerate(zip(federated, centralised)):
        peer = ([f"{peers[index]['accuracy']:.4f}", f"{peers[index]['seconds']:.1f}"] if index < len(peers)
                else ["", ""])
        lines.append(f"| {fed['round']} | {fed['accuracy']:.4f} | {central['accuracy']:.4f} | {peer[0]} | "
                     f"{fed['seconds']:.1f} | {central['seconds']:.1f} | {peer[1]} |")
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


def plot_accuracy(federated, centralised, peers, chance, path):
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot([r["round"] for r in federated], [r["accuracy"] for r in federated], "o-",
              label=f"FedAvg, {federated[-1]['contributors']} devices (global model)")
    axes.plot([r["round"] for r in centralised], [r["accuracy"] for r in centralised], "s-",
              label="centralised, same data and passes")
    axes.plot([r["round"] for r in peers], [r["accuracy"] for r in peers], "x--",
              label="FedAvg among peers, torch.distributed")
    axes.axhline(chance, color="grey", linestyle=":", label="chance")
    axes.set_xlabel("round (centralised: as many passes over the data)")
    axes.set_ylabel("test accuracy")
    axes.set_ylim(0, 1)
    axes.set_title("Fashion-MNIST, BatchNorm CNN")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def text_table(text):
    """The fortunes job: the held-out perplexity of the source model, then of each round's global model."""
    lines = ["| round | held-out perplexity | text s |", "|---:|---:|---:|",
             f"| 0 (source, '{text['source']}') | {text['pretrained']:.4f} | |"]
    lines += [f"| {r['round']} | {r['perplexity']:.4f} | {r['seconds']:.1f} |" for r in text["rounds"]]
    return "\n".join(lines)


def text_shift_table(records):
    """The fortunes model under shifted sources: its perplexity as it is and with Tent (the lower in
    bold), how far Tent moved the LayerNorms and the predictions' entropy before and after."""
    lines = ["| text | sequences | source perplexity | Tent perplexity | Tent moved | entropy, source -> Tent |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in records:
        cells = [f"{r[m]:.4f}" if r[m] != min(r["source"], r["tent"]) else f"**{r[m]:.4f}**" for m in ("source", "tent")]
        lines.append(f"| {r['shift']} | {r['sequences']} | {cells[0]} | {cells[1]} | {r['tent_change']:.4f} | "
                     f"{r['entropy_source']:.4f} -> {r['entropy_tent']:.4f} |")
    return "\n".join(lines)


def plot_perplexity(text, path):
    figure, axes = plt.subplots(figsize=(6, 4))
    rounds = [0] + [r["round"] for r in text["rounds"]]
    axes.plot(rounds, [text["pretrained"]] + [r["perplexity"] for r in text["rounds"]], "o-",
              label=f"FedAvg, {len(text['files'])} devices (global model)")
    axes.set_xticks(rounds)
    axes.set_xlabel(f"round (0: the source model, pretrained on '{text['source']}')")
    axes.set_ylabel("held-out perplexity (characters)")
    axes.set_title("fortunes, GPT-style character model")
    axes.legend(loc="upper right")
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


def write(directory, settings, counts, federated, centralised, peers, text, adaptation, methods, seconds):
    """results.json, accuracy.png, label_skew.png, perplexity.png and adaptation.png in directory;
    returns the four tables (rounds, fortunes rounds, fortunes under shifted sources, adaptation)."""
    (directory / "results.json").write_text(json.dumps(
        {"settings": vars(settings), "class_counts": counts.tolist(), "federated": federated,
         "centralised": centralised, "peers": peers, "text": text, "adaptation": adaptation,
         "seconds": seconds}, indent=1, default=str))
    chance = 1 / counts.shape[1]
    plot_accuracy(federated, centralised, peers, chance, directory / "accuracy.png")
    plot_label_skew(counts, settings.alpha, directory / "label_skew.png")
    plot_perplexity(text, directory / "perplexity.png")
    plot_adaptation(adaptation, methods, chance, directory / "adaptation.png")
    return "\n\n".join([table(federated, centralised, peers), text_table(text), text_shift_table(text["shift"]),
                        adaptation_table(adaptation, methods)])
