use std::sync::Arc;

use plansmith_llama::{LlamaConfig, LlamaModel, LoraConfig, LoraTrainer, PeftAdapter};

#[test]
fn lora_every_param_gets_gradient_loss_falls_and_peft_save_round_trips() {
    let cfg = LlamaConfig::tiny(50);
    let model = Arc::new(LlamaModel::random(cfg.clone(), 7).unwrap());
    let tokens: Vec<u32> = vec![3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3, 2, 38, 4, 6];
    let prompt_len = 6;

    let mut tr = LoraTrainer::new(
        &model,
        LoraConfig {
            r: 4,
            alpha: 8.0,
            ..Default::default()
        },
        1e-2,
        1,
    )
    .unwrap();
    // With zero B, the trainer's forward equals the inference forward.
    let full = tr.forward(&tokens).unwrap();
    let last = full
        .get(tokens.len() - 1)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let mut s = model.session();
    let inf = s.prefill(&tokens).unwrap();
    let d = last
        .iter()
        .zip(&inf)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(d < 1e-3, "train vs inference forward differ by {d}");

    let first = tr.train_step(&tokens, prompt_len).unwrap();
    // After one step B != 0, so every A and B receives a non-zero gradient.
    let loss = tr.loss(&tokens, prompt_len).unwrap();
    let grads = loss.backward().unwrap();
    let vars = tr.named_vars();
    assert_eq!(vars.len(), cfg.num_layers * 4 * 2);
    for (name, v) in &vars {
        let g = grads
            .get(v.as_tensor())
            .unwrap_or_else(|| panic!("no gradient for {name}"));
        let n = g
            .abs()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(n > 0.0, "zero gradient for {name}");
    }
    let mut last_loss = first;
    for _ in 0..30 {
        last_loss = tr.train_step(&tokens, prompt_len).unwrap();
    }
    assert!(last_loss < first * 0.7, "loss {first} -> {last_loss}");

    let dir = std::env::temp_dir().join(format!("plansmith-llama-lora-{}", std::process::id()));
    tr.save_peft(&dir, "tiny-random").unwrap();
    let cfg_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("adapter_config.json")).unwrap())
            .unwrap();
    assert_eq!(cfg_json["peft_type"], "LORA");
    assert_eq!(cfg_json["r"], 4);
    let st = candle_core::safetensors::load(
        dir.join("adapter_model.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    assert!(st.contains_key("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
    assert!(st.contains_key("base_model.model.model.layers.1.self_attn.o_proj.lora_B.weight"));
    let ad = PeftAdapter::load(&dir, &cfg).unwrap();
    assert_eq!(ad.weights.len(), cfg.num_layers * 4);
    // B of q round-trips through the HF permutation back to the trained layout.
    let trained_b = tr
        .named_vars()
        .into_iter()
        .find(|(n, _)| n == "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight")
        .unwrap()
        .1;
    let loaded_b = &ad.weights[&(0, plansmith_llama::LoraTarget::Q)].1;
    assert_eq!(
        trained_b.as_tensor().to_vec2::<f32>().unwrap(),
        loaded_b.to_vec2::<f32>().unwrap()
    );
    std::fs::remove_dir_all(&dir).ok();
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

#[test]
fn merged_adapter_matches_trainer_forward_and_fresh_adapter_is_the_base() {
    let cfg = LlamaConfig::tiny(60);
    let model = Arc::new(LlamaModel::random(cfg.clone(), 11).unwrap());
    let tokens: Vec<u32> = vec![5, 17, 42, 3, 9, 33, 8, 21, 59, 1, 12, 7, 30, 2];
    let lora = LoraConfig {
        r: 4,
        alpha: 12.0,
        ..Default::default()
    };
    let dir = std::env::temp_dir().join(format!("plansmith-llama-merge-{}", std::process::id()));

    // Fresh adapter (B = 0): merging changes nothing but the fingerprint.
    let tr = LoraTrainer::new(&model, lora.clone(), 2e-2, 3).unwrap();
    tr.save_peft(&dir, "tiny-random").unwrap();
    let fresh = PeftAdapter::load(&dir, &cfg).unwrap();
    let merged0 = Arc::new(model.with_adapter(&fresh).unwrap());
    assert_ne!(merged0.fingerprint(), model.fingerprint());
    let base_logits = model.session().prefill_all_logits(&tokens).unwrap();
    let m0_logits = merged0.session().prefill_all_logits(&tokens).unwrap();
    for (a, b) in base_logits.iter().zip(&m0_logits) {
        let d = max_abs_diff(a, b);
        assert!(d <= 1e-5, "fresh adapter changed logits by {d}");
    }

    // Trained adapter: the merged model reproduces the trainer's forward at every position.
    let mut tr = LoraTrainer::new(&model, lora, 2e-2, 3).unwrap();
    for _ in 0..12 {
        tr.train_step(&tokens, 5).unwrap();
    }
    tr.save_peft(&dir, "tiny-random").unwrap();
    let trained = PeftAdapter::load(&dir, &cfg).unwrap();
    let merged = Arc::new(model.with_adapter(&trained).unwrap());
    assert_ne!(merged.fingerprint(), merged0.fingerprint());
    let want = tr.forward(&tokens).unwrap().to_vec2::<f32>().unwrap();
    let got = merged.session().prefill_all_logits(&tokens).unwrap();
    let mut worst = 0f32;
    let mut moved = 0f32;
    for ((w, g), b) in want.iter().zip(&got).zip(&base_logits) {
        worst = worst.max(max_abs_diff(w, g));
        moved = moved.max(max_abs_diff(g, b));
    }
    assert!(worst <= 1e-3, "merged vs trainer forward differ by {worst}");
    assert!(moved > 1e-2, "training did not move the logits ({moved})");
    // Cached decode on the merged model equals the full recompute.
    let mut s = merged.session();
    s.prefill(&tokens[..6]).unwrap();
    let mut last = Vec::new();
    for &t in &tokens[6..] {
        last = s.step(t).unwrap();
    }
    let d = max_abs_diff(&last, got.last().unwrap());
    assert!(d <= 1e-4, "cached decode differs by {d}");

    // A / B that do not fit the model: typed error naming the PEFT tensor.
    let mut bad = PeftAdapter::load(&dir, &cfg).unwrap();
    let entry = bad
        .weights
        .get_mut(&(1, plansmith_llama::LoraTarget::V))
        .unwrap();
    entry.0 =
        candle_core::Tensor::zeros((4, 7), candle_core::DType::F32, &candle_core::Device::Cpu)
            .unwrap();
    let err = model.with_adapter(&bad).unwrap_err();
    assert!(
        matches!(err, plansmith_llama::LlamaError::TensorShape { .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("layers.1.self_attn.v_proj.lora_A.weight"),
        "{msg}"
    );
    // An adapter saved for a different model shape is refused at load time.
    let mut other = cfg.clone();
    other.num_heads = 2;
    other.num_kv_heads = 1;
    let err = PeftAdapter::load(&dir, &other).unwrap_err();
    assert!(err.to_string().contains("q_proj.lora_B.weight"), "{err}");
    // An unknown target module is refused, not silently dropped.
    let cp = dir.join("adapter_config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cp).unwrap()).unwrap();
    v["target_modules"] = serde_json::json!(["q_proj", "embed_tokens"]);
    std::fs::write(&cp, v.to_string()).unwrap();
    let err = PeftAdapter::load(&dir, &cfg).unwrap_err();
    assert!(
        matches!(err, plansmith_llama::LlamaError::Unsupported(_))
            && err.to_string().contains("embed_tokens"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
