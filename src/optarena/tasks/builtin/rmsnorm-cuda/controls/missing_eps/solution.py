import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """Wrong: eps left out (large-eps and zeros workloads catch it)."""
    return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True)) * weight
