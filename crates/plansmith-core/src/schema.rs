//! JSON Schema handling for tool parameters: the subset we support, `$ref` inlining, and the
//! mappings from BFCL and xLAM parameter notations to JSON Schema.
//!
//! Everything downstream (grammar, validation, prompts) sees self-contained schemas: local
//! `$ref`s are inlined at import and any keyword we cannot enforce while decoding is rejected
//! here, so no constraint is ever silently dropped.

use serde_json::{json, Map, Value};

/// Keywords we enforce (in the grammar and in validation) or that carry no constraint.
const SUPPORTED: &[&str] = &[
    "type",
    "description",
    "title",
    "default",
    "examples",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "anyOf",
    "$schema",
    "$comment",
    "$id",
    "strict",
];

const TYPES: &[&str] = &[
    "string", "integer", "number", "boolean", "object", "array", "null",
];

/// A schema problem, located by a JSON path relative to the schema root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    pub path: String,
    pub kind: SchemaProblemKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaProblemKind {
    Unsupported(String),
    BadRef(String),
    Invalid(String),
}

impl std::fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            SchemaProblemKind::Unsupported(k) => {
                write!(f, "unsupported schema feature `{k}` at {}", self.path)
            }
            SchemaProblemKind::BadRef(r) => {
                write!(f, "$ref `{r}` does not resolve at {}", self.path)
            }
            SchemaProblemKind::Invalid(m) => write!(f, "{m} at {}", self.path),
        }
    }
}

fn problem(path: &str, kind: SchemaProblemKind) -> SchemaProblem {
    SchemaProblem {
        path: path.to_string(),
        kind,
    }
}

/// Inline local `$ref`s (`#/$defs/x`, `#/definitions/x`), drop the definition tables, and
/// check that only supported keywords remain. `path` names the schema root in messages.
pub fn normalize(schema: &Value, path: &str) -> Result<Value, SchemaProblem> {
    let mut inlined = inline_refs(schema, schema, path, &mut Vec::new())?;
    if let Value::Object(map) = &mut inlined {
        map.remove("$defs");
        map.remove("definitions");
    }
    check_supported(&inlined, path)?;
    Ok(inlined)
}

fn inline_refs(
    node: &Value,
    root: &Value,
    path: &str,
    stack: &mut Vec<String>,
) -> Result<Value, SchemaProblem> {
    match node {
        Value::Object(map) => {
            if let Some(reference) = map.get("$ref") {
                let reference = reference.as_str().ok_or_else(|| {
                    problem(
                        path,
                        SchemaProblemKind::Invalid("$ref must be a string".into()),
                    )
                })?;
                if stack.iter().any(|r| r == reference) {
                    return Err(problem(
                        path,
                        SchemaProblemKind::Unsupported(format!("recursive $ref `{reference}`")),
                    ));
                }
                let target = resolve_pointer(root, reference)
                    .ok_or_else(|| problem(path, SchemaProblemKind::BadRef(reference.into())))?;
                stack.push(reference.to_string());
                let mut resolved = inline_refs(target, root, path, stack)?;
                stack.pop();
                // Sibling keywords next to `$ref` (e.g. a description) refine the target.
                if let Value::Object(resolved_map) = &mut resolved {
                    for (k, v) in map {
                        if k != "$ref" {
                            resolved_map.insert(k.clone(), inline_refs(v, root, path, stack)?);
                        }
                    }
                }
                return Ok(resolved);
            }
            let mut out = Map::new();
            for (k, v) in map {
                let child = format!("{path}.{k}");
                out.insert(k.clone(), inline_refs(v, root, &child, stack)?);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| inline_refs(v, root, &format!("{path}[{i}]"), stack))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

fn resolve_pointer<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

fn check_supported(schema: &Value, path: &str) -> Result<(), SchemaProblem> {
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(true) => return Ok(()),
        _ => {
            return Err(problem(
                path,
                SchemaProblemKind::Invalid("a schema must be an object".into()),
            ))
        }
    };
    for key in map.keys() {
        if !SUPPORTED.contains(&key.as_str()) {
            return Err(problem(path, SchemaProblemKind::Unsupported(key.clone())));
        }
    }
    if let Some(t) = map.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        for name in names {
            match name.as_str() {
                Some(n) if TYPES.contains(&n) => {}
                _ => {
                    return Err(problem(
                        &format!("{path}.type"),
                        SchemaProblemKind::Invalid(format!("unknown type {name}")),
                    ))
                }
            }
        }
    }
    if let Some(props) = map.get("properties") {
        let props = props.as_object().ok_or_else(|| {
            problem(
                path,
                SchemaProblemKind::Invalid("`properties` must be an object".into()),
            )
        })?;
        for (k, v) in props {
            check_supported(v, &format!("{path}.properties.{k}"))?;
        }
    }
    if let Some(req) = map.get("required") {
        let ok = req
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string));
        if !ok {
            return Err(problem(
                path,
                SchemaProblemKind::Invalid("`required` must be an array of strings".into()),
            ));
        }
    }
    match map.get("additionalProperties") {
        None | Some(Value::Bool(_)) => {}
        Some(v) => check_supported(v, &format!("{path}.additionalProperties"))?,
    }
    if let Some(items) = map.get("items") {
        check_supported(items, &format!("{path}.items"))?;
    }
    if let Some(any) = map.get("anyOf") {
        let branches = any.as_array().ok_or_else(|| {
            problem(
                path,
                SchemaProblemKind::Invalid("`anyOf` must be an array".into()),
            )
        })?;
        for (i, b) in branches.iter().enumerate() {
            check_supported(b, &format!("{path}.anyOf[{i}]"))?;
        }
    }
    Ok(())
}

/// Check that a tool's parameters are an object schema.
pub fn check_object_schema(schema: &Value, path: &str) -> Result<(), SchemaProblem> {
    let ok = schema.as_object().is_some_and(|m| {
        matches!(m.get("type"), None | Some(Value::String(_)))
            && m.get("type").is_none_or(|t| t == "object")
    });
    if !ok {
        return Err(problem(
            path,
            SchemaProblemKind::Invalid(
                "parameters must be an object schema (\"type\": \"object\")".into(),
            ),
        ));
    }
    // The arguments object is built key by key from `properties`: a whole-object `enum`,
    // `const` or combinator could only be honoured by ignoring it, so it is refused.
    for key in ["enum", "const", "anyOf", "oneOf", "allOf", "not"] {
        if schema.get(key).is_some() {
            return Err(problem(
                &format!("{path}.{key}"),
                SchemaProblemKind::Unsupported(format!("`{key}` on the arguments object")),
            ));
        }
    }
    Ok(())
}

/// A free string: string-typed, with nothing that restricts it to known values or a shape.
pub fn is_free_string(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    map.get("type").and_then(Value::as_str) == Some("string")
        && !map.contains_key("enum")
        && !map.contains_key("const")
        && !map.contains_key("pattern")
        && !map.contains_key("format")
}

/// A free value: a free string, or an integer / number with no `enum` or `const`. Under the
/// DSL's default policy these must be copied from the request (digits included), which is
/// what makes copy drift (`4242` -> `4202`) unrepresentable for typed ids too.
pub fn is_free_value(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    let numeric = matches!(
        map.get("type").and_then(Value::as_str),
        Some("integer" | "number")
    ) && !map.contains_key("enum")
        && !map.contains_key("const");
    numeric || is_free_string(schema)
}

/// The sub-schema at a dotted argument path (`target.label`, `choices.0`), if the schema
/// describes it. Numeric segments step into `items`.
pub fn schema_at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = schema;
    for segment in path.split('.') {
        node = child_schema(node, segment)?;
    }
    Some(node)
}

/// The schema of one child (`segment` is a property name or an array index).
pub fn child_schema<'a>(node: &'a Value, segment: &str) -> Option<&'a Value> {
    if let Some(p) = node.get("properties").and_then(|p| p.get(segment)) {
        return Some(p);
    }
    if segment.parse::<usize>().is_ok() {
        if let Some(items) = node.get("items") {
            return Some(items);
        }
    }
    match node.get("additionalProperties") {
        Some(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

/// Map a BFCL parameter schema (`dict`, `float`, `tuple`, `any`, ...) to JSON Schema.
///
/// BFCL's live data gives some parameters an `enum` that contradicts their own `type` (a
/// boolean with `["True", "False", "dontcare"]`, an integer with `["1", ..., "dontcare"]`, an
/// array whose enum lists its items' values). Read literally such a schema admits no value, and
/// no grammar can be built for the whole catalog. BFCL's checker judges a value by the type, so
/// the enum is made to agree with it ([`reconcile_enum`]).
pub fn from_bfcl(schema: &Value, path: &str) -> Result<Value, SchemaProblem> {
    let mut out = from_bfcl_keys(schema, path)?;
    if let Value::Object(map) = &mut out {
        reconcile_enum(map);
    }
    Ok(out)
}

/// An `enum` that contradicts `type`, made to agree with it: on an array, values that are not
/// arrays become its items' enum (when the items have none, else it is dropped); on a boolean,
/// integer or number, each value that spells one (`"True"`, `"2"`) becomes it and the rest
/// (`"dontcare"`) are dropped, and with none left the enum goes. Agreeing enums stay as they are.
fn reconcile_enum(map: &mut Map<String, Value>) {
    let Some(ty) = map.get("type").and_then(Value::as_str).map(str::to_owned) else {
        return;
    };
    let fits = |v: &Value| match ty.as_str() {
        "array" => v.is_array(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => true,
    };
    match map.get("enum") {
        Some(Value::Array(values)) if !values.iter().all(fits) => {}
        _ => return,
    }
    let Some(Value::Array(values)) = map.remove("enum") else {
        return;
    };
    if ty == "array" {
        if let Some(Value::Object(items)) = map.get_mut("items") {
            if !items.contains_key("enum") && values.iter().all(|v| !v.is_array()) {
                items.insert("enum".into(), Value::Array(values));
                reconcile_enum(items);
            }
        }
        return;
    }
    let mut kept: Vec<Value> = Vec::new();
    for v in values {
        let converted = match (ty.as_str(), &v) {
            (_, v) if fits(v) => Some(v.clone()),
            ("boolean", Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                "true" => Some(json!(true)),
                "false" => Some(json!(false)),
                _ => None,
            },
            ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(|i| json!(i)),
            ("number", Value::String(s)) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| json!(f)),
            _ => None,
        };
        if let Some(c) = converted {
            if !kept.contains(&c) {
                kept.push(c);
            }
        }
    }
    if !kept.is_empty() {
        map.insert("enum".into(), Value::Array(kept));
    }
}

fn from_bfcl_keys(schema: &Value, path: &str) -> Result<Value, SchemaProblem> {
    let Value::Object(map) = schema else {
        return Err(problem(
            path,
            SchemaProblemKind::Invalid("a schema must be an object".into()),
        ));
    };
    let mut out = Map::new();
    for (k, v) in map {
        match k.as_str() {
            "type" => {
                let t = v.as_str().ok_or_else(|| {
                    problem(
                        path,
                        SchemaProblemKind::Invalid("BFCL `type` must be a string".into()),
                    )
                })?;
                let mapped = crate::bfcl::json_schema_type(t).map_err(|e| {
                    problem(
                        path,
                        SchemaProblemKind::Unsupported(format!("BFCL type `{}`", e.0)),
                    )
                })?;
                if let Some(m) = mapped {
                    out.insert("type".into(), json!(m));
                }
            }
            "properties" => {
                let props = v.as_object().ok_or_else(|| {
                    problem(
                        path,
                        SchemaProblemKind::Invalid("`properties` must be an object".into()),
                    )
                })?;
                let mut mapped = Map::new();
                for (name, sub) in props {
                    mapped.insert(
                        name.clone(),
                        from_bfcl(sub, &format!("{path}.properties.{name}"))?,
                    );
                }
                out.insert(k.clone(), Value::Object(mapped));
            }
            "items" => {
                out.insert(k.clone(), from_bfcl(v, &format!("{path}.items"))?);
            }
            // BFCL marks optionality with `required`; `optional` flags are informational.
            "optional" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

/// Map an xLAM flat parameter table (`{"p": {"type": "str, optional", ...}}`) to an
/// object schema.
pub fn from_xlam(params: &Map<String, Value>, path: &str) -> Result<Value, SchemaProblem> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, spec) in params {
        let here = format!("{path}.{name}");
        let spec = spec.as_object().ok_or_else(|| {
            problem(
                &here,
                SchemaProblemKind::Invalid("an xLAM parameter must be an object".into()),
            )
        })?;
        let type_text = spec.get("type").and_then(Value::as_str).unwrap_or("Any");
        let (type_text, optional) = match type_text.trim().strip_suffix(", optional") {
            Some(t) => (t.trim(), true),
            None => (type_text.trim(), false),
        };
        let mut schema = xlam_type(type_text, &here)?;
        if let Value::Object(m) = &mut schema {
            if let Some(d) = spec.get("description") {
                m.insert("description".into(), d.clone());
            }
            if let Some(d) = spec.get("default") {
                // xLAM writes "" for "no default"; that is not a default value.
                if d != "" {
                    m.insert("default".into(), d.clone());
                }
            }
        }
        if !optional {
            required.push(json!(name));
        }
        properties.insert(name.clone(), schema);
    }
    Ok(json!({"type": "object", "properties": properties, "required": required}))
}

fn xlam_type(text: &str, path: &str) -> Result<Value, SchemaProblem> {
    let (head, inner) = match text.find('[') {
        Some(i) if text.ends_with(']') => (&text[..i], Some(&text[i + 1..text.len() - 1])),
        _ => (text, None),
    };
    let schema = match head.trim() {
        "str" | "string" => json!({"type": "string"}),
        "int" | "integer" => json!({"type": "integer"}),
        "float" | "number" => json!({"type": "number"}),
        "bool" | "boolean" => json!({"type": "boolean"}),
        "Any" | "any" | "" => json!({}),
        "List" | "list" | "Set" | "set" | "Tuple" | "tuple" => match inner {
            Some(i) => {
                let first = split_top_level(i).into_iter().next().unwrap_or("Any");
                json!({"type": "array", "items": xlam_type(first, path)?})
            }
            None => json!({"type": "array"}),
        },
        "Dict" | "dict" => json!({"type": "object"}),
        "Union" | "Optional" => {
            let parts = split_top_level(inner.unwrap_or("Any"));
            let branches = parts
                .into_iter()
                .filter(|p| *p != "None")
                .map(|p| xlam_type(p, path))
                .collect::<Result<Vec<_>, _>>()?;
            if branches.len() == 1 {
                branches.into_iter().next().unwrap_or(json!({}))
            } else {
                json!({"anyOf": branches})
            }
        }
        other => {
            return Err(problem(
                path,
                SchemaProblemKind::Unsupported(format!("xLAM type `{other}`")),
            ))
        }
    };
    Ok(schema)
}

/// Split `a, List[b, c], d` on top-level commas.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts
}

/// Serialize with object keys sorted at every level: a key-order-independent form for hashing.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    write(&map[*k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(v, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bfcl_enums_that_contradict_their_type_are_made_to_agree() {
        let cases = [
            // BFCL live_multiple's Travel_1_FindAttractions.free_entry
            (
                json!({"type": "boolean", "enum": ["True", "False", "dontcare"]}),
                json!({"type": "boolean", "enum": [true, false]}),
            ),
            (
                json!({"type": "integer", "enum": ["1", "2", "dontcare", "2"]}),
                json!({"type": "integer", "enum": [1, 2]}),
            ),
            // nothing spells the type: only the type is left
            (
                json!({"type": "integer", "enum": ["Group A", "Group B"], "default": "Group A"}),
                json!({"type": "integer", "default": "Group A"}),
            ),
            (
                json!({"type": "float", "enum": ["0.5", 1]}),
                json!({"type": "number", "enum": [0.5, 1]}),
            ),
            // get_sensor_readings_latest.metrics: the enum lists the items' values
            (
                json!({"type": "array", "items": {"type": "string"}, "enum": ["co2", "noise"]}),
                json!({"type": "array", "items": {"type": "string", "enum": ["co2", "noise"]}}),
            ),
            // agreeing enums, and strings, are left alone
            (
                json!({"type": "integer", "enum": [15, 120]}),
                json!({"type": "integer", "enum": [15, 120]}),
            ),
            (
                json!({"type": "string", "enum": ["True", "1"]}),
                json!({"type": "string", "enum": ["True", "1"]}),
            ),
        ];
        for (bfcl, want) in cases {
            assert_eq!(from_bfcl(&bfcl, "p").unwrap(), want, "{bfcl}");
        }
        // inside an object too
        let nested =
            json!({"type": "dict", "properties": {"kids": {"type": "boolean", "enum": ["True"]}}});
        assert_eq!(
            from_bfcl(&nested, "p").unwrap(),
            json!({"type": "object", "properties": {"kids": {"type": "boolean", "enum": [true]}}})
        );
    }

    #[test]
    fn refs_are_inlined() {
        let s = json!({"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},
            "$defs":{"A":{"type":"string","enum":["x"]}}});
        let n = normalize(&s, "tools[0].parameters").unwrap();
        assert_eq!(
            n,
            json!({"type":"object","properties":{"a":{"type":"string","enum":["x"]}}})
        );
    }

    #[test]
    fn bad_ref_and_unsupported_are_named() {
        let s = json!({"type":"object","properties":{"a":{"$ref":"#/$defs/Missing"}}});
        let e = normalize(&s, "p").unwrap_err();
        assert_eq!(
            e.to_string(),
            "$ref `#/$defs/Missing` does not resolve at p.properties.a"
        );
        let s = json!({"type":"object","properties":{"a":{"type":"string","not":{}}}});
        let e = normalize(&s, "p").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unsupported schema feature `not` at p.properties.a"
        );
        let s = json!({"type":"object","properties":{"a":{"$ref":"#"}}});
        assert!(normalize(&s, "p")
            .unwrap_err()
            .to_string()
            .contains("recursive"));
    }

    #[test]
    fn xlam_types() {
        let p = json!({"ids": {"type": "List[int]", "description": "d", "default": ""},
                       "q": {"type": "str, optional", "default": "x"}});
        let s = from_xlam(p.as_object().unwrap(), "t").unwrap();
        assert_eq!(
            s["properties"]["ids"],
            json!({"type":"array","items":{"type":"integer"},"description":"d"})
        );
        assert_eq!(s["required"], json!(["ids"]));
        assert_eq!(s["properties"]["q"]["default"], json!("x"));
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"d":[1,{"y":2,"x":1}],"c":null}}"#).unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}"#
        );
    }
}
