import torch

_cache: dict[tuple[int, ...], torch.Tensor] = {}


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """Wrong: computes each shape once and returns that output (kept on the device) again."""
    key = tuple(x.shape)
    if key not in _cache:
        _cache[key] = x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps) * weight
    return _cache[key].clone()
