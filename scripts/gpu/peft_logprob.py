"""PEFT's own mean log-probability of each trl-planner record's reply (prompt through the
model's chat template, reply tokens plus the end-of-turn token), to hold beside
`plansmith score --gguf BASE --lora ADAPTER`: the same number means plansmith loaded the
adapter as PEFT applies it.

    python scripts/gpu/peft_logprob.py --model HF_DIR --adapter ADAPTER --data records.jsonl [-n 4]
"""

import argparse
import json

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--adapter")
    p.add_argument("--data", required=True)
    p.add_argument("-n", type=int, default=4)
    a = p.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32)
    if a.adapter:
        model = PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    with open(a.data) as f:
        records = [json.loads(line) for line in f][: a.n]
    for r in records:
        prompt = tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
        reply = r["completion"][0]["content"]
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tok(reply, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
        ids = torch.tensor([p_ids + c_ids])
        with torch.no_grad():
            logits = model(ids).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        total = sum(logp[len(p_ids) + i - 1, t].item() for i, t in enumerate(c_ids))
        print(json.dumps({"request": r["prompt"][1]["content"], "reply": reply, "mean_logprob": total / len(c_ids)}))


if __name__ == "__main__":
    main()
