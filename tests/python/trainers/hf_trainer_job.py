"""A Hugging Face Trainer run with nothing of gputriage in it: a small BERT built
from its config (no hub download) trained on random tokens, on the CPU.

    hf_trainer_job.py OUTPUT_DIR [--steps N]
"""
import argparse

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n, seq_len, vocab):
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=generator)
        self.labels = torch.randint(0, 2, (n,), generator=generator)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.labels[i]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=64, num_labels=2)
    model = BertForSequenceClassification(config)
    training = TrainingArguments(output_dir=args.output_dir, per_device_train_batch_size=16, max_steps=args.steps,
                                 gradient_accumulation_steps=1, learning_rate=1e-4, logging_steps=10, report_to=[],
                                 save_strategy="no", use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
                                 seed=0)
    Trainer(model=model, args=training, train_dataset=RandomTokens(16 * args.steps, 32, 1000)).train()


if __name__ == "__main__":
    main()
