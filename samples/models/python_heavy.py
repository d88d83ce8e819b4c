"""A deliberately Python-heavy model for manypy tests and benchmarks.

The forward pass runs many small ops on [batch, 64] tensors, so its cost is
dominated by the Python interpreter (and, in manypy, by the GIL of the
interpreter that runs it) rather than by the math.  It also exercises:

* keyword arguments with defaults (``steps``, ``normalize``),
* a loop whose trip count comes from an argument (``steps``),
* an ``if`` on a value computed from the data,
* a dict output mixing tensors and a Python int.

It is deterministic given its weights, and scriptable with torch.jit.script
(TorchScript accepts ``Dict[str, Union[Tensor, int]]``).
"""

from typing import Dict, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

WIDTH = 64


class PythonHeavy(nn.Module):
    def __init__(self, width: int = WIDTH, depth: int = 24, classes: int = 10):
        super().__init__()
        # `depth` small Linear layers applied one after the other in forward.
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        # One extra layer reused `steps` times.  TorchScript cannot index a
        # ModuleList with a runtime value, so the argument-driven loop uses a
        # plain weight/bias pair instead of self.layers[i].
        self.step_w = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        self.step_b = nn.Parameter(torch.zeros(width))
        self.head = nn.Linear(width, classes)

    def weight_address(self) -> int:
        """Where step_w's data is: the same in every replica, which share
        the package's weights (tests/capi/capi_objects.c)."""
        return self.step_w.data_ptr()

    def shift(self, h: torch.Tensor) -> torch.Tensor:
        """Control flow that depends on a value computed from the data."""
        if bool(h.mean() > 0):
            return h * 1.5
        return h - 0.1

    def forward(
        self, x: torch.Tensor, steps: int = 8, normalize: bool = True
    ) -> Dict[str, Union[torch.Tensor, int]]:
        h = x
        # Fixed-length chain of small residual blocks (unrolled by TorchScript).
        for layer in self.layers:
            h = h + 0.1 * torch.tanh(layer(h))

        # Loop whose count is an argument.
        for i in range(steps):
            y = F.linear(h, self.step_w, self.step_b)
            if i % 2 == 0:
                h = 0.5 * h + 0.5 * torch.relu(y)
            else:
                h = 0.5 * h + 0.5 * torch.sigmoid(y)

        # norm() gets p explicitly: TorchScript has no overload taking dim alone.
        if normalize:
            h = h / (h.norm(p=2, dim=1, keepdim=True) + 1e-6)

        h = self.shift(h)

        out: Dict[str, Union[torch.Tensor, int]] = {
            "logits": self.head(h),
            "norm": h.norm(p=2, dim=1),
            "steps": steps,
        }
        return out


class PythonHeavyExport(PythonHeavy):
    """PythonHeavy as torch.export takes it, for AOTInductor (make_pt2.py).

    What export cannot capture is changed, and nothing else:
    * ``shift``'s ``if`` on a value of the data becomes ``torch.where``
      (export traces one path; a data-dependent branch needs torch.where or
      torch.cond);
    * ``steps`` and ``normalize`` are fixed at export (an exported graph is
      specialised on Python scalars), so ``forward`` takes ``x`` alone;
    * the ``steps`` entry of the result, a Python int, is left out
      (AOTInductor returns tensors).
    The weights are those of the PythonHeavy it is made from.
    """

    def __init__(self, heavy: PythonHeavy, steps: int = 8, normalize: bool = True):
        super().__init__()
        self.load_state_dict(heavy.state_dict())
        self.steps = steps
        self.normalize = normalize

    def shift(self, h: torch.Tensor) -> torch.Tensor:
        return torch.where(h.mean() > 0, h * 1.5, h - 0.1)

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        out = super().forward(x, self.steps, self.normalize)
        return {"logits": out["logits"], "norm": out["norm"]}
