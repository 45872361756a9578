import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """Wrong: normalises over the first axis instead of the last."""
    return x / torch.sqrt(torch.mean(x * x, dim=0, keepdim=True) + eps) * weight
