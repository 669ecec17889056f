//! Every trainable variable must receive a non-zero gradient (candle's fused CPU kernels have
//! no backward; this guards against one slipping into the model).

mod common;

use plansmith_lm::train::loss_and_grads;
use plansmith_lm::{Device, PosEncoding, TinyGpt};

fn check(pos: PosEncoding) {
    let m = TinyGpt::new(common::small_cfg(pos), 3, &Device::Cpu).unwrap();
    let pairs: Vec<(Vec<u32>, Vec<u32>)> = (0..6u32)
        .map(|i| {
            let p: Vec<u32> = (0..(5 + i)).map(|j| 2 + (i * 7 + j * 3) % 38).collect();
            let c: Vec<u32> = (0..(3 + i % 3)).map(|j| 2 + (i + j * 5) % 38).collect();
            (p, c)
        })
        .collect();
    let (loss, grads) = loss_and_grads(&m, &pairs).unwrap();
    assert!(loss.is_finite() && loss > 0.0);
    for (name, var) in m.vars() {
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("{pos:?}: no gradient for {name}"));
        let n = g
            .sqr()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(n.is_finite(), "{pos:?}: non-finite gradient for {name}");
        assert!(n > 0.0, "{pos:?}: zero gradient for {name}");
    }
}

#[test]
fn every_variable_gets_a_gradient_learned_positions() {
    check(PosEncoding::Learned);
}

#[test]
fn every_variable_gets_a_gradient_rope() {
    check(PosEncoding::Rope);
}
