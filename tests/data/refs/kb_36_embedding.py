import torch
import torch.nn as nn

num_embeddings = 5000
embedding_dim = 128
batch_size = 32
seq_len = 77


class Model(nn.Module):
    """Embedding lookup (a row gather) from a learnable table."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super(Model, self).__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.embedding(indices)


def get_inputs():
    indices = torch.randint(0, num_embeddings, (batch_size, seq_len))
    return [indices]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
