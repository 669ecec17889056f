//! KV-cache decoding equals full recompute; snapshots; block overflow; save/load.

mod common;

use common::{max_abs_diff, spicy_model};
use plansmith_lm::{
    generate, Device, GenerateConfig, KvCache, LmError, PosEncoding, Session, TinyGpt,
};

fn seq(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 2 + (i * 11 + 5) % 38).collect()
}

fn cached_matches_full(pos: PosEncoding) {
    let m = spicy_model(pos, 11);
    let ids = seq(40);
    let full = m.forward(&ids).unwrap().to_vec2::<f32>().unwrap();
    // spread between rows shows the check is not vacuous
    assert!(max_abs_diff(&full[3], &full[30]) > 0.1);
    let mut cache = KvCache::new();
    let mut at = 0;
    for chunk in [7usize, 1, 1, 12, 1, 18] {
        let rows = m
            .forward_with_cache(&ids[at..at + chunk], &mut cache)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        for (r, row) in rows.iter().enumerate() {
            let d = max_abs_diff(row, &full[at + r]);
            assert!(d <= 1e-4, "{pos:?}: position {} differs by {d}", at + r);
        }
        at += chunk;
    }
    assert_eq!(cache.len(), 40);
    // token by token through a session
    let mut s = Session::new(&m);
    for (i, &t) in ids.iter().enumerate() {
        let l = s.push(t).unwrap().to_vec();
        let d = max_abs_diff(&l, &full[i]);
        assert!(d <= 1e-4, "{pos:?}: session step {i} differs by {d}");
    }
}

#[test]
fn cached_decoding_matches_full_recompute_learned() {
    cached_matches_full(PosEncoding::Learned);
}

#[test]
fn cached_decoding_matches_full_recompute_rope() {
    cached_matches_full(PosEncoding::Rope);
}

#[test]
fn snapshot_restore_shares_a_prefix() {
    let m = spicy_model(PosEncoding::Learned, 5);
    let prefix = seq(20);
    let mut s = Session::new(&m);
    s.feed(&prefix).unwrap();
    let snap = s.snapshot();
    let a = s.feed(&[7, 8, 9]).unwrap().to_vec();
    s.restore(&snap);
    assert_eq!(s.len(), 20);
    let b = s.feed(&[12, 3]).unwrap().to_vec();
    s.restore(&snap);
    let a2 = s.feed(&[7, 8, 9]).unwrap().to_vec();
    assert_eq!(a, a2);
    let mut fresh = Session::new(&m);
    let mut all = prefix.clone();
    all.extend([12, 3]);
    let b2 = fresh.feed(&all).unwrap().to_vec();
    assert!(max_abs_diff(&b, &b2) <= 1e-4);
    // a second session can start from the same snapshot
    let mut other = Session::from_snapshot(&m, &snap);
    assert_eq!(other.logits().unwrap(), snap_logits(&m, &prefix).as_slice());
    other.push(4).unwrap();
    assert_eq!(other.len(), 21);
}

fn snap_logits(m: &TinyGpt, ids: &[u32]) -> Vec<f32> {
    let mut s = Session::new(m);
    s.feed(ids).unwrap().to_vec()
}

#[test]
fn block_overflow_is_an_error_not_a_panic() {
    let m = spicy_model(PosEncoding::Learned, 1);
    let block = m.config().block;
    let mut s = Session::new(&m);
    s.feed(&seq(block - 1)).unwrap();
    let before = s.logits().unwrap().to_vec();
    match s.feed(&[3, 4]) {
        Err(LmError::ContextOverflow { needed, block: b }) => {
            assert_eq!(needed, block + 1);
            assert_eq!(b, block);
        }
        other => panic!("expected ContextOverflow, got {other:?}"),
    }
    // the failed feed left the session untouched
    assert_eq!(s.len(), block - 1);
    assert_eq!(s.logits().unwrap(), before.as_slice());
    s.push(3).unwrap();
    assert_eq!(s.remaining(), 0);
    assert!(m.forward(&seq(block + 1)).is_err());
    assert!(matches!(
        s.push(99),
        Err(LmError::TokenOutOfRange { .. }) | Err(LmError::ContextOverflow { .. })
    ));
    // generation stops at the block instead of failing
    let g = generate(
        &m,
        &seq(block - 3),
        &GenerateConfig {
            max_new: 50,
            ..GenerateConfig::default()
        },
    )
    .unwrap();
    assert_eq!(g.tokens.len(), 4);
    assert_eq!(g.finish, plansmith_lm::FinishReason::ContextFull);
}

#[test]
fn out_of_vocab_ids_are_rejected() {
    let m = spicy_model(PosEncoding::Learned, 1);
    let mut s = Session::new(&m);
    assert!(matches!(
        s.feed(&[2, 40]),
        Err(LmError::TokenOutOfRange { id: 40, .. })
    ));
}

#[test]
fn save_load_gives_identical_logits() {
    for pos in [PosEncoding::Learned, PosEncoding::Rope] {
        let m = spicy_model(pos, 9);
        let dir = common::tmp_dir(&format!("saveload-{pos:?}"));
        m.save(&dir).unwrap();
        let back = TinyGpt::load(&dir, &Device::Cpu).unwrap();
        assert_eq!(back.config(), m.config());
        let ids = seq(30);
        let a = m
            .forward(&ids)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let b = back
            .forward(&ids)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(a, b);
        // a wrong config is a clear error naming the file
        let mut bad = m.config().clone();
        bad.d_model = 64;
        let err = TinyGpt::load_safetensors(bad, &dir.join("model.safetensors"), &Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("model.safetensors") && err.contains("shape"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn scoring_matches_stepwise_logprobs() {
    let m = spicy_model(PosEncoding::Learned, 2);
    let prompt = seq(10);
    let completion = vec![5u32, 9, 2];
    let sc = plansmith_lm::score_tokens(&m, &prompt, &completion).unwrap();
    let mut s = Session::new(&m);
    s.feed(&prompt).unwrap();
    let mut want = Vec::new();
    for &c in &completion {
        let lp = plansmith_lm::decode::log_softmax(s.logits().unwrap());
        want.push(lp[c as usize]);
        s.push(c).unwrap();
    }
    assert!(max_abs_diff(&sc.token_logprobs, &want) <= 1e-4);
    let mean = want.iter().sum::<f32>() / 3.0;
    assert!((sc.mean - mean).abs() <= 1e-4);
}
