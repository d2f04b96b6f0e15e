"""The demo's language model: a small GPT-style character model from torch.nn (token and
position embeddings, causal pre-norm transformer blocks, a final LayerNorm, a linear head tied to
the token embedding, as GPT's), the shape of tests/python/test_autograd.py's Gpt, sized for
fortunes, and its perplexity. The tied weight is one Parameter under two state_dict names
(tokens.weight, head.weight); the federated Engine trains it once and keeps the tie
(docs/federated_engine.md, "Tied weights")."""
import math

import torch
from torch import nn

CONTEXT = 64  # characters a sequence holds (the model sees CONTEXT, predicts the next of each)


class CharGpt(nn.Module):
    def __init__(self, vocabulary, width=64, heads=4, blocks=2, context=CONTEXT):
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, width)
        # GPT-2's initialisation of the embeddings, N(0, 0.02), rather than torch's N(0, 1).
        nn.init.normal_(self.tokens.weight, std=0.02)
        self.positions = nn.Embedding(context, width)
        nn.init.normal_(self.positions.weight, std=0.02)
        block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, blocks, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocabulary, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, ids):
        """Logits as batch x vocabulary x positions: nn.CrossEntropyLoss's layout, so that the
        Engine's default loss takes (ids, next ids) batches as they are."""
        n = ids.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        x = self.tokens(ids) + self.positions(torch.arange(n))
        return self.head(self.norm(self.blocks(x, mask=causal))).transpose(1, 2)


def char_gpt(vocabulary):
    """The same initial weights in every process (seeded), as cnn.batchnorm_cnn."""
    torch.manual_seed(0)
    return CharGpt(vocabulary)


def perplexity(model, inputs, targets, batch_size=64):
    """exp of the mean cross-entropy per character over (inputs, targets), in eval mode."""
    model.eval()
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(inputs), batch_size):
            logits = model(inputs[start:start + batch_size])
            total += nn.functional.cross_entropy(logits, targets[start:start + batch_size], reduction="sum").item()
    return math.exp(total / targets.numel())
