//! Training: the loss falls and the model solves a toy copy task; determinism; resume.

mod common;

use common::weights_of;
use plansmith_lm::{
    fit_pairs, generate_text, CharCodec, CheckpointConfig, Codec, Device, GenerateConfig,
    PosEncoding, Progress, TinyGpt, TinyGptConfig, TrainConfig,
};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// "copy the digits after `#`": prompt `<letters> #<digits> <letters>\n=> `, completion `<digits>\n`.
fn copy_pairs(n: usize, seed: u64) -> Vec<(String, String)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let word = |rng: &mut StdRng| -> String {
        let len = rng.random_range(1..4);
        (0..len)
            .map(|_| (b'a' + rng.random_range(0..6u8)) as char)
            .collect()
    };
    (0..n)
        .map(|_| {
            let nd = rng.random_range(2..5);
            let digits: String = (0..nd)
                .map(|_| (b'0' + rng.random_range(0..10u8)) as char)
                .collect();
            let pre = word(&mut rng);
            let post = word(&mut rng);
            (
                format!("{pre} #{digits} {post}\n=> "),
                format!("{digits}\n"),
            )
        })
        .collect()
}

fn toy_cfg(vocab: usize, pos: PosEncoding) -> TinyGptConfig {
    TinyGptConfig {
        vocab,
        d_model: 48,
        n_layer: 2,
        n_head: 4,
        block: 32,
        pos,
        ..TinyGptConfig::default()
    }
}

#[test]
fn loss_falls_and_model_copies_digits() {
    let train = copy_pairs(800, 1);
    let held = copy_pairs(200, 2);
    let corpus: Vec<&str> = train
        .iter()
        .flat_map(|(p, c)| [p.as_str(), c.as_str()])
        .collect();
    let codec = CharCodec::from_corpus(corpus);
    // RoPE learns this copy (an induction pattern) in far fewer steps than learned absolute
    // positions (which get there too, at ~40 epochs)
    let mut model = TinyGpt::new(
        toy_cfg(codec.vocab_size(), PosEncoding::Rope),
        0,
        &Device::Cpu,
    )
    .unwrap();
    let before = plansmith_lm::score_completion(&model, &codec, &held[0].0, &held[0].1).unwrap();
    let cfg = TrainConfig {
        epochs: 16,
        batch_size: 16,
        lr: 2e-3,
        seed: 0,
        ..TrainConfig::default()
    };
    let rep = fit_pairs(&mut model, &codec, &train, &cfg, Progress::Hidden).unwrap();
    eprintln!("{rep:?}");
    assert!(rep.final_loss < 0.15, "final loss {}", rep.final_loss);
    assert!(rep.tokens_per_sec > 0.0 && rep.steps == rep.total_steps);
    let after = plansmith_lm::score_completion(&model, &codec, &held[0].0, &held[0].1).unwrap();
    assert!(after.mean > before.mean + 1.0, "{before:?} -> {after:?}");
    let mut ok = 0;
    for (p, c) in &held {
        let (text, _) = generate_text(&model, &codec, p, &GenerateConfig::default()).unwrap();
        ok += (text == *c) as usize;
    }
    let acc = ok as f64 / held.len() as f64;
    eprintln!("held-out exact match {acc}");
    assert!(acc >= 0.95, "held-out exact match {acc}");
}

fn quick_run(seed: u64, cfg: &TrainConfig) -> (TinyGpt, plansmith_lm::TrainReport) {
    let train = copy_pairs(96, 3);
    let corpus: Vec<&str> = train
        .iter()
        .flat_map(|(p, c)| [p.as_str(), c.as_str()])
        .collect();
    let codec = CharCodec::from_corpus(corpus);
    let mut model = TinyGpt::new(
        toy_cfg(codec.vocab_size(), PosEncoding::Learned),
        seed,
        &Device::Cpu,
    )
    .unwrap();
    let rep = fit_pairs(&mut model, &codec, &train, cfg, Progress::Hidden).unwrap();
    (model, rep)
}

fn small_train_cfg() -> TrainConfig {
    TrainConfig {
        epochs: 3,
        batch_size: 16,
        seed: 42,
        ..TrainConfig::default()
    }
}

#[test]
fn same_seed_same_run() {
    let cfg = small_train_cfg();
    let (a, ra) = quick_run(7, &cfg);
    let (b, rb) = quick_run(7, &cfg);
    assert_eq!(ra.final_loss, rb.final_loss);
    assert_eq!(ra.last_step_loss, rb.last_step_loss);
    assert_eq!(weights_of(&a), weights_of(&b));
    let other = TrainConfig { seed: 43, ..cfg };
    let (c, _) = quick_run(7, &other);
    assert_ne!(weights_of(&a), weights_of(&c));
}

#[test]
fn resume_from_checkpoint_continues_the_same_run() {
    let dir_full = common::tmp_dir("ckpt-full");
    let dir_split = common::tmp_dir("ckpt-split");
    let full_cfg = TrainConfig {
        checkpoint: Some(CheckpointConfig {
            dir: dir_full.clone(),
            every_steps: 5,
            resume: false,
        }),
        ..small_train_cfg()
    };
    let (full, rfull) = quick_run(1, &full_cfg);
    assert!(dir_full.join("checkpoint.json").exists());

    // interrupted after 7 of 18 steps (mid-epoch), then resumed from a differently-initialised model
    let ck = CheckpointConfig {
        dir: dir_split.clone(),
        every_steps: 5,
        resume: true,
    };
    let first = TrainConfig {
        stop_after: Some(7),
        checkpoint: Some(ck.clone()),
        ..small_train_cfg()
    };
    let (_, r1) = quick_run(1, &first);
    assert_eq!(r1.steps, 7);
    assert_eq!(r1.resumed_from, None);
    let rest = TrainConfig {
        checkpoint: Some(ck),
        ..small_train_cfg()
    };
    let (resumed, r2) = quick_run(99, &rest);
    assert_eq!(r2.resumed_from, Some(7));
    assert_eq!(r2.steps, rfull.steps);
    assert_eq!(r2.steps_this_run, rfull.steps - 7);
    assert_eq!(weights_of(&resumed), weights_of(&full));
    assert_eq!(r2.final_loss, rfull.final_loss);
    // exactly one weights file is kept next to checkpoint.json
    let n = std::fs::read_dir(&dir_split)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".safetensors")
        })
        .count();
    assert_eq!(n, 1);

    // a checkpoint from another setup is refused, not silently used
    let wrong = TrainConfig {
        batch_size: 8,
        checkpoint: Some(CheckpointConfig {
            dir: dir_split.clone(),
            every_steps: 0,
            resume: true,
        }),
        ..small_train_cfg()
    };
    let train = copy_pairs(96, 3);
    let corpus: Vec<&str> = train
        .iter()
        .flat_map(|(p, c)| [p.as_str(), c.as_str()])
        .collect();
    let codec = CharCodec::from_corpus(corpus);
    let mut m = TinyGpt::new(
        toy_cfg(codec.vocab_size(), PosEncoding::Learned),
        0,
        &Device::Cpu,
    )
    .unwrap();
    let err = fit_pairs(&mut m, &codec, &train, &wrong, Progress::Hidden).unwrap_err();
    assert!(err.to_string().contains("checkpoint.json"), "{err}");
    std::fs::remove_dir_all(&dir_full).unwrap();
    std::fs::remove_dir_all(&dir_split).unwrap();
}
