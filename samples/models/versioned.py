"""A model that says which version it is, for manypy's hot swap tests.

forward(x) returns a tensor shaped like x filled with the version number, so
a caller can check that each result came from the version it called.
version() returns the number. The weights (4 MiB by default) make a loaded
version's memory visible, so a test can see it freed after a swap.
"""

import torch
import torch.nn as nn


class Versioned(nn.Module):
    def __init__(self, number: int, weight_mib: int = 4):
        super().__init__()
        self.number = number
        self.weights = nn.Parameter(
            torch.full((weight_mib * 1024 * 1024 // 4,), float(number)), requires_grad=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full_like(x, float(self.number), dtype=torch.float32)

    def version(self) -> int:
        return self.number
