//! The Pace domain: synthetic requests for the ten Pace verbs, with plans whose every free
//! string is a word-aligned span of the request.
//!
//! `plansmith data pace --out DIR [--n N] [--seed S] [--holdout-verb VERB]` calls
//! [`run_pace`], which writes `train.jsonl`, `calibration.jsonl`, `test.jsonl`,
//! `heldout_verb.jsonl` and `stats.json`.

pub(crate) mod gen;
pub(crate) mod vocab;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use plansmith_core::trace::write_atomic;
use plansmith_core::{Catalog, Plan, PlanValidator, Policy, Syntax, Trace, TraceSource};

use crate::rng::Rng;
use crate::DataError;

/// The bundled Pace catalog (`examples/pace/tools.json`, ten verbs).
pub const PACE_TOOLS_JSON: &str = include_str!("../../../../examples/pace/tools.json");

/// The ten Pace verbs, in catalog order.
pub const PACE_VERBS: [&str; 10] = [
    "perform",
    "set",
    "open",
    "query",
    "compose",
    "clarify",
    "say",
    "query_memory",
    "wait",
    "schedule",
];

/// The Pace catalog.
pub fn pace_catalog() -> Catalog {
    Catalog::from_json_str(PACE_TOOLS_JSON).expect("the bundled Pace catalog imports")
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaceConfig {
    pub n_train: usize,
    pub n_calibration: usize,
    pub n_test: usize,
    pub seed: u64,
    /// A Pace verb whose examples all go to `heldout_verb.jsonl` and nowhere else.
    pub holdout_verb: Option<String>,
    /// Share of training traces that also get an ALL-CAPS copy ([`crate::casing`]); the
    /// calibration and test splits keep the natural mix. 0 by default.
    #[serde(default)]
    pub upper_train: f64,
}

impl Default for PaceConfig {
    /// 6000 train / 600 calibration / 800 test, seed 0, no held-out verb.
    fn default() -> Self {
        PaceConfig::with_n(6000)
    }
}

impl PaceConfig {
    /// `n` training examples, `n/10` calibration and `2n/15` test ones (the CLI's `--n`).
    pub fn with_n(n: usize) -> PaceConfig {
        PaceConfig {
            n_train: n,
            n_calibration: n / 10,
            n_test: n * 2 / 15,
            seed: 0,
            holdout_verb: None,
            upper_train: 0.0,
        }
    }
}

/// Share of requests that ask for two things at once (two calls).
const COMPOUND_SHARE: f64 = 0.07;
/// Share of slot values drawn from outside the vocabulary lists (open words, spoken key
/// chords, counts as words).
const OPEN_VALUE_SHARE: f64 = 0.3;

/// The generated splits.
#[derive(Debug, Clone, PartialEq)]
pub struct PaceData {
    pub train: Vec<Trace>,
    pub calibration: Vec<Trace>,
    pub test: Vec<Trace>,
    /// Every generated example of the held-out verb (empty without one).
    pub heldout: Vec<Trace>,
    pub stats: PaceStats,
}

/// Counts and diversity measures, written as `stats.json`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PaceStats {
    pub seed: u64,
    pub holdout_verb: Option<String>,
    /// Examples per split (`train`, `calibration`, `test`, `heldout_verb`).
    pub splits: BTreeMap<String, usize>,
    /// Over all splits.
    pub per_verb: BTreeMap<String, usize>,
    pub train_per_verb: BTreeMap<String, usize>,
    pub per_action: BTreeMap<String, usize>,
    pub per_entity_type: BTreeMap<String, usize>,
    pub per_clarify_kind: BTreeMap<String, usize>,
    pub per_query_source_mode: BTreeMap<String, usize>,
    pub per_compose_format: BTreeMap<String, usize>,
    /// Per generator intent (`perform.click`, `clarify.choice`, ...).
    pub per_intent: BTreeMap<String, usize>,
    /// Distinct core templates (the request without wrappers, slots masked).
    pub unique_templates: usize,
    pub templates_per_verb: BTreeMap<String, usize>,
    /// Distinct whole-request skeletons (wrappers included, slots masked, lowercased).
    pub unique_skeletons: usize,
    pub skeletons_per_verb: BTreeMap<String, usize>,
    /// Distinct lowercased first-three-word prefixes of requests, per verb.
    pub prefixes_per_verb: BTreeMap<String, usize>,
    /// Distinct values (case-insensitive) per slot kind that occur in the data.
    pub vocabulary: BTreeMap<String, usize>,
    pub distinct_requests: usize,
    pub mean_request_chars: f64,
    pub max_request_chars: usize,
    /// Draws skipped because their request (case-insensitively) was already generated.
    pub duplicates_skipped: usize,
    /// Draws skipped because an equal request had a different plan (template ambiguity; 0).
    pub conflicts_skipped: usize,
    /// Draws skipped because the plan failed the DSL round trip or validation (a bug; 0).
    pub invalid_skipped: usize,
    /// ALL-CAPS copies added to the training split (`upper_train`).
    #[serde(default)]
    pub upper_train_added: usize,
    /// With a held-out verb: other verbs' requests that say the verb's name (`"wait"` ->
    /// clarify), dropped so that the word is as new to a planner as the tool.
    #[serde(default)]
    pub holdout_mentions_skipped: usize,
}

/// Generate the Pace data set. Deterministic per config.
pub fn generate_pace(cfg: &PaceConfig) -> Result<PaceData, DataError> {
    if let Some(v) = &cfg.holdout_verb {
        if !PACE_VERBS.contains(&v.as_str()) {
            return Err(DataError::Invalid(format!(
                "--holdout-verb `{v}` is not a Pace verb (expected one of {})",
                PACE_VERBS.join(", ")
            )));
        }
    }
    let catalog = pace_catalog();
    let validator = PlanValidator::new(&catalog)?;
    let policy = Policy::copy_free_strings();
    let need = cfg.n_train + cfg.n_calibration + cfg.n_test;
    let mut rng = Rng::new(cfg.seed);
    let weights: Vec<f64> = gen::INTENTS.iter().map(|i| i.2).collect();

    let mut seen: HashMap<String, String> = HashMap::new();
    let mut pool: Vec<(Trace, gen::Realized)> = Vec::with_capacity(need);
    let mut heldout: Vec<(Trace, gen::Realized)> = Vec::new();
    let mut stats = PaceStats {
        seed: cfg.seed,
        holdout_verb: cfg.holdout_verb.clone(),
        ..Default::default()
    };
    let mut attempts = 0usize;
    while pool.len() < need {
        attempts += 1;
        if attempts > need.max(100) * 200 {
            return Err(DataError::Invalid(format!(
                "could only generate {} distinct requests of the {need} asked for",
                pool.len()
            )));
        }
        let (_, verb, _, f) = gen::INTENTS[rng.weighted(&weights)];
        let mut draft = f(&mut rng);
        if rng.chance(COMPOUND_SHARE) {
            let (_, verb2, _, f2) = gen::INTENTS[rng.weighted(&weights)];
            let second = f2(&mut rng);
            let held = |v: &str| cfg.holdout_verb.as_deref() == Some(v);
            if !held(verb) && !held(verb2) {
                if let Some(both) = gen::compound(&draft, &second, &mut rng) {
                    draft = both;
                }
            }
        }
        let r = gen::realize_open(&draft, &mut rng, true, OPEN_VALUE_SHARE);
        let key = r.request.to_lowercase();
        let plan_key = serde_json::to_string(&r.plan)
            .unwrap_or_default()
            .to_lowercase();
        if let Some(previous) = seen.get(&key) {
            if *previous == plan_key {
                stats.duplicates_skipped += 1;
            } else {
                stats.conflicts_skipped += 1;
            }
            continue;
        }
        seen.insert(key, plan_key);
        if !round_trips(&validator, &policy, &r.plan, &r.request) {
            stats.invalid_skipped += 1;
            continue;
        }
        let trace = Trace {
            request: r.request.clone(),
            calls: r.plan.calls.clone(),
            tools: None,
            source: TraceSource::Synthetic,
            spoken_text: None,
        };
        match cfg.holdout_verb.as_deref() {
            Some(held) if held == verb => heldout.push((trace, r)),
            Some(held) if says_word(&trace.request, held) => stats.holdout_mentions_skipped += 1,
            _ => pool.push((trace, r)),
        }
    }
    let test = pool.split_off(cfg.n_train + cfg.n_calibration);
    let calibration = pool.split_off(cfg.n_train);
    let mut train = pool;
    if cfg.upper_train > 0.0 {
        let mut pick = rng.fork(0x5CA1E);
        let shouted: Vec<(Trace, gen::Realized)> = train
            .iter()
            .filter(|_| pick.chance(cfg.upper_train))
            .filter_map(|(t, r)| {
                crate::casing::shouted(t, &catalog, &validator, &policy).map(|s| (s, r.clone()))
            })
            .collect();
        stats.upper_train_added = shouted.len();
        train.extend(shouted);
    }
    fill_stats(&mut stats, &train, &calibration, &test, &heldout);
    let strip = |v: Vec<(Trace, gen::Realized)>| v.into_iter().map(|(t, _)| t).collect::<Vec<_>>();
    Ok(PaceData {
        train: strip(train),
        calibration: strip(calibration),
        test: strip(test),
        heldout: strip(heldout),
        stats,
    })
}

/// `request` has `word` as a whole word, in any case.
pub(crate) fn says_word(request: &str, word: &str) -> bool {
    request
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// The plan survives DSL render -> parse -> type, equals itself, and validates with
/// copy-fidelity for every free string.
pub fn round_trips(validator: &PlanValidator, policy: &Policy, plan: &Plan, request: &str) -> bool {
    let text = Syntax::Dsl.render(plan);
    let Ok(parsed) = Syntax::Dsl.parse(&text) else {
        return false;
    };
    let typed = validator.type_values(&parsed);
    typed == *plan && validator.validate(&typed, policy, Some(request)).is_empty()
}

fn verb_of(t: &Trace) -> &str {
    t.calls.first().map(|c| c.name.as_str()).unwrap_or("none")
}

fn fill_stats(
    stats: &mut PaceStats,
    train: &[(Trace, gen::Realized)],
    calibration: &[(Trace, gen::Realized)],
    test: &[(Trace, gen::Realized)],
    heldout: &[(Trace, gen::Realized)],
) {
    for (name, split) in [
        ("train", train),
        ("calibration", calibration),
        ("test", test),
        ("heldout_verb", heldout),
    ] {
        stats.splits.insert(name.into(), split.len());
    }
    for (t, _) in train {
        *stats.train_per_verb.entry(verb_of(t).into()).or_default() += 1;
    }
    let all: Vec<&(Trace, gen::Realized)> = train
        .iter()
        .chain(calibration)
        .chain(test)
        .chain(heldout)
        .collect();
    let mut templates: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut skeletons: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    let mut prefixes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut vocab: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut chars = 0usize;
    for (t, r) in &all {
        let verb = verb_of(t).to_string();
        *stats.per_verb.entry(verb.clone()).or_default() += 1;
        *stats.per_intent.entry(r.intent.to_string()).or_default() += 1;
        for call in &t.calls {
            let arg = |k: &str| {
                call.arguments
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            match call.name.as_str() {
                "perform" => *stats.per_action.entry(arg("action")).or_default() += 1,
                "clarify" => *stats.per_clarify_kind.entry(arg("kind")).or_default() += 1,
                "query" => {
                    *stats
                        .per_query_source_mode
                        .entry(format!("{}.{}", arg("source"), arg("mode")))
                        .or_default() += 1
                }
                "compose" => *stats.per_compose_format.entry(arg("format")).or_default() += 1,
                _ => {}
            }
            for key in ["target", "destination"] {
                if let Some(ty) = call
                    .arguments
                    .get(key)
                    .and_then(|v| v.get("type"))
                    .and_then(Value::as_str)
                {
                    *stats.per_entity_type.entry(ty.into()).or_default() += 1;
                }
            }
        }
        templates
            .entry(verb.clone())
            .or_default()
            .insert(&r.core_skeleton);
        skeletons
            .entry(verb.clone())
            .or_default()
            .insert(&r.skeleton);
        let prefix: Vec<String> = t
            .request
            .split_whitespace()
            .take(3)
            .map(str::to_lowercase)
            .collect();
        prefixes.entry(verb).or_default().insert(prefix.join(" "));
        for (kind, value) in &r.slots {
            vocab
                .entry(kind.to_string())
                .or_default()
                .insert(value.to_lowercase());
        }
        chars += t.request.chars().count();
        stats.max_request_chars = stats.max_request_chars.max(t.request.chars().count());
    }
    stats.unique_templates = templates.values().flatten().collect::<BTreeSet<_>>().len();
    stats.unique_skeletons = skeletons.values().flatten().collect::<BTreeSet<_>>().len();
    stats.templates_per_verb = templates
        .iter()
        .map(|(k, v)| (k.clone(), v.len()))
        .collect();
    stats.skeletons_per_verb = skeletons
        .iter()
        .map(|(k, v)| (k.clone(), v.len()))
        .collect();
    stats.prefixes_per_verb = prefixes.iter().map(|(k, v)| (k.clone(), v.len())).collect();
    stats.vocabulary = vocab.iter().map(|(k, v)| (k.clone(), v.len())).collect();
    stats.distinct_requests = all.len();
    stats.mean_request_chars = if all.is_empty() {
        0.0
    } else {
        (chars as f64 / all.len() as f64 * 10.0).round() / 10.0
    };
}

/// Traces as JSONL text.
pub fn traces_to_jsonl(traces: &[Trace]) -> String {
    let mut out = String::new();
    for t in traces {
        out.push_str(&serde_json::to_string(t).expect("traces serialize"));
        out.push('\n');
    }
    out
}

/// Write the splits and `stats.json` into `dir` (created if needed), each file atomically.
pub fn write_pace(dir: &Path, data: &PaceData) -> Result<(), DataError> {
    std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    let files = [
        ("train.jsonl", traces_to_jsonl(&data.train)),
        ("calibration.jsonl", traces_to_jsonl(&data.calibration)),
        ("test.jsonl", traces_to_jsonl(&data.test)),
        ("heldout_verb.jsonl", traces_to_jsonl(&data.heldout)),
        (
            "stats.json",
            serde_json::to_string_pretty(&data.stats).expect("stats serialize") + "\n",
        ),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        write_atomic(&path, text.as_bytes()).map_err(|e| DataError::io(&path, e))?;
    }
    Ok(())
}

/// What `plansmith data pace` runs: generate, write, and return the stats to print.
pub fn run_pace(out: &Path, cfg: &PaceConfig) -> Result<PaceStats, DataError> {
    let data = generate_pace(cfg)?;
    write_pace(out, &data)?;
    Ok(data.stats)
}

#[cfg(test)]
mod tests {
    use super::vocab::*;
    use std::collections::HashMap;

    #[test]
    fn entity_categories_are_disjoint() {
        let mut seen: HashMap<String, &str> = HashMap::new();
        let cats: [(&str, &[&str]); 8] = [
            ("app", APPS),
            ("folder", FOLDERS),
            ("url", URLS),
            ("ui", UI_LABELS),
            ("field", FIELDS),
            ("window", WINDOWS),
            ("contact", FAMILY),
            ("text", SCREEN_TEXTS),
        ];
        for (cat, items) in cats {
            for item in items {
                if let Some(other) = seen.insert(item.to_lowercase(), cat) {
                    assert_eq!(other, cat, "`{item}` is both {other} and {cat}");
                    panic!("`{item}` listed twice in {cat}");
                }
            }
        }
    }
}
