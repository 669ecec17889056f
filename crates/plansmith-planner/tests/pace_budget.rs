//! The shipped default planner must not silently rot: re-train a reduced-budget version with
//! the same recipe as scripts/train-default.sh and check it still clears a floor.

use plansmith_core::{Policy, Syntax};
use plansmith_data::{generate_pace, pace_catalog, PaceConfig};
use plansmith_lm::{PosEncoding, Progress, TinyGptConfig, TrainConfig};
use plansmith_planner::eval::{evaluate, items};
use plansmith_planner::train::{train_planner, Splits, TrainSpec};
use plansmith_planner::{ConfidenceMode, PlannerSettings};

#[test]
fn reduced_budget_pace_planner_clears_the_floor() {
    let mut cfg = PaceConfig::with_n(1500);
    cfg.seed = 3;
    let data = generate_pace(&cfg).unwrap();
    let splits = Splits {
        train: data.train,
        calibration: data.calibration,
        test: data.test,
    };
    let spec = TrainSpec {
        model: TinyGptConfig {
            d_model: 64,
            n_layer: 2,
            n_head: 4,
            block: 256,
            pos: PosEncoding::Rope,
            ..TinyGptConfig::default()
        },
        train: TrainConfig {
            epochs: 2,
            batch_size: 16,
            lr: 3e-3,
            seed: 0,
            ..TrainConfig::default()
        },
        settings: PlannerSettings {
            syntax: Syntax::Dsl,
            policy: Policy::copy_free_strings(),
            tools_in_prompt: false,
            conf_floor: f32::MIN,
            confidence: ConfidenceMode::ChosenTokens,
            max_calls: 4,
        },
        target_precision: 1.0,
    };
    let planner = train_planner(
        &splits,
        pace_catalog(),
        &spec,
        Progress::Hidden,
        |_, _, _| {},
    )
    .unwrap()
    .planner;
    let test = planner.meta.test.clone().unwrap();
    assert_eq!(test.invalid_emitted, 0);
    assert!(
        test.agreement >= 0.6,
        "reduced-budget Pace agreement fell to {test:?}"
    );
    // Fresh requests the planner never saw, from another seed: nothing invalid leaves, and
    // the calibrated floor keeps wrong plans rare.
    let mut fresh_cfg = PaceConfig::with_n(300);
    fresh_cfg.seed = 77;
    let fresh = generate_pace(&fresh_cfg).unwrap().test;
    let (summary, _) = evaluate(&planner, &items(&fresh).unwrap(), false, |_, _| {}).unwrap();
    assert_eq!(summary.invalid_emitted, 0);
    assert!(summary.precision >= 0.9, "{summary:?}");
}
