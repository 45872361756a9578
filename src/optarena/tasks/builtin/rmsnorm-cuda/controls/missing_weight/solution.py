import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """Wrong: the per-channel weight is never applied."""
    return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
