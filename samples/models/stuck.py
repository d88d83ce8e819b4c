"""A model whose methods never return, for manypy's deadline and cancel tests.

forward(x) returns x * 2, so a test can check that an interpreter that had a
call stopped still serves correct results. The other methods hang the way
real models do: a Python loop, a loop that swallows every exception, a
blocking sleep, a property that loops.
"""

import time

import torch
import torch.nn as nn


class Stuck(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def spin(self):
        while True:
            pass

    def spin_catching(self):
        # Catches everything, manypy's stop included, and goes on.
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass

    def spin_torch(self, x: torch.Tensor):
        # Mostly inside torch operators, which release the GIL.
        while True:
            x = torch.tanh(x @ x)

    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @property
    def spinning_property(self):
        while True:
            pass


class Loop(nn.Module):
    """For TorchScript on the host: n tensor operations."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        i = 0
        while i < n:
            x = x + 1
            i += 1
        return x
