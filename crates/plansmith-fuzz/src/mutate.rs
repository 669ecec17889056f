//! Mutators: raw bytes (flips, interesting integers, truncation, splices), text (fragments that
//! matter to our parsers), and JSON trees (type swaps, deleted and added keys, schema keywords,
//! deep nesting, hostile strings and numbers), each seeded so a run can be replayed.

use serde_json::{Map, Value};

/// splitmix64: small, fast, and good enough to drive mutations reproducibly.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// `big` with probability `p`, else `small` (rare large sizes).
    pub fn sometimes(&mut self, p: f64, big: usize, small: usize) -> usize {
        if self.chance(p) {
            big
        } else {
            small
        }
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Fragments that mean something to the plan syntaxes, JSON, chat templates and tokenizers.
const FRAGMENTS: &[&str] = &[
    "(",
    ")",
    ";",
    "=",
    "|",
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\n",
    " ",
    "\t",
    "\r\n",
    "done",
    "null",
    "true",
    "-0",
    "1e309",
    "NaN",
    "\\u0000",
    "\\ud800",
    "\u{0}",
    "\u{feff}",
    "é",
    "日本語",
    "🙂",
    "\u{202e}",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "{{",
    "}}",
    "{%",
    "%}",
    "((((((((",
    "))))))))",
    "=;=;",
    "a.b.c=",
    ".0=",
    "\"verb\":",
    "\"tool_calls\":",
    "\"arguments\":",
    "\"name\":",
    "$ref",
    "#/$defs/",
    "<s>",
    "</s>",
];

/// Integers that break size and offset arithmetic.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    0x1_0000_0000,
    1 << 40,
    1 << 62,
    i64::MAX as u64,
    u64::MAX,
    u64::MAX - 1,
];

/// Mutate raw bytes in place, `rounds` times. `hot` bytes at the front (a file header) are
/// hit more often than the rest.
pub fn bytes(rng: &mut Rng, data: &mut Vec<u8>, rounds: usize, hot: usize) {
    for _ in 0..rounds {
        let len = data.len();
        let at = |rng: &mut Rng| {
            if len == 0 {
                0
            } else if hot > 0 && rng.chance(0.8) {
                rng.below(hot.min(len))
            } else {
                rng.below(len)
            }
        };
        match rng.below(8) {
            0 if len > 0 => {
                let i = at(rng);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = at(rng);
                data[i] = rng.next_u64() as u8;
            }
            2 if len >= 8 => {
                // An interesting little-endian integer, 4 or 8 bytes wide (sizes, counts).
                let v = *rng.pick(INTERESTING);
                let width = if rng.chance(0.5) { 4 } else { 8 };
                let i = at(rng).min(len - width);
                data[i..i + width].copy_from_slice(&v.to_le_bytes()[..width]);
            }
            3 if len > 0 => {
                let n = rng.below(len);
                data.truncate(n);
            }
            4 => {
                let i = at(rng);
                let n = 1 + rng.below(16);
                let extra: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                data.splice(i..i, extra);
            }
            5 if len > 1 => {
                let i = at(rng);
                let n = 1 + rng.below((len - i).min(64));
                data.drain(i..(i + n).min(len));
            }
            6 if len > 1 => {
                // Copy a chunk elsewhere (repeated structure, lying counts).
                let a = rng.below(len);
                let n = 1 + rng.below((len - a).min(256));
                let chunk = data[a..a + n].to_vec();
                let b = at(rng);
                data.splice(b..b, chunk);
            }
            _ => {
                let i = at(rng);
                let f = rng.pick(FRAGMENTS).as_bytes().to_vec();
                data.splice(i.min(data.len())..i.min(data.len()), f);
            }
        }
    }
}

/// Mutate text: fragment insertions, deletions, case changes, repetition; kept valid UTF-8.
pub fn text(rng: &mut Rng, s: &str, rounds: usize) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    for _ in 0..rounds {
        let len = chars.len();
        let i = rng.below(len + 1);
        match rng.below(6) {
            0 | 1 => {
                let f = rng.pick(FRAGMENTS);
                chars.splice(i..i, f.chars());
            }
            2 if len > 0 => {
                let n = 1 + rng.below((len - i.min(len - 1)).min(8));
                let start = i.min(len - 1);
                chars.drain(start..(start + n).min(len));
            }
            3 if len > 0 => {
                let start = i.min(len - 1);
                let n = 1 + rng.below((len - start).min(32));
                let chunk: Vec<char> = chars[start..start + n].to_vec();
                let times = 1 + {
                    let m = rng.sometimes(0.1, 500, 4);
                    rng.below(m)
                };
                for _ in 0..times {
                    chars.splice(start..start, chunk.iter().copied());
                }
            }
            4 => {
                let c = char::from_u32(rng.next_u64() as u32 % 0x11_0000).unwrap_or('\u{fffd}');
                chars.insert(i, c);
            }
            _ if len > 0 => {
                let j = i.min(len - 1);
                chars[j] = if chars[j].is_lowercase() {
                    chars[j].to_ascii_uppercase()
                } else {
                    chars[j].to_ascii_lowercase()
                };
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

/// Keys JSON Schema and our formats give meaning to, used as added keys.
const KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "enum",
    "items",
    "$ref",
    "$defs",
    "definitions",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "const",
    "default",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "multipleOf",
    "minItems",
    "maxItems",
    "additionalProperties",
    "description",
    "name",
    "parameters",
    "function",
    "input_schema",
    "inputSchema",
    "tools",
    "arguments",
    "calls",
    "request",
    "stream",
    "tool_choice",
    "messages",
    "role",
    "content",
    "max_tokens",
    "n",
    "x-copy",
    "nullable",
    "prefixItems",
];

fn scalar(rng: &mut Rng) -> Value {
    match rng.below(14) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(0.5)),
        2 => Value::from(*rng.pick(&[0i64, -1, 1, i64::MIN, i64::MAX, 4096, -4097])),
        3 => Value::from(u64::MAX),
        4 => serde_json::Number::from_f64(*rng.pick(&[1e308, -1e308, 0.5, -0.0, 1e-320, 3.25]))
            .map_or(Value::Null, Value::Number),
        5 => Value::String(String::new()),
        6 => Value::String("x".repeat(
            1 + {
                let m = rng.sometimes(0.05, 20_000, 64);
                rng.below(m)
            },
        )),
        7 => Value::String(rng.pick(FRAGMENTS).to_string()),
        8 => Value::String(rng.pick(KEYS).to_string()),
        9 => Value::String(
            (*rng.pick(&[
                "string", "integer", "number", "boolean", "array", "object", "null", "dict",
                "float", "tuple", "any",
            ]))
            .into(),
        ),
        10 => Value::String(format!("#/$defs/{}", rng.pick(KEYS))),
        11 => Value::Array(Vec::new()),
        12 => Value::Object(Map::new()),
        _ => Value::String(text(rng, "open the file", 3)),
    }
}

/// Count the nodes of a tree (the mutation site is one of them, chosen uniformly).
fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

fn nth_mut<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
    if *n == 0 {
        return Some(v);
    }
    *n -= 1;
    match v {
        Value::Array(a) => a.iter_mut().find_map(|c| nth_mut(c, n)),
        Value::Object(o) => o.values_mut().find_map(|c| nth_mut(c, n)),
        _ => None,
    }
}

fn nth<'a>(v: &'a Value, n: &mut usize) -> Option<&'a Value> {
    if *n == 0 {
        return Some(v);
    }
    *n -= 1;
    match v {
        Value::Array(a) => a.iter().find_map(|c| nth(c, n)),
        Value::Object(o) => o.values().find_map(|c| nth(c, n)),
        _ => None,
    }
}

/// Apply `rounds` structural mutations to a JSON tree. `donor` supplies subtrees from other
/// seeds (splicing real structure into new places).
pub fn json(rng: &mut Rng, v: &mut Value, rounds: usize, donor: &Value) {
    for _ in 0..rounds {
        let total = count(v);
        let mut n = rng.below(total);
        let Some(node) = nth_mut(v, &mut n) else {
            continue;
        };
        match rng.below(10) {
            0 | 1 => *node = scalar(rng),
            2 => {
                // Delete a key or an element.
                match node {
                    Value::Object(o) if !o.is_empty() => {
                        let k = o
                            .keys()
                            .nth(rng.below(o.len()))
                            .cloned()
                            .unwrap_or_default();
                        o.shift_remove(&k);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        let i = rng.below(a.len());
                        a.remove(i);
                    }
                    _ => *node = Value::Null,
                }
            }
            3 | 4 => {
                // Add a meaningful key (or element) with a scalar or a donor subtree.
                let value = if rng.chance(0.5) {
                    scalar(rng)
                } else {
                    let mut k = rng.below(count(donor));
                    nth(donor, &mut k).cloned().unwrap_or(Value::Null)
                };
                match node {
                    Value::Object(o) => {
                        o.insert(rng.pick(KEYS).to_string(), value);
                    }
                    Value::Array(a) => {
                        let i = rng.below(a.len() + 1);
                        a.insert(i, value);
                    }
                    _ => *node = value,
                }
            }
            5 => {
                // Deep nesting (recursion limits in our own walkers).
                let depth = 1 + {
                    let m = rng.sometimes(0.2, 400, 12);
                    rng.below(m)
                };
                let mut inner = node.take();
                for _ in 0..depth {
                    inner = if rng.chance(0.5) {
                        Value::Array(vec![inner])
                    } else {
                        let mut m = Map::new();
                        m.insert(
                            (*rng.pick(&["properties", "items", "a", "anyOf"])).into(),
                            inner,
                        );
                        Value::Object(m)
                    };
                }
                *node = inner;
            }
            6 => {
                // Duplicate an array's elements many times (size limits).
                if let Value::Array(a) = node {
                    if let Some(first) = a.first().cloned() {
                        let times = 1 + {
                            let m = rng.sometimes(0.1, 300, 4);
                            rng.below(m)
                        };
                        for _ in 0..times {
                            a.push(first.clone());
                        }
                    }
                }
            }
            7 => {
                if let Value::String(s) = node {
                    let r = 1 + rng.below(3);
                    *s = text(rng, s, r);
                }
            }
            8 => {
                // Wrong type of container.
                *node = match node.take() {
                    Value::Object(o) => Value::Array(o.into_iter().map(|(_, v)| v).collect()),
                    Value::Array(a) => Value::Object(
                        a.into_iter()
                            .enumerate()
                            .map(|(i, v)| (i.to_string(), v))
                            .collect(),
                    ),
                    Value::String(s) => Value::Array(vec![Value::String(s)]),
                    other => Value::Array(vec![other]),
                };
            }
            _ => {
                // Rename a key.
                if let Value::Object(o) = node {
                    if !o.is_empty() {
                        let k = o
                            .keys()
                            .nth(rng.below(o.len()))
                            .cloned()
                            .unwrap_or_default();
                        if let Some(val) = o.shift_remove(&k) {
                            o.insert(text(rng, &k, 1), val);
                        }
                    }
                }
            }
        }
    }
}

/// A seed mutated as JSON, then serialized; sometimes also as bytes (broken JSON).
pub fn json_bytes(rng: &mut Rng, seed: &Value, donor: &Value) -> Vec<u8> {
    let mut v = seed.clone();
    let rounds = 1 + rng.below(4);
    json(rng, &mut v, rounds, donor);
    let mut out = serde_json::to_vec(&v).unwrap_or_default();
    if rng.chance(0.15) {
        let r = 1 + rng.below(3);
        bytes(rng, &mut out, r, 0);
    }
    out
}
