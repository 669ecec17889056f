//! The generators must not reproduce evaluation requests: the training mix of the project's
//! recipes (Pace, augmented Pace, synthetic families, invented tools, swapped verbs,
//! benchmark-style APIs) is checked against every hand-written request and every BFCL
//! question the project reports on.

use std::path::PathBuf;

use plansmith_core::overlap::{EvalRequests, OverlapKind};
use plansmith_core::Trace;
use plansmith_data::augment::{augment_traces, AugmentConfig};
use plansmith_data::pace::{generate_pace, pace_catalog, PaceConfig};
use plansmith_data::{
    api_traces, families, novel_traces_with, swapped_verb_traces, synthetic_traces, NovelOptions,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The BFCL categories the project reports on (`docs/results/bfcl.md`).
const BFCL: &[&str] = &[
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
];

/// A scaled-down copy of the recipes' mix (scripts/train-default.sh, the LoRA runs).
fn training_mix() -> Vec<Trace> {
    let mut cfg = PaceConfig::with_n(6000);
    cfg.seed = 1;
    cfg.upper_train = 0.15;
    let pace = generate_pace(&cfg).unwrap();
    let catalog = pace_catalog();
    let aug_cfg = AugmentConfig {
        seed: 1,
        copies: 1,
        ..AugmentConfig::default()
    };
    let (augmented, _) = augment_traces(&pace.train[..3000], Some(&catalog), &aug_cfg).unwrap();
    let mut pool = catalog.tools.clone();
    for family in families() {
        pool.extend(family.catalog().tools);
    }
    let novel = novel_traces_with(
        3000,
        1,
        &catalog.tools,
        &pool,
        NovelOptions {
            alternatives: true,
            wide_spelling: true,
            durations: true,
            typed: true,
            group: 1,
        },
    )
    .unwrap();
    let mut mix = pace.train;
    mix.extend(pace.calibration);
    mix.extend(augmented);
    mix.extend(synthetic_traces(1500, 1).unwrap());
    mix.extend(novel);
    mix.extend(swapped_verb_traces(800, 1, &catalog).unwrap());
    mix.extend(api_traces(2000, 1, &catalog.tools, 32).unwrap());
    mix
}

#[test]
fn the_training_mix_shares_no_eight_words_with_any_evaluation_request() {
    let handwritten = root().join("eval/handwritten");
    let bfcl_dir = root().join("assets/bfcl");
    let bfcl_files: Vec<PathBuf> = BFCL
        .iter()
        .map(|c| bfcl_dir.join(format!("BFCL_v4_{c}.json")))
        .collect();
    for f in &bfcl_files {
        assert!(
            f.exists(),
            "{} is missing: run scripts/assets.sh (from the workspace root) first",
            f.display()
        );
    }
    let handwritten = EvalRequests::load(&[handwritten]).unwrap();
    let bfcl = EvalRequests::load(&bfcl_files).unwrap();
    assert!(handwritten.len() >= 325, "{}", handwritten.len());
    assert!(bfcl.len() > 3000, "{}", bfcl.len());

    let mix = training_mix();
    let mut shared_words = Vec::new();
    let mut whole_handwritten = std::collections::BTreeSet::new();
    for t in &mix {
        if let Some(hit) = bfcl.hit(&t.request) {
            shared_words.push((t.request.clone(), hit));
        }
        if let Some(hit) = handwritten.hit(&t.request) {
            match hit.kind {
                OverlapKind::Ngram => shared_words.push((t.request.clone(), hit)),
                // Short everyday phrases ("scroll down", "send it") come out of any good
                // generator; `train --exclude-overlap eval/handwritten` drops them from the
                // recipes' runs. Counted here so a generator that starts copying whole
                // hand-written requests shows.
                OverlapKind::Whole => {
                    whole_handwritten.insert(hit.eval_id);
                }
            }
        }
    }
    assert!(
        shared_words.is_empty(),
        "{} training requests copy evaluation text, e.g. {:?}",
        shared_words.len(),
        &shared_words[..shared_words.len().min(5)]
    );
    // Measured 2026-12-05 on this mix (15,741 traces): 20 of the 325 hand-written requests
    // (6%). Twice that would mean the generators have started following the sets.
    assert!(
        whole_handwritten.len() <= 40,
        "{} hand-written requests come out of the generators word for word: {whole_handwritten:?}",
        whole_handwritten.len()
    );
}
