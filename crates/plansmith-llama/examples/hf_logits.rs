//! Logits and token ids as JSON, for `scripts/hf_crosscheck.py`.
//!
//! `hf_logits logits <model> <requests.json>`: `<model>` is a `.gguf` file or a Hugging Face
//! directory; requests are `[{"ids": [..]} | {"text": ".."}, ...]` (text encoded without BOS,
//! special tokens parsed). Prints `[{"ids": [..], "logits": [[..] per position]}, ...]`.
//!
//! `hf_logits export <model> <out_dir>`: write the model as a Hugging Face directory
//! (dequantized f32 weights, tokenizer.json, config.json).
//!
//! `hf_logits dense-logits <model> <requests.json>`: like `logits`, with every weight
//! dequantized to f32 first.

use std::sync::Arc;

use plansmith_llama::ModelBundle;
use serde_json::{json, Value};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn logits(
    b: &ModelBundle,
    model: &Arc<plansmith_llama::LlamaModel>,
    reqs: &[Value],
) -> Result<Value, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let ids: Vec<u32> = if let Some(t) = r.get("text").and_then(Value::as_str) {
            b.tokenizer.encode(t, false, true)
        } else if let Some(a) = r.get("ids").and_then(Value::as_array) {
            a.iter()
                .map(|x| x.as_u64().map(|v| v as u32).ok_or("ids must be integers"))
                .collect::<Result<_, _>>()?
        } else {
            return Err(format!("request {i}: needs `ids` or `text`").into());
        };
        let rows = if ids.is_empty() {
            Vec::new()
        } else {
            model.session().prefill_all_logits(&ids)?
        };
        out.push(json!({"ids": ids, "logits": rows}));
    }
    Ok(Value::Array(out))
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        return Err(
            "usage: hf_logits logits|dense-logits|export <model> <requests.json|out_dir>".into(),
        );
    }
    let b = ModelBundle::load(&args[2])?;
    match args[1].as_str() {
        "logits" | "dense-logits" => {
            let reqs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&args[3])?)?;
            let model = if args[1] == "dense-logits" {
                Arc::new(b.model.dequantized()?)
            } else {
                b.model.clone()
            };
            println!("{}", serde_json::to_string(&logits(&b, &model, &reqs)?)?);
        }
        "export" => b.save_hf(&args[3])?,
        other => return Err(format!("unknown command `{other}`").into()),
    }
    Ok(())
}
