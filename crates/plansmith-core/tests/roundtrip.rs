//! Property tests: every syntax round-trips every plan it can carry; no parser panics.

use plansmith_core::{Call, Catalog, Plan, Syntax};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,8}(\\.[a-z][a-z0-9_]{0,5})?"
}

fn key() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,8}"
}

/// DSL-safe text: non-empty, none of `( ) | = ;` or newline (spaces and unicode allowed).
fn dsl_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _.,:/+#'!?é漢-]{1,16}"
}

fn dsl_value(depth: u32) -> BoxedStrategy<Value> {
    let leaf = dsl_text().prop_map(Value::String).boxed();
    if depth == 0 {
        return leaf;
    }
    prop_oneof![
        4 => leaf,
        1 => prop::collection::btree_map(key(), dsl_value(depth - 1), 1..3)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => prop::collection::vec(dsl_value(depth - 1), 1..3).prop_map(Value::Array),
    ]
    .boxed()
}

fn json_value(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        any::<String>().prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        (-1e6f64..1e6).prop_map(Value::from),
        Just(Value::Null),
    ]
    .boxed();
    if depth == 0 {
        return leaf;
    }
    prop_oneof![
        3 => leaf,
        1 => prop::collection::btree_map(any::<String>(), json_value(depth - 1), 0..3)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => prop::collection::vec(json_value(depth - 1), 0..3).prop_map(Value::Array),
    ]
    .boxed()
}

fn plan(
    value: BoxedStrategy<Value>,
    keys: BoxedStrategy<String>,
    spoken: bool,
) -> impl Strategy<Value = Plan> {
    let call = (name(), prop::collection::btree_map(keys, value, 0..4))
        .prop_map(|(n, args)| Call::new(n, args.into_iter().collect::<Map<String, Value>>()));
    let spoken_text = if spoken {
        prop::option::of(any::<String>()).boxed()
    } else {
        Just(None).boxed()
    };
    (prop::collection::vec(call, 0..4), spoken_text)
        .prop_map(|(calls, spoken_text)| Plan { calls, spoken_text })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn dsl_round_trips(p in plan(dsl_value(2), key().boxed(), false)) {
        let text = Syntax::Dsl.render(&p);
        prop_assert_eq!(Syntax::Dsl.parse(&text).unwrap(), p);
    }

    #[test]
    fn envelope_round_trips(p in plan(json_value(2), any::<String>().boxed(), true)) {
        let text = Syntax::Envelope.render(&p);
        prop_assert_eq!(Syntax::Envelope.parse(&text).unwrap(), p);
    }

    #[test]
    fn openai_round_trips(p in plan(json_value(2), any::<String>().boxed(), true)) {
        let text = Syntax::OpenAi.render(&p);
        prop_assert_eq!(Syntax::OpenAi.parse(&text).unwrap(), p);
    }

    #[test]
    fn json_array_round_trips(p in plan(json_value(2), any::<String>().boxed(), false)) {
        let text = Syntax::JsonArray.render(&p);
        prop_assert_eq!(Syntax::JsonArray.parse(&text).unwrap(), p);
    }

    #[test]
    fn parsers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        for s in Syntax::ALL {
            let _ = s.parse(&text);
        }
        let _ = Catalog::from_json_str(&text);
    }

    #[test]
    fn dsl_parser_never_panics_on_near_misses(text in "[a-z(); =|.0-9\n]{0,40}") {
        let _ = Syntax::Dsl.parse(&text);
    }

    #[test]
    fn catalog_import_never_panics_on_json(v in json_value(4)) {
        let _ = Catalog::from_value(&v);
        let _ = Catalog::from_value(&serde_json::json!({"tools": [v.clone()]}));
        let _ = Catalog::from_value(&serde_json::json!([{"name": "t", "parameters": v}]));
    }

    #[test]
    fn stated_numbers_never_panic(text in "[a-z0-9 .,\\-]{0,40}") {
        let _ = plansmith_core::policy::stated_numbers(&text);
    }

    /// Whatever number JSON writes, a request stating it the same way states its value: the
    /// validator's numeric copy check accepts every number the grammar can copy.
    #[test]
    fn a_number_written_in_a_request_is_stated(n in -1.0e9f64..1.0e9, cents in any::<bool>()) {
        let n = if cents { (n * 100.0).round() / 100.0 } else { n.round() };
        let written = if cents { format!("{n:.2}") } else { serde_json::json!(n as i64).to_string() };
        let value: f64 = written.parse().unwrap();
        let request = format!("log {written} for me");
        prop_assert!(plansmith_core::policy::stated_numbers(&request).contains(&value), "{}", request);
    }
}
