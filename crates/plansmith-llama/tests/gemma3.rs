//! Gemma 3: a tiny random Gemma3ForCausalLM written as GGUF the way llama.cpp's converter writes
//! it, against transformers' float64 logits (`scripts/gemma3_golden.py` saved the tensors, laid
//! out as the converter lays them out, and the logits; the GGUF is written here). The sequence is
//! longer than the sliding window, so the local layers' window and RoPE base count.

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

/// Write the tiny model's GGUF (F32; the converter's metadata keys for Gemma 3) and its path.
fn write_tiny_gguf() -> PathBuf {
    use candle_core::quantized::gguf_file::{self, Value as Meta};
    use candle_core::quantized::{GgmlDType, QTensor};
    let tensors =
        candle_core::safetensors::load(fixture("tiny-f32.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let q: Vec<(&str, QTensor)> = names
        .iter()
        .map(|n| {
            (
                n.as_str(),
                QTensor::quantize(&tensors[*n], GgmlDType::F32).unwrap(),
            )
        })
        .collect();
    let k = |s: &str| format!("gemma3.{s}");
    let md: Vec<(String, Meta)> = vec![
        ("general.architecture".into(), Meta::String("gemma3".into())),
        (k("block_count"), Meta::U32(6)),
        (k("context_length"), Meta::U32(128)),
        (k("embedding_length"), Meta::U32(32)),
        (k("feed_forward_length"), Meta::U32(48)),
        (k("attention.head_count"), Meta::U32(2)),
        (k("attention.head_count_kv"), Meta::U32(1)),
        (k("attention.key_length"), Meta::U32(24)),
        (k("attention.value_length"), Meta::U32(24)),
        (k("rope.freq_base"), Meta::F32(1_000_000.0)),
        (k("attention.layer_norm_rms_epsilon"), Meta::F32(1e-6)),
        (k("attention.sliding_window"), Meta::U32(8)),
    ];
    let md_ref: Vec<(&str, &Meta)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_ref: Vec<(&str, &QTensor)> = q.iter().map(|(k, v)| (*k, v)).collect();
    let dir = common::temp_dir("gemma3");
    let out = dir.join("tiny-f32.gguf");
    gguf_file::write(&mut std::fs::File::create(&out).unwrap(), &md_ref, &t_ref).unwrap();
    out
}

fn load() -> Arc<LlamaModel> {
    // Written once: the tests run in parallel threads and must not rewrite a file being read.
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let mut f = GgufFile::open(PATH.get_or_init(write_tiny_gguf)).unwrap();
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

/// The same tiny model as a Hugging Face directory (`Gemma3ForCausalLM`: HF tensor names,
/// norms stored as `w` and scaled by `1 + w`, `layer_types` naming the sliding layers) loads
/// to transformers' logits too.
#[test]
fn tiny_gemma3_hf_dir_matches_transformers_logits() {
    let gguf_named =
        candle_core::safetensors::load(fixture("tiny-f32.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let mut hf = std::collections::HashMap::new();
    let mut put = |to: String, from: &str, norm: bool| {
        let t = &gguf_named[from];
        hf.insert(to, if norm { (t - 1.0).unwrap() } else { t.clone() });
    };
    put(
        "model.embed_tokens.weight".into(),
        "token_embd.weight",
        false,
    );
    put("model.norm.weight".into(), "output_norm.weight", true);
    for i in 0..6 {
        let (h, g) = (format!("model.layers.{i}."), format!("blk.{i}."));
        for (to, from, norm) in [
            ("self_attn.q_proj.weight", "attn_q.weight", false),
            ("self_attn.k_proj.weight", "attn_k.weight", false),
            ("self_attn.v_proj.weight", "attn_v.weight", false),
            ("self_attn.o_proj.weight", "attn_output.weight", false),
            ("self_attn.q_norm.weight", "attn_q_norm.weight", true),
            ("self_attn.k_norm.weight", "attn_k_norm.weight", true),
            ("mlp.gate_proj.weight", "ffn_gate.weight", false),
            ("mlp.up_proj.weight", "ffn_up.weight", false),
            ("mlp.down_proj.weight", "ffn_down.weight", false),
            ("input_layernorm.weight", "attn_norm.weight", true),
            (
                "post_attention_layernorm.weight",
                "post_attention_norm.weight",
                true,
            ),
            ("pre_feedforward_layernorm.weight", "ffn_norm.weight", true),
            (
                "post_feedforward_layernorm.weight",
                "post_ffw_norm.weight",
                true,
            ),
        ] {
            put(format!("{h}{to}"), &format!("{g}{from}"), norm);
        }
    }
    let dir = common::temp_dir("gemma3-hf");
    candle_core::safetensors::save(&hf, dir.join("model.safetensors")).unwrap();
    let mut config = serde_json::json!({
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "vocab_size": 48, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 6,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 24,
        "query_pre_attn_scalar": 24, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
        "sliding_window": 8, "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0,
        "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": null,
        "attn_logit_softcapping": null, "rope_scaling": null,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                        "sliding_attention", "sliding_attention", "full_attention"]
    });
    let write = |c: &serde_json::Value| {
        std::fs::write(dir.join("config.json"), c.to_string()).unwrap();
        plansmith_llama::hf::load_hf_model(&dir)
    };
    let (model, hc) = write(&config).unwrap();
    assert_eq!(hc.arch, plansmith_llama::HfArch::Gemma3);
    let cfg = model.config();
    assert!(cfg.tie_embeddings, "Gemma ties its head by default");
    assert_eq!(
        (0..6).map(|l| cfg.layer_window(l)).collect::<Vec<_>>(),
        [Some(8), Some(8), Some(8), Some(8), Some(8), None]
    );
    assert_eq!(cfg.layer_rope_theta(0), 10_000.0);
    let (tokens, want) = golden();
    let got = Arc::new(model)
        .session()
        .prefill_all_logits(&tokens)
        .unwrap();
    let worst = worst_error(&got, &want);
    assert!(worst <= 1e-4, "worst relative logit error {worst:e}");
    // With a SentencePiece-style tokenizer.json (48 pieces) the directory loads as a bundle;
    // with no chat template it is prompted in Gemma's turns.
    let mut vocab = serde_json::Map::new();
    let pieces = [
        "<pad>",
        "<eos>",
        "<bos>",
        "<unk>",
        "<start_of_turn>",
        "<end_of_turn>",
        "\n",
    ];
    let letters: Vec<String> = ('a'..='z').map(String::from).collect();
    let merged = [
        "\u{2581}",
        "\u{2581}h",
        "hi",
        "\u{2581}hi",
        "us",
        "er",
        "user",
    ];
    for p in pieces
        .iter()
        .copied()
        .chain(letters.iter().map(String::as_str))
        .chain(merged)
    {
        let id = vocab.len();
        vocab.entry(p.to_string()).or_insert(serde_json::json!(id));
    }
    let merges = [
        ["\u{2581}", "h"],
        ["h", "i"],
        ["\u{2581}", "hi"],
        ["u", "s"],
        ["e", "r"],
    ];
    let special = |id: usize, content: &str| serde_json::json!({"id": id, "content": content, "special": true});
    let tok = serde_json::json!({
        "added_tokens": [special(0, "<pad>"), special(1, "<eos>"), special(2, "<bos>"),
                         special(4, "<start_of_turn>"), special(5, "<end_of_turn>")],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"},
        "pre_tokenizer": null,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}]},
        "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
                  "vocab": vocab, "merges": merges}
    });
    assert!(vocab_len(&tok) <= 48);
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let b = plansmith_llama::ModelBundle::load(&dir).unwrap();
    let prompt = b
        .template
        .render(
            &[plansmith_llama::ChatMessage::new("user", "hi")],
            None,
            true,
        )
        .unwrap();
    assert!(
        prompt.contains("<start_of_turn>user\nhi<end_of_turn>"),
        "{prompt:?}"
    );
    let ids = b.tokenizer.encode(&prompt, true, true);
    assert_eq!(ids[..2], [2, 4], "<bos> then <start_of_turn>");
    assert_eq!(
        b.tokenizer.encode(" hi", false, false),
        [vocab_id(&tok, "\u{2581}hi")]
    );
    let logits = b.model.session().prefill(&ids).unwrap();
    assert_eq!(logits.len(), 48);
    // Exported again, the directory holds the same tensors under the same names (norms as `w`).
    let out = common::temp_dir("gemma3-hf-export");
    b.save_hf(&out).unwrap();
    let exported =
        candle_core::safetensors::load(out.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let mut names: Vec<&String> = exported.keys().collect();
    names.sort();
    let mut want_names: Vec<&String> = hf.keys().collect();
    want_names.sort();
    assert_eq!(names, want_names);
    for (name, t) in &exported {
        let diff = (t - &hf[name])
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff <= 1e-6, "{name}: {diff}");
    }
    let again = plansmith_llama::ModelBundle::load(&out).unwrap();
    let worst = worst_error(&[again.model.session().prefill(&ids).unwrap()], &[logits]);
    assert!(worst <= 1e-5, "exported and loaded again: {worst:e}");
    assert_eq!(
        again.tokenizer.encode(&prompt, true, true),
        ids,
        "the written tokenizer.json"
    );
    std::fs::remove_dir_all(&out).ok();
    // What the forward does not compute is refused, naming the key.
    for (key, value) in [
        ("query_pre_attn_scalar", serde_json::json!(16)),
        ("final_logit_softcapping", serde_json::json!(30.0)),
        ("hidden_activation", serde_json::json!("silu")),
        (
            "layer_types",
            serde_json::json!([
                "full_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention"
            ]),
        ),
    ] {
        let old = config[key].clone();
        config[key] = value;
        let Err(err) = write(&config) else {
            panic!("{key} = {} was accepted", config[key]);
        };
        assert!(
            err.to_string().contains(key.split('_').next().unwrap()),
            "{key}: {err}"
        );
        config[key] = old;
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn vocab_len(tok: &Value) -> usize {
    tok["model"]["vocab"].as_object().unwrap().len()
}

fn vocab_id(tok: &Value, piece: &str) -> u32 {
    tok["model"]["vocab"][piece].as_u64().unwrap() as u32
}

/// LoRA trains on Gemma 3 (its gradients are checked in `lora_engine.rs`), and the model exports
/// to a Hugging Face directory that loads back to the same logits.
#[test]
fn gemma3_trains_a_lora_step_and_exports_to_a_hugging_face_directory() {
    let model = load();
    let mut e = plansmith_llama::LoraEngine::new(
        &model,
        plansmith_llama::EngineConfig {
            rank: 2,
            alpha: 4.0,
            total_steps: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let (tokens, _) = golden();
    let ex = plansmith_llama::Example {
        tokens: tokens[..30].to_vec(),
        prompt_len: 20,
    };
    let stats = e.step(std::slice::from_ref(&ex)).unwrap();
    assert!(stats.loss.is_finite() && stats.loss > 0.0, "{stats:?}");
    let bundle = plansmith_llama::ModelBundle {
        model: model.clone(),
        tokenizer: std::sync::Arc::new(
            plansmith_llama::Tokenizer::sentencepiece(
                (0..48).map(|i| format!("t{i}")).collect(),
                vec![plansmith_llama::TokenKind::Normal; 48],
                vec![0.0; 48],
                false,
            )
            .unwrap(),
        ),
        template: plansmith_llama::ChatTemplate::gemma(),
    };
    let dir = common::temp_dir("gemma3-export");
    bundle.save_hf(&dir).unwrap();
    let back = plansmith_llama::ModelBundle::load(&dir).unwrap();
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["architectures"][0], "Gemma3ForCausalLM");
    assert_eq!(config["sliding_window"], 8);
    let cfg = back.model.config();
    assert_eq!(
        (0..6).map(|l| cfg.layer_window(l)).collect::<Vec<_>>(),
        (0..6)
            .map(|l| model.config().layer_window(l))
            .collect::<Vec<_>>()
    );
    let want = model.session().prefill_all_logits(&tokens).unwrap();
    let got = back.model.session().prefill_all_logits(&tokens).unwrap();
    let worst = worst_error(&got, &want);
    assert!(worst <= 1e-5, "worst relative logit error {worst:e}");
    std::fs::remove_dir_all(&dir).ok();
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
        // The 262k-piece vocabulary written as tokenizer.json (what `export` writes) reads back
        // to the same ids.
        let written = plansmith_llama::Tokenizer::from_hf_json(&tok.to_hf_json().unwrap()).unwrap();
        for case in golden["tokenize"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            assert_eq!(
                written.encode(text, false, true),
                ids(&case["ids"]),
                "tokens of {text:?} through tokenizer.json"
            );
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
