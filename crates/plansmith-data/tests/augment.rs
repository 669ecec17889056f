//! Tools-in-prompt augmentation and the synthetic families.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use plansmith_core::{Catalog, PlanValidator, Policy, Syntax, Trace};
use plansmith_data::augment::{augment_traces, prompt_catalog_line, AugmentConfig};
use plansmith_data::pace::{generate_pace, pace_catalog, PaceConfig};
use plansmith_data::{families, synthetic_traces};

/// The trace's plan round-trips through the DSL and validates, copy-fidelity included,
/// against the trace's own catalog.
fn check(t: &Trace) {
    thread_local! {
        static CACHE: RefCell<HashMap<String, Rc<PlanValidator>>> = RefCell::new(HashMap::new());
    }
    let catalog = Catalog::from_value(t.tools.as_ref().expect("tools")).unwrap();
    let v = CACHE.with(|c| {
        c.borrow_mut()
            .entry(catalog.hash())
            .or_insert_with(|| Rc::new(PlanValidator::new(&catalog).unwrap()))
            .clone()
    });
    let text = Syntax::Dsl.render(&t.plan());
    let typed = v.type_values(&Syntax::Dsl.parse(&text).unwrap());
    let errs = v.validate(&typed, &Policy::copy_free_strings(), Some(&t.request));
    assert!(
        errs.is_empty(),
        "{:?} -> {text}: {errs:?}\n{}",
        t.request,
        catalog.compact_line()
    );
    assert_eq!(typed, t.plan(), "{text}");
}

/// The Pace tools a held-out-`wait` planner trains with.
fn pace_without_wait() -> Vec<plansmith_core::Tool> {
    let mut tools = pace_catalog().tools;
    tools.retain(|t| t.name != "wait");
    tools
}

#[test]
fn synthetic_families_validate_and_are_deterministic() {
    let fams = families();
    assert!(fams.len() >= 8);
    for f in &fams {
        assert!(f.catalog().len() >= 2, "{}", f.name);
        assert!(f.catalog().tools.iter().all(|t| !t.description.is_empty()));
    }
    let traces = synthetic_traces(800, 3).unwrap();
    assert_eq!(traces.len(), 800);
    traces.iter().for_each(check);
    let names: std::collections::HashSet<&str> = traces
        .iter()
        .flat_map(|t| t.calls.iter().map(|c| c.name.as_str()))
        .collect();
    assert!(names.len() >= 25, "{names:?}");
    assert_eq!(synthetic_traces(800, 3).unwrap(), traces);
}

#[test]
fn augmented_traces_stay_valid_and_carry_modified_catalogs() {
    let pace = generate_pace(&PaceConfig::with_n(300)).unwrap().train;
    let mut input = pace.clone();
    input.extend(synthetic_traces(150, 1).unwrap());
    let cfg = AugmentConfig {
        copies: 2,
        ..Default::default()
    };
    let (out, stats) = augment_traces(&input, Some(&pace_catalog()), &cfg).unwrap();
    assert_eq!(out.len(), input.len() * 2);
    out.iter().for_each(check);
    assert!(
        stats.renamed_tools > 300 && stats.renamed_params > 150 && stats.shuffled > 700,
        "{stats:?}"
    );
    assert!(
        stats.retargeted_to_clarify > 10 && stats.retargeted_to_no_call > 10,
        "{stats:?}"
    );
    assert!(stats.with_distractors > 600, "{stats:?}");
    // ~30% carry invented tools too; `check` above validated every plan against them.
    let share = stats.with_invented_distractors as f64 / out.len() as f64;
    assert!((0.2..0.4).contains(&share), "{stats:?}");
    // Some catalogs have no Pace name left at all.
    let pace_names: Vec<String> = pace_catalog().names().map(String::from).collect();
    let renamed = out
        .iter()
        .filter(|t| {
            Catalog::from_value(t.tools.as_ref().unwrap())
                .unwrap()
                .names()
                .all(|n| !pace_names.iter().any(|p| p == n))
        })
        .count();
    assert!(renamed > 50, "{renamed}");
    assert_eq!(
        augment_traces(&input, Some(&pace_catalog()), &cfg)
            .unwrap()
            .0,
        out
    );
}

#[test]
fn removing_the_needed_tool_retargets_to_clarify_or_no_call() {
    let pace = generate_pace(&PaceConfig::with_n(300)).unwrap().train;
    let cfg = AugmentConfig {
        remove_needed: 1.0,
        rename_tools: 0.0,
        rename_params: 0.0,
        ..Default::default()
    };
    let err = augment_traces(&pace, None, &cfg).unwrap_err();
    assert!(err.to_string().contains("trace 1: no `tools`"), "{err}");
    let (out, _) = augment_traces(&pace, Some(&pace_catalog()), &cfg).unwrap();
    for (before, after) in pace.iter().zip(&out) {
        if before.calls.is_empty() {
            // An out-of-scope request needs no tool: there is none to remove.
            assert!(after.calls.is_empty(), "{after:?}");
            continue;
        }
        let catalog = Catalog::from_value(after.tools.as_ref().unwrap()).unwrap();
        assert!(catalog.get(&before.calls[0].name).is_none());
        if before.calls[0].name == "clarify" {
            assert!(after.calls.is_empty());
        } else {
            assert_eq!(after.calls[0].name, "clarify");
            assert_eq!(after.calls[0].arguments["kind"], "missing_value");
        }
        check(after);
    }
    let synth = synthetic_traces(50, 2).unwrap();
    let (out, stats) = augment_traces(&synth, None, &cfg).unwrap();
    assert!(
        out.iter()
            .all(|t| t.calls.is_empty() || t.calls[0].name == "clarify"),
        "{stats:?}"
    );
}

#[test]
fn prompt_catalog_line_is_the_compact_line() {
    let c = pace_catalog();
    assert_eq!(prompt_catalog_line(&c), c.compact_line());
    assert!(prompt_catalog_line(&c).starts_with("tools: perform(action, target?"));
}

#[test]
fn invented_tools_validate_need_the_catalog_and_avoid_the_held_out_verb() {
    let others = pace_without_wait();
    let opts = plansmith_data::NovelOptions {
        alternatives: true,
        wide_spelling: true,
        ..Default::default()
    };
    let traces = plansmith_data::novel_traces_with(1500, 5, &others, &others, opts).unwrap();
    assert_eq!(traces.len(), 1500);
    assert_eq!(
        plansmith_data::novel_traces_with(1500, 5, &others, &others, opts).unwrap(),
        traces
    );
    assert_ne!(
        plansmith_data::novel_traces(50, 6, &others, &others).unwrap()[..],
        traces[..50]
    );
    let (mut with_limit, mut multi_verb, mut said_second, mut two_words) = (0, 0, 0, 0);
    let mut initials = std::collections::BTreeSet::new();
    for t in &traces {
        check(t);
        let catalog = Catalog::from_value(t.tools.as_ref().unwrap()).unwrap();
        let invented: Vec<_> = catalog
            .tools
            .iter()
            .filter(|x| others.iter().all(|o| o.name != x.name))
            .collect();
        // Another invented tool, or the whole home catalog: the request's words, not the
        // catalog's shape, say which tool.
        assert!(
            invented.len() >= 2 || catalog.tools.len() > others.len(),
            "{}",
            catalog.described_lines()
        );
        assert_eq!(t.calls.len(), 1);
        let called = catalog.get(&t.calls[0].name).unwrap();
        assert!(invented.iter().any(|x| x.name == called.name));
        // The request names the tool by its name's verb or a verb its description lists
        // ("Archive, shelve or put away a note.").
        let request = t.request.to_lowercase();
        let name_verb = called.name.split('_').next().unwrap().to_string();
        initials.extend(name_verb.chars().next());
        let listed = called.description.to_lowercase();
        let listed = listed.split(" a ").next().unwrap();
        let listed: Vec<&str> = listed
            .split([','])
            .flat_map(|v| v.split(" or "))
            .map(str::trim)
            .collect();
        assert!(
            request.contains(&name_verb) || listed.iter().any(|v| request.contains(v)),
            "{request:?} does not name {} ({})",
            called.name,
            called.description
        );
        multi_verb += (listed.len() > 1) as usize;
        said_second += listed
            .iter()
            .skip(1)
            .any(|v| request.contains(v) && !v.contains(&name_verb))
            as usize;
        two_words += listed
            .iter()
            .any(|v| v.contains(' ') && request.contains(v)) as usize;
        // The held-out Pace verb's words never appear: its calls stay unseen in training.
        for word in ["wait", "pause", "hold on"] {
            assert!(!request.contains(word), "{request:?}");
        }
        for tool in &invented {
            for p in tool.param_names() {
                assert!(p != "condition" && p != "timeout_seconds", "{p}");
            }
        }
        with_limit += t.calls[0].arguments.values().any(|v| v.is_i64()) as usize;
    }
    // Integer limits are common but not universal.
    assert!((150..900).contains(&with_limit), "{with_limit}");
    // About half the descriptions list alternatives, and requests use them, two-word ones too.
    assert!((500..1000).contains(&multi_verb), "{multi_verb}");
    assert!(said_second > 150, "{said_second}");
    assert!(two_words > 50, "{two_words}");
    // Wide spelling: names begin with nearly every letter (`w`, `h`, `y` included).
    for c in ['w', 'h', 'y', 'j', 'c'] {
        assert!(initials.contains(&c), "{initials:?}");
    }
}

#[test]
fn duration_requests_fill_the_string_and_a_limit_only_in_its_own_unit() {
    let others = pace_without_wait();
    let plain = plansmith_data::NovelOptions {
        wide_spelling: true,
        ..Default::default()
    };
    let durations = plansmith_data::NovelOptions {
        durations: true,
        ..plain
    };
    let traces = plansmith_data::novel_traces_with(2000, 9, &others, &others, durations).unwrap();
    let plain_traces = plansmith_data::novel_traces_with(2000, 9, &others, &others, plain).unwrap();
    let is_duration = |v: &serde_json::Value| {
        let words: Vec<&str> = v.as_str().unwrap_or("").split(' ').collect();
        matches!(words[..], [n, "seconds" | "minutes" | "hours"] if n.parse::<u32>().is_ok())
    };
    let (mut only_duration, mut with_limit, mut without_limit) = (0, 0, 0);
    for t in &traces {
        check(t);
        let args = &t.calls[0].arguments;
        let Some(duration) = args.values().find(|v| is_duration(v)) else {
            continue;
        };
        only_duration += 1;
        let duration = duration.as_str().unwrap();
        let (number, unit) = duration.split_once(' ').unwrap();
        let catalog = Catalog::from_value(t.tools.as_ref().unwrap()).unwrap();
        let tool = catalog.get(&t.calls[0].name).unwrap();
        assert_eq!(tool.required().len(), 1, "{}", tool.signature());
        assert!(t.request.contains(duration), "{:?}", t.request);
        // The limit gets the number exactly when its name counts in the duration's unit.
        let limit = tool.param_names().into_iter().find(|p| {
            [
                "seconds", "minutes", "hours", "days", "times", "items", "percent",
            ]
            .iter()
            .any(|u| p.ends_with(u))
        });
        match limit.filter(|p| p.ends_with(unit)) {
            Some(p) => {
                assert_eq!(args[p], serde_json::json!(number.parse::<i64>().unwrap()));
                with_limit += 1;
            }
            None => {
                assert_eq!(args.len(), 1, "{:?} -> {args:?}", t.request);
                without_limit += 1;
            }
        }
    }
    // About a fifth of the one-required-string tools' requests; both kinds of limit occur.
    assert!((150..500).contains(&only_duration), "{only_duration}");
    assert!(
        with_limit > 20 && without_limit > 100,
        "{with_limit} {without_limit}"
    );
    // Without the option no request is duration-only.
    assert!(!plain_traces
        .iter()
        .any(|t| t.calls[0].arguments.values().any(is_duration)));
}

#[test]
fn grouped_augmentation_shares_one_catalog_per_group_and_stays_valid() {
    let pace = generate_pace(&PaceConfig::with_n(400)).unwrap().train;
    let cfg = AugmentConfig {
        group: 16,
        remove_needed: 0.5,
        ..Default::default()
    };
    let (out, stats) = augment_traces(&pace, Some(&pace_catalog()), &cfg).unwrap();
    assert_eq!(out.len(), pace.len());
    out.iter().for_each(check);
    // Each run of 16 consecutive traces carries one catalog; runs differ.
    let catalogs: Vec<&serde_json::Value> = out.iter().map(|t| t.tools.as_ref().unwrap()).collect();
    for chunk in catalogs.chunks(16) {
        assert!(chunk.iter().all(|c| *c == chunk[0]));
    }
    let distinct: std::collections::HashSet<String> =
        catalogs.iter().map(|c| c.to_string()).collect();
    assert!(distinct.len() > 15, "{}", distinct.len());
    // A removed tool is removed for the whole group: its callers ask or call nothing.
    assert!(stats.removed_needed > 0, "{stats:?}");
    assert_eq!(
        stats.removed_needed,
        stats.retargeted_to_clarify + stats.retargeted_to_no_call
    );
    // Invented tools: `group` requests per tool and catalog.
    let others = pace_without_wait();
    let opts = plansmith_data::NovelOptions {
        group: 5,
        ..Default::default()
    };
    let novel = plansmith_data::novel_traces_with(100, 2, &others, &others, opts).unwrap();
    assert_eq!(novel.len(), 100);
    novel.iter().for_each(check);
    let per_catalog = novel
        .iter()
        .fold(std::collections::HashMap::new(), |mut m, t| {
            *m.entry(t.tools.as_ref().unwrap().to_string()).or_insert(0) += 1;
            m
        });
    assert!(per_catalog.len() <= 40, "{}", per_catalog.len());
    assert!(per_catalog.values().all(|&n| n <= 5), "{per_catalog:?}");
}

#[test]
fn typed_parameters_say_what_they_hold_and_get_values_of_their_kind() {
    let others = pace_without_wait();
    let typed = plansmith_data::NovelOptions {
        typed: true,
        ..Default::default()
    };
    let traces = plansmith_data::novel_traces_with(1500, 4, &others, &others, typed).unwrap();
    let plain =
        plansmith_data::novel_traces_with(1500, 4, &others, &others, Default::default()).unwrap();
    // A person-named parameter gets a person in typed requests; untyped requests put any
    // phrase anywhere (the event-like values "... arrives" / "... calls back" go to it too).
    let people = [
        "Maria",
        "Tom",
        "Jenna",
        "Dr. Patel",
        "Lucas",
        "Priya Shah",
        "my sister",
        "the landlord",
        "Coach Rivera",
        "Omar",
    ];
    let (mut to_person, mut described) = (0, 0);
    for t in &traces {
        check(t);
        let catalog = Catalog::from_value(t.tools.as_ref().unwrap()).unwrap();
        let tool = catalog.get(&t.calls[0].name).unwrap();
        for (k, v) in &t.calls[0].arguments {
            if let Some(desc) = tool.parameters["properties"][k]["description"].as_str() {
                described += 1;
                if desc == "The person it is for." {
                    let v = v.as_str().unwrap().to_lowercase();
                    assert!(people.iter().any(|p| p.to_lowercase() == v), "{k} = {v}");
                    to_person += 1;
                }
            }
        }
    }
    assert!(
        to_person > 50 && described > 1000,
        "{to_person} {described}"
    );
    let plain_described = plain
        .iter()
        .filter(|t| {
            let catalog = Catalog::from_value(t.tools.as_ref().unwrap()).unwrap();
            let tool = catalog.get(&t.calls[0].name).unwrap();
            t.calls[0]
                .arguments
                .keys()
                .any(|k| tool.parameters["properties"][k]["description"].is_string())
        })
        .count();
    assert_eq!(plain_described, 0);
}
