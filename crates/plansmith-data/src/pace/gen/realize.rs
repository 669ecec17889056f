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
    "umm ",
    "uhh ",
    "er, ",
    "ok so ",
    "okay so ",
    "yo ",
    "hey there, ",
    "right, ",
    "listen, ",
    "so, um, ",
    "hi, ",
];
/// Context people put before the instruction itself.
pub(super) const LEAD_INS: &[&str] = &[
    "before I forget, ",
    "while you're at it, ",
    "when you get a sec, ",
    "one more thing, ",
    "next, ",
    "now ",
    "and then ",
    "first, ",
    "ok now ",
    "I'm in a hurry so ",
    "real quick, ",
    "actually, ",
    "one sec, ",
    "for the next step, ",
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
    "pls ",
    "plz ",
    "can u ",
    "could u ",
    "can you just ",
    "would you mind if you ",
    "any chance you could ",
    "is it possible to ",
    "I was hoping you could ",
    "you should ",
    "try to ",
    "I'd appreciate it if you'd ",
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
    " pls",
    " plz",
    " thx",
    ", thx",
    " real quick",
    " asap",
    ", ok",
    ", would you",
    " for me please",
    " if you don't mind",
    " when you can",
    ", cheers",
    " thanks a lot",
    ", ty",
];
pub(super) const ASKING: &[&str] = &["could", "can", "would", "will", "any chance", "is it"];
/// Hesitations spoken in the middle of an instruction, before a name.
pub(super) const MID_FILLERS: &[&str] = &["uh ", "um ", "like ", "uhh ", "er "];

/// Wrap, case and render a draft into a request and its plan.
pub(crate) fn realize(d: &Draft, rng: &mut Rng) -> Realized {
    realize_open(d, rng, false, 0.0)
}

/// [`realize`], and with `slips` a typing slip in one of the request's own words now and
/// then (Pace requests; not the generators whose requests must spell a tool's name), and each
/// slot's value drawn with probability `open` from outside the vocabulary lists
/// ([`open_value`]).
pub(crate) fn realize_open(d: &Draft, rng: &mut Rng, slips: bool, open: f64) -> Realized {
    let mut prefix = String::new();
    let mut suffix = String::new();
    let mut asking = false;
    if rng.chance(0.18) {
        prefix.push_str(rng.pick::<&str>(FILLERS));
    }
    if rng.chance(0.06) {
        prefix.push_str(rng.pick::<&str>(LEAD_INS));
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
    let tpl = if rng.chance(0.04) {
        hesitate(&d.tpl, rng)
    } else {
        d.tpl.clone()
    };
    let full = format!("{prefix}{{[}}{tpl}{{]}}{suffix}{punct}");

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
    let mut values: Vec<String> = d
        .slots
        .iter()
        .map(|(_, kind, v)| match open_value(kind, v, rng, open) {
            Some(o) => case(&o),
            None => case(v),
        })
        .collect();
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
    if slips && rng.chance(0.08) {
        misspell_one_word(&mut texts, rng);
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
                match digits.parse::<i64>() {
                    Ok(n) => Value::from(n),
                    // a count in words (`open_value`)
                    Err(_) => Value::from(
                        *plansmith_core::policy::number_words(&v)
                            .first()
                            .expect("integer slot without digits or number words")
                            as i64,
                    ),
                }
            }
            A::Num(s) => {
                let v = lookup(s);
                // "1,500" and "3.50" are 1500 and 3.5 (plansmith_core::policy::stated_numbers)
                let n = *plansmith_core::policy::stated_numbers(&v)
                    .first()
                    .expect("number slot without a number");
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    Value::from(n as i64)
                } else {
                    Value::from(n)
                }
            }
            A::Bool(b) => Value::Bool(*b),
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

/// `n` words of [`OPEN_WORDS`], each capitalized with probability `title`.
fn open_words(rng: &mut Rng, lo: usize, hi: usize, title: f64) -> Vec<String> {
    let n = lo + rng.below(hi - lo + 1);
    (0..n)
        .map(|_| {
            let w = rng.pick::<&str>(OPEN_WORDS).to_string();
            if rng.chance(title) {
                let mut cs = w.chars();
                cs.next()
                    .map(|c| c.to_uppercase().chain(cs).collect())
                    .unwrap_or(w)
            } else {
                w
            }
        })
        .collect()
}

/// With probability `p`, a value for a slot of `kind` from outside the vocabulary lists: a
/// label, name or text of one to six [`OPEN_WORDS`], or a spoken key chord. The lists alone
/// let a planner learn where *their* values end; people name things no list holds. `None`
/// keeps the drawn value (and for kinds with a fixed form: times, counts, contacts, settings'
/// values). Counts stay digits: an integer argument is copied from the request, and "three"
/// is not a copy of 3.
fn open_value(kind: &str, drawn: &str, rng: &mut Rng, p: f64) -> Option<String> {
    if p <= 0.0 || !rng.chance(p) {
        return None;
    }
    Some(match kind {
        "ui" => open_words(rng, 1, 4, 0.7).join(" "),
        "app" | "window" => open_words(rng, 1, 3, 0.8).join(" "),
        "folder" | "screen_text" => open_words(rng, 1, 3, 0.4).join(" "),
        "toggle_setting" | "level_setting" | "choice_setting" => {
            open_words(rng, 1, 3, 0.0).join(" ")
        }
        "file" if drawn.contains('.') => {
            let sep = *rng.pick(&[" ", "_", "-", ""]);
            let ext = *rng.pick::<&str>(FILE_EXTS);
            format!("{}.{ext}", open_words(rng, 1, 3, 0.3).join(sep))
        }
        "file" => open_words(rng, 1, 3, 0.1).join(" "),
        "url" => {
            let name = open_words(rng, 1, 2, 0.0).join("").to_lowercase();
            let tld = *rng.pick(&["com", "org", "io", "net", "app", "dev"]);
            let scheme = *rng.pick(&["", "", "", "www.", "https://"]);
            format!("{scheme}{name}.{tld}")
        }
        "text" | "message" | "topic" | "todo" | "memory" | "condition" => {
            open_words(rng, 2, 6, 0.05).join(" ")
        }
        // A count said as people say it ("scroll down three times"); the plan keeps 3, which
        // the copy rule accepts as a number the request states.
        "count" => plansmith_core::policy::number_in_words(drawn.parse().ok()?)?,
        "key" => {
            let mods = 1 + rng.below(3);
            let mut parts: Vec<&str> = (0..mods).map(|_| *rng.pick(KEY_MODIFIERS)).collect();
            parts.dedup();
            parts.push(*rng.pick(KEY_NAMES));
            parts.join(*rng.pick(&[" ", " ", "+", "-"]))
        }
        _ => return None,
    })
}

/// Insert a hesitation ("uh ") before one of the template's slots that follows a space, as in
/// "open uh {e}". The template is returned unchanged when no slot follows a space.
fn hesitate(tpl: &str, rng: &mut Rng) -> String {
    let spots: Vec<usize> = tpl.match_indices(" {").map(|(i, _)| i + 1).collect();
    if spots.is_empty() {
        return tpl.to_string();
    }
    let at = *rng.pick(&spots);
    format!("{}{}{}", &tpl[..at], rng.pick(MID_FILLERS), &tpl[at..])
}

/// A typing slip in one word of the request's own words (never in a copied value, whose
/// spelling the plan must keep): two letters swapped, one dropped or one doubled. Only ASCII
/// words of four letters or more are touched, and never their first letter.
fn misspell_one_word(texts: &mut [String], rng: &mut Rng) {
    let mut words: Vec<(usize, usize, usize)> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let bytes = text.as_bytes();
        let mut start = None;
        for j in 0..=bytes.len() {
            let letter = j < bytes.len() && bytes[j].is_ascii_alphabetic();
            match (letter, start) {
                (true, None) => start = Some(j),
                (false, Some(s)) => {
                    // Not the tail of a contraction ("'s"), and not a piece that is one bare
                    // word between two values, which may be glued to them.
                    let whole = (s == 0 || bytes[s - 1] != b'\'') && j - s >= 4;
                    if whole && (j < bytes.len() || s > 0) {
                        words.push((i, s, j));
                    }
                    start = None;
                }
                _ => {}
            }
        }
    }
    if words.is_empty() {
        return;
    }
    let (i, s, e) = *rng.pick(&words);
    let mut w: Vec<u8> = texts[i].as_bytes()[s..e].to_vec();
    let k = 1 + rng.below(w.len() - 2);
    match rng.below(3) {
        0 => w.swap(k, k + 1),
        1 => {
            w.remove(k);
        }
        _ => w.insert(k, w[k]),
    }
    let word = String::from_utf8(w).expect("ASCII letters stay ASCII");
    texts[i].replace_range(s..e, &word);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_changes_one_whole_word_by_one_edit_and_keeps_its_first_letter() {
        let mut rng = Rng::new(3);
        let before = vec![
            "could you ".to_string(),
            String::new(),
            " in the sidebar, thanks".to_string(),
        ];
        let mut changed_words = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let mut texts = before.clone();
            misspell_one_word(&mut texts, &mut rng);
            let diffs: Vec<(&str, &str)> = before
                .iter()
                .zip(&texts)
                .flat_map(|(a, b)| a.split(' ').zip(b.split(' ')))
                .filter(|(a, b)| a != b)
                .collect();
            assert_eq!(diffs.len(), 1, "{texts:?}");
            let (a, b) = diffs[0];
            assert!(a.len() >= 4 && a.len().abs_diff(b.len()) <= 1, "{a} -> {b}");
            assert_eq!(a.chars().next(), b.chars().next(), "{a} -> {b}");
            let mut sa: Vec<char> = a.chars().collect();
            let mut sb: Vec<char> = b.chars().collect();
            if sa.len() == sb.len() {
                // A swap: the same letters.
                sa.sort();
                sb.sort();
                assert_eq!(sa, sb, "{a} -> {b}");
            }
            changed_words.insert(a.trim_end_matches(',').to_string());
        }
        // "you" and "in"/"the" are too short to slip; the rest all do at some point.
        let expected: std::collections::BTreeSet<String> = ["could", "sidebar", "thanks"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(changed_words, expected);
    }

    #[test]
    fn a_hesitation_goes_before_a_slot_that_follows_a_space() {
        let mut rng = Rng::new(5);
        for _ in 0..50 {
            let out = hesitate("drag {a} onto {b}", &mut rng);
            assert!(
                MID_FILLERS
                    .iter()
                    .any(|f| out == format!("drag {f}{{a}} onto {{b}}")
                        || out == format!("drag {{a}} onto {f}{{b}}")),
                "{out}"
            );
        }
        assert_eq!(hesitate("{s} {v}x", &mut rng).matches('{').count(), 2);
        assert_eq!(hesitate("{s}", &mut rng), "{s}");
    }
}
