import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """Root-mean-square normalisation over the last axis, then a per-channel scale (on the GPU)."""
    mean_square = torch.mean(x * x, dim=-1, keepdim=True)
    return x / torch.sqrt(mean_square + eps) * weight
