"""A PyTorch Lightning `fit` with nothing of gputriage in it: a small MLP on
random data, on the CPU, its optimizer stepped with Lightning's closure.

    lightning_job.py [--steps N]
"""
import argparse

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, features=128, hidden=256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 10))
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps")
    parser.add_argument("--accumulate", type=int, default=1, help="accumulate_grad_batches")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = 32 * args.steps * args.accumulate
    data = DataLoader(TensorDataset(torch.randn(n, 128), torch.randint(0, 10, (n,))), batch_size=32, num_workers=0)
    trainer = L.Trainer(max_steps=args.steps, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        accumulate_grad_batches=args.accumulate)
    trainer.fit(Classifier(), data)


if __name__ == "__main__":
    main()
