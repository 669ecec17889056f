//! The LoRA training step against PyTorch + PEFT: loss and the gradient of every `lora_A` /
//! `lora_B` on tiny random Llama (tied head), Qwen2 (q/k/v biases, untied head) and Qwen3 (q/k
//! norms) checkpoints, for one example and for a batch of five sharing a prompt prefix — run
//! packed, with the prefix shared, and one pass per example. The golden files come from
//! `scripts/lora_golden.py` (float64 reference); this test needs no Python.

mod common;

use common::{flat, rel_err};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use plansmith_llama::hf::load_hf_model;
use plansmith_llama::{EngineConfig, Example, LoraEngine, PeftAdapter};

fn fixture(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lora_golden")
        .join(arch)
}

fn check_arch(arch: &str) {
    let dir = fixture(arch);
    let (model, _) = load_hf_model(&dir.join("model")).unwrap();
    let adapter = PeftAdapter::load(&dir.join("adapter"), model.config()).unwrap();
    assert_eq!(
        adapter.config.targets.len(),
        7,
        "{arch}: the golden adapter covers all projections"
    );
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap()).unwrap();
    let grads: HashMap<String, Tensor> =
        candle_core::safetensors::load(dir.join("golden_grads.safetensors"), &Device::Cpu).unwrap();
    for case in ["single", "batch"] {
        let batch: Vec<Example> = golden["examples"][case]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| Example {
                tokens: e["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_u64().unwrap() as u32)
                    .collect(),
                prompt_len: e["prompt_len"].as_u64().unwrap() as usize,
            })
            .collect();
        let want_loss = golden["loss"][case].as_f64().unwrap();
        for (mode, share, rows) in [
            ("packed", None, 100_000),
            ("shared prefix", Some(8), 100_000),
            ("one pass per example", None, 1),
        ] {
            let mut e = LoraEngine::new(
                &model,
                EngineConfig {
                    rank: adapter.config.r,
                    alpha: adapter.config.alpha,
                    targets: adapter.config.targets.clone(),
                    share_prefix: share,
                    max_pack_rows: rows,
                    ..Default::default()
                },
            )
            .unwrap();
            e.load_adapter(&adapter).unwrap();
            let stats = e.loss_and_grad(&batch).unwrap();
            if case == "batch" && share.is_some() {
                assert!(
                    stats.rows < stats.unshared_rows,
                    "{arch}: the batch shares no prefix"
                );
            }
            let rel = (stats.loss - want_loss).abs() / want_loss;
            assert!(
                rel < 1e-5,
                "{arch} {case} {mode}: loss {} vs PEFT {want_loss}",
                stats.loss
            );
            let mine = e.peft_gradient().unwrap();
            assert_eq!(mine.len(), 2 * 7 * model.config().num_layers);
            for (name, g) in &mine {
                let want = grads
                    .get(&format!("{case}/{name}"))
                    .unwrap_or_else(|| panic!("golden has no {name}"));
                let (g, want) = (flat(g), flat(want));
                let err = rel_err(&g, &want);
                if std::env::var("GOLDEN_VERBOSE").is_ok() {
                    eprintln!("{arch} {case} {mode} {name} {err:e}");
                }
                assert!(
                    err <= 1e-4,
                    "{arch} {case} {mode}: {name} relative error {err:e}"
                );
                assert!(
                    g.iter().any(|v| *v != 0.0),
                    "{arch} {case}: {name} has a zero gradient"
                );
            }
        }
    }
}

#[test]
fn llama_tied_head_matches_peft() {
    check_arch("llama");
}

#[test]
fn qwen2_biases_and_untied_head_match_peft() {
    check_arch("qwen2");
}

#[test]
fn qwen3_qk_norms_match_peft() {
    check_arch("qwen3");
}
