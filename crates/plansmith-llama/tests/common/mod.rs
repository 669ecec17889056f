#![allow(dead_code)]
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use plansmith_llama::GgufBundle;

pub fn gguf_path() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../assets/smollm2.gguf");
    assert!(
        p.exists(),
        "{} is missing: run scripts/assets.sh (from the workspace root) first",
        p.display()
    );
    p
}

pub fn bundle() -> Arc<GgufBundle> {
    static B: OnceLock<Arc<GgufBundle>> = OnceLock::new();
    B.get_or_init(|| Arc::new(GgufBundle::load(gguf_path()).expect("load smollm2.gguf")))
        .clone()
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("plansmith-llama-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Largest absolute difference over the largest absolute reference value (how the LoRA
/// gradient checks compare tensors).
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-12);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
        / scale
}

/// A tensor's values in order.
pub fn flat(t: &candle_core::Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

/// Rows of logits from a golden file's JSON (`[[x, ...], ...]`).
pub fn json_rows(v: &serde_json::Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

/// Worst |ours - reference| over the largest reference logit of all positions, asserting the
/// same top-1 at every position (`what` names the model in the failure).
pub fn worst_logit_error(got: &[Vec<f32>], want: &[Vec<f32>], what: &str) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}: positions");
    let scale = want
        .iter()
        .flatten()
        .fold(0f32, |m, x| m.max(x.abs()))
        .max(1e-6);
    let mut worst = 0f32;
    for (pos, (a, b)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            plansmith_llama::argmax(a),
            plansmith_llama::argmax(b),
            "{what}: top-1 differs at position {pos}"
        );
        for (x, y) in a.iter().zip(b) {
            worst = worst.max((x - y).abs() / scale);
        }
    }
    worst
}
