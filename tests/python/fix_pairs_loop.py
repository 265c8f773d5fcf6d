"""A CPU training loop with one fix on or off, and its own timers: the runs of the
CPU before/after pairs (tests/data/gain_pairs.tsv, tests/gains/record_cpu_fix_pairs.sh)
and of RecomputePair (tests/python/test_step_phases.py).

    fix_pairs_loop.py --timings out.json [--checkpoint] [--optimizer sgd|adam|adam-foreach]
                      [--bf16] [--model mlp|conv] [--channels-last] [--blocks 6] [--steps 40]

--model mlp: --blocks residual MLP blocks (--hidden wide), each through
torch.utils.checkpoint.checkpoint with --checkpoint (backward runs its forward
again), plainly without. --model conv: a small CNN on 64x64 images, its weights and
inputs in channels_last with --channels-last. --bf16: the forward under
torch.autocast("cpu", bfloat16). --optimizer adam: Adam's per-tensor loop
(foreach=False); adam-foreach: its multi-tensor form. The loop times its checkpoint
calls itself (checkpoint_s: their total over the run) and each whole step; it knows
nothing of gputriage.
"""
import argparse
import json
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def mlp_blocks(args):
    return nn.ModuleList(nn.Sequential(nn.Linear(args.hidden, 2 * args.hidden), nn.GELU(),
                                       nn.Linear(2 * args.hidden, args.hidden)) for _ in range(args.blocks))


def conv_net():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def make_optimizer(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    return torch.optim.Adam(params, lr=1e-3, foreach=(kind == "adam-foreach"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timings", required=True)
    parser.add_argument("--model", choices=["mlp", "conv"], default="mlp")
    parser.add_argument("--checkpoint", action="store_true")
    parser.add_argument("--optimizer", choices=["sgd", "adam", "adam-foreach"], default="sgd")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    if args.checkpoint and args.model != "mlp":
        parser.error("--checkpoint is for --model mlp")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = args.steps * args.batch
    if args.model == "mlp":
        blocks, head = mlp_blocks(args), nn.Linear(args.hidden, 10)
        params = list(blocks.parameters()) + list(head.parameters())
        inputs = torch.randn(n, args.hidden)
    else:
        net = conv_net()
        if args.channels_last:
            net = net.to(memory_format=torch.channels_last)
        params = list(net.parameters())
        inputs = torch.randn(n, 3, 64, 64)
    optimizer = make_optimizer(args.optimizer, params)
    data = torch.utils.data.TensorDataset(inputs, torch.randint(0, 10, (n,)))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch)
    checkpoint_s, step_s = 0.0, []
    for x, y in loader:
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            if args.model == "mlp":
                h = x.requires_grad_()  # reentrant checkpointing needs an input that requires grad
                for block in blocks:
                    if args.checkpoint:
                        t = time.perf_counter()
                        h = h + checkpoint(block, h)
                        checkpoint_s += time.perf_counter() - t
                    else:
                        h = h + block(h)
                logits = head(h)
            else:
                logits = net(x.contiguous(memory_format=torch.channels_last) if args.channels_last else x)
        loss = nn.functional.cross_entropy(logits.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step_s.append(time.perf_counter() - started)
    with open(args.timings, "w") as f:
        json.dump({"checkpoint_s": checkpoint_s, "step_s": step_s, "blocks": args.blocks}, f)


if __name__ == "__main__":
    main()
