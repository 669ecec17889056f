//! A run's journal: every scored item is appended (and synced) the moment it is scored, so a run
//! over thousands of items that is stopped — a closed laptop, a killed job, a full disk — resumes
//! where it stopped instead of starting again. Every BFCL category of a 0.5B model on two cores
//! is over an hour of decoding.
//!
//! The first line names the run (`{"journal": KEY}`); a journal of another run (another model,
//! mode or data) is refused rather than mixed in. A last line torn by a kill is cut off.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::EvalError;
use crate::report::ItemRecord;

/// An open journal, appending records.
pub struct Journal {
    file: File,
    path: PathBuf,
}

/// What an earlier run of the same key left: its records, by item id.
pub type Done = HashMap<String, ItemRecord>;

impl Journal {
    /// Opens (or starts) the journal at `path` for the run `key`, with the records an earlier
    /// run of that key scored.
    pub fn open(path: impl AsRef<Path>, key: &str) -> Result<(Journal, Done), EvalError> {
        let path = path.as_ref().to_path_buf();
        let io = |e| EvalError::io(&path, e);
        let mut done = Done::new();
        let text = match std::fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(e)),
        };
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        match text {
            None => {
                let header = serde_json::json!({ "journal": key }).to_string() + "\n";
                file.write_all(header.as_bytes())
                    .and_then(|_| file.sync_data())
                    .map_err(io)?;
            }
            Some(bytes) => {
                let good = read_records(&path, &bytes, key, &mut done)?;
                if good < bytes.len() {
                    // A kill mid-append left part of a line: cut it, so the next record starts
                    // a line of its own.
                    file.set_len(good as u64)
                        .and_then(|_| file.sync_data())
                        .map_err(io)?;
                }
            }
        }
        Ok((Journal { file, path }, done))
    }

    /// Appends one record; returns once it is on disk.
    pub fn append(&mut self, record: &ItemRecord) -> Result<(), EvalError> {
        let line = record.to_jsonl_line()? + "\n";
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.sync_data())
            .map_err(|e| EvalError::io(&self.path, e))
    }

    /// The run is complete and its results written: the journal goes.
    pub fn finish(self) -> Result<(), EvalError> {
        drop(self.file);
        std::fs::remove_file(&self.path).map_err(|e| EvalError::io(&self.path, e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads a journal's header and records into `done`; returns how many bytes hold whole lines
/// (less than the file where its last line was torn).
fn read_records(path: &Path, bytes: &[u8], key: &str, done: &mut Done) -> Result<usize, EvalError> {
    let malformed = |line: usize, message: String| EvalError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut good = 0;
    let mut rest = bytes;
    let mut number = 0;
    while !rest.is_empty() {
        number += 1;
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            // the last line, never finished: a kill mid-append
            break;
        };
        let line =
            std::str::from_utf8(&rest[..end]).map_err(|_| malformed(number, "not UTF-8".into()))?;
        if number == 1 {
            let header: Value = serde_json::from_str(line)
                .map_err(|e| malformed(1, format!("not a journal header: {e}")))?;
            match header.get("journal").and_then(Value::as_str) {
                Some(k) if k == key => {}
                Some(other) => {
                    return Err(malformed(
                        1,
                        format!(
                            "this journal is another run's, not this one's: remove it to start \
                             again, or write to another --out\n  its run:  {other}\n  this run: \
                             {key}"
                        ),
                    ))
                }
                None => return Err(malformed(1, "not a journal header".into())),
            }
        } else {
            let record: ItemRecord = serde_json::from_str(line)
                .map_err(|e| malformed(number, format!("not an item record: {e}")))?;
            done.insert(record.id.clone(), record);
        }
        good += end + 1;
        rest = &rest[end + 1..];
    }
    Ok(good)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> ItemRecord {
        ItemRecord {
            id: id.into(),
            category: "simple_python".into(),
            input: vec![],
            output: "[]".into(),
            calls: Some(vec![]),
            valid: false,
            error_type: None,
            reason: "no call".into(),
            latency_ms: 1.0,
            accepted: None,
            confidence: None,
        }
    }

    #[test]
    fn a_journal_resumes_its_own_run_cuts_a_torn_line_and_refuses_another_run() {
        let dir = std::env::temp_dir().join(format!("plansmith-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("items.partial.jsonl");
        let _ = std::fs::remove_file(&path);
        let (mut j, done) = Journal::open(&path, "run A").unwrap();
        assert!(done.is_empty());
        j.append(&record("a_0")).unwrap();
        j.append(&record("a_1")).unwrap();
        drop(j);
        // a kill in the middle of the third append
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"id":"a_2","categ"#).unwrap();
        drop(f);
        let (mut j, done) = Journal::open(&path, "run A").unwrap();
        let mut ids: Vec<_> = done.keys().cloned().collect();
        ids.sort();
        assert_eq!(ids, ["a_0", "a_1"]);
        j.append(&record("a_2")).unwrap();
        drop(j);
        let (_, done) = Journal::open(&path, "run A").unwrap();
        assert_eq!(done.len(), 3);
        let e = Journal::open(&path, "run B")
            .err()
            .expect("another run's journal");
        assert!(e.to_string().contains("its run:  run A"), "{e}");
        let (j, _) = Journal::open(&path, "run A").unwrap();
        j.finish().unwrap();
        assert!(!path.exists());
        // a damaged line that is not the last is an error naming it
        std::fs::write(&path, "{\"journal\":\"run A\"}\nnot json\n{}\n").unwrap();
        let e = Journal::open(&path, "run A").err().expect("damaged");
        assert!(e.to_string().contains(":2:"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
