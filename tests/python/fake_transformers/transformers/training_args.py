# SPDX-License-Identifier: MIT
"""transformers.TrainingArguments of the stand-in: the fields a callback reads."""
from dataclasses import dataclass, field
from typing import List

import torch


@dataclass
class TrainingArguments:
    output_dir: str = "trainer_output"
    max_steps: int = -1
    per_device_train_batch_size: int = 8
    logging_strategy: str = "steps"
    logging_steps: int = 500
    logging_first_step: bool = False
    save_strategy: str = "steps"
    save_steps: int = 500
    report_to: List[str] = field(default_factory=lambda: ["tensorboard"])
    process_index: int = 0
    world_size: int = 1

    @property
    def device(self):
        return torch.device("cuda", 0)
