//! Dump token ids or next-token logits as JSON (for scripts/llama_crosscheck.py).
//!
//! `llama_dump tokenize <gguf> <texts.json> <out.json>`: `[[ids...], ...]`
//! `llama_dump logits <gguf> <prompts.json> <out.json>`: `[{"tokens": [...], "logits": [...]}, ...]`
//! (prompts tokenized with special-token parsing, no BOS unless the model asks for one).
//! With `PLANSMITH_DUMP_F32=1`, logits come from the model dequantized to f32 (no activation
//! quantization), to tell quantization error from a wrong forward.

use plansmith_llama::{GgufBundle, GgufFile, Tokenizer};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        return Err("usage: llama_dump tokenize|logits <gguf> <in.json> <out.json>".into());
    }
    let texts: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&args[3])?)?;
    let out = match args[1].as_str() {
        "tokenize" => {
            let g = GgufFile::open(&args[2])?;
            let tok = Tokenizer::from_gguf(&g)?;
            let ids: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t, false, true)).collect();
            serde_json::to_string(&ids)?
        }
        "logits" => {
            let b = GgufBundle::load(&args[2])?;
            let model = if std::env::var("PLANSMITH_DUMP_F32").is_ok_and(|v| v == "1") {
                std::sync::Arc::new(b.model.dequantized()?)
            } else {
                b.model.clone()
            };
            let mut rows = Vec::new();
            for t in &texts {
                let ids = b.tokenizer.encode(t, true, true);
                let mut s = model.session();
                let logits = s.prefill(&ids)?;
                rows.push(serde_json::json!({"tokens": ids, "logits": logits}));
            }
            serde_json::to_string(&rows)?
        }
        other => return Err(format!("unknown command `{other}`").into()),
    };
    std::fs::write(&args[4], out)?;
    Ok(())
}
