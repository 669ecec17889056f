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
