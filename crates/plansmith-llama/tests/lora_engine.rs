//! The hand-written LoRA training step against candle autograd (the reference trainer in
//! `lora.rs`), and the step's own invariants: prefix sharing and packing are exact, every LoRA
//! parameter gets a gradient, a resumed run ends where an uninterrupted one does, bad input is
//! a typed error. Cross-checks against PyTorch + PEFT on Qwen2 / Qwen3 / Llama checkpoints are in
//! `lora_peft_golden.rs`.

mod common;

use common::{flat, rel_err};
use std::collections::BTreeMap;

use candle_core::{Device, Tensor};
use plansmith_llama::{
    BasePrecision, EngineConfig, Example, LlamaConfig, LlamaModel, LoraConfig, LoraEngine,
    LoraTarget, LoraTrainer, PeftAdapter,
};

fn tiny_cfg() -> LlamaConfig {
    let mut cfg = LlamaConfig::tiny(61);
    cfg.hidden_size = 48;
    cfg.num_heads = 6;
    cfg.num_kv_heads = 2;
    cfg.head_dim = 8;
    cfg.intermediate_size = 80;
    cfg
}

fn model() -> LlamaModel {
    LlamaModel::random(tiny_cfg(), 11).unwrap()
}

fn tokens(seed: u64, n: usize) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % 61) as u32
        })
        .collect()
}

fn engine(model: &LlamaModel, targets: &[LoraTarget], share: Option<usize>) -> LoraEngine {
    LoraEngine::new(
        model,
        EngineConfig {
            rank: 4,
            alpha: 8.0,
            targets: targets.to_vec(),
            share_prefix: share,
            total_steps: 10,
            ..Default::default()
        },
    )
    .unwrap()
}

/// An adapter with non-zero A and B (so every gradient is non-zero), through the PEFT files.
fn random_adapter(
    model: &LlamaModel,
    targets: &[LoraTarget],
    dir: &std::path::Path,
) -> PeftAdapter {
    let tr = LoraTrainer::new(
        model,
        LoraConfig {
            r: 4,
            alpha: 8.0,
            targets: targets
                .iter()
                .copied()
                .filter(|t| (*t as usize) < 4)
                .collect(),
        },
        1e-3,
        5,
    )
    .unwrap();
    for (i, (_, v)) in tr.named_vars().into_iter().enumerate() {
        let (r, c) = v.as_tensor().dims2().unwrap();
        let vals: Vec<f32> = (0..r * c)
            .map(|j| ((i * 131 + j * 17) as f32 * 0.37).sin() * 0.2)
            .collect();
        v.set(&Tensor::from_vec(vals, (r, c), &Device::Cpu).unwrap())
            .unwrap();
    }
    tr.save_peft(dir, "test").unwrap();
    PeftAdapter::load(dir, model.config()).unwrap()
}

/// A tiny Gemma 3 block: scaled embeddings, GeGLU, q/k norms, post norms, and sliding-window
/// layers (window 5, every 3rd layer global) with their own RoPE base.
fn gemma_model() -> LlamaModel {
    let mut cfg = tiny_cfg();
    cfg.num_layers = 3;
    cfg.rope_theta = 1_000_000.0;
    cfg.gemma = plansmith_llama::Gemma {
        scale_embeddings: true,
        gelu_gate: true,
        sliding_window: Some(5),
        sliding_window_pattern: 3,
        rope_theta_local: Some(10_000.0),
    };
    LlamaModel::random(cfg, 12).unwrap()
}

#[test]
fn loss_and_every_gradient_match_candle_autograd() {
    check_against_autograd(&model(), "autograd");
}

/// The same on Gemma 3's block, over a sequence much longer than the window: the reference
/// trainer's forward is first checked against the runtime's (which matches transformers,
/// `tests/gemma3.rs`).
#[test]
fn gemma3_loss_and_every_gradient_match_candle_autograd() {
    let m = std::sync::Arc::new(gemma_model());
    let tr = LoraTrainer::new(&m, LoraConfig::default(), 1e-3, 5).unwrap();
    let toks = tokens(4, 40);
    let reference = flat(&tr.forward(&toks).unwrap());
    let runtime: Vec<f32> = m.session().prefill_all_logits(&toks).unwrap().concat();
    let err = rel_err(&reference, &runtime);
    assert!(err < 1e-4, "reference vs runtime logits: {err}");
    check_against_autograd(&m, "autograd-gemma");
}

#[test]
fn gemma3_shared_prefix_and_packing_stay_exact_across_the_window() {
    check_sharing_is_exact_on(&gemma_model(), &shared_batch(30, 4, 6, 3));
}

fn check_against_autograd(m: &LlamaModel, tag: &str) {
    let dir = common::temp_dir(tag);
    let targets = [LoraTarget::Q, LoraTarget::K, LoraTarget::V, LoraTarget::O];
    let adapter = random_adapter(m, &targets, &dir);
    // the reference: candle autograd over the same adapter
    let tr = LoraTrainer::new(
        m,
        LoraConfig {
            r: 4,
            alpha: 8.0,
            targets: targets.to_vec(),
        },
        1e-3,
        5,
    )
    .unwrap();
    let names: BTreeMap<String, candle_core::Var> = tr.named_vars().into_iter().collect();
    let files = candle_core::safetensors::load(dir.join("adapter_model.safetensors"), &Device::Cpu)
        .unwrap();
    for (name, v) in &names {
        // back to the trainer's (GGUF) row layout
        let key = (layer_of(name), target_of(name));
        let (a, b) = &adapter.weights[&key];
        v.set(if name.contains("lora_A") { a } else { b }).unwrap();
        assert!(files.contains_key(name));
    }
    let toks = tokens(3, 70);
    let ex = Example {
        tokens: toks.clone(),
        prompt_len: 41,
    };
    let want_loss = tr.loss(&toks, 41).unwrap();
    let grads = want_loss.backward().unwrap();
    let mut e = engine(m, &targets, None);
    e.load_adapter(&adapter).unwrap();
    let got = e.loss_and_grad(std::slice::from_ref(&ex)).unwrap();
    let want = want_loss.to_scalar::<f32>().unwrap() as f64;
    assert!(
        (got.loss - want).abs() / want < 1e-5,
        "loss {} vs candle {want}",
        got.loss
    );
    assert_eq!(got.targets, 70 - 41);
    for (name, v) in &names {
        let (a, b) = e.gradient(layer_of(name), target_of(name)).unwrap();
        let mine = if name.contains("lora_A") { a } else { b };
        let theirs = flat(grads.get(v.as_tensor()).unwrap());
        let err = rel_err(mine, &theirs);
        assert!(err < 1e-4, "{name}: relative error {err}");
        assert!(mine.iter().any(|x| *x != 0.0), "{name}: zero gradient");
    }
}

fn layer_of(name: &str) -> usize {
    name.split("layers.")
        .nth(1)
        .unwrap()
        .split('.')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn target_of(name: &str) -> LoraTarget {
    let module = name.split('.').find(|p| p.ends_with("_proj")).unwrap();
    LoraTarget::from_peft(module).unwrap()
}

/// Examples sharing a 30-token prompt prefix, with replies of different lengths.
fn batch() -> Vec<Example> {
    shared_batch(30, 5, 6, 3)
}

fn all_grads(e: &LoraEngine) -> Vec<f32> {
    e.adapters()
        .into_iter()
        .flat_map(|(l, t)| {
            let (a, b) = e.gradient(l, t).unwrap();
            a.iter().chain(b).copied().collect::<Vec<_>>()
        })
        .collect()
}

/// Examples of `prefix` tokens in common, each with its own request and reply: suffix `i` has
/// `ask + i` prompt tokens and `reply + 2 i` reply tokens.
fn shared_batch(prefix: usize, n: u64, ask: usize, reply: usize) -> Vec<Example> {
    let prefix = tokens(1, prefix);
    (0..n)
        .map(|i| {
            let mut t = prefix.clone();
            t.extend(tokens(100 + i, ask + i as usize));
            let prompt_len = t.len();
            t.extend(tokens(200 + i, reply + 2 * i as usize));
            Example {
                tokens: t,
                prompt_len,
            }
        })
        .collect()
}

#[test]
fn shared_prefix_packed_and_one_by_one_give_the_same_loss_and_gradient() {
    check_sharing_is_exact(&batch());
}

/// A prefix longer than one 128-row query block, and suffixes whose rows cross block
/// boundaries in the middle of an example: the blocked attention's pieces must still match.
#[test]
fn sharing_stays_exact_when_query_blocks_split_examples() {
    let b = shared_batch(150, 12, 9, 5);
    let suffix_rows: usize = b.iter().map(|e| e.tokens.len() - 150).sum();
    assert!(suffix_rows > 2 * 128, "{suffix_rows} suffix rows");
    check_sharing_is_exact(&b);
}

fn check_sharing_is_exact(b: &[Example]) {
    check_sharing_is_exact_on(&model(), b)
}

fn check_sharing_is_exact_on(m: &LlamaModel, b: &[Example]) {
    let run = |share: Option<usize>, rows: usize| {
        let mut e = LoraEngine::new(
            m,
            EngineConfig {
                rank: 4,
                alpha: 8.0,
                targets: LoraTarget::ALL.to_vec(),
                share_prefix: share,
                max_pack_rows: rows,
                total_steps: 10,
                ..Default::default()
            },
        )
        .unwrap();
        for (i, p) in e.parameters_mut().iter_mut().enumerate() {
            *p = (i as f32 * 0.61).sin() * 0.2;
        }
        let s = e.loss_and_grad(b).unwrap();
        (s, all_grads(&e))
    };
    let (shared, g_shared) = run(Some(8), 10_000);
    let (packed, g_packed) = run(None, 10_000);
    let (single, g_single) = run(None, 1); // one example per pass, gradients accumulated
    assert!(
        shared.rows < packed.rows,
        "sharing ran {} rows, unshared {}",
        shared.rows,
        packed.rows
    );
    assert_eq!(shared.unshared_rows, packed.rows);
    assert_eq!(packed.rows, b.iter().map(|e| e.tokens.len()).sum::<usize>());
    for (name, s, g) in [
        ("packed", &packed, &g_packed),
        ("one by one", &single, &g_single),
    ] {
        assert!(
            (s.loss - shared.loss).abs() < 1e-5 * shared.loss,
            "{name} loss {} vs shared {}",
            s.loss,
            shared.loss
        );
        let err = rel_err(&g_shared, g);
        assert!(err < 1e-4, "{name}: gradient relative error {err}");
    }
    assert!(g_shared.iter().any(|v| *v != 0.0));
}

/// The bf16 base is the f32 step with its products' inputs rounded to bfloat16: the loss and
/// every gradient must stay within bf16's precision of the exact step, with prefix sharing on
/// (the shape of a real training batch). Where the CPU lacks AVX-512 BF16, the engine must
/// refuse the bf16 base with a typed error instead.
#[test]
fn a_bf16_base_follows_the_f32_step_within_bf16_precision() {
    let m = model();
    let b = shared_batch(40, 6, 7, 4);
    let run = |precision: BasePrecision| {
        let mut e = LoraEngine::new(
            &m,
            EngineConfig {
                rank: 4,
                alpha: 8.0,
                targets: LoraTarget::ALL.to_vec(),
                total_steps: 10,
                base_precision: precision,
                ..Default::default()
            },
        )?;
        for (i, p) in e.parameters_mut().iter_mut().enumerate() {
            *p = (i as f32 * 0.61).sin() * 0.2;
        }
        let s = e.loss_and_grad(&b).unwrap();
        Ok::<_, plansmith_llama::LlamaError>((s, all_grads(&e)))
    };
    let (exact, g_exact) = run(BasePrecision::F32).unwrap();
    if !plansmith_llama::bf16_supported() {
        let Err(err) = run(BasePrecision::Bf16) else {
            panic!("a bf16 base was accepted on a CPU without AVX-512 BF16");
        };
        let err = err.to_string();
        assert!(err.contains("AVX-512 BF16"), "{err}");
        return;
    }
    let (half, g_half) = run(BasePrecision::Bf16).unwrap();
    assert_eq!(half.rows, exact.rows);
    let loss_err = (half.loss - exact.loss).abs() / exact.loss;
    assert!(loss_err < 5e-3, "loss {} vs f32 {}", half.loss, exact.loss);
    let err = rel_err(&g_half, &g_exact);
    eprintln!("bf16: loss error {loss_err:.2e}, gradient error {err:.2e}");
    assert!(err < 3e-2, "gradient relative error {err}");
    assert!(
        err > 0.0,
        "the bf16 step computed exactly the f32 step: was it used?"
    );
    assert!(g_half.iter().all(|v| v.is_finite()));
}

fn config(steps: usize) -> EngineConfig {
    EngineConfig {
        rank: 4,
        alpha: 8.0,
        dropout: 0.1,
        lr: 1e-2,
        warmup_steps: 2,
        total_steps: steps,
        ..Default::default()
    }
}

#[test]
fn loss_falls_and_a_resumed_run_ends_bit_for_bit_where_an_uninterrupted_one_does() {
    let m = model();
    let b = batch();
    let mut whole = LoraEngine::new(&m, config(8)).unwrap();
    let first = whole.step(&b).unwrap().loss;
    for _ in 1..8 {
        whole.step(&b).unwrap();
    }
    let last = whole.loss_and_grad(&b).unwrap().loss;
    assert!(last < first * 0.9, "loss {first} -> {last}");

    let dir = common::temp_dir("resume");
    let ck = dir.join("run/checkpoint.safetensors");
    let mut half = LoraEngine::new(&m, config(8)).unwrap();
    for _ in 0..3 {
        half.step(&b).unwrap();
    }
    half.save_checkpoint(&ck, &serde_json::json!({"next": 3}))
        .unwrap();
    drop(half);
    let mut resumed = LoraEngine::new(&m, config(8)).unwrap();
    assert_eq!(resumed.resume(&ck).unwrap(), serde_json::json!({"next": 3}));
    assert_eq!(resumed.steps_done(), 3);
    for _ in 3..8 {
        resumed.step(&b).unwrap();
    }
    let bits = |e: &LoraEngine| {
        e.parameters()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    assert!(
        bits(&resumed) == bits(&whole),
        "resumed run differs from the uninterrupted one"
    );
    // another activation budget resumes the run, bit for bit while the batch runs in the same
    // passes (a smaller budget may cut an unshared batch into more passes, whose rows then draw
    // other dropout masks)
    let mut e = LoraEngine::new(
        &m,
        EngineConfig {
            keep_activations_bytes: usize::MAX,
            ..config(8)
        },
    )
    .unwrap();
    e.resume(&ck).unwrap();
    for _ in 3..8 {
        e.step(&b).unwrap();
    }
    assert!(
        bits(&e) == bits(&whole),
        "another budget: resumed run differs"
    );

    // the checkpoint belongs to one configuration and one base
    let mut other = LoraEngine::new(
        &m,
        EngineConfig {
            rank: 8,
            ..config(8)
        },
    )
    .unwrap();
    let err = other.resume(&ck).unwrap_err().to_string();
    assert!(
        err.contains("checkpoint.safetensors") && err.contains("configuration"),
        "{err}"
    );
    // a truncated checkpoint is refused by name, and leaves the engine as it was
    let bytes = std::fs::read(&ck).unwrap();
    std::fs::write(&ck, &bytes[..bytes.len() / 2]).unwrap();
    let before = bits(&resumed);
    let err = resumed.resume(&ck).unwrap_err().to_string();
    assert!(err.contains("checkpoint.safetensors"), "{err}");
    assert!(bits(&resumed) == before);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_examples_and_settings_are_typed_errors_naming_what() {
    let m = model();
    let err = |e: plansmith_llama::LlamaError| e.to_string();
    assert!(err(LoraEngine::new(
        &m,
        EngineConfig {
            rank: 0,
            ..config(1)
        }
    )
    .err()
    .unwrap())
    .contains("rank"));
    assert!(err(LoraEngine::new(
        &m,
        EngineConfig {
            dropout: 1.0,
            ..config(1)
        }
    )
    .err()
    .unwrap())
    .contains("dropout"));
    let mut e = LoraEngine::new(&m, config(1)).unwrap();
    let good = Example {
        tokens: vec![1, 2, 3],
        prompt_len: 2,
    };
    let cases = [
        (
            Example {
                tokens: vec![1, 2, 3],
                prompt_len: 3,
            },
            "prompt_len",
        ),
        (
            Example {
                tokens: vec![1, 2, 3],
                prompt_len: 0,
            },
            "prompt_len",
        ),
        (
            Example {
                tokens: vec![1, 99, 3],
                prompt_len: 1,
            },
            "token id 99",
        ),
        (
            Example {
                tokens: vec![1; 300],
                prompt_len: 1,
            },
            "context",
        ),
    ];
    for (bad, what) in cases {
        let msg = err(e.step(&[good.clone(), bad]).unwrap_err());
        assert!(
            msg.contains("training example 1") && msg.contains(what),
            "{msg}"
        );
    }
    assert!(err(e.step(&[]).unwrap_err()).contains("empty"));
    assert_eq!(e.steps_done(), 0, "a refused batch is not a step");
}

/// Four steps on [`batch`], the adapter saved in PEFT layout and merged into the runtime
/// model: the runtime's loss on the batch equals the engine's. Returns the engine and the
/// adapter's directory.
fn trained_adapter_matches_the_runtime(
    m: &LlamaModel,
    tag: &str,
) -> (LoraEngine, std::path::PathBuf) {
    let b = batch();
    let mut e = LoraEngine::new(
        m,
        EngineConfig {
            dropout: 0.0,
            ..config(4)
        },
    )
    .unwrap();
    for _ in 0..4 {
        e.step(&b).unwrap();
    }
    let dir = common::temp_dir(tag);
    e.save_peft(&dir, "tiny").unwrap();
    let adapter = PeftAdapter::load(&dir, m.config()).unwrap();
    let merged = std::sync::Arc::new(m.with_adapter(&adapter).unwrap());
    let mut nll = 0f64;
    let mut n = 0;
    for ex in &b {
        let mut s = merged.session();
        let logits = s.prefill_all_logits(&ex.tokens).unwrap();
        for i in ex.prompt_len..ex.tokens.len() {
            let row = &logits[i - 1];
            let max = row.iter().fold(f32::MIN, |a, &v| a.max(v));
            let lse = row
                .iter()
                .map(|v| ((v - max) as f64).exp())
                .sum::<f64>()
                .ln()
                + max as f64;
            nll += lse - row[ex.tokens[i] as usize] as f64;
            n += 1;
        }
    }
    let engine_loss = e.loss_and_grad(&b).unwrap().loss;
    assert!(
        (nll / n as f64 - engine_loss).abs() < 1e-4 * engine_loss,
        "runtime {} vs engine {engine_loss}",
        nll / n as f64
    );
    (e, dir)
}

/// The same for Gemma 3: the trained adapter runs in the runtime as the engine trained it.
#[test]
fn a_gemma3_adapter_loads_in_the_runtime_as_the_engine_trained_it() {
    trained_adapter_matches_the_runtime(&gemma_model(), "save-gemma");
}

#[test]
fn a_saved_adapter_loads_in_the_runtime_and_plans_like_the_engine_trained_it() {
    let m = model();
    let (e, dir) = trained_adapter_matches_the_runtime(&m, "save");
    let adapter = PeftAdapter::load(&dir, m.config()).unwrap();
    assert_eq!(adapter.config.targets.len(), 7);
    // Stored in f16 the file holds the same tensors in half the bytes, and each weight reads
    // back within f16's rounding of the f32 one.
    let half = common::temp_dir("save-f16");
    e.save_peft_as(&half, "tiny", candle_core::DType::F16)
        .unwrap();
    let size = |d: &std::path::Path| {
        std::fs::metadata(d.join("adapter_model.safetensors"))
            .unwrap()
            .len() as f64
    };
    let ratio = size(&half) / size(&dir);
    assert!((0.45..0.6).contains(&ratio), "f16 / f32 file size {ratio}");
    let rounded = PeftAdapter::load(&half, m.config()).unwrap();
    assert_eq!(rounded.weights.len(), adapter.weights.len());
    for (key, (a, b)) in &adapter.weights {
        let (ra, rb) = &rounded.weights[key];
        for (x, y) in [(a, ra), (b, rb)] {
            assert_eq!(y.dtype(), candle_core::DType::F32);
            let x = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let y = y.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            for (u, v) in x.iter().zip(&y) {
                assert!(
                    (u - v).abs() <= u.abs() * 1e-3 + 1e-7,
                    "{key:?}: {u} vs {v}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&half).ok();
    std::fs::remove_dir_all(&dir).ok();
}
