// shared helpers for the integration tests (included with `mod common;`)
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use plansmith_lm::{Device, PosEncoding, TinyGpt, TinyGptConfig};

pub fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("plansmith-lm-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn small_cfg(pos: PosEncoding) -> TinyGptConfig {
    TinyGptConfig {
        vocab: 40,
        d_model: 32,
        n_layer: 2,
        n_head: 4,
        block: 48,
        pos,
        ..TinyGptConfig::default()
    }
}

/// A model whose weights are large enough that logits differ visibly between positions.
pub fn spicy_model(pos: PosEncoding, seed: u64) -> TinyGpt {
    let m = TinyGpt::new(small_cfg(pos), seed, &Device::Cpu).unwrap();
    let scaled: HashMap<_, _> = m
        .named_tensors()
        .into_iter()
        .map(|(k, v)| {
            let v = if k.ends_with("weight") && v.rank() == 2 {
                (v * 15.0).unwrap()
            } else {
                v.copy().unwrap()
            };
            (k, v)
        })
        .collect();
    m.set_weights(&scaled, std::path::Path::new("<test>"))
        .unwrap();
    m
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

pub fn weights_of(m: &TinyGpt) -> Vec<(String, Vec<f32>)> {
    m.vars()
        .iter()
        .map(|(n, v)| {
            (
                n.clone(),
                v.as_tensor()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap(),
            )
        })
        .collect()
}
