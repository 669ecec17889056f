"""LoRA SFT of a pretrained planner with TRL + PEFT (on GPUs, or CPU for a smoke test); the
adapter it saves loads in plansmith with `--gguf BASE --lora OUT`.

    plansmith data export --format trl-planner --data traces.jsonl --tools tools.json --out train.jsonl
    python scripts/gpu/trl_lora.py --model HuggingFaceTB/SmolLM2-135M-Instruct --data train.jsonl --out adapter
    plansmith plan --gguf smollm2.gguf --lora adapter --tools tools.json "turn on dark mode"

The records are TRL prompt-completion pairs in the prompt plansmith's pretrained planner reads
(the tools in its system message, a JSON array of calls as the reply), so the loss falls on the
reply only, as in `plansmith train --base`. Needs: torch, transformers (>= 5), trl (>= 1.0), peft,
datasets. Not part of the test suite (docs/guide/training-gpu.md says how it was checked).
"""

import argparse

import torch
from datasets import load_dataset
from peft import LoraConfig
from trl import SFTConfig, SFTTrainer

# The modules plansmith's adapter loader knows (crates/plansmith-llama/src/lora.rs).
ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLP = ["gate_proj", "up_proj", "down_proj"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="Hugging Face id or directory of the base model")
    p.add_argument("--data", required=True, help="plansmith data export --format trl-planner output")
    p.add_argument("--out", required=True, help="where the PEFT adapter is saved")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--mlp", action="store_true", help="adapt gate/up/down too, not only attention")
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--max-steps", type=int, default=-1, help="stop after this many steps (smoke tests)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    data = load_dataset("json", data_files=a.data, split="train")
    lora = LoraConfig(
        r=a.rank,
        lora_alpha=a.alpha,
        lora_dropout=a.dropout,
        target_modules=ATTENTION + (MLP if a.mlp else []),
        bias="none",
        task_type="CAUSAL_LM",
    )
    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    config = SFTConfig(
        output_dir=f"{a.out}/checkpoints",
        num_train_epochs=a.epochs,
        max_steps=a.max_steps,
        per_device_train_batch_size=a.batch,
        learning_rate=a.lr,
        lr_scheduler_type="cosine",
        warmup_steps=0.05,  # a fraction of the run (TRL >= 1 reads a float below 1 so)
        max_grad_norm=1.0,
        bf16=bf16,
        completion_only_loss=True,
        max_length=a.max_length,
        logging_steps=10,
        save_strategy="epoch",
        seed=a.seed,
        report_to=[],
    )
    trainer = SFTTrainer(model=a.model, train_dataset=data, args=config, peft_config=lora)
    trainer.train()
    # adapter_config.json + adapter_model.safetensors: the PEFT layout plansmith reads.
    trainer.model.save_pretrained(a.out)
    print(f"adapter saved in {a.out}")


if __name__ == "__main__":
    main()
