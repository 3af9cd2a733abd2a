"""count_parameters under DeepSpeed ZeRO-3 (issue 35 item 6): each process holds a partition of every weight, so
``p.numel()`` is that shard's size (0 for a parameter another rank holds); DeepSpeed keeps the whole size in
``ds_numel``. The report's trainable/total counts must be the model's, whatever the sharding."""

import torch

from reasonkit.distill.student import count_parameters


class Partitioned(torch.nn.Parameter):
    """A parameter as ZeRO-3 leaves it between gathers: an empty local tensor carrying ``ds_numel``."""

    def __new__(cls, whole: int, requires_grad: bool = True):
        p = super().__new__(cls, torch.empty(0), requires_grad=requires_grad)
        p.ds_numel = whole
        return p


def test_zero3_partitioned_weights_count_their_whole_size():
    model = torch.nn.Module()
    model.weight = Partitioned(1536 * 8960)
    model.frozen = Partitioned(151_936 * 1536, requires_grad=False)
    assert count_parameters(model) == (1536 * 8960, 1536 * 8960 + 151_936 * 1536)


def test_plain_weights_count_their_elements():
    model = torch.nn.Linear(4, 3)
    model.bias.requires_grad_(False)
    assert count_parameters(model) == (12, 15)
