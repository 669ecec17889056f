mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use plansmith_llama::{LlamaError, LlamaModel, ModelBundle, Tokenizer};
use serde_json::json;

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

const CORPUS: &[&str] = &[
    "Hello world",
    "set a timer for 5 minutes and call mom at 18:30",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand CRLF\r\nline",
    "non-breaking\u{a0}space and\u{2003}em space",
    "Ünïcödé façade naïve café — “quotes” …",
    "日本語のテキストと中文混合 한국어",
    "emoji 👩‍👩‍👧‍👦 family, flags 🇫🇷🇯🇵, 🤖!",
    "numbers 1234567890 3.14159 -42 1e-5 0x1F",
    "<|im_start|>user\nturn on the lights<|im_end|>\n<|im_start|>assistant\n",
    "fn main() { println!(\"{}\", x.len()); } // code",
    "{\"name\": \"set\", \"arguments\": {\"device\": \"lamp\", \"on\": true}}",
    "don't can't I'M we'll they've she'd IT'S",
    "a\u{300}\u{301} combining and zero\u{200b}width",
    "",
    "   ",
    "\n",
];

#[test]
fn smollm2_exported_to_hf_dir_reloads_with_identical_tokens_and_logits() {
    let b = common::bundle();
    let dir = common::temp_dir("hf-export");
    b.save_hf(&dir).unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        assert!(dir.join(f).is_file(), "{f} not written");
    }
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["architectures"][0], "LlamaForCausalLM");
    assert_eq!(cfg["num_hidden_layers"], 30);
    assert_eq!(cfg["tie_word_embeddings"], true);

    let h = ModelBundle::load(&dir).unwrap();
    assert_eq!(h.model.config(), b.model.config());
    assert_ne!(h.model.fingerprint(), b.model.fingerprint());
    assert_eq!(h.template.source(), b.template.source());
    assert_eq!(h.stop_ids(), b.stop_ids());
    assert_eq!(h.tokenizer.vocab_size(), b.tokenizer.vocab_size());
    assert_eq!(h.tokenizer.all_token_bytes(), b.tokenizer.all_token_bytes());
    let mut n_tokens = 0;
    for text in CORPUS {
        for (add, parse) in [(true, true), (false, false)] {
            let want = b.tokenizer.encode(text, add, parse);
            let got = h.tokenizer.encode(text, add, parse);
            assert_eq!(
                got, want,
                "{text:?} (add_special {add}, parse_special {parse})"
            );
            n_tokens += want.len();
        }
    }
    assert!(n_tokens > 300, "corpus too small: {n_tokens} tokens");

    // Logits: the reloaded f32 checkpoint against the GGUF model with dense dequantized weights.
    let dense = Arc::new(b.model.dequantized().unwrap());
    assert_ne!(dense.fingerprint(), b.model.fingerprint());
    let prompt = b
        .template
        .render(
            &[plansmith_llama::ChatMessage::new(
                "user",
                "Set a timer for 5 minutes.",
            )],
            None,
            true,
        )
        .unwrap();
    let ids = b.tokenizer.encode(&prompt, true, true);
    let want = dense.session().prefill_all_logits(&ids).unwrap();
    let got = h.model.session().prefill_all_logits(&ids).unwrap();
    let mut worst = 0f32;
    for (w, g) in want.iter().zip(&got) {
        worst = worst.max(max_abs_diff(w, g));
    }
    eprintln!(
        "HF reload vs dequantized GGUF: {} positions, max abs diff {worst}",
        ids.len()
    );
    assert!(
        worst <= 1e-3,
        "HF reload vs dequantized GGUF: max abs diff {worst}"
    );
    // And the quantized model is measurably different (the comparison is not vacuous).
    let q = b.model.session().prefill(&ids).unwrap();
    assert!(max_abs_diff(&q, want.last().unwrap()) > 1e-2);
    std::fs::remove_dir_all(&dir).ok();
}

/// GPT-2's byte -> char table, written independently of the crate.
fn byte_chars() -> Vec<char> {
    let mut out = Vec::with_capacity(256);
    let mut extra = 0u32;
    for b in 0..256u32 {
        let keep = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        out.push(if keep {
            char::from_u32(b).unwrap()
        } else {
            extra += 1;
            char::from_u32(255 + extra).unwrap()
        });
    }
    out
}

/// A small byte-level BPE `tokenizer.json` with the given split regex.
fn tiny_tokenizer_json(pattern: &str) -> serde_json::Value {
    let bc = byte_chars();
    let mut vocab = serde_json::Map::new();
    for (i, c) in bc.iter().enumerate() {
        vocab.insert(c.to_string(), json!(i));
    }
    let sp = bc[b' ' as usize];
    let merges = [
        (format!("{sp}"), "t".to_string()),
        ("h".into(), "e".into()),
        (format!("{sp}t"), "he".into()),
        ("l".into(), "l".into()),
        ("o".into(), "n".into()),
        (format!("{sp}"), "a".into()),
    ];
    let mut merge_json = Vec::new();
    for (l, r) in &merges {
        let joined = format!("{l}{r}");
        let id = vocab.len();
        vocab.entry(joined).or_insert(json!(id));
        merge_json.push(json!([l, r]));
    }
    let n = vocab.len();
    json!({
        "version": "1.0",
        "added_tokens": [
            {"id": n, "content": "<|endoftext|>", "special": true},
            {"id": n + 1, "content": "<|im_start|>", "special": true},
            {"id": n + 2, "content": "<|im_end|>", "special": true}
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
        ]},
        "post_processor": null,
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": vocab,
                  "merges": merge_json}
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Arch {
    Llama,
    Qwen2,
    Qwen3,
}

/// Write a tiny random HF checkpoint; returns the tensors written.
fn write_tiny_hf(dir: &Path, arch: Arch, dtype: DType, seed: u64) -> HashMap<String, Tensor> {
    std::fs::create_dir_all(dir).unwrap();
    let (d, ff, nh, nkv, hd, layers) = (32usize, 48usize, 4usize, 2usize, 16usize, 2usize);
    let tok = tiny_tokenizer_json(if arch == Arch::Llama {
        plansmith_llama::tokenizer::LLAMA3_PATTERN
    } else {
        plansmith_llama::tokenizer::QWEN2_PATTERN
    });
    let vocab = 270 + 6; // 256 bytes + 6 merges + 3 specials, rounded up like real checkpoints
    let name = match arch {
        Arch::Llama => "LlamaForCausalLM",
        Arch::Qwen2 => "Qwen2ForCausalLM",
        Arch::Qwen3 => "Qwen3ForCausalLM",
    };
    let cfg = json!({
        "architectures": [name], "hidden_size": d, "intermediate_size": ff,
        "num_hidden_layers": layers, "num_attention_heads": nh, "num_key_value_heads": nkv,
        "head_dim": hd, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 128, "vocab_size": vocab,
        "tie_word_embeddings": arch != Arch::Llama, "hidden_act": "silu",
        "bos_token_id": 262, "eos_token_id": 264
    });
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        json!({"eos_token": "<|im_end|>", "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}).to_string(),
    )
    .unwrap();
    let dev = Device::Cpu;
    let mut k = seed;
    let mut rnd = |shape: &[usize], scale: f64| -> Tensor {
        k += 1;
        let n: usize = shape.iter().product();
        // Deterministic pseudo-random values (no RNG dependency).
        let v: Vec<f32> = (0..n)
            .map(|i| {
                let x = ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ k.wrapping_mul(0xD1B5_4A32_D192_ED03))
                .wrapping_mul(0xBF58_476D_1CE4_E5B9);
                (((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) as f32
            })
            .collect();
        (Tensor::from_vec(v, shape, &dev).unwrap() * scale).unwrap()
    };
    let mut t = HashMap::new();
    let s = 1.0 / (d as f64).sqrt() * 1.7;
    t.insert(
        "model.embed_tokens.weight".to_string(),
        rnd(&[vocab, d], 1.0),
    );
    for i in 0..layers {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        t.insert(p("input_layernorm.weight"), (rnd(&[d], 0.2) + 1.0).unwrap());
        t.insert(
            p("post_attention_layernorm.weight"),
            (rnd(&[d], 0.2) + 1.0).unwrap(),
        );
        t.insert(p("self_attn.q_proj.weight"), rnd(&[nh * hd, d], s));
        t.insert(p("self_attn.k_proj.weight"), rnd(&[nkv * hd, d], s));
        t.insert(p("self_attn.v_proj.weight"), rnd(&[nkv * hd, d], s));
        t.insert(p("self_attn.o_proj.weight"), rnd(&[d, nh * hd], s));
        t.insert(p("mlp.gate_proj.weight"), rnd(&[ff, d], s));
        t.insert(p("mlp.up_proj.weight"), rnd(&[ff, d], s));
        t.insert(p("mlp.down_proj.weight"), rnd(&[d, ff], s));
        if arch == Arch::Qwen2 {
            t.insert(p("self_attn.q_proj.bias"), rnd(&[nh * hd], 0.5));
            t.insert(p("self_attn.k_proj.bias"), rnd(&[nkv * hd], 0.5));
            t.insert(p("self_attn.v_proj.bias"), rnd(&[nkv * hd], 0.5));
        }
        if arch == Arch::Qwen3 {
            t.insert(
                p("self_attn.q_norm.weight"),
                (rnd(&[hd], 0.5) + 1.0).unwrap(),
            );
            t.insert(
                p("self_attn.k_norm.weight"),
                (rnd(&[hd], 0.5) + 1.0).unwrap(),
            );
        }
    }
    t.insert(
        "model.norm.weight".to_string(),
        (rnd(&[d], 0.2) + 1.0).unwrap(),
    );
    if arch == Arch::Llama {
        t.insert("lm_head.weight".to_string(), rnd(&[vocab, d], s));
    }
    let t: HashMap<String, Tensor> = t
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(dtype).unwrap()))
        .collect();
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
    t
}

fn cached_vs_full(model: &Arc<LlamaModel>, ids: &[u32]) -> (f32, Vec<Vec<f32>>) {
    let full = model.session().prefill_all_logits(ids).unwrap();
    let mut s = model.session();
    let mut worst = max_abs_diff(&s.prefill(&ids[..3]).unwrap(), &full[2]);
    for (i, &t) in ids.iter().enumerate().skip(3) {
        let l = s.step(t).unwrap();
        worst = worst.max(max_abs_diff(&l, &full[i]));
    }
    (worst, full)
}

#[test]
fn tiny_qwen2_qwen3_llama_dirs_load_and_cached_decode_matches_full_recompute() {
    let root = common::temp_dir("hf-tiny");
    let text = "<|im_start|>user\nthe 2 theorems, 'S on the ALL-caps\n\n  at 1234<|im_end|>";
    for (arch, dtype) in [
        (Arch::Qwen2, DType::BF16),
        (Arch::Qwen3, DType::F32),
        (Arch::Llama, DType::F16),
    ] {
        let dir = root.join(format!("{}", arch as u8));
        let tensors = write_tiny_hf(&dir, arch, dtype, 5);
        let b = ModelBundle::load(&dir).unwrap();
        assert_eq!(b.model.config().head_dim, 16);
        assert_eq!(b.model.config().tie_embeddings, arch != Arch::Llama);
        assert_eq!(b.tokenizer.eos, b.tokenizer.special_id("<|im_end|>"));
        let ids = b.tokenizer.encode(text, true, true);
        assert_eq!(ids[0], 263, "<|im_start|> is an added special token");
        assert_eq!(b.tokenizer.decode(&ids, false).unwrap(), text);
        // " the" is one token through the merges; Qwen2's regex isolates digits, Llama-3 groups 3.
        let the = b.tokenizer.encode(" the", false, false);
        assert_eq!(the.len(), 1, "{the:?}");
        let digits = b.tokenizer.encode("1234", false, false).len();
        assert_eq!(digits, 4);
        let (worst, full) = cached_vs_full(&b.model, &ids);
        assert!(
            worst <= 1e-4,
            "{}: cached vs full differ by {worst}",
            arch as u8
        );

        // The architecture-specific tensors are used: neutralising them changes the logits.
        let extra = match arch {
            Arch::Qwen2 => Some(("model.layers.0.self_attn.q_proj.bias", 0.0)),
            Arch::Qwen3 => Some(("model.layers.1.self_attn.k_norm.weight", 1.0)),
            Arch::Llama => None,
        };
        if let Some((name, value)) = extra {
            let mut t2 = tensors.clone();
            let old = &t2[name];
            let neutral = (old.zeros_like().unwrap() + value)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            t2.insert(name.to_string(), neutral);
            candle_core::safetensors::save(&t2, dir.join("model.safetensors")).unwrap();
            let b2 = ModelBundle::load(&dir).unwrap();
            let other = b2.model.session().prefill(&ids).unwrap();
            let d = max_abs_diff(&other, full.last().unwrap());
            assert!(d > 1e-3, "{name} has no effect ({d})");
        }
    }
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn sharded_checkpoint_loads_like_the_single_file() {
    let root = common::temp_dir("hf-shard");
    let one = root.join("one");
    let tensors = write_tiny_hf(&one, Arch::Qwen2, DType::F32, 9);
    let sharded = root.join("sharded");
    std::fs::create_dir_all(&sharded).unwrap();
    for f in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(one.join(f), sharded.join(f)).unwrap();
    }
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut shards = [HashMap::new(), HashMap::new()];
    let mut map = serde_json::Map::new();
    for (i, n) in names.iter().enumerate() {
        let file = format!("model-0000{}-of-00002.safetensors", i % 2 + 1);
        shards[i % 2].insert((*n).clone(), tensors[*n].clone());
        map.insert((*n).clone(), json!(file));
    }
    for (i, s) in shards.iter().enumerate() {
        let f = sharded.join(format!("model-0000{}-of-00002.safetensors", i + 1));
        candle_core::safetensors::save(s, f).unwrap();
    }
    std::fs::write(
        sharded.join("model.safetensors.index.json"),
        json!({"metadata": {}, "weight_map": map}).to_string(),
    )
    .unwrap();
    let a = ModelBundle::load(&one).unwrap();
    let b = ModelBundle::load(&sharded).unwrap();
    let ids = a.tokenizer.encode("hello there, the 42 ones", false, false);
    assert_eq!(
        a.model.session().prefill(&ids).unwrap(),
        b.model.session().prefill(&ids).unwrap()
    );
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn bad_hf_dirs_give_typed_errors_naming_what_and_where() {
    let root = common::temp_dir("hf-bad");
    let dir = root.join("m");
    let tensors = write_tiny_hf(&dir, Arch::Qwen3, DType::F32, 1);
    let st = dir.join("model.safetensors");

    // Unsupported architecture.
    let cfg_path = dir.join("config.json");
    let cfg_text = std::fs::read_to_string(&cfg_path).unwrap();
    std::fs::write(
        &cfg_path,
        cfg_text.replace("Qwen3ForCausalLM", "MistralForCausalLM"),
    )
    .unwrap();
    let err = ModelBundle::load(&dir).unwrap_err();
    assert!(matches!(err, LlamaError::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("MistralForCausalLM"), "{err}");
    std::fs::write(&cfg_path, &cfg_text).unwrap();

    // Missing tensor: names the tensor and the file.
    let mut t = tensors.clone();
    t.remove("model.layers.1.self_attn.q_norm.weight");
    candle_core::safetensors::save(&t, &st).unwrap();
    let err = ModelBundle::load(&dir).unwrap_err();
    assert!(matches!(err, LlamaError::MissingTensor { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("model.layers.1.self_attn.q_norm.weight") && msg.contains("model.safetensors"),
        "{msg}"
    );

    // Wrong shape.
    let mut t = tensors.clone();
    t.insert(
        "model.layers.0.mlp.up_proj.weight".into(),
        Tensor::zeros((47, 32), DType::F32, &Device::Cpu).unwrap(),
    );
    candle_core::safetensors::save(&t, &st).unwrap();
    let err = ModelBundle::load(&dir).unwrap_err();
    assert!(matches!(err, LlamaError::TensorShape { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("model.layers.0.mlp.up_proj.weight"),
        "{err}"
    );

    // Truncated file: names a tensor that is cut off and the file.
    candle_core::safetensors::save(&tensors, &st).unwrap();
    let bytes = std::fs::read(&st).unwrap();
    std::fs::write(&st, &bytes[..bytes.len() * 7 / 10]).unwrap();
    let err = ModelBundle::load(&dir).unwrap_err();
    assert!(matches!(err, LlamaError::SafetensorsTensor { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("truncated") && msg.contains("model.safetensors") && msg.contains("`model."),
        "{msg}"
    );
    // Cut inside the header.
    std::fs::write(&st, &bytes[..20]).unwrap();
    let err = ModelBundle::load(&dir).unwrap_err();
    assert!(matches!(err, LlamaError::Safetensors { .. }), "{err}");
    std::fs::write(&st, &bytes).unwrap();
    assert!(ModelBundle::load(&dir).is_ok());

    // Unsupported tokenizer parts are typed errors, never a silent fallback.
    let tok_path = dir.join("tokenizer.json");
    let mut tok: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tok_path).unwrap()).unwrap();
    tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = json!("\\w+|\\s+");
    std::fs::write(&tok_path, tok.to_string()).unwrap();
    let err = ModelBundle::load(&dir).unwrap_err();
    assert!(matches!(err, LlamaError::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("Split regex"), "{err}");
    tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] =
        json!(plansmith_llama::tokenizer::QWEN2_PATTERN);
    assert!(Tokenizer::from_hf_json(&tok).is_ok());
    tok["added_tokens"][1]["rstrip"] = json!(true);
    let err = Tokenizer::from_hf_json(&tok).unwrap_err();
    assert!(
        matches!(err, LlamaError::Unsupported(_)) && err.to_string().contains("<|im_start|>"),
        "{err}"
    );
    tok["added_tokens"][1]["rstrip"] = json!(false);
    tok["model"]["type"] = json!("Unigram");
    assert!(matches!(
        Tokenizer::from_hf_json(&tok),
        Err(LlamaError::Unsupported(_))
    ));
    // Missing tokenizer.json.
    std::fs::remove_file(&tok_path).unwrap();
    let err = ModelBundle::load(&dir).unwrap_err();
    assert!(
        matches!(err, LlamaError::Io { .. }) && err.to_string().contains("tokenizer.json"),
        "{err}"
    );
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn tokenizer_json_merges_accept_string_and_pair_forms() {
    let mut v = tiny_tokenizer_json(plansmith_llama::tokenizer::QWEN2_PATTERN);
    let pairs = Tokenizer::from_hf_json(&v).unwrap();
    let strings: Vec<serde_json::Value> = v["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            json!(format!(
                "{} {}",
                p[0].as_str().unwrap(),
                p[1].as_str().unwrap()
            ))
        })
        .collect();
    v["model"]["merges"] = json!(strings);
    let joined = Tokenizer::from_hf_json(&v).unwrap();
    let text = "the theory of all ones at the top";
    let a = pairs.encode(text, false, false);
    assert_eq!(a, joined.encode(text, false, false));
    assert!(a.len() + 10 <= text.len(), "merges applied: {a:?}");
    // A bad merge entry names its index.
    v["model"]["merges"][2] = json!(7);
    let err = Tokenizer::from_hf_json(&v).unwrap_err().to_string();
    assert!(err.contains("merges[2]"), "{err}");
}

#[test]
fn config_reads_rope_theta_in_both_layouts_and_refuses_rope_scaling() {
    let p = Path::new("config.json");
    let base = json!({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
        "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100});
    let mut v4 = base.clone();
    v4["rope_theta"] = json!(1e6);
    let c = plansmith_llama::HfConfig::from_json(&v4, p).unwrap();
    assert_eq!(c.config.rope_theta, 1e6);
    assert_eq!(c.config.head_dim, 16);
    let mut v5 = base.clone();
    v5["rope_parameters"] = json!({"rope_theta": 5e5, "rope_type": "default"});
    v5["layer_types"] = json!(["full_attention", "full_attention"]);
    assert_eq!(
        plansmith_llama::HfConfig::from_json(&v5, p)
            .unwrap()
            .config
            .rope_theta,
        5e5
    );
    v5["rope_parameters"]["rope_type"] = json!("yarn");
    let err = plansmith_llama::HfConfig::from_json(&v5, p).unwrap_err();
    assert!(
        matches!(err, LlamaError::Unsupported(_)) && err.to_string().contains("yarn"),
        "{err}"
    );
    let mut sw = base.clone();
    sw["layer_types"] = json!(["full_attention", "sliding_attention"]);
    assert!(matches!(
        plansmith_llama::HfConfig::from_json(&sw, p),
        Err(LlamaError::Unsupported(_))
    ));
    let mut bad = base.clone();
    bad["num_key_value_heads"] = json!(3);
    let err = plansmith_llama::HfConfig::from_json(&bad, p).unwrap_err();
    assert!(err.to_string().contains("num_key_value_heads"), "{err}");
}

#[test]
fn lora_trains_and_merges_on_qwen2_and_qwen3_checkpoints() {
    use plansmith_llama::{LoraConfig, LoraTrainer, PeftAdapter};
    let root = common::temp_dir("hf-lora");
    for arch in [Arch::Qwen2, Arch::Qwen3] {
        let dir = root.join(format!("m{}", arch as u8));
        write_tiny_hf(&dir, arch, DType::F32, 21);
        let b = ModelBundle::load(&dir).unwrap();
        let ids = b
            .tokenizer
            .encode("the theory at the top, 42 ones", false, false);
        let base = b.model.session().prefill_all_logits(&ids).unwrap();
        let mut tr = LoraTrainer::new(&b.model, LoraConfig::default(), 1e-2, 4).unwrap();
        // The trainer's forward includes biases / q-k norms: equal to inference before training.
        let t0 = tr.forward(&ids).unwrap().to_vec2::<f32>().unwrap();
        let d0 = t0
            .iter()
            .zip(&base)
            .map(|(a, c)| max_abs_diff(a, c))
            .fold(0f32, f32::max);
        assert!(d0 <= 1e-3, "trainer vs inference before training: {d0}");
        let first = tr.train_step(&ids, 4).unwrap();
        let mut last = first;
        for _ in 0..15 {
            last = tr.train_step(&ids, 4).unwrap();
        }
        assert!(last < first, "loss {first} -> {last}");
        let ad_dir = dir.join("adapter");
        tr.save_peft(&ad_dir, "tiny").unwrap();
        let ad = PeftAdapter::load(&ad_dir, b.model.config()).unwrap();
        let merged = Arc::new(b.model.with_adapter(&ad).unwrap());
        let want = tr.forward(&ids).unwrap().to_vec2::<f32>().unwrap();
        let got = merged.session().prefill_all_logits(&ids).unwrap();
        let d = want
            .iter()
            .zip(&got)
            .map(|(a, c)| max_abs_diff(a, c))
            .fold(0f32, f32::max);
        assert!(d <= 1e-3, "merged vs trainer: {d}");
    }
    std::fs::remove_dir_all(&root).ok();
}
