import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis, shifted by the row maximum so exp cannot overflow (GPU)."""
    e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
    return e / torch.sum(e, dim=-1, keepdim=True)
