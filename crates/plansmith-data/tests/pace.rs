//! The Pace generator's contract: coverage, held-out verb, disjoint splits, copy-fidelity after
//! a DSL round trip, determinism, and one plan per request.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use plansmith_core::{Plan, PlanValidator, Policy, Syntax, Trace};
use plansmith_data::pace::{
    generate_pace, pace_catalog, traces_to_jsonl, PaceConfig, PaceData, PACE_VERBS,
};

fn default_data() -> &'static PaceData {
    static DATA: OnceLock<PaceData> = OnceLock::new();
    DATA.get_or_init(|| generate_pace(&PaceConfig::default()).unwrap())
}

fn all(d: &PaceData) -> impl Iterator<Item = &Trace> {
    d.train
        .iter()
        .chain(&d.calibration)
        .chain(&d.test)
        .chain(&d.heldout)
}

#[test]
fn default_sizes_and_full_coverage() {
    let d = default_data();
    assert_eq!(
        (d.train.len(), d.calibration.len(), d.test.len()),
        (6000, 600, 800)
    );
    let s = &d.stats;
    for verb in PACE_VERBS {
        assert!(
            s.per_verb.get(verb).copied().unwrap_or(0) >= 100,
            "{verb}: {:?}",
            s.per_verb
        );
        assert!(
            s.train_per_verb.get(verb).copied().unwrap_or(0) > 0,
            "{verb} missing from train"
        );
    }
    let actions = [
        "click",
        "double_click",
        "right_click",
        "type",
        "key",
        "scroll",
        "drag",
        "multi_select",
        "hover",
    ];
    for a in actions {
        assert!(
            s.per_action.get(a).copied().unwrap_or(0) >= 100,
            "{a}: {:?}",
            s.per_action
        );
    }
    for t in [
        "ui_element",
        "app",
        "file",
        "url",
        "window",
        "contact",
        "text",
    ] {
        assert!(
            s.per_entity_type.get(t).copied().unwrap_or(0) >= 100,
            "{t}: {:?}",
            s.per_entity_type
        );
    }
    for k in ["choice", "missing_value", "confirmation"] {
        assert!(
            s.per_clarify_kind.get(k).copied().unwrap_or(0) >= 100,
            "{k}: {:?}",
            s.per_clarify_kind
        );
    }
    assert_eq!(
        s.per_query_source_mode.len(),
        26,
        "{:?}",
        s.per_query_source_mode
    );
    assert_eq!(s.per_compose_format.len(), 7);
    assert_eq!((s.conflicts_skipped, s.invalid_skipped), (0, 0));
    assert!(
        s.unique_templates > 1000 && s.unique_skeletons > 5000,
        "{s:?}"
    );
}

#[test]
fn every_trace_validates_with_copy_fidelity_after_a_dsl_round_trip() {
    let catalog = pace_catalog();
    let validator = PlanValidator::new(&catalog).unwrap();
    let policy = Policy::copy_free_strings();
    for t in all(default_data()) {
        assert!(t.tools.is_none());
        let plan = t.plan();
        // One call; two for a request that asks for two things; none for a request no Pace
        // tool serves.
        assert!(plan.calls.len() <= 2, "{t:?}");
        let text = Syntax::Dsl.render(&plan);
        let parsed = Syntax::Dsl
            .parse(&text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let typed = validator.type_values(&parsed);
        let violations = validator.validate(&typed, &policy, Some(&t.request));
        assert!(
            violations.is_empty(),
            "{:?} -> {text}: {violations:?}",
            t.request
        );
        assert_eq!(typed, plan, "{:?} -> {text}", t.request);
    }
}

#[test]
fn splits_share_no_request_and_no_request_has_two_plans() {
    let d = default_data();
    let mut split_of: HashMap<String, &str> = HashMap::new();
    for (name, split) in [
        ("train", &d.train),
        ("calibration", &d.calibration),
        ("test", &d.test),
    ] {
        for t in split.iter() {
            if let Some(other) = split_of.insert(t.request.to_lowercase(), name) {
                panic!("{:?} in {other} and {name}", t.request);
            }
        }
    }
    let mut plan_of: HashMap<&str, Plan> = HashMap::new();
    for t in all(d) {
        if let Some(p) = plan_of.insert(&t.request, t.plan()) {
            assert_eq!(p, t.plan(), "{:?} has two plans", t.request);
        }
    }
}

#[test]
fn held_out_verb_is_absent_from_train_and_complete_in_heldout() {
    let cfg = PaceConfig {
        holdout_verb: Some("schedule".into()),
        ..PaceConfig::with_n(1500)
    };
    let d = generate_pace(&cfg).unwrap();
    assert_eq!(
        (d.train.len(), d.calibration.len(), d.test.len()),
        (1500, 150, 200)
    );
    for t in d.train.iter().chain(&d.calibration).chain(&d.test) {
        assert!(t.calls.iter().all(|c| c.name != "schedule"), "{t:?}");
    }
    assert!(d.heldout.len() > 30, "{}", d.heldout.len());
    assert!(d.heldout.iter().all(|t| t.calls[0].name == "schedule"));
    assert_eq!(d.stats.splits["heldout_verb"], d.heldout.len());
    assert!(!d.stats.train_per_verb.contains_key("schedule"));
    let err = generate_pace(&PaceConfig {
        holdout_verb: Some("fly".into()),
        ..PaceConfig::with_n(10)
    })
    .unwrap_err();
    assert!(err.to_string().contains("not a Pace verb"), "{err}");
}

#[test]
fn a_held_out_verb_is_never_said_in_training() {
    // Pace's "wait" alone means clarify (no condition given): with `wait` held out, those
    // requests would teach that the word is not a tool, so they go too.
    let d = generate_pace(&PaceConfig {
        holdout_verb: Some("wait".into()),
        ..PaceConfig::with_n(6000)
    })
    .unwrap();
    assert!(d.stats.holdout_mentions_skipped > 0);
    for t in d.train.iter().chain(&d.calibration).chain(&d.test) {
        let words: Vec<String> = t
            .request
            .split(|c: char| !c.is_alphanumeric())
            .map(str::to_lowercase)
            .collect();
        assert!(!words.iter().any(|w| w == "wait"), "{:?}", t.request);
    }
    assert!(d
        .heldout
        .iter()
        .any(|t| t.request.to_lowercase().contains("wait")));
}

#[test]
fn same_seed_same_files_other_seed_other_files() {
    let base = std::env::temp_dir().join(format!("plansmith-data-pace-{}", std::process::id()));
    let cfg = PaceConfig {
        seed: 11,
        holdout_verb: Some("wait".into()),
        ..PaceConfig::with_n(600)
    };
    let files = [
        "train.jsonl",
        "calibration.jsonl",
        "test.jsonl",
        "heldout_verb.jsonl",
        "stats.json",
    ];
    let mut contents = Vec::new();
    for run in ["a", "b"] {
        let dir = base.join(run);
        let stats = plansmith_data::run_pace(&dir, &cfg).unwrap();
        assert_eq!(stats.splits["train"], 600);
        contents.push(files.map(|f| std::fs::read(dir.join(f)).unwrap()));
    }
    assert_eq!(contents[0], contents[1]);
    let read = plansmith_core::trace::read_traces(base.join("a/train.jsonl")).unwrap();
    assert_eq!(traces_to_jsonl(&read).into_bytes(), contents[0][0]);
    let other = generate_pace(&PaceConfig {
        seed: 12,
        ..cfg.clone()
    })
    .unwrap();
    assert_ne!(traces_to_jsonl(&other.train).into_bytes(), contents[0][0]);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn requests_are_diverse() {
    let d = default_data();
    let requests: HashSet<&str> = all(d).map(|t| t.request.as_str()).collect();
    assert_eq!(requests.len(), all(d).count());
    let lower = requests
        .iter()
        .filter(|r| r.chars().next().is_some_and(char::is_lowercase))
        .count();
    let upper = requests
        .iter()
        .filter(|r| r.chars().next().is_some_and(char::is_uppercase))
        .count();
    assert!(lower > 1000 && upper > 1000, "{lower} {upper}");
    for marker in ["could you", "please", "um", "thanks", "?"] {
        assert!(
            requests
                .iter()
                .filter(|r| r.to_lowercase().contains(marker))
                .count()
                > 50,
            "{marker}"
        );
    }
    // Numbers as digits and as words.
    let set_words = all(d)
        .filter(|t| t.calls.first().is_some_and(|c| c.name == "set"))
        .filter(|t| {
            t.calls[0].arguments["value"].as_str().is_some_and(|v| {
                let v = v.to_lowercase();
                [
                    "ten", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
                ]
                .iter()
                .any(|w| v.starts_with(w))
            })
        })
        .count();
    assert!(set_words > 0);
    for s in d.stats.prefixes_per_verb.values() {
        assert!(*s >= 100, "{:?}", d.stats.prefixes_per_verb);
    }
}

#[test]
fn requests_no_pace_tool_serves_call_nothing_and_look_like_the_rest() {
    let d = default_data();
    let traces: Vec<&Trace> = all(d).collect();
    let none: Vec<&&Trace> = traces.iter().filter(|t| t.calls.is_empty()).collect();
    let share = none.len() as f64 / traces.len() as f64;
    assert!((0.02..0.10).contains(&share), "{share}");
    assert_eq!(d.stats.per_intent["none"], none.len());
    // Wrapped like any request (politeness, fillers, casing), so the wrapper says nothing.
    assert!(none
        .iter()
        .any(|t| t.request.to_lowercase().starts_with("could you")));
    assert!(none
        .iter()
        .any(|t| t.request.chars().all(|c| !c.is_lowercase())));
}

#[test]
fn people_say_more_than_the_template() {
    let d = default_data();
    let lower: Vec<String> = all(d).map(|t| t.request.to_lowercase()).collect();
    let count = |needle: &str| lower.iter().filter(|r| r.contains(needle)).count();
    // Hesitations inside the instruction, context before it, texting shorthand.
    assert!(count(" uh ") + count(" um ") > 20);
    assert!(count("before i forget, ") + count("while you're at it, ") > 5);
    assert!(count("pls") + count("plz") + count("thx") > 20);
    // Documents named by a title without an extension, copied without the kind word.
    let titled = all(d)
        .flat_map(|t| &t.calls)
        .filter_map(|c| c.arguments.get("target"))
        .filter(|t| t["type"] == "file")
        .filter_map(|t| t["label"].as_str())
        .filter(|l| !l.contains('.') && l.contains(' '))
        .count();
    assert!(titled > 20, "{titled}");
}

#[test]
fn some_requests_ask_for_two_things_and_get_both_calls_in_order() {
    let d = default_data();
    let two: Vec<&Trace> = all(d).filter(|t| t.calls.len() == 2).collect();
    let share = two.len() as f64 / all(d).count() as f64;
    assert!((0.03..0.12).contains(&share), "{share}");
    for t in &two {
        // Neither call is a clarify (whose question would be the whole request).
        assert!(t.calls.iter().all(|c| c.name != "clarify"), "{t:?}");
    }
    // The first call's copied values come before the second's in the request.
    let ordered = two
        .iter()
        .filter(|t| {
            let first_value = |c: &plansmith_core::Call| {
                c.arguments
                    .values()
                    .flat_map(|v| match v {
                        serde_json::Value::Object(m) => m.values().cloned().collect(),
                        v => vec![v.clone()],
                    })
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .filter_map(|s| t.request.find(&s))
                    .min()
            };
            match (first_value(&t.calls[0]), first_value(&t.calls[1])) {
                (Some(a), Some(b)) => a < b,
                _ => true,
            }
        })
        .count();
    assert!(ordered * 10 >= two.len() * 9, "{ordered} of {}", two.len());
}

#[test]
fn key_chords_are_also_spoken() {
    let spoken = all(default_data())
        .flat_map(|t| &t.calls)
        .filter_map(|c| c.arguments.get("keys").and_then(|k| k.as_str()))
        .filter(|k| {
            let k = k.to_lowercase();
            k.split(' ').count() >= 2
                && [
                    "command", "cmd", "control", "ctrl", "shift", "alt", "option",
                ]
                .iter()
                .any(|m| k.starts_with(m))
        })
        .count();
    assert!(spoken > 20, "{spoken}");
}

#[test]
fn counts_are_also_said_in_words_and_planned_as_numbers() {
    // "scroll down three times" -> amount 3: the copy rule takes a number the request states
    // in words (plansmith_core::policy::number_words); the round-trip test above validates it.
    let in_words = all(default_data())
        .filter(|t| {
            t.calls.iter().any(|c| {
                c.arguments
                    .get("amount")
                    .and_then(|a| a.as_i64())
                    .is_some_and(|n| {
                        let words = plansmith_core::policy::number_in_words(n as u32).unwrap();
                        t.request.to_lowercase().contains(&words)
                            && !t.request.contains(&n.to_string())
                    })
            })
        })
        .count();
    assert!(in_words > 20, "{in_words}");
}
