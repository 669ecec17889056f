//! Realizing a draft: politeness, fillers, suffixes, casing -> a request and its plan.

use super::*;

pub(super) const FILLERS: &[&str] = &[
    "um ",
    "um, ",
    "uh ",
    "hey, ",
    "hey ",
    "ok ",
    "okay, ",
    "so ",
    "Pace, ",
    "hey Pace, ",
    "alright, ",
    "hmm, ",
    "oh and ",
    "quick one: ",
];
pub(super) const POLITE: &[&str] = &[
    "please ",
    "could you ",
    "can you ",
    "would you ",
    "will you ",
    "can you please ",
    "could you please ",
    "would you please ",
    "I'd like you to ",
    "I want you to ",
    "I need you to ",
    "go ahead and ",
    "just ",
    "quickly ",
    "kindly ",
    "would you kindly ",
    "I'd love it if you could ",
    "do me a favor and ",
];
pub(super) const POLITE_SELF: &[&str] = &[
    "let's ",
    "I want to ",
    "I'd like to ",
    "I need to ",
    "help me ",
    "time to ",
];
pub(super) const SUFFIXES: &[&str] = &[
    " please",
    ", please",
    " thanks",
    ", thanks",
    " thank you",
    ", thank you",
    " for me",
    " now",
    " right now",
    " when you get a chance",
    " if you can",
];
pub(super) const ASKING: &[&str] = &["could", "can", "would", "will"];

/// Wrap, case and render a draft into a request and its plan.
pub(crate) fn realize(d: &Draft, rng: &mut Rng) -> Realized {
    let mut prefix = String::new();
    let mut suffix = String::new();
    let mut asking = false;
    if rng.chance(0.18) {
        prefix.push_str(rng.pick::<&str>(FILLERS));
    }
    match d.style {
        Style::Imperative | Style::ImperativeMe => {
            if rng.chance(0.45) {
                let own = d.style == Style::Imperative && rng.chance(0.2);
                let p = if own {
                    *rng.pick(POLITE_SELF)
                } else {
                    *rng.pick(POLITE)
                };
                asking = ASKING.iter().any(|a| p.starts_with(a));
                prefix.push_str(p);
            }
            if rng.chance(0.22) {
                suffix.push_str(rng.pick::<&str>(SUFFIXES));
            }
        }
        Style::Question => asking = true,
    }
    let punct = if asking && rng.chance(0.6) {
        "?"
    } else {
        match rng.below(20) {
            0..=1 => ".",
            2 => "!",
            _ => "",
        }
    };
    let full = format!("{prefix}{{[}}{}{{]}}{suffix}{punct}", d.tpl);

    // Pieces: (text, slot index, is marker).
    enum Piece {
        Lit(String),
        Slot(usize),
        CoreStart,
        CoreEnd,
    }
    let mut pieces = Vec::new();
    let mut rest = full.as_str();
    while let Some(open) = rest.find('{') {
        if open > 0 {
            pieces.push(Piece::Lit(rest[..open].to_string()));
        }
        let close = open + rest[open..].find('}').expect("unclosed slot in template");
        let name = &rest[open + 1..close];
        pieces.push(match name {
            "[" => Piece::CoreStart,
            "]" => Piece::CoreEnd,
            _ => Piece::Slot(
                d.slots
                    .iter()
                    .position(|(n, _, _)| n == name)
                    .unwrap_or_else(|| panic!("unknown slot {{{name}}} in {:?}", d.tpl)),
            ),
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Lit(rest.to_string()));
    }

    // Casing: as written, first letter capitalized, all lower, all upper.
    let casing = rng.weighted(&[62.0, 22.0, 12.0, 4.0]);
    let case = |s: &str| match casing {
        2 => s.to_lowercase(),
        3 => s.to_uppercase(),
        _ => s.to_string(),
    };
    let mut values: Vec<String> = d.slots.iter().map(|(_, _, v)| case(v)).collect();
    let mut texts: Vec<String> = pieces
        .iter()
        .map(|p| match p {
            Piece::Lit(s) => case(s),
            _ => String::new(),
        })
        .collect();
    if casing == 1 {
        // Capitalize the first character of the request, wherever it lives.
        if let Some(i) = pieces
            .iter()
            .position(|p| matches!(p, Piece::Lit(_) | Piece::Slot(_)))
        {
            let target = match pieces[i] {
                Piece::Slot(s) => &mut values[s],
                _ => &mut texts[i],
            };
            let mut cs = target.chars();
            if let Some(c) = cs.next() {
                *target = c.to_uppercase().chain(cs).collect();
            }
        }
    }
    let mut request = String::new();
    let mut skeleton = String::new();
    let mut core = String::new();
    let mut core_skeleton = String::new();
    let mut in_core = false;
    for (i, p) in pieces.iter().enumerate() {
        let (text, skel) = match p {
            Piece::Lit(_) => (texts[i].clone(), texts[i].to_lowercase()),
            Piece::Slot(s) => (values[*s].clone(), format!("<{}>", d.slots[*s].1)),
            Piece::CoreStart => {
                in_core = true;
                continue;
            }
            Piece::CoreEnd => {
                in_core = false;
                continue;
            }
        };
        request.push_str(&text);
        skeleton.push_str(&skel);
        if in_core {
            core.push_str(&text);
            core_skeleton.push_str(&skel);
        }
    }
    let lookup = |name: &str| -> &str {
        let i = d
            .slots
            .iter()
            .position(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("unknown slot {name}"));
        &values[i]
    };
    fn value(a: &A, lookup: &dyn Fn(&str) -> String, core: &str) -> Value {
        match a {
            A::Enum(s) => Value::String(s.to_string()),
            A::EnumOf(s) => Value::String(lookup(s).to_lowercase()),
            A::Slot(s) => Value::String(lookup(s)),
            A::Int(s) => {
                let v = lookup(s);
                let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
                Value::from(digits.parse::<i64>().expect("integer slot without digits"))
            }
            A::Core => Value::String(core.to_string()),
            A::Obj(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, a)| (k.to_string(), value(a, lookup, core)))
                    .collect::<Map<_, _>>(),
            ),
            A::Arr(items) => Value::Array(items.iter().map(|a| value(a, lookup, core)).collect()),
        }
    }
    let owned = |name: &str| lookup(name).to_string();
    let calls = d
        .calls
        .iter()
        .map(|c| {
            let args: Map<String, Value> = c
                .args
                .iter()
                .map(|(k, a)| (k.to_string(), value(a, &owned, &core)))
                .collect();
            Call::new(c.name, args)
        })
        .collect();
    Realized {
        intent: d.intent,
        request,
        plan: Plan::new(calls),
        skeleton,
        core_skeleton,
        slots: d
            .slots
            .iter()
            .zip(values)
            .map(|((_, k, _), v)| (*k, v))
            .collect(),
    }
}
