"""A real PyTorch training loop (CPU) whose dataset is deliberately slow: each
sample costs --sample-ms of waiting (a stand-in for reading and decoding).

    torch_training_loop.py --workers N [--markers watch|step|none] [--steps S]

--markers watch: `for batch in gputriage.watch(loader)`, each iteration a step;
--markers step:  watch() plus an explicit `with gputriage.step(samples=...)` and
                 forward/backward/optimizer phases;
--markers none:  no gputriage import at all (zero-code mode instruments it).
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, n, features, sample_ms, decode_ms=0.0):
        self.n, self.features, self.sample_s, self.decode_s = n, features, sample_ms / 1e3, decode_ms / 1e3
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, features, generator=generator)
        self.y = torch.randint(0, 10, (n,), generator=generator)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sample_s > 0:
            time.sleep(self.sample_s)
        if self.decode_s > 0:  # CPU work: it competes for the cores as decoding does
            end = time.perf_counter() + self.decode_s
            acc = 0
            while time.perf_counter() < end:
                acc += 1
        return self.x[i], self.y[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--markers", choices=["watch", "step", "none"], default="watch")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--sample-ms", type=float, default=0.25)
    parser.add_argument("--decode-ms", type=float, default=0.0)
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one core computes; the loader's workers get the rest
    features = 64
    model = nn.Sequential(nn.Linear(features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(SlowDataset(args.steps * args.batch, features, args.sample_ms, args.decode_ms), batch_size=args.batch,
                        num_workers=args.workers, shuffle=False)

    batches = loader
    if args.markers != "none":
        import gputriage
        gputriage.config(model="mlp", hidden=args.hidden)  # the user's own settings, kept with the run
        batches = gputriage.watch(loader)
    for x, y in batches:
        if args.markers == "step":
            with gputriage.step(samples=x.shape[0]):
                with gputriage.phase("forward"):
                    loss = loss_fn(model(x), y)
                with gputriage.phase("backward"):
                    optimizer.zero_grad()
                    loss.backward()
                with gputriage.phase("optimizer"):
                    optimizer.step()
        else:
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(f"trained {args.steps} steps, final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
