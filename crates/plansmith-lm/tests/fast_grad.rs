//! The hand-written fast training path against candle autograd (the reference): the same loss,
//! the same gradient for every parameter, and the same optimizer step.

mod common;

use std::collections::HashMap;

use candle_core::Tensor;
use plansmith_lm::train::{fast_batch, loss_and_grads};
use plansmith_lm::{
    fit_token_pairs, Device, FastTrainer, PosEncoding, Progress, TinyGpt, TinyGptConfig,
    TrainConfig, TrainEngine,
};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Pairs of different lengths (so rows are right-padded) with prompts that carry no loss.
fn ragged_pairs(vocab: u32) -> Vec<(Vec<u32>, Vec<u32>)> {
    let mut rng = StdRng::seed_from_u64(11);
    (0..7)
        .map(|i| {
            let pl = 3 + (i * 5) % 17;
            let cl = 1 + (i * 3) % 6;
            let p = (0..pl).map(|_| rng.random_range(2..vocab)).collect();
            let c = (0..cl).map(|_| rng.random_range(2..vocab)).collect();
            (p, c)
        })
        .collect()
}

/// A model with non-trivial LayerNorm gains/biases and biases (the initial ones are 1 and 0).
fn perturbed_model(pos: PosEncoding, seed: u64) -> TinyGpt {
    perturbed(common::small_cfg(pos), seed)
}

fn perturbed(cfg: TinyGptConfig, seed: u64) -> TinyGpt {
    let m = TinyGpt::new(cfg, seed, &Device::Cpu).unwrap();
    let mut rng = StdRng::seed_from_u64(seed + 100);
    // in `vars()` order: the perturbation must not depend on hash-map iteration order
    let t: HashMap<String, Tensor> = m
        .vars()
        .iter()
        .map(|(k, v)| {
            let (k, v) = (k.clone(), v.as_tensor().detach());
            let mut data = v.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            for x in &mut data {
                *x += if v.rank() == 1 {
                    rng.random_range(-0.3f32..0.3)
                } else {
                    rng.random_range(-0.05f32..0.05)
                };
            }
            (k, Tensor::from_vec(data, v.dims(), &Device::Cpu).unwrap())
        })
        .collect();
    m.set_weights(&t, std::path::Path::new("<test>")).unwrap();
    m
}

fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt()
}

fn check_grads(pos: PosEncoding, shards: usize) {
    check_grads_of(perturbed_model(pos, 5), shards);
}

fn check_grads_of(m: TinyGpt, shards: usize) {
    let pos = m.config().pos;
    let pairs = ragged_pairs(m.config().vocab as u32);
    let (ref_loss, ref_grads) = loss_and_grads(&m, &pairs).unwrap();

    let batch = fast_batch(m.config(), &pairs).unwrap();
    // the batch really is padded and prompt-masked
    assert!(batch.targets.len() < batch.b * batch.t);
    let mut ft = FastTrainer::from_model(&m).unwrap();
    ft.set_max_shards(shards);
    let loss = ft.loss_and_grads(&batch).unwrap();
    assert!(
        ((loss - ref_loss) / ref_loss).abs() < 1e-5,
        "{pos:?}: loss {loss} vs reference {ref_loss}"
    );
    let fast = ft.named_grads();
    assert_eq!(fast.len(), m.vars().len());
    for ((name, var), (fname, g)) in m.vars().iter().zip(&fast) {
        assert_eq!(name, fname);
        let r = ref_grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("no reference gradient for {name}"))
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let diff: Vec<f32> = g.iter().zip(&r).map(|(a, b)| a - b).collect();
        let (nr, nd) = (norm(&r), norm(&diff));
        assert!(nr > 0.0, "{pos:?}: zero reference gradient for {name}");
        let rel = nd / nr;
        assert!(
            rel <= 1e-3,
            "{pos:?} shards {shards}: {name}: relative gradient error {rel:.2e} (|ref| {nr:.3e})"
        );
    }
}

#[test]
fn fast_gradients_match_autograd_learned_positions() {
    check_grads(PosEncoding::Learned, 1);
}

#[test]
fn fast_gradients_match_autograd_rope() {
    check_grads(PosEncoding::Rope, 1);
}

#[test]
fn fast_gradients_match_autograd_sharded_learned_positions() {
    check_grads(PosEncoding::Learned, 3);
}

#[test]
fn fast_gradients_match_autograd_sharded_rope() {
    check_grads(PosEncoding::Rope, 3);
}

#[test]
fn fast_gradients_match_autograd_single_block_two_heads() {
    // the only block is also the last one (loss rows only after keys/values)
    for pos in [PosEncoding::Learned, PosEncoding::Rope] {
        let cfg = TinyGptConfig {
            vocab: 40,
            d_model: 12,
            n_layer: 1,
            n_head: 2,
            block: 40,
            pos,
            ..TinyGptConfig::default()
        };
        check_grads_of(perturbed(cfg, 8), 2);
    }
}

fn one_step(engine: TrainEngine, pos: PosEncoding) -> (TinyGpt, f64) {
    let mut m = perturbed_model(pos, 9);
    let pairs = ragged_pairs(m.config().vocab as u32);
    let cfg = TrainConfig {
        epochs: 1,
        batch_size: 8,
        lr: 1e-3,
        stop_after: Some(1),
        engine,
        ..TrainConfig::default()
    };
    let rep = fit_token_pairs(&mut m, &pairs, &cfg, Progress::Hidden).unwrap();
    assert_eq!(rep.steps, 1);
    (m, rep.last_step_loss)
}

fn check_one_step(pos: PosEncoding) {
    let before = common::weights_of(&perturbed_model(pos, 9));
    let (fast, lf) = one_step(TrainEngine::Auto, pos);
    let (reference, lr) = one_step(TrainEngine::Reference, pos);
    assert!(((lf - lr) / lr).abs() < 1e-5, "{pos:?}: loss {lf} vs {lr}");
    let (wf, wr) = (common::weights_of(&fast), common::weights_of(&reference));
    let (mut moved, mut off, mut n) = (0f64, 0f64, 0usize);
    for (((name, a), (_, b)), (_, w0)) in wf.iter().zip(&wr).zip(&before) {
        for ((&x, &y), &z) in a.iter().zip(b).zip(w0) {
            moved += (y - z).abs() as f64;
            off += (x - y).abs() as f64;
            n += 1;
            // Adam's first step is ~lr * sign(g): only a gradient indistinguishable from zero
            // can land elsewhere, and never further than 2 lr
            assert!(
                (x - y).abs() <= 2.0e-3 + 1e-6,
                "{pos:?}: {name}: {x} vs {y}"
            );
        }
    }
    let (moved, off) = (moved / n as f64, off / n as f64);
    assert!(
        moved > 1e-4,
        "{pos:?}: the reference step barely moved ({moved:e})"
    );
    assert!(
        off < 0.01 * moved,
        "{pos:?}: mean |fast - reference| {off:e} vs mean step {moved:e}"
    );
}

#[test]
fn one_fast_step_matches_the_reference_step_learned_positions() {
    check_one_step(PosEncoding::Learned);
}

#[test]
fn one_fast_step_matches_the_reference_step_rope() {
    check_one_step(PosEncoding::Rope);
}

#[test]
fn fast_batch_errors_are_typed() {
    let m = TinyGpt::new(common::small_cfg(PosEncoding::Learned), 1, &Device::Cpu).unwrap();
    let mut ft = FastTrainer::from_model(&m).unwrap();
    let mut b = fast_batch(m.config(), &ragged_pairs(40)).unwrap();
    b.ids[0] = 40;
    assert!(matches!(
        ft.loss_and_grads(&b),
        Err(plansmith_lm::LmError::TokenOutOfRange { .. })
    ));
    b.ids[0] = 2;
    b.targets.clear();
    assert!(matches!(
        ft.loss_and_grads(&b),
        Err(plansmith_lm::LmError::Data(_))
    ));
}
