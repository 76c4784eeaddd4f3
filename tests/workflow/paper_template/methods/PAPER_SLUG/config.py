"""The `PAPER_SLUG:` section of config/scales/<scale>.yaml, declared once. Torch-free: the workflow
loads it by file path at parse time (methods.core.config.section_class)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from methods.core.config import Check


@dataclass
class Config:
    """Monte Carlo estimate of E[max of k iid U(0,1)]."""
    k: Annotated[int, Check(minimum=1)]     # uniforms per draw
    n: Annotated[int, Check(minimum=2)]     # draws (n >= 2: the standard error needs two)
    bins: Annotated[int, Check(minimum=1)]  # histogram bins of the figure
    seed: int
