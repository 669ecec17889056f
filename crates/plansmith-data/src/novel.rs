//! Procedurally invented tools: a made-up verb, a one-line description, one or two string
//! parameters and maybe an integer limit, in a catalog of other invented tools and real ones.
//! The request names its tool only by a word of the tool's name or description, and the
//! parameters have names never tied to a fixed meaning, so the one way to get these right is
//! to read the catalog: match the request's verb to a tool, copy the phrase after it into the
//! tool's string parameter, the number into its integer parameter.
//!
//! This is what lets a planner call a tool it never saw in training (PRD: "adding a tool is
//! one line in the catalog"). The words a held-out evaluation verb uses (Pace's `wait`,
//! `pause`, `hold`, its parameters `condition` / `timeout_seconds` and its example values)
//! are deliberately absent from every list below.

use std::collections::HashSet;

use serde_json::{json, Value};

use plansmith_core::{Catalog, Tool, Trace};

use crate::pace::gen::{self, call, Draft, Style, A};
use crate::rng::Rng;
use crate::DataError;

/// Verbs for invented tools: none of them a Pace verb or a word a Pace request leads with.
#[rustfmt::skip]
const VERBS: &[&str] = &[
    "archive", "translate", "rate", "book", "cancel", "share", "print", "rename", "tag", "pin",
    "mute", "snooze", "water", "feed", "charge", "lock", "unlock", "backup", "ping", "invite",
    "order", "track", "measure", "convert", "record", "stream", "upload", "sync", "flag", "star",
    "approve", "reject", "assign", "deploy", "restart", "verify", "monitor", "sort", "merge",
    "split", "review", "grade", "rank", "notify", "alert", "greet", "thank", "publish", "export",
    "import", "encrypt", "decrypt", "compress", "refund", "bill", "ship", "return", "reserve",
    "rent", "lend", "borrow", "donate", "vote", "subscribe", "unsubscribe", "follow", "block",
    "report", "escalate", "summarize", "transcribe", "dictate", "narrate", "illustrate", "sketch",
    "plot", "chart", "index", "crawl", "scan", "trace", "profile", "benchmark", "lint", "compile",
    "format", "validate", "audit", "inspect", "clean", "vacuum", "dust", "polish", "repair",
    "replace", "install", "uninstall", "calibrate", "tune", "heat", "cool", "brew", "bake",
    "grill", "boil", "fry", "slice", "mix", "stir", "pour", "pack", "unpack", "label", "weigh",
    "count", "estimate", "forecast", "predict", "classify", "detect", "highlight", "bookmark",
    "favorite", "retweet", "upvote", "downvote", "mention", "quote", "cite", "watch", "observe",
    "listen", "poll", "survey", "interview", "hire", "fire", "promote", "thaw", "freeze",
    "defrost", "dim", "brighten", "rewind", "skip", "shuffle", "repeat",
];

/// Two-word verbs, said in requests and listed in descriptions ("Find or look up a record."),
/// never in names: a request can name its tool by any verb the description lists. None of
/// them begins a Pace request (`turn on`, `look up` and `pick up` do, with Pace's meaning).
#[rustfmt::skip]
const PHRASAL: &[&str] = &[
    "check in", "sign off", "hand over", "set aside", "carry on", "write down", "read out",
    "send off", "clean up", "fill in", "put away", "drop off", "call up", "cross off",
    "note down", "stand down", "top up", "wind down", "switch over", "tidy up", "stock up",
    "sort out", "print out", "wrap up", "mark down",
];

/// Objects for `verb_object` names and descriptions.
#[rustfmt::skip]
const OBJECTS: &[&str] = &[
    "item", "note", "task", "photo", "order", "ticket", "issue", "song", "video", "post",
    "message", "account", "device", "plant", "pet", "car", "package", "invoice", "report", "event",
    "guest", "room", "table", "recipe", "meal", "file", "record", "user", "job", "build",
    "service", "server", "page", "link", "list", "playlist", "podcast", "book", "movie", "flight",
    "hotel", "budget", "expense", "habit", "goal", "workout", "lesson",
];

/// Names of string parameters: generic nouns, never bound to one meaning.
#[rustfmt::skip]
const STRING_PARAMS: &[&str] = &[
    "item", "subject", "topic", "event", "message", "place", "label", "task", "goal", "person",
    "note", "title", "project", "device", "channel", "document", "product", "account", "location",
    "question", "reason", "trigger", "milestone", "signal", "phrase", "keyword", "resource",
    "service", "name", "recipient", "source", "destination", "owner", "status", "detail", "entry",
    "request", "comment", "object", "state", "outcome", "moment", "criteria", "who", "where",
    "description", "thing", "occasion",
];

/// Values copied from requests: noun phrases, names, times and small clauses.
#[rustfmt::skip]
const VALUES: &[&str] = &[
    "the report", "the blue folder", "Maria", "the quarterly budget", "the server restarts",
    "the oven preheats", "the bus arrives", "dinner is ready", "Tom calls back",
    "the parcel ships", "8 am", "Friday", "the garden hose", "my passport", "the team standup",
    "the invoice from Acme", "the new logo", "tomorrow morning", "the backup is complete",
    "the queue is empty", "the porch lights", "Project Falcon", "the laundry is dry",
    "the guests arrive", "the pizza gets here", "Jenna", "Dr. Patel", "the lease renewal",
    "the second draft", "the spare keys", "the coffee machine", "the deploy goes green",
    "the market opens", "the snow melts", "half past six", "midnight", "the weekend",
    "the last episode", "the tax forms", "Grandma's recipe", "the staging server", "the fish tank",
    "the patio chairs", "the robot vacuum", "the monthly newsletter", "the client signs",
    "the score is posted", "the doors open", "the light turns green", "order 4471", "ticket 88",
    "the red car", "Sunday brunch", "the hiking trip", "the office printer", "the cat",
    "the ficus", "the lab results come in", "the dishwasher is done", "the plane lands",
    "the movie starts", "Lucas", "Priya Shah",
];

/// How a phrase attaches to the verb.
#[rustfmt::skip]
const LINKS: &[&str] = &[
    "", "", "", "until ", "for ", "about ", "to ", "with ", "on ", "from ", "after ", "before ",
    "when ", "at ", "till ",
];

/// Kinds of value for [`NovelOptions::typed`]: parameter names that say what they hold, a
/// description, the values and the words that lead into them. A request's values then fit
/// the parameters they go to, so a planner can tell two string parameters apart by meaning,
/// not by their order. (None of the held-out evaluation verb's words: see the module note.)
struct Kind {
    names: &'static [&'static str],
    desc: &'static str,
    values: &'static [&'static str],
    links: &'static [&'static str],
}

#[rustfmt::skip]
const KINDS: &[Kind] = &[
    Kind { names: &["person", "recipient", "contact", "who", "member", "owner"],
        desc: "The person it is for.",
        values: &["Maria", "Tom", "Jenna", "Dr. Patel", "Lucas", "Priya Shah", "my sister", "the landlord", "Coach Rivera", "Omar"],
        links: &["", "for ", "to ", "with "] },
    Kind { names: &["when", "time", "date", "moment", "deadline"],
        desc: "When, as the user says it.",
        values: &["8 am", "Friday", "tomorrow morning", "half past six", "midnight", "the weekend", "next Tuesday", "noon", "tonight"],
        links: &["at ", "on ", "for ", "by "] },
    Kind { names: &["place", "location", "where", "destination", "venue"],
        desc: "Where, as the user names it.",
        values: &["the office", "the gym", "Lisbon", "the airport", "Grandma's house", "the north entrance", "room 204", "the garden"],
        links: &["at ", "in ", "to ", "near "] },
    Kind { names: &["item", "thing", "object", "product", "document", "title"],
        desc: "The thing to act on.",
        values: &["the report", "the blue folder", "the quarterly budget", "the garden hose", "my passport", "the new logo", "the lease renewal", "the second draft", "the spare keys", "the tax forms", "order 4471", "ticket 88"],
        links: &[""] },
    Kind { names: &["event", "trigger", "signal", "occasion"],
        desc: "What has to happen first.",
        values: &["the server restarts", "the bus arrives", "dinner is ready", "Tom calls back", "the parcel ships", "the backup is complete", "the laundry is dry", "the guests arrive", "the plane lands"],
        links: &["when ", "after ", "once ", "as soon as "] },
    Kind { names: &["text", "message", "note", "comment", "body"],
        desc: "The words to use, as the user says them.",
        values: &["running late", "happy birthday", "call me back", "the door code is 4412", "see you soon", "bring snacks", "meeting moved to 3"],
        links: &["saying ", "that says ", "with the words "] },
    Kind { names: &["topic", "subject", "keyword", "query"],
        desc: "What it is about.",
        values: &["solar panels", "the hiking trip", "Project Falcon", "sourdough", "the team offsite", "knee pain", "jazz history"],
        links: &["about ", "on ", "regarding "] },
];

/// Integer limits: (unit in the request, parameter name suffixes).
#[rustfmt::skip]
const UNITS: &[&str] = &[
    "seconds", "minutes", "hours", "days", "times", "items", "percent",
];
#[rustfmt::skip]
const INT_PREFIXES: &[&str] = &[
    "max", "limit", "delay", "duration", "within", "budget", "span",
];
/// Durations for [`NovelOptions::durations`]: a request that gives only a length of time.
const DURATION_UNITS: &[&str] = &["seconds", "minutes", "hours"];
const DURATION_LINKS: &[&str] = &["", "for ", "for about ", "about ", "another "];
#[rustfmt::skip]
const INT_PHRASES: &[&str] = &[
    "for {n} {u}", "within {n} {u}", "but no longer than {n} {u}", "but no more than {n} {u}",
    "up to {n} {u}", "at most {n} {u}", "in {n} {u}", "{n} {u} max", ", up to {n} {u}",
];

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn tool_value(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": required,
            "additionalProperties": false}}})
}

/// An invented tool and what a request must say to call it.
struct Invented {
    tool: Value,
    /// Words a request may use to name it (its name's verb, and its description's verbs).
    verbs: Vec<String>,
    strings: Vec<&'static str>,
    /// With [`NovelOptions::typed`]: each string parameter's kind (an index into [`KINDS`]).
    kinds: Vec<usize>,
    /// The integer parameter and the unit a request counts it in.
    int: Option<(String, &'static str)>,
}

/// Syllables for made-up verbs ("blicket", "dax"): a planner that only ever copies words it
/// has seen as whole sub-word pieces does not copy a new word spelt in unfamiliar pieces (a
/// diagnostic in the README: renaming the held-out verb to a familiar word took it from 0 to
/// 53% of its requests), so some verbs are words no vocabulary has.
#[rustfmt::skip]
const ONSETS: &[&str] = &[
    "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "bl", "gr", "st", "tr",
    "sk", "pl",
];
const NUCLEI: &[&str] = &["a", "e", "i", "o", "u", "ee", "oo", "ai", "ou"];
const CODAS: &[&str] = &["", "", "", "n", "k", "t", "m", "sh", "x", "ck"];

/// More onsets and codas for [`NovelOptions::wide_spelling`]: with only the ones above, no
/// made-up verb starts with `w`, `h`, `c`, `j` or `y`, so a new tool named `wait` begins with
/// a piece (`wa`) no training tool name began with, and a planner does not copy it (README,
/// "Held-out verb").
#[rustfmt::skip]
const WIDE_ONSETS: &[&str] = &[
    "c", "h", "j", "w", "y", "ch", "sh", "th", "wh", "fl", "fr", "cr", "dr", "pr", "sp", "sw",
    "sn", "gl", "br", "kl", "qu", "",
];
const WIDE_CODAS: &[&str] = &["t", "p", "l", "r", "s", "st", "nt", "rk", "ld", "ng", "ss"];

fn pseudo_word(rng: &mut Rng, wide: bool) -> String {
    let mut w = String::new();
    if !wide {
        for _ in 0..2 + rng.below(2) {
            w.push_str(rng.pick::<&str>(ONSETS));
            w.push_str(rng.pick::<&str>(NUCLEI));
        }
        w.push_str(rng.pick::<&str>(CODAS));
        return w;
    }
    let onsets: Vec<&str> = ONSETS.iter().chain(WIDE_ONSETS).copied().collect();
    let codas: Vec<&str> = CODAS.iter().chain(WIDE_CODAS).copied().collect();
    // One syllable too (`wait`-sized words), with a coda so it is not a bare `ba`.
    let syllables = 1 + rng.below(3);
    for _ in 0..syllables {
        w.push_str(rng.pick::<&str>(&onsets));
        w.push_str(rng.pick::<&str>(NUCLEI));
    }
    let coda = loop {
        let c = *rng.pick::<&str>(&codas);
        if syllables > 1 || !c.is_empty() {
            break c;
        }
    };
    w.push_str(coda);
    w
}

/// A verb not yet in the catalog: a real one, or (30%) a made-up one.
pub(crate) fn fresh_verb(rng: &mut Rng, taken: &mut HashSet<String>, wide: bool) -> String {
    loop {
        let v = if rng.chance(0.3) {
            pseudo_word(rng, wide)
        } else {
            rng.pick(VERBS).to_string()
        };
        let held_out = ["wait", "pause", "hold"].iter().any(|h| v.contains(h));
        if !held_out && taken.insert(v.clone()) {
            return v;
        }
    }
}

/// The verbs a description lists: one (`Archive a note.`), or two or three alternatives
/// (`Archive, shelve or put away a note.`), so a request may say any of them.
fn described_verbs(
    rng: &mut Rng,
    verb: &str,
    taken: &mut HashSet<String>,
    opts: NovelOptions,
) -> Vec<String> {
    let mut verbs = vec![if rng.chance(0.4) {
        fresh_verb(rng, taken, opts.wide_spelling)
    } else {
        verb.to_string()
    }];
    if opts.alternatives && rng.chance(0.5) {
        for _ in 0..1 + rng.below(2) {
            let v = if rng.chance(0.3) {
                rng.pick(PHRASAL).to_string()
            } else {
                fresh_verb(rng, taken, opts.wide_spelling)
            };
            if !verbs.contains(&v) {
                verbs.push(v);
            }
        }
        // The name's verb is not always listed first.
        rng.shuffle(&mut verbs);
    }
    verbs
}

/// "a", "a or b", "a, b or c"
fn either_of(words: &[String]) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

fn invent(rng: &mut Rng, taken: &mut HashSet<String>, opts: NovelOptions) -> Invented {
    let alternatives = opts.alternatives;
    let verb = fresh_verb(rng, taken, opts.wide_spelling);
    let described = described_verbs(rng, &verb, taken, opts);
    let object = *rng.pick(OBJECTS);
    // (Without alternatives the list is [name's verb, description's verb], as the shipped
    // default planner's data had it, so its recipe still regenerates the same traces.)
    let with_name = |verb: String| match alternatives {
        false => vec![verb, described[0].clone()],
        true => {
            let others = described.iter().filter(|d| **d != verb).cloned();
            std::iter::once(verb.clone())
                .chain(others)
                .collect::<Vec<_>>()
        }
    };
    let (name, verbs) = match rng.below(20) {
        0..=8 => (verb.clone(), with_name(verb)),
        // (a real tool may have this name already: `track_order`)
        9..=14 if !taken.contains(&format!("{verb}_{object}")) => {
            (format!("{verb}_{object}"), with_name(verb))
        }
        // The combined name is taken: the verb alone, as for 0..=8.
        9..=14 => (verb.clone(), with_name(verb)),
        // An opaque name: only the description says what it does.
        _ => loop {
            let name = format!("tool_{}", rng.below(1000));
            if !taken.contains(&name) {
                break (name, described.clone());
            }
        },
    };
    taken.insert(name.clone());
    let n_strings = if rng.chance(0.35) { 2 } else { 1 };
    let mut strings: Vec<&'static str> = Vec::new();
    let mut kinds: Vec<usize> = Vec::new();
    while strings.len() < n_strings {
        if opts.typed {
            let k = rng.below(KINDS.len());
            if !kinds.contains(&k) {
                kinds.push(k);
                strings.push(*rng.pick(KINDS[k].names));
            }
            continue;
        }
        let p = *rng.pick(STRING_PARAMS);
        if !strings.contains(&p) {
            strings.push(p);
        }
    }
    let int = rng.chance(0.4).then(|| {
        let unit = *rng.pick(UNITS);
        let name = match rng.below(3) {
            0 => unit.to_string(),
            _ => format!("{}_{unit}", rng.pick(INT_PREFIXES)),
        };
        (name, unit)
    });
    let mut props = serde_json::Map::new();
    for (i, p) in strings.iter().enumerate() {
        let schema = match kinds.get(i) {
            Some(&k) => json!({"type": "string", "description": KINDS[k].desc}),
            None => json!({"type": "string"}),
        };
        props.insert(p.to_string(), schema);
    }
    if let Some((p, _)) = &int {
        props.insert(p.clone(), json!({"type": "integer", "minimum": 0}));
    }
    let tail = match rng.below(4) {
        0 => format!(
            " {}",
            rng.pick(&["now", "for the user", "when asked", "right away"])
        ),
        1 => format!(" or a {}", rng.pick(OBJECTS)),
        _ => String::new(),
    };
    let description = format!("{} a {object}{tail}.", capitalized(&either_of(&described)));
    // Every string parameter is required but the last of two; the limit is optional.
    let required: Vec<&str> = if strings.len() == 2 && rng.chance(0.5) {
        vec![strings[0]]
    } else {
        strings.clone()
    };
    Invented {
        tool: tool_value(&name, &description, Value::Object(props), &required),
        verbs,
        strings,
        kinds,
        int,
    }
}

/// An invented tool to sit in a catalog as a distractor: a real request must not call it
/// just because it is new. `taken` holds the catalog's names (and receives the new verbs).
pub(crate) fn invented_distractor(rng: &mut Rng, taken: &mut HashSet<String>) -> Tool {
    let tool = invent(rng, taken, NovelOptions::default()).tool;
    Catalog::from_value(&Value::Array(vec![tool]))
        .expect("invented tools import")
        .tools
        .remove(0)
}

/// A request that gives only a duration ("snooze for 20 minutes") for a tool with one
/// required string parameter: the duration is the phrase, so it is that parameter's value,
/// and the number also fills the integer parameter when that counts in the same unit (no
/// unit is converted: a limit in seconds stays unset for "20 minutes").
fn duration_draft(rng: &mut Rng, inv: &Invented) -> Draft {
    let mut d = Draft::new("novel", Style::Imperative);
    let verb = rng.pick(&inv.verbs).clone();
    let own_unit = inv
        .int
        .as_ref()
        .map(|(_, u)| *u)
        .filter(|u| DURATION_UNITS.contains(u));
    let unit = match own_unit {
        Some(u) if rng.chance(0.5) => u,
        _ => *rng.pick(DURATION_UNITS),
    };
    let n = rng.range(2, 900);
    d.slot("s0", "value", format!("{n} {unit}"));
    d.tpl = format!("{verb} {}{{s0}}", rng.pick(DURATION_LINKS));
    let mut args = vec![("s0", A::Slot("s0"))];
    if own_unit == Some(unit) {
        args.push(("n", A::Int("s0")));
    }
    d.calls.push(call("x", args));
    d
}

/// A request for `tool`: its verb, the phrases for its string parameters, maybe its limit.
/// Tool and parameter names are placeholders (`x`, `s0`, `s1`, `n`) renamed after rendering.
fn draft(rng: &mut Rng, inv: &Invented, required: usize, opts: NovelOptions) -> Draft {
    if opts.durations && required == 1 && rng.chance(0.2) {
        return duration_draft(rng, inv);
    }
    let mut d = Draft::new("novel", Style::Imperative);
    let verb = rng.pick(&inv.verbs).clone();
    let mut core = verb.clone();
    let mut args = Vec::new();
    let placeholders = ["s0", "s1"];
    let n_phrases = if inv.strings.len() > required && rng.chance(0.5) {
        required
    } else {
        inv.strings.len()
    };
    let mut used = HashSet::new();
    for (i, slot) in placeholders.iter().enumerate().take(n_phrases) {
        let (values, links) = match inv.kinds.get(i) {
            Some(&k) => (KINDS[k].values, KINDS[k].links),
            None => (VALUES, LINKS),
        };
        let value = loop {
            let v = *rng.pick(values);
            if used.insert(v) {
                break v;
            }
        };
        d.slot(slot, "value", value);
        let link = *rng.pick(links);
        let link = if i > 0 && link.is_empty() {
            "and "
        } else {
            link
        };
        core.push_str(&format!(" {link}{{{slot}}}"));
        args.push((*slot, A::Slot(slot)));
    }
    if let Some((_, unit)) = &inv.int {
        if rng.chance(0.7) {
            let n = rng.range(2, 900).to_string();
            d.slot("n", "number", n);
            let phrase = rng.pick(INT_PHRASES).replace("{u}", unit);
            if rng.chance(0.25) && !phrase.starts_with(',') {
                core = format!("{verb} {phrase}{}", &core[verb.len()..]);
            } else if phrase.starts_with(',') {
                core.push_str(&phrase);
            } else {
                core.push(' ');
                core.push_str(&phrase);
            }
            args.push(("n", A::Int("n")));
        }
    }
    d.tpl = core;
    d.calls.push(call("x", args));
    d
}

/// `n` distinct requests for invented tools, each with its own catalog in `tools`. Half the
/// catalogs are a whole real catalog (`home`, e.g. Pace's) plus the invented tool and maybe one
/// more: the situation of a tool added to a catalog the planner knows. The other half mix the
/// invented tool, one to three other invented tools and up to four tools drawn from `pool`
/// (real catalogs' tools). Tools are shuffled. Every trace passes the DSL round trip and
/// copy-fidelity validation against its catalog.
pub fn novel_traces(
    n: usize,
    seed: u64,
    home: &[Tool],
    pool: &[Tool],
) -> Result<Vec<Trace>, DataError> {
    novel_traces_with(n, seed, home, pool, NovelOptions::default())
}

/// How [`novel_traces_with`] invents tools. The default is what the shipped default planner's
/// data used, so its recipe regenerates the same traces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NovelOptions {
    /// About half the descriptions list two or three verbs (`Archive, shelve or put away a
    /// note.`) and a request may say any of them: for planners that read descriptions
    /// (`train --tools-in-prompt` without `--no-descriptions`).
    pub alternatives: bool,
    /// Made-up verbs use more onsets and codas (`whaist`, `chu`), so their names begin with
    /// more of the pieces a real new tool's name may begin with.
    pub wide_spelling: bool,
    /// A fifth of the requests for a tool with one required string parameter give only a
    /// duration ("snooze for 20 minutes" -> `snooze(moment=20 minutes)`), which is then that
    /// parameter's value, and the integer parameter's too when it counts in the same unit:
    /// durations are phrases like any other, which the other requests never show.
    pub durations: bool,
    /// String parameters have a kind (a person, a time, a place, a thing, an event, words to
    /// say, a topic): a name and a description that say what they hold, values of that kind,
    /// and the words that lead into them ("for Maria", "when the bus arrives"). Without it any
    /// value goes to any generic parameter name, and a request's values can only be told
    /// apart by their order.
    pub typed: bool,
    /// Requests drawn per invented tool and its catalog (0 and 1 both mean one): with a
    /// batch's size, LoRA training runs each catalog prompt once per batch instead of once
    /// per example.
    pub group: usize,
}

/// [`novel_traces`] with [`NovelOptions`].
pub fn novel_traces_with(
    n: usize,
    seed: u64,
    home: &[Tool],
    pool: &[Tool],
    opts: NovelOptions,
) -> Result<Vec<Trace>, DataError> {
    let mut rng = Rng::new(seed).fork(0x0A0E1);
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    let mut budget = crate::DrawBudget::new(n, "invented-tool requests");
    while out.len() < n {
        budget.draw(out.len())?;
        let mut taken: HashSet<String> = home.iter().chain(pool).map(|t| t.name.clone()).collect();
        let target = invent(&mut rng, &mut taken, opts);
        let mut tools = vec![target.tool.clone()];
        let openai = |t: &Tool| {
            json!({"type": "function", "function": {"name": t.name,
                "description": t.description, "parameters": t.parameters}})
        };
        if !home.is_empty() && rng.chance(0.5) {
            tools.extend(home.iter().map(openai));
            if rng.chance(0.5) {
                tools.push(invent(&mut rng, &mut taken, opts).tool);
            }
        } else {
            for _ in 0..1 + rng.below(3) {
                tools.push(invent(&mut rng, &mut taken, opts).tool);
            }
            if !pool.is_empty() {
                for _ in 0..rng.below(5) {
                    let t = rng.pick(pool);
                    if tools
                        .iter()
                        .all(|v| v["function"]["name"] != t.name.as_str())
                    {
                        tools.push(openai(t));
                    }
                }
            }
        }
        rng.shuffle(&mut tools);
        let required = target.tool["function"]["parameters"]["required"]
            .as_array()
            .map_or(0, Vec::len);
        // `group` draws for this tool; a repeated request is dropped (with a group of one,
        // the next tool is invented instead, as before groups existed).
        for _ in 0..opts.group.max(1) {
            if out.len() == n {
                break;
            }
            let d = draft(&mut rng, &target, required, opts);
            let r = gen::realize(&d, &mut rng);
            if !seen.insert(r.request.to_lowercase()) {
                continue;
            }
            // Placeholders to the invented names.
            let mut calls = r.plan.calls;
            for c in &mut calls {
                c.name = target.tool["function"]["name"]
                    .as_str()
                    .unwrap_or("x")
                    .to_string();
                let args = std::mem::take(&mut c.arguments);
                for (k, v) in args {
                    let real = match k.as_str() {
                        "s0" => target.strings[0].to_string(),
                        "s1" => target.strings[1].to_string(),
                        _ => target.int.as_ref().map_or(k.clone(), |(p, _)| p.clone()),
                    };
                    c.arguments.insert(real, v);
                }
            }
            out.push(crate::families::trace_with_tools(
                tools.clone(),
                calls,
                r.request,
                "invented tool",
            )?);
        }
    }
    Ok(out)
}
