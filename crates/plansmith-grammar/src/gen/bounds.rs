//! Reading the schema facts the emitter needs: types, numeric and length bounds, entity
//! references, and whether a Lark expression names a hole.

use super::*;

pub(super) fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether a Lark expression names a copy or entity hole (`copy_3`, `ent_0`) outside its
/// string literals and regexes.
pub(super) fn refers_to_a_hole(expr: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut word = String::new();
    let is_hole = |w: &str| {
        ["copy_", "ent_"].iter().any(|p| {
            w.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    for c in expr.chars().chain(std::iter::once(' ')) {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if is_hole(&word) {
            return true;
        }
        word.clear();
        if c == '"' || c == '/' {
            quote = Some(c);
        }
    }
    false
}

pub(super) fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The entity types of an EntityRef object: `{type: enum[...], label: free string}`.
pub(super) fn entity_ref_types(schema: &Value) -> Option<Vec<String>> {
    let props = schema.get("properties")?.as_object()?;
    let t = props.get("type")?;
    let label = props.get("label")?;
    if types(t) != ["string"] || types(label) != ["string"] {
        return None;
    }
    if [
        "enum",
        "const",
        "pattern",
        "format",
        "minLength",
        "maxLength",
    ]
    .iter()
    .any(|k| label.get(k).is_some())
    {
        return None;
    }
    // Only the types the `type` schema's other keywords (`const`, `pattern`, ...) also allow:
    // the grammar is never looser than the validator.
    let type_validator = jsonschema::validator_for(t).ok()?;
    let values: Vec<String> = t
        .get("enum")?
        .as_array()?
        .iter()
        .filter(|v| type_validator.is_valid(v))
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    (!values.is_empty()).then_some(values)
}

pub(super) fn json_type_ok(ts: &[&str], v: &Value) -> bool {
    ts.is_empty()
        || ts.iter().any(|t| match *t {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "object" => v.is_object(),
            "array" => v.is_array(),
            _ => false,
        })
}

pub(super) fn get_usize(schema: &Value, key: &str) -> Option<usize> {
    schema.get(key).and_then(Value::as_u64).map(|v| v as usize)
}

/// Largest length or item count the grammar writes out: no plan is ever that long (every token
/// budget stops far earlier), and llguidance cannot parse repetition counts near 2^64.
pub(super) const COUNT_CAP: usize = 1 << 16;

/// An upper bound (`maxLength`, `maxItems`); one beyond [`COUNT_CAP`] bounds nothing a plan
/// can reach, so it is read as no bound.
pub(super) fn get_max(schema: &Value, key: &str) -> Option<usize> {
    get_usize(schema, key).filter(|&v| v <= COUNT_CAP)
}

/// A lower bound (`minLength`, `minItems`); one beyond [`COUNT_CAP`] no plan can meet, which
/// is refused rather than compiled into a grammar nothing can finish.
pub(super) fn get_min(tool: &str, path: &str, schema: &Value, key: &str) -> R<usize> {
    match get_usize(schema, key) {
        Some(v) if v > COUNT_CAP => Err(unsupported(
            tool,
            path,
            format!("`{key}` = {v}: more than a plan can hold ({COUNT_CAP})"),
        )),
        v => Ok(v.unwrap_or(0)),
    }
}

/// (lower, upper) bounds with exclusivity, from minimum/maximum/exclusive* (draft 4 and 6+).
pub(super) type Bound = Option<(f64, bool)>;
pub(super) fn bounds(schema: &Value) -> (Bound, Bound) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let flag = |k: &str| schema.get(k).and_then(Value::as_bool).unwrap_or(false);
    let tighter = |a: Bound, b: Bound, lower: bool| match (a, b) {
        (None, x) | (x, None) => x,
        (Some(x), Some(y)) => {
            let pick_x = if x.0 == y.0 {
                x.1
            } else if lower {
                x.0 > y.0
            } else {
                x.0 < y.0
            };
            Some(if pick_x { x } else { y })
        }
    };
    let lo = num("minimum").map(|v| (v, flag("exclusiveMinimum")));
    let lo = tighter(lo, num("exclusiveMinimum").map(|v| (v, true)), true);
    let hi = num("maximum").map(|v| (v, flag("exclusiveMaximum")));
    let hi = tighter(hi, num("exclusiveMaximum").map(|v| (v, true)), false);
    (lo, hi)
}

pub(super) fn int_bounds(schema: &Value) -> (Option<i64>, Option<i64>) {
    let (lo, hi) = bounds(schema);
    let clamp = |f: f64| f.clamp(-1e16, 1e16) as i64;
    let lo = lo.map(|(v, ex)| {
        if ex {
            clamp(v.floor()) + 1
        } else {
            clamp(v.ceil())
        }
    });
    let hi = hi.map(|(v, ex)| {
        if ex {
            clamp(v.ceil()) - 1
        } else {
            clamp(v.floor())
        }
    });
    (lo, hi)
}
