//! The flat-buffer inference forward computes what the candle model computes.

mod common;

use common::{max_abs_diff, spicy_model};
use plansmith_lm::{InferCache, InferModel, LmError, PosEncoding, Rows};

fn seq(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 2 + (i * 13 + 3) % 38).collect()
}

fn rows(flat: &[f32], vocab: usize) -> Vec<Vec<f32>> {
    flat.chunks_exact(vocab).map(|r| r.to_vec()).collect()
}

fn matches_candle(pos: PosEncoding) {
    let m = spicy_model(pos, 7);
    let fast = InferModel::from_model(&m).unwrap();
    let vocab = m.config().vocab;
    let ids = seq(44);
    let full = m.forward(&ids).unwrap().to_vec2::<f32>().unwrap();
    assert!(max_abs_diff(&full[2], &full[40]) > 0.1, "rows must differ");
    // prompt chunks, single steps, and every row vs the last row only
    let mut cache = InferCache::new();
    let mut at = 0;
    for (chunk, which) in [
        (9usize, Rows::All),
        (1, Rows::Last),
        (1, Rows::All),
        (14, Rows::Last),
        (1, Rows::Last),
        (18, Rows::All),
    ] {
        let out = rows(
            &fast
                .forward(&ids[at..at + chunk], &mut cache, which)
                .unwrap(),
            vocab,
        );
        let first = if which == Rows::Last { chunk - 1 } else { 0 };
        assert_eq!(out.len(), chunk - first);
        for (r, row) in out.iter().enumerate() {
            let p = at + first + r;
            let d = max_abs_diff(row, &full[p]);
            assert!(d <= 2e-4, "{pos:?}: position {p} differs by {d}");
        }
        at += chunk;
    }
    assert_eq!(cache.len(), 44);
}

#[test]
fn inference_forward_matches_candle_with_learned_positions() {
    matches_candle(PosEncoding::Learned);
}

#[test]
fn inference_forward_matches_candle_with_rope() {
    matches_candle(PosEncoding::Rope);
}

#[test]
fn a_cloned_cache_is_an_independent_snapshot() {
    let m = spicy_model(PosEncoding::Rope, 3);
    let fast = InferModel::from_model(&m).unwrap();
    let mut prefix = InferCache::new();
    fast.forward(&seq(10), &mut prefix, Rows::Last).unwrap();
    let mut a = prefix.clone();
    let la = fast.forward(&[5, 6, 7], &mut a, Rows::Last).unwrap();
    // a second request from the same prefix sees none of the first one's tokens
    let mut b = prefix.clone();
    let lb = fast.forward(&[9], &mut b, Rows::Last).unwrap();
    let mut fresh = InferCache::new();
    let mut all: Vec<u32> = seq(10);
    all.push(9);
    let lf = fast.forward(&all, &mut fresh, Rows::Last).unwrap();
    assert!(max_abs_diff(&lb, &lf) <= 1e-4);
    assert!(max_abs_diff(&la, &lb) > 0.01);
    assert_eq!((prefix.len(), a.len(), b.len()), (10, 13, 11));
}

#[test]
fn errors_leave_the_cache_unchanged() {
    let m = spicy_model(PosEncoding::Learned, 2);
    let fast = InferModel::from_model(&m).unwrap();
    let block = m.config().block;
    let mut cache = InferCache::new();
    fast.forward(&seq(block - 2), &mut cache, Rows::Last)
        .unwrap();
    let err = fast.forward(&seq(3), &mut cache, Rows::Last).unwrap_err();
    assert!(matches!(err, LmError::ContextOverflow { needed, .. } if needed == block + 1));
    let err = fast.forward(&[1, 999], &mut cache, Rows::Last).unwrap_err();
    assert!(
        matches!(err, LmError::TokenOutOfRange { id: 999, .. }),
        "{err}"
    );
    assert!(fast.forward(&[], &mut cache, Rows::Last).is_err());
    assert_eq!(cache.len(), block - 2);
    // the cache still works after the refusals
    fast.forward(&seq(2), &mut cache, Rows::Last).unwrap();
    assert_eq!(cache.len(), block);
}

#[test]
fn a_truncated_cache_continues_as_if_the_dropped_tokens_were_never_fed() {
    let m = spicy_model(PosEncoding::Rope, 5);
    let fast = InferModel::from_model(&m).unwrap();
    let mut cache = InferCache::new();
    fast.forward(&seq(12), &mut cache, Rows::Last).unwrap();
    let dropped = fast.forward(&[5, 6, 7], &mut cache, Rows::All).unwrap();
    cache.truncate(12);
    assert_eq!(cache.len(), 12);
    let after = fast.forward(&[9, 4], &mut cache, Rows::All).unwrap();
    let mut fresh = InferCache::new();
    let mut all = seq(12);
    all.extend([9, 4]);
    let want = fast.forward(&all, &mut fresh, Rows::All).unwrap();
    let vocab = m.config().vocab;
    assert!(max_abs_diff(&after, &want[want.len() - 2 * vocab..]) <= 1e-4);
    assert!(max_abs_diff(&after[vocab..], &dropped[2 * vocab..]) > 0.01);
    // truncating to a length the cache does not exceed changes nothing
    cache.truncate(99);
    assert_eq!(cache.len(), 14);
}

#[test]
fn a_short_request_fed_at_once_equals_feeding_it_token_by_token_bit_for_bit() {
    // Short feeds take the same dot products a decode step takes, so a planner's prompt and
    // its steps agree exactly, whatever the split.
    let m = spicy_model(PosEncoding::Rope, 3);
    let fast = InferModel::from_model(&m).unwrap();
    let ids = seq(12);
    let mut at_once = InferCache::new();
    let all = fast.forward(&ids, &mut at_once, Rows::All).unwrap();
    let mut stepped = InferCache::new();
    let mut each = Vec::new();
    for &id in &ids {
        each.extend(fast.forward(&[id], &mut stepped, Rows::Last).unwrap());
    }
    assert_eq!(all, each);
}
