//! The emitter: JSON Schema of each tool -> Lark rules, for the DSL and the JSON syntaxes.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Surface {
    Dsl,
    Json,
}

pub(super) struct Gen<'a> {
    pub(super) surface: Surface,
    pub(super) policy: &'a Policy,
    pub(super) rules: String,
    pub(super) token_defs: String,
    pub(super) n: usize,
    pub(super) tokens: HashMap<String, String>,
    pub(super) leaf_memo: HashMap<String, String>,
    pub(super) copy_holes: Vec<CopyHole>,
    pub(super) entity_holes: Vec<EntityHole>,
    /// DSL keys per tool and what their values are (see [`Template`]'s `copy_keys`).
    pub(super) dsl_keys: HashMap<(String, String), KeyKind>,
    /// Holes known to have no span in the request (regeneration for one request).
    pub(super) impossible: Vec<CopyHole>,
    /// The request, when generating for one request (entity branches decided now).
    pub(super) request: Option<(&'a Request, CopyUnit)>,
    /// Whether the recursive `any_json` rule has been written (see [`Gen::any_json`]).
    pub(super) any_json_written: bool,
}

/// Internal: a typed refusal, or "no value exists for this request" (a copy span with no
/// match), which enclosing optional keys / branches / tools absorb.
#[derive(Debug)]
pub(super) enum GenErr {
    Grammar(GrammarError),
    Impossible,
}

impl From<GrammarError> for GenErr {
    fn from(e: GrammarError) -> Self {
        GenErr::Grammar(e)
    }
}

pub(super) type R<T> = Result<T, GenErr>;

/// Whether some string matches `chars` and every shape (derivre's emptiness check under a
/// fuel bound; a check that runs out of fuel counts as "yes": llguidance decides at runtime).
fn admits_some_string(chars: &str, shapes: &[String]) -> bool {
    let mut b = llguidance::derivre::RegexBuilder::new();
    let parts: Vec<&str> = std::iter::once(chars)
        .chain(shapes.iter().map(String::as_str))
        .collect();
    let Ok(e) = b.mk_regex_and(&parts) else {
        return true;
    };
    match b.to_regex_limited(e, 200_000) {
        Ok(mut rx) => !rx.always_empty(),
        Err(_) => true,
    }
}

pub(super) fn unsupported(tool: &str, path: &str, feature: impl Into<String>) -> GenErr {
    GenErr::Grammar(GrammarError::Unsupported {
        tool: tool.to_string(),
        path: if path.is_empty() {
            "(arguments)".into()
        } else {
            path.to_string()
        },
        feature: feature.into(),
    })
}

impl<'a> Gen<'a> {
    pub(super) fn new(surface: Surface, policy: &'a Policy) -> Self {
        Gen {
            surface,
            policy,
            rules: String::new(),
            token_defs: String::new(),
            n: 0,
            tokens: HashMap::new(),
            leaf_memo: HashMap::new(),
            copy_holes: Vec::new(),
            entity_holes: Vec::new(),
            dsl_keys: HashMap::new(),
            impossible: Vec::new(),
            request: None,
            any_json_written: false,
        }
    }

    /// Any JSON value, for a JSON-surface schema that states no type (`{}`, `true`, a
    /// description only) or a required key with no schema in `properties`: JSON Schema
    /// accepts any value there, so the grammar does too. One recursive rule per grammar
    /// (compact JSON like the rest of the surface); its strings are not length-bounded, the
    /// reply's token budget is.
    pub(super) fn any_json(&mut self) -> String {
        const NAME: &str = "any_json";
        if !self.any_json_written {
            self.any_json_written = true;
            let s = self.token(format!("/\"{JSON_CHAR}*\"/"));
            let number = rx::number_range(None, None).unwrap_or_else(|| "-?[0-9]+".into());
            let n = self.token(format!("/{number}/"));
            let _ = writeln!(
                self.rules,
                "{NAME}: {s} | {n} | \"true\" | \"false\" | \"null\" \
                 | \"[\" [{NAME} (COMMA {NAME})*] \"]\" \
                 | \"{{\" [{s} COLON {NAME} (COMMA {s} COLON {NAME})*] \"}}\""
            );
        }
        NAME.to_string()
    }

    pub(super) fn rule(&mut self, prefix: &str, expr: &str) -> String {
        self.n += 1;
        let name = format!("{prefix}_{}", self.n);
        let _ = writeln!(self.rules, "{name}: {expr}");
        name
    }

    /// A named lexeme for a Lark token body (deduplicated).
    pub(super) fn token(&mut self, body: String) -> String {
        if let Some(name) = self.tokens.get(&body) {
            return name.clone();
        }
        self.n += 1;
        let name = format!("T{}", self.n);
        let _ = writeln!(self.token_defs, "{name}: {body}");
        self.tokens.insert(body, name.clone());
        name
    }

    pub(super) fn copy_hole(&mut self, quoted: bool, conj: String, check: HoleCheck) -> R<String> {
        let hole = CopyHole {
            quoted,
            conj: SharedRegex::new(conj),
            check,
        };
        if self.impossible.contains(&hole) {
            return Err(GenErr::Impossible);
        }
        let i = match self.copy_holes.iter().position(|h| *h == hole) {
            Some(i) => i,
            None => {
                self.copy_holes.push(hole);
                self.copy_holes.len() - 1
            }
        };
        Ok(format!("copy_{i}"))
    }

    pub(super) fn entity_hole(&mut self, hole: EntityHole) -> String {
        let i = match self.entity_holes.iter().position(|h| *h == hole) {
            Some(i) => i,
            None => {
                self.entity_holes.push(hole);
                self.entity_holes.len() - 1
            }
        };
        format!("ent_{i}")
    }

    /// `key=value` in the DSL, noting whether `key` of `tool` takes a copied value.
    pub(super) fn dsl_pair(&mut self, tool: &str, key: &str, value: &str) -> String {
        let hole = |prefix: &str| {
            value
                .strip_prefix(prefix)
                .and_then(|n| n.parse::<usize>().ok())
        };
        let kind = if let Some(i) = hole("copy_") {
            KeyKind::Copied(i)
        } else if let Some(i) = hole("ent_") {
            // without visible entities the label is the hole's fallback expression
            match self.entity_holes.get(i).map(|h| h.fallback.as_str()) {
                Some(f) => match f
                    .strip_prefix("copy_")
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    Some(j) => KeyKind::Copied(j),
                    None if !refers_to_a_hole(f) => KeyKind::Plain,
                    None => KeyKind::Mixed,
                },
                None => KeyKind::Mixed,
            }
        } else if refers_to_a_hole(value) {
            KeyKind::Mixed
        } else {
            KeyKind::Plain
        };
        self.dsl_keys
            .entry((tool.to_string(), key.to_string()))
            .and_modify(|k| {
                if *k != kind {
                    *k = KeyKind::Mixed
                }
            })
            .or_insert(kind);
        format!("{} {value}", lit(&format!("{key}=")))
    }

    pub(super) fn sep(&self) -> &'static str {
        match self.surface {
            Surface::Dsl => "\"; \"",
            Surface::Json => "COMMA",
        }
    }

    /// Ordered sequence of segments separated by `sep`: required ones mandatory, optional
    /// ones skippable. Returns the expression for a *non-empty* sequence (None if impossible)
    /// and whether the empty sequence is allowed.
    pub(super) fn sequence(&mut self, segs: &[(String, bool)]) -> (Option<String>, bool) {
        let n = segs.len();
        let sep = self.sep();
        // ne[i] (a non-empty sequence drawn from segments i..) is needed when every segment
        // before i is optional; tail[i] (segments i.., each prefixed by the separator) when
        // ne[i-1] or tail[i-1] is.
        let mut ne_needed = vec![false; n];
        ne_needed[0] = true;
        for i in 1..n {
            ne_needed[i] = ne_needed[i - 1] && !segs[i - 1].1;
        }
        let mut tail_needed = vec![false; n + 1];
        for i in 1..=n {
            tail_needed[i] = ne_needed[i - 1] || tail_needed[i - 1];
        }
        let mut tail = vec![String::new(); n + 1];
        for i in (1..n).rev() {
            if !tail_needed[i] {
                continue;
            }
            let (seg, req) = &segs[i];
            let item = if *req {
                format!("{sep} {seg}")
            } else {
                format!("({sep} {seg})?")
            };
            tail[i] = if tail[i + 1].is_empty() {
                item
            } else {
                self.rule("tl", &format!("{item} {}", tail[i + 1]))
            };
        }
        let mut nonempty: Option<String> = None;
        for i in (0..n).rev() {
            if !ne_needed[i] {
                continue;
            }
            let (seg, req) = &segs[i];
            let here = format!("{seg} {}", tail[i + 1]).trim().to_string();
            let expr = match (&nonempty, req) {
                (Some(rest), false) => format!("{here} | {rest}"),
                _ => here,
            };
            nonempty = Some(self.rule("ne", &expr));
        }
        let allow_empty = segs.iter().all(|(_, r)| !r);
        (nonempty, allow_empty)
    }

    // ---------------------------------------------------------------- leaves

    /// Expression for a leaf value (and, for JSON, any value).
    pub(super) fn value(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        if let Some(any) = schema.get("anyOf") {
            return self.any_of(tool, path, schema, any);
        }
        if schema.as_bool() == Some(true) || schema.as_object().is_some_and(|m| m.is_empty()) {
            return Ok(match self.surface {
                Surface::Dsl => self.token(format!("/{DSL_SAFE}+/")),
                Surface::Json => self.any_json(),
            });
        }
        let ts = types(schema);
        let copy = self.policy.requires_copy(tool, path, schema)
            && ts.len() == 1
            && matches!(ts[0], "string" | "integer" | "number")
            && schema.get("enum").is_none()
            && schema.get("const").is_none();
        if copy {
            return self.copy_value(tool, path, schema, ts[0]);
        }
        let copy_enum = self.policy.requires_copy(tool, path, schema)
            && (schema.get("enum").is_some() || schema.get("const").is_some());
        if copy_enum {
            return self.copy_enum(tool, path, schema);
        }
        if schema.get("enum").is_some() || schema.get("const").is_some() {
            return self.enum_value(tool, path, schema);
        }
        // memoize request-independent leaves by schema text
        let key = format!(
            "{}|{}",
            self.surface as u8,
            plansmith_core::schema::canonical_json(schema)
        );
        if let Some(e) = self.leaf_memo.get(&key) {
            return Ok(e.clone());
        }
        let e = self.typed_value(tool, path, schema, &ts)?;
        if !ts.iter().any(|t| *t == "object" || *t == "array") {
            self.leaf_memo.insert(key, e.clone());
        }
        Ok(e)
    }

    pub(super) fn typed_value(
        &mut self,
        tool: &str,
        path: &str,
        schema: &Value,
        ts: &[&str],
    ) -> R<String> {
        if ts.is_empty() {
            return match self.surface {
                // untyped DSL values stay strings and validate against a typeless schema
                Surface::Dsl => Ok(self.token(format!("/{DSL_SAFE}+/"))),
                Surface::Json => Ok(self.any_json()),
            };
        }
        if self.surface == Surface::Dsl && ts.contains(&"string") {
            // DSL values of a type union containing string are typed as strings
            return self.string_value(tool, path, schema);
        }
        let mut alts = Vec::new();
        for t in ts {
            let e = match *t {
                "string" => self.string_value(tool, path, schema)?,
                "integer" => {
                    let (lo, hi) = int_bounds(schema);
                    match rx::integer_range(lo, hi) {
                        Some(r) => self.token(format!("/{r}/")),
                        None => continue,
                    }
                }
                "number" => {
                    let (lo, hi) = bounds(schema);
                    match rx::number_range(lo, hi) {
                        Some(r) => self.token(format!("/{r}/")),
                        None => continue,
                    }
                }
                "boolean" => "(\"true\" | \"false\")".to_string(),
                "null" => "\"null\"".to_string(),
                "object" | "array" if self.surface == Surface::Json => {
                    if *t == "object" {
                        self.json_object(tool, path, schema)?
                    } else {
                        self.json_array(tool, path, schema)?
                    }
                }
                other => {
                    return Err(unsupported(
                        tool,
                        path,
                        format!("type `{other}` as a DSL value"),
                    ))
                }
            };
            alts.push(e);
        }
        if alts.is_empty() {
            return Err(unsupported(tool, path, "numeric range admits no value"));
        }
        Ok(if alts.len() == 1 {
            alts.remove(0)
        } else {
            format!("({})", alts.join(" | "))
        })
    }

    pub(super) fn any_of(
        &mut self,
        tool: &str,
        path: &str,
        schema: &Value,
        any: &Value,
    ) -> R<String> {
        if self.surface == Surface::Dsl {
            return Err(unsupported(
                tool,
                path,
                "`anyOf` in the plan DSL (values are typed from one schema)",
            ));
        }
        let constraining = schema.as_object().is_some_and(|m| {
            m.keys().any(|k| {
                !matches!(
                    k.as_str(),
                    "anyOf" | "description" | "title" | "default" | "examples" | "$comment"
                )
            })
        });
        if constraining {
            return Err(unsupported(
                tool,
                path,
                "`anyOf` next to other constraining keywords",
            ));
        }
        let branches = any
            .as_array()
            .ok_or_else(|| unsupported(tool, path, "`anyOf` must be an array"))?;
        let mut alts = Vec::new();
        for b in branches {
            match self.value(tool, path, b) {
                Ok(e) => alts.push(e),
                Err(GenErr::Impossible) => {}
                Err(e) => return Err(e),
            }
        }
        if alts.is_empty() {
            return Err(if branches.is_empty() {
                unsupported(tool, path, "empty `anyOf`")
            } else {
                GenErr::Impossible
            });
        }
        Ok(format!("({})", alts.join(" | ")))
    }

    pub(super) fn enum_value(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let kept = self.enum_texts(tool, path, schema)?;
        let mut alts: Vec<String> = kept
            .iter()
            .map(|v| match (self.surface, v) {
                (Surface::Dsl, Value::String(s)) => lit(s),
                (Surface::Dsl, v) => lit(&v.to_string()),
                (Surface::Json, v) => lit(&v.to_string()),
            })
            .collect();
        alts.sort();
        alts.dedup();
        Ok(format!("({})", alts.join(" | ")))
    }

    /// The enum/const values representable (and typed back correctly) in this syntax.
    pub(super) fn enum_texts(&mut self, tool: &str, path: &str, schema: &Value) -> R<Vec<Value>> {
        let values: Vec<&Value> = match (schema.get("enum"), schema.get("const")) {
            (Some(Value::Array(a)), None) => a.iter().collect(),
            (None, Some(c)) => vec![c],
            (Some(Value::Array(a)), Some(c)) => a.iter().filter(|v| *v == c).collect(),
            _ => return Err(unsupported(tool, path, "`enum` must be an array")),
        };
        let ts = types(schema);
        // A value the schema's other keywords forbid (`pattern`, `minLength`, `maximum`, ...)
        // must not be emitted: the grammar is never looser than the validator. (Imported
        // catalogs are valid JSON Schema, so the validator compiles.)
        let validator = jsonschema::validator_for(schema).ok();
        let mut alts = Vec::new();
        for v in values {
            if validator.as_ref().is_some_and(|val| !val.is_valid(v)) {
                continue;
            }
            match self.surface {
                Surface::Dsl => {
                    let s = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
                        _ => continue,
                    };
                    if is_valid_dsl_value(&s)
                        && plansmith_core::validate::type_string(schema, &s) == *v
                    {
                        alts.push(v.clone());
                    }
                }
                Surface::Json => {
                    if json_type_ok(&ts, v) {
                        alts.push(v.clone());
                    }
                }
            }
        }
        if alts.is_empty() {
            return Err(unsupported(
                tool,
                path,
                "no `enum`/`const` value is representable in this syntax and valid under the schema",
            ));
        }
        Ok(alts)
    }

    /// An enum/const value the policy also wants copied: a copy span that must equal one of
    /// the values.
    pub(super) fn copy_enum(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let alts = self.enum_texts(tool, path, schema)?;
        let quoted = self.surface == Surface::Json && alts.iter().all(|v| v.is_string());
        let mut texts = Vec::new();
        for v in &alts {
            let t = match (v, self.surface) {
                (Value::String(s), Surface::Dsl) => s.clone(),
                (Value::String(s), Surface::Json) if quoted => rx::json_escape_body(s),
                (Value::Number(_), _) => v.to_string(),
                _ => continue,
            };
            texts.push(t);
        }
        if texts.is_empty() {
            return Err(unsupported(
                tool,
                path,
                "copy-from-request on an enum with no copyable value",
            ));
        }
        let max_len = texts.iter().map(String::len).max().unwrap_or(0);
        let regex = format!(
            "(?:{})",
            texts
                .iter()
                .map(|t| rx::escape_literal(t))
                .collect::<Vec<_>>()
                .join("|")
        );
        self.copy_hole(
            quoted,
            regex.clone(),
            HoleCheck::Regex {
                regex: SharedRegex::new(regex),
                max_len,
                quoted,
                numbers: false,
            },
        )
    }

    pub(super) fn lengths(
        &self,
        tool: &str,
        path: &str,
        schema: &Value,
    ) -> R<(usize, Option<usize>)> {
        let min = get_min(tool, path, schema, "minLength")?;
        let max = get_max(schema, "maxLength");
        let min = if self.surface == Surface::Dsl {
            min.max(1)
        } else {
            min
        };
        if max.is_some_and(|m| m < min) {
            return Err(unsupported(
                tool,
                path,
                "string length bounds admit no value in this syntax",
            ));
        }
        Ok((min, max))
    }

    pub(super) fn string_value(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let (min, max) = self.lengths(tool, path, schema)?;
        let mut shapes = Vec::new();
        if let Some(p) = schema.get("pattern") {
            let p = p
                .as_str()
                .ok_or_else(|| unsupported(tool, path, "`pattern` must be a string"))?;
            shapes.push(rx::anchored_pattern(p));
        }
        if let Some(f) = schema.get("format") {
            let f = f.as_str().unwrap_or("");
            let r = rx::format_regex(f)
                .ok_or_else(|| unsupported(tool, path, format!("string format `{f}`")))?;
            shapes.push(format!("(?:{r})"));
        }
        // The value's characters in this syntax: no separators in the DSL; no escapes in a
        // shaped JSON string (so raw text == decoded text and the shape applies to it).
        let chars = match self.surface {
            Surface::Dsl => format!("{DSL_SAFE}{}", repeat(min, max)),
            Surface::Json => format!("[^\"\\\\\\x00-\\x1F]{}", repeat(min, max)),
        };
        if !shapes.is_empty() && !admits_some_string(&chars, &shapes) {
            // e.g. a pattern that needs a `"`, a control character or a DSL separator: the
            // grammar would offer the key and then die inside its value (found by fuzzing).
            return Err(unsupported(
                tool,
                path,
                "`pattern`/`format` admits no value writable in this syntax (it needs characters the syntax escapes or reserves)",
            ));
        }
        let body = match self.surface {
            Surface::Dsl => {
                let mut parts = vec![format!("/{DSL_SAFE}{}/", repeat(min, max))];
                parts.extend(shapes.iter().map(|s| format!("/{s}/")));
                parts.join(" & ")
            }
            Surface::Json if shapes.is_empty() => format!("/\"{JSON_CHAR}{}\"/", repeat(min, max)),
            Surface::Json => {
                // shaped strings carry no escapes, so raw text == decoded text
                let mut parts = vec![format!("/\"[^\"\\\\\\x00-\\x1F]{}\"/", repeat(min, max))];
                parts.extend(shapes.iter().map(|s| format!("/\"{s}\"/")));
                parts.join(" & ")
            }
        };
        Ok(self.token(body))
    }

    pub(super) fn copy_value(
        &mut self,
        tool: &str,
        path: &str,
        schema: &Value,
        ty: &str,
    ) -> R<String> {
        let quoted = self.surface == Surface::Json && ty == "string";
        let conj: (String, HoleCheck) = match ty {
            "integer" => {
                let (lo, hi) = int_bounds(schema);
                let r = rx::integer_range(lo, hi)
                    .ok_or_else(|| unsupported(tool, path, "numeric range admits no value"))?;
                return self.copy_hole(
                    quoted,
                    r.clone(),
                    HoleCheck::Regex {
                        regex: SharedRegex::new(r),
                        max_len: 24,
                        quoted: false,
                        numbers: true,
                    },
                );
            }
            "number" => {
                let (lo, hi) = bounds(schema);
                let r = rx::number_range(lo, hi)
                    .ok_or_else(|| unsupported(tool, path, "numeric range admits no value"))?;
                return self.copy_hole(
                    quoted,
                    r.clone(),
                    HoleCheck::Regex {
                        regex: SharedRegex::new(r),
                        max_len: 24,
                        quoted: false,
                        numbers: true,
                    },
                );
            }
            _ => {
                if schema.get("pattern").is_some() || schema.get("format").is_some() {
                    return Err(unsupported(
                        tool,
                        path,
                        "copy-from-request on a string with `pattern`/`format`",
                    ));
                }
                let (min, max) = self.lengths(tool, path, schema)?;
                let min = min.max(1);
                let check = HoleCheck::Str {
                    dsl: self.surface == Surface::Dsl,
                    min,
                    max,
                };
                let conj = match self.surface {
                    Surface::Dsl => rx::edged_repeat(DSL_SAFE, DSL_SAFE_NON_SPACE, min, max),
                    Surface::Json => rx::edged_repeat(JSON_CHAR, rx::JSON_NON_SPACE, min, max),
                };
                (conj, check)
            }
        };
        self.copy_hole(quoted, conj.0, conj.1)
    }

    // ---------------------------------------------------------------- JSON containers

    pub(super) fn json_object(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        if let Some(ent_types) = entity_ref_types(schema) {
            return self.entity(tool, path, schema, &ent_types, None);
        }
        self.object_like(tool, path, schema, None)
    }

    pub(super) fn json_array(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let items = schema
            .get("items")
            .ok_or_else(|| unsupported(tool, path, "array without `items`"))?;
        let min = get_min(tool, path, schema, "minItems")?;
        let item = match self.value(tool, path, items) {
            Ok(i) => i,
            Err(GenErr::Impossible) if min == 0 => return Ok("\"[\" \"]\"".into()),
            Err(e) => return Err(e),
        };
        let item = if item.contains(' ') {
            self.rule("it", &item)
        } else {
            item
        };
        let max = get_max(schema, "maxItems");
        if max.is_some_and(|m| m < min) {
            return Err(unsupported(tool, path, "minItems > maxItems"));
        }
        if max == Some(0) {
            return Ok("\"[\" \"]\"".into());
        }
        let more_min = min.saturating_sub(1);
        let more_max = max.map(|m| m - 1);
        let rest = match (more_min, more_max) {
            (_, Some(0)) => String::new(),
            (m, x) => format!("(COMMA {item}){}", repeat(m, x)),
        };
        let inner = format!("{item} {rest}").trim().to_string();
        Ok(if min == 0 {
            format!("\"[\" [{inner}] \"]\"")
        } else {
            format!("\"[\" {inner} \"]\"")
        })
    }

    /// EntityRef objects: one branch per entity type, whose label is an entity hole (or, when
    /// generating for one request whose copy spans cannot produce a label, the visible labels
    /// themselves, or no branch). `dsl_prefix`: the dotted key prefix in the DSL.
    pub(super) fn entity(
        &mut self,
        tool: &str,
        path: &str,
        schema: &Value,
        ent_types: &[String],
        dsl_prefix: Option<&str>,
    ) -> R<String> {
        let label_schema = &schema["properties"]["label"];
        let label_path = join_path(path, "label");
        let fallback = match self.value(tool, &label_path, label_schema) {
            Ok(e) => Some(e),
            Err(GenErr::Impossible) => None,
            Err(e) => return Err(e),
        };
        let copy = self.policy.requires_copy(tool, &label_path, label_schema);
        let (min_len, max_len) = self.lengths(tool, &label_path, label_schema)?;
        let type_required = schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|v| v == "type"));
        let quoted = self.surface == Surface::Json;
        let mut alts = Vec::new();
        for t in ent_types {
            let hole = EntityHole {
                quoted,
                entity_type: t.clone(),
                fallback: fallback.clone().unwrap_or_default(),
                copy,
                min_len,
                max_len,
            };
            let label = if fallback.is_some() {
                self.entity_hole(hole)
            } else {
                let labels = self
                    .request
                    .map(|(r, unit)| hole.labels(r, unit))
                    .unwrap_or_default();
                if labels.is_empty() {
                    continue;
                }
                format!("({})", hole.alternatives(&labels))
            };
            let mut branch = schema.clone();
            branch["properties"]["type"] = serde_json::json!({"type": "string", "const": t});
            match self.entity_branch(tool, path, &branch, Some(("label", label)), dsl_prefix) {
                Ok(e) => alts.push(e),
                Err(GenErr::Impossible) => {}
                Err(e) => return Err(e),
            }
        }
        if !type_required {
            let mut branch = schema.clone();
            if let Some(p) = branch["properties"].as_object_mut() {
                p.remove("type");
            }
            match self.entity_branch(tool, path, &branch, None, dsl_prefix) {
                Ok(e) => alts.push(e),
                Err(GenErr::Impossible) => {}
                Err(e) => return Err(e),
            }
        }
        if alts.is_empty() {
            return Err(GenErr::Impossible);
        }
        Ok(match dsl_prefix {
            Some(_) => self.rule("ent_obj", &alts.join(" | ")),
            None => format!("({})", alts.join(" | ")),
        })
    }

    pub(super) fn entity_branch(
        &mut self,
        tool: &str,
        path: &str,
        branch: &Value,
        ov: Option<(&str, String)>,
        dsl_prefix: Option<&str>,
    ) -> R<String> {
        match dsl_prefix {
            None => self.object_like(tool, path, branch, ov),
            Some(prefix) => match self.object_body(tool, path, prefix, branch, ov)? {
                (Some(ne), _) => Ok(ne),
                (None, _) => Err(GenErr::Impossible),
            },
        }
    }

    /// A JSON object with an optional value override for one property.
    pub(super) fn object_like(
        &mut self,
        tool: &str,
        path: &str,
        schema: &Value,
        ov: Option<(&str, String)>,
    ) -> R<String> {
        let body = self.object_body(tool, path, "", schema, ov)?;
        Ok(match body {
            (Some(ne), true) => format!("\"{{\" [{ne}] \"}}\""),
            (Some(ne), false) => format!("\"{{\" {ne} \"}}\""),
            (None, _) => "\"{\" \"}\"".to_string(),
        })
    }

    /// Pairs of an object's properties in schema order. `key_prefix` is the DSL dotted prefix.
    /// Returns (non-empty sequence, empty allowed).
    pub(super) fn object_body(
        &mut self,
        tool: &str,
        path: &str,
        key_prefix: &str,
        schema: &Value,
        ov: Option<(&str, String)>,
    ) -> R<(Option<String>, bool)> {
        let mut props = match schema.get("properties") {
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(unsupported(tool, path, "`properties` must be an object")),
            None => serde_json::Map::new(),
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // A required key with no schema in `properties` may hold any value (JSON Schema's
        // reading; BFCL has such `dict`s): it gets the empty schema, after the listed keys.
        for missing in &required {
            if !props.contains_key(*missing) {
                props.insert(missing.to_string(), Value::Object(serde_json::Map::new()));
            }
        }
        let mut segs = Vec::new();
        for (k, sub) in &props {
            let req = required.contains(&k.as_str());
            let child_path = join_path(path, k);
            let seg = match self.surface {
                Surface::Json => {
                    let v = match &ov {
                        Some((name, e)) if *name == k => Ok(e.clone()),
                        _ => self.value(tool, &child_path, sub),
                    };
                    let key = lit(&serde_json::to_string(k).unwrap_or_default());
                    v.map(|v| Some(format!("{key} COLON {v}")))
                }
                Surface::Dsl => {
                    let key = format!("{key_prefix}{k}");
                    match &ov {
                        Some((name, e)) if *name == k => Ok(Some(self.dsl_pair(tool, &key, e))),
                        _ => self.dsl_segment(tool, &child_path, &key, sub),
                    }
                }
            };
            let seg = match seg {
                Ok(s) => s,
                Err(GenErr::Impossible) if !req => None,
                Err(e) => return Err(e),
            };
            match seg {
                Some(s) => {
                    let s = if s.contains('|') {
                        self.rule("kv", &s)
                    } else {
                        s
                    };
                    segs.push((s, req));
                }
                None if req && self.impossible.is_empty() => {
                    return Err(unsupported(
                        tool,
                        &child_path,
                        "required value cannot be written in the DSL (empty object or array)",
                    ))
                }
                None if req => return Err(GenErr::Impossible),
                None => {}
            }
        }
        if segs.is_empty() {
            return Ok((None, true));
        }
        let (ne, allow_empty) = self.sequence(&segs);
        Ok((ne, allow_empty))
    }

    // ---------------------------------------------------------------- DSL segments

    /// The DSL pairs for `key` (non-empty), or None if nothing can be written for it.
    pub(super) fn dsl_segment(
        &mut self,
        tool: &str,
        path: &str,
        key: &str,
        schema: &Value,
    ) -> R<Option<String>> {
        let ts = types(schema);
        let is_object = ts == ["object"] || (ts.is_empty() && schema.get("properties").is_some());
        if is_object {
            if schema.get("anyOf").is_some() {
                return Err(unsupported(tool, path, "`anyOf` in the plan DSL"));
            }
            if let Some(ent) = entity_ref_types(schema) {
                let prefix = format!("{key}.");
                return self
                    .entity(tool, path, schema, &ent, Some(&prefix))
                    .map(Some);
            }
            let prefix = format!("{key}.");
            return Ok(self.object_body(tool, path, &prefix, schema, None)?.0);
        }
        if ts == ["array"] {
            return self.dsl_array(tool, path, key, schema);
        }
        if ts.iter().any(|t| *t == "object" || *t == "array") {
            return Err(unsupported(
                tool,
                path,
                "a type union with object/array in the plan DSL",
            ));
        }
        let v = self.value(tool, path, schema)?;
        Ok(Some(self.dsl_pair(tool, key, &v)))
    }

    pub(super) fn dsl_array(
        &mut self,
        tool: &str,
        path: &str,
        key: &str,
        schema: &Value,
    ) -> R<Option<String>> {
        let items = schema
            .get("items")
            .ok_or_else(|| unsupported(tool, path, "array without `items`"))?;
        let min = get_min(tool, path, schema, "minItems")?.max(1);
        let cap = get_max(schema, "maxItems")
            .unwrap_or(DSL_ARRAY_CAP)
            .min(DSL_ARRAY_CAP.max(min));
        if cap == 0 {
            return Ok(None);
        }
        if min > cap {
            return Err(unsupported(tool, path, "minItems > maxItems"));
        }
        let mut segs = Vec::with_capacity(cap);
        for i in 0..cap {
            match self.dsl_segment(tool, path, &format!("{key}.{i}"), items)? {
                Some(s) => segs.push(if s.contains('|') {
                    self.rule("el", &s)
                } else {
                    s
                }),
                None => return Ok(None),
            }
        }
        // item_0 ("; " item_1 ("; " item_2 ...)?)? with the first `min` mandatory
        let mut expr = segs[cap - 1].clone();
        for i in (0..cap - 1).rev() {
            let inner = if cap - i > 3 {
                self.rule("ar", &expr)
            } else {
                expr
            };
            expr = if i + 1 < min {
                format!("{} \"; \" {inner}", segs[i])
            } else {
                format!("{} (\"; \" {inner})?", segs[i])
            };
        }
        Ok(Some(expr))
    }
}
