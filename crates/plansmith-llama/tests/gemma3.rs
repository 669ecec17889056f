//! Gemma 3: a tiny random Gemma3ForCausalLM written as GGUF the way llama.cpp's converter writes
//! it, against transformers' float64 logits (`scripts/gemma3_golden.py` made both files). The
//! sequence is longer than the sliding window, so the local layers' window and RoPE base count.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plansmith_llama::{argmax, GgufArch, GgufFile, LlamaModel};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gguf_golden/gemma3")
        .join(name)
}

fn golden() -> (Vec<u32>, Vec<Vec<f32>>) {
    let text = std::fs::read_to_string(fixture("golden.json")).unwrap();
    let g: Value = serde_json::from_str(&text).unwrap();
    let tokens = g["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect();
    (tokens, common::json_rows(&g["logits"]))
}

fn load() -> Arc<LlamaModel> {
    let mut f = GgufFile::open(fixture("tiny-f32.gguf")).unwrap();
    assert_eq!(f.architecture().unwrap(), GgufArch::Gemma3);
    Arc::new(LlamaModel::from_gguf(&mut f).unwrap())
}

fn worst_error(got: &[Vec<f32>], want: &[Vec<f32>]) -> f32 {
    common::worst_logit_error(got, want, "gemma3")
}

#[test]
fn tiny_gemma3_matches_transformers_logits() {
    let model = load();
    let cfg = model.config();
    assert_eq!(cfg.gemma.sliding_window, Some(8));
    assert_eq!(
        (0..6).map(|l| cfg.layer_window(l)).collect::<Vec<_>>(),
        [Some(8), Some(8), Some(8), Some(8), Some(8), None]
    );
    let (tokens, want) = golden();
    assert!(tokens.len() > 8, "the sequence must outrun the window");
    let got = model.session().prefill_all_logits(&tokens).unwrap();
    let worst = worst_error(&got, &want);
    assert!(worst <= 1e-4, "worst relative logit error {worst:e}");
    eprintln!("gemma3 f32: worst relative logit error {worst:.1e}");
}

#[test]
fn gemma3_decoding_token_by_token_equals_the_prefill() {
    // The window is applied over the KV cache too: one token at a time, and a prefill split in
    // the middle of a window, give the logits of the whole prefill.
    let model = load();
    let (tokens, want) = golden();
    let mut s = model.session();
    let mut got = s.prefill_all_logits(&tokens[..13]).unwrap();
    for &t in &tokens[13..] {
        got.push(s.step(t).unwrap());
    }
    let worst = worst_error(&got, &want);
    assert!(worst <= 1e-4, "worst relative logit error {worst:e}");
}

#[test]
fn gemma3_is_refused_where_only_the_llama_block_is_handled() {
    let model = load();
    let lora = plansmith_llama::LoraConfig::default();
    let Err(err) = plansmith_llama::LoraTrainer::new(&model, lora, 1e-3, 1) else {
        panic!("the autograd trainer accepted a gemma3 model");
    };
    assert!(err.to_string().contains("gemma3"), "{err}");
}

/// The real Gemma-3-270M (`scripts/assets.sh gemma3`; Q8_0 embedding, Q5_0 / Q4_K / Q6_K / Q8_0
/// matrices, a 262k SentencePiece vocabulary) against llama.cpp's answers, recorded by
/// `scripts/gemma3_llama_cpp_golden.py`.
mod real {
    use super::*;
    use plansmith_llama::ModelBundle;

    fn bundle() -> ModelBundle {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/gemma3.gguf");
        assert!(
            p.exists(),
            "{} is missing: run scripts/assets.sh gemma3 first",
            p.display()
        );
        ModelBundle::load(&p).expect("load gemma3.gguf")
    }

    fn llama_cpp() -> Value {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemma3_llama_cpp.json"),
        )
        .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn ids(v: &Value) -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    }

    #[test]
    fn gemma3_270m_tokenizes_and_predicts_like_llama_cpp() {
        let b = bundle();
        let golden = llama_cpp();
        let tok = &b.tokenizer;
        for case in golden["tokenize"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let want = ids(&case["ids"]);
            assert_eq!(tok.encode(text, false, true), want, "tokens of {text:?}");
            // Decoding gives the text back (the corpus has no text the vocabulary cannot spell).
            assert_eq!(tok.decode(&want, false).unwrap(), text);
        }
        let cases = golden["next_token"].as_array().unwrap();
        assert!(cases.len() >= 100, "{} prompts", cases.len());
        let mut differ = Vec::new();
        for case in cases {
            let text = case["text"].as_str().unwrap();
            let want = ids(&case["ids"]);
            assert_eq!(
                tok.encode(text, true, true),
                want,
                "prompt tokens of {text:?}"
            );
            let logits = b.model.session().prefill(&want).unwrap();
            let top1 = case["top1"].as_u64().unwrap() as u32;
            if argmax(&logits) != top1 {
                differ.push((
                    text.chars().take(50).collect::<String>(),
                    top1,
                    argmax(&logits),
                ));
            }
        }
        // llama.cpp's margin is over 1.0 on each of these: far outside both runtimes' spread.
        assert!(
            differ.is_empty(),
            "top-1 differs from llama.cpp: {differ:?}"
        );
    }

    #[test]
    fn gemma3_prompts_use_gemmas_turns_and_stop_at_end_of_turn() {
        let b = bundle();
        let tools = serde_json::json!([{"name": "open", "parameters": {}}]);
        let p = b
            .template
            .tools_prompt(None, &tools, "open safari")
            .unwrap();
        assert!(p.full.starts_with("<start_of_turn>user\n"), "{}", p.full);
        assert!(p
            .full
            .ends_with("open safari<end_of_turn>\n<start_of_turn>model\n"));
        let t = p.tokenize(&b.tokenizer);
        assert_eq!(t.tokens[0], b.tokenizer.bos.unwrap(), "BOS first");
        assert_eq!(
            t.tokens[1],
            b.tokenizer.special_id("<start_of_turn>").unwrap()
        );
        assert!(t.prefix_len > 10 && t.prefix_len < t.tokens.len());
        let end = b.tokenizer.special_id("<end_of_turn>").unwrap();
        assert!(b.tokenizer.stop_ids().contains(&end));
    }
}
