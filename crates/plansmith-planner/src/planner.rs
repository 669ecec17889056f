//! The planner: constrained greedy decoding of a language model (a tiny GPT or a pretrained
//! Llama-family model, see [`crate::backend`]), then parse, validate and gate.
//! Only verified plans leave: anything below the floor, dead-ended or invalid escalates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plansmith_core::trace::TraceWriter;
use plansmith_core::validate::PlanValidator;
use plansmith_core::{Call, Catalog, Plan, Syntax, Trace, TraceSource};
use plansmith_grammar::{Engine, Options, Request, ToolChoice};
use plansmith_lm::{AnyCodec, Sampler, TinyGpt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::backend::{ModelBackend, Persisted, Started};
use crate::error::PlannerError;
use crate::remote::{EngineConstraint, Form, RemoteEngine, RemoteLm, MAX_REPLY_TOKENS};
use crate::settings::{ConfidenceMode, PlannerMeta, PlannerSettings};
use crate::teacher::Teacher;
use crate::tiny::TinyLm;
use crate::{pointers, prior, prompt};

mod follow;
mod tally;

use tally::Tally;

/// Where the emitted plan came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Model,
    Teacher,
    /// Escalated, but there was no teacher (or it failed): no plan is emitted.
    None,
}

/// The result of planning one request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub calls: Vec<Call>,
    pub spoken_text: Option<String>,
    pub confidence: f32,
    pub escalated: bool,
    pub source: Source,
    /// The model's completion (a pointer planner's with its pointers replaced by tool names).
    pub text: String,
    /// Why the plan escalated, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The model was still writing at its token budget and was steered to close (through
    /// closing tokens, so the plan still parses and validates): its last value is cut off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    #[serde(with = "duration_ms")]
    pub latency: Duration,
    /// In a cascade: the hop whose model answered, or `teacher`; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<String>,
    /// In a cascade: every hop that decoded this request, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<HopReport>,
    /// With a remote backend: the engine's own time (its HTTP round trip) within `latency`.
    #[serde(
        default,
        rename = "engine_ms",
        skip_serializing_if = "Option::is_none",
        with = "opt_duration_ms"
    )]
    pub engine: Option<Duration>,
    /// Tokens of prompt the answering model read, tools prompt included (absent when no local
    /// model read one: a remote engine's, or a request that never reached a model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
}

/// One draw of [`Planner::sample`]: its text, and its plan and score when it is valid.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub text: String,
    pub plan: Option<Plan>,
    pub score: Option<f32>,
    pub violations: Vec<String>,
}

/// What one hop of a cascade made of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopReport {
    pub hop: String,
    pub confidence: f32,
    pub floor: f32,
    pub accepted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(rename = "latency_ms", with = "duration_ms")]
    pub latency: Duration,
}

mod opt_duration_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64() * 1e3),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1e3)))
    }
}

mod duration_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_secs_f64(f64::deserialize(d)?.max(0.0) / 1e3))
    }
}

/// What one constrained (or free) decode produced, before the gate.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The completion (a pointer planner's with its pointers replaced by tool names, when it
    /// parsed).
    pub text: String,
    /// Parsed, typed plan (None if the text did not parse).
    pub plan: Option<Plan>,
    /// Validation problems of `plan` (empty when valid).
    pub violations: Vec<String>,
    /// A constraint dead end or context overflow.
    pub dead: Option<String>,
    pub conf_all: f32,
    pub conf_chosen: f32,
    /// The lowest log-prob of any reply token (0 for an empty reply).
    pub conf_weakest: f32,
    pub forced_tokens: usize,
    pub chosen_tokens: usize,
    /// The reply hit the token budget and was steered to close early: valid, but not what
    /// the model would have said.
    pub truncated: bool,
    /// With a remote backend: the engine's own time.
    pub engine_time: Option<Duration>,
    /// Tokens of prompt the model read (tools prompt and request; 0 when it read none).
    pub prompt_tokens: usize,
}

impl Decoded {
    pub fn is_valid(&self) -> bool {
        self.plan.is_some() && self.violations.is_empty() && self.dead.is_none()
    }

    pub fn confidence(&self, mode: ConfidenceMode) -> f32 {
        match mode {
            ConfidenceMode::AllTokens => self.conf_all,
            ConfidenceMode::ChosenTokens => self.conf_chosen,
            ConfidenceMode::WeakestToken => self.conf_weakest,
        }
    }
}

/// A given plan judged by a planner ([`Planner::judge_given`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GivenPlan {
    /// The planner's confidence writing it, comparable with its floor; `None` when its
    /// grammar does not write the plan.
    pub score: Option<f32>,
    /// Why there is no score.
    pub unscored: Option<String>,
    pub violations: Vec<String>,
}

impl GivenPlan {
    /// Whether the gate would let this plan through at `floor`.
    pub fn would_accept(&self, floor: f32) -> bool {
        self.violations.is_empty() && self.score.is_some_and(|s| s >= floor)
    }
}

/// Per-request knobs the server exposes (OpenAI `tool_choice`, `parallel_tool_calls`, visible
/// entities, a per-request catalog).
#[derive(Debug, Clone, Default)]
pub struct PlanRequest {
    pub text: String,
    pub catalog: Option<Arc<Catalog>>,
    pub tool_choice: ToolChoice,
    pub max_calls: Option<usize>,
    pub entities: Vec<plansmith_grammar::Entity>,
    /// At most this many reply tokens (capped by the model's own budget). A reply still
    /// writing at the budget is closed early and escalates as cut off.
    pub max_tokens: Option<usize>,
    /// Decoding stops here and the request escalates: no request holds a worker past it.
    pub deadline: Option<Instant>,
}

impl PlanRequest {
    pub fn new(text: impl Into<String>) -> Self {
        PlanRequest {
            text: text.into(),
            ..Default::default()
        }
    }
}

/// Counters behind [`Planner::report`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    pub requests: u64,
    pub escalated: u64,
    pub harvested_traces: u64,
    pub teacher_failures: u64,
    pub prefix_cache_hits: u64,
    pub prefix_cache_misses: u64,
    /// Requests whose plan this planner's own model gave (not escalated).
    #[serde(default)]
    pub answered: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub requests: u64,
    pub escalated: u64,
    pub escalation_rate: f64,
    pub harvested_traces: u64,
    pub teacher_failures: u64,
    /// Agreement on the planner's held-out test split, measured when it was trained.
    pub plan_agreement: Option<f64>,
}

struct Catalogs {
    validators: HashMap<String, Arc<PlanValidator>>,
}

/// A planner: model + catalog + policy + floor (+ teacher + harvest).
pub struct Planner {
    pub lm: Box<dyn ModelBackend>,
    pub catalog: Arc<Catalog>,
    /// `catalog.hash()`, computed once: every request against the default catalog keys the
    /// grammar, validator and prefix caches with it.
    catalog_hash: String,
    pub settings: PlannerSettings,
    pub meta: PlannerMeta,
    engine: Engine,
    eos: u32,
    /// The model's other end tokens (`ModelBackend::end_ids` without `eos`): where the grammar
    /// allows the end, `eos` takes the best logit among them and itself.
    other_ends: Vec<u32>,
    /// Tokens made only of closing characters, with the rank of their first one in
    /// [`CLOSING`].
    closers: Vec<(u32, usize)>,
    catalogs: Mutex<Catalogs>,
    teacher: Option<Box<dyn Teacher>>,
    harvest: Option<Mutex<TraceWriter>>,
    counters: Mutex<Counters>,
    /// In a cascade: this hop's name, and the hop its escalations go to before any teacher.
    hop: Option<String>,
    next: Option<Box<Planner>>,
    /// In a cascade: a plan this hop accepts leaves only if the next hop would accept it too
    /// (its score of the plan at or above its floor); otherwise the request goes on to it.
    confirmed_by_next: bool,
    /// The engine that runs this planner's model, when it is remote ([`crate::remote`]).
    remote: Option<Remote>,
}

/// A remote engine and what its requests reuse per catalog: the system message and, for
/// JSON-Schema engines, the plan schema (the Lark grammar is the engine cache's template).
struct Remote {
    engine: RemoteEngine,
    by_catalog: Mutex<HashMap<(String, Options), Arc<PerCatalog>>>,
}

/// The system message, and the plan's JSON Schema for engines that take one.
type PerCatalog = (String, Option<Value>);

impl Planner {
    /// A tiny-GPT planner.
    pub fn new(
        model: TinyGpt,
        codec: AnyCodec,
        catalog: Catalog,
        settings: PlannerSettings,
        meta: PlannerMeta,
    ) -> Result<Planner, PlannerError> {
        Planner::with_lm(
            Box::new(TinyLm::new(model, codec)?),
            catalog,
            settings,
            meta,
        )
    }

    /// A planner over any backend.
    pub fn with_lm(
        lm: Box<dyn ModelBackend>,
        catalog: Catalog,
        settings: PlannerSettings,
        meta: PlannerMeta,
    ) -> Result<Planner, PlannerError> {
        let env = lm.tok_env()?;
        let closers: Vec<(u32, usize)> = (0..env.vocab_size() as u32)
            .filter_map(|id| {
                let b = env.token_bytes(id);
                let rank = CLOSING.iter().position(|c| Some(c) == b.first())?;
                b.iter().all(|c| CLOSING.contains(c)).then_some((id, rank))
            })
            .collect();
        let engine = Engine::new(env).map_err(PlannerError::from)?;
        let catalog_hash = catalog.hash();
        let catalog = Arc::new(catalog);
        let planner = Planner {
            catalog_hash: catalog_hash.clone(),
            eos: lm.grammar_eos(),
            other_ends: lm
                .end_ids()
                .into_iter()
                .filter(|&id| id != lm.grammar_eos())
                .collect(),
            closers,
            lm,
            catalog: catalog.clone(),
            settings,
            meta,
            engine,
            catalogs: Mutex::new(Catalogs {
                validators: HashMap::new(),
            }),
            teacher: None,
            harvest: None,
            counters: Mutex::new(Counters::default()),
            hop: None,
            next: None,
            confirmed_by_next: false,
            remote: None,
        };
        // Compile the default catalog's validator and grammar now, not on the first request.
        let grammar_catalog = planner.grammar_catalog(&catalog);
        planner.validator(&catalog_hash, &grammar_catalog)?;
        planner
            .engine
            .prepare_hashed(
                &catalog_hash,
                &grammar_catalog,
                &planner.decode_options(ToolChoice::Auto, None, ""),
            )
            .map_err(PlannerError::from)?;
        Ok(planner)
    }

    /// A planner whose model runs on `engine` ([`crate::remote`]): the catalog's constraint
    /// is sent in the form that engine enforces; its reply is gated here like a local one.
    pub fn remote(
        engine: RemoteEngine,
        catalog: Catalog,
        settings: PlannerSettings,
    ) -> Result<Planner, PlannerError> {
        if engine.spec().dialect.form() == Form::JsonSchema && settings.syntax != Syntax::JsonArray
        {
            return Err(PlannerError::Data(format!(
                "{} takes JSON Schema constraints, which exist for the json syntax only",
                engine.describe()
            )));
        }
        let lm = Box::new(RemoteLm::new(&engine));
        let mut planner = Planner::with_lm(lm, catalog, settings, PlannerMeta::default())?;
        planner.remote = Some(Remote {
            engine,
            by_catalog: Mutex::new(HashMap::new()),
        });
        Ok(planner)
    }

    /// The remote engine this planner's model runs on, if any.
    pub fn remote_engine(&self) -> Option<&RemoteEngine> {
        self.remote.as_ref().map(|r| &r.engine)
    }

    pub fn with_teacher(mut self, teacher: Box<dyn Teacher>) -> Self {
        self.teacher = Some(teacher);
        self
    }

    /// Name this planner as a cascade hop: its outcomes then say which hop answered and
    /// report every hop's confidence and floor.
    pub fn named_hop(mut self, name: impl Into<String>) -> Self {
        self.hop = Some(name.into());
        self
    }

    /// Send what this planner escalates to `next` (a named hop) before any teacher of its own.
    pub fn with_next_hop(mut self, next: Planner) -> Self {
        self.next = Some(Box::new(next));
        self
    }

    /// Let a plan this hop accepts leave only when the next hop would accept it too: two
    /// models that read a request differently rarely agree on the same wrong plan, so a fast
    /// hop that is confidently wrong on phrasing it never saw is caught by a slower one that
    /// reads it, at the cost of the next hop scoring every accepted plan (one forward over the
    /// request and the plan, not a decode).
    pub fn confirmed_by_next(mut self) -> Self {
        self.confirmed_by_next = true;
        self
    }

    /// This planner and the hops after it, in order.
    pub fn hops(&self) -> Vec<&Planner> {
        let mut out = vec![self];
        while let Some(next) = &out[out.len() - 1].next {
            out.push(next);
        }
        out
    }

    /// Whether escalations end at a teacher here.
    pub fn has_teacher(&self) -> bool {
        self.teacher.is_some()
    }

    /// Whether a teacher's answers are harvested: by this planner, or in a cascade by its
    /// last hop (which holds the teacher).
    pub fn harvests(&self) -> bool {
        self.hops().last().is_some_and(|h| h.harvest.is_some())
    }

    /// The hop name, when this planner is part of a cascade.
    pub fn hop_name(&self) -> Option<&str> {
        self.hop.as_deref()
    }

    pub fn with_harvest(mut self, path: &std::path::Path) -> Result<Self, PlannerError> {
        self.harvest = Some(Mutex::new(TraceWriter::open(path)?));
        Ok(self)
    }

    pub fn set_floor(&mut self, floor: f32) {
        self.settings.conf_floor = floor;
    }

    /// Set the name-prior correction's weight ([`PlannerSettings::name_prior`]).
    pub fn set_name_prior(&mut self, weight: f32) {
        self.settings.name_prior = weight;
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The tiny GPT and its codec, for tiny planners.
    pub fn tiny(&self) -> Option<(&TinyGpt, &AnyCodec)> {
        match self.lm.persisted() {
            Persisted::Tiny { model, codec } => Some((model, codec)),
            Persisted::Pretrained { .. } | Persisted::Remote { .. } => None,
        }
    }

    /// Tokens `text` takes in the model's vocabulary.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.lm.count_tokens(text)
    }

    pub fn counters(&self) -> Counters {
        self.counters.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The grammar's options for a request decoded here, by this planner's model
    /// (`request_text`, cleaned): [`Planner::options`] with a JSON array bounded to the calls the
    /// request has clauses for. A pretrained model that goes on after its call (SmolLM2 repeats
    /// an item until the token budget closes the array) is otherwise turned into extra calls by
    /// the grammar. The `<tool_call>` surface applies the same bound in the decode loop, where
    /// the model also weighs ending. (The grammar cache is keyed by the options: a handful of
    /// bounds per catalog.) A remote engine's model gets the unbounded options.
    fn decode_options(
        &self,
        tool_choice: ToolChoice,
        max_calls: Option<usize>,
        request_text: &str,
    ) -> Options {
        let mut options = self.options(tool_choice, max_calls);
        if self.settings.syntax == Syntax::JsonArray {
            options.max_calls = options
                .max_calls
                .min(calls_the_request_can_ask_for(request_text));
        }
        options
    }

    fn options(&self, tool_choice: ToolChoice, max_calls: Option<usize>) -> Options {
        let mut max_calls = max_calls.unwrap_or(self.settings.max_calls).max(1);
        // A planner whose vocabulary cannot spell the DSL's call separator can emit one call
        // only; offering more would let decoding walk into a dead end.
        if self.settings.syntax == Syntax::Dsl && !self.lm.can_spell("|") {
            max_calls = 1;
        }
        Options {
            syntax: self.settings.syntax,
            policy: self.settings.policy.clone(),
            tool_choice,
            max_calls,
        }
    }

    /// The catalog the grammar and validator see: a pointer planner's names its tools `t0`,
    /// `t1`, ... (one-to-one with `catalog`, so caches keyed by `catalog`'s hash stay right).
    fn grammar_catalog<'a>(&self, catalog: &'a Catalog) -> std::borrow::Cow<'a, Catalog> {
        if self.settings.tool_pointers {
            std::borrow::Cow::Owned(pointers::pointer_catalog(catalog))
        } else {
            std::borrow::Cow::Borrowed(catalog)
        }
    }

    /// The catalog a request plans against, with its hash (the default's is precomputed).
    fn catalog_and_hash(&self, requested: Option<&Arc<Catalog>>) -> (Arc<Catalog>, String) {
        match requested {
            Some(c) => (c.clone(), c.hash()),
            None => (self.catalog.clone(), self.catalog_hash.clone()),
        }
    }

    fn validator(&self, hash: &str, catalog: &Catalog) -> Result<Arc<PlanValidator>, PlannerError> {
        let mut cats = self.catalogs.lock().map_err(|_| PlannerError::Poisoned)?;
        if let Some(v) = cats.validators.get(hash) {
            return Ok(v.clone());
        }
        let v = Arc::new(PlanValidator::new(catalog)?);
        if cats.validators.len() > 64 {
            cats.validators.clear();
        }
        cats.validators.insert(hash.to_string(), v.clone());
        Ok(v)
    }

    fn bump(&self, f: impl FnOnce(&mut Counters)) {
        if let Ok(mut c) = self.counters.lock() {
            f(&mut c);
        }
    }

    /// Whether `catalog` (None: the planner's own) leaves this planner's context any room for
    /// a request: [`PlannerError::CatalogTooLong`] when its tools line fills it. A server checks its
    /// catalog once at start instead of failing every request.
    pub fn check_catalog(&self, catalog: Option<&Arc<Catalog>>) -> Result<(), PlannerError> {
        let (catalog, hash) = self.catalog_and_hash(catalog);
        self.lm
            .check_catalog(&catalog, &hash, prompt::CatalogText::of(&self.settings))
    }

    /// Forget every compiled grammar and validator (benchmarks time their compilation).
    pub fn clear_caches(&self) {
        self.engine.clear_cache();
        if let Ok(mut c) = self.catalogs.lock() {
            c.validators.clear();
        }
    }

    /// Compile (and cache, by catalog hash) the validator and grammar a request against
    /// `catalog` needs, so the first such request does not pay for them.
    pub fn prepare_catalog(&self, catalog: &Arc<Catalog>) -> Result<(), PlannerError> {
        let hash = catalog.hash();
        let grammar_catalog = self.grammar_catalog(catalog);
        self.validator(&hash, &grammar_catalog)?;
        self.engine.prepare_hashed(
            &hash,
            &grammar_catalog,
            // a request of one clause, the usual one (a JSON array's bound follows the request)
            &self.decode_options(ToolChoice::Auto, None, ""),
        )?;
        Ok(())
    }

    /// Constrained greedy decode of one request (no gate, no teacher).
    pub fn decode(&self, req: &PlanRequest) -> Result<Decoded, PlannerError> {
        if req.deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(dead_end("deadline reached before decoding began".into()));
        }
        if let Some(remote) = &self.remote {
            return self.decode_remote(remote, req);
        }
        let (catalog, hash) = self.catalog_and_hash(req.catalog.as_ref());
        let grammar_catalog = self.grammar_catalog(&catalog);
        let tool_choice = match &req.tool_choice {
            ToolChoice::Named(name) if self.settings.tool_pointers => {
                match catalog.tools.iter().position(|t| &t.name == name) {
                    Some(i) => ToolChoice::Named(pointers::pointer(i)),
                    None => req.tool_choice.clone(),
                }
            }
            other => other.clone(),
        };
        let request_text = prompt::clean_request(&req.text);
        let options = self.decode_options(tool_choice, req.max_calls, &request_text);
        let grammar_request = Request {
            text: request_text.clone(),
            entities: req.entities.clone(),
        };
        let prepared = self
            .engine
            .prepare_hashed(&hash, &grammar_catalog, &options)?;
        // The prompt goes first: a request too long for the model is a dead end, and building
        // its per-request constraint (copy spans over the whole request) would only waste time.
        let (mut state, mut logits, prompt_tokens) = match self.lm.start(
            &catalog,
            &hash,
            &request_text,
            prompt::CatalogText::of(&self.settings),
        )? {
            Started::Ready {
                state,
                logits,
                prefix_hit,
                prompt_tokens,
            } => {
                match prefix_hit {
                    Some(true) => self.bump(|c| c.prefix_cache_hits += 1),
                    Some(false) => self.bump(|c| c.prefix_cache_misses += 1),
                    None => {}
                }
                (state, logits, prompt_tokens)
            }
            Started::Overflow(reason) => return Ok(dead_end(reason)),
        };
        // What the prompt (tools line and request) left for the reply, for the dead-end reason.
        let out_of_context = format!(
            "ran out of context: the prompt left {} tokens for the reply (fewer tools or a \
             shorter request leave more)",
            state.room()
        );
        let mut prior = self.name_prior(&catalog, &hash, &options.tool_choice)?;
        let mut constraint = match self.engine.constraint_for(&prepared, &grammar_request) {
            Ok(c) => c,
            // The request itself rules out every call it must make: a dead end to escalate,
            // as for any request the model cannot answer, not a server fault.
            Err(e @ plansmith_grammar::GrammarError::NoCallableTool) => {
                return Ok(dead_end(e.to_string()))
            }
            Err(e) => return Err(e.into()),
        };
        let mut tally = Tally::default();
        let max_new = req.max_tokens.map_or(self.lm.max_new_tokens(), |m| {
            m.min(self.lm.max_new_tokens())
        });
        let mut truncated = false;
        // Set once the reply repeats a call it already made: from then on it is steered to its
        // end, and the repeat is dropped when the reply is read (`drop_repeated_calls`).
        let mut repeated = false;
        let mut out_ids: Vec<u32> = Vec::new();
        let mut dead = None;
        let calls_asked_for = calls_the_request_can_ask_for(&request_text);
        // `<tool_call>` blocks closed so far (the reply's text is read after each chosen token).
        let mut calls_closed = 0;
        loop {
            if constraint.is_stopped() {
                break;
            }
            if req.deadline.is_some_and(|d| Instant::now() >= d) {
                dead = Some(format!(
                    "deadline reached after {} reply tokens",
                    out_ids.len()
                ));
                break;
            }
            // Fast-forward skips the model for bytes the grammar forces. It is exact only when
            // the vocabulary spells those bytes one way; with sub-word pieces the greedy split
            // is often not the model's own and costs accuracy (0.924 vs 0.972 on Pace), so
            // such planners let the model pick every token under the mask instead.
            let forced: Vec<u32> = (if self.lm.fast_forward() {
                constraint.forced_tokens()
            } else {
                Vec::new()
            })
            .into_iter()
            .take_while(|&t| t != self.eos)
            .collect();
            if !forced.is_empty() {
                if forced.len() > state.room() {
                    dead = Some(out_of_context);
                    break;
                }
                if let Err(d) = constraint.commit_all(&forced) {
                    dead = Some(d.reason);
                    break;
                }
                // Feed all forced tokens in one forward; their log-probs come from the rows.
                let rows = state.feed(&forced)?;
                let mut prev = std::mem::take(&mut logits);
                for (i, &t) in forced.iter().enumerate() {
                    tally.forced(log_prob(&prev, t));
                    prev = rows[i].clone();
                }
                logits = prev;
                out_ids.extend_from_slice(&forced);
                prior::follow(&mut prior, self.settings.syntax, &forced, || {
                    constraint.output_text()
                })?;
                if self.settings.syntax == Syntax::ToolCall {
                    calls_closed = closed_tool_calls(&constraint.output_text());
                }
                continue;
            }
            let mask = match constraint.mask() {
                Ok(m) => m,
                Err(d) => {
                    dead = Some(d.reason);
                    break;
                }
            };
            let allowed = mask.count();
            if allowed == 0 {
                dead = Some("no token is allowed".into());
                break;
            }
            if allowed == 1 && mask.is_allowed(self.eos) {
                break;
            }
            if mask.is_allowed(self.eos) {
                end_with_best_stop(&mut logits, self.eos, &self.other_ends);
            }
            // A prose reply (the `<tool_call>` surface's "no call") only where the model itself
            // starts in prose: a model about to open a code fence would otherwise be pushed into
            // prose rather than into a call (measured: Qwen2.5-Coder-0.5B's BFCL `multiple` fell
            // from 68% to 6% with prose open to every reply).
            let prose_banned = out_ids.is_empty()
                && self.settings.syntax == Syntax::ToolCall
                && !self.starts_prose(masked_argmax(&logits, |_| true));
            // Where a `<tool_call>` reply may end (its start, and after each call), the model
            // ends only when ending outweighs everything else it would write, and the step's
            // log-probability is that of the choice (end, or go on). The opening tag's own logit
            // says little: in Qwen2.5-Coder-0.5B the `<tool_call>` / `</tool_call>` embedding
            // rows are untrained (the norm of the unused padding rows) and its head is tied, so
            // a LoRA adapter cannot raise them; its tuned planner put e^-8 on the tag, ended
            // every reply at once, and after the first call never made a second (0.760 of its
            // generated held-out requests against 0.787 weighing every end this way). What else
            // a model would write after a call may be talk about it rather than another call
            // (weighed this way the untrained base enumerated the catalog after its first call),
            // so a reply makes no more calls than the request has clauses for.
            let deciding = self.settings.syntax == Syntax::ToolCall && mask.is_allowed(self.eos);
            if deciding && calls_closed >= calls_asked_for {
                break;
            }
            // `Some(ln(1 - p(end)))` where the model goes on: the log-probability of this step.
            let go_on = deciding
                .then(|| log_prob(&logits, self.eos))
                .filter(|&lp_end| lp_end < -std::f32::consts::LN_2)
                .map(|lp_end| (-lp_end.exp()).ln_1p());
            let allowed = |id: u32| {
                mask.is_allowed(id)
                    && !(prose_banned && self.starts_prose(id))
                    && !(go_on.is_some() && id == self.eos)
            };
            let tok = if out_ids.len() < max_new && !repeated {
                match &prior {
                    Some(p) => p
                        .choose(&logits, allowed)
                        .unwrap_or_else(|| masked_argmax(&logits, allowed)),
                    None => masked_argmax(&logits, allowed),
                }
            } else {
                // Over budget (a model repeating itself inside an unbounded string or
                // array), or a call repeated: steer to the end of the output through closing
                // tokens, so the reply still parses and validates; an over-budget outcome
                // reports it as `truncated`.
                truncated |= !repeated;
                if mask.is_allowed(self.eos) {
                    break;
                }
                closing_token(&self.closers, &logits, |id| mask.is_allowed(id))
                    .unwrap_or_else(|| masked_argmax(&logits, |id| mask.is_allowed(id)))
            };
            if tok == self.eos {
                // A `<tool_call>` reply that ends before its first call ("no call") was the
                // model's choice, and its confidence is that choice's log-probability. Unscored,
                // the empty reply had the mean of no steps, 0: the highest confidence there is,
                // accepted over any floor however unsure the model was between declining and
                // calling. The end after a call is a choice too (one call where the request
                // asked for two), scored where the planner's floor was fitted with it.
                let declines = deciding && out_ids.is_empty();
                if declines || (self.settings.end_scored && !out_ids.is_empty()) {
                    tally.chosen(log_prob(&logits, tok));
                }
                break;
            }
            tally.chosen(go_on.unwrap_or_else(|| log_prob(&logits, tok)));
            if let Err(d) = constraint.commit(tok) {
                dead = Some(d.reason);
                break;
            }
            out_ids.push(tok);
            prior::follow(&mut prior, self.settings.syntax, &[tok], || {
                constraint.output_text()
            })?;
            // Only the pretrained syntaxes are checked, so tiny planners build no text here.
            let syntax = self.settings.syntax;
            if matches!(syntax, Syntax::JsonArray | Syntax::ToolCall) {
                let text = constraint.output_text();
                repeated = repeated || ends_with_repeated_call(syntax, &text);
                calls_closed = closed_tool_calls(&text);
            }
            if state.room() == 0 {
                dead = Some(out_of_context);
                break;
            }
            if out_ids.len() >= 2 * max_new {
                dead = Some(format!(
                    "token budget of {max_new} reached, and the reply could not close within {} tokens",
                    2 * max_new
                ));
                break;
            }
            logits = state.step(tok)?;
        }
        let text = constraint.output_text();
        let mut decoded = self.check(&catalog, &hash, &request_text, &text)?;
        decoded.dead = dead;
        decoded.truncated = truncated;
        tally.write_into(&mut decoded);
        decoded.prompt_tokens = prompt_tokens;
        Ok(decoded)
    }

    /// Whether `token` begins a prose reply (its first byte a letter).
    fn starts_prose(&self, token: u32) -> bool {
        self.engine
            .env()
            .token_bytes(token)
            .first()
            .is_some_and(u8::is_ascii_alphabetic)
    }

    /// The chat-completions body this planner sends its remote engine for `req` (what
    /// `serve --backend` posts), or why no request can be made (every tool a required call
    /// could use needs a value this request cannot supply). An error for a local planner.
    pub fn engine_request(&self, req: &PlanRequest) -> Result<Result<Value, String>, PlannerError> {
        let Some(remote) = &self.remote else {
            return Err(PlannerError::Data(
                "this planner runs its model locally: it sends no engine request".into(),
            ));
        };
        let (catalog, hash) = self.catalog_and_hash(req.catalog.as_ref());
        let request_text = prompt::clean_request(&req.text);
        self.engine_body(remote, req, &catalog, &hash, &request_text)
    }

    /// [`Planner::engine_request`] for a request whose catalog, hash and cleaned text the
    /// caller already has.
    fn engine_body(
        &self,
        remote: &Remote,
        req: &PlanRequest,
        catalog: &Catalog,
        hash: &str,
        request_text: &str,
    ) -> Result<Result<Value, String>, PlannerError> {
        let options = self.options(req.tool_choice.clone(), req.max_calls);
        let form = remote.engine.spec().dialect.form();
        let reused = {
            let key = (hash.to_string(), options.clone());
            let mut cache = remote
                .by_catalog
                .lock()
                .map_err(|_| PlannerError::Poisoned)?;
            match cache.get(&key) {
                Some(r) => r.clone(),
                None => {
                    let system =
                        plansmith_llama::chat::tools_system_text(None, &catalog.to_openai())?;
                    let schema = match form {
                        Form::JsonSchema => {
                            Some(plansmith_grammar::plan_schema(catalog, &options)?)
                        }
                        Form::Lark => None,
                    };
                    if cache.len() > 64 {
                        cache.clear();
                    }
                    let r = Arc::new((system, schema));
                    cache.insert(key, r.clone());
                    r
                }
            }
        };
        let (system, schema) = &*reused;
        let constraint = match schema {
            Some(s) => EngineConstraint::JsonSchema(s.clone()),
            None => {
                let prepared = self.engine.prepare_hashed(hash, catalog, &options)?;
                let grammar_request = Request {
                    text: request_text.to_string(),
                    entities: req.entities.clone(),
                };
                match prepared.template().grammar(&grammar_request) {
                    Ok(g) => EngineConstraint::Lark(g),
                    Err(e @ plansmith_grammar::GrammarError::NoCallableTool) => {
                        return Ok(Err(e.to_string()))
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let max_new = req
            .max_tokens
            .map_or(MAX_REPLY_TOKENS, |m| m.min(MAX_REPLY_TOKENS));
        Ok(Ok(remote.engine.body(
            system,
            request_text,
            constraint,
            max_new,
        )))
    }

    /// One request on the remote engine: the constraint in its form, the reply checked and
    /// scored from the engine's logprobs.
    fn decode_remote(&self, remote: &Remote, req: &PlanRequest) -> Result<Decoded, PlannerError> {
        let (catalog, hash) = self.catalog_and_hash(req.catalog.as_ref());
        let request_text = prompt::clean_request(&req.text);
        let body = match self.engine_body(remote, req, &catalog, &hash, &request_text)? {
            Ok(body) => body,
            Err(reason) => return Ok(dead_end(reason)),
        };
        let reply = match remote.engine.complete(&body, req.deadline) {
            Ok(reply) => reply,
            // In a cascade (or with a teacher) a failed engine is one more reason to pass the
            // request on, said in the outcome; alone, it is the caller's error (HTTP 502/504).
            Err(e) if self.next.is_some() || self.teacher.is_some() => {
                return Ok(dead_end(e.to_string()))
            }
            Err(e) => return Err(e.into()),
        };
        let mut decoded = self.check(&catalog, &hash, &request_text, reply.text.trim())?;
        decoded.engine_time = Some(reply.engine_time);
        decoded.truncated = reply.cut_off;
        match &reply.logprobs {
            Some(lps) if !lps.is_empty() => {
                // An engine reports the tokens it wrote, all of them chosen.
                let mut tally = Tally::default();
                lps.iter().for_each(|&lp| tally.chosen(lp));
                tally.write_into(&mut decoded);
            }
            // Without logprobs there is no confidence to hold against a floor: with a floor
            // set, the plan cannot be verified and escalates; without one it passes on
            // validity alone.
            _ if self.settings.conf_floor > f32::MIN => {
                decoded.dead = Some(format!(
                    "{} returned no logprobs, so the confidence floor cannot be checked",
                    remote.engine.describe()
                ));
            }
            _ => {}
        }
        Ok(decoded)
    }

    /// The empty request's state for the name-prior correction, when it applies: a weight
    /// above 0, a planner reading its tools from the prompt (the DSL with its catalog, or a
    /// pretrained model's JSON array or `<tool_call>` reply), and the tool not forced.
    fn name_prior(
        &self,
        catalog: &Catalog,
        hash: &str,
        tool_choice: &ToolChoice,
    ) -> Result<Option<prior::NamePrior<'_>>, PlannerError> {
        let applies = self.settings.name_prior > 0.0
            && (self.settings.syntax == Syntax::Dsl && self.settings.tools_in_prompt
                || matches!(self.settings.syntax, Syntax::JsonArray | Syntax::ToolCall))
            && !matches!(tool_choice, ToolChoice::Named(_));
        if !applies {
            return Ok(None);
        }
        Ok(
            match self
                .lm
                .start(catalog, hash, "", prompt::CatalogText::of(&self.settings))?
            {
                Started::Ready { state, logits, .. } => Some(prior::NamePrior::new(
                    state,
                    logits,
                    self.settings.name_prior,
                )),
                Started::Overflow(_) => None,
            },
        )
    }

    /// Parse, type and validate a completion text.
    fn check(
        &self,
        catalog: &Catalog,
        hash: &str,
        request: &str,
        text: &str,
    ) -> Result<Decoded, PlannerError> {
        let grammar_catalog = self.grammar_catalog(catalog);
        let validator = self.validator(hash, &grammar_catalog)?;
        let (plan, violations) = match self.settings.syntax.parse(text) {
            Ok(plan) => {
                let plan = if self.settings.syntax.is_untyped() {
                    validator.type_values(&plan)
                } else {
                    plan
                };
                let plan = drop_repeated_calls(self.settings.syntax, plan);
                let v = validator.validate(&plan, &self.settings.policy, Some(request));
                let plan = if self.settings.tool_pointers {
                    pointers::from_pointers(plan, catalog)
                } else {
                    plan
                };
                (Some(plan), v.into_iter().map(|v| v.to_string()).collect())
            }
            Err(e) => (None, vec![format!("does not parse: {e}")]),
        };
        // A pointer planner's reply says `t3(...)`; people and logs read the tools' names.
        let text = match &plan {
            Some(plan) if self.settings.tool_pointers => {
                let mut named = self.settings.syntax.render(plan);
                if text.ends_with('\n') && !named.ends_with('\n') {
                    named.push('\n');
                }
                named
            }
            _ => text.to_string(),
        };
        Ok(Decoded {
            text,
            plan,
            violations,
            dead: None,
            conf_all: 0.0,
            conf_chosen: 0.0,
            conf_weakest: 0.0,
            forced_tokens: 0,
            chosen_tokens: 0,
            truncated: false,
            engine_time: None,
            prompt_tokens: 0,
        })
    }

    /// Unconstrained decode (greedy with temperature 0, else sampled): what the model does
    /// without the grammar. Used to measure what the constraint buys.
    pub fn decode_free(
        &self,
        request: &str,
        catalog: Option<&Catalog>,
        sampler: &mut Sampler,
    ) -> Result<Decoded, PlannerError> {
        let (catalog, hash) = match catalog {
            Some(c) => (c, c.hash()),
            None => (&*self.catalog, self.catalog_hash.clone()),
        };
        let request_text = prompt::clean_request(request);
        let (mut state, mut logits) = match self.lm.start(
            catalog,
            &hash,
            &request_text,
            prompt::CatalogText::of(&self.settings),
        )? {
            Started::Ready { state, logits, .. } => (state, logits),
            Started::Overflow(reason) => return Ok(dead_end(reason)),
        };
        let mut tally = Tally::default();
        let mut out = Vec::new();
        while state.room() > 0 && out.len() < self.lm.max_new_tokens() {
            let tok = sampler.sample(&logits);
            tally.chosen(log_prob(&logits, tok));
            out.push(tok);
            if self.lm.free_stop(tok) {
                break;
            }
            logits = state.step(tok)?;
        }
        let text = self.lm.detokenize(&out);
        let text = match self.settings.syntax {
            Syntax::Dsl => text,
            Syntax::ToolCall => lenient_tool_calls(&text),
            _ => lenient_json(&text).to_string(),
        };
        let mut d = self.check(catalog, &hash, &request_text, &text)?;
        tally.write_into(&mut d);
        Ok(d)
    }

    /// The gate: why a decoded plan must escalate (a dead end, a violation, confidence below
    /// the floor), or `None` when it may leave.
    pub fn gate(&self, decoded: &Decoded) -> Option<String> {
        let confidence = decoded.confidence(self.settings.confidence);
        if let Some(d) = &decoded.dead {
            Some(format!("decoding dead end: {d}"))
        } else if decoded.truncated {
            Some("token budget reached: the reply was cut off and closed early".into())
        } else if let Some(v) = decoded.violations.first() {
            Some(format!("invalid plan: {v}"))
        } else if self.settings.conf_floor == crate::calibrate::ACCEPTS_NOTHING {
            // "below floor 340282346638528859811704183484516925440" would tell the user nothing.
            Some(format!(
                "confidence {confidence:.4}, but this planner accepts nothing: no floor is \
                 certified for it (not calibrated yet, or its calibration split could not \
                 certify the promise; `plansmith calibrate` fits one)"
            ))
        } else if confidence < self.settings.conf_floor {
            Some(format!(
                "confidence {confidence:.4} below floor {:.4}",
                self.settings.conf_floor
            ))
        } else {
            None
        }
    }

    /// Plan a request against the planner's catalog.
    pub fn plan(&self, request: &str) -> Result<Outcome, PlannerError> {
        self.plan_request(&PlanRequest::new(request))
    }

    /// Decode, gate, and escalate when needed: to the next hop of a cascade, else to the
    /// teacher. Only verified plans leave.
    pub fn plan_request(&self, req: &PlanRequest) -> Result<Outcome, PlannerError> {
        let start = Instant::now();
        let decoded = self.decode(req)?;
        let confidence = decoded.confidence(self.settings.confidence);
        let mut reason = self.gate(&decoded);
        if let (None, true, Some(next), Some(plan)) =
            (&reason, self.confirmed_by_next, &self.next, &decoded.plan)
        {
            reason = self.next_doubts(next, req, plan)?;
        }
        let own_time = start.elapsed();
        self.bump(|c| c.requests += 1);
        let hops: Vec<HopReport> = self
            .hop
            .iter()
            .map(|name| HopReport {
                hop: name.clone(),
                confidence,
                floor: self.settings.conf_floor,
                accepted: reason.is_none(),
                reason: reason.clone(),
                latency: own_time,
            })
            .collect();
        let Some(reason) = reason else {
            self.bump(|c| c.answered += 1);
            let plan = decoded.plan.unwrap_or_default();
            return Ok(Outcome {
                calls: plan.calls,
                spoken_text: plan.spoken_text,
                confidence,
                escalated: false,
                source: Source::Model,
                text: decoded.text,
                reason: None,
                truncated: decoded.truncated,
                latency: start.elapsed(),
                hop: self.hop.clone(),
                hops,
                engine: decoded.engine_time,
                prompt_tokens: (decoded.prompt_tokens > 0).then_some(decoded.prompt_tokens),
            });
        };
        self.bump(|c| c.escalated += 1);
        let reason = match &self.hop {
            Some(name) => format!("{name}: {reason}"),
            None => reason,
        };
        if let Some(next) = &self.next {
            let mut outcome = next.plan_request(&self.forwarded(req, next))?;
            outcome.hops.splice(0..0, hops);
            if outcome.escalated {
                outcome.reason = Some(match outcome.reason {
                    Some(rest) => format!("{reason}; {rest}"),
                    None => reason,
                });
            }
            outcome.latency = start.elapsed();
            return Ok(outcome);
        }
        let catalog = req.catalog.clone().unwrap_or_else(|| self.catalog.clone());
        let mut outcome = Outcome {
            calls: Vec::new(),
            spoken_text: None,
            confidence,
            escalated: true,
            source: Source::None,
            text: decoded.text,
            reason: Some(reason),
            truncated: decoded.truncated,
            latency: Duration::ZERO,
            hop: None,
            hops,
            engine: decoded.engine_time,
            prompt_tokens: (decoded.prompt_tokens > 0).then_some(decoded.prompt_tokens),
        };
        if let Some(teacher) = &self.teacher {
            match teacher.plan(&req.text, &catalog) {
                Ok(plan) => {
                    self.harvest(&req.text, &plan, req.catalog.as_deref())?;
                    outcome.calls = plan.calls;
                    outcome.spoken_text = plan.spoken_text;
                    outcome.source = Source::Teacher;
                    outcome.hop = self.hop.as_ref().map(|_| "teacher".to_string());
                }
                Err(e) => {
                    self.bump(|c| c.teacher_failures += 1);
                    outcome.reason = Some(format!(
                        "{}; teacher failed: {e}",
                        outcome.reason.unwrap_or_default()
                    ));
                }
            }
        }
        outcome.latency = start.elapsed();
        Ok(outcome)
    }

    /// `req` as the next hop gets it: against this hop's catalog, not the next's own default.
    fn forwarded<'a>(
        &self,
        req: &'a PlanRequest,
        next: &Planner,
    ) -> std::borrow::Cow<'a, PlanRequest> {
        if req.catalog.is_none() && next.catalog_hash != self.catalog_hash {
            std::borrow::Cow::Owned(PlanRequest {
                catalog: Some(self.catalog.clone()),
                ..req.clone()
            })
        } else {
            std::borrow::Cow::Borrowed(req)
        }
    }

    /// Why the next hop would not accept the plan this hop accepted (`None`: it would).
    fn next_doubts(
        &self,
        next: &Planner,
        req: &PlanRequest,
        plan: &Plan,
    ) -> Result<Option<String>, PlannerError> {
        let name = next.hop.as_deref().unwrap_or("the next hop");
        let floor = next.settings.conf_floor;
        Ok(match next.score_request(&self.forwarded(req, next), plan) {
            Ok(score) if score >= floor => None,
            Ok(score) => Some(format!(
                "{name} does not confirm it (its score {score:.4} < its floor {floor:.4})"
            )),
            Err(PlannerError::NotWritable(why) | PlannerError::TooLong(why)) => {
                Some(format!("{name} does not confirm it ({why})"))
            }
            Err(e) => return Err(e),
        })
    }

    /// Append the teacher's plan as a trace; it carries the request's own catalog when that
    /// differs from the planner's.
    fn harvest(
        &self,
        request: &str,
        plan: &Plan,
        requested: Option<&Catalog>,
    ) -> Result<(), PlannerError> {
        let Some(writer) = &self.harvest else {
            return Ok(());
        };
        let tools = requested
            .filter(|c| c.hash() != self.catalog_hash)
            .map(Catalog::to_openai);
        let trace = Trace {
            request: request.to_string(),
            calls: plan.calls.clone(),
            tools,
            source: TraceSource::Harvest,
            spoken_text: plan.spoken_text.clone(),
        };
        writer
            .lock()
            .map_err(|_| PlannerError::Poisoned)?
            .append(&trace)?;
        self.bump(|c| c.harvested_traces += 1);
        Ok(())
    }

    /// The confidence this planner would have had writing `plan` for `request`, in its own
    /// confidence mode, comparable with its floor: the plan (rendered in the planner's syntax)
    /// is written step by step under the grammar, each step scored as decoding scores it. A
    /// plan the planner decodes itself scores its decoded confidence. A plan its grammar does
    /// not allow (invalid, or written in a form the grammar never writes) is
    /// [`PlannerError::NotWritable`], naming where it leaves the grammar.
    pub fn score(&self, request: &str, plan: &Plan) -> Result<f32, PlannerError> {
        self.score_request(&PlanRequest::new(request), plan)
    }

    /// [`Planner::score`] for a request with its own catalog, tool choice and limits.
    pub fn score_request(&self, req: &PlanRequest, plan: &Plan) -> Result<f32, PlannerError> {
        let (catalog, hash) = self.catalog_and_hash(req.catalog.as_ref());
        let plan = if self.settings.tool_pointers {
            pointers::to_pointers(plan, &catalog)
        } else {
            plan.clone()
        };
        // Values typed by the schema, as a decode's plan is: a plan read from the DSL has
        // `"5"` where the grammar writes `5`.
        let grammar_catalog = self.grammar_catalog(&catalog);
        let plan = self.validator(&hash, &grammar_catalog)?.type_values(&plan);
        // Spaced as the pretrained formats write JSON (`{"name": "x", ...}`), what their
        // models and grammars write; the DSL renders one way.
        let text = self.settings.syntax.render_spaced(&plan);
        // A request's deadline holds here too: past it, the plan is not scored (a dead end).
        let d = self.follow(req, &text)?;
        match d.dead {
            None => Ok(d.confidence(self.settings.confidence)),
            Some(reason) if reason.starts_with(LEFT_THE_GRAMMAR) => {
                Err(PlannerError::NotWritable(reason))
            }
            // The prompt, or the prompt and the plan, do not fit the model's context.
            Some(reason) => Err(PlannerError::TooLong(reason)),
        }
    }

    /// What `score` and `/v1/score` report for a given plan: its violations, and its score
    /// where the planner's grammar writes it (an invalid plan has none: it could never leave
    /// the planner), or why not.
    pub fn judge_given(&self, request: &str, plan: &Plan) -> Result<GivenPlan, PlannerError> {
        let violations = self.violations(request, plan)?;
        if !violations.is_empty() {
            // A request the model cannot read is refused as such, whatever the plan.
            if let Started::Overflow(reason) = self.lm.start(
                &self.catalog,
                &self.catalog_hash,
                &prompt::clean_request(request),
                prompt::CatalogText::of(&self.settings),
            )? {
                return Err(PlannerError::TooLong(reason));
            }
            return Ok(GivenPlan {
                score: None,
                unscored: Some("the plan is invalid: no planner writes it".into()),
                violations,
            });
        }
        Ok(match self.score(request, plan) {
            Ok(score) => GivenPlan {
                score: Some(score),
                unscored: None,
                violations,
            },
            Err(PlannerError::NotWritable(why)) => GivenPlan {
                score: None,
                unscored: Some(why),
                violations,
            },
            Err(e) => return Err(e),
        })
    }

    /// `n` unconstrained draws (seeded), each parsed, validated and, when valid, scored like
    /// [`Planner::score`]. Invalid draws are kept, with their text and no score. Sorted best
    /// first, invalid ones last in draw order.
    pub fn sample(
        &self,
        request: &str,
        n: usize,
        temperature: f32,
        seed: u64,
    ) -> Result<Vec<Sample>, PlannerError> {
        self.sample_until(request, n, temperature, seed, None)
    }

    /// [`Planner::sample`], drawing no further sample once `deadline` has passed (each draw is
    /// bounded by the model's token budget), so `n` draws cannot hold a worker past it.
    pub fn sample_until(
        &self,
        request: &str,
        n: usize,
        temperature: f32,
        seed: u64,
        deadline: Option<Instant>,
    ) -> Result<Vec<Sample>, PlannerError> {
        let mut sampler = Sampler::new(temperature, seed);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let d = self.decode_free(request, None, &mut sampler)?;
            let valid = d.is_valid();
            let score = match (&d.plan, valid) {
                (Some(plan), true) => match self.score(request, plan) {
                    Ok(score) => Some(score),
                    Err(PlannerError::TooLong(_) | PlannerError::NotWritable(_)) => None,
                    Err(e) => return Err(e),
                },
                _ => None,
            };
            let mut violations = d.violations;
            violations.extend(d.dead);
            out.push(Sample {
                text: d.text,
                plan: d.plan.filter(|_| valid),
                score,
                violations,
            });
        }
        out.sort_by(|a, b| match (a.score, b.score) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        Ok(out)
    }

    /// What validation says of `plan` for `request` against this planner's own catalog and
    /// policy (empty when valid).
    pub fn violations(&self, request: &str, plan: &Plan) -> Result<Vec<String>, PlannerError> {
        let grammar_catalog = self.grammar_catalog(&self.catalog);
        let validator = self.validator(&self.catalog_hash, &grammar_catalog)?;
        let plan = if self.settings.tool_pointers {
            pointers::to_pointers(plan, &self.catalog)
        } else {
            plan.clone()
        };
        let plan = validator.type_values(&plan);
        Ok(validator
            .validate(&plan, &self.settings.policy, Some(request))
            .into_iter()
            .map(|v| v.to_string())
            .collect())
    }

    pub fn report(&self) -> Report {
        let c = self.counters();
        Report {
            requests: c.requests,
            escalated: c.escalated,
            escalation_rate: if c.requests == 0 {
                0.0
            } else {
                c.escalated as f64 / c.requests as f64
            },
            harvested_traces: c.harvested_traces,
            teacher_failures: c.teacher_failures,
            plan_agreement: self.meta.test.as_ref().map(|m| m.agreement),
        }
    }
}

/// The JSON inside a free-form reply, as a lenient client would take it: code fences and prose
/// around the outermost `[...]` (or `{...}` when there is no array) are ignored.
fn lenient_json(text: &str) -> &str {
    let t = text.trim();
    for (open, close) in [('[', ']'), ('{', '}')] {
        if let (Some(a), Some(b)) = (t.find(open), t.rfind(close)) {
            if a < b {
                return &t[a..=b];
            }
        }
    }
    t
}

/// The `<tool_call>` blocks of a free-form reply, as a lenient client would take them: text
/// between and around them is dropped, and a last block the token budget cut off before its
/// `</tool_call>` is dropped too. A reply with no tag but a JSON call object (or an array of
/// them) in it, as small models write in a Markdown block, gets its calls wrapped in tags; any
/// other reply stays as it is (a plan with no call).
fn lenient_tool_calls(text: &str) -> String {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let block = |inner: &str| format!("{OPEN}\n{}\n{CLOSE}", inner.trim());
    if !text.contains(OPEN) {
        let calls = match serde_json::from_str::<serde_json::Value>(lenient_json(text)) {
            Ok(serde_json::Value::Array(items)) => items,
            Ok(one @ serde_json::Value::Object(_)) => vec![one],
            _ => return text.to_string(),
        };
        if calls.is_empty() || !calls.iter().all(|c| c.get("name").is_some()) {
            return text.to_string();
        }
        return calls
            .iter()
            .map(|c| block(&c.to_string()))
            .collect::<Vec<_>>()
            .join("\n");
    }
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(a) = rest.find(OPEN) {
        let body = &rest[a + OPEN.len()..];
        let Some(b) = body.find(CLOSE) else { break };
        blocks.push(block(&body[..b]));
        rest = &body[b + CLOSE.len()..];
    }
    blocks.join("\n")
}

/// Closing characters in the order a budget-steered reply should prefer them: end the open
/// string first (inside a string `]` and `}` are just text), then objects, arrays, DSL calls,
/// and the DSL's line.
const CLOSING: &[u8] = b"\"}])\n";

/// The allowed closing token of the best rank (highest logit among equals).
fn closing_token(
    closers: &[(u32, usize)],
    logits: &[f32],
    allowed: impl Fn(u32) -> bool,
) -> Option<u32> {
    closers
        .iter()
        .filter(|(id, _)| (*id as usize) < logits.len() && allowed(*id))
        .min_by(|a, b| {
            a.1.cmp(&b.1)
                .then(logits[b.0 as usize].total_cmp(&logits[a.0 as usize]))
        })
        .map(|(id, _)| *id)
}

fn dead_end(reason: String) -> Decoded {
    Decoded {
        text: String::new(),
        plan: None,
        violations: vec![],
        dead: Some(reason),
        conf_all: f32::NEG_INFINITY,
        conf_chosen: f32::NEG_INFINITY,
        conf_weakest: f32::NEG_INFINITY,
        forced_tokens: 0,
        chosen_tokens: 0,
        truncated: false,
        engine_time: None,
        prompt_tokens: 0,
    }
}

/// log softmax(logits)[token], computed stably.
pub fn log_prob(logits: &[f32], token: u32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    logits[token as usize] - max - sum.ln()
}

/// Whether a pretrained model's reply so far (JSON array or `<tool_call>` blocks) has just
/// closed a call identical to one it made before. SmolLM2 under the JSON-array grammar would
/// otherwise repeat one call up to eight times, each repeat costing a call's worth of decoding.
/// The DSL of tiny planners is left alone (their training data decides what they repeat).
fn ends_with_repeated_call(syntax: Syntax, text: &str) -> bool {
    let text = text.trim_end();
    let closed = match syntax {
        Syntax::JsonArray if text.ends_with('}') => format!("{text}]"),
        Syntax::ToolCall if text.ends_with("</tool_call>") => lenient_tool_calls(text),
        _ => return false,
    };
    match syntax.parse(&closed) {
        Ok(plan) => plan
            .calls
            .split_last()
            .is_some_and(|(last, earlier)| earlier.contains(last)),
        Err(_) => false,
    }
}

/// The most calls a request can ask for: one, and one more per clause connector ("and",
/// "then", "also", "plus", "after", "before", a comma or semicolon). An upper bound, generous
/// on purpose ("hey, open mail" counts two): it stops a model that goes on after its call
/// with talk, not one that was asked for two things.
fn calls_the_request_can_ask_for(request: &str) -> usize {
    const CONNECTORS: [&str; 7] = ["and", "then", "also", "plus", "after", "before", "&"];
    let words = request
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '&');
            CONNECTORS.iter().any(|k| w.eq_ignore_ascii_case(k))
        })
        .count();
    let marks = request.chars().filter(|&c| c == ',' || c == ';').count();
    1 + words + marks
}

/// How many `<tool_call>` blocks a reply has closed so far.
fn closed_tool_calls(text: &str) -> usize {
    text.matches("</tool_call>").count()
}

/// A pretrained model's plan with each identical call kept once, in first-seen order: the
/// catalog's calls are actions, and the same action with the same arguments twice in one reply
/// is a model repeating itself, not a request (which says "twice" through an argument).
fn drop_repeated_calls(syntax: Syntax, mut plan: Plan) -> Plan {
    if matches!(syntax, Syntax::JsonArray | Syntax::ToolCall) {
        let mut kept: Vec<plansmith_core::Call> = Vec::with_capacity(plan.calls.len());
        for call in std::mem::take(&mut plan.calls) {
            if !kept.contains(&call) {
                kept.push(call);
            }
        }
        plan.calls = kept;
    }
    plan
}

/// Where the reply may end, the end (`eos`, the grammar's one end token) scores as the best of
/// the model's end tokens: ending with `<|endoftext|>` is ending too.
fn end_with_best_stop(logits: &mut [f32], eos: u32, others: &[u32]) {
    let best = others
        .iter()
        .filter_map(|&id| logits.get(id as usize).copied())
        .fold(f32::NEG_INFINITY, f32::max);
    if let Some(l) = logits.get_mut(eos as usize) {
        *l = l.max(best);
    }
}

const LEFT_THE_GRAMMAR: &str = "the plan leaves what this planner's grammar writes";

/// Why a text to follow could not be written: where it leaves what the grammar allows.
fn left_the_grammar(target: &str, written: &str) -> String {
    let at = target
        .char_indices()
        .zip(written.chars())
        .find(|((_, a), b)| a != b)
        .map_or(written.len().min(target.len()), |((i, _), _)| i);
    let end = (at + 40).min(target.len());
    let end = (end..=target.len())
        .find(|&i| target.is_char_boundary(i))
        .unwrap_or(target.len());
    format!("{LEFT_THE_GRAMMAR} at byte {at} (`{}`)", &target[at..end])
}

fn masked_argmax(logits: &[f32], allowed: impl Fn(u32) -> bool) -> u32 {
    let mut best = (0u32, f32::NEG_INFINITY);
    let mut any = None;
    for (i, &l) in logits.iter().enumerate() {
        let id = i as u32;
        if allowed(id) {
            any.get_or_insert(id);
            if l > best.1 {
                best = (id, l);
            }
        }
    }
    if best.1 == f32::NEG_INFINITY {
        any.unwrap_or(0)
    } else {
        best.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_request_asks_for_one_call_more_per_clause_connector() {
        use super::calls_the_request_can_ask_for as asked;
        assert_eq!(asked("open safari"), 1);
        assert_eq!(asked("open safari and mail"), 2);
        assert_eq!(asked("Open Safari, then AND mail"), 4);
        assert_eq!(asked("mute; lock the screen & sleep"), 3);
        // a connector inside a word is not one
        assert_eq!(asked("open the android band app"), 1);
    }

    use super::*;

    #[test]
    fn budget_steering_closes_the_string_before_anything_else() {
        // ids: 1 = `"`, 2 = `]`, 3 = `}` ; inside a string all three are allowed text.
        let closers = [(1, 0), (2, 2), (3, 1)];
        let logits = [0.0, -5.0, 3.0, 2.0];
        assert_eq!(closing_token(&closers, &logits, |_| true), Some(1));
        // After the string: `}` before `]`, whatever the logits say.
        assert_eq!(closing_token(&closers, &logits, |id| id != 1), Some(3));
        assert_eq!(closing_token(&closers, &logits, |id| id == 2), Some(2));
        assert_eq!(closing_token(&closers, &logits, |_| false), None);
    }

    #[test]
    fn a_repeated_call_is_seen_when_it_closes_and_dropped_from_the_plan() {
        let a = r#"{"name":"open","arguments":{"target":{"label":"Mail"}}}"#;
        let b = r#"{"name":"say","arguments":{"text":"hi"}}"#;
        let json = Syntax::JsonArray;
        assert!(!ends_with_repeated_call(json, &format!("[{a}")));
        assert!(!ends_with_repeated_call(json, &format!("[{a},{b}")));
        // An inner object closing is not a call closing.
        assert!(!ends_with_repeated_call(
            json,
            &format!(
                "[{a},{b},{{\"name\":\"open\",\"arguments\":{{\"target\":{{\"label\":\"Mail\"}}"
            )
        ));
        assert!(ends_with_repeated_call(json, &format!("[{a},{b},{a}")));
        assert!(ends_with_repeated_call(json, &format!("[{a}, {a} ")));
        let tc = Syntax::ToolCall;
        let block = |c: &str| format!("<tool_call>\n{c}\n</tool_call>\n");
        assert!(!ends_with_repeated_call(
            tc,
            &format!("{}{}", block(a), block(b))
        ));
        assert!(ends_with_repeated_call(
            tc,
            &format!("{}{}", block(a), block(a))
        ));
        assert!(!ends_with_repeated_call(
            Syntax::Dsl,
            "open(target.label=Mail)\nopen(target.label=Mail)"
        ));

        let plan = json.parse(&format!("[{a},{b},{a},{b},{a}]")).unwrap();
        let kept = drop_repeated_calls(json, plan.clone());
        let names: Vec<&str> = kept.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["open", "say"]);
        // The DSL keeps what the planner wrote.
        assert_eq!(
            drop_repeated_calls(Syntax::Dsl, plan.clone()).calls.len(),
            5
        );
    }

    #[test]
    fn free_tool_call_replies_keep_only_their_closed_blocks() {
        let reply = "Sure! <tool_call>\n{\"name\": \"a\", \"arguments\": {}}</tool_call> and\n\
                     <tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>\n\
                     <tool_call>\n{\"name\": \"c\", \"argu";
        let kept = lenient_tool_calls(reply);
        let plan = Syntax::ToolCall.parse(&kept).unwrap();
        let names: Vec<_> = plan.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(lenient_tool_calls("no call here"), "no call here");
        // A call written as a JSON object in a Markdown block, as Qwen2.5-Coder-0.5B does.
        let fenced = "```json\n{\n  \"name\": \"f\",\n  \"arguments\": {\"x\": 2}\n}\n```";
        let plan = Syntax::ToolCall.parse(&lenient_tool_calls(fenced)).unwrap();
        assert_eq!(plan.calls.len(), 1);
        assert_eq!(plan.calls[0].name, "f");
        assert_eq!(plan.calls[0].arguments["x"], 2);
        // JSON that is not a call stays text.
        assert_eq!(lenient_tool_calls("{\"a\": 1}"), "{\"a\": 1}");
    }
}
