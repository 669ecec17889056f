//! The shipped default planner must not silently rot: it is re-checked on held-out Pace
//! requests of the generator it was trained on, against changed catalogs and on tools invented
//! for the test, and a reduced-budget re-train with the same recipe must still learn.

mod common;

use plansmith_data::{
    augment_traces, generate_pace, novel_traces, novel_traces_with, pace_catalog, synthetic_traces,
    AugmentConfig, NovelOptions, PaceConfig,
};
use plansmith_lm::{PosEncoding, Progress, TinyGptConfig, TrainConfig};
use plansmith_planner::eval::{evaluate, items};
use plansmith_planner::train::{train_planner, CodecChoice, Splits, TrainSpec};
use plansmith_planner::{default_planner, PlannerSettings};

#[test]
fn shipped_default_planner_still_clears_its_floor() {
    let planner = default_planner().unwrap();
    let (summary, _) = evaluate(
        &planner,
        &items(&common::shipped_test_requests(0)).unwrap(),
        false,
        |_, _| {},
    )
    .unwrap();
    assert_eq!(summary.invalid_emitted, 0);
    // Shipped: 0.995 agreement on its own 2,000 test requests; at the floor 0.95 coverage,
    // precision 1.0 (its first pass alone: 0.9795 / 0.91). Below 0.95 means something regressed:
    // forcing grammar bytes past a sub-word model (fast-forward) alone cost ~5 points on an
    // earlier planner.
    eprintln!("{summary:?}");
    assert!(summary.agreement >= 0.95, "{summary:?}");
    assert!(
        summary.coverage >= 0.7 && summary.precision >= 0.97,
        "{summary:?}"
    );
}

#[test]
fn shipped_default_planner_reads_the_catalog_in_its_prompt() {
    let planner = default_planner().unwrap();
    assert!(planner.settings.tools_in_prompt);
    let pace = pace_catalog();
    // Fresh requests against renamed / shuffled / distractor / reduced Pace catalogs.
    let (changed, _) = augment_traces(
        &common::shipped_test_requests(1),
        Some(&pace),
        &AugmentConfig {
            seed: 78,
            ..AugmentConfig::default()
        },
    )
    .unwrap();
    // Tools invented for this test (other seeds than training's), alone or added to Pace.
    let invented = novel_traces(300, 78_000, &pace.tools, &pace.tools).unwrap();
    for (what, traces, floor) in [
        // Shipped: 0.894 and 0.837 on README's sets (README, "Tools in the prompt").
        ("changed catalogs", changed, 0.75),
        ("invented tools", invented, 0.7),
    ] {
        let (summary, _) = evaluate(&planner, &items(&traces).unwrap(), false, |_, _| {}).unwrap();
        eprintln!("{what}: {summary:?}");
        assert_eq!(summary.invalid_emitted, 0, "{what}");
        assert!(summary.agreement >= floor, "{what}: {summary:?}");
    }
}

#[test]
fn reduced_budget_retrain_still_learns() {
    // The default planner's recipe (scripts/train-default.sh) at a tiny budget: Pace requests,
    // augmented catalogs, synthetic families and invented tools, catalog in the prompt.
    let data = generate_pace(&PaceConfig {
        seed: 3,
        ..PaceConfig::with_n(4000)
    })
    .unwrap();
    let catalog = pace_catalog();
    let cfg = AugmentConfig {
        seed: 3,
        ..AugmentConfig::default()
    };
    let (mut train, _) = augment_traces(&data.train[..1600], Some(&catalog), &cfg).unwrap();
    train.extend(synthetic_traces(300, 3).unwrap());
    let wide = NovelOptions {
        wide_spelling: true,
        ..NovelOptions::default()
    };
    train.extend(novel_traces_with(600, 3, &catalog.tools, &catalog.tools, wide).unwrap());
    train.extend(data.train);
    let splits = Splits {
        train,
        calibration: data.calibration,
        test: data.test,
    };
    let spec = TrainSpec {
        model: TinyGptConfig {
            d_model: 64,
            n_layer: 2,
            n_head: 4,
            block: 640,
            pos: PosEncoding::Rope,
            ..TinyGptConfig::default()
        },
        codec: CodecChoice::Piece { vocab: 512 },
        train: TrainConfig {
            epochs: 6,
            batch_size: 16,
            lr: 3e-3,
            seed: 0,
            ..TrainConfig::default()
        },
        settings: PlannerSettings {
            tools_in_prompt: true,
            ..PlannerSettings::dsl()
        },
        floor: plansmith_planner::FloorRule::ZERO_WRONG,
        piece_dropout: 0.0,
        other_confidence: Vec::new(),
    };
    let trained = train_planner(&splits, catalog, &spec, Progress::Hidden, |_, _, _| {}).unwrap();
    let test = trained.planner.meta.test.clone().unwrap();
    // From ln(512) ~ 6.2 nats per token at initialisation; measured 0.95 after six epochs.
    assert!(trained.report.final_loss < 2.0, "{:?}", trained.report);
    // Six epochs on ~6,500 traces (~100 s) is no shippable planner (the shipped one is checked
    // above) but plans a real share of fresh Pace requests: measured 0.227 agreement on these
    // 533 test requests of the wider generator of 2026-12-04 (0.379 on the narrower one before;
    // four epochs: 0.302; the earlier 1,200-request, three-epoch budget: 0.013, which no floor
    // could tell from a recipe that stopped learning).
    assert!(test.agreement >= 0.15, "{test:?}");
    // Whatever it learnt, the grammar keeps every emitted plan valid.
    assert_eq!(test.invalid_emitted, 0, "{test:?}");
}
