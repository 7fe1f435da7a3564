"""The model one rank of the suite's Megatron-Core multimodule jobs holds: its module stages, with
the `config` and `set_input_tensor` that Megatron's 1F1B schedule asks of a model."""

import torch


class RankModel(torch.nn.Module):
    """This rank's stages: {module name: stage} (a Linear, or a Megatron DDP around one)."""

    def __init__(self, config, stages):
        super().__init__()
        self.config = config
        self.stages = torch.nn.ModuleDict(stages)
        self.inputs = {}

    def set_input_tensor(self, input_tensor):
        # the schedule passes [{module: tensor}]; P2P receives come as one-element lists
        inputs = input_tensor[0] if isinstance(input_tensor, list) else input_tensor
        self.inputs = {k: v[0] if isinstance(v, list) else v for k, v in (inputs or {}).items()}
