//! mixle's GenerativePlanner invariants, on a planner trained by the test.

mod common;

use plansmith_core::{Plan, Syntax, Trace};
use plansmith_lm::Codec as _;
use plansmith_planner::eval::{evaluate, items};
use plansmith_planner::teacher::TraceFileTeacher;
use plansmith_planner::{Planner, Source};

fn dsl(text: &str) -> Plan {
    let catalog = common::catalog();
    plansmith_core::validate::type_values(&Syntax::Dsl.parse(text).unwrap(), &catalog)
}

#[test]
fn no_silent_wrong_plans_on_fresh_requests() {
    let planner = common::trained();
    let fresh = common::traces(200, 99);
    let (summary, judged) = evaluate(planner, &items(&fresh).unwrap(), true, |_, _| {}).unwrap();
    assert_eq!(summary.silent_wrong, 0, "{summary:?}");
    assert_eq!(summary.invalid_emitted, 0);
    assert!(
        judged.iter().all(|j| j.decoded.is_valid()),
        "a constrained decode produced an invalid plan"
    );
    assert!(
        summary.agreement >= 0.9,
        "the toy domain should be learned: {summary:?}"
    );
    let free = summary.free.unwrap();
    assert!(
        summary.agreement >= free.agreement,
        "constrained {} < free {}",
        summary.agreement,
        free.agreement
    );
}

#[test]
fn correct_plan_scores_above_wrong_and_reversed_plans() {
    let planner = common::trained();
    let request = "refund order 4242 and tell ana";
    let right = planner
        .score(request, &dsl("refund(order_id=4242) | notify(user=ana)"))
        .unwrap();
    let wrong = planner
        .score(
            request,
            &dsl("lookup_order(order_id=4242) | notify(user=ana)"),
        )
        .unwrap();
    // a value the request never said is a plan the grammar never writes: no score
    assert!(matches!(
        planner.score(request, &dsl("refund(order_id=4242) | notify(user=bo)")),
        Err(plansmith_planner::PlannerError::NotWritable(_))
    ));
    let reversed = planner
        .score(request, &dsl("notify(user=ana) | refund(order_id=4242)"))
        .unwrap();
    assert!(right > wrong, "right {right} <= wrong {wrong}");
    assert!(right > reversed, "right {right} <= reversed {reversed}");
    // Scores are the planner's confidence in its own mode: compare with that floor.
    let cal = items(&common::traces(150, 2)).unwrap();
    let (_, judged) = evaluate(planner, &cal, false, |_, _| {}).unwrap();
    let all = plansmith_planner::eval::scored(&judged, planner.settings.confidence);
    let floor = plansmith_planner::fit_floor(&all, 1.0);
    assert!(right >= floor, "right {right} below floor {floor}");
    assert!(
        reversed < floor,
        "reversed {reversed} not below floor {floor}"
    );
}

/// A plan's score is the confidence the planner would have had writing it: scoring the plan
/// a decode produced gives that decode's confidence, in the planner's mode, so `score` and the
/// floor speak of the same number. A plan the grammar does not write has no score.
#[test]
fn a_decoded_plan_scores_its_decoded_confidence() {
    let planner = common::trained();
    let mut checked = 0;
    for t in common::traces(30, 11) {
        let d = planner
            .decode(&plansmith_planner::PlanRequest::new(&t.request))
            .unwrap();
        let Some(plan) = d.plan.clone().filter(|_| d.is_valid()) else {
            continue;
        };
        let score = planner.score(&t.request, &plan).unwrap();
        let decoded = d.confidence(planner.settings.confidence);
        assert!(
            (score - decoded).abs() <= 1e-5 * decoded.abs().max(1.0),
            "{}: score {score}, decoded {decoded} ({:?})",
            t.request,
            d.text
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} valid decodes");
    let unknown = dsl("no_such_tool(x=1)");
    let given = planner.judge_given("refund order 4242", &unknown).unwrap();
    assert!(
        given.score.is_none() && !given.violations.is_empty(),
        "{given:?}"
    );
    assert!(!given.would_accept(f32::NEG_INFINITY));
}

#[test]
fn escalations_are_harvested_and_the_teacher_answers() {
    let dir = std::env::temp_dir().join(format!("plansmith-harvest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let traces_path = dir.join("teacher.jsonl");
    let harvest_path = dir.join("harvest.jsonl");
    let _ = std::fs::remove_file(&harvest_path);
    let teacher_traces: Vec<Trace> = common::traces(30, 5);
    std::fs::write(
        &traces_path,
        plansmith_data::pace::traces_to_jsonl(&teacher_traces),
    )
    .unwrap();
    // An impossible floor: everything escalates to the trace-file teacher.
    let saved = dir.join("planner");
    common::trained().save(&saved).unwrap();
    let mut planner = Planner::load(&saved).unwrap();
    planner.set_floor(f32::MAX);
    let planner = planner
        .with_teacher(Box::new(TraceFileTeacher::load(&traces_path).unwrap()))
        .with_harvest(&harvest_path)
        .unwrap();
    for t in &teacher_traces[..10] {
        let o = planner.plan(&t.request).unwrap();
        assert!(o.escalated);
        assert_eq!(o.source, Source::Teacher);
        assert_eq!(o.calls, t.calls);
    }
    let unknown = planner.plan("where is order 1234567").unwrap();
    assert!(unknown.escalated && unknown.source == Source::None && unknown.calls.is_empty());
    assert!(unknown.reason.unwrap().contains("teacher failed"));
    let report = planner.report();
    assert_eq!(report.escalated, 11);
    assert_eq!(report.harvested_traces, 10);
    assert_eq!(report.teacher_failures, 1);
    let harvested = plansmith_core::trace::read_traces(&harvest_path).unwrap();
    assert_eq!(
        harvested.len() as u64,
        report.escalated - report.teacher_failures
    );
    assert_eq!(harvested[0].request, teacher_traces[0].request);
}

#[test]
fn save_load_plans_identically() {
    let planner = common::trained();
    let dir = std::env::temp_dir().join(format!("plansmith-saveload-{}", std::process::id()));
    planner.save(&dir).unwrap();
    // Saving over an existing planner replaces it atomically.
    planner.save(&dir).unwrap();
    let loaded = Planner::load(&dir).unwrap();
    assert_eq!(loaded.settings, planner.settings);
    for t in common::traces(40, 11) {
        let a = planner
            .decode(&plansmith_planner::PlanRequest::new(t.request.clone()))
            .unwrap();
        let b = loaded
            .decode(&plansmith_planner::PlanRequest::new(t.request.clone()))
            .unwrap();
        assert_eq!(a.text, b.text);
        assert_eq!(a.conf_all.to_bits(), b.conf_all.to_bits());
        assert_eq!(a.conf_weakest.to_bits(), b.conf_weakest.to_bits());
        // The weakest token bounds the mean from below: a plan is never more certain
        // than its least certain token.
        assert!(a.conf_weakest <= a.conf_all && a.conf_all <= 0.0, "{a:?}");
    }
}

#[test]
fn copy_drift_cannot_leave_the_planner() {
    let planner = common::trained();
    for t in common::traces(50, 21) {
        let d = planner
            .decode(&plansmith_planner::PlanRequest::new(t.request.clone()))
            .unwrap();
        for call in d.plan.unwrap().calls {
            for v in call.arguments.values() {
                let s = v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string());
                assert!(t.request.contains(&s), "{s} is not in {:?}", t.request);
            }
        }
    }
}

#[test]
fn undertrained_constrained_beats_free() {
    let splits = plansmith_planner::train::Splits {
        train: common::traces(200, 1),
        ..Default::default()
    };
    let mut spec = common::spec(1, 3);
    spec.train.stop_after = Some(6);
    let weak = plansmith_planner::train::train_planner(
        &splits,
        common::catalog(),
        &spec,
        plansmith_lm::Progress::Hidden,
        |_, _, _| {},
    )
    .unwrap()
    .planner;
    let (summary, _) = evaluate(
        &weak,
        &items(&common::traces(60, 8)).unwrap(),
        true,
        |_, _| {},
    )
    .unwrap();
    let free = summary.free.unwrap();
    assert!(
        summary.agreement >= free.agreement,
        "constrained {} < free {}",
        summary.agreement,
        free.agreement
    );
    assert_eq!(summary.invalid_emitted, 0);
    assert!(
        free.valid < 1.0,
        "an undertrained free decoder should emit invalid plans sometimes"
    );
}

/// The default planner's second pass (`train --init`): training continues from the first
/// planner's weights, codec and shape, on fresh traces, and ends better than it started.
#[test]
fn a_second_pass_continues_from_the_first() {
    let held_out = |train| plansmith_planner::train::Splits {
        train,
        calibration: common::traces(100, 2),
        test: common::traces(100, 3),
    };
    let mut first_spec = common::spec(1, 3);
    first_spec.train.stop_after = Some(10);
    let first = plansmith_planner::train::train_planner(
        &held_out(common::traces(200, 1)),
        common::catalog(),
        &first_spec,
        plansmith_lm::Progress::Hidden,
        |_, _, _| {},
    )
    .unwrap()
    .planner;
    let first_agreement = first.meta.test.as_ref().unwrap().agreement;
    let (model, codec) = first.tiny().unwrap();
    let (first_shape, first_vocab) = (model.config().clone(), codec.vocab_size());
    // Another shape in the spec: the initial planner's must win.
    let mut second_spec = common::spec(6, 4);
    second_spec.model.d_model = 64;
    let second = plansmith_planner::train::train_planner_from(
        &held_out(common::traces(600, 11)),
        common::catalog(),
        &second_spec,
        Some(first),
        plansmith_lm::Progress::Hidden,
        |_, _, _| {},
    )
    .unwrap()
    .planner;
    let (model, codec) = second.tiny().unwrap();
    assert_eq!(model.config(), &first_shape);
    assert_eq!(codec.vocab_size(), first_vocab);
    assert_eq!(second.meta.training["continued_from_init"], true);
    assert_eq!(
        second.meta.training["model"]["d_model"],
        first_shape.d_model
    );
    // Measured: 0.27 after the ten-step first pass, 0.93 after the second.
    let second_agreement = second.meta.test.as_ref().unwrap().agreement;
    assert!(
        second_agreement >= 0.9 && second_agreement > first_agreement,
        "first pass {first_agreement}, second {second_agreement}"
    );
}
