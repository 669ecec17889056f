//! BFCL's AST checker, reimplemented rule for rule (Python language path).
//!
//! Mirrors `bfcl_eval/eval_checker/ast_eval/ast_checker.py` (bfcl-eval 2026.3.23) including
//! its quirks, because scores are only comparable with the leaderboard if the rules are the
//! same. The agreement test (`tests/bfcl_agreement.rs`) runs thousands of outputs through both
//! checkers and requires identical verdicts. Notable rules:
//!
//! * Values are compared with Python's `==`: `1 == 1.0 == True`, lists element-wise, dicts by
//!   key set. Types are compared exactly (`type(x) == T`): a bool is not an int.
//! * An int is accepted where the doc says `float` (converted first); a float is never an int.
//! * Strings (top-level, inside lists, inside dict values) are compared after
//!   [`standardize_string`]: spaces and `,./-_*^` removed, lowercased, `'` turned into `"`.
//! * Every model parameter must be in the doc *and* in the possible answer; a parameter in the
//!   possible answer may be omitted only where `""` is among its accepted values.
//! * A "variable": when the accepted values have another type than the doc says, a value of
//!   the accepted values' type passes the type check and is compared with plain `==`.
//! * Nested types are checked one level deep (`array`/`tuple` items); lists are
//!   order-sensitive; dicts are checked one level deep; lists of dicts element by element.
//! * Parallel: counts must match, then gold calls are taken in order and each is matched
//!   greedily with the first not-yet-matched model call that passes — no backtracking.
//! * Multiple: counts must match, then the first model call is checked against the first gold
//!   call's doc. Simple: exactly one call, checked against the *first* doc.
//! * Function names match exactly; with `underscore_to_dot` (BFCL sets it for models whose
//!   APIs forbid `.` in names) the doc's `.` become `_` before comparing. Off by default, as
//!   for every prompt-mode model in BFCL's config.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use crate::data::{BfclCall, BfclItem, CheckMode, Expected, GoldCall};

/// A checker verdict, BFCL's `{valid, error, error_type}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub valid: bool,
    /// BFCL's error type (`simple_function_checker:missing_required`, `type_error:simple`, …);
    /// `None` when valid.
    pub error_type: Option<String>,
    /// Human-readable reasons (BFCL's `error` list).
    pub error: Vec<String>,
}

impl Verdict {
    pub fn ok() -> Self {
        Verdict {
            valid: true,
            error_type: None,
            error: Vec::new(),
        }
    }

    pub fn fail(error_type: &str, error: impl Into<String>) -> Self {
        Verdict {
            valid: false,
            error_type: Some(error_type.to_string()),
            error: vec![error.into()],
        }
    }

    /// One line summing up the verdict (`ok`, or `error_type: first reason`).
    pub fn reason(&self) -> String {
        if self.valid {
            "ok".into()
        } else {
            format!(
                "{}: {}",
                self.error_type.as_deref().unwrap_or("invalid"),
                self.error.join(" ")
            )
        }
    }
}

/// Checker settings that BFCL takes from the model's config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOptions {
    /// Replace `.` by `_` in doc function names before comparing (BFCL's `underscore_to_dot`).
    pub underscore_to_dot: bool,
}

/// Scores the model's calls for one item. `calls == None` means the output could not be
/// decoded into calls: wrong for AST items, and "no call" (so correct) for irrelevance items,
/// as in BFCL's runner.
pub fn check_item(item: &BfclItem, calls: Option<&[BfclCall]>, opts: &CheckOptions) -> Verdict {
    match (&item.expected, item.mode) {
        (Expected::NoCall, _) | (_, CheckMode::NoCall) => match calls {
            Some(c) if !c.is_empty() => Verdict::fail(
                "irrelevance_error:decoder_success",
                "Valid syntax. Successfully decode AST when it should not.",
            ),
            _ => Verdict::ok(),
        },
        (Expected::AnyCall, _) | (_, CheckMode::AnyCall) => match calls {
            Some(c) if !c.is_empty() => Verdict::ok(),
            _ => Verdict::fail(
                "relevance_error:decoder_failed",
                "Invalid syntax. Failed to decode AST when it should have.",
            ),
        },
        (Expected::Calls(gold), mode) => match calls {
            None => Verdict::fail(
                "ast_decoder:decoder_failed",
                "Invalid syntax. Failed to decode AST.",
            ),
            Some(calls) => ast_check(mode, &item.functions, calls, gold, opts),
        },
    }
}

/// BFCL's `ast_checker` dispatch for an AST mode (`Simple`, `Multiple`, `Parallel`).
pub fn ast_check(
    mode: CheckMode,
    functions: &[Value],
    calls: &[BfclCall],
    gold: &[GoldCall],
    opts: &CheckOptions,
) -> Verdict {
    match mode {
        CheckMode::Parallel => parallel_no_order(functions, calls, gold, opts),
        CheckMode::Multiple => multiple_function_check(functions, calls, gold, opts),
        CheckMode::Simple => {
            if calls.len() != 1 {
                return Verdict::fail(
                    "simple_function_checker:wrong_count",
                    "Wrong number of functions.",
                );
            }
            match (functions.first(), gold.first()) {
                (Some(doc), Some(g)) => simple_function_check(doc, &calls[0], g, opts),
                _ => malformed_input("simple item without a function doc or a gold call"),
            }
        }
        CheckMode::NoCall | CheckMode::AnyCall => {
            malformed_input("relevance modes are not AST modes; use check_item")
        }
    }
}

fn malformed_input(msg: &str) -> Verdict {
    Verdict::fail("checker:malformed_input", msg)
}

fn find_description<'a>(functions: &'a [Value], name: &str) -> Option<&'a Value> {
    functions
        .iter()
        .find(|f| f.get("name").and_then(Value::as_str) == Some(name))
}

/// BFCL's `multiple_function_checker`.
pub fn multiple_function_check(
    functions: &[Value],
    calls: &[BfclCall],
    gold: &[GoldCall],
    opts: &CheckOptions,
) -> Verdict {
    if calls.len() != gold.len() {
        return Verdict::fail(
            "multiple_function_checker:wrong_count",
            "Wrong number of functions.",
        );
    }
    let Some(g) = gold.first() else {
        // BFCL would index an empty list here; zero calls for zero gold calls.
        return malformed_input("multiple item without gold calls");
    };
    match find_description(functions, &g.name) {
        Some(doc) => simple_function_check(doc, &calls[0], g, opts),
        None => malformed_input(&format!("no function doc named {:?}", g.name)),
    }
}

/// BFCL's `parallel_function_checker_no_order`: greedy, gold order, first match wins.
pub fn parallel_no_order(
    functions: &[Value],
    calls: &[BfclCall],
    gold: &[GoldCall],
    opts: &CheckOptions,
) -> Verdict {
    if calls.len() != gold.len() {
        return Verdict::fail(
            "parallel_function_checker_no_order:wrong_count",
            "Wrong number of functions.",
        );
    }
    let mut matched = vec![false; calls.len()];
    for (i, g) in gold.iter().enumerate() {
        let Some(doc) = find_description(functions, &g.name) else {
            return malformed_input(&format!("no function doc named {:?}", g.name));
        };
        let mut errors = Vec::new();
        let mut found = false;
        for (index, call) in calls.iter().enumerate() {
            if matched[index] {
                continue;
            }
            let r = simple_function_check(doc, call, g, opts);
            if r.valid {
                matched[index] = true;
                found = true;
                break;
            }
            errors.push(format!("Model Result Index {index}: {}", r.reason()));
        }
        if !found {
            let considered: Vec<usize> = (0..calls.len()).filter(|&k| !matched[k]).collect();
            let mut error = vec![format!(
                "Could not find a matching function among index {considered:?} of model output for index {i} of possible answers."
            )];
            error.extend(errors);
            return Verdict {
                valid: false,
                error_type: Some("parallel_function_checker_no_order:cannot_find_match".into()),
                error,
            };
        }
    }
    Verdict::ok()
}

/// Python's runtime types as BFCL's checker sees JSON values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PyType {
    NoneType,
    Bool,
    Int,
    Float,
    Str,
    List,
    Dict,
}

impl PyType {
    fn of(v: &Value) -> PyType {
        match v {
            Value::Null => PyType::NoneType,
            Value::Bool(_) => PyType::Bool,
            Value::Number(n) if n.is_f64() => PyType::Float,
            Value::Number(_) => PyType::Int,
            Value::String(_) => PyType::Str,
            Value::Array(_) => PyType::List,
            Value::Object(_) => PyType::Dict,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PyType::NoneType => "NoneType",
            PyType::Bool => "bool",
            PyType::Int => "int",
            PyType::Float => "float",
            PyType::Str => "str",
            PyType::List => "list",
            PyType::Dict => "dict",
        }
    }
}

/// BFCL's `PYTHON_TYPE_MAPPING`: doc type name -> Python type (`tuple` -> list, `any` -> str).
pub(crate) fn python_type_for(doc_type: &str) -> Option<PyType> {
    Some(match doc_type {
        "string" => PyType::Str,
        "integer" => PyType::Int,
        "float" => PyType::Float,
        "boolean" => PyType::Bool,
        "array" | "tuple" => PyType::List,
        "dict" => PyType::Dict,
        "any" => PyType::Str,
        _ => return None,
    })
}

/// BFCL's `standardize_string`: drop spaces and `,./-_*^`, lowercase, `'` -> `"`.
pub fn standardize_string(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect();
    py_lower(&kept).replace('\'', "\"")
}

/// Python's `str.lower()` (full Unicode lowercase mapping; Rust's `to_lowercase` implements
/// the same mappings including final sigma).
fn py_lower(s: &str) -> String {
    s.to_lowercase()
}

/// Python's `a == b` on JSON-decoded values.
pub(crate) fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (py_num(a), py_num(b)) {
            (Some(x), Some(y)) => x.eq(&y),
            _ => false,
        },
    }
}

/// A Python number (bools are ints 0/1).
#[derive(Debug, Clone, Copy)]
enum PyNum {
    Int(i128),
    Float(f64),
}

impl PyNum {
    fn eq(&self, other: &PyNum) -> bool {
        match (*self, *other) {
            (PyNum::Int(a), PyNum::Int(b)) => a == b,
            (PyNum::Float(a), PyNum::Float(b)) => a == b,
            (PyNum::Int(i), PyNum::Float(f)) | (PyNum::Float(f), PyNum::Int(i)) => {
                // Python compares int and float exactly.
                f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7e38 && (f as i128) == i
            }
        }
    }
}

fn py_num(v: &Value) -> Option<PyNum> {
    match v {
        Value::Bool(b) => Some(PyNum::Int(i128::from(*b))),
        Value::Number(n) => Some(num_to_py(n)),
        _ => None,
    }
}

fn num_to_py(n: &Number) -> PyNum {
    if let Some(i) = n.as_i64() {
        PyNum::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        PyNum::Int(i128::from(u))
    } else {
        PyNum::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Python's `x in seq` for a JSON list.
fn py_in(x: &Value, seq: &[Value]) -> bool {
    seq.iter().any(|e| py_eq(x, e))
}

/// Python's iteration by index over a value BFCL treats as a sequence (`range(len(v))`,
/// `v[i]`): a list yields its items, a string its characters. Anything else would raise in
/// Python; it yields nothing here.
fn py_seq(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        Value::String(s) => s.chars().map(|c| Value::String(c.to_string())).collect(),
        _ => Vec::new(),
    }
}

/// Python's `len(v)` for the values BFCL takes the length of.
fn py_len(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        Value::String(s) => s.chars().count(),
        Value::Object(m) => m.len(),
        _ => 0,
    }
}

/// Python's `x in container` where the container may be a list, a string (substring test) or
/// a dict (key test).
fn py_contains(container: &Value, x: &Value) -> bool {
    match container {
        Value::Array(a) => py_in(x, a),
        Value::String(s) => x.as_str().is_some_and(|needle| s.contains(needle)),
        Value::Object(m) => x.as_str().is_some_and(|k| m.contains_key(k)),
        _ => false,
    }
}

/// Python's `repr` for messages (close enough for reading).
fn repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn get_possible_answer_type(possible: &[Value]) -> Option<PyType> {
    possible
        .iter()
        .find(|a| a.as_str() != Some(""))
        .map(PyType::of)
}

struct TypeCheck {
    valid: bool,
    is_variable: bool,
    error_type: &'static str,
    error: Vec<String>,
}

/// BFCL's `type_checker` (one level of nesting).
fn type_checker(
    param: &str,
    value: &Value,
    possible: &[Value],
    expected_desc: &str,
    expected: PyType,
    nested: Option<PyType>,
) -> TypeCheck {
    let mut result = TypeCheck {
        valid: true,
        is_variable: false,
        error_type: "type_error:simple",
        error: Vec::new(),
    };
    let possible_type = get_possible_answer_type(possible);
    let is_variable = possible_type.is_some_and(|t| t != expected);
    let vtype = PyType::of(value);

    if vtype == expected {
        match nested {
            None => {
                result.is_variable = is_variable;
                return result;
            }
            Some(nt) => {
                let items = py_seq(value);
                for item in possible {
                    let mut flag = true;
                    if let Value::Array(inner) = item {
                        for vi in &items {
                            if !type_checker(param, vi, inner, nt.name(), nt, None).valid {
                                flag = false;
                                break;
                            }
                        }
                    }
                    if flag {
                        return TypeCheck {
                            valid: true,
                            is_variable,
                            error_type: "type_error:simple",
                            error: Vec::new(),
                        };
                    }
                }
                result.valid = false;
                result.error.push(format!(
                    "Nested type checking failed for parameter {param:?}. Expected outer type {expected_desc} with inner type {}. Parameter value: {}.",
                    nt.name(),
                    repr(value)
                ));
                result.error_type = "type_error:nested";
            }
        }
    }

    if let Some(pt) = possible_type {
        if vtype == pt {
            result.is_variable = true;
            return result;
        }
    }

    result.valid = false;
    result.error.push(format!(
        "Incorrect type for parameter {param:?}. Expected type {expected_desc}, got {}. Parameter value: {}.",
        vtype.name(),
        repr(value)
    ));
    result.error_type = "type_error:simple";
    result
}

fn string_checker(param: &str, value: &str, possible: &[Value]) -> Verdict {
    let std_value = standardize_string(value);
    let ok = possible
        .iter()
        .filter_map(Value::as_str)
        .any(|a| standardize_string(a) == std_value);
    if ok {
        Verdict::ok()
    } else {
        Verdict::fail(
            "value_error:string",
            format!(
                "Invalid value for parameter {param:?}: {value:?}. Expected one of {}. Case insensitive.",
                Value::Array(possible.to_vec())
            ),
        )
    }
}

fn standardize_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(standardize_string(s)),
        other => other.clone(),
    }
}

fn list_checker(param: &str, value: &[Value], possible: &[Value]) -> Verdict {
    let std_value: Vec<Value> = value.iter().map(standardize_value).collect();
    let ok = possible.iter().any(|answer| {
        let std_answer: Vec<Value> = py_seq(answer).iter().map(standardize_value).collect();
        std_answer.len() == std_value.len()
            && std_value.iter().zip(&std_answer).all(|(a, b)| py_eq(a, b))
    });
    if ok {
        Verdict::ok()
    } else {
        Verdict::fail(
            "value_error:list/tuple",
            format!(
                "Invalid value for parameter {param:?}: {}. Expected one of {}.",
                Value::Array(value.to_vec()),
                Value::Array(possible.to_vec())
            ),
        )
    }
}

fn dict_checker(param: &str, value: &Value, possible: &[Value]) -> Verdict {
    let _ = param;
    let unclear = || Verdict {
        valid: false,
        error_type: Some("dict_checker:unclear".into()),
        error: Vec::new(),
    };
    let mut result = unclear();
    let Value::Object(model) = value else {
        // Python would raise on `.items()`; a non-dict never matches.
        return Verdict::fail(
            "dict_checker:unclear",
            format!("Expected a dict, got {}.", repr(value)),
        );
    };
    for answer in possible {
        if answer.as_str() == Some("") {
            continue;
        }
        result = unclear();
        let mut flag = true;
        for (key, v) in model {
            if !py_contains(answer, &Value::String(key.clone())) {
                result
                    .error
                    .push(format!("Unexpected dict key parameter: '{key}'."));
                result.error_type = Some("value_error:dict_key".into());
                flag = false;
                break;
            }
            let std_v = standardize_value(v);
            let accepted = match answer {
                Value::Object(m) => m.get(key).map(py_seq).unwrap_or_default(),
                _ => Vec::new(),
            };
            let std_accepted: Vec<Value> = accepted.iter().map(standardize_value).collect();
            if !py_in(&std_v, &std_accepted) {
                result.error.push(format!(
                    "Invalid value for parameter {key:?}: {}. Expected one of {}.",
                    repr(v),
                    Value::Array(std_accepted)
                ));
                result.error_type = Some("value_error:dict_value".into());
                flag = false;
                break;
            }
        }
        if let Value::Object(m) = answer {
            for (key, accepted) in m {
                if !model.contains_key(key) && !py_contains(accepted, &Value::String(String::new()))
                {
                    result
                        .error
                        .push(format!("Missing dict key parameter: '{key}'."));
                    result.error_type = Some("value_error:dict_key".into());
                    flag = false;
                    break;
                }
            }
        }
        if flag {
            return Verdict::ok();
        }
    }
    result
}

fn list_dict_checker(param: &str, value: &[Value], possible: &[Value]) -> Verdict {
    let mut result = Verdict {
        valid: false,
        error_type: Some("list_dict_checker:unclear".into()),
        error: Vec::new(),
    };
    for answer in possible {
        if value.len() != py_len(answer) {
            result = Verdict::fail(
                "value_error:list_dict_count",
                "Wrong number of dictionaries in the list.",
            );
            continue;
        }
        let answer_items = py_seq(answer);
        let mut flag = true;
        for (m, a) in value.iter().zip(&answer_items) {
            result = dict_checker(param, m, std::slice::from_ref(a));
            if !result.valid {
                flag = false;
                break;
            }
        }
        if flag {
            return Verdict::ok();
        }
    }
    result
}

/// BFCL's `simple_function_checker` for one call against one doc and one gold call.
pub fn simple_function_check(
    doc: &Value,
    call: &BfclCall,
    gold: &GoldCall,
    opts: &CheckOptions,
) -> Verdict {
    let possible = &gold.params;
    let Some(doc_name) = doc.get("name").and_then(Value::as_str) else {
        return malformed_input("function doc without a name");
    };
    let empty = Map::new();
    let params_doc = doc.get("parameters");
    let param_details = params_doc
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = params_doc
        .and_then(|p| p.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();

    let func_name = if opts.underscore_to_dot && doc_name.contains('.') {
        doc_name.replace('.', "_")
    } else {
        doc_name.to_string()
    };

    if call.name != func_name {
        return Verdict::fail(
            "simple_function_checker:wrong_func_name",
            format!("Function name {func_name:?} not found in model output."),
        );
    }
    let model_params = &call.args;

    for param in &required {
        if !model_params.contains_key(*param) {
            return Verdict::fail(
                "simple_function_checker:missing_required",
                format!("Missing required parameter: {param:?}."),
            );
        }
    }

    for (param, value) in model_params {
        let (Some(details), Some(accepted)) = (param_details.get(param), possible.get(param))
        else {
            return Verdict::fail(
                "simple_function_checker:unexpected_param",
                format!("Unexpected parameter: {param:?}."),
            );
        };
        let accepted: Vec<Value> = py_seq(accepted);
        let Some(expected_desc) = details.get("type").and_then(Value::as_str) else {
            return malformed_input(&format!("parameter {param:?} has no type in the doc"));
        };
        let Some(expected) = python_type_for(expected_desc) else {
            return malformed_input(&format!(
                "parameter {param:?} has type {expected_desc:?}, not one of BFCL's Python types"
            ));
        };
        let mut nested = None;
        if expected_desc == "array" || expected_desc == "tuple" {
            let item_type = details
                .get("items")
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str);
            match item_type.and_then(python_type_for) {
                Some(t) => nested = Some(t),
                None => {
                    return malformed_input(&format!(
                        "parameter {param:?} is an {expected_desc} without a known items.type"
                    ))
                }
            }
        }

        // Python auto-converts int to float.
        let converted;
        let value = if expected_desc == "float" && PyType::of(value) == PyType::Int {
            converted = match value.as_number().map(num_to_py) {
                Some(PyNum::Int(i)) => Number::from_f64(i as f64).map(Value::Number),
                _ => None,
            }
            .unwrap_or_else(|| value.clone());
            &converted
        } else {
            value
        };

        let tc = type_checker(param, value, &accepted, expected_desc, expected, nested);
        if !tc.valid {
            return Verdict {
                valid: false,
                error_type: Some(tc.error_type.into()),
                error: tc.error,
            };
        }

        if !tc.is_variable {
            if expected == PyType::Dict {
                let r = dict_checker(param, value, &accepted);
                if !r.valid {
                    return r;
                }
                continue;
            } else if expected == PyType::List && nested == Some(PyType::Dict) {
                let r = list_dict_checker(
                    param,
                    value.as_array().map_or(&[][..], Vec::as_slice),
                    &accepted,
                );
                if !r.valid {
                    return r;
                }
                continue;
            } else if expected == PyType::Str {
                let r = string_checker(param, value.as_str().unwrap_or_default(), &accepted);
                if !r.valid {
                    return r;
                }
                continue;
            } else if expected == PyType::List {
                let r = list_checker(
                    param,
                    value.as_array().map_or(&[][..], Vec::as_slice),
                    &accepted,
                );
                if !r.valid {
                    return r;
                }
                continue;
            }
        }

        if !py_in(value, &accepted) {
            return Verdict::fail(
                "value_error:others",
                format!(
                    "Invalid value for parameter {param:?}: {}. Expected one of {}.",
                    repr(value),
                    Value::Array(accepted.clone())
                ),
            );
        }
    }

    for (param, accepted) in possible {
        if !model_params.contains_key(param)
            && !py_contains(accepted, &Value::String(String::new()))
        {
            return Verdict::fail(
                "simple_function_checker:missing_optional",
                format!("Optional parameter {param:?} not provided and not marked as optional."),
            );
        }
    }

    Verdict::ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"name": "math.area", "parameters": {"type": "dict", "properties": {
            "base": {"type": "integer"}, "height": {"type": "float"},
            "unit": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
            "flag": {"type": "boolean"}, "opts": {"type": "dict"}
        }, "required": ["base"]}})
    }

    fn gold() -> GoldCall {
        let v = json!({"base": [10], "height": [5.0, 2], "unit": ["units", ""],
            "tags": [["a b", "C"], ""], "flag": [true, ""], "opts": [{"k": ["v"], "z": ["", 1]}, ""]});
        GoldCall {
            name: "math.area".into(),
            params: v.as_object().unwrap().clone(),
        }
    }

    fn call(name: &str, args: Value) -> BfclCall {
        BfclCall::new(name, args.as_object().unwrap().clone())
    }

    fn check(args: Value) -> Verdict {
        simple_function_check(
            &doc(),
            &call("math.area", args),
            &gold(),
            &CheckOptions::default(),
        )
    }

    #[test]
    fn python_equality() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(py_eq(&json!([1, "a"]), &json!([1.0, "a"])));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(py_eq(
            &json!({"a": 1, "b": [2]}),
            &json!({"b": [2.0], "a": true})
        ));
        assert!(!py_eq(&json!(null), &json!(0)));
    }

    #[test]
    fn standardize_like_bfcl() {
        assert_eq!(standardize_string("April 1, 2024"), "april12024");
        assert_eq!(standardize_string("New_York-City*^/."), "newyorkcity");
        assert_eq!(standardize_string("It's"), "it\"s");
        assert_eq!(standardize_string("a\tb"), "a\tb");
    }

    #[test]
    fn simple_rules() {
        assert!(check(json!({"base": 10, "height": 5})).valid);
        // int for float accepted, float for int refused, bool is not int
        assert!(check(json!({"base": 10, "height": 2})).valid);
        assert_eq!(
            check(json!({"base": 10.0, "height": 5}))
                .error_type
                .as_deref(),
            Some("type_error:simple")
        );
        assert!(!check(json!({"base": true, "height": 5})).valid);
        // missing gold param without "" -> missing_optional
        assert_eq!(
            check(json!({"base": 10})).error_type.as_deref(),
            Some("simple_function_checker:missing_optional")
        );
        assert_eq!(
            check(json!({"height": 5})).error_type.as_deref(),
            Some("simple_function_checker:missing_required")
        );
        assert_eq!(
            check(json!({"base": 10, "height": 5, "x": 1}))
                .error_type
                .as_deref(),
            Some("simple_function_checker:unexpected_param")
        );
        // string normalisation
        assert!(check(json!({"base": 10, "height": 5, "unit": "U-N.I_T S"})).valid);
        assert!(!check(json!({"base": 10, "height": 5, "unit": "unit"})).valid);
        // lists: order-sensitive, strings standardised
        assert!(check(json!({"base": 10, "height": 5, "tags": ["AB", "c"]})).valid);
        assert!(!check(json!({"base": 10, "height": 5, "tags": ["c", "ab"]})).valid);
        assert!(
            check(json!({"base": 10, "height": 5, "tags": []})).valid,
            "\"\" accepts []"
        );
        // dicts: optional keys, unexpected keys
        assert!(check(json!({"base": 10, "height": 5, "opts": {"k": "V"}})).valid);
        assert!(!check(json!({"base": 10, "height": 5, "opts": {"k": "v", "q": 1}})).valid);
        assert!(!check(json!({"base": 10, "height": 5, "opts": {"z": 1}})).valid);
    }

    #[test]
    fn names_and_underscore_to_dot() {
        let v = simple_function_check(
            &doc(),
            &call("math_area", json!({"base": 10, "height": 5})),
            &gold(),
            &CheckOptions::default(),
        );
        assert_eq!(
            v.error_type.as_deref(),
            Some("simple_function_checker:wrong_func_name")
        );
        let v = simple_function_check(
            &doc(),
            &call("math_area", json!({"base": 10, "height": 5})),
            &gold(),
            &CheckOptions {
                underscore_to_dot: true,
            },
        );
        assert!(v.valid);
    }

    #[test]
    fn parallel_is_greedy() {
        let doc = json!({"name": "f", "parameters": {"type": "dict", "properties": {
            "x": {"type": "integer"}}, "required": []}});
        let g = |acc: Value| GoldCall {
            name: "f".into(),
            params: json!({ "x": acc }).as_object().unwrap().clone(),
        };
        let gold = vec![g(json!([1, 2])), g(json!([1]))];
        let docs = vec![doc];
        let o = CheckOptions::default();
        // An assignment exists (2->gold0, 1->gold1) but greedy matching takes 1 for gold0.
        let calls = vec![call("f", json!({"x": 1})), call("f", json!({"x": 2}))];
        assert!(!parallel_no_order(&docs, &calls, &gold, &o).valid);
        let calls = vec![call("f", json!({"x": 2})), call("f", json!({"x": 1}))];
        assert!(parallel_no_order(&docs, &calls, &gold, &o).valid);
        assert_eq!(
            parallel_no_order(&docs, &calls[..1], &gold, &o)
                .error_type
                .as_deref(),
            Some("parallel_function_checker_no_order:wrong_count")
        );
    }
}
