//! Targeted behaviour: copy drift, unknown names, entities, tool choice, masks, dead states.

mod common;

use common::char_env;
use plansmith_core::{Catalog, CopyRule, CopyUnit, ParamRef, Policy, Syntax};
use plansmith_grammar::*;

fn orders(order_id_type: &str) -> Catalog {
    Catalog::from_json_str(&format!(
        r#"[{{"name":"lookup_order","parameters":{{"type":"object","properties":{{"order_id":{{"type":"{order_id_type}"}}}},"required":["order_id"],"additionalProperties":false}}}},
            {{"name":"notify","parameters":{{"type":"object","properties":{{"user":{{"type":"string"}}}},"required":["user"],"additionalProperties":false}}}}]"#
    ))
    .unwrap()
}

fn pace() -> Catalog {
    Catalog::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pace/tools.json"
    ))
    .unwrap()
}

/// Walk `text` char by char; returns the first rejected char (and the mask there).
fn walk(c: &mut Constraint, env: &TokEnv, text: &str) -> Option<(char, Mask)> {
    for ch in text.chars() {
        let t = env.tokenize(&ch.to_string())[0];
        let mask = c.mask().unwrap().clone();
        if !mask.is_allowed(t) {
            return Some((ch, mask));
        }
        c.commit(t).unwrap();
    }
    None
}

fn dsl(policy: Policy) -> Options {
    Options {
        syntax: Syntax::Dsl,
        policy,
        tool_choice: ToolChoice::Auto,
        max_calls: 4,
    }
}

#[test]
fn valid_plan_walks_to_the_end() {
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let req = Request::new("please refund order 4242 for kim as discussed");
    let mut c = engine
        .constraint(&orders("string"), &dsl(Policy::copy_free_strings()), &req)
        .unwrap();
    assert!(walk(
        &mut c,
        &env,
        "lookup_order(order_id=4242) | notify(user=kim)\n"
    )
    .is_none());
    assert!(c.is_stopped() && c.is_accepting());
    assert_eq!(c.state(), ConstraintState::Stopped);
    assert_eq!(
        c.output_text(),
        "lookup_order(order_id=4242) | notify(user=kim)\n"
    );
}

#[test]
fn a_copied_number_may_be_one_the_request_states_in_words_or_with_separators() {
    // "three" copies as 3, "1,000" as 1000 (how JSON and the DSL write them); nothing else
    // that is not in the request.
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let json = Options {
        syntax: Syntax::JsonArray,
        policy: Policy::copy_free_strings(),
        tool_choice: ToolChoice::Auto,
        max_calls: 1,
    };
    for opts in [dsl(Policy::copy_free_strings()), json] {
        let plan = |id: &str| match opts.syntax {
            Syntax::Dsl => format!("lookup_order(order_id={id})\n"),
            _ => format!(r#"[{{"name":"lookup_order","arguments":{{"order_id":{id}}}}}]"#),
        };
        for (request, id) in [
            ("refund order three", "3"),
            ("refund order one thousand", "1000"),
            ("refund the 1,000 dollar order", "1000"),
            ("refund order seventy two please", "72"),
        ] {
            let req = Request::new(request);
            let mut c = engine.constraint(&orders("integer"), &opts, &req).unwrap();
            let text = plan(id);
            assert_eq!(walk(&mut c, &env, &text), None, "{request}: {text}");
            assert!(c.is_accepting(), "{request}: {text}");
            let mut c = engine.constraint(&orders("integer"), &opts, &req).unwrap();
            let drift = plan(&format!("{id}1"));
            assert!(walk(&mut c, &env, &drift).is_some(), "{request}: {drift}");
        }
        // "seventy two" is 72, not 70 and not 2
        let req = Request::new("refund order seventy two please");
        for id in ["70", "2"] {
            let mut c = engine.constraint(&orders("integer"), &opts, &req).unwrap();
            assert!(walk(&mut c, &env, &plan(id)).is_some(), "{id}");
        }
    }
}

#[test]
fn copy_drift_is_unrepresentable() {
    // request contains 4242 only: after "42" the mask offers no "0"
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let req = Request::new("please refund order 4242 for kim");
    let zero = env.tokenize("0")[0];
    // a free string copied word-aligned (the DSL default policy)
    let mut c = engine
        .constraint(&orders("string"), &dsl(Policy::copy_free_strings()), &req)
        .unwrap();
    let (rejected, mask) = walk(&mut c, &env, "lookup_order(order_id=420").unwrap();
    assert_eq!(rejected, '0');
    assert!(!mask.is_allowed(zero));
    // an integer the policy marks as copied: typed *and* copied
    let only = Policy {
        copy: CopyRule::Only(vec![ParamRef {
            tool: "lookup_order".into(),
            path: "order_id".into(),
        }]),
        copy_unit: CopyUnit::Words,
    };
    let mut c = engine
        .constraint(&orders("integer"), &dsl(only.clone()), &req)
        .unwrap();
    assert_eq!(
        walk(&mut c, &env, "lookup_order(order_id=420").unwrap().0,
        '0'
    );
    // word-aligned: a prefix of the number is not a copy either
    let mut c = engine
        .constraint(&orders("integer"), &dsl(only.clone()), &req)
        .unwrap();
    assert_eq!(
        walk(&mut c, &env, "lookup_order(order_id=42)").unwrap().0,
        ')'
    );
    // same in the envelope (JSON string)
    let env_opts = Options {
        syntax: Syntax::Envelope,
        policy: Policy::copy_free_strings(),
        tool_choice: ToolChoice::Auto,
        max_calls: 1,
    };
    let mut c = engine
        .constraint(&orders("string"), &env_opts, &req)
        .unwrap();
    assert_eq!(
        walk(
            &mut c,
            &env,
            r#"{"verb": "lookup_order", "args": {"order_id": "420"#
        )
        .unwrap()
        .0,
        '0'
    );
    let mut c = engine
        .constraint(&orders("string"), &env_opts, &req)
        .unwrap();
    assert!(walk(
        &mut c,
        &env,
        r#"{"verb": "lookup_order", "args": {"order_id": "4242"}}"#
    )
    .is_none());
    assert!(c.is_accepting());
    // char-level copying allows any substring, still no drift
    let chars = Policy {
        copy: CopyRule::FreeStrings,
        copy_unit: CopyUnit::Chars,
    };
    let mut c = engine
        .constraint(&orders("string"), &dsl(chars.clone()), &req)
        .unwrap();
    assert!(walk(&mut c, &env, "lookup_order(order_id=24)").is_none());
    let mut c = engine
        .constraint(&orders("string"), &dsl(chars), &req)
        .unwrap();
    assert_eq!(
        walk(&mut c, &env, "lookup_order(order_id=420").unwrap().0,
        '0'
    );
}

#[test]
fn copied_values_never_start_or_end_with_whitespace() {
    // "the update " was a value the constraint allowed: a span ending in the request's space.
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let req = Request::new("notify kim  about the update  now");
    for policy in [
        Policy::copy_free_strings(),
        Policy {
            copy: CopyRule::FreeStrings,
            copy_unit: CopyUnit::Chars,
        },
    ] {
        let opts = dsl(policy);
        let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
        assert_eq!(
            walk(&mut c, &env, "notify(user=the update )").unwrap().0,
            ')'
        );
        let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
        assert_eq!(walk(&mut c, &env, "notify(user= ").unwrap().0, ' ');
        let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
        assert!(walk(&mut c, &env, "notify(user=kim  about the update)\n").is_none());
        assert!(c.is_accepting());
    }
    let envelope = Options {
        syntax: Syntax::Envelope,
        policy: Policy::copy_free_strings(),
        tool_choice: ToolChoice::Auto,
        max_calls: 1,
    };
    let mut c = engine
        .constraint(&orders("string"), &envelope, &req)
        .unwrap();
    let (rejected, _) = walk(
        &mut c,
        &env,
        r#"{"verb": "notify", "args": {"user": "kim ""#,
    )
    .unwrap();
    assert_eq!(rejected, '"');
    // A request whose only words are too short for the value still gets no blank value.
    let spaces = Request::new("   ");
    let mut c = engine
        .constraint(
            &orders("string"),
            &dsl(Policy::copy_free_strings()),
            &spaces,
        )
        .unwrap();
    assert!(walk(&mut c, &env, "notify(user= )").is_some());
}

#[test]
fn unknown_tools_and_args_are_unreachable() {
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let req = Request::new("anything 123");
    let opts = dsl(Policy::copy_free_strings());
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "delete_all(").is_some());
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "notify(city=").is_some());
    // required keys: closing is illegal until present
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert_eq!(walk(&mut c, &env, "notify()").unwrap().0, ')');
    // each key at most once
    let mut c = engine
        .constraint(&pace(), &opts, &Request::new("set volume to 7"))
        .unwrap();
    assert!(walk(&mut c, &env, "set(target=volume; target=").is_some());
}

#[test]
fn structural_chars_never_allowed_inside_values() {
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let req = Request::new("weird request with (parens) and | pipes = signs 77");
    let mut c = engine
        .constraint(&orders("string"), &dsl(Policy::copy_free_strings()), &req)
        .unwrap();
    assert!(walk(&mut c, &env, "lookup_order(order_id=77").is_none());
    let mask = c.mask().unwrap().clone();
    for ch in "(|=".chars() {
        assert!(!mask.is_allowed(env.tokenize(&ch.to_string())[0]), "{ch}");
    }
    // without a copy policy too
    let mut c = engine
        .constraint(&orders("string"), &dsl(Policy::default()), &req)
        .unwrap();
    assert!(walk(&mut c, &env, "notify(user=a b").is_none());
    let mask = c.mask().unwrap().clone();
    for ch in "(|=\n".chars() {
        assert!(!mask.is_allowed(env.tokenize(&ch.to_string())[0]), "{ch:?}");
    }
}

#[test]
fn visible_entities_restrict_labels() {
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let req = Request {
        text: "open Safari or Notes".into(),
        entities: vec![Entity {
            entity_type: "app".into(),
            label: "Safari".into(),
        }],
    };
    let opts = dsl(Policy::copy_free_strings());
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "open(target.type=app; target.label=Safari)\n").is_none());
    // Notes is in the request but not a visible app
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    assert_eq!(
        walk(&mut c, &env, "open(target.type=app; target.label=N")
            .unwrap()
            .0,
        'N'
    );
    // no visible file: the usual rule (a copy of the request) applies
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "open(target.type=file; target.label=Notes)\n").is_none());
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "open(target.type=file; target.label=Nodes").is_some());
    // JSON syntaxes too
    let opts = Options {
        syntax: Syntax::JsonArray,
        policy: Policy::default(),
        tool_choice: ToolChoice::Auto,
        max_calls: 2,
    };
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    assert!(walk(
        &mut c,
        &env,
        r#"[{"name": "open", "arguments": {"target": {"type": "app", "label": "Sa"#
    )
    .is_none());
    let mut c = engine.constraint(&pace(), &opts, &req).unwrap();
    assert!(walk(
        &mut c,
        &env,
        r#"[{"name": "open", "arguments": {"target": {"type": "app", "label": "X"#
    )
    .is_some());
}

#[test]
fn tool_choice_is_enforced() {
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let req = Request::new("refund 4242 for kim");
    let mut opts = dsl(Policy::copy_free_strings());
    opts.tool_choice = ToolChoice::None;
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "done\n").is_none());
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "n").is_some());
    opts.tool_choice = ToolChoice::Required;
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "d").is_some());
    opts.tool_choice = ToolChoice::Named("notify".into());
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert!(walk(&mut c, &env, "l").is_some());
    opts.max_calls = 1;
    let mut c = engine.constraint(&orders("string"), &opts, &req).unwrap();
    assert_eq!(walk(&mut c, &env, "notify(user=kim) |").unwrap().0, ' ');
    opts.tool_choice = ToolChoice::Named("nope".into());
    assert_eq!(
        engine.constraint(&orders("string"), &opts, &req).err(),
        Some(GrammarError::UnknownTool("nope".into()))
    );
    // required with nothing copyable: a typed error, not a dead end
    opts.tool_choice = ToolChoice::Required;
    let only = Policy {
        copy: CopyRule::Only(vec![ParamRef {
            tool: "lookup_order".into(),
            path: "order_id".into(),
        }]),
        copy_unit: CopyUnit::Words,
    };
    let opts = Options {
        syntax: Syntax::Dsl,
        policy: only,
        tool_choice: ToolChoice::Named("lookup_order".into()),
        max_calls: 1,
    };
    assert!(matches!(
        engine.constraint(&orders("integer"), &opts, &Request::new("no digits here")),
        Err(GrammarError::NoCallableTool)
    ));
}

#[test]
fn unsupported_features_are_typed_errors() {
    let env = char_env();
    let engine = Engine::new(env).unwrap();
    let cat = Catalog::from_json_str(
        r#"[{"name":"f","parameters":{"type":"object","properties":{"d":{"type":"string","format":"mystery"}},"required":["d"]}}]"#,
    )
    .unwrap();
    let e = engine
        .constraint(&cat, &dsl(Policy::default()), &Request::new("x"))
        .err()
        .unwrap();
    assert!(
        matches!(&e, GrammarError::Unsupported { tool, path, .. } if tool == "f" && path == "d"),
        "{e}"
    );
    let cat = Catalog::from_json_str(
        r#"[{"name":"f","parameters":{"type":"object","properties":{"d":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}}]"#,
    )
    .unwrap();
    assert!(matches!(
        engine.constraint(&cat, &dsl(Policy::default()), &Request::new("x")),
        Err(GrammarError::Unsupported { .. })
    ));
    // ... while JSON syntaxes support anyOf
    let opts = Options {
        syntax: Syntax::JsonArray,
        policy: Policy::default(),
        tool_choice: ToolChoice::Auto,
        max_calls: 1,
    };
    assert!(engine.constraint(&cat, &opts, &Request::new("x")).is_ok());
}

#[test]
fn masks_are_padded_and_forbidden_commits_kill() {
    let env = char_env(); // 97 tokens, model width 128
    let engine = Engine::new(env.clone()).unwrap();
    let mut c = engine
        .constraint(
            &orders("string"),
            &dsl(Policy::default()),
            &Request::new("x"),
        )
        .unwrap();
    let mask = c.mask().unwrap().clone();
    assert_eq!(mask.len(), 128);
    assert_eq!(mask.words().len(), 4);
    assert!((97..128).all(|id| !mask.is_allowed(id)));
    let mut logits = vec![0.0f32; 130];
    c.apply_mask(&mut logits).unwrap();
    assert!(logits[120].is_infinite() && logits[129].is_infinite());
    let allowed = mask.allowed();
    assert!(allowed.iter().all(|&t| logits[t as usize] == 0.0));
    // forced tokens: after "l" the rest of "lookup_order(order_id=" is forced
    c.commit(env.tokenize("l")[0]).unwrap();
    let forced = c.forced_tokens();
    c.commit_all(&forced).unwrap();
    assert_eq!(c.output_text(), "lookup_order(order_id=");
    // a forbidden token: dead, not a panic, and it stays dead
    let e = c.commit(env.tokenize(")")[0]).unwrap_err();
    assert!(e.reason.contains("not allowed"));
    assert!(matches!(c.state(), ConstraintState::Dead { .. }));
    assert!(c.mask().is_err() && c.is_stopped() && !c.is_accepting());
    assert!(c.commit(1000).is_err());
}

#[test]
fn cache_hits_and_lru_bound() {
    let env = char_env();
    let engine = Engine::with_capacity(env, 2, 1 << 30).unwrap();
    let opts = dsl(Policy::default());
    let req = Request::new("x");
    for _ in 0..3 {
        engine.constraint(&orders("string"), &opts, &req).unwrap();
    }
    let s = engine.cache_stats();
    assert_eq!((s.misses, s.hits, s.entries), (1, 2, 1));
    engine.constraint(&orders("integer"), &opts, &req).unwrap();
    engine.constraint(&pace(), &opts, &req).unwrap();
    let s = engine.cache_stats();
    assert_eq!((s.entries, s.evictions), (2, 1));
    // no copy policy, no entity refs: a precompiled matcher is reused
    assert!(engine
        .prepare(&orders("string"), &opts)
        .unwrap()
        .is_precompiled());
    // DSL copy spans are checked beside one shared grammar; JSON strings compile per request
    assert!(engine
        .prepare(&orders("string"), &dsl(Policy::copy_free_strings()))
        .unwrap()
        .is_precompiled());
    let envelope = Options {
        syntax: Syntax::Envelope,
        ..dsl(Policy::copy_free_strings())
    };
    assert!(!engine
        .prepare(&orders("string"), &envelope)
        .unwrap()
        .is_precompiled());
}

#[test]
fn qwen_tiktoken_vocab_loads() {
    let path = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../assets/qwen.tiktoken"
    ));
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/assets.sh` to fetch Qwen's tokenizer",
        path.display()
    );
    let env = TokEnv::qwen_tiktoken(path).unwrap();
    assert_eq!(env.model_vocab(), 151_936);
    assert_eq!(env.token_bytes(0), b"!");
    let engine = Engine::new(env.clone()).unwrap();
    let opts = Options {
        syntax: Syntax::Envelope,
        policy: Policy::default(),
        tool_choice: ToolChoice::Auto,
        max_calls: 1,
    };
    let mut c = engine
        .constraint(&pace(), &opts, &Request::new("open Safari"))
        .unwrap();
    let text = r#"{"verb": "open", "args": {"target": {"type": "app", "label": "Safari"}}}"#;
    for t in env.tokenize(text) {
        assert!(
            c.mask().unwrap().is_allowed(t),
            "{:?}",
            String::from_utf8_lossy(&env.token_bytes(t))
        );
        c.commit(t).unwrap();
    }
    assert!(c.is_accepting());
    assert!(c.mask().unwrap().allowed().iter().all(|&t| t == env.eos()));
}

/// A forced run of bytes ends where the grammar stops being sure; when a longer token could
/// cover the run's last token and what follows, that token is left to the model, so a
/// sub-word model can keep its usual split (`=x` for `=` followed by the value `x`).
#[test]
fn last_forced_token_is_held_back_when_a_longer_token_could_follow() {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    toks.push(b"\n".to_vec());
    for piece in ["order_id", "=x"] {
        toks.push(piece.as_bytes().to_vec());
    }
    toks.push(b"<eos>".to_vec());
    let eos = toks.len() as u32 - 1;
    let env = TokEnv::from_token_bytes(toks, eos, &[], Some(160)).unwrap();
    let equals_x = eos - 1;
    let engine = Engine::new(env.clone()).unwrap();
    let mut c = engine
        .constraint(
            &orders("string"),
            &dsl(Policy::default()),
            &Request::new("x"),
        )
        .unwrap();
    c.commit(env.tokenize("l")[0]).unwrap();
    // "ookup_order(order_id=" is forced; its last token `=` could also start `=x`.
    let forced = c.forced_tokens();
    c.commit_all(&forced).unwrap();
    assert_eq!(c.output_text(), "lookup_order(order_id");
    let mask = c.mask().unwrap().clone();
    assert!(mask.is_allowed(equals_x) && mask.is_allowed(env.tokenize("=")[0]));
    c.commit(equals_x).unwrap();
    assert_eq!(c.output_text(), "lookup_order(order_id=x");
}

/// Found by plansmith-fuzz: `max_calls` near `usize::MAX` wrote a repetition count llguidance
/// rejects; now every count above [`MAX_CALLS`] is a typed `Invalid` before any grammar text.
#[test]
fn max_calls_beyond_the_cap_is_a_typed_error() {
    let engine = Engine::new(char_env()).unwrap();
    for syntax in [
        Syntax::Dsl,
        Syntax::Envelope,
        Syntax::OpenAi,
        Syntax::JsonArray,
        Syntax::ToolCall,
    ] {
        let mut options = Options::new(syntax);
        options.max_calls = usize::MAX;
        let Err(e) = engine.prepare(&pace(), &options) else {
            panic!("{syntax:?}: max_calls = usize::MAX compiled");
        };
        assert!(matches!(e, GrammarError::Invalid(_)), "{syntax:?}: {e}");
        options.max_calls = MAX_CALLS;
        engine.prepare(&pace(), &options).unwrap();
    }
}

/// Found by plansmith-fuzz: an `enum`/`const` value that the schema's own `pattern` forbids
/// was emitted, and the plan then failed validation. Such values are left out now, and a
/// schema with none left is a typed refusal.
#[test]
fn enum_values_the_schema_forbids_are_not_emitted() {
    let engine = Engine::new(char_env()).unwrap();
    let catalog = |code: &str| {
        Catalog::from_json_str(&format!(
            r#"[{{"name":"fly","parameters":{{"type":"object","properties":{{"code":{code}}},"required":["code"]}}}}]"#
        ))
        .unwrap()
    };
    let mut options = Options::new(Syntax::JsonArray);
    options.tool_choice = ToolChoice::Required;
    let req = Request::new("fly");
    let c = catalog(r#"{"type":"string","pattern":"^[A-Z]{3}$","enum":["BOS","boston","NYC"]}"#);
    let mut con = engine.constraint(&c, &options, &req).unwrap();
    let prefix = r#"[{"name":"fly","arguments":{"code":""#;
    assert_eq!(walk(&mut con, engine.env(), prefix), None);
    let mask = con.mask().unwrap().clone();
    let allowed: Vec<char> = "BbN"
        .chars()
        .filter(|ch| mask.is_allowed(engine.env().tokenize(&ch.to_string())[0]))
        .collect();
    assert_eq!(allowed, vec!['B', 'N'], "`boston` breaks the pattern");
    let c = catalog(r#"{"type":"string","pattern":"^[A-Z]{3}$","const":"xxxx"}"#);
    let Err(e) = engine.constraint(&c, &options, &req) else {
        panic!("a const the pattern forbids compiled");
    };
    assert!(matches!(e, GrammarError::Unsupported { .. }), "{e}");
}

/// Found by the long grammar run: an entity object (`{type: enum, label}`) whose `type` also
/// carries a `const` or `pattern` was emitted from the enum alone.
#[test]
fn entity_types_the_schema_forbids_are_not_emitted() {
    let engine = Engine::new(char_env()).unwrap();
    let c = Catalog::from_json_str(
        r#"[{"name":"open","parameters":{"type":"object","properties":{"target":{"type":"object",
            "properties":{"type":{"type":"string","enum":["app","file","url"],"const":"file"},
            "label":{"type":"string"}},"required":["type","label"]}},"required":["target"]}}]"#,
    )
    .unwrap();
    let mut options = Options::new(Syntax::JsonArray);
    options.tool_choice = ToolChoice::Required;
    let req = Request::new("open the report");
    let mut con = engine.constraint(&c, &options, &req).unwrap();
    let prefix = r#"[{"name":"open","arguments":{"target":{"type":""#;
    assert_eq!(walk(&mut con, engine.env(), prefix), None);
    let mask = con.mask().unwrap().clone();
    let allowed: Vec<char> = "afu"
        .chars()
        .filter(|ch| mask.is_allowed(engine.env().tokenize(&ch.to_string())[0]))
        .collect();
    assert_eq!(allowed, vec!['f'], "only the const's value");
}

/// Found by the long grammar run: `maxLength` / `maxItems` near 2^64 wrote repetition counts
/// llguidance cannot parse. Above the count cap an upper bound is no bound, a lower bound is a
/// typed refusal.
#[test]
fn huge_length_and_item_bounds() {
    let engine = Engine::new(char_env()).unwrap();
    let catalog = |prop: &str| {
        Catalog::from_json_str(&format!(
            r#"[{{"name":"f","parameters":{{"type":"object","properties":{{"x":{prop}}},"required":["x"]}}}}]"#
        ))
        .unwrap()
    };
    for syntax in [Syntax::Dsl, Syntax::JsonArray] {
        let options = Options::new(syntax);
        for prop in [
            r#"{"type":"string","maxLength":18446744073709551615}"#,
            r#"{"type":"array","items":{"type":"string"},"maxItems":9223372036854775807}"#,
        ] {
            engine
                .prepare(&catalog(prop), &options)
                .unwrap_or_else(|e| panic!("{syntax:?} {prop}: {e}"));
        }
        for prop in [
            r#"{"type":"string","minLength":18446744073709551615}"#,
            r#"{"type":"array","items":{"type":"string"},"minItems":9223372036854775807,"maxItems":9223372036854775807}"#,
        ] {
            let Err(e) = engine.prepare(&catalog(prop), &options) else {
                panic!("{syntax:?} {prop}: compiled");
            };
            assert!(
                matches!(e, GrammarError::Unsupported { .. }),
                "{syntax:?} {prop}: {e}"
            );
        }
    }
}

/// Found by the long grammar run: a `pattern` that needs a character the syntax escapes (`"`,
/// a control character) or reserves (a DSL separator) let the grammar offer the key and then
/// die inside its value. Such a pattern is now a typed refusal at compile time.
#[test]
fn patterns_no_value_can_satisfy_in_the_syntax_are_refused() {
    let engine = Engine::new(char_env()).unwrap();
    let catalog = |pattern: &str| {
        Catalog::from_value(
            &serde_json::json!([{"name": "fly", "parameters": {"type": "object",
            "properties": {"code": {"type": "string", "pattern": pattern}}}}]),
        )
        .unwrap()
    };
    let req = Request::new("fly");
    for (syntax, pattern, refused) in [
        (Syntax::JsonArray, "^a\"b$", true),
        (Syntax::JsonArray, "^[A-Z]{3}\r\n$", true),
        (Syntax::JsonArray, "^[A-Z]{3}$", false),
        (Syntax::JsonArray, "a\"?b", false),
        (Syntax::Dsl, "^x;y$", true),
        (Syntax::Dsl, "^[A-Z]{3}$", false),
    ] {
        let r = engine.constraint(&catalog(pattern), &Options::new(syntax), &req);
        match (r, refused) {
            (Err(GrammarError::Unsupported { feature, .. }), true) => {
                assert!(feature.contains("admits no value"), "{feature}")
            }
            (Ok(_), false) => {}
            (Err(e), _) => panic!("{syntax:?} {pattern:?}: {e}"),
            (Ok(_), true) => panic!("{syntax:?} {pattern:?} compiled"),
        }
    }
}

/// Found by the long grammar run: a vocabulary with no token for a byte the grammar forces (a
/// control character in an enum value) got a greedy tokenization that did not spell it, and
/// the constraint then refused its own forced tokens. Forced tokens now always commit.
#[test]
fn forced_tokens_always_commit_even_when_the_vocabulary_cannot_spell_them() {
    let env = char_env(); // printable ASCII, newline, EOS: no `\r`
    let engine = Engine::new(env.clone()).unwrap();
    let c = Catalog::from_value(&serde_json::json!([{"name": "go", "parameters": {
        "type": "object", "properties": {"mode": {"type": "string", "enum": ["fast\r!"]}},
        "required": ["mode"]}}]))
    .unwrap();
    let mut options = Options::new(Syntax::Dsl);
    options.tool_choice = ToolChoice::Required;
    let mut con = engine
        .constraint(&c, &options, &Request::new("go"))
        .unwrap();
    let mut forced_any = false;
    for _ in 0..40 {
        let forced = con.forced_tokens();
        forced_any |= !forced.is_empty();
        con.commit_all(&forced)
            .unwrap_or_else(|d| panic!("forced tokens refused after {:?}: {d}", con.output_text()));
        // Where no token spells the next byte the constraint is a dead end (the mask says so).
        let Ok(mask) = con.mask() else { break };
        let Some(&t) = mask.allowed().first() else {
            break;
        };
        if con.is_stopped() || con.commit(t).is_err() {
            break;
        }
    }
    assert!(forced_any);
    assert!(
        con.output_text().starts_with("go(mode=fast"),
        "{:?}",
        con.output_text()
    );
}

/// JSON Schema accepts any value where a schema states no type (`{}`, a description only) and
/// for a required key `properties` does not list (BFCL's `parallel_29` has such a `dict`): the
/// JSON syntaxes allow any compact JSON value there, nested arrays and objects included.
#[test]
fn typeless_values_and_unlisted_required_keys_take_any_json_value() {
    let env = char_env();
    let engine = Engine::new(env.clone()).unwrap();
    let cat = Catalog::from_json_str(
        r#"[{"name":"f","parameters":{"type":"object","properties":{
              "population":{"type":"object","description":"adults, children","required":["adults","children"]},
              "extra":{"description":"anything"},
              "blob":{}},
            "required":["population","extra"]}}]"#,
    )
    .unwrap();
    let opts = Options {
        syntax: Syntax::JsonArray,
        policy: Policy::default(),
        tool_choice: ToolChoice::Auto,
        max_calls: 1,
    };
    let good = [
        r#"[{"name":"f","arguments":{"population":{"adults":2,"children":[1,{"a":null}]},"extra":"x"}}]"#,
        r#"[{"name":"f","arguments":{"population":{"adults":-1.5,"children":true},"extra":{},"blob":[]}}]"#,
    ];
    for text in good {
        let mut c = engine.constraint(&cat, &opts, &Request::new("x")).unwrap();
        assert_eq!(walk(&mut c, &env, text), None, "{text}");
        assert!(c.is_accepting(), "{text}");
    }
    // The listed required keys stay required, and the values stay JSON.
    for bad in [
        r#"[{"name":"f","arguments":{"population":{"children":1},"extra":1}}]"#,
        r#"[{"name":"f","arguments":{"population":{"adults":2,"children":x"#,
    ] {
        let mut c = engine.constraint(&cat, &opts, &Request::new("x")).unwrap();
        assert!(walk(&mut c, &env, bad).is_some(), "{bad}");
    }
    // The DSL surface keeps its rule: an untyped value is a plain string there.
    assert!(engine
        .constraint(&cat, &dsl(Policy::default()), &Request::new("x"))
        .is_ok());
}

/// In the `<tool_call>` format a model may decline in prose ("I'm sorry, …"), which parses as no
/// call; the prose cannot carry a call out of the catalog (no tag, code fence or brace), and
/// with a call required there is no prose at all.
#[test]
fn tool_call_surface_takes_a_prose_answer_as_no_call() {
    let engine = Engine::new(char_env()).unwrap();
    let req = Request::new("what is the weather like?");
    let mut options = Options::new(Syntax::ToolCall);
    let mut c = engine.constraint(&pace(), &options, &req).unwrap();
    assert_eq!(
        walk(
            &mut c,
            engine.env(),
            "I'm sorry, I can't check the weather.\nAsk me to open an app."
        ),
        None
    );
    assert!(c.is_accepting());
    for (text, refused) in [
        ("Sure: <tool_call>", '<'),
        ("Here it is ```json", '`'),
        ("Call {", '{'),
        ("```", '`'),
        (" Sure", ' '),
    ] {
        let mut c = engine.constraint(&pace(), &options, &req).unwrap();
        assert_eq!(
            walk(&mut c, engine.env(), text).map(|(ch, _)| ch),
            Some(refused),
            "{text}"
        );
    }
    let long = format!("I{}", "a".repeat(399));
    let mut c = engine.constraint(&pace(), &options, &req).unwrap();
    assert_eq!(walk(&mut c, engine.env(), &long), None);
    assert_eq!(
        walk(&mut c, engine.env(), "a").map(|(ch, _)| ch),
        Some('a'),
        "400 characters at most"
    );
    options.tool_choice = ToolChoice::Required;
    let mut c = engine.constraint(&pace(), &options, &req).unwrap();
    assert_eq!(walk(&mut c, engine.env(), "I").map(|(ch, _)| ch), Some('I'));
}
