//! Pace requests whose verb names a tool the planner never saw: "set the volume to 40"
//! becomes "blicket the volume to 40", and the catalog's `set` becomes `blicket(target, value)`.
//!
//! Why: invented tools ([`crate::novel`]) are requested in their own templates, and Pace's
//! tools in Pace's, so a planner can learn "Pace-shaped request -> Pace tool" (and, from the
//! removed-tool augmentation, "Pace-shaped request without its tool -> clarify") without ever
//! matching the request's verb to a tool's name. A held-out Pace verb then goes to `clarify`
//! (README, "Held-out verb"). Here the request keeps Pace's shape and arguments and only its
//! verb and tool change, so the name match is the one thing that decides the call.
//!
//! Only intents whose arguments do not depend on the verb are swapped (`set`, `open`, `say`,
//! `schedule`, `query_memory`): "double-click" and "right-click" pick `perform`'s action, so a
//! new verb there would leave the action unsaid.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use plansmith_core::{Catalog, Trace};

use crate::novel::{fresh_verb, invented_distractor};
use crate::pace::gen::{self, Style};
use crate::pace::{says_word, PACE_VERBS};
use crate::rng::Rng;
use crate::DataError;

/// Intents whose calls are fully said by the request without its verb, and what their new
/// tool's description calls the thing it acts on.
const SWAPPABLE: &[(&str, &str)] = &[
    ("set", "a setting"),
    ("open", "an item"),
    ("say", "a phrase aloud"),
    ("schedule", "a reminder"),
    ("query_memory", "a memory"),
];

/// Particles that go with the replaced verb ("bring up X", "go to X" -> "blicket X").
const PARTICLES: &[&str] = &["up", "to"];

/// Names a swapped tool's string parameters may get instead of the original ones.
#[rustfmt::skip]
const PARAM_NAMES: &[&str] = &[
    "item", "subject", "topic", "label", "thing", "entry", "object", "detail", "name", "field",
    "text", "phrase", "about", "what", "which", "input",
];

/// `tpl` with its leading verb (and a particle after it) replaced by `verb`; `None` when the
/// template does not start with a plain word (`{S} to {v}`, `don't let me forget ...`).
fn swap_leading_verb(tpl: &str, verb: &str) -> Option<String> {
    let mut words = tpl.split(' ');
    let first = words.next()?;
    if first.is_empty() || !first.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    let rest = match rest.split_first() {
        Some((p, tail))
            if PARTICLES.contains(p) && tail.first().is_some_and(|w| w.starts_with('{')) =>
        {
            tail.to_vec()
        }
        _ => rest,
    };
    Some(
        std::iter::once(verb)
            .chain(rest)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// `n` distinct Pace-shaped requests, each calling a tool named after its new verb, in a
/// catalog built from `catalog` (e.g. Pace): the swapped intent's tool replaced by the new one
/// (kept beside it in 30%), sometimes an invented distractor, shuffled. Intents whose tool is
/// not in `catalog` are never drawn, and no request says the name of a Pace verb `catalog`
/// lacks, so a held-out verb stays unseen. Every trace passes the DSL round trip and
/// copy-fidelity validation against its own catalog.
pub fn swapped_verb_traces(
    n: usize,
    seed: u64,
    catalog: &Catalog,
) -> Result<Vec<Trace>, DataError> {
    let has = |name: &str| catalog.tools.iter().any(|t| t.name == name);
    let intents: Vec<(usize, &str)> = gen::INTENTS
        .iter()
        .enumerate()
        .filter_map(|(i, (intent, verb, _, _))| {
            let (_, object) = SWAPPABLE.iter().find(|(s, _)| s == intent)?;
            has(verb).then_some((i, *object))
        })
        .collect();
    if n > 0 && intents.is_empty() {
        return Err(DataError::Invalid(format!(
            "swapped verbs: the catalog has none of the tools {}",
            SWAPPABLE.iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
        )));
    }
    let absent: Vec<&str> = PACE_VERBS.iter().copied().filter(|v| !has(v)).collect();
    let mut rng = Rng::new(seed).fork(0x5A4B);
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    let mut budget = crate::DrawBudget::new(n, "swapped-verb requests");
    while out.len() < n {
        budget.draw(out.len())?;
        let (index, object) = *rng.pick(&intents);
        let (_, tool_name, _, generate) = gen::INTENTS[index];
        let mut draft = generate(&mut rng);
        if draft.style == Style::Question || draft.calls.len() != 1 {
            continue;
        }
        let mut taken: HashSet<String> = catalog.tools.iter().map(|t| t.name.clone()).collect();
        let verb = fresh_verb(&mut rng, &mut taken, true);
        let Some(tpl) = swap_leading_verb(&draft.tpl, &verb) else {
            continue;
        };
        draft.tpl = tpl;
        let r = gen::realize(&draft, &mut rng);
        if absent.iter().any(|v| says_word(&r.request, v)) || !seen.insert(r.request.to_lowercase())
        {
            continue;
        }
        let Some(original) = catalog.tools.iter().find(|t| t.name == tool_name) else {
            continue;
        };
        let name = if rng.chance(0.3) {
            format!("{verb}_{}", object.rsplit(' ').next().unwrap_or("item"))
        } else {
            verb.clone()
        };
        // Half the time the parameters get new names too, so the planner fills a parameter
        // by its place and type, not by a name it has learnt (`wait`'s `condition`).
        let mut renames: Vec<(String, String)> = Vec::new();
        let mut parameters = original.parameters.clone();
        if rng.chance(0.5) {
            if let Some(props) = parameters.get("properties").and_then(Value::as_object) {
                let mut used = HashSet::new();
                let mut renamed = Map::new();
                for (key, schema) in props {
                    let new = loop {
                        let p = rng.pick(PARAM_NAMES).to_string();
                        if used.insert(p.clone()) {
                            break p;
                        }
                    };
                    renames.push((key.clone(), new.clone()));
                    renamed.insert(new, schema.clone());
                }
                parameters["properties"] = Value::Object(renamed);
                if let Some(required) = parameters.get_mut("required").and_then(Value::as_array_mut)
                {
                    for r in required.iter_mut() {
                        if let Some((_, new)) = renames
                            .iter()
                            .find(|(old, _)| Some(old.as_str()) == r.as_str())
                        {
                            *r = Value::String(new.clone());
                        }
                    }
                }
            }
        }
        let mut description = verb.clone();
        if let Some(c) = description.get_mut(0..1) {
            c.make_ascii_uppercase();
        }
        let new_tool = json!({"type": "function", "function": {"name": name,
            "description": format!("{description} {object}."), "parameters": parameters}});
        let keep_original = rng.chance(0.3);
        let mut tools: Vec<Value> = catalog
            .tools
            .iter()
            .filter(|t| keep_original || t.name != tool_name)
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name,
                    "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        tools.push(new_tool);
        if rng.chance(0.3) {
            let d = invented_distractor(&mut rng, &mut taken);
            tools.push(json!({"type": "function", "function": {"name": d.name,
                "description": d.description, "parameters": d.parameters}}));
        }
        rng.shuffle(&mut tools);
        let mut calls = r.plan.calls;
        for c in &mut calls {
            c.name = name.clone();
            // All at once: a new name may be another parameter's old one (`what`).
            let args = std::mem::take(&mut c.arguments);
            for (key, value) in args {
                let key = match renames.iter().find(|(old, _)| *old == key) {
                    Some((_, new)) => new.clone(),
                    None => key,
                };
                c.arguments.insert(key, value);
            }
        }
        out.push(crate::families::trace_with_tools(
            tools,
            calls,
            r.request,
            "swapped verb",
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pace::pace_catalog;

    #[test]
    fn leading_verbs_and_their_particles_are_replaced() {
        assert_eq!(
            swap_leading_verb("bring up {e}", "dax").as_deref(),
            Some("dax {e}")
        );
        assert_eq!(
            swap_leading_verb("set {S} to {v}", "dax").as_deref(),
            Some("dax {S} to {v}")
        );
        assert_eq!(
            swap_leading_verb("turn {v} {S}", "dax").as_deref(),
            Some("dax {v} {S}")
        );
        assert_eq!(
            swap_leading_verb("remind me to {w} {t}", "dax").as_deref(),
            Some("dax me to {w} {t}")
        );
        assert_eq!(swap_leading_verb("{S} to {v}", "dax"), None);
        assert_eq!(swap_leading_verb("don't let me forget to {w}", "dax"), None);
    }

    #[test]
    fn the_request_says_the_called_tools_verb_and_keeps_paces_arguments() {
        let pace = pace_catalog();
        let traces = swapped_verb_traces(400, 3, &pace).unwrap();
        assert_eq!(traces.len(), 400);
        let mut intents = HashSet::new();
        let mut beside_original = 0;
        for t in &traces {
            let call = &t.calls[0];
            let verb = call.name.split('_').next().unwrap();
            assert!(
                t.request.to_lowercase().contains(verb),
                "{:?} does not say {verb}",
                t.request
            );
            assert!(!PACE_VERBS.contains(&call.name.as_str()), "{}", call.name);
            let catalog = Catalog::from_value(t.tools.as_ref().unwrap()).unwrap();
            let called = catalog.tools.iter().find(|x| x.name == call.name).unwrap();
            let (intent, _) = SWAPPABLE
                .iter()
                .find(|(_, object)| called.description.ends_with(&format!(" {object}.")))
                .unwrap();
            intents.insert(*intent);
            beside_original += usize::from(catalog.tools.iter().any(|x| x.name == *intent));
        }
        assert_eq!(intents.len(), SWAPPABLE.len(), "{intents:?}");
        // The original tool stays in the catalog in ~30%: the name match, not novelty, decides.
        assert!((80..=160).contains(&beside_original), "{beside_original}");
    }

    #[test]
    fn a_held_out_verb_is_never_drawn_or_said() {
        let mut catalog = pace_catalog();
        catalog
            .tools
            .retain(|t| t.name != "say" && t.name != "wait");
        let traces = swapped_verb_traces(300, 5, &catalog).unwrap();
        for t in &traces {
            assert!(
                !says_word(&t.request, "wait") && !says_word(&t.request, "say"),
                "{}",
                t.request
            );
            let catalog = Catalog::from_value(t.tools.as_ref().unwrap()).unwrap();
            let called = catalog
                .tools
                .iter()
                .find(|x| x.name == t.calls[0].name)
                .unwrap();
            assert_ne!(
                called.parameters["properties"].as_object().unwrap().len(),
                0
            );
            assert!(
                !called.description.contains("aloud"),
                "{}",
                called.description
            );
        }
    }

    #[test]
    fn a_catalog_without_swappable_tools_is_refused() {
        let mut catalog = pace_catalog();
        catalog.tools.retain(|t| t.name == "perform");
        let err = swapped_verb_traces(10, 1, &catalog)
            .unwrap_err()
            .to_string();
        assert!(err.contains("none of the tools"), "{err}");
    }
}
