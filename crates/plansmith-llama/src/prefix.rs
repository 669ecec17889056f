//! Prefix cache: KV snapshots of rendered system+tools prefixes, keyed by
//! (model, catalog hash, template), LRU-evicted under a memory budget. A catalog not in the
//! cache starts from the cached prefix that shares the most leading tokens with it (same model
//! and template): a catalog that adds a tool after the ones a cached catalog lists computes
//! only the added tool's tokens.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::model::{KvSnapshot, Session};

/// What a cached prefix depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PrefixKey {
    /// [`crate::LlamaModel::fingerprint`].
    pub model: u64,
    /// The catalog hash (e.g. `plansmith_core::Catalog::hash()`).
    pub catalog: String,
    /// [`crate::ChatTemplate::id`] (template source + tools prompt wording).
    pub template: u64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<PrefixKey, (Arc<KvSnapshot>, u64)>,
    bytes: usize,
    clock: u64,
    hits: u64,
    misses: u64,
}

/// Thread-safe LRU of prefix snapshots bounded by `max_bytes`.
#[derive(Debug)]
pub struct PrefixCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

/// How a request's prefix was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixOutcome {
    /// Restored from the cache.
    Hit,
    /// Computed (and stored when it fits the budget).
    Miss,
    /// Computed after the first `reused` tokens, restored from another catalog's cached
    /// prefix that starts with them (and stored when it fits the budget).
    Partial { reused: usize },
}

/// Below this many shared leading tokens a partial reuse is not worth a snapshot copy.
const MIN_REUSE: usize = 16;

impl PrefixCache {
    /// A cache holding at most `max_bytes` of snapshots.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Look up a snapshot (marks it most recently used).
    pub fn get(&self, key: &PrefixKey) -> Option<Arc<KvSnapshot>> {
        let mut g = self.lock();
        g.clock += 1;
        let clock = g.clock;
        match g.entries.get_mut(key) {
            Some((s, used)) => {
                *used = clock;
                let s = s.clone();
                g.hits += 1;
                Some(s)
            }
            None => {
                g.misses += 1;
                None
            }
        }
    }

    /// Insert a snapshot, evicting least recently used entries to stay under the budget.
    /// Returns false when the snapshot alone exceeds the budget (not stored).
    pub fn insert(&self, key: PrefixKey, snap: Arc<KvSnapshot>) -> bool {
        let size = snap.bytes();
        if size > self.max_bytes {
            return false;
        }
        let mut g = self.lock();
        if let Some((old, _)) = g.entries.remove(&key) {
            g.bytes -= old.bytes();
        }
        while g.bytes + size > self.max_bytes {
            let victim = g
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            match victim {
                Some(k) => {
                    if let Some((s, _)) = g.entries.remove(&k) {
                        g.bytes -= s.bytes();
                    }
                }
                None => break,
            }
        }
        g.clock += 1;
        let clock = g.clock;
        g.bytes += size;
        g.entries.insert(key, (snap, clock));
        true
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        let g = self.lock();
        (g.hits, g.misses)
    }

    /// Drop everything.
    pub fn clear(&self) {
        let mut g = self.lock();
        g.entries.clear();
        g.bytes = 0;
    }

    /// The cached snapshot of the same model and template whose tokens share the longest run
    /// of leading tokens with `prefix`, and that length (most recently used first on ties).
    fn longest_shared(&self, key: &PrefixKey, prefix: &[u32]) -> Option<(Arc<KvSnapshot>, usize)> {
        let mut g = self.lock();
        let best = g
            .entries
            .iter()
            .filter(|(k, _)| k.model == key.model && k.template == key.template)
            .map(|(k, (snap, used))| {
                let shared = snap
                    .tokens()
                    .iter()
                    .zip(prefix)
                    .take_while(|(a, b)| a == b)
                    .count();
                (shared, *used, k.clone())
            })
            .max_by_key(|&(shared, used, _)| (shared, used))?;
        let (shared, _, k) = best;
        g.clock += 1;
        let clock = g.clock;
        let (snap, used) = g.entries.get_mut(&k)?;
        *used = clock;
        Some((snap.clone(), shared))
    }

    /// Put `prefix` then `rest` into `session` (which is reset), reusing the cached prefix
    /// when the key matches and the cached tokens equal `prefix`, else starting from the
    /// cached prefix that shares the most leading tokens with it. Returns the next-token
    /// logits after the last token and how the prefix was served.
    pub fn prefill(
        &self,
        session: &mut Session,
        key: &PrefixKey,
        prefix: &[u32],
        rest: &[u32],
    ) -> Result<(Vec<f32>, PrefixOutcome)> {
        let cached = self
            .get(key)
            .filter(|s| s.tokens() == prefix && !prefix.is_empty());
        let (outcome, prefix_logits) = match cached {
            Some(snap) => {
                session.restore(&snap)?;
                (PrefixOutcome::Hit, snap.last_logits().map(<[f32]>::to_vec))
            }
            None => {
                session.reset();
                if prefix.is_empty() {
                    (PrefixOutcome::Miss, None)
                } else {
                    let shared = self.longest_shared(key, prefix);
                    let (outcome, logits) = match shared {
                        // The whole prefix is another catalog's whole prefix: its logits too.
                        Some((snap, n)) if n == prefix.len() && n == snap.tokens().len() => {
                            session.restore(&snap)?;
                            let logits = match snap.last_logits() {
                                Some(l) => l.to_vec(),
                                None => {
                                    session.truncate(n - 1);
                                    session.prefill(&prefix[n - 1..])?
                                }
                            };
                            (PrefixOutcome::Partial { reused: n }, logits)
                        }
                        // At least the last token is computed here, for its logits.
                        Some((snap, n)) if n.min(prefix.len() - 1) >= MIN_REUSE => {
                            let reused = n.min(prefix.len() - 1);
                            session.restore(&snap)?;
                            session.truncate(reused);
                            let logits = session.prefill(&prefix[reused..])?;
                            (PrefixOutcome::Partial { reused }, logits)
                        }
                        _ => (PrefixOutcome::Miss, session.prefill(prefix)?),
                    };
                    let snap = session.snapshot_with_logits(logits.clone())?;
                    self.insert(key.clone(), Arc::new(snap));
                    (outcome, Some(logits))
                }
            }
        };
        let logits = if rest.is_empty() {
            prefix_logits.ok_or_else(|| crate::LlamaError::State("empty prompt".into()))?
        } else {
            session.prefill(rest)?
        };
        Ok((logits, outcome))
    }
}
