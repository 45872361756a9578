import torch

_cache: dict[tuple[int, ...], torch.Tensor] = {}


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Wrong: computes each shape once and returns that output (kept on the device) again."""
    key = tuple(x.shape)
    if key not in _cache:
        _cache[key] = torch.softmax(x, dim=-1)
    return _cache[key].clone()
