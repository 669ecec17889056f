//! The calibration journal: a calibration stopped part way goes on from the requests it had
//! judged and fits the floor a run from scratch fits; the journal's verdicts really stand in
//! for decodes; another planner's journal, or a torn last line, is not trusted.

mod common;

use std::path::PathBuf;

use plansmith_core::Trace;
use plansmith_planner::journal::{self, fingerprint, trace_digest, Journal, Verdict};
use plansmith_planner::train::{
    calibrate_and_test_choosing, calibrate_and_test_journaled, prepare_for_calibration, Splits,
};
use plansmith_planner::{default_planner, ConfidenceMode, FloorRule, Planner};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("plansmith-journal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn splits(traces: &[Trace], calibration: usize) -> Splits {
    Splits {
        train: Vec::new(),
        calibration: traces[..calibration].to_vec(),
        test: traces[calibration..].to_vec(),
    }
}

/// The embedded planner, made ready to calibrate, and its fingerprint.
fn ready() -> (Planner, String) {
    let mut p = default_planner().unwrap();
    prepare_for_calibration(&mut p);
    let fp = fingerprint(&p).unwrap();
    (p, fp)
}

const RULE: FloorRule = FloorRule::Empirical { precision: 1.0 };

#[test]
fn a_stopped_calibration_resumes_and_fits_the_floor_a_fresh_run_fits() {
    let traces = &common::shipped_test_requests(0)[..36];
    let modes = [ConfidenceMode::ChosenTokens, ConfidenceMode::WeakestToken];
    let (mut fresh, _) = ready();
    calibrate_and_test_choosing(&mut fresh, &splits(traces, 28), RULE, &modes, |_, _, _| {})
        .unwrap();

    let dir = scratch("resume");
    let path = dir.join(journal::FILE);
    // The stopped run judged the first 11 calibration requests.
    let (mut stopped, fp) = ready();
    let mut j = Journal::open(&path, &fp).unwrap();
    calibrate_and_test_journaled(
        &mut stopped,
        &splits(&traces[..11], 11),
        RULE,
        &modes,
        Some(&mut j),
        |_, _, _| {},
    )
    .unwrap();
    assert_eq!(j.len(), 11);
    drop(j);

    let (mut resumed, fp) = ready();
    let mut j = Journal::open(&path, &fp).unwrap();
    assert_eq!(j.len(), 11, "the journal keeps what the stopped run judged");
    calibrate_and_test_journaled(
        &mut resumed,
        &splits(traces, 28),
        RULE,
        &modes,
        Some(&mut j),
        |_, _, _| {},
    )
    .unwrap();
    assert_eq!(
        j.len(),
        36,
        "every calibration and test request is journaled"
    );
    assert_eq!(j.reused(), 11);
    assert_eq!(resumed.settings.conf_floor, fresh.settings.conf_floor);
    assert_eq!(resumed.settings.confidence, fresh.settings.confidence);
    assert_eq!(resumed.meta.calibration, fresh.meta.calibration);
    assert_eq!(resumed.meta.test, fresh.meta.test);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn journaled_verdicts_stand_in_for_decodes_but_not_another_planners() {
    let traces = &common::shipped_test_requests(1)[..12];
    let dir = scratch("stand-in");
    let path = dir.join(journal::FILE);
    let (_, fp) = ready();
    // A journal saying the first request was planned wrong with the highest confidence there
    // is: a zero-wrong floor fitted with it must accept nothing at or below that confidence.
    let claim = Verdict {
        conf_all: 0.0,
        conf_chosen: 0.0,
        conf_weakest: 0.0,
        correct: false,
        valid: true,
    };
    let fit_with = |fp: &str| {
        let _ = std::fs::remove_file(&path);
        let mut j = Journal::open(&path, fp).unwrap();
        j.record("calibration", 0, &trace_digest(&traces[0]), claim)
            .unwrap();
        drop(j);
        let (mut p, own) = ready();
        let mut j = Journal::open(&path, &own).unwrap();
        calibrate_and_test_journaled(
            &mut p,
            &splits(traces, 12),
            RULE,
            &[ConfidenceMode::ChosenTokens],
            Some(&mut j),
            |_, _, _| {},
        )
        .unwrap();
        p
    };
    let believed = fit_with(&fp);
    assert!(
        believed.settings.conf_floor > 0.0,
        "{}",
        believed.settings.conf_floor
    );
    assert_eq!(believed.meta.calibration.as_ref().unwrap().coverage, 0.0);
    // Written for another planner state, the same claim is dropped and the request decoded.
    let other = fit_with("another planner");
    assert!(
        other.settings.conf_floor <= 0.0,
        "{}",
        other.settings.conf_floor
    );
    assert!(other.meta.calibration.as_ref().unwrap().coverage > 0.0);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_torn_last_line_is_dropped_and_appends_go_on_after_the_good_ones() {
    let dir = scratch("torn");
    let path = dir.join(journal::FILE);
    let v = |c: f32| Verdict {
        conf_all: c,
        conf_chosen: f32::NEG_INFINITY,
        conf_weakest: f32::NAN,
        correct: true,
        valid: false,
    };
    let mut j = Journal::open(&path, "fp").unwrap();
    j.record("calibration", 0, "a", v(-0.1)).unwrap();
    j.record("calibration", 1, "b", v(-1e-7)).unwrap();
    drop(j);
    // A crash in the middle of the third line.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"stage":"calibration","index":2,"it"#);
    std::fs::write(&path, &bytes).unwrap();
    let mut j = Journal::open(&path, "fp").unwrap();
    assert_eq!(j.len(), 2);
    j.record("test", 0, "c", v(-2.5)).unwrap();
    drop(j);
    let j = Journal::open(&path, "fp").unwrap();
    assert_eq!(j.len(), 3);
    // Bit for bit, infinities and NaN included.
    let got = j.get("calibration", 1, "b").unwrap();
    assert_eq!(got.conf_all.to_bits(), (-1e-7f32).to_bits());
    assert_eq!(got.conf_chosen, f32::NEG_INFINITY);
    assert!(got.conf_weakest.is_nan());
    assert!(j.get("test", 0, "c").is_some());
    // Keyed by place and digest: the same place with another trace is not reused.
    assert!(j.get("calibration", 1, "a").is_none());
    assert!(j.get("test", 1, "c").is_none());
    drop(j);
    // A whole entry whose newline never reached the disk was not acknowledged either.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap();
    let entry = bytes[last + 1..].to_vec();
    bytes.extend_from_slice(&entry[..entry.len() - 1]);
    std::fs::write(&path, &bytes).unwrap();
    let mut j = Journal::open(&path, "fp").unwrap();
    assert_eq!(j.len(), 3);
    j.record("test", 1, "d", v(-3.0)).unwrap();
    drop(j);
    assert_eq!(Journal::open(&path, "fp").unwrap().len(), 4);
    // Another fingerprint starts over.
    assert_eq!(Journal::open(&path, "other").unwrap().len(), 0);
    assert_eq!(Journal::open(&path, "fp").unwrap().len(), 0);
    std::fs::remove_dir_all(&dir).ok();
}

proptest::proptest! {
    /// Whatever follows the header (damage, a foreign file, a torn write), opening never
    /// panics, keeps at most the entries that parse before the damage, and a verdict recorded
    /// afterwards is read back.
    #[test]
    fn any_bytes_after_the_header_open_and_stay_appendable(
        tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        whole_file in proptest::prelude::any::<bool>(),
    ) {
        let dir = scratch("prop");
        let path = dir.join(journal::FILE);
        let mut j = Journal::open(&path, "fp").unwrap();
        let v = Verdict { conf_all: -0.5, conf_chosen: -0.25, conf_weakest: -2.0, correct: true, valid: true };
        j.record("calibration", 0, "kept", v).unwrap();
        drop(j);
        let mut bytes = if whole_file { Vec::new() } else { std::fs::read(&path).unwrap() };
        bytes.extend_from_slice(&tail);
        std::fs::write(&path, &bytes).unwrap();
        let mut j = Journal::open(&path, "fp").unwrap();
        proptest::prop_assert!(j.len() <= 1);
        j.record("test", 7, "new", v).unwrap();
        drop(j);
        let j = Journal::open(&path, "fp").unwrap();
        proptest::prop_assert_eq!(j.get("test", 7, "new"), Some(v));
        if !whole_file {
            proptest::prop_assert_eq!(j.get("calibration", 0, "kept"), Some(v));
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
