# expect: failed crash
# ref: relu
# Invented: the candidate ends its process with status 0 as soon as it is imported, before
# any check ran. No verdict and a clean exit must not read as "passed".
import os

import torch
import torch.nn as nn

os._exit(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x
