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
