import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Wrong: returns zeros."""
    return torch.zeros_like(x)
