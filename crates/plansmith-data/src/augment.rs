//! Tools-in-prompt augmentation, after Hammer's function masking: the same request planned
//! against a modified catalog, carried in the trace's `tools`, so a model learns to read the
//! catalog instead of memorising names.
//!
//! Per output trace, each with its own probability ([`AugmentConfig`]):
//! 1. **removed tool**: the tools the calls need are dropped from the catalog; the target
//!    becomes `clarify(kind=missing_value; question=<request without trailing punctuation>)`
//!    when the catalog has a Pace-style `clarify` (and it was not the removed tool), else no call;
//! 2. **distractors**: tools from the synthetic families and Pace are added;
//! 3. **renamed tools**: every tool gets a synonym (`open` -> `launch_item`, `set_light` ->
//!    `update_lamp`) or an opaque id (`fn_q4k2`); descriptions are kept, calls renamed to match;
//! 4. **renamed parameters**: likewise for parameter names, nested ones included, `required`
//!    and the call arguments renamed consistently;
//! 5. **shuffled** tool order.
//!
//! Values are never changed, so copy-fidelity still holds.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use plansmith_core::{Call, Catalog, Tool, Trace};

use crate::rng::Rng;
use crate::DataError;

/// The compact catalog line a DSL prompt starts with (`tools: open(target) set(target, value)`).
pub fn prompt_catalog_line(catalog: &Catalog) -> String {
    catalog.compact_line()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AugmentConfig {
    pub seed: u64,
    /// Augmented variants per input trace.
    pub copies: usize,
    /// Probability that the needed tools are removed from the catalog.
    pub remove_needed: f64,
    /// Distractor tools added: uniform in `0..=max_distractors`.
    pub max_distractors: usize,
    /// Probability that tool names are renamed.
    pub rename_tools: f64,
    /// Probability that parameter names are renamed.
    pub rename_params: f64,
    /// Among renamings, the share of opaque ids (`fn_q4k2`) rather than synonyms.
    pub opaque_names: f64,
    /// Probability that tool order is shuffled.
    pub shuffle: f64,
    /// Probability that one or two invented tools (`novel`) join the catalog as distractors:
    /// without them a planner trained on invented tools learns that a new tool in a familiar
    /// catalog is always the one to call.
    #[serde(default)]
    pub invented_distractors: f64,
    /// Consecutive traces of one catalog that share one augmented catalog (the same renaming,
    /// order, distractors and removed tool). 1 (the default) draws a catalog per trace. LoRA
    /// training on a pretrained model runs a batch's shared catalog prompt once, so groups of
    /// a batch's size make a changed-catalog mix about as cheap to train as one catalog.
    #[serde(default = "one")]
    pub group: usize,
}

fn one() -> usize {
    1
}

impl Default for AugmentConfig {
    fn default() -> Self {
        AugmentConfig {
            seed: 0,
            copies: 1,
            remove_needed: 0.1,
            max_distractors: 4,
            rename_tools: 0.5,
            rename_params: 0.3,
            opaque_names: 0.25,
            shuffle: 0.9,
            invented_distractors: 0.3,
            group: 1,
        }
    }
}

/// How many outputs got each treatment.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AugmentStats {
    pub input: usize,
    pub output: usize,
    pub removed_needed: usize,
    pub retargeted_to_clarify: usize,
    pub retargeted_to_no_call: usize,
    pub with_distractors: usize,
    pub with_invented_distractors: usize,
    pub renamed_tools: usize,
    pub renamed_params: usize,
    pub shuffled: usize,
}

/// Word-level synonyms used to rename tools and parameters meaningfully.
const SYNONYMS: &[(&str, &[&str])] = &[
    ("perform", &["act", "do_action", "ui_action", "interact"]),
    ("set", &["update", "change", "configure", "adjust"]),
    ("open", &["launch", "show", "display", "bring_up"]),
    (
        "query",
        &["lookup", "search_info", "read_source", "inspect"],
    ),
    ("compose", &["write", "draft", "author", "create_text"]),
    (
        "clarify",
        &["ask_user", "ask", "confirm_with_user", "follow_up"],
    ),
    ("say", &["speak", "tell", "voice_reply", "announce"]),
    ("memory", &["recall", "memo", "remembered"]),
    ("wait", &["wait_for", "pause_until", "hold"]),
    (
        "schedule",
        &["remind", "plan_later", "set_reminder", "defer"],
    ),
    ("get", &["fetch", "lookup", "read"]),
    ("add", &["create", "insert", "append"]),
    ("delete", &["remove", "erase", "trash"]),
    ("find", &["search", "locate"]),
    ("send", &["post", "dispatch"]),
    ("play", &["start", "stream"]),
    ("list", &["show", "enumerate"]),
    ("cancel", &["abort", "drop"]),
    ("track", &["follow", "trace"]),
    ("call", &["dial", "phone"]),
    ("move", &["relocate", "transfer"]),
    ("rename", &["retitle", "relabel"]),
    ("lock", &["secure", "bolt"]),
    ("light", &["lamp", "lights"]),
    ("music", &["audio", "songs"]),
    ("target", &["object", "item", "subject"]),
    ("label", &["name", "title", "caption"]),
    ("type", &["kind", "category"]),
    ("value", &["new_value", "setting_value", "val"]),
    ("text", &["content_text", "words", "input_text"]),
    ("action", &["operation", "act_kind", "verb"]),
    ("keys", &["shortcut", "key_combo", "chord"]),
    ("direction", &["dir", "towards", "heading"]),
    ("amount", &["count", "steps", "times"]),
    ("destination", &["dest", "drop_target", "to"]),
    ("source", &["origin", "from_source", "where"]),
    ("mode", &["how", "style", "method"]),
    ("format", &["kind_of_text", "form", "genre"]),
    ("content", &["body", "message", "about"]),
    ("recipient", &["to_whom", "addressee", "receiver"]),
    ("kind", &["sort", "variety", "flavor"]),
    ("question", &["prompt", "ask_text", "query_text"]),
    ("choices", &["options", "alternatives"]),
    ("condition", &["until", "event", "trigger"]),
    (
        "timeout_seconds",
        &["max_wait_s", "timeout", "limit_seconds"],
    ),
    ("when", &["time", "at", "due"]),
    ("what", &["task", "reminder", "todo"]),
    ("room", &["area", "space"]),
    ("city", &["town", "place"]),
    ("quantity", &["qty", "number"]),
    ("order", &["purchase", "parcel"]),
    ("id", &["number", "ref"]),
];

fn synonym_word(rng: &mut Rng, word: &str) -> String {
    match SYNONYMS.iter().find(|(w, _)| *w == word) {
        Some((_, alts)) => rng.pick(alts).to_string(),
        None => word.to_string(),
    }
}

fn opaque(rng: &mut Rng, prefix: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let tail: String = (0..4)
        .map(|_| ALPHABET[rng.below(ALPHABET.len())] as char)
        .collect();
    format!("{prefix}_{tail}")
}

/// A new name: synonyms word by word (whole name first), in snake or camel case, or opaque.
fn rename(rng: &mut Rng, name: &str, opaque_share: f64, prefix: &str) -> String {
    if rng.chance(opaque_share) {
        return opaque(rng, prefix);
    }
    let words: Vec<String> = if SYNONYMS.iter().any(|(w, _)| *w == name) {
        vec![synonym_word(rng, name)]
    } else {
        name.split('_').map(|w| synonym_word(rng, w)).collect()
    };
    let snake = words.join("_");
    let renamed = match rng.below(4) {
        0 => {
            // camelCase
            let mut out = String::new();
            for (i, part) in snake.split('_').enumerate() {
                let mut cs = part.chars();
                match (i, cs.next()) {
                    (0, Some(c)) => out.extend(std::iter::once(c).chain(cs)),
                    (_, Some(c)) => out.extend(c.to_uppercase().chain(cs)),
                    _ => {}
                }
            }
            out
        }
        _ => snake,
    };
    if renamed == name {
        format!("{renamed}_v2")
    } else {
        renamed
    }
}

/// How a schema's properties were renamed (recursively), to rename arguments alike.
#[derive(Debug, Default, Clone)]
struct ParamMap {
    props: BTreeMap<String, (String, ParamMap)>,
    items: Option<Box<ParamMap>>,
}

fn rename_schema(schema: &Value, rng: &mut Rng, opaque_share: f64) -> (Value, ParamMap) {
    let mut map = ParamMap::default();
    let Value::Object(obj) = schema else {
        return (schema.clone(), map);
    };
    let mut out = obj.clone();
    if let Some(Value::Object(props)) = obj.get("properties") {
        let mut used = HashSet::new();
        let mut new_props = Map::new();
        for (k, sub) in props {
            let mut new = rename(rng, k, opaque_share, "p");
            while !used.insert(new.clone()) || !plansmith_core::catalog::is_valid_param_name(&new) {
                new = opaque(rng, "p");
            }
            let (sub_new, sub_map) = rename_schema(sub, rng, opaque_share);
            new_props.insert(new.clone(), sub_new);
            map.props.insert(k.clone(), (new, sub_map));
        }
        out.insert("properties".into(), Value::Object(new_props));
        if let Some(Value::Array(req)) = obj.get("required") {
            let req: Vec<Value> = req
                .iter()
                .map(|r| match r.as_str().and_then(|r| map.props.get(r)) {
                    Some((new, _)) => Value::String(new.clone()),
                    None => r.clone(),
                })
                .collect();
            out.insert("required".into(), Value::Array(req));
        }
    }
    if let Some(items) = obj.get("items") {
        let (new_items, items_map) = rename_schema(items, rng, opaque_share);
        out.insert("items".into(), new_items);
        map.items = Some(Box::new(items_map));
    }
    (Value::Object(out), map)
}

fn rename_value(v: &Value, map: &ParamMap) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| match map.props.get(k) {
                    Some((new, sub)) => (new.clone(), rename_value(v, sub)),
                    None => (k.clone(), v.clone()),
                })
                .collect(),
        ),
        Value::Array(items) => match &map.items {
            Some(sub) => Value::Array(items.iter().map(|v| rename_value(v, sub)).collect()),
            None => v.clone(),
        },
        other => other.clone(),
    }
}

/// The tools every distractor is drawn from: all synthetic families plus Pace.
fn distractor_pool() -> Vec<Tool> {
    let mut pool: Vec<Tool> = crate::families::families()
        .iter()
        .flat_map(|f| f.catalog().tools)
        .collect();
    pool.extend(crate::pace::pace_catalog().tools);
    pool
}

/// Whether `tool` is a Pace-style clarify: `kind` enum with `missing_value`, and `question`.
fn is_clarify(tool: &Tool) -> bool {
    let props = tool.parameters.get("properties");
    let kind_ok = props
        .and_then(|p| p.get("kind"))
        .and_then(|k| k.get("enum"))
        .and_then(Value::as_array)
        .is_some_and(|e| e.contains(&json!("missing_value")));
    kind_ok && props.and_then(|p| p.get("question")).is_some()
}

/// The request up to its last word character: a word-aligned span to ask back with.
fn question_span(request: &str) -> String {
    let end = request
        .char_indices()
        .rfind(|(_, c)| plansmith_core::policy::is_word_char(*c))
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    request[..end].trim_start().to_string()
}

/// Augment `traces` (each planned against its own `tools`, or `default_catalog`).
pub fn augment_traces(
    traces: &[Trace],
    default_catalog: Option<&Catalog>,
    cfg: &AugmentConfig,
) -> Result<(Vec<Trace>, AugmentStats), DataError> {
    let pool = distractor_pool();
    let mut rng = Rng::new(cfg.seed).fork(0xA06);
    let mut stats = AugmentStats {
        input: traces.len(),
        ..Default::default()
    };
    let mut out = Vec::with_capacity(traces.len() * cfg.copies);
    let mut i = 0;
    while i < traces.len() {
        let catalog = trace_catalog(traces, i, default_catalog)?;
        // The group: up to `cfg.group` consecutive traces of this catalog.
        let mut end = i + 1;
        while end < traces.len()
            && end - i < cfg.group.max(1)
            && traces[end].tools == traces[i].tools
        {
            end += 1;
        }
        let group = &traces[i..end];
        for _ in 0..cfg.copies {
            let variant = draw_variant(group, &catalog, &pool, cfg, &mut rng)?;
            for trace in group {
                out.push(variant.apply(trace, &mut stats));
            }
        }
        i = end;
    }
    stats.output = out.len();
    Ok((out, stats))
}

fn trace_catalog(
    traces: &[Trace],
    i: usize,
    default_catalog: Option<&Catalog>,
) -> Result<Catalog, DataError> {
    match (&traces[i].tools, default_catalog) {
        (Some(t), _) => Catalog::from_value(t)
            .map_err(|e| DataError::Invalid(format!("trace {}: tools: {e}", i + 1))),
        (None, Some(c)) => Ok(c.clone()),
        (None, None) => Err(DataError::Invalid(format!(
            "trace {}: no `tools` and no default catalog",
            i + 1
        ))),
    }
}

/// One augmented catalog and how the traces of its group map onto it.
struct Variant {
    /// The augmented catalog.
    catalog: Catalog,
    /// Original names of the tools taken out.
    removed: HashSet<String>,
    /// Original name of the catalog's clarify tool, if it was not taken out.
    clarify: Option<String>,
    /// Original tool name -> new name.
    names: BTreeMap<String, String>,
    /// New tool name -> how its parameters were renamed.
    params: BTreeMap<String, ParamMap>,
    with_distractors: bool,
    with_invented_distractors: bool,
    renamed_params: bool,
    shuffled: bool,
}

/// Draw one augmented catalog for a group of traces that share `catalog`. The tools taken out
/// (with probability `remove_needed`) are those the group's first trace with calls needs; with
/// a group of one this is the trace's own tools, so `group: 1` gives the same data as before
/// groups existed.
fn draw_variant(
    group: &[Trace],
    catalog: &Catalog,
    pool: &[Tool],
    cfg: &AugmentConfig,
    rng: &mut Rng,
) -> Result<Variant, DataError> {
    let mut tools = catalog.tools.clone();

    // 1. Remove the needed tools.
    let mut removed: HashSet<String> = HashSet::new();
    if let Some(first) = group.iter().find(|t| !t.calls.is_empty()) {
        if rng.chance(cfg.remove_needed) {
            removed = first.calls.iter().map(|c| c.name.clone()).collect();
            tools.retain(|t| !removed.contains(&t.name));
        }
    }
    let clarify = tools.iter().find(|t| is_clarify(t)).map(|t| t.name.clone());

    // 2. Distractors.
    let k = rng.below(cfg.max_distractors + 1);
    let mut added = 0;
    for _ in 0..k * 3 {
        if added == k {
            break;
        }
        let t = rng.pick(pool);
        if !removed.contains(&t.name) && tools.iter().all(|x| x.name != t.name) {
            tools.push(t.clone());
            added += 1;
        }
    }
    let mut with_invented_distractors = false;
    if cfg.invented_distractors > 0.0 && rng.chance(cfg.invented_distractors) {
        let mut taken: HashSet<String> = tools.iter().map(|t| t.name.clone()).collect();
        taken.extend(removed.iter().cloned());
        for _ in 0..1 + rng.below(2) {
            tools.push(crate::novel::invented_distractor(rng, &mut taken));
        }
        with_invented_distractors = true;
    }

    // 3. Tool names.
    let mut names = BTreeMap::new();
    if rng.chance(cfg.rename_tools) {
        let mut used = HashSet::new();
        for t in &mut tools {
            let mut new = rename(rng, &t.name, cfg.opaque_names, "fn");
            while used.contains(&new) || !plansmith_core::catalog::is_valid_tool_name(&new) {
                new = opaque(rng, "fn");
            }
            used.insert(new.clone());
            names.insert(t.name.clone(), new.clone());
            t.name = new;
        }
    }

    // 4. Parameter names.
    let mut params = BTreeMap::new();
    let renamed_params = rng.chance(cfg.rename_params);
    if renamed_params {
        for t in &mut tools {
            let (schema, map) = rename_schema(&t.parameters, rng, cfg.opaque_names);
            t.parameters = schema;
            params.insert(t.name.clone(), map);
        }
    }

    // 5. Order.
    let shuffled = rng.chance(cfg.shuffle);
    if shuffled {
        rng.shuffle(&mut tools);
    }

    Ok(Variant {
        catalog: Catalog::from_tools(tools)?,
        removed,
        clarify,
        names,
        params,
        with_distractors: added > 0,
        with_invented_distractors,
        renamed_params,
        shuffled,
    })
}

impl Variant {
    /// `trace` against this catalog: a trace that needs a removed tool asks (`clarify`, its
    /// question the request's core phrase) or calls nothing; the others' calls are renamed.
    fn apply(&self, trace: &Trace, stats: &mut AugmentStats) -> Trace {
        let mut calls = trace.calls.clone();
        if calls.iter().any(|c| self.removed.contains(&c.name)) {
            stats.removed_needed += 1;
            let question = question_span(&trace.request);
            calls = match &self.clarify {
                Some(clarify) if !question.is_empty() => {
                    stats.retargeted_to_clarify += 1;
                    let mut args = Map::new();
                    args.insert("kind".into(), json!("missing_value"));
                    args.insert("question".into(), json!(question));
                    vec![Call::new(clarify.clone(), args)]
                }
                _ => {
                    stats.retargeted_to_no_call += 1;
                    vec![]
                }
            };
        }
        for c in &mut calls {
            if let Some(new) = self.names.get(&c.name) {
                c.name = new.clone();
            }
        }
        for c in &mut calls {
            if let Some(map) = self.params.get(&c.name) {
                if let Value::Object(m) = rename_value(&Value::Object(c.arguments.clone()), map) {
                    c.arguments = m;
                }
            }
        }
        stats.with_distractors += usize::from(self.with_distractors);
        stats.with_invented_distractors += usize::from(self.with_invented_distractors);
        stats.renamed_tools += usize::from(!self.names.is_empty());
        stats.renamed_params += usize::from(self.renamed_params);
        stats.shuffled += usize::from(self.shuffled);
        Trace {
            request: trace.request.clone(),
            calls,
            tools: Some(self.catalog.to_openai()),
            source: trace.source,
            spoken_text: trace.spoken_text.clone(),
        }
    }
}
