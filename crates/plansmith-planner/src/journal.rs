//! The calibration journal: every calibration (and test) request a planner has judged,
//! appended and fsynced as it is judged, so that a `calibrate` stopped after forty minutes of
//! a pretrained planner's decodes goes on where it stopped instead of starting over.
//!
//! A journal holds one planner state: its first line is a fingerprint of everything that
//! decides a judgement (the decoding settings, the catalog, the model's weights), and a
//! journal with another fingerprint is started over. The floor and the confidence mode are
//! left out of it: they are what calibration chooses, and a judgement records the confidence
//! under every mode. Entries are keyed by stage, place in the split and a digest of the trace
//! (request, calls, catalog): a calibration file that changed reuses only the requests it
//! still holds in the same place.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, Write};
use std::path::{Path, PathBuf};

use plansmith_core::trace::Trace;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::backend::Persisted;
use crate::calibrate::Scored;
use crate::error::PlannerError;
use crate::eval::Judged;
use crate::planner::Planner;
use crate::settings::ConfidenceMode;

/// The journal's name inside the planner directory it calibrates. Saving the planner replaces
/// the directory, so a finished calibration leaves no journal behind.
pub const FILE: &str = "calibration-journal.jsonl";

const VERSION: u32 = 1;

/// What calibration keeps of one judged request: its confidence under each mode, and whether
/// the plan was valid and right.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub conf_all: f32,
    pub conf_chosen: f32,
    pub conf_weakest: f32,
    pub correct: bool,
    pub valid: bool,
}

impl Verdict {
    pub fn of(judged: &Judged) -> Verdict {
        let d = &judged.decoded;
        Verdict {
            conf_all: d.confidence(ConfidenceMode::AllTokens),
            conf_chosen: d.confidence(ConfidenceMode::ChosenTokens),
            conf_weakest: d.confidence(ConfidenceMode::WeakestToken),
            correct: judged.correct,
            valid: d.is_valid(),
        }
    }

    pub fn scored(&self, mode: ConfidenceMode) -> Scored {
        Scored {
            confidence: match mode {
                ConfidenceMode::AllTokens => self.conf_all,
                ConfidenceMode::ChosenTokens => self.conf_chosen,
                ConfidenceMode::WeakestToken => self.conf_weakest,
            },
            correct: self.correct,
            valid: self.valid,
        }
    }
}

/// A journal line. Confidences are stored as their bits: an invalid plan's confidence may be
/// infinite, which JSON cannot hold, and a floor fitted on resumed verdicts must be fitted on
/// exactly the numbers the decode gave.
#[derive(Serialize, Deserialize)]
struct Entry {
    stage: String,
    index: usize,
    item: String,
    conf_bits: [u32; 3],
    correct: bool,
    valid: bool,
}

#[derive(Serialize, Deserialize)]
struct Header {
    calibration_journal: u32,
    fingerprint: String,
}

/// An open journal: what it already holds, and the file new verdicts are appended to.
pub struct Journal {
    path: PathBuf,
    file: File,
    done: HashMap<(String, usize, String), Verdict>,
    /// Verdicts handed out by [`Journal::get`]: requests not decoded again.
    reused: std::cell::Cell<usize>,
}

fn journal_err(path: &Path, message: impl Into<String>) -> PlannerError {
    PlannerError::Dir {
        path: path.display().to_string(),
        message: message.into(),
    }
}

impl Journal {
    /// Open the journal at `path` for a planner with `fingerprint`: its verdicts are reused
    /// when the fingerprint matches; otherwise (or when there is none) it starts empty. A last
    /// line cut off by a crash is dropped.
    pub fn open(path: &Path, fingerprint: &str) -> Result<Journal, PlannerError> {
        let mut done = HashMap::new();
        let mut keep_bytes = 0u64;
        if let Ok(file) = File::open(path) {
            let mut reader = BufReader::new(file);
            // Only a line ended by its newline was acknowledged: a last line without one is
            // the torn tail of a crash, however it parses.
            let mut next_line = |buf: &mut Vec<u8>| {
                buf.clear();
                matches!(reader.read_until(b'\n', buf), Ok(n) if n > 0) && buf.ends_with(b"\n")
            };
            let mut line = Vec::new();
            let header = next_line(&mut line)
                .then(|| serde_json::from_slice::<Header>(&line).ok())
                .flatten();
            if header
                .is_some_and(|h| h.calibration_journal == VERSION && h.fingerprint == fingerprint)
            {
                keep_bytes = line.len() as u64;
                // A line that does not parse is damage: nothing after it is trusted.
                while next_line(&mut line) {
                    let Ok(e) = serde_json::from_slice::<Entry>(&line) else {
                        break;
                    };
                    keep_bytes += line.len() as u64;
                    let [all, chosen, weakest] = e.conf_bits.map(f32::from_bits);
                    done.insert(
                        (e.stage, e.index, e.item),
                        Verdict {
                            conf_all: all,
                            conf_chosen: chosen,
                            conf_weakest: weakest,
                            correct: e.correct,
                            valid: e.valid,
                        },
                    );
                }
            }
        }
        let io = |e: std::io::Error| journal_err(path, e.to_string());
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        if keep_bytes == 0 {
            // New, or another planner's: start over with this one's header.
            file.set_len(0).map_err(io)?;
            let header = Header {
                calibration_journal: VERSION,
                fingerprint: fingerprint.to_string(),
            };
            let mut line =
                serde_json::to_vec(&header).map_err(|e| journal_err(path, e.to_string()))?;
            line.push(b'\n');
            file.write_all(&line).map_err(io)?;
            file.sync_data().map_err(io)?;
        } else {
            // Drop a torn tail so that appends start on a line of their own.
            file.set_len(keep_bytes).map_err(io)?;
        }
        file.seek(std::io::SeekFrom::End(0)).map_err(io)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            done,
            reused: std::cell::Cell::new(0),
        })
    }

    /// How many verdicts the journal already holds.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The verdict on the `index`th trace of `stage`, if it was judged with digest `item`.
    pub fn get(&self, stage: &str, index: usize, item: &str) -> Option<Verdict> {
        let v = self
            .done
            .get(&(stage.to_string(), index, item.to_string()))
            .copied();
        self.reused.set(self.reused.get() + v.is_some() as usize);
        v
    }

    /// How many verdicts [`Journal::get`] has handed out (requests not decoded again).
    pub fn reused(&self) -> usize {
        self.reused.get()
    }

    /// Append a verdict; it is on disk when this returns.
    pub fn record(
        &mut self,
        stage: &str,
        index: usize,
        item: &str,
        v: Verdict,
    ) -> Result<(), PlannerError> {
        let entry = Entry {
            stage: stage.to_string(),
            index,
            item: item.to_string(),
            conf_bits: [v.conf_all, v.conf_chosen, v.conf_weakest].map(f32::to_bits),
            correct: v.correct,
            valid: v.valid,
        };
        let mut line =
            serde_json::to_vec(&entry).map_err(|e| journal_err(&self.path, e.to_string()))?;
        line.push(b'\n');
        let io = |e: std::io::Error| journal_err(&self.path, e.to_string());
        self.file.write_all(&line).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        self.done.insert((entry.stage, entry.index, entry.item), v);
        Ok(())
    }
}

/// A trace's key in the journal: what its judgement depends on (request, reference calls,
/// catalog), not where it came from.
pub fn trace_digest(trace: &Trace) -> String {
    let key =
        serde_json::json!({"request": trace.request, "calls": trace.calls, "tools": trace.tools});
    hex(&Sha256::digest(key.to_string().as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What decides how `planner` judges a request: its settings (floor and confidence mode
/// aside), its catalog and its model. A tiny model is hashed by its weights; a pretrained one
/// by its adapter's files and its base file's path, size and modification time (hashing a
/// gigabyte base at every start would cost seconds; a base replaced in place changes its
/// time, and the journal then starts over).
pub fn fingerprint(planner: &Planner) -> Result<String, PlannerError> {
    let mut h = Sha256::new();
    let mut settings = planner.settings.clone();
    settings.conf_floor = 0.0;
    settings.confidence = ConfidenceMode::default();
    let settings =
        serde_json::to_string(&settings).map_err(|e| PlannerError::Data(e.to_string()))?;
    h.update(settings.as_bytes());
    h.update(planner.catalog.hash().as_bytes());
    match planner.lm.persisted() {
        Persisted::Tiny { model, codec } => {
            h.update(b"tiny");
            h.update(
                serde_json::to_string(model.config())
                    .unwrap_or_default()
                    .as_bytes(),
            );
            h.update(serde_json::to_string(codec).unwrap_or_default().as_bytes());
            let tensors = model.named_tensors();
            let mut names: Vec<&String> = tensors.keys().collect();
            names.sort();
            for name in names {
                let values: Vec<f32> = tensors[name]
                    .flatten_all()
                    .and_then(|t| t.to_vec1())
                    .map_err(|e| PlannerError::Data(format!("weights {name}: {e}")))?;
                h.update(name.as_bytes());
                for v in values {
                    h.update(v.to_le_bytes());
                }
            }
        }
        Persisted::Pretrained { base, adapter } => {
            h.update(b"pretrained");
            let full = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
            h.update(full.to_string_lossy().as_bytes());
            if let Ok(meta) = std::fs::metadata(base) {
                h.update(meta.len().to_le_bytes());
                if let Ok(Ok(t)) = meta
                    .modified()
                    .map(|t| t.duration_since(std::time::UNIX_EPOCH))
                {
                    h.update(t.as_nanos().to_le_bytes());
                }
            }
            if let Some(dir) = adapter {
                let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                    .map_err(|e| journal_err(dir, e.to_string()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect();
                files.sort();
                for f in files {
                    let bytes = std::fs::read(&f).map_err(|e| journal_err(&f, e.to_string()))?;
                    h.update(
                        f.file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .as_bytes(),
                    );
                    h.update((bytes.len() as u64).to_le_bytes());
                    h.update(&bytes);
                }
            }
        }
        Persisted::Remote { describe } => {
            h.update(b"remote");
            h.update(describe.as_bytes());
        }
    }
    Ok(hex(&h.finalize()))
}
