import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """Wrong: computes in float16 and casts back (off by far more than the tolerance)."""
    h = x.half()
    out = h / torch.sqrt(torch.mean(h * h, dim=-1, keepdim=True) + eps) * weight.half()
    return out.float()
