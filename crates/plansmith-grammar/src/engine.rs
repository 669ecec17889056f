//! The engine: one per vocabulary. Owns llguidance's `ParserFactory` (token trie + slicer,
//! the expensive per-tokenizer state) and an LRU cache of compiled templates.
//!
//! What is cached, per (catalog hash, options, tokenizer id):
//! * the generated [`Template`] (request-independent Lark text + hole descriptions);
//! * when the template has no copy holes (no copy policy), a ready llguidance `Matcher`
//!   compiled for "no visible entities", cloned per request (no compile at all on a hit)
//!   unless the request carries entities of a type an EntityRef uses.
//!
//! * for DSL templates with copy holes, one matcher compiled with each copy value as its
//!   request-independent lexeme, cloned per request and paired with a
//!   [`crate::copyfilter::CopyFilter`] that checks the spans while decoding.
//!
//! llguidance cannot splice per-request lexemes into an already compiled grammar, so any
//! other template with holes (JSON syntaxes with a copy policy, requests carrying entities,
//! requests where a copied value is impossible) is compiled per request from its text plus the
//! hole definitions; what the cache saves there is generation, and the factory/slicer are
//! shared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use plansmith_core::Catalog;

use crate::error::GrammarError;
use crate::gen::{self, Options, Template};
use crate::runtime::Constraint;
use crate::tokenv::TokEnv;
use plansmith_core::request::Request;

/// Cache key: everything the request-independent grammar depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    pub catalog_hash: String,
    pub options: Options,
    pub tokenizer: String,
}

/// A cached, request-independent compiled grammar.
pub struct Prepared {
    key: CacheKey,
    template: Template,
    ready: Option<Matcher>,
    /// Shared grammars for requests whose copy spans a `CopyFilter` checks, one per set of
    /// copy holes a request has no span for (built on first use; `None`: that set needs
    /// per-request grammars).
    filtered: Mutex<HashMap<Vec<usize>, Option<Arc<Filtered>>>>,
    bytes: usize,
}

impl Prepared {
    pub fn template(&self) -> &Template {
        &self.template
    }

    pub fn key(&self) -> &CacheKey {
        &self.key
    }

    /// Whether requests reuse a compiled matcher (no per-request compile) — all of them, or,
    /// with EntityRefs, those without visible entities of the referenced types.
    pub fn is_precompiled(&self) -> bool {
        self.ready.is_some() || self.template.checks_copies_while_decoding()
    }
}

/// A grammar shared by requests whose copy spans are checked while decoding.
struct Filtered {
    template: Template,
    matcher: Matcher,
}

/// Shared-grammar variants kept per template (sets of impossible copy holes).
const MAX_FILTERED_FORMS: usize = 16;

/// Cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub entries: usize,
    pub bytes: usize,
}

struct Lru {
    map: HashMap<CacheKey, (Arc<Prepared>, u64)>,
    tick: u64,
    max_entries: usize,
    max_bytes: usize,
    stats: CacheStats,
}

impl Lru {
    fn get(&mut self, key: &CacheKey) -> Option<Arc<Prepared>> {
        self.tick += 1;
        let tick = self.tick;
        match self.map.get_mut(key) {
            Some((p, t)) => {
                *t = tick;
                self.stats.hits += 1;
                Some(p.clone())
            }
            None => None,
        }
    }

    fn insert(&mut self, p: Arc<Prepared>) {
        self.tick += 1;
        self.stats.bytes += p.bytes;
        if let Some((old, _)) = self.map.insert(p.key.clone(), (p, self.tick)) {
            self.stats.bytes -= old.bytes;
        }
        while self.map.len() > self.max_entries
            || (self.stats.bytes > self.max_bytes && self.map.len() > 1)
        {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    if let Some((old, _)) = self.map.remove(&k) {
                        self.stats.bytes -= old.bytes;
                        self.stats.evictions += 1;
                    }
                }
                None => break,
            }
        }
        self.stats.entries = self.map.len();
    }
}

/// Grammar compiler + cache for one vocabulary. `Sync`: share it across request threads.
pub struct Engine {
    env: TokEnv,
    /// Ids of the tokens holding `=` (see `Constraint`'s copy filter).
    eq_tokens: Arc<Vec<u32>>,
    factory: Arc<ParserFactory>,
    cache: Mutex<Lru>,
}

impl Engine {
    /// Default bounds: 64 templates, 64 MiB of grammar text (estimated).
    pub fn new(env: TokEnv) -> Result<Engine, GrammarError> {
        Self::with_capacity(env, 64, 64 << 20)
    }

    pub fn with_capacity(
        env: TokEnv,
        max_entries: usize,
        max_bytes: usize,
    ) -> Result<Engine, GrammarError> {
        let mut factory = ParserFactory::new_simple(env.llg_env())
            .map_err(|e| GrammarError::Compile(e.to_string()))?;
        factory.quiet();
        let eq_tokens = (0..env.vocab_size() as u32)
            .filter(|&t| env.llg_env().tok_trie().token(t).contains(&b'='))
            .collect();
        Ok(Engine {
            eq_tokens: Arc::new(eq_tokens),
            env,
            factory: Arc::new(factory),
            cache: Mutex::new(Lru {
                map: HashMap::new(),
                tick: 0,
                max_entries: max_entries.max(1),
                max_bytes,
                stats: CacheStats::default(),
            }),
        })
    }

    pub fn env(&self) -> &TokEnv {
        &self.env
    }

    /// The cached request-independent grammar for (catalog, options), built on a miss.
    pub fn prepare(
        &self,
        catalog: &Catalog,
        options: &Options,
    ) -> Result<Arc<Prepared>, GrammarError> {
        self.prepare_hashed(&catalog.hash(), catalog, options)
    }

    /// Like [`Engine::prepare`] with a catalog hash the caller already computed
    /// (`catalog.hash()` costs a canonical serialization + SHA-256).
    pub fn prepare_hashed(
        &self,
        catalog_hash: &str,
        catalog: &Catalog,
        options: &Options,
    ) -> Result<Arc<Prepared>, GrammarError> {
        let key = CacheKey {
            catalog_hash: catalog_hash.to_string(),
            options: options.clone(),
            tokenizer: self.env.id().to_string(),
        };
        if let Some(p) = self.lock().get(&key) {
            return Ok(p);
        }
        let template = gen::template(catalog, options)?;
        let ready = if template.has_shared_form() {
            Some(self.matcher(&template.grammar(&Request::default())?)?)
        } else {
            None
        };
        let bytes = template.template_text().len() * 8 + 4096;
        let p = Arc::new(Prepared {
            key,
            template,
            ready,
            filtered: Mutex::new(HashMap::new()),
            bytes,
        });
        let mut lru = self.lock();
        lru.stats.misses += 1;
        lru.insert(p.clone());
        Ok(p)
    }

    /// A constraint for one request from a prepared grammar.
    pub fn constraint_for(
        &self,
        prepared: &Prepared,
        request: &Request,
    ) -> Result<Constraint, GrammarError> {
        if let Some(m) = &prepared.ready {
            if !prepared.template.depends_on(request) {
                return Ok(Constraint::new(m.clone(), self.env.clone()));
            }
        }
        if let Some((impossible, chunks)) = prepared.template.impossible_holes(request) {
            if let Some(shared) = self.filtered(prepared, impossible) {
                if let Some(filter) = shared.template.copy_filter(request, &chunks) {
                    return Ok(Constraint::with_copy_filter(
                        shared.matcher.clone(),
                        self.env.clone(),
                        filter,
                        self.eq_tokens.clone(),
                    ));
                }
            }
        }
        let matcher = self.matcher(&prepared.template.grammar(request)?)?;
        Ok(Constraint::new(matcher, self.env.clone()))
    }

    /// The shared grammar for requests with these impossible copy holes, compiled on first
    /// use. A variant that cannot be shared (or fails to build: the per-request path then
    /// reports why) is remembered as `None`.
    fn filtered(&self, prepared: &Prepared, impossible: Vec<usize>) -> Option<Arc<Filtered>> {
        let mut forms = prepared.filtered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = forms.get(&impossible) {
            return f.clone();
        }
        if forms.len() >= MAX_FILTERED_FORMS {
            return None;
        }
        let build = || -> Option<Filtered> {
            let template = if impossible.is_empty() {
                prepared.template.clone()
            } else {
                prepared.template.without_holes(&impossible).ok()?
            };
            let matcher = self.matcher(&template.filtered_grammar()?).ok()?;
            Some(Filtered { template, matcher })
        };
        let form = build().map(Arc::new);
        forms.insert(impossible, form.clone());
        form
    }

    /// Prepare (cached) and build the request's constraint.
    pub fn constraint(
        &self,
        catalog: &Catalog,
        options: &Options,
        request: &Request,
    ) -> Result<Constraint, GrammarError> {
        let p = self.prepare(catalog, options)?;
        self.constraint_for(&p, request)
    }

    /// Compile arbitrary Lark text (no cache).
    pub fn constraint_from_lark(&self, lark: &str) -> Result<Constraint, GrammarError> {
        Ok(Constraint::new(self.matcher(lark)?, self.env.clone()))
    }

    fn matcher(&self, lark: &str) -> Result<Matcher, GrammarError> {
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(lark.to_string()));
        let m = Matcher::new(parser);
        match m.get_error() {
            Some(e) => Err(GrammarError::Compile(e)),
            None => Ok(m),
        }
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.lock().stats
    }

    pub fn clear_cache(&self) {
        let mut lru = self.lock();
        lru.map.clear();
        lru.stats.entries = 0;
        lru.stats.bytes = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        // a panic while holding the lock cannot leave the map inconsistent (plain inserts)
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}
